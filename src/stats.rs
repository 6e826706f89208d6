//! HDR-histogram summaries (min, max, median, mean, stdev, percentiles), bandwidth and message rate.
//!
//! Everything here is a pure function of recorded numbers: no clock, no I/O. Latency values are recorded
//! in ONE-WAY nanoseconds and reported in microseconds; bandwidth is reported both in Gb/s (10^9 bit/s)
//! and MiB/s (2^20 byte/s) so that nobody has to guess which "MB" a number means.
//!
//! A percentile is reported only when at least 10 samples lie beyond it (n·(1 − p/100) ≥ 10: p99 needs
//! 1,000 samples, p99.9 10,000); otherwise it is withheld (None, JSON null) and every report says what
//! it needs ([`withheld_reason`]). This module owns that rule; the readers and writers ask it.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub mod flows;

/// Lowest latency the histogram tracks, in nanoseconds.
pub(crate) const LATENCY_LOWEST_NS: u64 = 1;
/// Highest latency the histogram tracks (100 s), in nanoseconds; record with `saturating_record`.
pub(crate) const LATENCY_HIGHEST_NS: u64 = 100_000_000_000;
/// Significant decimal digits the histogram keeps (relative error below 0.1 %).
pub(crate) const LATENCY_SIGFIG: u8 = 3;
/// perftest disables the BW peak above this many messages (its computation is quadratic there).
pub(crate) const PEAK_MAX_MESSAGES: usize = 20_000;

/// New latency histogram: 1 ns .. 100 s, 3 significant digits. Values are ONE-WAY nanoseconds
/// (the driver already divided the round trip by `TestKind::rtt_factor()`).
pub fn new_latency_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts, so this cannot fail at run time.
    Histogram::new_with_bounds(LATENCY_LOWEST_NS, LATENCY_HIGHEST_NS, LATENCY_SIGFIG)
        .expect("constant latency histogram bounds are valid")
}

/// Samples that must lie beyond a percentile before it is reported. With fewer, the "p99.9" of 1,000
/// samples is the largest one, and its value moves with a single outlier: a figure that does not hold.
pub(crate) const MIN_SAMPLES_BEYOND: u64 = 10;

/// How many samples `pct` needs to hold, n·(1 − pct/100) ≥ [`MIN_SAMPLES_BEYOND`]: p90 100, p99
/// 1,000, p99.9 10,000, p99.99 100,000; `u64::MAX` from p100 on (no sample ever lies beyond it).
///
/// `1 - 0.9` is 0.09999999999999998 in binary, so the quotient is rounded when it is within float
/// noise of a whole number, and rounded up otherwise.
pub(crate) fn samples_needed(pct: f64) -> u64 {
    let beyond = 1.0 - pct.clamp(0.0, 100.0) / 100.0;
    if beyond <= 0.0 {
        return u64::MAX;
    }
    let n = MIN_SAMPLES_BEYOND as f64 / beyond;
    let whole = n.round();
    let n = if (n - whole).abs() <= 1e-6 * whole.max(1.0) {
        whole
    } else {
        n.ceil()
    };
    // `as` saturates: a percentile a hair below 100 needs more samples than a u64 holds.
    n as u64
}

/// Whether a percentile of `samples` samples holds (at least [`MIN_SAMPLES_BEYOND`] lie beyond it).
pub(crate) fn percentile_holds(samples: u64, pct: f64) -> bool {
    samples >= samples_needed(pct)
}

/// Why a percentile is withheld, for a report: `needs 10,000 samples`.
pub fn withheld_reason(pct: f64) -> String {
    match samples_needed(pct) {
        u64::MAX => format!("no sample lies beyond {}: see max", percentile_label(pct)),
        n => format!("needs {} samples", thousands(n)),
    }
}

