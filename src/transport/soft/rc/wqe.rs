//! A posted send work request: the PSNs it occupies, its progress, and the request packets it
//! becomes. The requester (`requester.rs`) and selective repeat's bookkeeping (`sack.rs`) both read
//! the send queue; what they share about it lives here, below both.

use crate::transport::{
    Completion, CompletionOp, CompletionStatus, RemoteAddr, SendOp, SendRequest,
};
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

    /// Its completion with `status`, for the completion queue tagged `qp` (bytes only on success).
    #[inline]
    pub(super) fn completion(&self, status: CompletionStatus, qp: u32) -> Completion {
        Completion {
            wr_id: self.wr.wr_id,
            qp,
            status,
            op: completion_op(self.wr.op),
            byte_len: if status == CompletionStatus::Success {
                self.wr.len
            } else {
                0
            },
            imm: None,
        }
    }

    /// Writes packet `k` at `psn` into `buf`. A READ asks for its packets from `k` on (only
    /// `read_pkts` of them when given); `force_ack` sets AckReq (retransmissions ask for an answer,
    /// and so does a packet after `ack_req_every` that did not); `sr` adds selective repeat's
    /// extension.
    ///
    /// Inlined, so that the commonest case, a SEND or WRITE of one packet without selective
    /// repeat's extension (every message of a latency test), goes from its caller straight to
    /// [`emit_only`](Self::emit_only) without a call and the dispatch over every operation.
    #[allow(clippy::too_many_arguments)]
    #[inline]
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
        if self.npkts == 1 && !sr && !self.is_read_or_atomic() {
            return self.emit_only(psn, force_ack, buf, ctx);
        }
        self.emit_any(k, psn, read_pkts, force_ack, sr, buf, ctx)
    }

    /// [`emit`](Self::emit) of a middle packet of a SEND or WRITE without selective repeat's
    /// extension (most packets of a bandwidth stream): a BTH alone, AckReq only when forced, and
    /// a path MTU of payload, without [`emit_any`](Self::emit_any)'s dispatch over every
    /// operation and segment. Inlined into `emit_any`, its one caller: no second call a packet.
    #[inline(always)]
    fn emit_middle(
        &self,
        k: u32,
        psn: Psn,
        force_ack: bool,
        buf: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> Emitted {
        let pmtu = ctx.cfg.pmtu;
        let n = packet::payload_len(u64::from(self.wr.len), pmtu, k);
        let start = k as usize * pmtu as usize;
        let src = &ctx.mem.span(self.local)[start..start + n];
        let opcode = match self.wr.op {
            SendOp::Write | SendOp::WriteWithImm(_) => packet::write_opcode(Seg::Middle, false),
            _ => packet::send_opcode(Seg::Middle, false),
        };
        let bth = (opcode, ctx.cfg.remote_qpn, psn, force_ack);
        Emitted {
            len: packet::emit_bth_only(buf, bth, src),
            consumed: 1,
            payload: n,
            asked: force_ack,
        }
    }

    /// [`emit`](Self::emit) of every other packet: READs, atomics, a packet of a longer message,
    /// or one with selective repeat's extension.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn emit_any(
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
            SendOp::Read => (
                self.emit_read(k, psn, read_pkts, buf, ctx),
                self.npkts - k,
                0,
                true,
            ),
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
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write | SendOp::WriteWithImm(_)
                if self.npkts == 1 && !sr =>
            {
                return self.emit_only(psn, force_ack, buf, ctx);
            }
            // Asked here, past the dispatch: neither a READ's path nor a ping-pong's inlined
            // one pays for it.
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write | SendOp::WriteWithImm(_)
                if k > 0 && k + 1 < self.npkts && !sr =>
            {
                return self.emit_middle(k, psn, force_ack, buf, ctx);
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
                    None => packet::emit_data(buf, (opcode, dest, psn, ack_req), || reth, imm, src),
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

impl Wqe {
    /// [`emit`](Self::emit) of a READ: its request for everything from packet `k` on (only
    /// `read_pkts` packets when given), which occupies those PSNs and asks for an answer; returns
    /// the packet length. Always inlined: the requester's fast path sends a READ without a call.
    #[inline(always)]
    pub(super) fn emit_read(
        &self,
        k: u32,
        psn: Psn,
        read_pkts: Option<u32>,
        buf: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> usize {
        let pmtu = ctx.cfg.pmtu;
        let remote = self.wr.remote.unwrap_or(RemoteAddr { addr: 0, rkey: 0 });
        // A (re)issued READ asks for everything from packet k on, in one request.
        let skip = u64::from(k) * u64::from(pmtu);
        let rest = u64::from(self.wr.len) - skip.min(u64::from(self.wr.len));
        let bytes = match read_pkts {
            Some(n) => rest.min(u64::from(n) * u64::from(pmtu)),
            None => rest,
        };
        let reth = RethRepr {
            va: remote.addr.wrapping_add(skip),
            rkey: remote.rkey,
            dma_len: bytes as u32,
        };
        // Written straight from its fields, as a SEND or WRITE ONLY is: BTH and RETH are the bytes
        // its header stack writes, without the stack's per-header dispatch (every request of a
        // READ latency test comes here).
        let bth = (Opcode::RC_RDMA_READ_REQUEST, ctx.cfg.remote_qpn, psn, true);
        packet::emit_data(buf, bth, || Some(reth), None, &[])
    }

    /// [`emit_read`](Self::emit_read) of everything from packet `k` on, as [`Emitted`].
    #[inline(always)]
    pub(super) fn emit_read_all(&self, k: u32, psn: Psn, buf: &mut [u8], ctx: &Ctx<'_>) -> Emitted {
        let len = self.emit_read(k, psn, None, buf, ctx);
        Emitted {
            len,
            consumed: self.npkts - k,
            payload: 0,
            asked: true,
        }
    }

    /// [`emit`](Self::emit) of a SEND or WRITE that is one packet, without selective repeat's
    /// extension (every message of a latency test): its ONLY opcode, RETH and immediate straight
    /// from the request, without the segment arithmetic of a longer message. Always inlined: the
    /// requester's poll then writes the packet without a call and without its figures returned
    /// through memory.
    #[inline(always)]
    pub(super) fn emit_only(
        &self,
        psn: Psn,
        force_ack: bool,
        buf: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> Emitted {
        let ack_req = force_ack || self.wr.signaled;
        // Read in a WRITE's arm only: read before, the RETH's fields were kept on the stack.
        let reth = || {
            self.wr.remote.map(|r| RethRepr {
                va: r.addr,
                rkey: r.rkey,
                dma_len: self.wr.len,
            })
        };
        // One packet: the whole span (`len` bytes, at most the path MTU).
        let src = ctx.mem.span(self.local);
        let dest = ctx.cfg.remote_qpn;
        let mut emit =
            |opcode, imm| packet::emit_data(buf, (opcode, dest, psn, ack_req), reth, imm, src);
        // `emit_data` inlined for each opcode apart: its headers (RETH, immediate) are then known
        // where they are written, not looked up. SEND opcodes carry no RETH: `reth` is not called.
        let len = match self.wr.op {
            SendOp::Send => emit(Opcode::RC_SEND_ONLY, None),
            SendOp::SendWithImm(i) => emit(Opcode::RC_SEND_ONLY_WITH_IMMEDIATE, Some(i)),
            SendOp::Write => emit(Opcode::RC_RDMA_WRITE_ONLY, None),
            SendOp::WriteWithImm(i) => emit(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, Some(i)),
            _ => unreachable!("a SEND or WRITE"),
        };
        Emitted {
            len,
            consumed: 1,
            payload: src.len(),
            asked: ack_req,
        }
    }
}

/// Posted, not yet completed work requests, oldest first: their PSNs ascend.
pub(super) type SendQueue = Ring<Wqe>;

impl SendQueue {
    /// An empty send queue for `depth` work requests, its slots written now, so that a posted
    /// one is built in its slot ([`Ring::push_back_slot`]).
    pub(super) fn with_depth(depth: usize) -> SendQueue {
        let idle = Wqe {
            wr: SendRequest::new(0, SendOp::Send, 0, 0, None),
            local: Span {
                buffer: 0,
                offset: 0,
                len: 0,
            },
            first_psn: Psn::new(0),
            npkts: 0,
            received: 0,
            started: false,
            recv_seq: 0,
            req_acked: false,
        };
        Ring::filled(depth, idle)
    }

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

    /// Removes the oldest work requests while they are started SENDs or WRITEs that end before
    /// `limit` (the oldest must be one), completing the signaled ones, as the requester's
    /// `complete_head` would one by one: one pass over the queue and one pop of them all (an ACK
    /// of a latency test retires 16). Returns how many went and the PSN after the last.
    #[inline]
    pub(super) fn retire_sends(&mut self, limit: Psn, ctx: &mut Ctx<'_>) -> (usize, Psn) {
        let mut done: usize = 0;
        // The queue's PSNs are consecutive (each request's first follows the one before's last):
        // a request ends before `limit` while the PSNs walked fit in those from the oldest's first
        // to `limit`, a subtraction an item rather than each one's last PSN formed and compared.
        // The started ones span less than half the PSN space, so this agrees with `last_psn`.
        let mut room = self
            .get(0)
            .map_or(0, |w| i64::from(limit.diff(w.first_psn)));
        // Each run of slots walked as a plain slice: the chain of the two (`iter`) asks at every
        // item which run it is in.
        let (first, wrapped) = self.as_slices();
        'runs: for run in [first, wrapped] {
            for w in run {
                room -= i64::from(w.npkts);
                if !w.started || w.is_read_or_atomic() || room < 0 {
                    break 'runs;
                }
                if w.wr.signaled {
                    ctx.complete(w.completion(CompletionStatus::Success, ctx.cfg.cq_tag));
                }
                done += 1;
            }
        }
        // The PSN after the last one retired, looked up once rather than kept at every step.
        let comp = match done.checked_sub(1).and_then(|i| self.get(i)) {
            Some(w) => w.last_psn().add(1),
            None => limit,
        };
        self.drop_front(done);
        (done, comp)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::soft::rc::config::QpConfig;
    use crate::transport::soft::rc::mr::MemoryTable;
    use crate::transport::{Access, Completion, SendRequest};
    use crate::wire::IbRepr;

    /// The peer's buffer both shortcut tests write to.
    const REMOTE: RemoteAddr = RemoteAddr {
        addr: 0x1122_3344_5566_7788,
        rkey: 0x99aa_bbcc,
    };

    /// The operations with a shortcut: SEND and WRITE, with and without immediate.
    const OPS: [SendOp; 4] = [
        SendOp::Send,
        SendOp::SendWithImm(0xdead_beef),
        SendOp::Write,
        SendOp::WriteWithImm(0x0102_0304),
    ];

    /// A registered 4 KiB buffer and what a queue pair at one path MTU emits its packets with.
    struct Rig {
        mem: MemoryTable,
        lkey: u32,
        cfg: QpConfig,
        cq: Ring<Completion>,
        counters: super::super::counters::Counters,
    }

    impl Rig {
        /// The buffer filled by `pattern`, at path MTU `pmtu`.
        fn new(pmtu: u32, pattern: fn(usize) -> u8) -> Rig {
            let mut mem = MemoryTable::new(7);
            let keys = mem.add_registered(4096, Access::LOCAL_WRITE);
            let id = mem.region(keys.lkey).unwrap().buffer;
            for (i, b) in mem.buffer_mut(id).iter_mut().enumerate() {
                *b = pattern(i);
            }
            let mut cfg = QpConfig::new(0x11, 0x12_3456, 0, 0, keys.lkey);
            cfg.pmtu = pmtu;
            Rig {
                mem,
                lkey: keys.lkey,
                cfg,
                cq: Ring::with_capacity(1),
                counters: Default::default(),
            }
        }

        /// The WQE of `op` (`len` bytes from `offset` to [`REMOTE`], signaled or not), its first
        /// PSN just short of the wrap, and the context its packets are emitted in.
        fn post(
            &mut self,
            op: SendOp,
            offset: u64,
            len: u32,
            signaled: bool,
            started: bool,
        ) -> (Wqe, Ctx<'_>) {
            let mut wr = SendRequest::new(9, op, offset, len, Some(REMOTE));
            wr.signaled = signaled;
            let local = self.mem.send_buffer(self.lkey, &wr, Access(0)).unwrap();
            let w = Wqe {
                wr,
                local,
                first_psn: Psn::new(0x00ff_fffe),
                npkts: packet::packets_for(len.into(), self.cfg.pmtu),
                received: 0,
                started,
                recv_seq: 0,
                req_acked: false,
            };
            let ctx = Ctx {
                cfg: &self.cfg,
                mem: &mut self.mem,
                cq: &mut self.cq,
                counters: &mut self.counters,
            };
            (w, ctx)
        }
    }

    #[test]
    fn one_packet_requests_match_the_header_stack() {
        let pmtu = 256u32;
        let mut rig = Rig::new(pmtu, |i| (i * 13 + 1) as u8);
        let mut checked = 0;
        for op in OPS {
            for len in [0u32, 1, 2, 3, 4, 5, pmtu - 1, pmtu, pmtu + 1] {
                for (signaled, force_ack) in [(false, false), (true, false), (false, true)] {
                    let (w, ctx) = rig.post(op, 3, len, signaled, false);
                    let psn = w.first_psn;
                    let mut got = [0x5au8; 512];
                    let e = w.emit(0, psn, None, force_ack, false, &mut got, &ctx);
                    // The header stack, from the fields the IB spec gives a first packet.
                    let seg = Seg::of(0, w.npkts);
                    let write = matches!(op, SendOp::Write | SendOp::WriteWithImm(_));
                    let imm = match op {
                        SendOp::SendWithImm(i) | SendOp::WriteWithImm(i) => Some(i),
                        _ => None,
                    };
                    let opcode = if write {
                        packet::write_opcode(seg, imm.is_some())
                    } else {
                        packet::send_opcode(seg, imm.is_some())
                    };
                    let n = len.min(pmtu) as usize;
                    let ack_req = force_ack || (seg.ends() && signaled);
                    let mut r: IbRepr = packet::repr(opcode, 0x12_3456, psn, ack_req, n);
                    r.reth = write.then_some(RethRepr {
                        va: REMOTE.addr,
                        rkey: REMOTE.rkey,
                        dma_len: len,
                    });
                    r.imm = imm.filter(|_| seg.ends());
                    let mut want = [0xa5u8; 512];
                    let data = &ctx.mem.span(w.local)[..n];
                    let m = packet::emit(&mut want, &r, data);
                    assert_eq!(got[..e.len], want[..m], "{op:?}, {len} bytes");
                    assert_eq!((e.consumed, e.payload, e.asked), (1, n, ack_req));
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 4 * 9 * 3);
    }

    /// A middle packet of a SEND or WRITE (the shortcut of `emit_middle`) is byte for byte what the
    /// header stack writes for its fields: every such operation, AckReq forced or not, signaled
    /// or not.
    #[test]
    fn middle_packets_match_the_header_stack() {
        let pmtu = 256u32;
        let mut rig = Rig::new(pmtu, |i| (i * 7 + 3) as u8);
        let mut checked = 0;
        for op in OPS {
            for (signaled, force_ack) in [(false, false), (true, false), (false, true)] {
                let (w, ctx) = rig.post(op, 5, 4 * pmtu - 3, signaled, true);
                for k in 1..w.npkts - 1 {
                    let psn = w.first_psn.add(k);
                    let (mut got, mut want) = ([0x5au8; 512], [0xa5u8; 512]);
                    let e = w.emit(k, psn, None, force_ack, false, &mut got, &ctx);
                    // The header stack, from the fields the IB spec gives a middle packet.
                    let opcode = match op {
                        SendOp::Write | SendOp::WriteWithImm(_) => Opcode::RC_RDMA_WRITE_MIDDLE,
                        _ => Opcode::RC_SEND_MIDDLE,
                    };
                    let n = pmtu as usize;
                    let r = packet::repr(opcode, 0x12_3456, psn, force_ack, n);
                    let start = k as usize * n;
                    let data = &ctx.mem.span(w.local)[start..start + n];
                    let m = packet::emit(&mut want, &r, data);
                    assert_eq!(got[..e.len], want[..m], "{op:?}, packet {k}");
                    assert_eq!((e.consumed, e.payload, e.asked), (1, n, force_ack));
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 4 * 3 * 2);
    }
}
