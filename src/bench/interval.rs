//! What a bandwidth loop reports while a run without end goes on: one sample per interval, and
//! whether it should stop (a signal, or the peer).
//!
//! The loop reads the clock anyway in duration mode; the ticker compares that time with the next
//! interval's end, so a quiet interval costs nothing and a report is one call a second.

use super::StopCheck;
use std::time::{Duration, Instant};

/// The messages of one interval of a running test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntervalSample {
    /// 0 for the first interval.
    pub index: u64,
    /// Nanoseconds from the start of the run to the start of the interval.
    pub start_ns: u64,
    /// Nanoseconds from the start of the run to its end.
    pub end_ns: u64,
    /// Messages completed (or received) in the interval.
    pub messages: u64,
}

impl IntervalSample {
    /// The interval's length in nanoseconds.
    pub(crate) fn elapsed_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// Where a run's interval samples go: every `every`, `sink` gets the interval's sample.
pub(crate) struct Intervals<'a> {
    /// The interval's length (`--report-interval`).
    pub every: Duration,
    /// Called at the end of each interval.
    pub sink: &'a mut dyn FnMut(&IntervalSample),
}

/// What a run hands its loop: where a run without end's interval samples go, and whether to stop
/// early (a signal on either side; the peer, in a run without end).
pub(crate) struct Hooks<'a> {
    /// The interval samples.
    pub intervals: Option<Intervals<'a>>,
    /// Asked at most every half millisecond; true ends the run (cleanly, with what it measured).
    pub stop: Option<&'a mut dyn FnMut() -> bool>,
}

impl<'a> Hooks<'a> {
    /// No intervals, no stop: a run that ends on its own.
    pub(crate) fn none() -> Hooks<'a> {
        Hooks {
            intervals: None,
            stop: None,
        }
    }
}

/// Splits a run into intervals and hands each to the sink.
pub(crate) struct Ticker<'a> {
    every: Duration,
    start: Instant,
    next: Instant,
    index: u64,
    last_at: Instant,
    last_count: u64,
    sink: &'a mut dyn FnMut(&IntervalSample),
}

impl<'a> Ticker<'a> {
    pub(crate) fn new(intervals: Intervals<'a>, start: Instant) -> Ticker<'a> {
        let Intervals { every, sink } = intervals;
        let every = every.max(Duration::from_millis(1));
        Ticker {
            every,
            start,
            next: start + every,
            index: 0,
            last_at: start,
            last_count: 0,
            sink,
        }
    }

    /// `count` messages so far at `now`: reports the interval that ended, if one did.
    #[inline]
    pub(crate) fn tick(&mut self, now: Instant, count: u64) {
        if now < self.next {
            return;
        }
        let ns = |t: Instant| t.duration_since(self.start).as_nanos() as u64;
        let sample = IntervalSample {
            index: self.index,
            start_ns: ns(self.last_at),
            end_ns: ns(now),
            messages: count - self.last_count,
        };
        (self.sink)(&sample);
        self.index += 1;
        self.last_at = now;
        self.last_count = count;
        // The next boundary on the original grid, skipping any the loop slept through.
        while self.next <= now {
            self.next += self.every;
        }
    }
}

/// Asks a [`Hooks`] stop at most every half millisecond.
pub(crate) struct Stopper<'a> {
    pace: StopCheck,
    stop: Option<&'a mut dyn FnMut() -> bool>,
}

impl<'a> Stopper<'a> {
    pub(crate) fn new(stop: Option<&'a mut dyn FnMut() -> bool>) -> Stopper<'a> {
        Stopper {
            pace: StopCheck::new(),
            stop,
        }
    }

    /// True once the hook said stop (when one is due to be asked).
    #[inline]
    pub(crate) fn stopped(&mut self) -> bool {
        match self.stop.as_mut() {
            Some(stop) => self.pace.check(&mut **stop),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_interval_reports_its_own_messages_on_the_grid() {
        let start = Instant::now();
        let mut got = Vec::new();
        let mut sink = |s: &IntervalSample| got.push(*s);
        let every = Duration::from_secs(1);
        let mut t = Ticker::new(
            Intervals {
                every,
                sink: &mut sink,
            },
            start,
        );
        let at = |ms: u64| start + Duration::from_millis(ms);
        t.tick(at(500), 10);
        t.tick(at(1000), 20);
        t.tick(at(1500), 25);
        // A loop that slept through two boundaries reports one long interval, then resumes the grid.
        t.tick(at(3200), 60);
        t.tick(at(3999), 70);
        t.tick(at(4000), 80);
        let spans: Vec<(u64, u64, u64, u64)> = got
            .iter()
            .map(|s| {
                (
                    s.index,
                    s.start_ns / 1_000_000,
                    s.end_ns / 1_000_000,
                    s.messages,
                )
            })
            .collect();
        assert_eq!(
            spans,
            [(0, 0, 1000, 20), (1, 1000, 3200, 40), (2, 3200, 4000, 20)]
        );
        assert_eq!(got[1].elapsed_ns(), 2_200_000_000);
    }
}
