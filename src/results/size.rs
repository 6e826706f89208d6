//! Per-size results: what one message size measured, and their serde form.
//!
//! Bandwidth figures, or a latency summary with its histogram; the serde form is shared by the result
//! files and the out-of-band channel.

use crate::stats::flows::{QpSeries, QpShare};
use crate::stats::{BandwidthStats, LatencyStats};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The `encoding` of serialized histograms.
pub(crate) const HISTOGRAM_ENCODING: &str = "hdrhistogram-v2-deflate-base64";

/// What one message size measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measured {
    /// A bandwidth test's figures.
    Bandwidth(BandwidthStats),
    /// `histogram` is serialized in JSON as base64 of HdrHistogram V2 (deflate) format.
    Latency {
        /// Summary computed from `histogram`.
        stats: LatencyStats,
        /// One-way latencies in ns.
        #[serde(with = "histogram_serde")]
        histogram: hdrhistogram::Histogram<u64>,
    },
}

/// The result for one message size (one row of the table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "SizeResultRepr", try_from = "SizeResultRepr")]
pub struct SizeResult {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations measured (perftest's #iterations column).
    pub iterations: u64,
    /// Bandwidth or latency figures.
    pub measured: Measured,
    /// CPU utilisation of the datapath, percent (--cpu_util).
    pub cpu_util: Option<f64>,
    /// UC/UD (`-c`): messages (latency tests: iterations) that were sent and never arrived, where
    /// this side could count them; `None` for RC and where nothing was counted.
    pub lost: Option<u64>,
}

/// Serde form of a [`SizeResult`]: flat, unit-carrying keys.
#[derive(Serialize, Deserialize)]
pub(crate) struct SizeResultRepr {
    size_bytes: u64,
    iterations: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lost_messages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bandwidth: Option<BandwidthStats>,
    /// Each queue pair's share of a bandwidth result (kept in [`BandwidthStats::qps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    qps: Vec<QpShare>,
    /// `--qp-series` (kept in [`BandwidthStats::qp_series`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    qp_series: Option<Box<QpSeries>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency: Option<LatencyStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    histogram: Option<HistogramRepr>,
}

impl From<SizeResult> for SizeResultRepr {
    fn from(r: SizeResult) -> Self {
        let (mut qps, mut qp_series) = (Vec::new(), None);
        let (bandwidth, latency, histogram) = match r.measured {
            Measured::Bandwidth(mut b) => {
                qps = std::mem::take(&mut b.qps);
                qp_series = b.qp_series.take();
                (Some(b), None, None)
            }
            Measured::Latency { stats, histogram } => {
                (None, Some(stats), Some(HistogramRepr::encode(&histogram)))
            }
        };
        SizeResultRepr {
            size_bytes: r.size,
            iterations: r.iterations,
            cpu_util_pct: r.cpu_util,
            lost_messages: r.lost,
            bandwidth,
            qps,
            qp_series,
            latency,
            histogram,
        }
    }
}

impl TryFrom<SizeResultRepr> for SizeResult {
    type Error = String;

    fn try_from(r: SizeResultRepr) -> Result<Self, String> {
        let measured = match (r.bandwidth, r.latency, r.histogram) {
            (Some(b), None, None) => Measured::Bandwidth(BandwidthStats {
                qps: r.qps,
                qp_series: r.qp_series,
                ..b
            }),
            (None, Some(stats), Some(h)) => Measured::Latency {
                stats,
                histogram: h.decode()?,
            },
            _ => {
                return Err(format!(
                    "result for size {} needs either \"bandwidth\" or both \"latency\" and \"histogram\"",
                    r.size_bytes
                ));
            }
        };
        Ok(SizeResult {
            size: r.size_bytes,
            iterations: r.iterations,
            measured,
            cpu_util: r.cpu_util_pct,
            lost: r.lost_messages,
        })
    }
}

/// A histogram as JSON: `{"encoding": "hdrhistogram-v2-deflate-base64", "unit": "ns", "data": "HISTFAAA..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistogramRepr {
    /// Always [`HISTOGRAM_ENCODING`].
    pub encoding: String,
    /// Unit of the recorded values: "ns".
    pub unit: String,
    /// base64 (standard alphabet, padded) of the V2 deflate serialization.
    pub data: String,
}

