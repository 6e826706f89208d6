//! Sans-IO engines of the unreliable IB transports beside [`super::rc`]: UC ([`UcQp`]) and UD ([`UdQp`]).
//!
//! Same shape as the RC [`Qp`](super::rc::Qp): the caller feeds packets (BTH to pad) and work
//! requests with an explicit `now`, pulls packets to send into its own buffers and pulls completions;
//! nothing here reads a clock or a socket, or allocates per packet. What they leave out is the whole
//! reliability machinery: no ACK, no NAK, no retransmission, no timer. A send completes once its last
//! packet is handed out; a lost packet loses its message, which the responder counts
//! ([`UnreliableCounters`]) and the test reports as a missing message.
//!
//! The memory, queue and segmentation helpers are the RC engine's ([`super::rc::mr`], [`super::rc::ring`],
//! [`super::rc::packet`]): only the state machines differ.

/// The accessors UC and UD queue pairs share, over their [`Queues`] in field `q` (written inside
/// each `impl`).
macro_rules! queue_accessors {
    () => {
        /// The attributes it was created with.
        pub fn config(&self) -> &QpConfig {
            &self.q.cfg
        }

        /// Its counters.
        pub fn counters(&self) -> &UnreliableCounters {
            &self.q.counters
        }

        /// Packets received and sent.
        pub fn packets(&self) -> (u64, u64) {
            (self.q.rx_packets, self.q.tx_packets)
        }

        /// Its registered memory.
        pub fn memory(&self) -> &MemoryTable {
            &self.q.mem
        }

        /// Its registered memory, to fill buffers before sending.
        pub fn memory_mut(&mut self) -> &mut MemoryTable {
            &mut self.q.mem
        }

        /// Size of the buffer `poll_transmit` needs.
        pub fn max_packet_len(&self) -> usize {
            MAX_HEADER_LEN + self.q.cfg.pmtu as usize + 3
        }
    };
}

pub(crate) mod uc;
pub(crate) mod ud;

#[cfg(test)]
mod tests;

pub use uc::UcQp;
pub use ud::{Grh, UdQp};

use super::rc::QpConfig;
use super::rc::counters::counters;
use super::rc::mr::{MemoryTable, Span};
use super::rc::packet::{self, Seg};
use super::rc::psn::Psn;
use super::rc::ring::Ring;
use crate::transport::{
    Access, Completion, CompletionOp, CompletionStatus, Error, RecvRequest, Result, SendOp,
    SendRequest,
};
use crate::wire::{BthRepr, IbRepr, Opcode};

counters! {
    /// What an unreliable queue pair counts: the messages that made it and the ways the others did not.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
    pub struct UnreliableCounters {
        /// Messages whose last packet was sent.
        pub(crate) messages_sent: u64,
        /// Messages delivered whole: a SEND into a receive, a WRITE into memory.
        pub messages_received: u64,
        /// Messages cut short by a lost packet (UC: the rest of the message was dropped).
        pub messages_dropped: u64,
        /// Jumps in the peer's PSNs: each is at least one packet that never arrived.
        pub psn_gaps: u64,
        /// Packets missing in those jumps.
        pub(crate) packets_missing: u64,
        /// Packets dropped because they belonged to a message already broken (UC), or came out of order.
        pub(crate) packets_discarded: u64,
        /// SENDs dropped because no receive was posted (no RNR NAK on UC and UD: the message is lost).
        pub(crate) no_receive: u64,
        /// Datagrams with another Q_Key than this QP's (UD).
        pub(crate) qkey_mismatch: u64,
        /// Messages longer than their receive, or with packet lengths the MTU forbids.
        pub(crate) bad_length: u64,
        /// WRITEs refused for a bad rkey, bounds or rights (UC drops them silently).
        pub(crate) access_violations: u64,
    }
}

impl UnreliableCounters {
    /// True when nothing was counted (an RC run: the JSON leaves the block out).
    pub fn is_empty(&self) -> bool {
        *self == UnreliableCounters::default()
    }

    /// Packets and datagrams this side received and could not use.
    pub fn dropped(&self) -> u64 {
        self.packets_discarded + self.no_receive + self.qkey_mismatch + self.bad_length
    }

    /// Counts a jump from the expected PSN to `psn`, if there is one ahead.
    fn gap(&mut self, expected: Psn, psn: Psn) {
        let d = psn.diff(expected);
        if d > 0 {
            self.psn_gaps += 1;
            self.packets_missing += d as u64;
        }
    }
}

/// One posted send and how far its transmission got.
#[derive(Clone, Copy, Debug)]
struct SendWqe {
    wr: SendRequest,
    local: Span,
    npkts: u32,
    sent: u32,
}

/// A posted receive.
#[derive(Clone, Copy, Debug)]
struct RecvWqe {
    wr_id: u64,
    span: Span,
}

/// What both unreliable engines keep: attributes, memory, the two work queues, completions, PSN.
struct Queues {
    cfg: QpConfig,
    mem: MemoryTable,
    sq: Ring<SendWqe>,
    rq: Ring<RecvWqe>,
    cq: Ring<Completion>,
    /// PSN of the next packet to send.
    psn: Psn,
    counters: UnreliableCounters,
    rx_packets: u64,
    tx_packets: u64,
}