/// Why a result's `pct` is withheld, in a sentence: `p99.9 needs 10,000 samples (10 beyond it);
/// this result has 1,000`.
pub(crate) fn withheld_because(samples: u64, pct: f64) -> String {
    let label = percentile_label(pct);
    match samples_needed(pct) {
        u64::MAX => format!("no sample ever lies beyond {label}; the maximum is max"),
        n => format!(
            "{label} needs {} samples ({MIN_SAMPLES_BEYOND} beyond it); this result has {}",
            thousands(n),
            thousands(samples)
        ),
    }
}

/// The median of `values` (the mean of the two middle ones for an even count); None when empty.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let k = v.len();
    match k {
        0 => None,
        _ if k % 2 == 1 => Some(v[k / 2]),
        _ => Some((v[k / 2 - 1] + v[k / 2]) / 2.0),
    }
}

/// Jain's fairness index of `shares`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one takes
/// everything; None for no shares or all zero.
pub(crate) fn jain_index(shares: &[f64]) -> Option<f64> {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    (!shares.is_empty() && squares > 0.0).then(|| sum * sum / (shares.len() as f64 * squares))
}

/// `100000` as `100,000`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One latency percentile: `pct` in percent (99.9), value in microseconds unless withheld.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// The percentile in percent, e.g. 99.9.
    pub(crate) pct: f64,
    /// The latency at that percentile, in microseconds; None when withheld: fewer than
    /// [`MIN_SAMPLES_BEYOND`] samples lie beyond it ([`samples_needed`] says how many it needs).
    pub us: Option<f64>,
}

impl Percentile {
    /// The label used in reports and JSON keys: `p90`, `p99`, `p99.9`, `p99.99`.
    pub fn label(&self) -> String {
        percentile_label(self.pct)
    }
}

/// `p90`, `p99.9`: the shortest decimal form of the percentile, prefixed with `p`.
pub(crate) fn percentile_label(pct: f64) -> String {
    format!("p{pct}")
}

/// Latency summary in microseconds. max is the TRUE max (perftest hides the largest two samples).
/// stdev is a real standard deviation (perftest truncates to int). median = perftest's t_typical.
///
/// Its JSON adds `percentiles_withheld`, why each null percentile is null; read back, a percentile
/// that does not hold at `samples` is withheld whatever the file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "LatencyStatsRepr", from = "LatencyStatsRepr")]
pub struct LatencyStats {
    /// Number of samples in the histogram.
    pub samples: u64,
    /// Smallest sample, µs.
    pub min_us: f64,
    /// Largest sample (the true max, not perftest's second largest), µs.
    pub max_us: f64,
    /// Median (perftest's t_typical), µs.
    pub median_us: f64,
    /// Arithmetic mean (perftest's t_avg), µs.
    pub mean_us: f64,
    /// Population standard deviation, µs.
    pub(crate) stdev_us: f64,
    /// The requested percentiles, in the order asked for; those that do not hold are withheld.
    pub percentiles: Vec<Percentile>,
}

/// The serde form of [`LatencyStats`]: its fields, and why each withheld percentile is.
#[derive(Serialize, Deserialize)]
struct LatencyStatsRepr {
    samples: u64,
    min_us: f64,
    max_us: f64,
    median_us: f64,
    mean_us: f64,
    stdev_us: f64,
    #[serde(with = "percentile_map")]
    percentiles: Vec<Percentile>,
    /// Derived from `samples`: written for readers of the file, recomputed when read.
    #[serde(
        default,
        skip_deserializing,
        skip_serializing_if = "Withheld::is_empty"
    )]
    percentiles_withheld: Withheld,
}

impl From<LatencyStats> for LatencyStatsRepr {
    fn from(s: LatencyStats) -> Self {
        LatencyStatsRepr {
            percentiles_withheld: Withheld::of(&s.percentiles),
            samples: s.samples,
            min_us: s.min_us,
            max_us: s.max_us,
            median_us: s.median_us,
            mean_us: s.mean_us,
            stdev_us: s.stdev_us,
            percentiles: s.percentiles,
        }
    }
}

