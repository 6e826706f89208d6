//! A run's place in a loss sweep (`roce_compare --loss-sweep`): the loss it met, how that loss was
//! made, and what repairing it cost. Carried by [`CompareRun::loss`](super::CompareRun::loss). And a
//! sweep's points flattened, as its table, `loss.csv` and plots show them.

use super::{CompareRun, CompareSet};
use crate::params::{Recovery, TestKind};
use serde::{Deserialize, Serialize};

/// One run of a loss sweep: a transport (and recovery) at one loss rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    /// The curve it belongs to: `RoCE v2 gbn`, `RoCE v2 sr`, `RoCE v1 gbn`, `TCP`.
    pub series: String,
    /// Probability that a packet is lost, each direction, 0.0..=1.0.
    pub rate: f64,
    /// Mean length of a loss burst (Gilbert–Elliott), when losses came in bursts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<f64>,
    /// The loss recovery of a RoCE run; absent for TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// How the loss was made, e.g. `iptables statistic (INPUT, both namespaces)`.
    pub via: String,
    /// Payload bytes the run delivered.
    pub delivered_bytes: u64,
    /// Payload bytes sent again (both sides; TCP: retransmitted segments × MSS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmitted_bytes: Option<u64>,
    /// NAKs (PSN sequence error) received; TCP: fast retransmissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naks: Option<u64>,
    /// Retransmission timeouts, both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<u64>,
    /// Goodput relative to the same series' loss-free run (bandwidth tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<f64>,
}

impl LossPoint {
    /// Retransmitted bytes per delivered byte.
    pub fn retransmitted_per_byte(&self) -> Option<f64> {
        let r = self.retransmitted_bytes?;
        (self.delivered_bytes > 0).then(|| r as f64 / self.delivered_bytes as f64)
    }
}

/// `1%`, `0.01%`: a loss rate as tables, labels and files show it.
pub(crate) fn rate_text(p: f64) -> String {
    let s = format!("{:.4}", p * 100.0);
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

/// One (run, size) of a loss sweep, flattened: what its table, its CSV and its plots show.
pub(crate) struct SweepPoint<'a> {
    /// The run.
    pub(crate) run: &'a CompareRun,
    /// Its place in the sweep.
    pub(crate) loss: &'a LossPoint,
    /// The message size.
    pub(crate) size: u64,
    /// Goodput, bandwidth tests.
    pub(crate) gbps: Option<f64>,
    /// Median latency, latency tests that measured something.
    pub(crate) p50_us: Option<f64>,
    /// p99 latency, likewise.
    pub(crate) p99_us: Option<f64>,
    /// p99.9 latency, likewise.
    pub(crate) p999_us: Option<f64>,
}

/// Every (run, size) of the runs of `set` that carry a loss point, in order.
pub(crate) fn sweep_points(set: &CompareSet) -> Vec<SweepPoint<'_>> {
    set.runs
        .iter()
        .filter_map(|run| Some((run, run.loss.as_ref()?)))
        .flat_map(|(run, loss)| {
            run.results.iter().map(move |r| {
                let f = r.figures();
                // A latency run that measured nothing (every sample lost to the loss) has no figures.
                let measured = !matches!(&r.measured, super::Measured::Latency { stats, .. } if stats.samples == 0);
                let lat = f.latency().filter(|_| measured);
                SweepPoint {
                    run,
                    loss,
                    size: r.size,
                    gbps: f.bandwidth().map(|b| b.gbps),
                    p50_us: lat.map(|l| l.median_us),
                    p99_us: lat.and_then(|l| l.p99_us),
                    p999_us: lat.and_then(|l| l.p999_us),
                }
            })
        })
        .collect()
}

/// The (test, size) pairs of the sweep, in order, and the series and rates present (rates sorted).
pub(crate) fn sweep_shape(pts: &[SweepPoint]) -> (Vec<(TestKind, u64)>, Vec<String>, Vec<f64>) {
    let mut cases = Vec::new();
    let mut series = Vec::new();
    let mut rates: Vec<f64> = Vec::new();
    for p in pts {
        if !cases.contains(&(p.run.test, p.size)) {
            cases.push((p.run.test, p.size));
        }
        if !series.contains(&p.loss.series) {
            series.push(p.loss.series.clone());
        }
        if !rates.contains(&p.loss.rate) {
            rates.push(p.loss.rate);
        }
    }
    rates.sort_by(f64::total_cmp);
    (cases, series, rates)
}

/// The columns of `loss.csv`.
pub(crate) const LOSS_COLUMNS: &[&str] = &[
    "test",
    "size_bytes",
    "series",
    "transport",
    "roce",
    "recovery",
    "loss_pct",
    "burst",
    "via",
    "goodput_gbps",
    "relative_goodput",
    "delivered_bytes",
    "retransmitted_bytes",
    "retransmitted_per_delivered",
    "naks",
    "timeouts",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p99_9_us",
];

/// `loss.csv`: one row per run and size.
pub(crate) fn loss_csv(set: &CompareSet) -> Result<String, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(LOSS_COLUMNS)?;
    let f = |v: Option<f64>, d: usize| v.map_or_else(String::new, |v| format!("{v:.d$}"));
    let n = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    for p in sweep_points(set) {
        let l = p.loss;
        w.write_record([
            p.run.test.name().to_string(),
            p.size.to_string(),
            l.series.clone(),
            p.run.transport.name().to_string(),
            p.run.roce.map(|r| r.name().to_string()).unwrap_or_default(),
            l.recovery.map(|r| r.name().to_string()).unwrap_or_default(),
            format!("{}", l.rate * 100.0),
            l.burst.map(|b| b.to_string()).unwrap_or_default(),
            l.via.clone(),
            f(p.gbps, 6),
            f(l.relative, 4),
            l.delivered_bytes.to_string(),
            n(l.retransmitted_bytes),
            f(l.retransmitted_per_byte(), 6),
            n(l.naks),
            n(l.timeouts),
            f(p.p50_us, 3),
            f(p.p99_us, 3),
            f(p.p999_us, 3),
        ])?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
