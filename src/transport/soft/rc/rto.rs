//! The requester's round-trip estimate and the fast retransmission timeout it gives.
//!
//! Between two roceperf endpoints (selective repeat, and go-back-N with `QpConfig::gbn_fast`) a
//! silence is answered after the measured round trip rather than the ACK timeout (`-u`, 67 ms by
//! default): a lost tail packet, a lost NAK or a lost resend costs a round trip, not 67 ms. The
//! timeout is RFC 6298's (smoothed round trip plus four deviations, Karn's rule), with a floor, and
//! doubles per timeout without progress until it would reach the ACK timeout; from there on the QP
//! backs off and spends its retry budget exactly as `-u` and `retry_cnt` say.

use super::config::QpConfig;
use super::psn::Psn;
use super::time::Instant;
use super::timer;

/// Packets out at most for the smaller floor (`QpConfig::rto_small_ns`: a ping-pong).
pub(super) const FEW_IN_FLIGHT: i32 = 3;

/// Round-trip estimate and fast timeouts spent.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Rto {
    /// The packet being timed and when it left (never a resent one: Karn's rule).
    timing: Option<(Psn, Instant)>,
    /// Smoothed round trip and its mean deviation, ns; 0 before the first sample.
    srtt_ns: u64,
    rttvar_ns: u64,
    /// Fast timeouts spent without progress (each doubles the next).
    pub fast_spent: u8,
}

impl Rto {
    /// Times the new packet `psn` sent at `now`, unless one is being timed already.
    pub(super) fn time(&mut self, psn: Psn, now: Instant) {
        if self.timing.is_none() {
            self.timing = Some((psn, now));
        }
    }

    /// Forgets the packet being timed (it is being resent: its answer would be ambiguous).
    pub(super) fn cancel(&mut self) {
        self.timing = None;
    }

    /// The packet being timed, if any.
    pub(super) fn timed(&self) -> Option<Psn> {
        self.timing.map(|(p, _)| p)
    }

    /// The timed packet is known to have arrived at `now`: one sample.
    pub(super) fn arrived(&mut self, now: Instant) {
        if let Some((_, sent)) = self.timing.take() {
            self.sample(now.as_nanos().saturating_sub(sent.as_nanos()));
        }
    }

    /// A round-trip sample (RFC 6298's smoothing).
    pub(super) fn sample(&mut self, rtt_ns: u64) {
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt_ns.max(1);
            self.rttvar_ns = rtt_ns / 2;
        } else {
            let dev = self.srtt_ns.abs_diff(rtt_ns);
            self.rttvar_ns = (3 * self.rttvar_ns + dev) / 4;
            self.srtt_ns = (7 * self.srtt_ns + rtt_ns) / 8;
        }
    }

    /// The fast retransmission timeout with `in_flight` PSNs out, or `None` once it would reach the
    /// configured ACK timeout (or either is off): the measured round trip plus four deviations, at
    /// least `rto_small_ns` with at most three packets out and `rto_ns` otherwise, doubled per
    /// timeout without progress. In nanoseconds: a deadline is then one add.
    #[inline]
    pub(super) fn fast_timeout_ns(&self, in_flight: i32, cfg: &QpConfig) -> Option<u64> {
        let floor = if in_flight <= FEW_IN_FLIGHT {
            cfg.rto_small_ns
        } else {
            cfg.rto_ns
        };
        let base = floor.max(self.srtt_ns + 4 * self.rttvar_ns);
        let t = base.checked_shl(u32::from(self.fast_spent))?;
        let limit = timer::ack_timeout_ns(cfg.timeout)?;
        (base > 0 && t < limit).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_follows_the_round_trip_and_gives_way_to_the_ack_timeout() {
        let cfg = QpConfig::new(1, 2, 0, 0, 0);
        let mut r = Rto::default();
        let us = |t: Option<u64>| t.map(|t| t / 1_000);
        // Floors before any sample: 0.25 ms with few packets out, 1 ms otherwise.
        assert_eq!(us(r.fast_timeout_ns(1, &cfg)), Some(250));
        assert_eq!(us(r.fast_timeout_ns(100, &cfg)), Some(1000));
        r.time(Psn::new(5), Instant::from_nanos(1_000));
        r.time(Psn::new(6), Instant::from_nanos(2_000));
        assert_eq!(
            r.timed(),
            Some(Psn::new(5)),
            "one packet is timed at a time"
        );
        r.arrived(Instant::from_nanos(4_001_000));
        assert_eq!(r.timed(), None);
        r.sample(4_000_000);
        let t = r.fast_timeout_ns(100, &cfg).unwrap();
        assert!(t > 4_000_000, "{t} ns");
        // Doubling per timeout without progress, until the 67 ms ACK timeout takes over.
        r.fast_spent = 2;
        assert_eq!(r.fast_timeout_ns(100, &cfg), Some(4 * t));
        r.fast_spent = 3;
        assert_eq!(r.fast_timeout_ns(100, &cfg), None);
        // No ACK timeout, no fast one either; a cancelled packet gives no sample.
        let off = QpConfig { timeout: 0, ..cfg };
        r.fast_spent = 0;
        assert_eq!(r.fast_timeout_ns(100, &off), None);
        r.time(Psn::new(9), Instant::ZERO);
        r.cancel();
        r.arrived(Instant::from_nanos(1 << 40));
        assert!(r.fast_timeout_ns(100, &cfg).unwrap() < 67_000_000);
    }
}
