//! The software rate limiter: bursts of `--burst_size` messages on an absolute schedule.
//!
//! Burst k is due at `k × burst ÷ rate` after the first, computed from the start rather than added up,
//! so rounding never accumulates and the long-run rate is the target exactly. The bandwidth loop asks
//! [`Pacer::grant`] with the monotonic time before posting (a busy-polling loop reads the clock
//! anyway; there is no sleep per message) and posts at most what it grants. A burst is released once
//! it is due and the previous one has been posted, so the messages sent never run ahead of the
//! schedule. A sender that fell behind (a loaded host deschedules a busy-polling process for tens of
//! milliseconds) sends its due bursts back to back until it has caught up, so the long-run rate holds;
//! one more than [`CATCH_UP`] behind (stopped, or slower than the target) drops the missed bursts and
//! starts the schedule again, so the achieved rate shows that it could not keep up.
//!
//! Pure: the caller supplies the time, so the tests drive it with a virtual clock.

/// How far behind its schedule a sender may fall and still catch up, in nanoseconds (at least a period).
pub(crate) const CATCH_UP: u64 = 1_000_000_000;

/// How to pace: messages per second and messages per burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PaceSpec {
    /// Target rate, messages per second (> 0).
    pub msgs_per_sec: f64,
    /// Messages released back to back each period (≥ 1).
    pub burst: u32,
}

impl PaceSpec {
    /// Nanoseconds between two bursts.
    pub(crate) fn period_ns(&self) -> f64 {
        f64::from(self.burst.max(1)) * 1e9 / self.msgs_per_sec
    }
}

/// The pacer's state. Times are nanoseconds on the caller's clock.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    period: f64,
    burst: u64,
    /// Lateness beyond which missed bursts are dropped, ns.
    catch_up: f64,
    /// Time of burst 0 of the current schedule (moved forward when the sender fell too far behind).
    origin: u64,
    /// Bursts released on the current schedule.
    released: u64,
    /// Messages the current burst may still send.
    budget: u64,
    /// When the last released burst was due.
    last_due: u64,
}

impl Pacer {
    /// A pacer whose first burst is due at `now`.
    pub(crate) fn new(spec: PaceSpec, now: u64) -> Pacer {
        let period = spec.period_ns();
        Pacer {
            period,
            burst: u64::from(spec.burst.max(1)),
            catch_up: period.max(CATCH_UP as f64),
            origin: now,
            released: 0,
            budget: 0,
            last_due: now,
        }
    }

    /// When burst `k` of the current schedule is due (rounded up: never ahead of the schedule).
    fn due(&self, k: u64) -> u64 {
        self.origin + (k as f64 * self.period).ceil() as u64
    }

    /// Messages that may be posted at `now` (0 until the next burst is due). A newly released burst is
    /// reported by [`Pacer::released`] changing.
    #[inline]
    pub(crate) fn grant(&mut self, now: u64) -> u64 {
        if self.budget == 0 {
            let due = self.due(self.released);
            if now < due {
                return 0;
            }
            if (now - due) as f64 > self.catch_up {
                // Too far behind to catch up: start a new schedule now.
                self.origin = now;
                self.released = 0;
            }
            self.last_due = self.due(self.released);
            self.released += 1;
            self.budget = self.burst;
        }
        self.budget
    }

    /// `n` granted messages were posted.
    #[inline]
    pub(crate) fn take(&mut self, n: u64) {
        self.budget = self.budget.saturating_sub(n);
    }

    /// When the burst released last was due (the schedule's time, not when it was noticed).
    pub(crate) fn last_due(&self) -> u64 {
        self.last_due
    }

    /// When the period of the burst released last ends: the earliest a next burst could be due.
    pub(crate) fn period_end(&self) -> u64 {
        self.due(self.released)
    }

    /// Bursts released since the schedule last started (a counter that changes on every release).
    pub(crate) fn released(&self) -> u64 {
        self.released
    }
}

