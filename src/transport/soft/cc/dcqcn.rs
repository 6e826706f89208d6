//! DCQCN's reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
//! SIGCOMM'15, §3.1 and Fig. 6), with ConnectX's parameters ([`CcParams`]). Pure: it takes the
//! time (ns on the caller's clock) and the bytes sent, and answers the rate.
//!
//! - A CNP cuts: R_T ← R_C, R_C ← R_C·(1 − α/2), α ← (1 − g)·α + g; the stages restart.
//! - Every K (`rp_dce_tcp_rtt`) without a CNP: α ← (1 − g)·α.
//! - The timer (T, `rp_time_reset`) and the byte counter (B, `rp_byte_reset`) count their expiries
//!   since the last cut; at each, with F = `rp_threshold`: both below F, fast recovery
//!   R_C ← (R_T + R_C)/2; both at F or more, hyper increase R_T ← R_T + i·R_HAI (i = the smaller
//!   count − F + 1) then the same halving; otherwise additive increase R_T ← R_T + R_AI then the halving.
//!
//! Timer expiries and α's decay are applied when the caller next asks ([`Dcqcn::advance`]): the
//! result is the same as firing each on time, and an idle queue pair costs nothing.

use crate::params::CcParams;

/// Counts a reaction point keeps (mlx5 names where it has one).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RpStats {
    /// CNPs received for this queue pair (`rp_cnp_handled`).
    pub(crate) cnp_handled: u64,
    /// CNPs that cut the rate (the others came within `rp_rate_reduce_monitor_period` of a cut).
    pub(crate) rate_cuts: u64,
    /// The lowest rate any cut left, bit/s (0: never cut).
    pub(crate) min_rate_bps: f64,
}

/// Which increase an expiry made (for tests and traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Both counts below F.
    FastRecovery,
    /// One count at F or more.
    Additive,
    /// Both counts at F or more.
    Hyper,
}

/// One queue pair's reaction point.
#[derive(Clone, Debug)]
pub(crate) struct Dcqcn {
    /// g, α's gain.
    g: f64,
    /// The share of α a cut takes (1/2 at `rp_gd` 11).
    cut_share: f64,
    k_ns: u64,
    t_ns: u64,
    b_bytes: u64,
    f: u32,
    ai_bps: f64,
    hai_bps: f64,
    min_bps: f64,
    min_keep: f64,
    first_bps: f64,
    max_bps: f64,
    initial_alpha: f64,
    monitor_ns: u64,
    clamp: bool,
    clamp_ati: bool,
    /// Rate limiting is on: a cut happened and the rate has not climbed back to where it started.
    limited: bool,
    /// Where the rate started (what the first cut cut from), bit/s: the increase stops there.
    line_bps: f64,
    rc: f64,
    rt: f64,
    alpha: f64,
    /// When α was last updated.
    alpha_at: u64,
    /// When the current timer period began.
    timer_at: u64,
    /// Timer and byte-counter expiries since the last cut.
    t_count: u32,
    bc_count: u32,
    /// Bytes since the last byte-counter expiry.
    bytes: u64,
    last_cut: u64,
    /// A timer expiry raised the rate since the last cut (`rp_clamp_tgt_rate_ati`).
    timer_raised: bool,
    /// The last increase, for tests.
    pub(crate) last_stage: Option<Stage>,
    pub(crate) stats: RpStats,
}

const MBPS: f64 = 1e6;

impl Dcqcn {
    /// An idle reaction point: unlimited until its first CNP.
    pub(crate) fn new(p: &CcParams) -> Dcqcn {
        Dcqcn {
            g: f64::from(1024 - p.rp_dce_tcp_g) / 1024.0,
            cut_share: 2f64.powi(10 - p.rp_gd as i32),
            k_ns: u64::from(p.rp_dce_tcp_rtt) * 1000,
            t_ns: u64::from(p.rp_time_reset) * 1000,
            b_bytes: u64::from(p.rp_byte_reset),
            f: p.rp_threshold,
            ai_bps: f64::from(p.rp_ai_rate) * MBPS,
            hai_bps: f64::from(p.rp_hai_rate) * MBPS,
            min_bps: f64::from(p.rp_min_rate) * MBPS,
            min_keep: f64::from(p.rp_min_dec_fac) / 100.0,
            first_bps: f64::from(p.rp_rate_to_set_on_first_cnp) * MBPS,
            max_bps: f64::from(p.rp_max_rate) * MBPS,
            initial_alpha: f64::from(p.rp_initial_alpha_value) / 1024.0,
            monitor_ns: u64::from(p.rp_rate_reduce_monitor_period) * 1000,
            clamp: p.rp_clamp_tgt_rate != 0,
            clamp_ati: p.rp_clamp_tgt_rate_ati != 0,
            limited: false,
            line_bps: 0.0,
            rc: 0.0,
            rt: 0.0,
            alpha: 0.0,
            alpha_at: 0,
            timer_at: 0,
            t_count: 0,
            bc_count: 0,
            bytes: 0,
            last_cut: 0,
            timer_raised: false,
            last_stage: None,
            stats: RpStats::default(),
        }
    }

