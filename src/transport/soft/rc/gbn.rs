//! Go-back-N between two roceperf endpoints: a probe for silences, and a window that reacts to loss.
//!
//! Go-back-N pays for a loss with everything sent after it: the responder drops every packet after
//! a gap and NAKs once per gap (as rxe), so the requester resends its window, and a loss the NAK
//! cannot report (a lost tail packet, a lost NAK, a lost resend: the responder does not NAK the same
//! gap twice) waits for the ACK timeout, 67 ms at `-u 14`. With `QpConfig::gbn_fast` (set when both
//! ends are roceperf):
//!
//! * **A silence is probed after the round trip** (`rto.rs`), not after the ACK timeout: the
//!   oldest unacknowledged PSN is resent alone, with AckReq. An ACK beyond it means the peer was only
//!   slow (a descheduled peer costs one packet, not a window). An ACK that names exactly the probe
//!   while later PSNs sent before the probe are out means the responder had nothing after it when
//!   it answered: those were dropped (PSNs sent after the probe reach the responder after it, so its
//!   answer says nothing of them). That ACK may also be an older one of the same PSN, so the
//!   requester does not go back at once: anything new it sends makes the responder NAK the gap, and
//!   if nothing arrives for another timeout it goes back N itself. Past the fast timeouts (doubling
//!   until they would reach the ACK timeout), the ACK timeout and the retry budget work exactly as
//!   `-u` and `retry_cnt` say.
//! * **With `QpConfig::gbn_loss_window` (on between roceperf endpoints), the window is sized to what
//!   the path needs.** A loss costs the window: everything queued behind the lost packet is dropped
//!   by the responder and sent again, so a window far deeper than the bandwidth-delay product turns
//!   each loss into a standing queue's worth of resends. The window halves once per loss episode
//!   (a loss of something sent before the last cut is the same episode), down to rxe's 128 PSNs,
//!   and grows back by [`GROWTH`] PSNs per window acknowledged (at loss rate p it settles near
//!   √(8·GROWTH/(3p)) PSNs). But a cut must pay for itself: the first clean round after an episode
//!   (a window of PSNs acknowledged) is timed, and when its rate, less what a window's resends cost
//!   at the loss episodes seen so far per PSN, is below [`KEEP`] of the same for the round before
//!   the cut, the smaller window is what cost it (a host whose peer thread waits for a core needs
//!   the deep window to keep the link busy) and the window before the cut is restored.
//!
//! The responder and the wire are unchanged: this is the requester's own business and works against
//! any go-back-N responder, but it only runs between roceperf endpoints so that a run against rxe or
//! perftest behaves as theirs do (fixed window, the `-u` ACK timeout).

use super::psn::Psn;
use super::time::Instant;

/// The least the window is cut to: rxe's fixed window (never below the configured one).
const FLOOR: u32 = 128;
/// PSNs the window grows by per window of PSNs acknowledged.
const GROWTH: u32 = 8;
/// A cut window is kept when its first clean round's expected goodput is at least this share of the
/// round's before the cut (otherwise the window before the cut is restored).
const KEEP: f64 = 0.9;

/// A round being timed: from `start` (acknowledged at `at`) until `window` more PSNs are.
#[derive(Clone, Copy, Debug)]
struct Round {
    start: Psn,
    at: Instant,
    window: u32,
}