/// A paced run's measurement window in duration mode: whole pacing periods, opened and closed on
/// burst releases, counting the messages the sender posted inside it (every one of them completes, or
/// the run fails). A window cut anywhere else would count a burst more or less than its length holds,
/// an error of a burst in the window's messages. Its length is the longer of the schedule's (the due
/// times of the two releases) and the real one (when they happened): a sender that kept up is measured
/// over whole periods, one that lagged behind its schedule over the time it really took.
#[derive(Debug, Clone, Default)]
pub(crate) struct PacedWindow {
    /// (due, real) times of the release that opened the window, ns.
    opened: Option<(u64, u64)>,
    /// The same for the release that closed it.
    closed: Option<(u64, u64)>,
    posted: u64,
    before_last_release: u64,
    /// Real time of the last release, ns.
    last_real: u64,
}

impl PacedWindow {
    /// A burst due at `due` was released at `real`, `inside` the sample window or not: `Some(true)`
    /// when this opens the window, `Some(false)` when it closes it (before any of the burst is posted).
    pub(crate) fn release(&mut self, due: u64, real: u64, inside: bool) -> Option<bool> {
        self.before_last_release = self.posted;
        self.last_real = real;
        if self.opened.is_none() && inside {
            self.opened = Some((due, real));
            Some(true)
        } else if self.is_open() && !inside {
            self.closed = Some((due, real));
            Some(false)
        } else {
            None
        }
    }

    /// The window's length in ns, once it has closed.
    pub(crate) fn elapsed_ns(&self) -> Option<u64> {
        let ((d0, r0), (d1, r1)) = self.opened.zip(self.closed)?;
        Some((d1 - d0).max(r1.saturating_sub(r0)))
    }

    fn is_open(&self) -> bool {
        self.opened.is_some() && self.closed.is_none()
    }

    /// One message posted.
    #[inline]
    pub(crate) fn posted(&mut self) {
        if self.is_open() {
            self.posted += 1;
        }
    }

    /// The run was stopped: an open window closes where the last burst (due at `last_due`) began,
    /// without that burst. True when it closed.
    pub(crate) fn stop(&mut self, last_due: u64) -> bool {
        let Some((d0, _)) = self.opened.filter(|_| self.is_open()) else {
            return false;
        };
        self.closed = Some((last_due.max(d0), self.last_real));
        self.posted = self.before_last_release;
        true
    }