    /// True while the rate is limited (after a cut, until it is back where it started).
    #[inline]
    pub(crate) fn limited(&self) -> bool {
        self.limited
    }

    /// The current rate R_C, bit/s (`None` while unlimited).
    pub(crate) fn rate_bps(&self) -> Option<f64> {
        self.limited.then_some(self.rc)
    }

    /// The target rate R_T, bit/s (`None` while unlimited).
    #[cfg(test)]
    pub(crate) fn target_bps(&self) -> Option<f64> {
        self.limited.then_some(self.rt)
    }

    /// α (`None` before the first CNP).
    #[cfg(test)]
    pub(crate) fn alpha(&self) -> Option<f64> {
        (self.stats.cnp_handled > 0).then_some(self.alpha)
    }

    /// A CNP arrived at `now`; `sent_bps` is the rate the queue pair sent at before it (its
    /// starting rate when this is the first cut, unless `rp_max_rate` names one). True if it cut.
    pub(crate) fn on_cnp(&mut self, now: u64, sent_bps: impl FnOnce() -> f64) -> bool {
        self.stats.cnp_handled += 1;
        let first = !self.limited;
        if first {
            let start = if self.max_bps > 0.0 {
                self.max_bps
            } else {
                sent_bps().max(self.min_bps)
            };
            self.line_bps = start;
            self.rc = start;
            self.rt = start;
            self.alpha = self.initial_alpha;
            self.alpha_at = now;
            self.limited = true;
        } else {
            self.advance(now);
            if now.saturating_sub(self.last_cut) < self.monitor_ns {
                return false;
            }
        }
        if first && self.first_bps > 0.0 {
            self.rc = self.first_bps.min(self.line_bps);
            self.rt = self.rc;
        } else {
            if first || self.clamp || (self.clamp_ati && self.timer_raised) {
                self.rt = self.rc;
            }
            let keep = (1.0 - self.alpha * self.cut_share).max(self.min_keep);
            self.rc = (self.rc * keep).max(self.min_bps);
        }
        self.alpha = (1.0 - self.g) * self.alpha + self.g;
        self.alpha_at = now;
        self.timer_at = now;
        self.last_cut = now;
        self.t_count = 0;
        self.bc_count = 0;
        self.bytes = 0;
        self.timer_raised = false;
        self.stats.rate_cuts += 1;
        if self.stats.min_rate_bps == 0.0 || self.rc < self.stats.min_rate_bps {
            self.stats.min_rate_bps = self.rc;
        }
        true
    }

    /// Applies α's decays and the timer's expiries due by `now`.
    pub(crate) fn advance(&mut self, now: u64) {
        if !self.limited {
            return;
        }
        if self.k_ns > 0 && now >= self.alpha_at + self.k_ns {
            let n = (now - self.alpha_at) / self.k_ns;
            self.alpha *= (1.0 - self.g).powf(n as f64);
            self.alpha_at += n * self.k_ns;
        }
        while self.limited && now >= self.timer_at + self.t_ns {
            self.timer_at += self.t_ns;
            self.t_count = self.t_count.saturating_add(1);
            self.timer_raised = true;
            self.increase();
        }
    }

    /// `n` bytes left at the current rate: the byte counter runs.
    #[inline]
    pub(crate) fn on_sent(&mut self, n: u64) {
        if !self.limited {
            return;
        }
        self.bytes += n;
        while self.limited && self.bytes >= self.b_bytes {
            self.bytes -= self.b_bytes;
            self.bc_count = self.bc_count.saturating_add(1);
            self.increase();
        }
    }

