//! The requester: turns send work requests into request packets, in PSN order, and completes them
//! from the responder's answers (ACKs, NAKs, READ responses, atomic ACKs: the completer's part).
//!
//! One state machine with private fields, as quinn-proto's `Connection`: the queue pair hands it
//! work requests, response packets and timer expiries with an explicit `now`, and pulls request
//! packets. How it recovers from loss is a sub-state that owns its logic ([`LossRecovery`]):
//! go-back-N as rxe, go-back-N with a probe and a loss-reactive window between roceperf endpoints
//! ([`GbnLoss`], `gbn.rs`), or selective repeat ([`Sack`], `sack.rs`). The sub-states are handed
//! what they need (the send queue, PSNs) as arguments; this file alone moves the requester's state
//! (with `requester/timeout.rs`, what its expired timers do).
//!
//! ACKs are cumulative. A NAK or a READ response also acknowledges everything before its PSN. An ACK
//! that passes a READ/atomic still waiting for its data means those responses were lost (an
//! implied NAK) and starts a retry at once, as rxe does.

use crate::transport::soft::bytes::copy_payload;
use crate::transport::soft::cc::{CcCounters, RateControl};
use crate::transport::{Completion, CompletionStatus, SendOp, SendRequest};
use crate::wire::{AethKind, NakCode};

use super::ctx::Ctx;
use super::failure::QpFailure;
use super::gbn::GbnLoss;
use super::mr::Span;
use super::packet::{self, Answer, Response, Seg};
use super::psn::Psn;
use super::recovery::{LossRecovery, RetryCause};
use super::rto::{FEW_IN_FLIGHT, Rto};
use super::sack::Sack;
use super::time::{Instant, Now};
use super::timer::{self, Timer, TimerTable};
use super::wqe::{Emitted, SendQueue, Wqe};

mod timeout;

/// What a response or a timeout did to the QP: `Some(status)` means the QP must enter ERROR with
/// `status` for the oldest work request.
pub(super) type Outcome = Option<CompletionStatus>;

/// Send-queue state: what was posted, what was sent, what was acknowledged.
pub(super) struct Requester {
    /// Posted, not yet completed work requests, oldest first.
    sq: SendQueue,
    /// PSN the next posted work request starts at.
    next_psn: Psn,
    /// Index in `sq` of the work request being transmitted (== `sq.len()` when all are sent).
    cursor: usize,
    /// Next packet of that work request.
    cursor_pkt: u32,
    /// PSN of the next packet to transmit (goes back on retry).
    req_psn: Psn,
    /// One past the highest PSN ever transmitted.
    sent_high: Psn,
    /// Oldest PSN not yet acknowledged.
    comp_psn: Psn,
    /// READ/atomic work requests started and not completed.
    rd_atomic_inflight: u32,
    /// Packets sent since the last one with AckReq.
    noack_pkts: u32,
    /// One past the newest PSN sent with AckReq: PSNs from here on have not asked for an answer.
    asked_high: Psn,
    /// Retries left before RETRY_EXC_ERR.
    retry_left: u8,
    /// RNR retries left before RNR_RETRY_EXC_ERR.
    rnr_left: u8,
    /// A retry was started and no progress has been seen since (rxe's `started_retry`).
    started_retry: bool,
    /// The retransmission timer and the RNR wait (nothing is sent while it runs).
    timers: TimerTable,
    /// When the silence the retransmission timer measures began: the last progress, or the
    /// question (a packet with AckReq) that followed a time when the peer owed no answer.
    silent_since: Instant,
    /// Receive-consuming messages posted so far (the next one's `recv_seq`).
    recv_seq_next: u32,
    /// How loss is recovered from, and that recovery's own state.
    recovery: LossRecovery,
    /// The round-trip estimate behind the fast retransmission timeout (selective repeat, `gbn`).
    rto: Rto,
    /// The first fatal NAK the peer sent for a PSN this side had not sent, to name in the run's error.
    pub(super) foreign_nak: Option<QpFailure>,
    /// Unacknowledged PSNs the endpoint lets this requester have now (its share of what all its
    /// queue pairs may have out together): below the window when the endpoint's budget is short.
    cap: u32,
    /// DCQCN's reaction point and the pacer that holds requests to its rate (`--cc`).
    rate: RateControl,
    /// A PFC pause holds this side's requests (the datapath says so: `Qp::hold_requests`).
    paused: bool,
    /// The pacer or a pause held a packet since the last packet that asked for an answer: the
    /// next question may leave long after the last progress (see `poll_transmit`).
    held_since_asked: bool,
}

impl Requester {
    /// An idle requester starting at `psn` with room for `depth` work requests; `sr` gives it
    /// selective repeat with a window of that many PSNs, else `gbn` go-back-N's probe with a window
    /// of that many PSNs (reacting to loss when its flag says so).
    pub(super) fn new(
        psn: Psn,
        depth: usize,
        retry_cnt: u8,
        rnr_retry: u8,
        sr: Option<u32>,
        gbn: Option<(u32, bool)>,
        rate: RateControl,
    ) -> Requester {
        let recovery = match (sr, gbn) {
            (Some(window), _) => LossRecovery::Selective(Box::new(Sack::new(psn, window))),
            (None, Some((cap, adaptive))) => {
                LossRecovery::Probing(GbnLoss::new(psn, cap, adaptive))
            }
            (None, None) => LossRecovery::GoBackN,
        };
        Requester {
            sq: SendQueue::with_depth(depth),
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
            silent_since: Instant::ZERO,
            recv_seq_next: 0,
            recovery,
            rto: Rto::default(),
            cap: u32::MAX,
            foreign_nak: None,
            rate,
            paused: false,
            held_since_asked: false,
        }
    }