    /// Messages posted inside the window.
    pub(crate) fn messages(&self) -> u64 {
        self.posted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender that looks at the pacer every `step` ns (plus seeded jitter up to `jitter` ns) and
    /// posts everything it is granted: the release times of every message.
    fn run(spec: PaceSpec, until: u64, step: u64, jitter: u64, seed: u64) -> Vec<u64> {
        let mut p = Pacer::new(spec, 0);
        let mut rng = seed | 1;
        let mut now = 0u64;
        let mut sent = Vec::new();
        while now < until {
            let g = p.grant(now);
            sent.extend(std::iter::repeat_n(now, g as usize));
            p.take(g);
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            now += step + if jitter > 0 { rng % jitter } else { 0 };
        }
        sent
    }

    /// The most messages released within any window of `window` ns.
    fn busiest(sent: &[u64], window: u64) -> usize {
        let mut best = 0;
        let mut lo = 0;
        for hi in 0..sent.len() {
            while sent[hi] - sent[lo] >= window {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }

    #[test]
    fn the_long_run_rate_is_the_target_exactly_when_the_sender_keeps_up() {
        // 1 Gb/s of 64 KiB messages = 1907.35 msg/s, bursts of 16; a sender that looks every 3-13 µs.
        let spec = PaceSpec {
            msgs_per_sec: 1e9 / (8.0 * 65536.0),
            burst: 16,
        };
        let sent = run(spec, 10_000_000_000, 3_000, 10_000, 7);
        let expected = 10.0 * spec.msgs_per_sec;
        let got = sent.len() as f64;
        // Whole bursts only: within one burst of 10 s × rate, never more than due.
        assert!(
            got <= expected + 16.0 && got >= expected - 16.0,
            "{got} vs {expected}"
        );
    }

    #[test]
    fn the_messages_sent_never_run_ahead_of_the_schedule() {
        // Whatever the sender's jitter, by any time t at most the bursts due by t have left, and a
        // window holds no more than its periods plus what the sender was behind when it began.
        for (burst, jitter, seed) in [(1, 0, 1), (8, 40_000, 2), (128, 900_000, 3), (5, 5_000, 4)] {
            let spec = PaceSpec {
                msgs_per_sec: 20_000.0,
                burst,
            };
            let period = spec.period_ns();
            let sent = run(spec, 2_000_000_000, 1_000, jitter, seed);
            for (i, &t) in sent.iter().enumerate() {
                let due = burst as usize * ((t as f64 / period).floor() as usize + 1);
                assert!(
                    i < due,
                    "burst {burst}: message {i} at {t} ns, {due} due by then"
                );
            }
            let behind = (jitter as f64 / period).ceil() as usize + 1;
            for window in [1_000u64, 50_000, 1_000_000, 20_000_000] {
                let periods = (window as f64 / period).floor() as usize;
                let allowed = burst as usize * (periods + 1 + behind);
                let got = busiest(&sent, window);
                assert!(
                    got <= allowed,
                    "burst {burst}: {got} messages in {window} ns, at most {allowed}"
                );
            }
        }
    }

    #[test]
    fn a_late_sender_catches_up_and_one_too_late_starts_again() {
        let spec = PaceSpec {
            msgs_per_sec: 1_000_000.0,
            burst: 4,
        };
        let mut p = Pacer::new(spec, 0);
        assert_eq!(p.grant(0), 4);
        p.take(4);
        assert_eq!(p.grant(1_000), 0, "the next burst is due at 4 µs");
        // 1 ms late: the bursts due meanwhile (the one due at 1 ms included) leave back to back.
        for k in 1..=250u64 {
            assert_eq!(p.grant(1_000_000), 4, "burst {k}");
            assert_eq!(p.last_due(), k * 4_000);
            p.take(4);
        }
        assert_eq!(p.grant(1_000_001), 0, "caught up");
        assert_eq!(p.period_end(), 1_004_000);
        // Stopped for more than CATCH_UP: the missed bursts are dropped and the schedule restarts.
        let later = 1_004_000 + CATCH_UP + 1;
        assert_eq!(p.grant(later), 4);
        assert_eq!(p.last_due(), later);
        p.take(4);
        assert_eq!(p.grant(later + 3_999), 0);
        assert_eq!(p.grant(later + 4_000), 4);
    }

    #[test]
    fn a_burst_is_granted_until_posted() {
        let mut p = Pacer::new(
            PaceSpec {
                msgs_per_sec: 1000.0,
                burst: 10,
            },
            500,
        );
        assert_eq!(p.grant(499), 0);
        assert_eq!(p.grant(500), 10);
        p.take(3);
        assert_eq!(p.budget, 7, "the burst still has messages to send");
        assert_eq!(p.grant(600), 7, "the rest of the burst, whatever the time");
        p.take(7);
        assert_eq!(p.budget, 0);
        assert_eq!(p.released(), 1);
        assert_eq!(p.grant(10_000_499), 0);
        assert_eq!(p.grant(10_000_500), 10);
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn the_window_counts_whole_bursts_between_releases() {
        let mut w = PacedWindow::default();
        assert_eq!(w.release(0, 3, false), None);
        w.posted();
        assert_eq!(w.release(100, 104, true), Some(true));
        for due in [200, 300] {
            (0..4).for_each(|_| w.posted());
            assert_eq!(w.release(due, due + 2, true), None);
        }
        (0..4).for_each(|_| w.posted());
        assert_eq!(w.elapsed_ns(), None);
        assert_eq!(w.release(400, 401, false), Some(false));
        w.posted();
        assert_eq!(w.messages(), 12, "three bursts between 100 and 400");
        assert_eq!(
            w.elapsed_ns(),
            Some(300),
            "released early at the end: the schedule's length"
        );
        assert!(!w.stop(400));
    }

    #[test]
    fn a_sender_behind_its_schedule_is_measured_over_the_time_it_took() {
        let mut w = PacedWindow::default();
        w.release(100, 100, true);
        (0..8).for_each(|_| w.posted());
        // The closing burst was due at 300 but released only at 450: 8 messages in 350 ns.
        w.release(300, 450, false);
        assert_eq!((w.messages(), w.elapsed_ns()), (8, Some(350)));
    }

    #[test]
    fn a_stop_closes_at_the_last_release_without_its_burst() {
        let mut w = PacedWindow::default();
        assert_eq!(w.release(0, 1, true), Some(true));
        (0..4).for_each(|_| w.posted());
        w.release(100, 120, true);
        (0..2).for_each(|_| w.posted());
        assert!(w.stop(100));
        assert_eq!((w.messages(), w.elapsed_ns()), (4, Some(119)));
    }
}
