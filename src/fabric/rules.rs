//! Outliers: which pairs a matrix flags (ClusterKit's tolerance rules by default), and whether a flagged
//! pair is explained by a bad host (slow with nearly every peer) or is a bad pair of its own.

use super::cell::{Grid, MatrixMetric, fmt_value};
use std::collections::BTreeMap;

/// ClusterKit's latency rule: a pair is an outlier above this many times the lowest latency.
pub(crate) const DEFAULT_LAT_FACTOR: f64 = 2.1;
/// ClusterKit's bandwidth rule: a pair is an outlier below this fraction of the highest bandwidth.
pub(crate) const DEFAULT_BW_FRACTION: f64 = 0.93;

/// The tolerance rules.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Rules {
    /// Flag a latency above `lat_factor` × the matrix's lowest.
    pub(crate) lat_factor: f64,
    /// Flag a bandwidth below `bw_fraction` × the matrix's highest.
    pub(crate) bw_fraction: f64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            lat_factor: DEFAULT_LAT_FACTOR,
            bw_fraction: DEFAULT_BW_FRACTION,
        }
    }
}

impl Rules {
    /// `--lat-factor 2.1` (or `2.1x`).
    pub(crate) fn parse_factor(text: &str) -> Result<f64, String> {
        let v: f64 = text
            .trim()
            .trim_end_matches(['x', 'X'])
            .parse()
            .map_err(|_| format!("--lat-factor {text:?}: give a factor such as 2.1"))?;
        if !(v.is_finite() && v > 1.0) {
            return Err(format!("--lat-factor {text}: the factor must be above 1"));
        }
        Ok(v)
    }

    /// `--bw-fraction 93%` or `0.93`.
    pub(crate) fn parse_fraction(text: &str) -> Result<f64, String> {
        let t = text.trim();
        let v = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => t.parse::<f64>(),
        }
        .map_err(|_| format!("--bw-fraction {text:?}: give a fraction such as 93% or 0.93"))?;
        if !(v > 0.0 && v < 1.0) {
            return Err(format!(
                "--bw-fraction {text}: the fraction must be between 0 and 100%"
            ));
        }
        Ok(v)
    }

    /// The limit a matrix's values are held to: `fraction × max` for bandwidth, `factor × min` for
    /// latency; None when no cell has a value.
    pub(crate) fn limit(&self, grid: &Grid, metric: MatrixMetric) -> Option<Limit> {
        let values = grid.iter().filter_map(|(_, c)| c.value(metric));
        if metric.higher_is_better() {
            let best = values.fold(f64::NAN, f64::max);
            best.is_finite().then_some(Limit {
                metric,
                reference: best,
                value: best * self.bw_fraction,
            })
        } else {
            let best = values.fold(f64::NAN, f64::min);
            best.is_finite().then_some(Limit {
                metric,
                reference: best,
                value: best * self.lat_factor,
            })
        }
    }
}

/// The limit of one matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Limit {
    /// The figure judged.
    pub metric: MatrixMetric,
    /// The matrix's best value (max bandwidth or min latency).
    pub reference: f64,
    /// The value a pair must not be worse than.
    pub value: f64,
}

impl Limit {
    /// Whether `v` is worse than the limit.
    pub(crate) fn breached(&self, v: f64) -> bool {
        if self.metric.higher_is_better() {
            v < self.value
        } else {
            v > self.value
        }
    }

    /// The rule in words: `bandwidth < 93% of the highest (11.52 Gb/s) = 10.71 Gb/s`.
    pub(crate) fn describe(&self, rules: &Rules) -> String {
        let m = self.metric;
        if m.higher_is_better() {
            format!(
                "{} < {:.0}% of the highest ({} {}) = {} {}",
                m.title(),
                rules.bw_fraction * 100.0,
                fmt_value(self.reference),
                m.unit(),
                fmt_value(self.value),
                m.unit()
            )
        } else {
            format!(
                "{} > {}x the lowest ({} {}) = {} {}",
                m.title(),
                rules.lat_factor,
                fmt_value(self.reference),
                m.unit(),
                fmt_value(self.value),
                m.unit()
            )
        }
    }
}

/// The pairs of a grid whose value breaches the limit, in (client, server) order.
pub(crate) fn flagged(grid: &Grid, limit: &Limit) -> Vec<(usize, usize)> {
    grid.iter()
        .filter(|(_, c)| c.value(limit.metric).is_some_and(|v| limit.breached(v)))
        .map(|(p, _)| p)
        .collect()
}

/// A host slow with nearly every peer it was measured with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct BadHost {
    /// Its rank.
    pub rank: usize,
    /// Peers with which at least one direction was flagged.
    pub(crate) flagged_peers: usize,
    /// Peers it has a measured cell with.
    pub(crate) measured_peers: usize,
}

/// Flagged pairs sorted into bad hosts and the pairs no bad host explains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Diagnosis {
    /// Hosts flagged with at least 3/4 of their measured peers (and at least two).
    pub(crate) bad_hosts: Vec<BadHost>,
    /// Flagged (client, server) pairs with no bad host in them.
    pub(crate) bad_pairs: Vec<(usize, usize)>,
}

/// Tells bad hosts from bad pairs: a host whose pairs are flagged with (nearly) every peer is the
/// common cause of them; what remains are pairs slow on their own (a cable, a switch port, a path).
pub(crate) fn diagnose(grid: &Grid, metric: MatrixMetric, flagged: &[(usize, usize)]) -> Diagnosis {
    let n = grid.n;
    let mut measured: BTreeMap<usize, std::collections::BTreeSet<usize>> = BTreeMap::new();
    for ((c, s), cell) in grid.iter() {
        if cell.value(metric).is_some() {
            measured.entry(c).or_default().insert(s);
            measured.entry(s).or_default().insert(c);
        }
    }
    let mut bad_peers: BTreeMap<usize, std::collections::BTreeSet<usize>> = BTreeMap::new();
    for &(c, s) in flagged {
        bad_peers.entry(c).or_default().insert(s);
        bad_peers.entry(s).or_default().insert(c);
    }
    let mut bad_hosts = Vec::new();
    for rank in 0..n {
        let m = measured.get(&rank).map_or(0, |s| s.len());
        let b = bad_peers.get(&rank).map_or(0, |s| s.len());
        // Two peers at least: with one, the host and the pair cannot be told apart.
        if b >= 2 && 4 * b >= 3 * m {
            bad_hosts.push(BadHost {
                rank,
                flagged_peers: b,
                measured_peers: m,
            });
        }
    }
    let is_bad = |r: usize| bad_hosts.iter().any(|h| h.rank == r);
    let bad_pairs = flagged
        .iter()
        .copied()
        .filter(|&(c, s)| !is_bad(c) && !is_bad(s))
        .collect();
    Diagnosis {
        bad_hosts,
        bad_pairs,
    }
}

#[cfg(test)]
mod tests;
