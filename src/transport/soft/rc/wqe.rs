//! A posted send work request: the PSNs it occupies, its progress, and the request packets it
//! becomes. The requester (`requester.rs`) and selective repeat's bookkeeping (`sack.rs`) both read
//! the send queue; what they share about it lives here, below both.

use crate::transport::{Access, CompletionOp, RemoteAddr, SendOp, SendRequest};
use crate::wire::{AtomicEthRepr, Opcode, RethRepr};

use super::ctx::Ctx;
use super::mr::Span;
use super::packet::{self, Seg, SrExt};
use super::psn::Psn;
use super::ring::Ring;

/// One posted send work request and its transmission progress.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wqe {
    /// The request as posted.
    pub(super) wr: SendRequest,
    /// Local bytes: the source of SEND/WRITE, the destination of READ and atomics.
    pub(super) local: Span,
    /// PSN of its first packet.
    pub(super) first_psn: Psn,
    /// PSNs it occupies (a READ occupies one per response packet).
    pub(super) npkts: u32,
    /// READ response packets received so far.
    pub(super) received: u32,
    /// Transmitted at least once (counts against `max_rd_atomic` for READ/atomics).
    pub(super) started: bool,
    /// Selective repeat: the receive this message consumes at the peer, counted from 0 over the
    /// messages that consume one (SEND, WRITE with immediate), so an early packet finds its buffer.
    pub(super) recv_seq: u32,
    /// Selective repeat: the responder is known to have this READ or atomic request.
    pub(super) req_acked: bool,
}

/// What [`Wqe::emit`] wrote.
#[derive(Clone, Copy, Debug)]
pub(super) struct Emitted {
    /// Packet length.
    pub(super) len: usize,
    /// PSNs it occupies (a READ: one per response packet it asks for... to the end).
    pub(super) consumed: u32,
    /// Payload bytes (data only).
    pub(super) payload: usize,
    /// It carries AckReq: its answer comes at once, not with a later packet's.
    pub(super) asked: bool,
}