    fn increase(&mut self) {
        let (lo, hi) = (
            self.t_count.min(self.bc_count),
            self.t_count.max(self.bc_count),
        );
        let stage = if hi < self.f {
            Stage::FastRecovery
        } else if lo >= self.f {
            self.rt += f64::from(lo - self.f + 1) * self.hai_bps;
            Stage::Hyper
        } else {
            self.rt += self.ai_bps;
            Stage::Additive
        };
        self.rt = self.rt.min(self.line_bps);
        self.rc = (self.rt + self.rc) / 2.0;
        self.last_stage = Some(stage);
        // Back where it started (within one additive step): the limiter lets go, as a ConnectX
        // frees a queue pair's rate limiter at line rate. Not when `rp_max_rate` names that line
        // rate: a NIC never sends above its line, and the soft transport's link (a veth) has
        // none, so a queue pair let go would send at the CPU's speed, many times a bottleneck's
        // rate; it stays paced at `rp_max_rate` instead, as the NIC's line would hold it.
        if self.max_bps == 0.0 && self.rt >= self.line_bps && self.line_bps - self.rc <= self.ai_bps
        {
            self.limited = false;
            self.rc = self.line_bps;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's setting where ConnectX's defaults differ: F = 5, R_T ← R_C on every CNP.
    fn paper() -> CcParams {
        CcParams {
            rp_threshold: 5,
            rp_clamp_tgt_rate: 1,
            rp_max_rate: 40_000,
            rp_rate_reduce_monitor_period: 0,
            ..CcParams::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn the_first_cnp_cuts_by_alpha_over_two_and_raises_alpha() {
        let p = paper();
        let mut rp = Dcqcn::new(&p);
        assert!(!rp.limited() && rp.rate_bps().is_none());
        assert!(rp.on_cnp(1_000, || unreachable!("rp_max_rate names the start")));
        let (r0, a0, g) = (40e9, 1023.0 / 1024.0, 5.0 / 1024.0);
        // R_T ← R_C; R_C ← R_C (1 − α/2); α ← (1 − g) α + g.
        assert_eq!(rp.target_bps(), Some(r0));
        assert!(close(rp.rate_bps().unwrap(), r0 * (1.0 - a0 / 2.0)));
        assert!(close(rp.alpha().unwrap(), (1.0 - g) * a0 + g));
        assert_eq!((rp.stats.cnp_handled, rp.stats.rate_cuts), (1, 1));
        assert_eq!(rp.stats.min_rate_bps, rp.rate_bps().unwrap());
    }

    #[test]
    fn alpha_decays_by_one_minus_g_every_k_without_a_cnp() {
        let mut rp = Dcqcn::new(&CcParams {
            rp_dce_tcp_rtt: 55,
            ..paper()
        });
        rp.on_cnp(0, || 0.0);
        let a1 = rp.alpha().unwrap();
        let g: f64 = 5.0 / 1024.0;
        rp.advance(54_999);
        assert!(close(rp.alpha().unwrap(), a1), "not a whole period yet");
        rp.advance(55_000 * 3 + 10);
        assert!(close(rp.alpha().unwrap(), a1 * (1.0 - g).powi(3)));
        // A second cut uses the decayed α, then raises it.
        let (rc, a) = (rp.rate_bps().unwrap(), rp.alpha().unwrap());
        rp.on_cnp(55_000 * 3 + 20, || 0.0);
        assert!(close(rp.rate_bps().unwrap(), rc * (1.0 - a / 2.0)));
        assert!(close(rp.alpha().unwrap(), (1.0 - g) * a + g));
    }

    #[test]
    fn recovery_is_fast_then_additive_then_hyper_as_the_equations_say() {
        let p = paper();
        let mut rp = Dcqcn::new(&p);
        // Two cuts, so that R_T (the first cut's R_C) sits below the starting rate and every
        // increase of it shows.
        rp.on_cnp(0, || 0.0);
        rp.on_cnp(1, || 0.0);
        let (mut rc, mut rt) = (rp.rate_bps().unwrap(), rp.target_bps().unwrap());
        assert!(rt < 40e9 / 1.9);
        let (ai, hai, t) = (5e6, 50e6, 300_000u64);
        let at = |i: u64| 1 + i * t;
        // Timer expiries 1-4 (T < F = 5, BC = 0): fast recovery, R_C ← (R_T + R_C)/2, R_T unchanged.
        for i in 1..=4u64 {
            rp.advance(at(i));
            rc = (rt + rc) / 2.0;
            assert_eq!(rp.last_stage, Some(Stage::FastRecovery), "expiry {i}");
            assert!(close(rp.rate_bps().unwrap(), rc) && close(rp.target_bps().unwrap(), rt));
        }
        // The fifth (T = F, BC = 0): additive increase, R_T ← R_T + R_AI, then the halving.
        rp.advance(at(5));
        rt += ai;
        rc = (rt + rc) / 2.0;
        assert_eq!(rp.last_stage, Some(Stage::Additive));
        assert!(close(rp.target_bps().unwrap(), rt) && close(rp.rate_bps().unwrap(), rc));
        // Byte-counter expiries 1-4 (T = 5, BC < 5): additive; the fifth (both at F): hyper, i = 1.
        for i in 1..=5 {
            rp.on_sent(32_767);
            let want = if i < 5 { Stage::Additive } else { Stage::Hyper };
            rt += if i < 5 { ai } else { hai };
            rc = (rt + rc) / 2.0;
            assert_eq!(rp.last_stage, Some(want), "byte expiry {i}");
            assert!(close(rp.target_bps().unwrap(), rt) && close(rp.rate_bps().unwrap(), rc));
        }
        // T = 7, BC = 6 after one more of each: i = min(T, BC) − F + 1 = 2.
        rp.advance(at(6));
        rt += hai;
        rc = (rt + rc) / 2.0;
        rp.on_sent(32_767);
        rt += 2.0 * hai;
        rc = (rt + rc) / 2.0;
        rp.advance(at(7));
        rt += 2.0 * hai;
        rc = (rt + rc) / 2.0;
        assert_eq!(rp.last_stage, Some(Stage::Hyper));
        assert!(close(rp.target_bps().unwrap(), rt) && close(rp.rate_bps().unwrap(), rc));
        // Half a period later nothing has expired.
        rp.advance(at(7) + t / 2);
        assert!(close(rp.rate_bps().unwrap(), rc));
    }

    #[test]
    fn connectx_bounds_hold_min_rate_min_dec_fac_monitor_period_and_first_rate() {
        let mut rp = Dcqcn::new(&CcParams {
            rp_min_rate: 10_000,
            rp_max_rate: 12_000,
            rp_rate_reduce_monitor_period: 4,
            ..CcParams::default()
        });
        rp.on_cnp(0, || 0.0);
        assert_eq!(rp.rate_bps(), Some(10e9), "never below rp_min_rate");
        assert!(
            !rp.on_cnp(3_999, || 0.0),
            "within the monitor period: handled, no cut"
        );
        assert_eq!((rp.stats.cnp_handled, rp.stats.rate_cuts), (2, 1));
        let mut rp = Dcqcn::new(&CcParams {
            rp_gd: 10, // a cut takes α whole; rp_min_dec_fac 50 keeps half
            rp_max_rate: 1_000,
            ..CcParams::default()
        });
        rp.on_cnp(0, || 0.0);
        assert_eq!(rp.rate_bps(), Some(500e6));
        let mut rp = Dcqcn::new(&CcParams {
            rp_rate_to_set_on_first_cnp: 300,
            ..CcParams::default()
        });
        rp.on_cnp(0, || 1e9);
        assert_eq!((rp.rate_bps(), rp.target_bps()), (Some(300e6), Some(300e6)));
    }

    #[test]
    fn the_limiter_lets_go_once_the_rate_is_back_where_it_started() {
        let mut rp = Dcqcn::new(&CcParams::default());
        rp.on_cnp(0, || 1e9);
        rp.advance(1_000_000_000);
        assert!(!rp.limited(), "a second of timer expiries climbs back");
        rp.on_sent(1 << 30);
        assert_eq!(rp.stats.rate_cuts, 1);
    }

    #[test]
    fn with_rp_max_rate_the_limiter_holds_at_that_line_rate_instead_of_letting_go() {
        let mut rp = Dcqcn::new(&CcParams {
            rp_max_rate: 1_000,
            ..CcParams::default()
        });
        rp.on_cnp(0, || unreachable!("rp_max_rate names the start"));
        rp.advance(1_000_000_000);
        rp.on_sent(1 << 30);
        assert!(rp.limited(), "still paced: the line rate is the limit");
        assert!(close(rp.rate_bps().unwrap(), 1e9), "{:?}", rp.rate_bps());
        assert!(close(rp.target_bps().unwrap(), 1e9));
    }
}