impl From<LatencyStatsRepr> for LatencyStats {
    fn from(r: LatencyStatsRepr) -> Self {
        LatencyStats {
            samples: r.samples,
            min_us: r.min_us,
            max_us: r.max_us,
            median_us: r.median_us,
            mean_us: r.mean_us,
            stdev_us: r.stdev_us,
            percentiles: r.percentiles,
        }
        .checked()
    }
}

impl LatencyStats {
    /// `percentiles` e.g. [90.0, 99.0, 99.9, 99.99]. Panics never; empty histogram -> all zeros, samples
    /// 0, every percentile withheld.
    ///
    /// Every figure carries the histogram's precision (3 significant digits): min is the lowest value
    /// equivalent to the smallest sample, max and the percentiles the highest value equivalent to theirs,
    /// so a reported max is never below the real one. Percentiles outside 0..=100 are clamped; NaN ones
    /// are dropped. A percentile with fewer than [`MIN_SAMPLES_BEYOND`] samples beyond it is withheld
    /// (its `us` is None).
    pub fn from_histogram(h: &Histogram<u64>, percentiles: &[f64]) -> LatencyStats {
        // NaN has no meaning and a repeated percentile would repeat a JSON key: drop both.
        let mut seen: Vec<f64> = Vec::with_capacity(percentiles.len());
        let wanted = percentiles.iter().copied().filter(move |p| {
            let fresh = !p.is_nan() && !seen.contains(p);
            if fresh {
                seen.push(*p);
            }
            fresh
        });
        let percentiles: Vec<Percentile> = wanted
            .map(|pct| Percentile {
                pct,
                us: held_value_at_percentile(h, pct).map(|ns| ns as f64 / 1000.0),
            })
            .collect();
        if h.is_empty() {
            return LatencyStats {
                samples: 0,
                min_us: 0.0,
                max_us: 0.0,
                median_us: 0.0,
                mean_us: 0.0,
                stdev_us: 0.0,
                percentiles,
            };
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencyStats {
            samples: h.len(),
            min_us: us(h.min()),
            max_us: us(h.max()),
            median_us: us(value_at_percentile(h, 50.0)),
            mean_us: h.mean() / 1000.0,
            stdev_us: h.stdev() / 1000.0,
            percentiles,
        }
    }

    /// The value of percentile `pct` if it was computed and holds, e.g. `get(99.9)`.
    pub fn get(&self, pct: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|p| p.pct == pct)
            .and_then(|p| p.us)
    }

    /// The value at `pct`, µs, as every report shows it: from `histogram` when it holds samples (so
    /// that every reader gets the same figure whatever `--percentiles` asked for), else from this
    /// summary; None when withheld (or neither has it).
    pub(crate) fn at(&self, histogram: &Histogram<u64>, pct: f64) -> Option<f64> {
        if histogram.is_empty() {
            self.get(pct)
        } else {
            held_value_at_percentile(histogram, pct).map(|ns| ns as f64 / 1000.0)
        }
    }

    /// This summary with every percentile that does not hold at its sample count withheld: what a
    /// reader makes of a summary it deserialized, whatever number the file gives.
    fn checked(mut self) -> LatencyStats {
        let n = self.samples;
        for p in &mut self.percentiles {
            if !percentile_holds(n, p.pct) {
                p.us = None;
            }
        }
        self
    }
}

/// Why each withheld percentile of a summary is withheld; in JSON, an object
/// `{"p99.9": {"reason": "not_enough_samples", "samples_needed": 10000}}` in the order asked for.
#[derive(Default)]
struct Withheld(Vec<f64>);