impl Queues {
    fn new(cfg: QpConfig, mem: MemoryTable) -> std::result::Result<Queues, super::rc::ConfigError> {
        cfg.validate()?;
        if mem.region(cfg.local_lkey).is_none() {
            return Err(super::rc::ConfigError::LocalKey(cfg.local_lkey));
        }
        Ok(Queues {
            sq: Ring::with_capacity(cfg.sq_depth),
            rq: Ring::with_capacity(cfg.rq_depth),
            cq: Ring::with_capacity(cfg.sq_depth + cfg.rq_depth),
            psn: Psn::new(cfg.send_psn),
            counters: UnreliableCounters::default(),
            rx_packets: 0,
            tx_packets: 0,
            mem,
            cfg,
        })
    }

    /// Every queued work request must find room for its completion, even if nobody polls.
    fn reserve(&self) -> bool {
        self.cq.len() + self.sq.len() + self.rq.len() < self.cq.capacity()
    }

    /// Checks and queues a send of at most `max_len` bytes; `what` names the transport in errors.
    fn post_send(&mut self, wr: &SendRequest, what: &str, max_len: u64) -> Result<()> {
        if self.sq.is_full() || !self.reserve() {
            return Err(Error::QueueFull);
        }
        if u64::from(wr.len) > max_len {
            return Err(Error::InvalidRequest(format!(
                "work request {} of {} bytes is longer than a {what} message may be ({max_len} bytes); use a smaller -s",
                wr.wr_id, wr.len
            )));
        }
        if packet::packets_for(wr.len.into(), self.cfg.pmtu) > super::rc::qp::MAX_MESSAGE_PACKETS {
            return Err(Error::InvalidRequest(format!(
                "work request {} of {} bytes needs too many packets at path MTU {}; use a larger MTU (-m) or a smaller size (-s)",
                wr.wr_id, wr.len, self.cfg.pmtu
            )));
        }
        let local = self.mem.send_buffer(self.cfg.local_lkey, wr, Access(0))?;
        let npkts = packet::packets_for(wr.len.into(), self.cfg.pmtu);
        let pushed = self.sq.push_back(SendWqe {
            wr: *wr,
            local,
            npkts,
            sent: 0,
        });
        debug_assert!(pushed.is_ok(), "room was checked");
        Ok(())
    }

    fn post_recv(&mut self, wr: &RecvRequest) -> Result<()> {
        if self.rq.is_full() || !self.reserve() {
            return Err(Error::QueueFull);
        }
        let span = self.mem.recv_buffer(self.cfg.local_lkey, wr)?;
        let pushed = self.rq.push_back(RecvWqe {
            wr_id: wr.wr_id,
            span,
        });
        debug_assert!(pushed.is_ok(), "room was checked");
        Ok(())
    }

    /// The next packet of the oldest send: its segment, payload range and the WQE (advanced).
    /// Completes the WQE (signaled or not) once its last packet is out.
    fn next_segment(&mut self) -> Option<(SendWqe, Seg, Span)> {
        let pmtu = self.cfg.pmtu;
        let w = self.sq.front_mut()?;
        let index = w.sent;
        let seg = Seg::of(index, w.npkts);
        let len = packet::payload_len(u64::from(w.wr.len), pmtu, index);
        let span = Span {
            buffer: w.local.buffer,
            offset: w.local.offset + index as usize * pmtu as usize,
            len,
        };
        w.sent += 1;
        let wqe = *w;
        if seg.ends() {
            self.sq.pop_front();
            self.counters.messages_sent += 1;
            if wqe.wr.signaled {
                let op = match wqe.wr.op {
                    SendOp::Write | SendOp::WriteWithImm(_) => CompletionOp::Write,
                    _ => CompletionOp::Send,
                };
                self.complete(
                    wqe.wr.wr_id,
                    CompletionStatus::Success,
                    op,
                    wqe.wr.len,
                    None,
                );
            }
        }
        Some((wqe, seg, span))
    }

    /// Writes `repr`, the payload at `span` and the pad into `buf`; returns the packet length.
    fn emit(&mut self, buf: &mut [u8], repr: &IbRepr, span: Span) -> usize {
        let n = packet::emit(buf, repr, self.mem.span(span));
        self.tx_packets += 1;
        n
    }

    /// A BTH as UC and UD send it: P_Key 0xFFFF, no AckReq (nothing is acknowledged), this PSN.
    fn bth(&mut self, opcode: Opcode, dest_qp: u32, payload_len: usize) -> IbRepr {
        let psn = self.psn;
        self.psn = psn.add(1);
        IbRepr::new(BthRepr {
            pad_count: crate::wire::pad_len(payload_len) as u8,
            pkey: packet::PKEY,
            ..BthRepr::new(opcode, dest_qp, psn.value())
        })
    }

    fn complete(
        &mut self,
        wr_id: u64,
        status: CompletionStatus,
        op: CompletionOp,
        byte_len: u32,
        imm: Option<u32>,
    ) {
        let pushed = self.cq.push_back(Completion {
            wr_id,
            qp: self.cfg.cq_tag,
            status,
            op,
            byte_len,
            imm,
        });
        debug_assert!(pushed.is_ok(), "posting reserves room for every completion");
    }

    /// Checks what every received packet must pass: TVer 0, a full P_Key, our QPN.
    fn accepts(&mut self, bth: &BthRepr) -> bool {
        self.rx_packets += 1;
        bth.tver == 0 && bth.pkey & 0x7fff == 0x7fff && bth.dest_qp == self.cfg.qpn
    }
}

/// Longest header stack the unreliable engines emit: BTH + RETH + ImmDt (UC WRITE ONLY with
/// immediate, 32 bytes); UD's BTH + DETH + ImmDt is 24.
pub(crate) const MAX_HEADER_LEN: usize = 32;