/// The probe in flight and the window.
#[derive(Clone, Copy, Debug)]
pub(super) struct GbnLoss {
    /// The window reacts to loss (`QpConfig::gbn_loss_window`); otherwise it stays `cap`.
    adaptive: bool,
    /// The window now, PSNs.
    window: u32,
    /// The configured window: the most it grows back to.
    cap: u32,
    /// A loss of a PSN before this one belongs to the episode that last cut the window.
    recover: Psn,
    /// PSNs acknowledged since the window last grew, times [`GROWTH`].
    credit: u64,
    /// How far acknowledgements had reached when growth was last counted.
    acked: Psn,
    /// The round being timed, if any (none during a loss episode).
    round: Option<Round>,
    /// The last clean round: its window and the PSNs per ns it delivered (0: none yet).
    clean: (u32, f64),
    /// Loss episodes (cuts) and PSNs acknowledged so far: the loss rate a window pays.
    episodes: u64,
    acked_total: u64,
    /// The probe a fast timeout asked for: `Some` until answered or overtaken by a go-back.
    probe: Option<Psn>,
    /// The probe is still to be sent.
    probe_due: bool,
    /// One past the newest PSN sent when the probe left: only PSNs before it can the probe's
    /// answer find missing (those sent after it reach the responder after it).
    sent_before_probe: Psn,
    /// The probe's ACK named it and nothing after it: the PSN after it is believed dropped, and the
    /// next silence goes back N to it (cleared when anything after it is acknowledged).
    suspect: Option<Psn>,
    /// The next resend may be timed (it follows a NAK or a probe's answer).
    time_resend: bool,
}

impl GbnLoss {
    /// A window of `cap` PSNs for a requester starting at `psn`, reacting to loss when `adaptive`.
    pub(super) fn new(psn: Psn, cap: u32, adaptive: bool) -> GbnLoss {
        GbnLoss {
            adaptive,
            window: cap,
            cap,
            recover: psn,
            credit: 0,
            acked: psn,
            round: None,
            clean: (cap, 0.0),
            episodes: 0,
            acked_total: 0,
            probe: None,
            probe_due: false,
            sent_before_probe: psn,
            suspect: None,
            time_resend: false,
        }
    }

    /// Unacknowledged PSNs allowed out now.
    pub(super) fn window(&self) -> u32 {
        self.window
    }

    /// A probe is waiting to be sent.
    pub(super) fn probe_due(&self) -> bool {
        self.probe_due
    }

    /// A fast timeout asks with `probe` (`None`: it goes back N at once, a READ or atomic being
    /// asked for again, and there is nothing to probe).
    pub(super) fn schedule_probe(&mut self, probe: Option<Psn>) {
        self.probe = probe;
        self.probe_due = probe.is_some();
    }

    /// Everything was acknowledged between the timeout and the probe's turn: nothing to ask.
    pub(super) fn cancel_probe(&mut self) {
        self.probe_due = false;
        self.probe = None;
    }

    /// The probe is sent now, with everything before `sent_high` sent: the PSN it asks with, the one
    /// chosen at the timeout unless an ACK since covered it (then `comp`, the oldest it left).
    pub(super) fn take_probe(&mut self, comp: Psn, sent_high: Psn) -> Psn {
        self.probe_due = false;
        self.sent_before_probe = sent_high;
        self.probe.filter(|p| !p.before(comp)).unwrap_or(comp)
    }

    /// An ACK of `psn` arrived and was applied, leaving `comp` the oldest unacknowledged PSN. When
    /// it names the probe exactly while PSNs sent before the probe left, after its PSN, are out, the
    /// responder had nothing after the probe when it answered: those PSNs were dropped, unless this
    /// ACK is an older one of the probe's PSN (sent before the probe arrived) and the rest is merely
    /// late. The next silence tells: it goes back N at once. PSNs sent after the probe prove
    /// nothing: they reach the responder after it, and a slow peer answers the probe first.
    pub(super) fn probe_answered(&mut self, psn: Psn, comp: Psn) {
        let Some(probe) = self.probe else { return };
        if psn.before(probe) {
            return;
        }
        self.probe = None;
        if psn == probe && comp.before(self.sent_before_probe) {
            self.suspect = Some(comp);
        }
    }

    /// The probe's answer made `comp` suspect and nothing came since: the silence goes back N.
    pub(super) fn suspects(&self, comp: Psn) -> bool {
        self.suspect == Some(comp)
    }

    /// The requester goes back to `lost` with everything before `sent_high` sent ([`lost`]), told
    /// to by the responder (a NAK or a probe's answer) or by its own timer. After the responder's
    /// word it holds nothing from `lost` on, and what was sent before the resend arrives before it:
    /// the resend's ACK is its own, a fair round-trip sample (Karn's rule forbids only ambiguous
    /// ones).
    ///
    /// [`lost`]: GbnLoss::lost
    pub(super) fn went_back(&mut self, lost: Psn, sent_high: Psn, told: bool) {
        self.lost(lost, sent_high);
        self.time_resend = told;
    }

