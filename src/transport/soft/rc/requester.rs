//! The requester: turns send work requests into request packets, in PSN order, and goes back N.

use std::time::Duration;

use crate::transport::{Access, Completion, CompletionOp, CompletionStatus, SendOp, SendRequest};
use crate::wire::{AtomicEthRepr, Opcode, RethRepr};

use super::ctx::Ctx;
use super::gbn::GbnLoss;
use super::mr::Span;
use super::packet::{self, Seg};
use super::psn::Psn;
use super::ring::Ring;
use super::rto::Rto;
use super::sack::{Sack, SrExt};
use super::time::{Instant, Now};
use super::timer::{self, Timer, TimerTable};

/// One posted send work request and its transmission progress.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wqe {
    /// The request as posted.
    pub wr: SendRequest,
    /// Local bytes: the source of SEND/WRITE, the destination of READ and atomics.
    pub local: Span,
    /// PSN of its first packet.
    pub(crate) first_psn: Psn,
    /// PSNs it occupies (a READ occupies one per response packet).
    pub npkts: u32,
    /// READ response packets received so far.
    pub received: u32,
    /// Transmitted at least once (counts against `max_rd_atomic` for READ/atomics).
    pub started: bool,
    /// Selective repeat: the receive this message consumes at the peer, counted from 0 over the
    /// messages that consume one (SEND, WRITE with immediate), so an early packet finds its buffer.
    pub(crate) recv_seq: u32,
    /// Selective repeat: the responder is known to have this READ or atomic request.
    pub(crate) req_acked: bool,
}

impl Wqe {
    /// READ and atomics are answered with data; they wait for responses, not ACKs.
    pub(crate) fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.wr.op,
            SendOp::Read | SendOp::FetchAdd(_) | SendOp::CompareSwap { .. }
        )
    }

    /// PSN of its last packet.
    pub(crate) fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts - 1)
    }

    /// The completion opcode it reports.
    pub(crate) fn completion_op(&self) -> CompletionOp {
        match self.wr.op {
            SendOp::Send | SendOp::SendWithImm(_) => CompletionOp::Send,
            SendOp::Write | SendOp::WriteWithImm(_) => CompletionOp::Write,
            SendOp::Read => CompletionOp::Read,
            SendOp::FetchAdd(_) => CompletionOp::FetchAdd,
            SendOp::CompareSwap { .. } => CompletionOp::CompareSwap,
        }
    }
}

/// What [`Requester::emit`] wrote.
#[derive(Clone, Copy, Debug)]
pub(super) struct Emitted {
    /// Packet length.
    pub len: usize,
    /// PSNs it occupies (a READ: one per response packet it asks for... to the end).
    pub(crate) consumed: u32,
    /// Payload bytes (data only).
    pub payload: usize,
    /// It carries AckReq: its answer comes at once, not with a later packet's.
    pub asked: bool,
}

/// Why the send queue goes back to its oldest unacknowledged PSN.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RetryCause {
    /// The retransmission timer expired.
    Timeout,
    /// The responder sent NAK PSN sequence error.
    NakSequence,
    /// An ACK passed a READ/atomic whose responses never came.
    ImpliedNak,
    /// The ACK of a probe named the probe and nothing after it (`gbn.rs`).
    Probe,
}

