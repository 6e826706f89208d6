//! [`UcQp`]: one Unreliable Connection queue pair. SEND and RDMA WRITE (with or without immediate),
//! segmented by the path MTU like RC, but nothing is acknowledged or resent.
//!
//! The responder checks PSNs the way the IB spec (and rxe's `check_psn`) has a UC responder do it:
//! a packet at another PSN than the expected one, unless it starts a message (FIRST or ONLY), drops
//! the rest of the message in progress; the next FIRST or ONLY resynchronises the expected PSN and
//! starts a new message. A message cut short never completes (its receive stays posted and takes the
//! next SEND); a message without a posted receive, longer than its receive, or whose WRITE the
//! memory rules refuse is dropped whole. Each case is counted in [`UnreliableCounters`].

use super::{MAX_HEADER_LEN, Queues, RecvWqe, UnreliableCounters};
use crate::transport::soft::bytes::copy_payload;
use crate::transport::soft::rc::mr::{MemoryTable, Span};
use crate::transport::soft::rc::packet::{self, Seg};
use crate::transport::soft::rc::psn::Psn;
use crate::transport::soft::rc::ring::Ring;
use crate::transport::soft::rc::{ConfigError, Now, QpConfig};
use crate::transport::{
    Access, Completion, CompletionOp, CompletionStatus, Error, RecvRequest, Result, SendOp,
    SendRequest,
};
use crate::wire::{IbRepr, Opcode, RethRepr};

/// The largest UC message: RDMA's 2 GiB (the RETH length field's limit, as RC).
const MAX_UC_MESSAGE: u64 = 1 << 31;

/// A received UC opcode: SEND or WRITE, and the packet's place in its message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum UcRequest {
    Send(Seg),
    Write(Seg),
}

impl UcRequest {
    fn classify(op: Opcode) -> Option<UcRequest> {
        use UcRequest::{Send, Write};
        Some(match op {
            Opcode::UC_SEND_FIRST => Send(Seg::First),
            Opcode::UC_SEND_MIDDLE => Send(Seg::Middle),
            Opcode::UC_SEND_LAST | Opcode::UC_SEND_LAST_WITH_IMMEDIATE => Send(Seg::Last),
            Opcode::UC_SEND_ONLY | Opcode::UC_SEND_ONLY_WITH_IMMEDIATE => Send(Seg::Only),
            Opcode::UC_RDMA_WRITE_FIRST => Write(Seg::First),
            Opcode::UC_RDMA_WRITE_MIDDLE => Write(Seg::Middle),
            Opcode::UC_RDMA_WRITE_LAST | Opcode::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE => {
                Write(Seg::Last)
            }
            Opcode::UC_RDMA_WRITE_ONLY | Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE => {
                Write(Seg::Only)
            }
            _ => return None,
        })
    }

    fn seg(self) -> Seg {
        match self {
            UcRequest::Send(s) | UcRequest::Write(s) => s,
        }
    }
}

/// RC's SEND or RDMA WRITE opcode `rc` as UC's: an opcode's top three bits name the transport (RC
/// 000, UC 001) and its low five the operation and the packet's place (IBA 9.2), so UC's SEND and
/// WRITE opcodes are RC's with bit 5 set.
#[inline]
fn uc_opcode(rc: Opcode) -> Opcode {
    debug_assert!(rc.0 < 0x20, "{rc:?} is not an RC opcode");
    Opcode(rc.0 | 0x20)
}

/// The message the responder is in the middle of.
#[derive(Clone, Copy, Debug)]
enum InMsg {
    /// Between messages: the next packet must be a FIRST or an ONLY.
    Idle,
    /// A SEND into the receive at the head of the queue, `written` bytes so far.
    Send { recv: RecvWqe, written: usize },
    /// A WRITE into `span`, `written` bytes so far.
    Write { span: Span, written: usize },
    /// The rest of a broken message: dropped until the next FIRST or ONLY.
    Dropping,
}

/// One Unreliable Connection queue pair. See the module documentation.
pub struct UcQp {
    q: Queues,
    /// PSN the responder expects next.
    expected: Psn,
    msg: InMsg,
}