impl Wqe {
    /// READ and atomics are answered with data; they wait for responses, not ACKs.
    pub(super) fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.wr.op,
            SendOp::Read | SendOp::FetchAdd(_) | SendOp::CompareSwap { .. }
        )
    }

    /// PSN of its last packet.
    pub(super) fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts - 1)
    }

    /// Writes packet `k` at `psn` into `buf`. A READ asks for its packets from `k` on (only
    /// `read_pkts` of them when given); `force_ack` sets AckReq (retransmissions ask for an answer,
    /// and so does a packet after `ack_req_every` that did not); `sr` adds selective repeat's
    /// extension.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit(
        &self,
        k: u32,
        psn: Psn,
        read_pkts: Option<u32>,
        force_ack: bool,
        sr: bool,
        buf: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> Emitted {
        let pmtu = ctx.cfg.pmtu;
        let dest = ctx.cfg.remote_qpn;
        let remote = self.wr.remote.unwrap_or(RemoteAddr { addr: 0, rkey: 0 });
        let (len, consumed, payload, asked) = match self.wr.op {
            SendOp::Read => {
                // A (re)issued READ asks for everything from packet k on, in one request.
                let skip = u64::from(k) * u64::from(pmtu);
                let rest = u64::from(self.wr.len) - skip.min(u64::from(self.wr.len));
                let bytes = match read_pkts {
                    Some(n) => rest.min(u64::from(n) * u64::from(pmtu)),
                    None => rest,
                };
                let mut r = packet::repr(Opcode::RC_RDMA_READ_REQUEST, dest, psn, true, 0);
                r.reth = Some(RethRepr {
                    va: remote.addr.wrapping_add(skip),
                    rkey: remote.rkey,
                    dma_len: bytes as u32,
                });
                (packet::emit(buf, &r, &[]), self.npkts - k, 0, true)
            }
            SendOp::FetchAdd(add) => {
                let mut r = packet::repr(Opcode::RC_FETCH_ADD, dest, psn, true, 0);
                r.atomic_eth = Some(AtomicEthRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    swap_add: add,
                    compare: 0,
                });
                (packet::emit(buf, &r, &[]), 1, 0, true)
            }
            SendOp::CompareSwap { compare, swap } => {
                let mut r = packet::repr(Opcode::RC_COMPARE_SWAP, dest, psn, true, 0);
                r.atomic_eth = Some(AtomicEthRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    swap_add: swap,
                    compare,
                });
                (packet::emit(buf, &r, &[]), 1, 0, true)
            }
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write | SendOp::WriteWithImm(_) => {
                let seg = Seg::of(k, self.npkts);
                let n = packet::payload_len(u64::from(self.wr.len), pmtu, k);
                let start = k as usize * pmtu as usize;
                let ack_req = force_ack || (seg.ends() && self.wr.signaled);
                let is_write = matches!(self.wr.op, SendOp::Write | SendOp::WriteWithImm(_));
                let (opcode, imm) = match self.wr.op {
                    SendOp::Send => (packet::send_opcode(seg, false), None),
                    SendOp::SendWithImm(i) => (packet::send_opcode(seg, true), Some(i)),
                    SendOp::Write => (packet::write_opcode(seg, false), None),
                    SendOp::WriteWithImm(i) => (packet::write_opcode(seg, true), Some(i)),
                    _ => unreachable!("matched above"),
                };
                // Selective repeat places every packet on arrival: SENDs say which receive and
                // where in it, WRITE MIDDLE/LAST carry their own RETH (docs/lossy-roce.md).
                let ext = match (sr, is_write, seg.starts()) {
                    (true, false, _) => Some(SrExt::Send {
                        recv_seq: self.recv_seq,
                        offset: start as u32,
                    }),
                    (true, true, false) => Some(SrExt::Write(RethRepr {
                        va: remote.addr.wrapping_add(start as u64),
                        rkey: remote.rkey,
                        dma_len: self.wr.len,
                    })),
                    _ => None,
                };
                let imm = imm.filter(|_| seg.ends());
                let reth = (seg.starts() && is_write).then_some(RethRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    dma_len: self.wr.len,
                });
                let src = &ctx.mem.span(self.local)[start..start + n];
                let len = match ext {
                    None => packet::emit_data(buf, (opcode, dest, psn, ack_req), reth, imm, src),
                    Some(e) => {
                        let mut r = packet::repr(opcode, dest, psn, ack_req, e.len() + n);
                        r.imm = imm;
                        r.reth = reth;
                        packet::emit_with_ext(buf, &r, &e, src)
                    }
                };
                (len, 1, n, ack_req)
            }
        };
        Emitted {
            len,
            consumed,
            payload,
            asked,
        }
    }
}

/// Posted, not yet completed work requests, oldest first: their PSNs ascend.
pub(super) type SendQueue = Ring<Wqe>;

impl SendQueue {
    /// The index of the started work request holding `p`.
    pub(super) fn index_of(&self, p: Psn) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let w = self.get(mid)?;
            if p.before(w.first_psn) {
                hi = mid;
            } else if p.in_window(w.first_psn, w.npkts) {
                return w.started.then_some(mid);
            } else {
                lo = mid + 1;
            }
        }
        None
    }

    /// The started work request holding `p`, a copy.
    pub(super) fn started_at(&self, p: Psn) -> Option<Wqe> {
        self.index_of(p).and_then(|i| self.get(i).copied())
    }
}

/// The completion opcode a send work request reports.
pub(super) fn completion_op(op: SendOp) -> CompletionOp {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) => CompletionOp::Send,
        SendOp::Write | SendOp::WriteWithImm(_) => CompletionOp::Write,
        SendOp::Read => CompletionOp::Read,
        SendOp::FetchAdd(_) => CompletionOp::FetchAdd,
        SendOp::CompareSwap { .. } => CompletionOp::CompareSwap,
    }
}

/// Local rights a work request needs on its own buffer.
pub(super) fn local_access(op: SendOp) -> Access {
    match op {
        SendOp::Read | SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => Access::LOCAL_WRITE,
        _ => Access(0),
    }
}