impl Withheld {
    /// The percentiles of `ps` that are withheld.
    fn of(ps: &[Percentile]) -> Withheld {
        Withheld(
            ps.iter()
                .filter(|p| p.us.is_none())
                .map(|p| p.pct)
                .collect(),
        )
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The machine-readable reason of a withheld percentile.
pub(crate) const WITHHELD_REASON: &str = "not_enough_samples";

impl Serialize for Withheld {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        #[derive(Serialize)]
        struct Why {
            reason: &'static str,
            /// None (JSON null) past p100, which no sample count reaches.
            samples_needed: Option<u64>,
        }
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for &pct in &self.0 {
            let needed = samples_needed(pct);
            let why = Why {
                reason: WITHHELD_REASON,
                samples_needed: (needed != u64::MAX).then_some(needed),
            };
            map.serialize_entry(&percentile_label(pct), &why)?;
        }
        map.end()
    }
}

/// The recorded value at `pct` when at least [`MIN_SAMPLES_BEYOND`] samples lie beyond it, else None.
pub(crate) fn held_value_at_percentile(h: &Histogram<u64>, pct: f64) -> Option<u64> {
    percentile_holds(h.len(), pct).then(|| value_at_percentile(h, pct))
}

/// The recorded value at percentile `pct` (clamped to 0..=100), immune to floating-point noise in the rank.
///
/// hdrhistogram takes the sample of rank `ceil(q * n)`; with `q = 99.9 / 100` and `n = 1000` that product is
/// 999.0000000000001, so it would return the 1000th sample instead of the 999th. A rank within 1e-6 of a
/// whole number is taken as that number.
pub(crate) fn value_at_percentile(h: &Histogram<u64>, pct: f64) -> u64 {
    let n = h.len() as f64;
    let mut q = (pct / 100.0).clamp(0.0, 1.0);
    let rank = q * n;
    let whole = rank.round();
    if whole >= 1.0 && (rank - whole).abs() < 1e-6 {
        // Half a sample below the whole rank: ceil() lands exactly on it.
        q = (whole - 0.5) / n;
    }
    h.value_at_quantile(q)
}

/// Bandwidth summary. Gb/s = 10^9 bits/s, MiB/s = 2^20 bytes/s, Mpps = 10^6 messages/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthStats {
    /// Payload bytes per message.
    pub(crate) msg_size: u64,
    /// Messages completed in the measured interval.
    pub messages: u64,
    /// First post to last completion, ns.
    pub elapsed_ns: u64,
    /// Average bandwidth, 10^9 bit/s.
    pub avg_gbps: f64,
    /// Average bandwidth, 2^20 byte/s.
    pub avg_mibps: f64,
    /// perftest's peak bandwidth, 10^9 bit/s; None when not measured.
    pub(crate) peak_gbps: Option<f64>,
    /// perftest's peak bandwidth, 2^20 byte/s; None when not measured.
    pub(crate) peak_mibps: Option<f64>,
    /// Average message rate, 10^6 messages/s.
    pub msg_rate_mpps: f64,
    /// A paced run (`--rate_limit`): its target and what this measurement achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<Pacing>,
    /// Each queue pair's share (the result's `qps`, lifted out of `bandwidth` by its serde form).
    #[serde(skip)]
    pub qps: Vec<flows::QpShare>,
    /// `--qp-series`: each queue pair's bytes over time (the result's `qp_series`, likewise).
    #[serde(skip)]
    pub qp_series: Option<Box<flows::QpSeries>>,
}

/// A paced run's target rate next to what it achieved, in the target's units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pacing {
    /// The target (`--rate_limit`).
    pub target: f64,
    /// What the measurement achieved, in the same units.
    pub achieved: f64,
    /// The units: `Gb/s`, `MiB/s` or `msg/s` (`--rate_units g`, `M`, `p`).
    pub units: String,
    /// `(achieved - target) / target`, in percent.
    pub error_pct: f64,
    /// Who paced: `SW` (roceperf's pacer).
    pub limiter: String,
    /// Messages per burst (`--burst_size`).
    pub burst_size: u32,
    /// Where the achieved rate was measured: `sender` or `receiver`.
    pub measured_at: String,
}