impl UcQp {
    /// A connected UC queue pair in RTS, owning `mem`; `cfg.local_lkey` must name a region of it.
    /// Of `cfg` it uses the QPNs, PSNs, path MTU, queue depths, lkey and completion tag.
    pub fn new(cfg: QpConfig, mem: MemoryTable) -> std::result::Result<UcQp, ConfigError> {
        let expected = Psn::new(cfg.recv_psn);
        Ok(UcQp {
            q: Queues::new(cfg, mem)?,
            expected,
            msg: InMsg::Idle,
        })
    }

    queue_accessors!();

    /// Posts a SEND or WRITE (with or without immediate); READ and atomics are refused.
    pub fn post_send(&mut self, wr: &SendRequest) -> Result<()> {
        match wr.op {
            SendOp::Send | SendOp::SendWithImm(_) => {}
            SendOp::Write | SendOp::WriteWithImm(_) if wr.remote.is_some() => {}
            SendOp::Write | SendOp::WriteWithImm(_) => {
                return Err(Error::InvalidRequest(format!(
                    "work request {} (RDMA WRITE) needs a remote address and rkey",
                    wr.wr_id
                )));
            }
            op => {
                return Err(Error::InvalidRequest(format!(
                    "work request {} ({op:?}): a UC queue pair carries only SEND and RDMA WRITE; READ and atomics need -c RC",
                    wr.wr_id
                )));
            }
        }
        self.q.post_send(wr, "UC", MAX_UC_MESSAGE)
    }

    /// Posts a receive for the next incoming SEND or WRITE with immediate.
    pub fn post_recv(&mut self, wr: &RecvRequest) -> Result<()> {
        self.q.post_recv(wr)
    }

