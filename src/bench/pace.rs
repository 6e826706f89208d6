//! The software rate limiter: bursts of `--burst_size` messages on an absolute schedule.
//!
//! Burst k is due at `k × burst ÷ rate` after the first, computed from the start rather than added up,
//! so rounding never accumulates and the long-run rate is the target exactly. The bandwidth loop asks
//! [`Pacer::grant`] with the monotonic time before posting (a busy-polling loop reads the clock
//! anyway; there is no sleep per message) and posts at most what it grants. A burst is released once
//! the previous one has been posted: a sender up to one period late catches up without losing rate
//! (at most two bursts then leave back to back); one later than that has its missed bursts dropped,
//! not sent at once, so the achieved rate shows that the sender could not keep up.
//!
//! Pure: the caller supplies the time, so the tests drive it with a virtual clock.

/// How to pace: messages per second and messages per burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceSpec {
    /// Target rate, messages per second (> 0).
    pub msgs_per_sec: f64,
    /// Messages released back to back each period (≥ 1).
    pub burst: u32,
}

impl PaceSpec {
    /// Nanoseconds between two bursts.
    pub fn period_ns(&self) -> f64 {
        f64::from(self.burst.max(1)) * 1e9 / self.msgs_per_sec
    }
}

/// The pacer's state. Times are nanoseconds on the caller's clock.
#[derive(Debug, Clone)]
pub struct Pacer {
    period: f64,
    burst: u64,
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
    pub fn new(spec: PaceSpec, now: u64) -> Pacer {
        Pacer {
            period: spec.period_ns(),
            burst: u64::from(spec.burst.max(1)),
            origin: now,
            released: 0,
            budget: 0,
            last_due: now,
        }
    }

    /// When burst `k` of the current schedule is due.
    fn due(&self, k: u64) -> u64 {
        self.origin + (k as f64 * self.period) as u64
    }

    /// Messages that may be posted at `now` (0 until the next burst is due). A newly released burst is
    /// reported by [`Pacer::released`] changing.
    #[inline]
    pub fn grant(&mut self, now: u64) -> u64 {
        if self.budget == 0 {
            let due = self.due(self.released);
            if now < due {
                return 0;
            }
            if now >= self.due(self.released + 1) {
                // More than a period late: start a new schedule now rather than burst to catch up.
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
    pub fn take(&mut self, n: u64) {
        self.budget = self.budget.saturating_sub(n);
    }

    /// When the burst released last was due (the schedule's time, not when it was noticed).
    pub fn last_due(&self) -> u64 {
        self.last_due
    }

    /// When the period of the burst released last ends: the earliest a next burst could be due.
    pub fn period_end(&self) -> u64 {
        self.due(self.released)
    }

    /// True while the burst released last still has messages to send.
    pub fn in_burst(&self) -> bool {
        self.budget > 0
    }

    /// Bursts released since the schedule last started (a counter that changes on every release).
    pub fn released(&self) -> u64 {
        self.released
    }
}

/// A paced run's measurement window in duration mode: whole pacing periods, opened and closed on
/// burst releases at the schedule's times, counting the messages the sender posted inside it (every
/// one of them completes, or the run fails). A window cut anywhere else would count a burst more or
/// less than its length holds, an error of a burst in the window's messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct PacedWindow {
    opened: Option<u64>,
    closed: Option<u64>,
    posted: u64,
    before_last_release: u64,
}

impl PacedWindow {
    /// A burst due at `due` was released, `inside` the sample window or not: `Some(true)` when this
    /// opens the window, `Some(false)` when it closes it (before any of the burst is posted).
    pub(crate) fn release(&mut self, due: u64, inside: bool) -> Option<bool> {
        self.before_last_release = self.posted;
        if self.opened.is_none() && inside {
            self.opened = Some(due);
            Some(true)
        } else if self.is_open() && !inside {
            self.closed = Some(due);
            Some(false)
        } else {
            None
        }
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
        if !self.is_open() {
            return false;
        }
        self.closed = Some(last_due.max(self.opened.unwrap_or(0)));
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
    fn no_window_holds_more_than_its_periods_allow() {
        for (burst, jitter, seed) in [(1, 0, 1), (8, 40_000, 2), (128, 900_000, 3), (5, 5_000, 4)] {
            let spec = PaceSpec {
                msgs_per_sec: 20_000.0,
                burst,
            };
            let period = spec.period_ns();
            let sent = run(spec, 2_000_000_000, 1_000, jitter, seed);
            for window in [1_000u64, 50_000, 1_000_000, 20_000_000] {
                let periods = (window as f64 / period).floor() as usize;
                let allowed = burst as usize * (periods + 2);
                let got = busiest(&sent, window);
                assert!(
                    got <= allowed,
                    "burst {burst}: {got} messages in {window} ns, at most {allowed}"
                );
            }
        }
    }

    #[test]
    fn a_stalled_sender_does_not_burst_to_catch_up() {
        let spec = PaceSpec {
            msgs_per_sec: 1_000_000.0,
            burst: 4,
        };
        let mut p = Pacer::new(spec, 0);
        assert_eq!(p.grant(0), 4);
        p.take(4);
        assert_eq!(p.grant(1_000), 0, "the next burst is due at 4 µs");
        // A 1 ms stall: 250 bursts missed. One burst now, and the next a full period later.
        assert_eq!(p.grant(1_000_000), 4);
        assert_eq!(p.last_due(), 1_000_000);
        p.take(4);
        assert_eq!(p.grant(1_000_001), 0);
        assert_eq!(p.grant(1_004_000), 4);
        // Slightly late (less than a period): the schedule holds, so the rate is not lost.
        p.take(4);
        assert_eq!(p.grant(1_009_000), 4);
        assert_eq!(p.last_due(), 1_008_000);
        p.take(4);
        assert_eq!(p.period_end(), 1_012_000);
        assert_eq!(p.grant(1_011_999), 0);
        assert_eq!(p.grant(1_012_000), 4);
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
        assert!(p.in_burst());
        assert_eq!(p.grant(600), 7, "the rest of the burst, whatever the time");
        p.take(7);
        assert!(!p.in_burst());
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
        assert_eq!(w.release(0, false), None);
        w.posted();
        assert_eq!(w.release(100, true), Some(true));
        for due in [200, 300] {
            (0..4).for_each(|_| w.posted());
            assert_eq!(w.release(due, true), None);
        }
        (0..4).for_each(|_| w.posted());
        assert_eq!(w.release(400, false), Some(false));
        w.posted();
        assert_eq!(w.messages(), 12, "three bursts between 100 and 400");
        assert!(!w.stop(400));
    }

    #[test]
    fn a_stop_closes_at_the_last_release_without_its_burst() {
        let mut w = PacedWindow::default();
        assert_eq!(w.release(0, true), Some(true));
        (0..4).for_each(|_| w.posted());
        w.release(100, true);
        (0..2).for_each(|_| w.posted());
        assert!(w.stop(100));
        assert_eq!(w.messages(), 4);
    }
}