impl Pacing {
    /// The pacing of a measurement whose rate in the target's units is `achieved`.
    pub fn new(
        target: f64,
        achieved: f64,
        units: &str,
        limiter: &str,
        burst_size: u32,
        measured_at: &str,
    ) -> Pacing {
        let error_pct = if target > 0.0 {
            (achieved - target) / target * 100.0
        } else {
            0.0
        };
        Pacing {
            target,
            achieved,
            units: units.to_owned(),
            error_pct,
            limiter: limiter.to_owned(),
            burst_size,
            measured_at: measured_at.to_owned(),
        }
    }
}

const MIB: f64 = 1_048_576.0;

impl BandwidthStats {
    /// `best_ns_per_msg` is the peak as perftest defines it (see perftest_peak), None when not measured.
    ///
    /// Only payload bytes count, as in perftest. A zero `elapsed_ns` gives zero rates rather than infinity,
    /// and a non-positive or non-finite `best_ns_per_msg` gives no peak.
    pub fn compute(
        msg_size: u64,
        messages: u64,
        elapsed_ns: u64,
        best_ns_per_msg: Option<f64>,
    ) -> BandwidthStats {
        let bytes = msg_size as f64 * messages as f64;
        let (avg_gbps, avg_mibps, msg_rate_mpps) = if elapsed_ns == 0 {
            (0.0, 0.0, 0.0)
        } else {
            let ns = elapsed_ns as f64;
            // bits per ns = Gb/s; bytes per ns * 1e9 = bytes/s; messages per ns * 1e3 = Mpps.
            (
                bytes * 8.0 / ns,
                bytes * 1e9 / ns / MIB,
                messages as f64 * 1e3 / ns,
            )
        };
        let best = best_ns_per_msg.filter(|b| b.is_finite() && *b > 0.0);
        BandwidthStats {
            msg_size,
            messages,
            elapsed_ns,
            avg_gbps,
            avg_mibps,
            peak_gbps: best.map(|b| msg_size as f64 * 8.0 / b),
            peak_mibps: best.map(|b| msg_size as f64 * 1e9 / b / MIB),
            msg_rate_mpps,
            pacing: None,
            qps: Vec::new(),
            qp_series: None,
        }
    }
}

impl BandwidthStats {
    /// Both directions of a bidirectional run as perftest prints them: the sum of the two sides' rates
    /// (average, peak when both have one, message rate), their messages added, the longer elapsed time.
    pub(crate) fn combined(&self, other: &BandwidthStats) -> BandwidthStats {
        let both = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a + b);
        BandwidthStats {
            msg_size: self.msg_size,
            messages: self.messages + other.messages,
            elapsed_ns: self.elapsed_ns.max(other.elapsed_ns),
            avg_gbps: self.avg_gbps + other.avg_gbps,
            avg_mibps: self.avg_mibps + other.avg_mibps,
            peak_gbps: both(self.peak_gbps, other.peak_gbps),
            peak_mibps: both(self.peak_mibps, other.peak_mibps),
            msg_rate_mpps: self.msg_rate_mpps + other.msg_rate_mpps,
            // This side's target and rate: each side paces only what it sends.
            pacing: self.pacing.clone(),
            qps: flows::QpShare::combined(&self.qps, &other.qps),
            // The series is where this side's own operations completed.
            qp_series: self.qp_series.clone(),
        }
    }
}