    /// Writes the next packet into `buf` (at least `max_packet_len()` bytes); `None` when idle.
    pub fn poll_transmit(&mut self, _now: impl Now, buf: &mut [u8]) -> Option<usize> {
        let (w, seg, span) = self.q.next_segment()?;
        let imm = match w.wr.op {
            SendOp::SendWithImm(i) | SendOp::WriteWithImm(i) if seg.ends() => Some(i),
            _ => None,
        };
        let opcode = uc_opcode(match w.wr.op {
            SendOp::Write | SendOp::WriteWithImm(_) => packet::write_opcode(seg, imm.is_some()),
            _ => packet::send_opcode(seg, imm.is_some()),
        });
        let mut repr = self.q.bth(opcode, self.q.cfg.remote_qpn, span.len);
        repr.imm = imm;
        if opcode.has_reth() {
            let r =
                w.wr.remote
                    .expect("WRITEs are checked for a remote address");
            repr.reth = Some(RethRepr {
                va: r.addr,
                rkey: r.rkey,
                dma_len: w.wr.len,
            });
        }
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

    /// Feeds one received packet: the bytes from the BTH to the end of the pad (no ICRC).
    pub fn handle_packet(&mut self, ib: &[u8]) {
        let Ok((repr, payload)) = IbRepr::parse(ib) else {
            self.q.rx_packets += 1;
            self.q.counters.bad_length += 1;
            return;
        };
        if !self.q.accepts(&repr.bth) {
            self.q.counters.packets_discarded += 1;
            return;
        }
        let Some(req) = UcRequest::classify(repr.bth.opcode) else {
            self.q.counters.packets_discarded += 1;
            return;
        };
        let psn = Psn::new(repr.bth.psn);
        let seg = req.seg();
        let in_sequence = psn == self.expected;
        if !in_sequence {
            self.q.counters.gap(self.expected, psn);
        }
        // Resynchronise on every packet, so that one loss is one gap however long the message.
        self.expected = psn.add(1);
        if seg.starts() {
            // A FIRST or ONLY: a message in progress never gets its LAST.
            self.abandon();
        }
        match (req, self.msg) {
            (UcRequest::Send(_), InMsg::Send { .. })
            | (UcRequest::Write(_), InMsg::Write { .. })
                if in_sequence =>
            {
                self.execute(req, &repr, payload)
            }
            (_, InMsg::Idle) if seg.starts() => self.execute(req, &repr, payload),
            _ => {
                // After a gap, or a MIDDLE/LAST of a message whose start never came: the rest of the
                // message is dropped up to the next FIRST or ONLY.
                if !matches!(self.msg, InMsg::Dropping) {
                    self.q.counters.messages_dropped += 1;
                }
                self.msg = InMsg::Dropping;
                self.q.counters.packets_discarded += 1;
            }
        }
    }

    /// Counts the message in progress as dropped and forgets it (its receive stays posted).
    fn abandon(&mut self) {
        if matches!(self.msg, InMsg::Send { .. } | InMsg::Write { .. }) {
            self.q.counters.messages_dropped += 1;
        }
        self.msg = InMsg::Idle;
    }

    /// Drops the message this packet belongs to, counting why.
    fn drop_message(&mut self, why: fn(&mut UnreliableCounters)) {
        why(&mut self.q.counters);
        self.msg = InMsg::Dropping;
    }

    /// Runs one in-sequence packet of a message this side is receiving.
    fn execute(&mut self, req: UcRequest, repr: &IbRepr, payload: &[u8]) {
        let pmtu = self.q.cfg.pmtu as usize;
        let seg = req.seg();
        let length_ok = match seg {
            Seg::First | Seg::Middle => payload.len() == pmtu,
            Seg::Last => (1..=pmtu).contains(&payload.len()),
            Seg::Only => payload.len() <= pmtu,
        };
        if !length_ok {
            return self.drop_message(|c| c.bad_length += 1);
        }
        if seg.starts() {
            self.msg = match req {
                UcRequest::Send(_) => match self.q.rq.front() {
                    Some(&recv) => InMsg::Send { recv, written: 0 },
                    None => return self.drop_message(|c| c.no_receive += 1),
                },
                UcRequest::Write(_) => {
                    let reth = repr.reth.unwrap_or_default();
                    let span = if reth.dma_len == 0 {
                        Ok(Span {
                            buffer: 0,
                            offset: 0,
                            len: 0,
                        })
                    } else {
                        self.q.mem.resolve_remote(
                            reth.rkey,
                            reth.va,
                            u64::from(reth.dma_len),
                            Access::REMOTE_WRITE,
                        )
                    };
                    match span {
                        Ok(span) => InMsg::Write { span, written: 0 },
                        Err(_) => return self.drop_message(|c| c.access_violations += 1),
                    }
                }
            };
        }
        match self.msg {
            InMsg::Send { recv, written } => {
                if written + payload.len() > recv.span.len {
                    // Longer than its receive: verbs completes the receive with a length error.
                    self.q.rq.pop_front();
                    self.q.complete(
                        recv.wr_id,
                        CompletionStatus::LocalLengthError,
                        CompletionOp::Recv,
                        0,
                        None,
                    );
                    return self.drop_message(|c| c.bad_length += 1);
                }
                copy_payload(
                    &mut self.q.mem.span_mut(recv.span)[written..written + payload.len()],
                    payload,
                );
                let written = written + payload.len();
                self.msg = InMsg::Send { recv, written };
                if seg.ends() {
                    self.q.rq.pop_front();
                    self.q.counters.messages_received += 1;
                    self.q.complete(
                        recv.wr_id,
                        CompletionStatus::Success,
                        CompletionOp::Recv,
                        written as u32,
                        repr.imm,
                    );
                    self.msg = InMsg::Idle;
                }
            }
            InMsg::Write { span, written } => {
                let end = written + payload.len();
                let last_fits = !seg.ends() || end == span.len;
                if end > span.len || !last_fits {
                    return self.drop_message(|c| c.bad_length += 1);
                }
                copy_payload(&mut self.q.mem.span_mut(span)[written..end], payload);
                self.msg = InMsg::Write { span, written: end };
                if seg.ends() {
                    self.msg = InMsg::Idle;
                    if let Some(imm) = repr.imm {
                        // A WRITE with immediate consumes a receive; without one it is dropped.
                        let Some(recv) = self.q.rq.pop_front() else {
                            self.q.counters.no_receive += 1;
                            return;
                        };
                        self.q.complete(
                            recv.wr_id,
                            CompletionStatus::Success,
                            CompletionOp::RecvWithImm,
                            span.len as u32,
                            Some(imm),
                        );
                    }
                    self.q.counters.messages_received += 1;
                }
            }
            InMsg::Idle | InMsg::Dropping => {
                self.q.counters.packets_discarded += 1;
            }
        }
    }
}
