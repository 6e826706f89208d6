//! The engine's virtual time: an instant on the caller's clock, passed in as `now`.

use std::time::Duration;

/// A point on the caller's monotonic clock, in nanoseconds from an epoch the caller picks.
///
/// The engine never reads a clock: every call that depends on time takes `now`, and
/// [`Qp::poll_timeout`](super::Qp::poll_timeout) answers on the same clock. An I/O backend counts from
/// its own start; a simulation starts at [`Instant::ZERO`] and jumps from event to event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// The instant `ns` nanoseconds after the epoch.
    #[inline]
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    /// Nanoseconds since the epoch.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `d` later, or the end of time if that does not fit: a deadline that never comes.
    #[inline]
    pub fn saturating_add(self, d: Duration) -> Instant {
        self.plus_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// `ns` nanoseconds later, at most the end of time (saturating, as `saturating_add`).
    #[inline]
    pub fn plus_ns(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }
}

/// Where the engine gets the time when it needs it: a fixed [`Instant`], or a closure that reads a
/// clock on first use. Most packets need none (a request; a send while the retransmission timer
/// already runs and no round trip is being timed), and a clock read costs more than their whole
/// bookkeeping, so the engine asks only where a timer is armed or a round trip timed.
pub trait Now {
    /// The time (a closure may read its clock on the first call and return the same value after).
    fn now(&mut self) -> Instant;
}

impl Now for Instant {
    #[inline]
    fn now(&mut self) -> Instant {
        *self
    }
}

impl<F: FnMut() -> Instant> Now for F {
    #[inline]
    fn now(&mut self) -> Instant {
        self()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_saturate_at_the_end_of_time() {
        let t = Instant::from_nanos(10);
        assert_eq!(t.saturating_add(Duration::from_nanos(5)).as_nanos(), 15);
        assert_eq!(
            Instant::from_nanos(u64::MAX - 1).saturating_add(Duration::from_nanos(5)),
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(t.saturating_add(Duration::MAX).as_nanos(), u64::MAX);
        assert!(Instant::ZERO < t);
    }
}