    /// Whether the resend being sent may be timed (once per go-back).
    pub(super) fn take_time_resend(&mut self) -> bool {
        std::mem::take(&mut self.time_resend)
    }

    /// Everything before `comp` is acknowledged at `now`, after a silence or not: no probe is due
    /// any more, and the window reacts ([`acknowledged`](GbnLoss::acknowledged)).
    pub(super) fn progress(&mut self, comp: Psn, now: Instant) {
        if std::mem::take(&mut self.probe_due) {
            // Not a silence any more, and the probe never left: no ACK can be its answer.
            self.probe = None;
        }
        self.acknowledged(comp, now);
    }

    /// The requester goes back to `lost` with everything before `sent_high` sent: the probe is over,
    /// and the first loss of an episode halves an adaptive window (true when it did).
    pub(super) fn lost(&mut self, lost: Psn, sent_high: Psn) -> bool {
        self.probe = None;
        self.probe_due = false;
        self.suspect = None;
        if !self.adaptive || lost.before(self.recover) {
            return false;
        }
        self.recover = sent_high;
        self.window = (self.window / 2).max(FLOOR.min(self.cap));
        self.credit = 0;
        self.episodes += 1;
        // The round under way includes the loss; the next starts once the episode is over.
        self.round = None;
        true
    }

    /// Everything before `comp` is acknowledged at `now`: the window grows by [`GROWTH`] PSNs per
    /// window, and a clean round is timed (a cut that cost delivery rate is undone).
    pub(super) fn acknowledged(&mut self, comp: Psn, now: Instant) {
        let n = comp.diff(self.acked);
        if n <= 0 {
            return;
        }
        self.acked = comp;
        if self.suspect.is_some_and(|s| comp.after(s)) {
            self.suspect = None;
        }
        if !self.adaptive {
            return;
        }
        self.acked_total += n as u64;
        self.time_round(comp, now);
        if self.window >= self.cap {
            return;
        }
        self.credit += n as u64 * u64::from(GROWTH);
        let w = u64::from(self.window);
        let steps = self.credit / w;
        self.credit %= w;
        self.window = (w + steps).min(u64::from(self.cap)) as u32;
    }

