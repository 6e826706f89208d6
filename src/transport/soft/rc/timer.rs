//! The engine's timers (a typed table, as in quinn-proto) and the IB timer encodings (roce-wire.md §6.7).

use std::time::Duration;

use super::time::Instant;

/// A timer of the queue pair. Each is either stopped or armed with a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The RNR wait: nothing is sent until it ends, then the refused packet goes again.
    Rnr = 0,
    /// The local ACK timeout: go back to the oldest unacknowledged PSN.
    Retransmit = 1,
    /// The pacer of a rate-limited queue pair (`--cc dcqcn` after a CNP): the next request may leave.
    Pace = 2,
}

impl Timer {
    /// Every timer, in the order `Qp::handle_timeout` fires the due ones.
    pub(crate) const VALUES: [Timer; 3] = [Timer::Rnr, Timer::Retransmit, Timer::Pace];
}

/// The deadline of every [`Timer`]; `None` where stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TimerTable {
    data: [Option<Instant>; Timer::VALUES.len()],
}

impl TimerTable {
    /// Arms `timer` to fire at `time`, replacing any earlier deadline.
    #[inline]
    pub(crate) fn set(&mut self, timer: Timer, time: Instant) {
        self.data[timer as usize] = Some(time);
    }

    /// The deadline of `timer`, if armed.
    #[inline]
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.data[timer as usize]
    }

    /// Stops `timer`.
    #[inline]
    pub(crate) fn stop(&mut self, timer: Timer) {
        self.data[timer as usize] = None;
    }

    /// Stops every timer.
    #[inline]
    pub(crate) fn stop_all(&mut self) {
        self.data = [None; Timer::VALUES.len()];
    }

    /// The earliest deadline of all, if any timer is armed.
    #[inline]
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        let [rnr, retransmit, pace] = self.data;
        // The retransmission timer alone (or none), as a poll finds it but for RNR waits and DCQCN's
        // pacer: two looks, where the minimum over all three takes a dozen instructions.
        if rnr.is_none() && pace.is_none() {
            return retransmit;
        }
        self.data.iter().flatten().min().copied()
    }

    /// True (and `timer` stopped) when `timer` is due at `now`; false, untouched, otherwise.
    #[inline]
    pub(crate) fn expire(&mut self, timer: Timer, now: Instant) -> bool {
        let due = self.get(timer).is_some_and(|t| t <= now);
        if due {
            self.stop(timer);
        }
        due
    }
}

/// RNR timer code to nanoseconds. Code 0 means 655.36 ms; rxe's typo for code 25 is not copied.
const RNR_TIMER_NS: [u64; 32] = [
    655_360_000,
    10_000,
    20_000,
    30_000,
    40_000,
    60_000,
    80_000,
    120_000,
    160_000,
    240_000,
    320_000,
    480_000,
    640_000,
    960_000,
    1_280_000,
    1_920_000,
    2_560_000,
    3_840_000,
    5_120_000,
    7_680_000,
    10_240_000,
    15_360_000,
    20_480_000,
    30_720_000,
    40_960_000,
    61_440_000,
    81_920_000,
    122_880_000,
    163_840_000,
    245_760_000,
    327_680_000,
    491_520_000,
];

/// Local ACK timeout for a 5-bit code, in nanoseconds: 4.096 µs × 2^code; code 0 disables the
/// timer (`None`).
#[inline]
pub(crate) fn ack_timeout_ns(code: u8) -> Option<u64> {
    match code & 0x1f {
        0 => None,
        c => Some(4096u64 << c),
    }
}

/// RNR NAK wait for a 5-bit timer code.
pub(crate) fn rnr_timer(code: u8) -> Duration {
    Duration::from_nanos(RNR_TIMER_NS[usize::from(code & 0x1f)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(d: Duration) -> u64 {
        d.as_nanos() as u64
    }

    #[test]
    fn ack_timeout_follows_4096ns_times_power_of_two() {
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8192));
        // perftest's default 14 is about 67 ms.
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(31), Some(4096u64 << 31));
    }

    #[test]
    fn rnr_timer_table_matches_the_spec_values() {
        assert_eq!(ns(rnr_timer(0)), 655_360_000);
        assert_eq!(ns(rnr_timer(1)), 10_000);
        assert_eq!(ns(rnr_timer(12)), 640_000);
        assert_eq!(ns(rnr_timer(25)), 61_440_000);
        assert_eq!(ns(rnr_timer(31)), 491_520_000);
        assert_eq!(ns(rnr_timer(32 + 1)), 10_000, "only the low 5 bits count");
    }

    #[test]
    fn table_arms_stops_and_expires_each_timer_apart() {
        let at = Instant::from_nanos;
        let mut t = TimerTable::default();
        assert_eq!(t.next_timeout(), None);
        t.set(Timer::Retransmit, at(50));
        t.set(Timer::Rnr, at(20));
        assert_eq!(t.next_timeout(), Some(at(20)));
        assert!(!t.expire(Timer::Retransmit, at(49)), "not due yet");
        assert!(t.expire(Timer::Rnr, at(20)), "due at its deadline");
        assert_eq!(t.get(Timer::Rnr), None, "an expired timer is stopped");
        assert!(!t.expire(Timer::Rnr, at(100)), "and fires once");
        assert_eq!(t.next_timeout(), Some(at(50)));
        t.stop(Timer::Retransmit);
        assert_eq!(t.next_timeout(), None);
        t.set(Timer::Rnr, at(1));
        t.set(Timer::Retransmit, at(2));
        t.stop_all();
        assert_eq!(t, TimerTable::default());
    }
}