/// perftest's BW peak: min over i <= j (j on cq_mod boundaries) of (tcompleted[j] - tposted[i]) / (j - i + 1)
/// in ns per message, where tposted[k] is the post time of message k and tcompleted[c] the time of the c-th
/// signaled completion (each stands for cq_mod messages). Returns None when there are too few samples or
/// messages > 20000 (perftest's cut-off). Must run in O(n) or O(n log n), not O(n^2).
///
/// Completion `c` closes message `j = min((c + 1) * cq_mod, n) - 1` (the last one may cover a partial
/// batch, as in perftest); completions beyond message `n - 1` are ignored, and `cq_mod == 0` counts as 1.
/// Unlike perftest the division is not truncated to whole clock ticks.
///
/// How: put post `i` at the point `A_i = (i, tposted[i])` and completion `c` at `B_c = (j + 1,
/// tcompleted[c])`; the quantity is the slope of segment `A_i -> B_c`. For a fixed `B_c` the smallest slope
/// comes from a point on the upper convex hull of `A_0..=A_j` (every other `A_i` lies below the line of
/// the best one), and because `B_c` lies right of all of them the slopes along the hull fall and then rise,
/// so a binary search finds it. The hull grows by a monotone chain (amortised O(1) per post), so the whole
/// computation is O(n log n) with exact integer geometry.
pub fn perftest_peak(tposted_ns: &[u64], tcompleted_ns: &[u64], cq_mod: u64) -> Option<f64> {
    let n = tposted_ns.len();
    if n == 0 || tcompleted_ns.is_empty() || n > PEAK_MAX_MESSAGES {
        return None;
    }
    let cq_mod = cq_mod.max(1) as usize;
    let mut hull: Vec<(i128, i128)> = Vec::with_capacity(n);
    let mut next_post = 0usize;
    let mut best: Option<f64> = None;
    for (c, &done) in tcompleted_ns.iter().enumerate() {
        let first_msg = c.saturating_mul(cq_mod);
        if first_msg >= n {
            break;
        }
        let j = first_msg.saturating_add(cq_mod).min(n) - 1;
        while next_post <= j {
            push_upper_hull(
                &mut hull,
                (next_post as i128, tposted_ns[next_post] as i128),
            );
            next_post += 1;
        }
        let b = ((j + 1) as i128, done as i128);
        let a = hull[tangent_index(&hull, b)];
        let per_msg = (b.1 - a.1) as f64 / (b.0 - a.0) as f64;
        best = Some(best.map_or(per_msg, |x: f64| x.min(per_msg)));
    }
    best
}

/// z-component of (a - o) x (b - o): positive when o -> a -> b turns left (counter-clockwise).
fn cross(o: (i128, i128), a: (i128, i128), b: (i128, i128)) -> i128 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

/// Appends `p` (x larger than every hull point) to an upper hull, dropping points no longer on it.
fn push_upper_hull(hull: &mut Vec<(i128, i128)>, p: (i128, i128)) {
    while hull.len() >= 2 && cross(hull[hull.len() - 2], hull[hull.len() - 1], p) >= 0 {
        hull.pop();
    }
    hull.push(p);
}

/// Index of the hull point with the smallest slope towards `b` (which lies right of the whole hull):
/// the first `k` for which `b` is not strictly below the line through hull points `k` and `k + 1`.
fn tangent_index(hull: &[(i128, i128)], b: (i128, i128)) -> usize {
    let (mut lo, mut hi) = (0usize, hull.len() - 1);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if cross(hull[mid], hull[mid + 1], b) < 0 {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Serde form of the percentile list: a JSON object `{"p90": 1.05, "p99.9": null}` in the order asked
/// for, null for a withheld percentile.
mod percentile_map {
    use super::{Percentile, percentile_label};
    use serde::de::{Error, MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub(crate) fn serialize<S: Serializer>(v: &[Percentile], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(v.len()))?;
        for p in v {
            map.serialize_entry(&percentile_label(p.pct), &p.us)?;
        }
        map.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Percentile>, D::Error> {
        struct PctVisitor;
        impl<'de> Visitor<'de> for PctVisitor {
            type Value = Vec<Percentile>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an object such as {\"p99\": 1.5} (percentile label to microseconds, or null)",
                )
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((key, us)) = map.next_entry::<String, Option<f64>>()? {
                    let pct = key
                        .strip_prefix('p')
                        .and_then(|n| n.parse::<f64>().ok())
                        .ok_or_else(|| {
                            A::Error::custom(format!(
                                "percentile key {key:?} is not like \"p99.9\""
                            ))
                        })?;
                    out.push(Percentile { pct, us });
                }
                Ok(out)
            }
        }
        d.deserialize_map(PctVisitor)
    }
}

#[cfg(test)]
mod tests;
