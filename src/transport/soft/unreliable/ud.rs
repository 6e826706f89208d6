//! [`UdQp`]: one Unreliable Datagram queue pair. Every message is one SEND ONLY packet of at most the
//! path MTU, with a DETH carrying the destination's Q_Key and our QPN.
//!
//! The receive side delivers what verbs delivers: the 40-byte [`Grh`] (on RoCE v2 over IPv4, 20 zero
//! bytes and the IPv4 header, as rxe writes it) followed by the payload, so a receive needs 40 bytes
//! more than the message and its completion counts them. A datagram whose Q_Key is not ours, that
//! finds no receive posted, or that does not fit its receive is dropped and counted; PSN jumps (the
//! sender numbers its datagrams) count the datagrams lost on the way.

use super::{MAX_HEADER_LEN, Queues, UnreliableCounters};
use crate::params::UD_GRH_LEN;
use crate::transport::soft::bytes::copy_payload;
use crate::transport::soft::rc::mr::MemoryTable;
use crate::transport::soft::rc::psn::Psn;
use crate::transport::soft::rc::ring::Ring;
use crate::transport::soft::rc::{ConfigError, Now, QpConfig};
use crate::transport::{
    Completion, CompletionOp, CompletionStatus, Error, RecvRequest, Result, SendOp, SendRequest,
};
use crate::wire::{DethRepr, IbRepr, Opcode};

/// The network header verbs puts in front of a UD message in its receive buffer (40 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Grh(pub [u8; UD_GRH_LEN as usize]);

/// One Unreliable Datagram queue pair. See the module documentation.
pub struct UdQp {
    q: Queues,
    /// This QP's Q_Key: datagrams must carry it.
    qkey: u32,
    /// The destination's Q_Key, put in every DETH we send.
    remote_qkey: u32,
    /// The PSN the next datagram from the peer should carry (for counting the lost ones), once seen.
    expected: Option<Psn>,
}

impl UdQp {
    /// A UD queue pair in RTS sending to `cfg.remote_qpn` with `remote_qkey`, accepting `qkey`.
    /// Of `cfg` it uses the QPNs, the send PSN, path MTU, queue depths, lkey and completion tag.
    /// Remote QPN 0: not known yet (a plain rdma_cm requester's, until [`UdQp::set_remote_qpn`]);
    /// it receives, and refuses to send.
    pub fn new(
        mut cfg: QpConfig,
        mem: MemoryTable,
        qkey: u32,
        remote_qkey: u32,
    ) -> std::result::Result<UdQp, ConfigError> {
        let unknown = cfg.remote_qpn == 0;
        if unknown {
            cfg.remote_qpn = 1; // only to pass the check; never sent to
        }
        let mut q = Queues::new(cfg, mem)?;
        if unknown {
            q.cfg.remote_qpn = 0;
        }
        Ok(UdQp {
            q,
            qkey,
            remote_qkey,
            expected: None,
        })
    }

    queue_accessors!();

    /// Sends to queue pair `qpn` from now on: a plain rdma_cm requester's QPN is learnt from its
    /// first datagram, after the SIDR_REP pointed this queue pair at it.
    pub fn set_remote_qpn(&mut self, qpn: u32) {
        self.q.cfg.remote_qpn = qpn;
    }

    /// Posts a SEND (with or without immediate) of at most one path MTU.
    pub fn post_send(&mut self, wr: &SendRequest) -> Result<()> {
        if !matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)) {
            return Err(Error::InvalidRequest(format!(
                "work request {} ({:?}): a UD queue pair carries only SENDs",
                wr.wr_id, wr.op
            )));
        }
        if self.q.cfg.remote_qpn == 0 {
            return Err(Error::InvalidRequest(format!(
                "work request {}: this UD queue pair does not know its peer's QPN yet (its SIDR_REQ carried none, and no datagram from it told it)",
                wr.wr_id
            )));
        }
        let mtu = u64::from(self.q.cfg.pmtu);
        self.q.post_send(wr, "UD", mtu)
    }

    /// Posts a receive; it must hold the 40-byte GRH and the message.
    pub fn post_recv(&mut self, wr: &RecvRequest) -> Result<()> {
        self.q.post_recv(wr)
    }

    /// Writes the next datagram into `buf` (at least `max_packet_len()` bytes); `None` when idle.
    pub fn poll_transmit(&mut self, _now: impl Now, buf: &mut [u8]) -> Option<usize> {
        let (w, _, span) = self.q.next_segment()?;
        let (opcode, imm) = match w.wr.op {
            SendOp::SendWithImm(i) => (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, Some(i)),
            _ => (Opcode::UD_SEND_ONLY, None),
        };
        let mut repr = self.q.bth(opcode, self.q.cfg.remote_qpn, span.len);
        repr.imm = imm;
        repr.deth = Some(DethRepr {
            qkey: self.remote_qkey,
            src_qp: self.q.cfg.qpn,
        });
        Some(self.q.emit(buf, &repr, span))
    }

    /// The next completion, oldest first.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.q.cq.pop_front()
    }

    /// Its completion queue, which the endpoint's poll looks at and drains in place.
    #[inline(always)]
    pub(crate) fn cq(&mut self) -> &mut Ring<Completion> {
        &mut self.q.cq
    }

    /// Feeds one received datagram (BTH to pad); `grh` gives its network header, asked for only
    /// when the datagram is delivered.
    pub fn handle_packet(&mut self, ib: &[u8], grh: impl FnOnce() -> Grh) {
        let Ok((repr, payload)) = IbRepr::parse(ib) else {
            self.q.rx_packets += 1;
            self.q.counters.bad_length += 1;
            return;
        };
        if !self.q.accepts(&repr.bth)
            || !matches!(
                repr.bth.opcode,
                Opcode::UD_SEND_ONLY | Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
            )
        {
            self.q.counters.packets_discarded += 1;
            return;
        }
        let deth = repr.deth.unwrap_or_default();
        if deth.qkey != self.qkey {
            self.q.counters.qkey_mismatch += 1;
            return;
        }
        let psn = Psn::new(repr.bth.psn);
        if let Some(e) = self.expected {
            self.q.counters.gap(e, psn);
        }
        self.expected = Some(psn.add(1));
        if payload.len() > self.q.cfg.pmtu as usize {
            self.q.counters.bad_length += 1;
            return;
        }
        let Some(recv) = self.q.rq.pop_front() else {
            self.q.counters.no_receive += 1;
            return;
        };
        let head = UD_GRH_LEN as usize;
        let total = head + payload.len();
        if total > recv.span.len {
            self.q.counters.bad_length += 1;
            self.q.complete(
                recv.wr_id,
                CompletionStatus::LocalLengthError,
                CompletionOp::Recv,
                0,
                None,
            );
            return;
        }
        let dst = &mut self.q.mem.span_mut(recv.span)[..total];
        dst[..head].copy_from_slice(&grh().0);
        copy_payload(&mut dst[head..], payload);
        self.q.counters.messages_received += 1;
        self.q.complete(
            recv.wr_id,
            CompletionStatus::Success,
            CompletionOp::Recv,
            total as u32,
            repr.imm,
        );
    }
}