    /// Queues a checked work request of `npkts` PSNs (one for an atomic, else
    /// [`packet::packets_for`] its length); the caller made sure there is room.
    #[inline(always)]
    pub(super) fn push(&mut self, wr: SendRequest, local: Span, npkts: u32) {
        // Built in its slot: built on the stack, it cost a copy of all its fields again.
        let Some(slot) = self.sq.push_back_slot() else {
            return debug_assert!(false, "post_send checks room first");
        };
        *slot = Wqe {
            wr,
            local,
            first_psn: self.next_psn,
            npkts,
            received: 0,
            started: false,
            recv_seq: self.recv_seq_next,
            req_acked: false,
        };
        // Added, not branched on: the opcode looked up in a table, not two compares and a jump.
        let consumes = matches!(
            wr.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_)
        );
        self.recv_seq_next = self.recv_seq_next.wrapping_add(u32::from(consumes));
        self.next_psn = self.next_psn.add(npkts);
    }

    /// While `held` (a PFC pause of data's priority), no request leaves: a silence then is this
    /// side's, not the peer's (see [`held_back`](Self::held_back)).
    pub(super) fn hold(&mut self, held: bool) {
        self.paused = held;
        self.held_since_asked |= held;
    }

    /// A CNP for this queue pair arrived at `now`, `bytes` of payload sent so far: DCQCN cuts.
    pub(super) fn on_cnp(&mut self, now: Instant, bytes: u64) {
        self.rate.on_cnp(now.as_nanos(), bytes);
    }

    /// The reaction point's counts into `c`.
    pub(super) fn count_cc(&self, c: &mut CcCounters) {
        self.rate.count(c);
    }

    /// Work requests posted and not yet completed.
    pub(super) fn posted(&self) -> usize {
        self.sq.len()
    }

    /// The send queue has no room for another work request.
    pub(super) fn is_full(&self) -> bool {
        self.sq.is_full()
    }

    /// True while a transmitted work request waits for its ACK or response.
    pub(super) fn outstanding(&self) -> bool {
        self.sq.front().is_some_and(|w| w.started)
    }

    /// PSNs sent and not yet acknowledged (after a go-back, only those sent again).
    pub(super) fn unacked(&self) -> u32 {
        self.req_psn.diff(self.comp_psn).max(0) as u32
    }

    /// The most PSNs its window ever lets out (`configured`: go-back-N's configured window).
    pub(super) fn window_max(&self, configured: u32) -> u32 {
        match &self.recovery {
            LossRecovery::Selective(sr) => sr.window() / 2,
            _ => configured,
        }
    }

    /// Lets at most `cap` PSNs be unacknowledged, whatever the window allows (the endpoint's share).
    pub(super) fn set_cap(&mut self, cap: u32) {
        self.cap = cap;
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) may have a packet: a work request not yet
    /// (fully) sent, or go-back-N's probe. Selective repeat always may (its resends are not behind
    /// the cursor).
    pub(super) fn may_transmit(&self) -> bool {
        self.cursor < self.sq.len() || self.may_resend()
    }

    /// [`poll_transmit`](Self::poll_transmit) would find nothing: no request left to send first
    /// under go-back-N. Without its call, a lone ACK's fill asks this first.
    #[inline(always)]
    pub(super) fn quiet(&self) -> bool {
        self.cursor >= self.sq.len() && !self.recovery.fast()
    }

    /// Whether a packet the endpoint's cap does not hold may be due: go-back-N's probe, or any of
    /// selective repeat's resends.
    pub(super) fn may_resend(&self) -> bool {
        // Probing first: a roceperf peer's, whose answer is then one flag, without the other tests.
        if let LossRecovery::Probing(g) = &self.recovery {
            return g.probe_due();
        }
        matches!(self.recovery, LossRecovery::Selective(_))
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next, if ever.
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        self.timers.next_timeout()
    }

    /// Points transmission at `psn`: the work request holding it, or the end of the queue.
    fn seek(&mut self, psn: Psn) {
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
    fn rearm(&mut self, now: Instant, ctx: &Ctx<'_>) {
        if self.outstanding() {
            self.arm(now, ctx);
        } else {
            self.timers.stop(Timer::Retransmit);
        }
    }

    /// Starts the retransmission timer's silence at `now`.
    #[inline]
    fn arm(&mut self, now: Instant, ctx: &Ctx<'_>) {
        self.silent_since = now;
        match self.retx_timeout(ctx) {
            Some(t) => self.timers.set(Timer::Retransmit, now.plus_ns(t)),
            None => self.timers.stop(Timer::Retransmit),
        }
    }

    /// More than [`FEW_IN_FLIGHT`] PSNs are out now: when more work waits behind them (a stream
    /// filling its window, however its packets are spaced, not a ping-pong whose application
    /// posts each unsignaled ping after the last pong), a running timer's deadline moves to the
    /// larger floor, counted from the same start; armed for a ping-pong's few packets, it would
    /// time out a window's first ACK at the small floor.
    #[cold]
    fn floor_rose(&mut self, ctx: &Ctx<'_>) {
        if self.cursor < self.sq.len()
            && self.timers.get(Timer::Retransmit).is_some()
            && let Some(t) = self.retx_timeout(ctx)
        {
            let at = self.silent_since.plus_ns(t);
            self.timers.set(Timer::Retransmit, at);
        }
    }

    /// A packet that asks for an answer leaves after the pacer or a pause held packets: when
    /// nothing out had asked (the peer owed no answer, and the question may leave long past the
    /// last progress), the peer's silence starts now. Called before `asked_high` moves.
    #[cold]
    fn asked_after_hold(&mut self, now: &mut impl Now, ctx: &Ctx<'_>) {
        self.held_since_asked = false;
        if self.comp_psn.before(self.asked_high) {
            return;
        }
        match self.retx_timeout(ctx) {
            Some(t) => self.start_silence(now.now(), t, ctx),
            None => self.timers.stop(Timer::Retransmit),
        }
    }

    /// The ACK timeout for the next arming: the configured one, doubled per retry already spent
    /// without progress when the QP backs off (`retry_backoff_max_shift`); selective repeat's and
    /// `gbn`'s shorter one while they have fast retries left. Inlined: each caller (an ACK that
    /// restarts the timer, a READ's response) pays a call and return otherwise.
    /// In nanoseconds: a deadline is one add, without `Duration`'s split into seconds and back.
    #[inline]
    fn retx_timeout(&self, ctx: &Ctx<'_>) -> Option<u64> {
        if self.recovery.fast()
            && let Some(t) = self
                .rto
                .fast_timeout_ns(self.sent_high.diff(self.comp_psn), ctx.cfg)
        {
            return Some(t);
        }
        let spent = ctx.cfg.retry_cnt.saturating_sub(self.retry_left);
        let shift = spent.min(ctx.cfg.retry_backoff_max_shift);
        let t = timer::ack_timeout_ns(ctx.cfg.timeout)?;
        // Past a u64 of nanoseconds it saturates, as a deadline `Duration`'s product would; no
        // retry spent (most armings), no product.
        Some(if shift == 0 {
            t
        } else {
            t.saturating_mul(u64::from(1u32 << shift))
        })
    }

    /// Goes back N to the oldest unacknowledged PSN. Returns the error that ends the QP when the
    /// retry budget is spent.
    fn retry(&mut self, cause: RetryCause, ctx: &mut Ctx<'_>) -> Outcome {
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
        if let Some(g) = self.recovery.gbn() {
            g.went_back(self.comp_psn, self.sent_high, cause != RetryCause::Timeout);
        }
        self.resend_unacknowledged();
        None
    }

    /// Sends again from the oldest unacknowledged PSN (selective repeat: everything not yet received,
    /// from it on): after a retry, or once an RNR wait is over.
    fn resend_unacknowledged(&mut self) {
        match &mut self.recovery {
            LossRecovery::Selective(sr) => {
                self.rto.cancel();
                sr.resend_all(&self.sq, self.comp_psn, self.sent_high);
            }
            _ => self.seek(self.comp_psn),
        }
    }

    /// Writes the next request packet into `buf`; `None` when nothing may be sent now.
    pub(super) fn poll_transmit(
        &mut self,
        now: &mut impl Now,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<usize> {
        // The common case, a packet sent first under go-back-N at full rate with the window
        // open (a READ or atomic within the limit on those outstanding), goes here with few live
        // values, as does "nothing posted to send" (a lone ACK's fill asks first); everything else
        // is [`poll_transmit_any`](Self::poll_transmit_any)'s, which checks again from the start.
        if self.timers.get(Timer::Rnr).is_none()
            && !self.recovery.fast()
            && !self.rate.limited()
            && self.req_psn == self.sent_high
            && self.req_psn.diff(self.comp_psn) < ctx.cfg.max_unacked_psns.min(self.cap) as i32
        {
            let ask = self.asks(false, ctx);
            let max_rd_atomic = ctx.cfg.max_rd_atomic;
            let psn = self.req_psn;
            let wqe = self.sq.get_mut(self.cursor)?;
            if wqe.npkts == 1 && !wqe.is_read_or_atomic() {
                // A SEND or WRITE of one packet (every message of a latency test), straight: one
                // PSN, and the cursor on to the next request.
                let sent = wqe.emit_only(psn, ask, buf, ctx);
                wqe.started = true;
                self.sent_last(sent, now, ctx);
                return Some(sent.len);
            }
            if !wqe.is_read_or_atomic() || !wqe.started && self.rd_atomic_inflight < max_rd_atomic {
                if wqe.is_read_or_atomic() {
                    self.rd_atomic_inflight += 1;
                }
                if matches!(wqe.wr.op, SendOp::Read) {
                    // A READ's request (every message of a READ latency test), straight as well:
                    // it occupies the PSNs of its responses from packet k on and asks for an answer.
                    let sent = wqe.emit_read_all(self.cursor_pkt, psn, buf, ctx);
                    wqe.started = true;
                    self.sent_last(sent, now, ctx);
                    return Some(sent.len);
                }
                let sent = wqe.emit_any(self.cursor_pkt, psn, None, ask, false, buf, ctx);
                self.noack_pkts = if sent.asked { 0 } else { self.noack_pkts + 1 };
                wqe.started = true;
                let next = psn.add(sent.consumed);
                self.req_psn = next;
                self.sent_high = next;
                self.cursor_pkt += sent.consumed;
                if self.cursor_pkt >= wqe.npkts {
                    self.cursor += 1;
                    self.cursor_pkt = 0;
                }
                self.asked_to(sent.asked, next, now, ctx);
                self.sent(now, sent.payload, false, ctx);
                return Some(sent.len);
            }
        }
        self.poll_transmit_any(now, buf, ctx)
    }

    /// After the fast path's packet `sent` first from `req_psn`, its request's last.
    #[inline(always)]
    fn sent_last(&mut self, sent: Emitted, now: &mut impl Now, ctx: &mut Ctx<'_>) {
        self.noack_pkts = if sent.asked { 0 } else { self.noack_pkts + 1 };
        let next = self.req_psn.add(sent.consumed);
        self.req_psn = next;
        self.sent_high = next;
        self.cursor += 1;
        self.cursor_pkt = 0;
        self.asked_to(sent.asked, next, now, ctx);
        self.sent(now, sent.payload, false, ctx);
    }

    /// [`poll_transmit`](Self::poll_transmit) in general: recovery, pacing, READs and atomics,
    /// resends. Out of line, so that the common case keeps a small frame.
    #[inline(never)]
    fn poll_transmit_any(
        &mut self,
        now: &mut impl Now,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<usize> {
        if self.timers.get(Timer::Rnr).is_some() {
            return None;
        }
        if self.recovery.fast() {
            match &mut self.recovery {
                LossRecovery::Selective(_) => {
                    if let Some(n) = self.sr_poll_retransmit(now, buf, ctx) {
                        return Some(n);
                    }
                }
                LossRecovery::Probing(g) if g.probe_due() => {
                    if self.sq.front().is_some_and(|w| w.started) {
                        return Some(self.gbn_send_probe(now, buf, ctx));
                    }
                    // Everything was acknowledged between the timeout and this call.
                    g.cancel_probe();
                }
                _ => {}
            }
        }
        // Looked at in place and looked up once: a copy of the work request costs more than the
        // rest of the checks, a second lookup as much as several. What needs the whole requester
        // is read first, so the work request's borrow leaves the other fields free.
        let ask = self.asks(false, ctx);
        let sr = self.recovery.is_selective();
        let window = self.window(ctx).min(self.cap) as i32;
        let wqe = self.sq.get_mut(self.cursor)?;
        let (read_or_atomic, started) = (wqe.is_read_or_atomic(), wqe.started);
        if self.req_psn.diff(self.comp_psn) >= window {
            return None;
        }
        // Paced (a CNP cut the rate): the one branch a packet pays before any CNP.
        let paced = self.rate.limited();
        if paced {
            let t = now.now().as_nanos();
            if !self.rate.may_send(t, ctx.counters.tx_payload_bytes) {
                self.held_since_asked = true;
                let due = Instant::from_nanos(self.rate.due());
                self.timers.set(Timer::Pace, due);
                return None;
            }
        }
        if read_or_atomic && !started {
            if self.rd_atomic_inflight >= ctx.cfg.max_rd_atomic {
                return None;
            }
            self.rd_atomic_inflight += 1;
        }
        let (psn, k) = (self.req_psn, self.cursor_pkt);
        let sent = wqe.emit(k, psn, None, ask, sr, buf, ctx);
        self.noack_pkts = if sent.asked { 0 } else { self.noack_pkts + 1 };
        wqe.started = true;
        let next = psn.add(sent.consumed);
        self.req_psn = next;
        self.cursor_pkt += sent.consumed;
        if self.cursor_pkt >= wqe.npkts {
            self.cursor += 1;
            self.cursor_pkt = 0;
        }
        if psn == self.sent_high && !self.recovery.fast() {
            // Sent first under go-back-N (every packet of a clean run): nothing to time, no floor.
            self.sent_high = next;
        } else {
            if psn.before(self.sent_high) {
                ctx.counters.retransmitted_packets += 1;
                ctx.counters.retransmitted_bytes += sent.payload as u64;
                if let Some(g) = self.recovery.gbn()
                    && g.take_time_resend()
                {
                    self.rto.time(psn, now.now());
                }
            } else if self.recovery.fast() && sent.asked {
                // Only a packet that asks for an ACK is timed: the others are answered whenever
                // a later one asks (a latency test signals one message in 16), and that wait is
                // no round trip.
                self.rto.time(psn, now.now());
            }
            if next.after(self.sent_high) {
                let crossed = self.recovery.fast()
                    && next.diff(self.comp_psn) > FEW_IN_FLIGHT
                    && self.sent_high.diff(self.comp_psn) <= FEW_IN_FLIGHT;
                self.sent_high = next;
                if crossed {
                    self.floor_rose(ctx);
                }
            }
        }
        self.asked_to(sent.asked, next, now, ctx);
        self.sent(now, sent.payload, paced, ctx);
        Some(sent.len)
    }

    /// After a packet that ended at `next` and `asked` for an ACK: the highest PSN asked about.
    #[inline(always)]
    fn asked_to(&mut self, asked: bool, next: Psn, now: &mut impl Now, ctx: &mut Ctx<'_>) {
        if asked && next.after(self.asked_high) {
            if self.held_since_asked {
                self.asked_after_hold(now, ctx);
            }
            self.asked_high = next;
        }
    }

    /// Unacknowledged PSNs allowed out: the configured window (selective repeat: the responder's
    /// window of early requests, half what the requester's bitmaps cover; `gbn`: its window now).
    fn window(&self, ctx: &Ctx<'_>) -> u32 {
        match &self.recovery {
            LossRecovery::Selective(sr) => sr.window() / 2,
            LossRecovery::Probing(g) => g.window(),
            LossRecovery::GoBackN => ctx.cfg.max_unacked_psns,
        }
    }

    /// After any transmission: the retransmission timer runs, the payload is counted, and paced
    /// if the caller found the pacer on (`paced`; `RateControl::sent` skips one back at full rate
    /// since). Always inlined (out of line, 38 a round trip): a few loads and an add.
    #[inline(always)]
    fn sent(&mut self, now: &mut impl Now, payload: usize, paced: bool, ctx: &mut Ctx<'_>) {
        if self.timers.get(Timer::Retransmit).is_none() {
            self.arm_retransmit(now, ctx);
        }
        ctx.counters.tx_payload_bytes += payload as u64;
        if paced {
            self.rate.sent(now.now().as_nanos(), payload);
        }
    }

    /// The retransmission timer starts now, if a timeout is configured (the first packet after
    /// silence).
    #[inline(never)]
    fn arm_retransmit(&mut self, now: &mut impl Now, ctx: &mut Ctx<'_>) {
        // `retx_timeout` is `None` exactly when the ACK timeout is off; under go-back-N with no
        // retry spent (no backoff) it is the configured one, kept across the clock's read.
        let Some(t) = timer::ack_timeout_ns(ctx.cfg.timeout) else {
            return;
        };
        let at = now.now();
        let t = if self.recovery.fast() || self.retry_left < ctx.cfg.retry_cnt {
            self.retx_timeout(ctx).unwrap_or(0)
        } else {
            t
        };
        self.start_silence(at, t, ctx);
    }

    /// The retransmission timer runs `t` ns from `at`, when a packet left (before its payload is
    /// counted).
    #[inline]
    fn start_silence(&mut self, at: Instant, t: u64, ctx: &Ctx<'_>) {
        // The starting rate DCQCN cuts from is measured from the first packet on.
        self.rate.mark(at.as_nanos(), ctx.counters.tx_payload_bytes);
        self.silent_since = at;
        self.timers.set(Timer::Retransmit, at.plus_ns(t));
    }

    /// A resend that was just emitted: counted as such, and the timer runs.
    #[inline]
    fn resent(&mut self, now: &mut impl Now, sent: Emitted, ctx: &mut Ctx<'_>) -> usize {
        ctx.counters.retransmitted_packets += 1;
        ctx.counters.retransmitted_bytes += sent.payload as u64;
        self.sent(now, sent.payload, self.rate.limited(), ctx);
        sent.len
    }

    /// Writes packet `k` of `w` at `psn` into `buf` ([`Wqe::emit`]), asking for an ACK when
    /// `force_ack` says so or when `ack_req_every` packets went without asking (rxe's rule).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn emit(
        &mut self,
        w: &Wqe,
        k: u32,
        psn: Psn,
        read_pkts: Option<u32>,
        force_ack: bool,
        buf: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> Emitted {
        let (ask, sr) = (self.asks(force_ack, ctx), self.recovery.is_selective());
        let sent = w.emit(k, psn, read_pkts, ask, sr, buf, ctx);
        self.noack_pkts = if sent.asked { 0 } else { self.noack_pkts + 1 };
        sent
    }

    /// Whether the next packet asks for an ACK: `force_ack` says so, or `ack_req_every` packets
    /// went without asking (rxe's rule).
    #[inline(always)]
    fn asks(&self, force_ack: bool, ctx: &Ctx<'_>) -> bool {
        force_ack || self.noack_pkts >= ctx.cfg.ack_req_every
    }

    /// Completes the oldest work request with `status` and removes it. Inlined: a READ's last
    /// response paid a call and a frame of seven registers for it.
    #[inline(always)]
    fn complete_head(&mut self, status: CompletionStatus, ctx: &mut Ctx<'_>) {
        let Some(w) = self.sq.pop_front() else { return };
        let c = (status != CompletionStatus::Success || w.wr.signaled)
            .then(|| w.completion(status, ctx.cfg.cq_tag));
        self.retired(w.is_read_or_atomic() && w.started, c, ctx);
    }

    /// After the oldest work request left the send queue: the READs and atomics in flight
    /// (`counted`: it was one of them, started), the cursor, and its completion `c`, if any.
    #[inline(always)]
    fn retired(&mut self, counted: bool, c: Option<Completion>, ctx: &mut Ctx<'_>) {
        if counted {
            self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
        }
        self.cursor = self.cursor.saturating_sub(1);
        if let Some(c) = c {
            ctx.complete(c);
        }
    }

    /// Fails the oldest work request with `status` and flushes the rest (the QP enters ERROR).
    pub(super) fn fail_all(&mut self, status: CompletionStatus, ctx: &mut Ctx<'_>) {
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

    /// The PSN of response `answer` when it can still answer something outstanding; `None`,
    /// counted as stale, otherwise.
    #[inline]
    fn answering_psn(&mut self, answer: &Answer, ctx: &mut Ctx<'_>) -> Option<Psn> {
        let psn = Psn::new(answer.psn);
        // Only PSNs in [comp_psn - 1, sent_high) can answer anything still outstanding; an ACK
        // for comp_psn - 1 is a plain duplicate.
        if !psn.before(self.sent_high) || psn.before(self.comp_psn) {
            ctx.counters.drops.protocol.stale_response += 1;
            if !psn.before(self.sent_high)
                && let Some(AethKind::Nak(nak)) = answer.aeth.map(|a| a.kind())
                && nak != NakCode::PsnSequenceError
            {
                // Not ours to fail on, but the peer's queue pair is in ERROR now: say why later.
                self.foreign_nak.get_or_insert(QpFailure::ForeignNak {
                    psn: psn.value(),
                    nak,
                });
            }
            return None;
        }
        Some(psn)
    }

    /// Handles one response packet, a go-back-N READ response first (one compare of the kind).
    /// `Some(status)` means the QP must enter ERROR with `status` for the oldest work request.
    pub(super) fn handle_response(
        &mut self,
        now: Instant,
        kind: Response,
        answer: &Answer,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        let psn = self.answering_psn(answer, ctx)?;
        if let (Response::Read(seg), false) = (kind, self.recovery.is_selective()) {
            return self.read_response(now, psn, seg, answer, payload, ctx);
        }
        if let LossRecovery::Selective(_) = self.recovery {
            return self.sr_response(now, psn, kind, (answer, payload), ctx);
        }
        match kind {
            Response::Acknowledge => {
                match ack_kind(answer, ctx)? {
                    AethKind::Ack { .. } => {
                        ctx.counters.acks_received += 1;
                        let outcome = self.acknowledge_before(now, psn.add(1), ctx);
                        let comp = self.comp_psn;
                        if let Some(g) = self.recovery.gbn() {
                            g.probe_answered(psn, comp);
                        }
                        outcome
                    }
                    AethKind::Nak(NakCode::PsnSequenceError) => {
                        ctx.counters.naks_received.psn_seq += 1;
                        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                            return Some(e);
                        }
                        self.retry(RetryCause::NakSequence, ctx)
                    }
                    AethKind::RnrNak { timer: code } => {
                        ctx.counters.naks_received.rnr += 1;
                        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                            return Some(e);
                        }
                        if !self.outstanding() {
                            return None;
                        }
                        if let Some(e) = self.rnr_wait(now, code, ctx) {
                            return Some(e);
                        }
                        // Then go back to the refused packet.
                        self.seek(self.comp_psn);
                        None
                    }
                    AethKind::Nak(code) => {
                        let status = self.fatal_nak(code, ctx);
                        if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                            return Some(e);
                        }
                        Some(status)
                    }
                    AethKind::Reserved(_) => {
                        ctx.counters.drops.protocol.bad_response += 1;
                        None
                    }
                }
            }
            Response::AtomicAcknowledge => {
                let (Some(aeth), Some(ack)) = (answer.aeth, answer.atomic_ack_eth) else {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                };
                if !matches!(aeth.kind(), AethKind::Ack { .. }) {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                }
                if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                    return Some(e);
                }
                let w = self.sq.front()?;
                if w.first_psn != psn
                    || !w.started
                    || !matches!(w.wr.op, SendOp::FetchAdd(_) | SendOp::CompareSwap { .. })
                {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                }
                let local = w.local;
                ctx.counters.acks_received += 1;
                ctx.mem.span_mut(local)[..8].copy_from_slice(&ack.orig.to_ne_bytes());
                self.comp_psn = psn.add(1);
                self.complete_head(CompletionStatus::Success, ctx);
                if self.req_psn.before(self.comp_psn) {
                    self.seek(self.comp_psn);
                }
                self.progress(now, ctx);
                None
            }
            Response::Read(seg) => self.read_response(now, psn, seg, answer, payload, ctx),
        }
    }

    /// A READ response under go-back-N: placed in order only.
    fn read_response(
        &mut self,
        now: Instant,
        psn: Psn,
        seg: Seg,
        answer: &Answer,
        payload: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        if let Some(a) = answer.aeth
            && !matches!(a.kind(), AethKind::Ack { .. })
        {
            ctx.counters.drops.protocol.bad_response += 1;
            return None;
        }
        // In order only: a later response means an earlier one was lost; the timer recovers. The
        // oldest READ's next response acknowledges nothing before it (no walk, one look at it).
        let next = |w: &Wqe| {
            matches!(w.wr.op, SendOp::Read) && w.started && psn == w.first_psn.add(w.received)
        };
        let w = match self.sq.front_mut() {
            Some(w) if next(w) => w,
            _ => {
                if let Some(e) = self.acknowledge_before(now, psn, ctx) {
                    return Some(e);
                }
                let Some(w) = self.sq.front_mut().filter(|w| next(w)) else {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                };
                w
            }
        };
        let k = w.received;
        let last = k + 1 == w.npkts;
        // A resumed READ may be answered MIDDLE/LAST (rxe) or FIRST/ONLY (a fresh response to the
        // reissued request); accept both, as long as the packet's end matches the message's end.
        let fits = match seg {
            Seg::First => !last,
            Seg::Middle => !last && k > 0,
            Seg::Last => last && k > 0,
            Seg::Only => last,
        };
        let want = packet::payload_len(u64::from(w.wr.len), ctx.cfg.pmtu, k);
        if !fits || payload.len() != want {
            ctx.counters.drops.protocol.bad_response += 1;
            return None;
        }
        let (start, local) = (k as usize * ctx.cfg.pmtu as usize, w.local);
        w.received += 1;
        // The last response retires the READ in hand: complete_head's work without a second look.
        let ok = |w: &Wqe| w.completion(CompletionStatus::Success, ctx.cfg.cq_tag);
        let done = last.then(|| w.wr.signaled.then(|| ok(w)));
        copy_payload(&mut ctx.mem.span_mut(local)[start..start + want], payload);
        self.comp_psn = psn.add(1);
        if let Some(c) = done {
            self.sq.drop_front(1);
            self.retired(true, c, ctx);
        }
        if self.req_psn.before(self.comp_psn) {
            self.seek(self.comp_psn);
        }
        self.progress(now, ctx);
        None
    }

    /// Everything before `limit` was received by the responder: completes the SEND/WRITE work
    /// requests that end before it. A READ/atomic that ends before it without its data means its
    /// responses were lost: go back N (implied NAK).
    /// Inlined to its first look: most answers (a READ's response) then pay no call to the walk.
    #[inline]
    fn acknowledge_before(&mut self, now: Instant, limit: Psn, ctx: &mut Ctx<'_>) -> Outcome {
        let w = self.sq.front()?;
        if !w.started || !w.first_psn.before(limit) {
            return None;
        }
        self.acknowledge_walk(now, limit, ctx)
    }

    /// [`acknowledge_before`](Self::acknowledge_before) once the oldest request starts before it.
    #[inline(never)]
    fn acknowledge_walk(&mut self, now: Instant, limit: Psn, ctx: &mut Ctx<'_>) -> Outcome {
        let before = self.comp_psn;
        while let Some(w) = self.sq.front() {
            if !w.started || !w.first_psn.before(limit) {
                break;
            }
            if w.is_read_or_atomic() {
                if w.last_psn().before(limit) {
                    self.comp_psn = w.first_psn.add(w.received);
                    if self.comp_psn != before {
                        self.progress(now, ctx);
                    }
                    return self.retry(RetryCause::ImpliedNak, ctx);
                }
                break;
            }
            if !w.last_psn().before(limit) {
                // Part of a long SEND/WRITE is acknowledged.
                if limit.after(self.comp_psn) {
                    self.comp_psn = limit;
                }
                break;
            }
            // It and the SEND/WRITEs behind it that end before `limit` retire in one pass.
            let (done, comp) = self.sq.retire_sends(limit, ctx);
            self.comp_psn = comp;
            self.cursor = self.cursor.saturating_sub(done);
        }
        if self.comp_psn != before {
            if self.req_psn.before(self.comp_psn) {
                self.seek(self.comp_psn);
            }
            self.progress(now, ctx);
        }
        None
    }

    /// Forward progress: fresh retry budgets, a round-trip sample when the timed packet is now
    /// acknowledged, the loss-reactive window's growth, and a fresh timer.
    #[inline]
    fn progress(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        self.retry_left = ctx.cfg.retry_cnt;
        self.rnr_left = ctx.cfg.rnr_retry;
        self.started_retry = false;
        self.rto.fast_spent = 0;
        if self.rto.timed().is_some_and(|p| p.before(self.comp_psn)) {
            self.rto.arrived(now);
        }
        let comp = self.comp_psn;
        if let Some(g) = self.recovery.gbn() {
            g.progress(comp, now);
        }
        self.rearm(now, ctx);
    }

    /// An RNR NAK with timer `code`: spends an RNR retry (7 means unlimited) and waits the peer's RNR
    /// time instead of the retransmit timeout; the QP's error once the retries are spent.
    fn rnr_wait(&mut self, now: Instant, code: u8, ctx: &mut Ctx<'_>) -> Outcome {
        if ctx.cfg.rnr_retry != 7 {
            if self.rnr_left == 0 {
                return Some(CompletionStatus::RnrRetryExceeded);
            }
            self.rnr_left -= 1;
        }
        self.timers.stop(Timer::Retransmit);
        let wait = timer::rnr_timer(code);
        self.timers.set(Timer::Rnr, now.saturating_add(wait));
        None
    }

    /// Counts a NAK that ends the QP and gives the status its oldest work request fails with.
    fn fatal_nak(&mut self, code: NakCode, ctx: &mut Ctx<'_>) -> CompletionStatus {
        match code {
            NakCode::InvalidRequest => {
                ctx.counters.naks_received.invalid_request += 1;
                CompletionStatus::RemoteInvalidRequestError
            }
            NakCode::RemoteAccessError => {
                ctx.counters.naks_received.remote_access += 1;
                CompletionStatus::RemoteAccessError
            }
            _ => {
                ctx.counters.naks_received.remote_operational += 1;
                CompletionStatus::RemoteOperationalError
            }
        }
    }

    /// Sends the probe ([`Requester::probe_psn`]) alone, with AckReq; transmission then goes on
    /// where it was.
    fn gbn_send_probe(&mut self, now: &mut impl Now, buf: &mut [u8], ctx: &mut Ctx<'_>) -> usize {
        let (comp, sent_high) = (self.comp_psn, self.sent_high);
        let g = self.recovery.gbn().expect("go-back-N with gbn_fast");
        let psn = g.take_probe(comp, sent_high);
        let w = self
            .sq
            .started_at(psn)
            .expect("a probe is sent while its work request is out");
        let k = psn.diff(w.first_psn) as u32;
        let sent = self.emit(&w, k, psn, None, true, buf, ctx);
        self.resent(now, sent, ctx)
    }

    /// Selective repeat: everything before `limit` reached the responder.
    #[inline]
    fn sr_cumulative(&mut self, limit: Psn) {
        let (comp, sent_high) = (self.comp_psn, self.sent_high);
        self.recovery
            .sack()
            .cumulative(limit, &mut self.sq, comp, sent_high);
    }

    /// Selective repeat: completes what is done from the oldest work request on and moves
    /// `comp_psn` to the first PSN still missing.
    fn sr_advance(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let before = self.comp_psn;
        while let Some(w) = self.sq.front().copied() {
            if !w.started {
                break;
            }
            let end = w.last_psn().add(1);
            let p = self.recovery.sack_ref().done_until(&w, self.comp_psn);
            self.comp_psn = p;
            if p != end {
                break;
            }
            self.complete_head(CompletionStatus::Success, ctx);
        }
        if self.comp_psn != before {
            let comp = self.comp_psn;
            self.recovery.sack().advance(comp);
            self.rto.fast_spent = 0;
            self.progress(now, ctx);
        }
    }

    /// Response `answer` at `psn` under selective repeat: recorded as what arrived, then work
    /// requests completed as far as everything before them is done. `Some(status)` ends the QP, as
    /// [`handle_response`](Requester::handle_response).
    fn sr_response(
        &mut self,
        now: Instant,
        psn: Psn,
        kind: Response,
        (answer, payload): (&Answer, &[u8]),
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        let heard = self.sr_heard();
        match kind {
            Response::Acknowledge => {
                match ack_kind(answer, ctx)? {
                    AethKind::Ack { .. } => {
                        ctx.counters.acks_received += 1;
                        self.sr_cumulative(psn.add(1));
                    }
                    AethKind::Nak(NakCode::PsnSequenceError) => {
                        ctx.counters.naks_received.psn_seq += 1;
                        self.sr_cumulative(psn);
                        let sent_high = self.sent_high;
                        self.recovery
                            .sack()
                            .sack(psn, payload, &mut self.sq, sent_high);
                    }
                    AethKind::RnrNak { timer: code } => {
                        ctx.counters.naks_received.rnr += 1;
                        self.sr_cumulative(psn);
                        self.sr_advance(now, ctx);
                        if !self.outstanding() {
                            return None;
                        }
                        return self.rnr_wait(now, code, ctx);
                    }
                    AethKind::Nak(code) => {
                        // Fatal, exactly as under go-back-N.
                        self.sr_cumulative(psn);
                        self.sr_advance(now, ctx);
                        return Some(self.fatal_nak(code, ctx));
                    }
                    AethKind::Reserved(_) => {
                        ctx.counters.drops.protocol.bad_response += 1;
                        return None;
                    }
                }
            }
            Response::AtomicAcknowledge => {
                let (Some(aeth), Some(ack)) = (answer.aeth, answer.atomic_ack_eth) else {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                };
                let w = self.sq.started_at(psn);
                let ok = matches!(aeth.kind(), AethKind::Ack { .. })
                    && w.is_some_and(|w| {
                        w.first_psn == psn
                            && matches!(w.wr.op, SendOp::FetchAdd(_) | SendOp::CompareSwap { .. })
                    });
                let Some(w) = w.filter(|_| ok) else {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                };
                ctx.counters.acks_received += 1;
                self.sr_cumulative(psn);
                if self.recovery.sack().atomic_answered(psn) {
                    ctx.mem.span_mut(w.local)[..8].copy_from_slice(&ack.orig.to_ne_bytes());
                }
            }
            Response::Read(_) => {
                if answer
                    .aeth
                    .is_some_and(|a| !matches!(a.kind(), AethKind::Ack { .. }))
                {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                }
                let Some(i) = self.sq.index_of(psn) else {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                };
                let w = *self.sq.get(i).expect("found");
                if !matches!(w.wr.op, SendOp::Read) {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                }
                let k = psn.diff(w.first_psn) as u32;
                let want = packet::payload_len(u64::from(w.wr.len), ctx.cfg.pmtu, k);
                if payload.len() != want {
                    ctx.counters.drops.protocol.bad_response += 1;
                    return None;
                }
                self.sr_cumulative(w.first_psn);
                if !self.recovery.sack().read_response(psn) {
                    ctx.counters.drops.protocol.stale_response += 1;
                    return None;
                }
                let start = k as usize * ctx.cfg.pmtu as usize;
                copy_payload(&mut ctx.mem.span_mut(w.local)[start..start + want], payload);
                let w = self.sq.get_mut(i).expect("found");
                w.received += 1;
                w.req_acked = true;
            }
        }
        let comp = self.comp_psn;
        self.recovery.sack().find_losses(&self.sq, comp);
        self.sr_advance(now, ctx);
        self.sr_time(now);
        // News of anything having arrived restarts the timer: the peer is alive and answering, and
        // what was lost meanwhile is found from the answers. A timeout is then a silence (a lost
        // tail, or a dead link), not a resend that waits behind a full window.
        if self.sr_heard() != heard {
            self.rto.fast_spent = 0;
            self.rearm(now, ctx);
        }
        None
    }

    /// What the requester has heard of under selective repeat: its oldest PSN not done, the
    /// cumulative ACK, the highest PSNs known to have arrived.
    fn sr_heard(&self) -> (Psn, (Psn, Psn, Psn)) {
        (self.comp_psn, self.recovery.sack_ref().heard())
    }

    /// Selective repeat: takes a round-trip sample when the packet being timed is known to have
    /// arrived.
    fn sr_time(&mut self, now: Instant) {
        let Some(p) = self.rto.timed() else {
            return;
        };
        let done = p.before(self.comp_psn)
            || self
                .sq
                .started_at(p)
                .is_some_and(|w| self.recovery.sack_ref().done(&w, p));
        if done {
            self.rto.arrived(now);
        }
    }

    /// Selective repeat's next resend, if any ([`Sack::next_resend`]), with AckReq.
    fn sr_poll_retransmit(
        &mut self,
        now: &mut impl Now,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<usize> {
        let comp = self.comp_psn;
        let r = self.recovery.sack().next_resend(&self.sq, comp)?;
        let frontier = self.sent_high;
        self.rto.cancel();
        let at = r.wqe.first_psn.add(r.k);
        let sent = self.emit(&r.wqe, r.k, at, r.read_pkts, true, buf, ctx);
        self.recovery.sack().resent(at, frontier, r.response);
        Some(self.resent(now, sent, ctx))
    }
}

/// The AETH of an Acknowledge; `None`, counted as a bad response, when it carries none.
#[inline]
fn ack_kind(answer: &Answer, ctx: &mut Ctx<'_>) -> Option<AethKind> {
    let kind = answer.aeth.map(|aeth| aeth.kind());
    if kind.is_none() {
        ctx.counters.drops.protocol.bad_response += 1;
    }
    kind
}
