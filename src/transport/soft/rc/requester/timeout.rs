//! What the requester's expired timers do: the end of an RNR wait, and a silence of the peer
//! (go back N, probe, or wait while this side holds the packet that would ask). Apart from the
//! transmission and response paths in `requester.rs`, whose state they move.

use super::super::ctx::Ctx;
use super::super::psn::Psn;
use super::super::recovery::{LossRecovery, RetryCause};
use super::super::time::Instant;
use super::super::timer::Timer;
use super::{Outcome, Requester};

impl Requester {
    /// Fires the timers due at `now`: the end of an RNR wait sends the refused packet again, the
    /// retransmission timer goes back (or probes, under selective repeat and `gbn`).
    pub(in super::super) fn handle_timeout(&mut self, now: Instant, ctx: &mut Ctx<'_>) -> Outcome {
        for timer in Timer::VALUES {
            if !self.timers.expire(timer, now) {
                continue;
            }
            match timer {
                // The RNR wait is over: send the refused packet again.
                Timer::Rnr => self.resend_unacknowledged(),
                // The pacer lets the next request go: the transmission that follows sends it.
                Timer::Pace => {}
                Timer::Retransmit => {
                    if !self.outstanding() {
                        continue;
                    }
                    if self.held_back(ctx) {
                        // Not a silence of the peer: nothing that left asked for an answer, and
                        // the next packet, which may go, is held on this side (the pacer, a PFC
                        // pause). It asks when it leaves, and the timer runs from then
                        // (`poll_transmit`); until then it waits, resending nothing.
                        self.noack_pkts = ctx.cfg.ack_req_every;
                        self.held_since_asked = true;
                        self.arm(now, ctx);
                        continue;
                    }
                    ctx.counters.timeouts += 1;
                    let outcome = match self.recovery {
                        LossRecovery::Selective(_) => self.sr_timeout(ctx),
                        LossRecovery::Probing(_) => self.gbn_timeout(ctx),
                        LossRecovery::GoBackN => self.retry(RetryCause::Timeout, ctx),
                    };
                    if outcome.is_some() {
                        return outcome;
                    }
                }
            }
        }
        None
    }

    /// What a fast timeout probes with: the oldest unacknowledged PSN, or the newest sent when none of
    /// the unacknowledged ones asked for an ACK (a latency test's unsignaled messages). Those were
    /// not in doubt until now: the silence doubts the newest, and asking with it answers for all of
    /// them in one round trip (and delivers it if it was the one lost), where the oldest, long
    /// delivered, would only move the question on to a second timeout.
    fn probe_psn(&self) -> Psn {
        if self.comp_psn.before(self.asked_high) {
            self.comp_psn
        } else {
            self.sent_high.sub(1)
        }
    }

    /// Whether an expired retransmission timer found the peer owing nothing and this side holding
    /// the packet that would ask: no packet out asked for an answer (all were unsignaled, or asked
    /// and were answered), the next one may go by the window, the endpoint's cap, the RNR wait
    /// and the READ/atomic limit, and the pacer (DCQCN limits the rate) or a PFC pause holds it.
    /// Timing out then would resend packets that are not lost, only not yet asked about. (Nothing
    /// held, the timeout stands: unsignaled packets may have been lost, and the responder owes no
    /// word on them.)
    fn held_back(&self, ctx: &Ctx<'_>) -> bool {
        let Some(w) = self.sq.get(self.cursor) else {
            return false;
        };
        (self.paused || self.rate.limited())
            && !self.comp_psn.before(self.asked_high)
            && self.req_psn.diff(self.comp_psn) < self.window(ctx).min(self.cap) as i32
            && self.timers.get(Timer::Rnr).is_none()
            && !(w.is_read_or_atomic()
                && !w.started
                && self.rd_atomic_inflight >= ctx.cfg.max_rd_atomic)
    }

    /// A timeout under go-back-N with `gbn`: a fast one sends the probe (or, when the oldest work
    /// request is a READ or atomic, asks for it again and goes back N) without spending the retry
    /// budget; past the fast ones, [`retry`](Requester::retry) as rxe.
    fn gbn_timeout(&mut self, ctx: &mut Ctx<'_>) -> Outcome {
        let in_flight = self.sent_high.diff(self.comp_psn);
        if !self.outstanding() || self.rto.fast_timeout_ns(in_flight, ctx.cfg).is_none() {
            return self.retry(RetryCause::Timeout, ctx);
        }
        let comp = self.comp_psn;
        if matches!(&self.recovery, LossRecovery::Probing(g) if g.suspects(comp)) {
            // The probe's ACK said the responder had nothing after it, and nothing came since.
            return self.retry(RetryCause::Probe, ctx);
        }
        ctx.counters.retries += 1;
        self.rto.fast_spent += 1;
        let read_or_atomic = self.sq.front().is_some_and(|w| w.is_read_or_atomic());
        if read_or_atomic || self.rto.timed() == Some(comp) {
            // Karn's rule: the packet timed is sent again, its answer may be the resend's, and a
            // sample that includes this timeout would lengthen the next one (a lost ping would
            // soon cost the ACK timeout again).
            self.rto.cancel();
        }
        self.noack_pkts = 0;
        self.timers.stop(Timer::Retransmit);
        let probe = self.probe_psn();
        let g = self.recovery.gbn().expect("go-back-N with gbn_fast");
        if read_or_atomic {
            g.schedule_probe(None);
            self.seek(comp);
        } else {
            g.schedule_probe(Some(probe));
        }
        None
    }

    /// A timeout under selective repeat: a fast one resends what is missing without spending the
    /// retry budget; past the fast ones, [`retry`](Requester::retry) as under go-back-N.
    fn sr_timeout(&mut self, ctx: &mut Ctx<'_>) -> Outcome {
        let in_flight = self.sent_high.diff(self.comp_psn);
        if self.outstanding() && self.rto.fast_timeout_ns(in_flight, ctx.cfg).is_some() {
            ctx.counters.retries += 1;
            self.rto.fast_spent += 1;
            self.noack_pkts = 0;
            self.timers.stop(Timer::Retransmit);
            // A probe, not the whole window: on a loaded host a fast timeout is as likely a peer
            // that was not scheduled as a loss, and its answer (with the SACKs of whatever did
            // arrive) shows what is really missing.
            let probe = self.probe_psn();
            self.rto.cancel();
            self.recovery.sack().probe(probe);
            return None;
        }
        self.retry(RetryCause::Timeout, ctx)
    }
}
