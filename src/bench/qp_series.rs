//! `--qp-series MS`: each queue pair's completed bytes sampled over the measured interval, into
//! memory reserved before the run (a sample is a copy into it, never an allocation).
//!
//! The drivers sample at the clock reads they already make when completions arrive, so a sample is
//! at most one turn of the loop late, and a stretch without any completion has no sample (the bytes
//! did not move): `t_ms` says when each one was really taken, and the bytes are cumulative, so a
//! rate between any two samples is exact whatever their spacing.

use crate::params::RunMode;
use crate::stats::flows::QpSeries;

/// At most this many values (samples × queue pairs) are kept: 8 MiB of counts. A run longer than
/// its share stops sampling there (`capped`), keeping the last sample for its end.
pub(crate) const MAX_VALUES: usize = 1 << 20;

/// Samples reserved for an iteration run, whose length is not known beforehand (100 s at 10 ms).
pub(crate) const ITERATION_RUN_SAMPLES: usize = 10_000;

/// Records one size's series.
#[derive(Debug)]
pub(crate) struct SeriesRecorder {
    interval_ms: u32,
    every_ns: u64,
    next_ns: u64,
    qps: usize,
    /// Periodic samples allowed; one more slot is kept for the last.
    cap: usize,
    t_ns: Vec<u64>,
    /// `qps` counts per sample, flat.
    bytes: Vec<u64>,
    capped: bool,
}

impl SeriesRecorder {
    /// A recorder for `qps` queue pairs sampled every `interval_ms`, its memory reserved for a run
    /// of `mode` (a timed run: its length; iterations: [`ITERATION_RUN_SAMPLES`]), within
    /// [`MAX_VALUES`].
    pub(crate) fn new(interval_ms: u32, qps: usize, mode: RunMode) -> SeriesRecorder {
        let interval_ms = interval_ms.max(1);
        let every_ns = u64::from(interval_ms) * 1_000_000;
        let wanted = match mode {
            RunMode::Duration { secs, .. } => (secs * 1_000 / u64::from(interval_ms)) as usize + 1,
            RunMode::Iterations(_) => ITERATION_RUN_SAMPLES,
        };
        let qps = qps.max(1);
        let cap = wanted.min((MAX_VALUES / qps).saturating_sub(1));
        SeriesRecorder {
            interval_ms,
            every_ns,
            next_ns: every_ns,
            qps,
            cap,
            t_ns: Vec::with_capacity(cap + 1),
            bytes: Vec::with_capacity((cap + 1) * qps),
            capped: false,
        }
    }

    /// Whether a sample is due `since_ns` after the start of the measured interval.
    #[inline]
    pub(crate) fn due(&self, since_ns: u64) -> bool {
        since_ns >= self.next_ns
    }

    /// Takes a sample: `messages[q]` of `size` bytes completed on queue pair `q` since the start.
    /// The next is due at the next multiple of the interval (intervals without a call are skipped).
    pub(crate) fn sample(&mut self, since_ns: u64, messages: &[u64], size: u64) {
        self.next_ns = (since_ns / self.every_ns + 1) * self.every_ns;
        if self.t_ns.len() >= self.cap {
            self.capped = true;
            return;
        }
        self.push(since_ns, messages, size);
    }

    fn push(&mut self, since_ns: u64, messages: &[u64], size: u64) {
        self.t_ns.push(since_ns);
        self.bytes
            .extend(messages.iter().take(self.qps).map(|&m| m * size));
    }

    /// The series, with its last sample taken at the interval's end (`since_ns`), where the counts
    /// are each queue pair's whole share; a sample taken at that very time already is replaced.
    pub(crate) fn finish(mut self, since_ns: u64, messages: &[u64], size: u64) -> QpSeries {
        if self.t_ns.last() == Some(&since_ns) {
            self.t_ns.pop();
            self.bytes.truncate(self.t_ns.len() * self.qps);
        }
        self.push(since_ns, messages, size);
        QpSeries {
            interval_ms: self.interval_ms,
            t_ms: self.t_ns.iter().map(|&t| t as f64 / 1e6).collect(),
            bytes: self.bytes.chunks(self.qps).map(<[u64]>::to_vec).collect(),
            capped: self.capped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn samples_fall_due_each_interval_and_skip_missed_ones() {
        let mut r = SeriesRecorder::new(10, 2, RunMode::Iterations(100));
        assert!(!r.due(9 * MS));
        assert!(r.due(10 * MS));
        r.sample(10 * MS + 5, &[1, 2], 100);
        assert!(!r.due(19 * MS), "the next is due at 20 ms");
        assert!(r.due(20 * MS));
        // Nothing completed for 25 ms: one sample, then due at the next multiple.
        r.sample(47 * MS, &[3, 2], 100);
        assert!(!r.due(49 * MS) && r.due(50 * MS));
        let s = r.finish(52 * MS, &[4, 2], 100);
        assert_eq!(s.interval_ms, 10);
        assert_eq!(s.t_ms, vec![10.000005, 47.0, 52.0]);
        assert_eq!(
            s.bytes,
            vec![vec![100, 200], vec![300, 200], vec![400, 200]]
        );
        assert!(!s.capped);
    }

    #[test]
    fn bytes_are_cumulative_and_the_last_sample_is_the_whole_share() {
        let mut r = SeriesRecorder::new(1, 3, RunMode::Iterations(10));
        let mut done = [0u64; 3];
        for t in 1..=5u64 {
            done[0] += 2;
            done[2] += 1;
            r.sample(t * MS, &done, 8);
        }
        // The end falls on a sample's time: that sample becomes the last, not a duplicate.
        let s = r.finish(5 * MS, &done, 8);
        assert_eq!(s.t_ms.len(), 5);
        assert!(
            s.bytes
                .windows(2)
                .all(|w| (0..3).all(|q| w[0][q] <= w[1][q]))
        );
        assert_eq!(s.bytes.last().unwrap(), &vec![80, 0, 40]);
    }

    #[test]
    fn a_timed_run_reserves_its_length_and_a_cap_keeps_the_end() {
        let r = SeriesRecorder::new(10, 4, RunMode::Duration { secs: 2, margin: 0 });
        assert_eq!(r.cap, 201);
        assert!(r.t_ns.capacity() >= 202 && r.bytes.capacity() >= 202 * 4);
        // So many queue pairs that only a few samples fit in MAX_VALUES.
        let qps = MAX_VALUES / 3;
        let mut r = SeriesRecorder::new(
            1,
            qps,
            RunMode::Duration {
                secs: 60,
                margin: 0,
            },
        );
        assert_eq!(r.cap, 2);
        let ones = vec![1u64; qps];
        for t in 1..=5u64 {
            r.sample(t * MS, &ones, 1);
        }
        let s = r.finish(6 * MS, &vec![7u64; qps], 1);
        assert!(s.capped);
        assert_eq!(s.t_ms, vec![1.0, 2.0, 6.0]);
        assert_eq!(s.bytes[2][qps - 1], 7);
    }
}