impl HistogramRepr {
    /// Encodes `h`; the V2 format is HdrHistogram's portable one (Java, C, Go and Python read it too).
    pub(crate) fn encode(h: &Histogram<u64>) -> HistogramRepr {
        use base64::Engine;
        use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
        let mut bytes = Vec::new();
        // Writing into a Vec cannot fail for lack of space; the only failure left is a histogram whose
        // counts overflow i64, which a latency run cannot reach. Keep the document valid regardless.
        let data = match V2DeflateSerializer::new().serialize(h, &mut bytes) {
            Ok(_) => base64::engine::general_purpose::STANDARD.encode(&bytes),
            Err(_) => String::new(),
        };
        HistogramRepr {
            encoding: HISTOGRAM_ENCODING.into(),
            unit: "ns".into(),
            data,
        }
    }

    /// Decodes the histogram, naming what is wrong when it cannot.
    pub(crate) fn decode(&self) -> Result<Histogram<u64>, String> {
        use base64::Engine;
        if self.encoding != HISTOGRAM_ENCODING {
            return Err(format!(
                "histogram encoding {:?} is not supported (expected {HISTOGRAM_ENCODING:?})",
                self.encoding
            ));
        }
        if self.unit != "ns" {
            return Err(format!("histogram unit {:?} is not \"ns\"", self.unit));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|e| format!("histogram data is not base64: {e}"))?;
        hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram data is not HdrHistogram V2: {e:?}"))
    }
}

/// serde `with` module for `Measured::Latency::histogram`: the [`HistogramRepr`] object.
pub(crate) mod histogram_serde {
    use super::HistogramRepr;
    use hdrhistogram::Histogram;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Serializes as a [`HistogramRepr`].
    pub(crate) fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        HistogramRepr::encode(h).serialize(s)
    }

    /// Deserializes from a [`HistogramRepr`].
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        HistogramRepr::deserialize(d)?
            .decode()
            .map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;

    #[test]
    fn size_results_round_trip_for_the_oob_channel() {
        for r in [bw_result(), lat_result()] {
            let text = serde_json::to_string(&r).unwrap();
            let back: SizeResult = serde_json::from_str(&text).unwrap();
            assert_eq!(
                (back.size, back.iterations, back.cpu_util),
                (r.size, r.iterations, r.cpu_util)
            );
            match (&r.measured, &back.measured) {
                (Measured::Bandwidth(a), Measured::Bandwidth(b)) => assert_eq!(a, b),
                (
                    Measured::Latency { histogram: a, .. },
                    Measured::Latency { histogram: b, .. },
                ) => {
                    assert!(same_histogram(a, b))
                }
                other => panic!("variant changed: {other:?}"),
            }
            assert_eq!(back, r, "whole result, histogram included");
            // Measured on its own (derived serde) round-trips too.
            let m: Measured =
                serde_json::from_str(&serde_json::to_string(&r.measured).unwrap()).unwrap();
            assert_eq!(
                std::mem::discriminant(&m),
                std::mem::discriminant(&r.measured)
            );
        }
    }

    #[test]
    fn malformed_results_are_named() {
        let err = serde_json::from_str::<SizeResult>(r#"{"size_bytes": 8, "iterations": 1}"#)
            .unwrap_err();
        assert!(err.to_string().contains("size 8"), "{err}");
        let mut v = serde_json::to_value(lat_result()).unwrap();
        v["histogram"]["encoding"] = "hdrhistogram-v1".into();
        let err = serde_json::from_value::<SizeResult>(v.clone()).unwrap_err();
        assert!(err.to_string().contains("hdrhistogram-v1"), "{err}");
        v["histogram"]["encoding"] = HISTOGRAM_ENCODING.into();
        v["histogram"]["data"] = "!!!".into();
        let err = serde_json::from_value::<SizeResult>(v).unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");
    }
}