/// Send-queue state: what was posted, what was sent, what was acknowledged.
pub struct Requester {
    /// Posted, not yet completed work requests, oldest first.
    pub(crate) sq: Ring<Wqe>,
    /// PSN the next posted work request starts at.
    pub(crate) next_psn: Psn,
    /// Index in `sq` of the work request being transmitted (== `sq.len()` when all are sent).
    pub(crate) cursor: usize,
    /// Next packet of that work request.
    pub(crate) cursor_pkt: u32,
    /// PSN of the next packet to transmit (goes back on retry).
    pub(crate) req_psn: Psn,
    /// One past the highest PSN ever transmitted.
    pub(crate) sent_high: Psn,
    /// Oldest PSN not yet acknowledged.
    pub(crate) comp_psn: Psn,
    /// READ/atomic work requests started and not completed.
    pub(crate) rd_atomic_inflight: u32,
    /// Packets sent since the last one with AckReq.
    pub(crate) noack_pkts: u32,
    /// One past the newest PSN sent with AckReq: PSNs from here on have not asked for an answer.
    pub(crate) asked_high: Psn,
    /// Retries left before RETRY_EXC_ERR.
    pub(crate) retry_left: u8,
    /// RNR retries left before RNR_RETRY_EXC_ERR.
    pub(crate) rnr_left: u8,
    /// A retry was started and no progress has been seen since (rxe's `started_retry`).
    pub(crate) started_retry: bool,
    /// The retransmission timer and the RNR wait (nothing is sent while it runs).
    pub(super) timers: TimerTable,
    /// Receive-consuming messages posted so far (the next one's `recv_seq`).
    pub(super) recv_seq_next: u32,
    /// Selective repeat's state, when the QP runs it.
    pub(super) sr: Option<Box<Sack>>,
    /// Go-back-N's probe and window, when the QP runs them (`QpConfig::gbn_fast`).
    pub(super) gbn: Option<GbnLoss>,
    /// The round-trip estimate behind the fast retransmission timeout (selective repeat, `gbn`).
    pub(super) rto: Rto,
}

impl Requester {
    /// An idle requester starting at `psn` with room for `depth` work requests; `sr` gives it
    /// selective repeat with a window of that many PSNs, `gbn` go-back-N's probe with a window of
    /// that many PSNs (reacting to loss when its flag says so).
    pub fn new(
        psn: Psn,
        depth: usize,
        retry_cnt: u8,
        rnr_retry: u8,
        sr: Option<u32>,
        gbn: Option<(u32, bool)>,
    ) -> Requester {
        Requester {
            sq: Ring::with_capacity(depth),
            next_psn: psn,
            cursor: 0,
            cursor_pkt: 0,
            req_psn: psn,
            sent_high: psn,
            comp_psn: psn,
            rd_atomic_inflight: 0,
            noack_pkts: 0,
            asked_high: psn,
            retry_left: retry_cnt,
            rnr_left: rnr_retry,
            started_retry: false,
            timers: TimerTable::default(),
            recv_seq_next: 0,
            sr: sr.map(|window| Box::new(Sack::new(psn, window))),
            gbn: gbn.map(|(cap, adaptive)| GbnLoss::new(psn, cap, adaptive)),
            rto: Rto::default(),
        }
    }

    /// Queues a checked work request; the caller made sure there is room.
    pub fn push(&mut self, wr: SendRequest, local: Span, pmtu: u32) {
        let npkts = match wr.op {
            SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => 1,
            _ => packet::packets_for(u64::from(wr.len), pmtu),
        };
        let wqe = Wqe {
            wr,
            local,
            first_psn: self.next_psn,
            npkts,
            received: 0,
            started: false,
            recv_seq: self.recv_seq_next,
            req_acked: false,
        };
        if matches!(
            wr.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
        ) {
            self.recv_seq_next = self.recv_seq_next.wrapping_add(1);
        }
        self.next_psn = self.next_psn.add(npkts);
        let pushed = self.sq.push_back(wqe);
        debug_assert!(pushed.is_ok(), "post_send checks room first");
    }

    /// True while a transmitted work request waits for its ACK or response.
    pub fn outstanding(&self) -> bool {
        self.sq.front().is_some_and(|w| w.started)
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) may have a packet: a work request not yet
    /// (fully) sent, or go-back-N's probe. Selective repeat always may (its resends are not behind
    /// the cursor).
    pub(crate) fn may_transmit(&self) -> bool {
        self.cursor < self.sq.len() || self.sr.is_some() || self.gbn.is_some_and(|g| g.probe_due)
    }

