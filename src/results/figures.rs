//! The figures reports and gates compare: one family, bandwidth or latency, for every reader.
//!
//! Average bandwidth and message rate for a bandwidth result; median, p99, p99.9 and true maximum for
//! a latency result. Latency percentiles come from the histogram, so every transport gets the same
//! percentiles whatever it was asked to report (a result without samples falls back to its summary),
//! and a percentile with fewer than 10 samples beyond it is withheld (None), never a number.

use super::{Measured, SizeResult};
use crate::stats::LatencyStats;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Bandwidth figures. Their serde form (a repetition's figures in `compare.json`) uses the result
/// files' key names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BandwidthFigures {
    /// Average, Gb/s.
    #[serde(rename = "avg_gbps")]
    pub gbps: f64,
    /// Average message rate, Mpps.
    #[serde(rename = "msg_rate_mpps")]
    pub mpps: f64,
}

/// Latency figures, one-way µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigures {
    /// Samples the figures rest on (0: not known, in a file that did not say).
    #[serde(default)]
    pub samples: u64,
    /// Median.
    pub median_us: f64,
    /// 99th percentile; None (JSON null) when withheld: fewer than 1,000 samples.
    pub p99_us: Option<f64>,
    /// 99.9th percentile; None (JSON null) when withheld: fewer than 10,000 samples.
    #[serde(rename = "p99_9_us")]
    pub p999_us: Option<f64>,
    /// True maximum.
    pub max_us: f64,
}

/// The figures of one result: bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Figures {
    /// A bandwidth test.
    Bandwidth(BandwidthFigures),
    /// A latency test.
    Latency(LatencyFigures),
}

impl LatencyFigures {
    /// The figures of a latency summary and its histogram (percentiles from the histogram when it has
    /// samples, else from the summary).
    pub fn of(stats: &LatencyStats, histogram: &Histogram<u64>) -> LatencyFigures {
        LatencyFigures {
            samples: if histogram.is_empty() {
                stats.samples
            } else {
                histogram.len()
            },
            median_us: stats.median_us,
            p99_us: stats.at(histogram, 99.0),
            p999_us: stats.at(histogram, 99.9),
            max_us: stats.max_us,
        }
    }
}

impl Figures {
    /// The figures of one size result.
    pub fn of(r: &SizeResult) -> Figures {
        match &r.measured {
            Measured::Bandwidth(b) => Figures::Bandwidth(BandwidthFigures {
                gbps: b.avg_gbps,
                mpps: b.msg_rate_mpps,
            }),
            Measured::Latency { stats, histogram } => {
                Figures::Latency(LatencyFigures::of(stats, histogram))
            }
        }
    }

    /// The bandwidth figures; None for a latency result.
    pub fn bandwidth(&self) -> Option<BandwidthFigures> {
        match self {
            Figures::Bandwidth(b) => Some(*b),
            Figures::Latency(_) => None,
        }
    }

    /// The latency figures; None for a bandwidth result.
    pub fn latency(&self) -> Option<LatencyFigures> {
        match self {
            Figures::Latency(l) => Some(*l),
            Figures::Bandwidth(_) => None,
        }
    }
}

impl SizeResult {
    /// This result's [`Figures`].
    pub fn figures(&self) -> Figures {
        Figures::of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;

    #[test]
    fn latency_percentiles_come_from_the_histogram() {
        let r = lat(2, 2000, 1000);
        let Measured::Latency { stats, .. } = &r.measured else {
            unreachable!()
        };
        let l = r.figures().latency().unwrap();
        assert_eq!((l.median_us, l.max_us), (stats.median_us, stats.max_us));
        // 1,000 samples: p99 has 10 beyond it, p99.9 one.
        assert_eq!(l.samples, 1000);
        assert!(l.p99_us.unwrap() >= l.median_us, "{l:?}");
        assert_eq!(l.p999_us, None);
        let l = lat(2, 2000, 10_000).figures().latency().unwrap();
        assert!(l.p999_us.unwrap() >= l.p99_us.unwrap(), "{l:?}");
        assert_eq!(r.figures().bandwidth(), None);
        let b = bw(65536, 40.0).figures().bandwidth().unwrap();
        assert!((b.gbps - 40.0).abs() < 1e-6, "{b:?}");
    }
}
