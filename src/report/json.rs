//! JSON results: one valid document per run with a schema name and version, the test parameters, every
//! message size, and each latency histogram in HdrHistogram's portable V2 format.
//!
//! Shape (schema_version 1):
//! ```text
//! { "schema": "roceperf.result", "schema_version": 1,
//!   "tool": {"name": "roceperf", "version": "0.1.0"},
//!   "test": { RunInfo },
//!   "results": [ { "size_bytes": 65536, "iterations": 5000, "cpu_util_pct": 12.5,
//!                  "bandwidth": {"avg_gbps": .., "avg_mibps": .., "peak_gbps": .., ..., "msg_rate_mpps": ..}
//!                | "latency": {"min_us": .., ..., "percentiles": {"p99": ..}},
//!                  "histogram": {"encoding": "hdrhistogram-v2-deflate-base64", "unit": "ns", "data": ".."},
//!                  "units": {...} } ] }
//! ```
//! Values carry their unit in their key; `units` spells them out. A result object is exactly the serde
//! form of [`SizeResult`] plus `units`, so a file can be read back with serde_json.

use super::{Measured, ReportError, RunInfo, SizeResult};
use crate::stats::{BandwidthStats, LatencyStats};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;

/// The `schema` value of every roceperf result file.
pub const SCHEMA: &str = "roceperf.result";
/// Bumped whenever a key is renamed or removed or changes meaning (adding keys does not bump it).
pub const SCHEMA_VERSION: u32 = 1;
/// The `encoding` of serialized histograms.
pub const HISTOGRAM_ENCODING: &str = "hdrhistogram-v2-deflate-base64";

/// The whole result document for a run.
pub fn to_json(info: &RunInfo, results: &[SizeResult]) -> Value {
    let results: Vec<Value> = results
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_else(|e| json!({"error": e.to_string()}));
            if let Value::Object(map) = &mut v {
                map.insert("units".into(), units(&r.measured));
            }
            v
        })
        .collect();
    json!({
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "roceperf", "version": info.version},
        "test": info,
        "results": results,
    })
}

/// Writes [`to_json`] to `path` (pretty-printed, replaced as a whole: a reader never sees half a file).
pub fn write_json(path: &Path, info: &RunInfo, results: &[SizeResult]) -> Result<(), ReportError> {
    let doc = to_json(info, results);
    let mut text = serde_json::to_vec_pretty(&doc).map_err(|source| ReportError::Json {
        path: path.to_owned(),
        source,
    })?;
    text.push(b'\n');
    let tmp = path.with_extension("json.partial");
    let io = |action, source| ReportError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&text))
        .map_err(|e| io("write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("rename a temporary file onto", e)
    })
}

/// What each unit-carrying key means.
fn units(m: &Measured) -> Value {
    match m {
        Measured::Bandwidth(_) => json!({
            "size_bytes": "payload bytes per message",
            "gbps": "10^9 bit/s of payload",
            "mibps": "2^20 byte/s of payload",
            "msg_rate_mpps": "10^6 messages/s",
            "elapsed_ns": "nanoseconds from first post to last completion",
            "cpu_util_pct": "percent of one core",
        }),
        Measured::Latency { .. } => json!({
            "size_bytes": "payload bytes per message",
            "us": "microseconds, one-way (half the round trip for send and write, the whole for read)",
            "histogram": "one-way nanoseconds, 3 significant digits",
            "cpu_util_pct": "percent of one core",
        }),
    }
}

/// Serde form of a [`SizeResult`]: flat, unit-carrying keys.
#[derive(Serialize, Deserialize)]
pub struct SizeResultRepr {
    size_bytes: u64,
    iterations: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bandwidth: Option<BandwidthStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency: Option<LatencyStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    histogram: Option<HistogramRepr>,
}

impl From<SizeResult> for SizeResultRepr {
    fn from(r: SizeResult) -> Self {
        let (bandwidth, latency, histogram) = match r.measured {
            Measured::Bandwidth(b) => (Some(b), None, None),
            Measured::Latency { stats, histogram } => {
                (None, Some(stats), Some(HistogramRepr::encode(&histogram)))
            }
        };
        SizeResultRepr {
            size_bytes: r.size,
            iterations: r.iterations,
            cpu_util_pct: r.cpu_util,
            bandwidth,
            latency,
            histogram,
        }
    }
}

impl TryFrom<SizeResultRepr> for SizeResult {
    type Error = String;

    fn try_from(r: SizeResultRepr) -> Result<Self, String> {
        let measured = match (r.bandwidth, r.latency, r.histogram) {
            (Some(b), None, None) => Measured::Bandwidth(b),
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
        })
    }
}

/// A histogram as JSON: `{"encoding": "hdrhistogram-v2-deflate-base64", "unit": "ns", "data": "HISTFAAA..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramRepr {
    /// Always [`HISTOGRAM_ENCODING`].
    pub encoding: String,
    /// Unit of the recorded values: "ns".
    pub unit: String,
    /// base64 (standard alphabet, padded) of the V2 deflate serialization.
    pub data: String,
}