    /// What a fast timeout probes with: the oldest unacknowledged PSN, or the newest sent when none of
    /// the unacknowledged ones asked for an ACK (a latency test's unsignaled messages). Those were
    /// not in doubt until now: the silence doubts the newest, and asking with it answers for all of
    /// them in one round trip (and delivers it if it was the one lost), where the oldest, long
    /// delivered, would only move the question on to a second timeout.
    pub(crate) fn probe_psn(&self) -> Psn {
        if self.comp_psn.before(self.asked_high) {
            self.comp_psn
        } else {
            self.sent_high.sub(1)
        }
    }

    /// The index in `sq` of the started work request holding `p`.
    pub(crate) fn wqe_index(&self, p: Psn) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.sq.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let w = self.sq.get(mid)?;
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

    /// Points transmission at `psn`: the work request holding it, or the end of the queue.
    pub(crate) fn seek(&mut self, psn: Psn) {
        self.req_psn = psn;
        for (i, w) in self.sq.iter().enumerate() {
            if psn.in_window(w.first_psn, w.npkts) {
                self.cursor = i;
                self.cursor_pkt = psn.diff(w.first_psn) as u32;
                return;
            }
        }
        self.cursor = self.sq.len();
        self.cursor_pkt = 0;
    }

    /// Arms (or stops) the retransmission timer after progress.
    pub(crate) fn rearm(&mut self, now: Instant, ctx: &Ctx<'_>) {
        match self.retx_timeout(ctx) {
            Some(t) if self.outstanding() => {
                self.timers.set(Timer::Retransmit, now.saturating_add(t))
            }
            _ => self.timers.stop(Timer::Retransmit),
        }
    }

    /// The ACK timeout for the next arming: the configured one, doubled per retry already spent
    /// without progress when the QP backs off (`retry_backoff_max_shift`); selective repeat's shorter
    /// one while it has fast retries left.
    pub(super) fn retx_timeout(&self, ctx: &Ctx<'_>) -> Option<Duration> {
        if (self.sr.is_some() || self.gbn.is_some())
            && let Some(t) = self
                .rto
                .fast_timeout(self.sent_high.diff(self.comp_psn), ctx.cfg)
        {
            return Some(t);
        }
        let spent = ctx.cfg.retry_cnt.saturating_sub(self.retry_left);
        let shift = spent.min(ctx.cfg.retry_backoff_max_shift);
        timer::ack_timeout(ctx.cfg.timeout).map(|t| t * (1 << shift))
    }

    /// Goes back N to the oldest unacknowledged PSN. Returns the error that ends the QP when the
    /// retry budget is spent.
    pub fn retry(&mut self, cause: RetryCause, ctx: &mut Ctx<'_>) -> Option<CompletionStatus> {
        if !self.outstanding() {
            return None;
        }
        // rxe: while a retry is under way, only a timeout may start another one, so a burst of
        // duplicate ACKs or NAKs caused by the retry itself does not burn the whole budget (a
        // probe's silence is a timeout too: turned away, it would leave no timer running).
        if self.started_retry && !matches!(cause, RetryCause::Timeout | RetryCause::Probe) {
            return None;
        }
        if !ctx.cfg.retry_infinite() {
            if self.retry_left == 0 {
                return Some(CompletionStatus::RetryExceeded);
            }
            self.retry_left -= 1;
        }
        ctx.counters.retries += 1;
        self.started_retry = true;
        self.noack_pkts = 0;
        self.timers.stop(Timer::Retransmit);
        self.rto.cancel();
        if let Some(g) = &mut self.gbn {
            g.lost(self.comp_psn, self.sent_high);
            // After a NAK (or a probe's answer) the responder holds nothing from the rewind point
            // on, and what was sent before the resend arrives before it: the resend's ACK is its
            // own, a fair round-trip sample (Karn's rule forbids only ambiguous ones).
            g.time_resend = cause != RetryCause::Timeout;
        }
        self.resend_unacknowledged();
        None
    }