    /// Rounds: one starts once a loss episode is over (everything sent before the cut is
    /// acknowledged) and ends when a window of PSNs more is; the round before a cut is the
    /// reference that the first round after it must keep [`KEEP`] of.
    fn time_round(&mut self, comp: Psn, now: Instant) {
        if comp.before(self.recover) {
            return;
        }
        let Some(r) = self.round else {
            self.round = Some(Round {
                start: comp,
                at: now,
                window: self.window,
            });
            return;
        };
        let psns = comp.diff(r.start);
        if psns < r.window as i32 {
            return;
        }
        let ns = now.as_nanos().saturating_sub(r.at.as_nanos()).max(1);
        let rate = f64::from(psns) / ns as f64;
        let (clean_window, clean_rate) = self.clean;
        // Goodput expected at a window: every episode resends about a window (1/(1 + p·W)).
        let p = self.episodes as f64 / self.acked_total.max(1) as f64;
        let goodput = |rate: f64, w: u32| rate / (1.0 + p * f64::from(w));
        if r.window < clean_window
            && goodput(rate, r.window) < KEEP * goodput(clean_rate, clean_window)
        {
            // The smaller window delivered less: the loss cost less than the cut does.
            self.window = self.window.max(clean_window);
            self.credit = 0;
        } else {
            self.clean = (r.window, rate);
        }
        self.round = Some(Round {
            start: comp,
            at: now,
            window: self.window,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_halves_once_per_episode_and_grows_back() {
        let p = Psn::new(0xff_ff00);
        let mut g = GbnLoss::new(p, 1024, true);
        assert_eq!(g.window(), 1024);
        g.acknowledged(p.add(5000), Instant::ZERO);
        assert_eq!(g.window(), 1024, "never above the configured window");
        assert!(g.lost(p.add(5000), p.add(6024)), "across the PSN wrap");
        assert_eq!(g.window(), 512);
        assert!(
            !g.lost(p.add(5100), p.add(6024)),
            "sent before the cut: same episode"
        );
        assert!(g.lost(p.add(6024), p.add(6500)));
        assert_eq!(g.window(), 256);
        for _ in 0..4 {
            g.lost(g.recover, g.recover.add(10));
        }
        assert_eq!(g.window(), FLOOR, "rxe's window at least");
        // One window of PSNs acknowledged grows it by GROWTH.
        let from = g.acked;
        g.acknowledged(from.add(FLOOR), Instant::ZERO);
        assert_eq!(g.window(), FLOOR + GROWTH);
        let mut small = GbnLoss::new(p, 64, true);
        small.lost(p, p.add(64));
        assert_eq!(small.window(), 64, "a window below the floor is not cut");
        let mut fixed = GbnLoss::new(p, 1024, false);
        assert!(!fixed.lost(p, p.add(1024)));
        assert_eq!(fixed.window(), 1024, "only an adaptive window reacts");
    }

    #[test]
    fn only_psns_sent_before_the_probe_can_its_answer_find_missing() {
        let p = Psn::new(0xff_fff0);
        // Whether the ACK naming `probe`, sent when everything before `sent_before` had left,
        // makes the PSN after it suspect (whatever left after the probe, it is not asked).
        let answer = |probe: Psn, sent_before: Psn| {
            let mut g = GbnLoss::new(p, 1024, false);
            g.schedule_probe(Some(probe));
            assert_eq!(g.take_probe(p, sent_before), probe);
            g.acknowledged(probe.add(1), Instant::ZERO);
            g.probe_answered(probe, probe.add(1));
            g.suspects(probe.add(1))
        };
        // The oldest PSN probed with 20 more out before it left: those never arrived.
        assert!(answer(p, p.add(21)), "across the PSN wrap");
        // The newest PSN probed: what was sent after it is behind it, not lost.
        assert!(!answer(p.add(20), p.add(21)));
        // A probe the ACK overtook before it left answers nothing (an earlier probe left with
        // 50 PSNs out, and the next silence scheduled another).
        let mut g = GbnLoss::new(p, 1024, false);
        g.schedule_probe(Some(p));
        g.take_probe(p, p.add(50));
        g.schedule_probe(Some(p));
        g.progress(p.add(1), Instant::ZERO);
        assert!(!g.probe_due());
        g.probe_answered(p, p.add(1));
        assert!(
            !g.suspects(p.add(1)),
            "the ACK of the original, not the probe's answer"
        );
    }

    #[test]
    fn a_cut_that_costs_goodput_is_undone() {
        let us = |u: u64| Instant::from_nanos(u * 1_000);
        // Half the rate at half the window is restored, unless losses are so frequent that the
        // deep window's resends cost more (40 episodes in 2560 PSNs).
        for (slower, lossy, restored) in [
            (true, false, true),
            (false, false, false),
            (true, true, false),
        ] {
            let p = Psn::new(0);
            let mut g = GbnLoss::new(p, 1024, true);
            g.acknowledged(p.add(1), us(0));
            g.acknowledged(p.add(1025), us(1000)); // a clean round: 1024 PSNs in 1 ms
            assert!(g.lost(p.add(1100), p.add(2049)));
            assert_eq!(g.window(), 512);
            g.acknowledged(p.add(2049), us(4000)); // the episode is over: the next round is timed
            if lossy {
                g.episodes = 40;
            }
            let w = g.window();
            // 512 PSNs in 1 ms (half the rate: the window was what kept the link busy) or in
            // 0.5 ms (the same rate: the deep window only queued).
            let end = if slower { 5000 } else { 4500 };
            g.acknowledged(p.add(2049 + 512), us(end));
            if restored {
                assert_eq!(g.window(), 1024, "restored");
            } else {
                assert!(g.window() >= w && g.window() < 1024, "{}", g.window());
            }
        }
    }
}