impl HistogramRepr {
    /// Encodes `h`; the V2 format is HdrHistogram's portable one (Java, C, Go and Python read it too).
    pub fn encode(h: &Histogram<u64>) -> HistogramRepr {
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
    pub fn decode(&self) -> Result<Histogram<u64>, String> {
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
pub mod histogram_serde {
    use super::HistogramRepr;
    use hdrhistogram::Histogram;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Serializes as a [`HistogramRepr`].
    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        HistogramRepr::encode(h).serialize(s)
    }

    /// Deserializes from a [`HistogramRepr`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        HistogramRepr::deserialize(d)?
            .decode()
            .map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::*;
    use super::*;

    fn same_histogram(a: &Histogram<u64>, b: &Histogram<u64>) -> bool {
        a.len() == b.len()
            && a.iter_recorded().zip(b.iter_recorded()).all(|(x, y)| {
                x.value_iterated_to() == y.value_iterated_to()
                    && x.count_at_value() == y.count_at_value()
            })
    }

    #[test]
    fn document_has_schema_units_and_every_size() {
        let info = bw_info();
        let mut small = bw_result();
        small.size = 2;
        let doc = to_json(&info, &[small, bw_result()]);
        assert_eq!(doc["schema"], SCHEMA);
        assert_eq!(doc["schema_version"], 1);
        assert_eq!(doc["tool"]["version"], "0.1.0");
        assert_eq!(doc["test"]["transport"], "soft");
        assert_eq!(doc["test"]["roce"], "v2");
        assert_eq!(doc["test"]["iterations"], 5000);
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["size_bytes"], 2);
        assert_eq!(results[1]["size_bytes"], 65536);
        let bw = &results[1]["bandwidth"];
        assert!((bw["avg_mibps"].as_f64().unwrap() - 11028.45).abs() < 1e-3);
        assert!((bw["peak_mibps"].as_f64().unwrap() - 11030.12).abs() < 1e-3);
        assert!(bw["avg_gbps"].is_f64() && bw["msg_rate_mpps"].is_f64());
        assert!(
            results[1]["units"]["gbps"]
                .as_str()
                .unwrap()
                .contains("10^9")
        );
        assert!(results[1].get("latency").is_none());
        // The schema comes first, so `head -c 60 file.json` tells what the file is.
        let compact = serde_json::to_string(&doc).unwrap();
        assert!(
            compact.starts_with(r#"{"schema":"roceperf.result","schema_version":1,"tool":"#),
            "{compact}"
        );
        // Valid JSON text, and it parses back.
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let again: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(again, doc);
    }

    #[test]
    fn latency_results_carry_percentiles_and_histogram() {
        let r = lat_result();
        let doc = to_json(&lat_info(), std::slice::from_ref(&r));
        let res = &doc["results"][0];
        assert_eq!(res["cpu_util_pct"], 12.5);
        assert!(res["latency"]["percentiles"]["p99.99"].is_f64());
        assert!(res["latency"]["stdev_us"].is_f64());
        assert_eq!(res["histogram"]["encoding"], HISTOGRAM_ENCODING);
        assert_eq!(res["test"], Value::Null);
        // The file's result objects read back as SizeResult, histogram included.
        let back: SizeResult = serde_json::from_value(res.clone()).unwrap();
        let (
            Measured::Latency {
                histogram: a,
                stats: sa,
            },
            Measured::Latency {
                histogram: b,
                stats: sb,
            },
        ) = (&r.measured, &back.measured)
        else {
            panic!("latency result came back as {back:?}");
        };
        assert!(same_histogram(a, b));
        assert_eq!(sa, sb);
        assert_eq!(
            (back.size, back.iterations, back.cpu_util),
            (2, 1000, Some(12.5))
        );
    }

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
    fn non_finite_numbers_still_give_valid_json() {
        let mut r = bw_result();
        r.cpu_util = Some(f64::NAN);
        let text = serde_json::to_string(&to_json(&bw_info(), std::slice::from_ref(&r))).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert!(
            doc["results"][0]
                .get("cpu_util_pct")
                .is_none_or(Value::is_null)
        );
        let back: SizeResult = serde_json::from_value(doc["results"][0].clone()).unwrap();
        assert_eq!(back.cpu_util, None);
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

    #[test]
    fn write_json_writes_a_whole_valid_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        write_json(&path, &bw_info(), &[bw_result()]).unwrap();
        write_json(&path, &lat_info(), &[lat_result()]).unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(doc["test"]["test"]["metric"], "latency");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temporary file left behind"
        );
        let err = write_json(&dir.path().join("missing/run.json"), &bw_info(), &[]).unwrap_err();
        assert!(err.to_string().contains("missing/run.json"), "{err}");
    }
}