    /// Sends again from the oldest unacknowledged PSN (selective repeat: everything not yet received,
    /// from it on): after a retry, or once an RNR wait is over.
    pub(crate) fn resend_unacknowledged(&mut self) {
        if self.sr.is_some() {
            self.sr_resend_all();
        } else {
            self.seek(self.comp_psn);
        }
    }

    /// Writes the next request packet into `buf`; `None` when nothing may be sent now.
    pub fn poll_transmit(
        &mut self,
        now: &mut impl Now,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<usize> {
        if self.timers.get(Timer::Rnr).is_some() {
            return None;
        }
        if self.sr.is_some()
            && let Some(n) = self.sr_poll_retransmit(now, buf, ctx)
        {
            return Some(n);
        }
        if let Some(g) = &mut self.gbn
            && g.probe_due
        {
            if self.sq.front().is_some_and(|w| w.started) {
                return Some(self.gbn_send_probe(now, buf, ctx));
            }
            // Everything was acknowledged between the timeout and this call: nothing to ask.
            g.probe_due = false;
            g.probe = None;
        }
        let w = *self.sq.get(self.cursor)?;
        if self.req_psn.diff(self.comp_psn) >= self.window(ctx) as i32 {
            return None;
        }
        if w.is_read_or_atomic() && !w.started {
            if self.rd_atomic_inflight >= ctx.cfg.max_rd_atomic {
                return None;
            }
            self.rd_atomic_inflight += 1;
        }
        let psn = self.req_psn;
        let k = self.cursor_pkt;
        let sent = self.emit(&w, k, psn, None, false, buf, ctx);
        let wqe = self.sq.get_mut(self.cursor).expect("cursor checked above");
        wqe.started = true;
        let next = psn.add(sent.consumed);
        self.req_psn = next;
        self.cursor_pkt += sent.consumed;
        if self.cursor_pkt >= wqe.npkts {
            self.cursor += 1;
            self.cursor_pkt = 0;
        }
        if psn.before(self.sent_high) {
            ctx.counters.retransmitted_packets += 1;
            ctx.counters.retransmitted_bytes += sent.payload as u64;
            if let Some(g) = &mut self.gbn
                && std::mem::take(&mut g.time_resend)
            {
                self.rto.time(psn, now.now());
            }
        } else if (self.sr.is_some() || self.gbn.is_some()) && sent.asked {
            // Only a packet that asks for an ACK is timed: the others are answered whenever a
            // later one asks (a latency test signals one message in 16), and that wait is no
            // round trip.
            self.rto.time(psn, now.now());
        }
        if next.after(self.sent_high) {
            self.sent_high = next;
        }
        if sent.asked && next.after(self.asked_high) {
            self.asked_high = next;
        }
        self.sent(now, sent.payload, ctx);
        Some(sent.len)
    }

    /// Unacknowledged PSNs allowed out: the configured window (selective repeat: the responder's
    /// window of early requests, half what the requester's bitmaps cover; `gbn`: its window now).
    pub(super) fn window(&self, ctx: &Ctx<'_>) -> u32 {
        match (&self.sr, &self.gbn) {
            (Some(sr), _) => sr.window() / 2,
            (None, Some(g)) => g.window(),
            (None, None) => ctx.cfg.max_unacked_psns,
        }
    }

    /// After any transmission: the retransmission timer runs, and the payload is counted.
    pub(super) fn sent(&mut self, now: &mut impl Now, payload: usize, ctx: &mut Ctx<'_>) {
        if self.timers.get(Timer::Retransmit).is_none()
            && let Some(t) = self.retx_timeout(ctx)
        {
            self.timers
                .set(Timer::Retransmit, now.now().saturating_add(t));
        }
        ctx.counters.tx_payload_bytes += payload as u64;
    }

    /// Writes packet `k` of `w` at `psn` into `buf`. A READ asks for its packets from `k` on (only
    /// `read_pkts` of them when given); `force_ack` sets AckReq (retransmissions ask for an answer).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit(
        &mut self,
        w: &Wqe,
        k: u32,
        psn: Psn,
        read_pkts: Option<u32>,
        force_ack: bool,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Emitted {
        let pmtu = ctx.cfg.pmtu;
        let dest = ctx.cfg.remote_qpn;
        let sr = self.sr.is_some();
        let remote =
            w.wr.remote
                .unwrap_or(crate::transport::RemoteAddr { addr: 0, rkey: 0 });
        let (len, consumed, payload, asked) = match w.wr.op {
            SendOp::Read => {
                // A (re)issued READ asks for everything from packet k on, in one request.
                let skip = u64::from(k) * u64::from(pmtu);
                let rest = u64::from(w.wr.len) - skip.min(u64::from(w.wr.len));
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
                (packet::emit(buf, &r, &[]), w.npkts - k, 0, true)
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
                let seg = Seg::of(k, w.npkts);
                let n = packet::payload_len(u64::from(w.wr.len), pmtu, k);
                let start = k as usize * pmtu as usize;
                let ack_req = force_ack
                    || (seg.ends() && w.wr.signaled)
                    || self.noack_pkts >= ctx.cfg.ack_req_every;
                let is_write = matches!(w.wr.op, SendOp::Write | SendOp::WriteWithImm(_));
                let (opcode, imm) = match w.wr.op {
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
                        recv_seq: w.recv_seq,
                        offset: start as u32,
                    }),
                    (true, true, false) => Some(SrExt::Write(RethRepr {
                        va: remote.addr.wrapping_add(start as u64),
                        rkey: remote.rkey,
                        dma_len: w.wr.len,
                    })),
                    _ => None,
                };
                let ext_len = ext.map_or(0, |e| e.len());
                let mut r = packet::repr(opcode, dest, psn, ack_req, ext_len + n);
                if seg.ends() {
                    r.imm = imm;
                }
                if seg.starts() && is_write {
                    r.reth = Some(RethRepr {
                        va: remote.addr,
                        rkey: remote.rkey,
                        dma_len: w.wr.len,
                    });
                }
                let src = &ctx.mem.span(w.local)[start..start + n];
                let len = match ext {
                    None => packet::emit(buf, &r, src),
                    Some(e) => packet::emit_with_ext(buf, &r, &e, src),
                };
                (len, 1, n, ack_req)
            }
        };
        // AckReq bookkeeping: rxe asks again after `ack_req_every` packets without asking.
        self.noack_pkts = if asked { 0 } else { self.noack_pkts + 1 };
        Emitted {
            len,
            consumed,
            payload,
            asked,
        }
    }

    /// Completes the oldest work request with `status` and removes it.
    pub(crate) fn complete_head(&mut self, status: CompletionStatus, ctx: &mut Ctx<'_>) {
        let Some(w) = self.sq.pop_front() else { return };
        if w.is_read_or_atomic() && w.started {
            self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
        }
        self.cursor = self.cursor.saturating_sub(1);
        if status != CompletionStatus::Success || w.wr.signaled {
            ctx.complete(Completion {
                wr_id: w.wr.wr_id,
                qp: ctx.cfg.cq_tag,
                status,
                op: w.completion_op(),
                byte_len: if status == CompletionStatus::Success {
                    w.wr.len
                } else {
                    0
                },
                imm: None,
            });
        }
    }

    /// Fails the oldest work request with `status` and flushes the rest (the QP enters ERROR).
    pub(crate) fn fail_all(&mut self, status: CompletionStatus, ctx: &mut Ctx<'_>) {
        if !self.sq.is_empty() {
            self.complete_head(status, ctx);
        }
        while !self.sq.is_empty() {
            self.complete_head(CompletionStatus::WrFlushError, ctx);
        }
        self.cursor = 0;
        self.cursor_pkt = 0;
        self.timers.stop_all();
    }
}

/// Local rights a work request needs on its own buffer.
pub(crate) fn local_access(op: SendOp) -> Access {
    match op {
        SendOp::Read | SendOp::FetchAdd(_) | SendOp::CompareSwap { .. } => Access::LOCAL_WRITE,
        _ => Access(0),
    }
}
