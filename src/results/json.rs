//! The JSON writer: a run's `roceperf.result` document and a comparison's `roceperf.compare`.
//!
//! One valid document per run with a schema name and version, the test parameters, every message size,
//! and each latency histogram in HdrHistogram's portable V2 format.
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
//!
//! A comparison is one `roceperf.compare` document (schema_version 1): `tool`, `started_at`, `runs` (each
//! a label, transport, RoCE version, test, notes and result objects as above) and `skipped`.
//! [`read`](super::read) reads both back.

use super::files::{WriteError, write_atomic};
use super::{CompareSet, Measured, RunInfo, SizeResult};
use serde_json::{Value, json};
use std::path::Path;

/// The `schema` value of every roceperf result file.
pub(crate) const SCHEMA: &str = "roceperf.result";
/// Bumped whenever a key is renamed or removed or changes meaning (adding keys does not bump it).
pub(crate) const SCHEMA_VERSION: u32 = 1;
/// The `schema` value of a comparison file.
pub(crate) const COMPARE_SCHEMA: &str = "roceperf.compare";
/// Bumped whenever a comparison key is renamed or removed or changes meaning.
pub(crate) const COMPARE_SCHEMA_VERSION: u32 = 1;

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
pub fn write_json(path: &Path, info: &RunInfo, results: &[SizeResult]) -> Result<(), WriteError> {
    write_document(path, &to_json(info, results))
}

/// Writes `doc` to `path` as [`pretty`] text, replaced as a whole.
pub fn write_document(path: &Path, doc: &Value) -> Result<(), WriteError> {
    write_atomic(path, &pretty(path, doc)?)
}

/// `doc` as the files hold it: pretty-printed with a final newline; errors name `path`, its file.
pub(crate) fn pretty(path: &Path, doc: &Value) -> Result<Vec<u8>, WriteError> {
    newline_ended(path, serde_json::to_vec_pretty(doc))
}

/// `doc` on one line with a final newline, a record of a JSON-lines file; errors name `path`.
pub(crate) fn one_line(path: &Path, doc: &Value) -> Result<Vec<u8>, WriteError> {
    newline_ended(path, serde_json::to_vec(doc))
}

fn newline_ended(path: &Path, encoded: serde_json::Result<Vec<u8>>) -> Result<Vec<u8>, WriteError> {
    let mut text = encoded.map_err(|source| WriteError::Json {
        path: path.to_owned(),
        source,
    })?;
    text.push(b'\n');
    Ok(text)
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

impl CompareSet {
    /// The comparison as a `roceperf.compare` JSON document.
    pub fn to_json(&self) -> Value {
        let mut doc = json!({
            "schema": COMPARE_SCHEMA,
            "schema_version": COMPARE_SCHEMA_VERSION,
            "tool": {"name": "roceperf", "version": self.version},
            "started_at": self.started_at,
            "runs": self.runs,
            "skipped": self.skipped,
        });
        if let Value::Object(map) = &mut doc {
            if !self.notes.is_empty() {
                map.insert("notes".into(), json!(self.notes));
            }
            if let Some(w) = &self.wire {
                map.insert("wire".into(), json!(w));
            }
            if let Some(p) = &self.provenance {
                map.insert("provenance".into(), json!(p));
            }
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::read::{Document, parse_json};
    use crate::results::size::HISTOGRAM_ENCODING;
    use crate::results::testdata::*;

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
        // 1,000 samples: p99 holds, p99.9 and p99.99 are null with their reason.
        assert!(res["latency"]["percentiles"]["p99"].is_f64());
        assert!(res["latency"]["percentiles"]["p99.99"].is_null());
        assert_eq!(
            res["latency"]["percentiles_withheld"]["p99.99"]["samples_needed"],
            100_000
        );
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
    #[test]
    fn compare_json_round_trips() {
        let set = set();
        let text = serde_json::to_string_pretty(&set.to_json()).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["schema"], COMPARE_SCHEMA);
        assert_eq!(doc["runs"][0]["label"], "RoCE v1 (soft)");
        assert_eq!(doc["runs"][0]["test"]["metric"], "latency");
        let Document::Compare(back) = parse_json(doc).unwrap() else {
            panic!("not read as a comparison")
        };
        assert_eq!(*back, set);
        let err = parse_json(json!({"schema": COMPARE_SCHEMA, "schema_version": 9})).unwrap_err();
        assert!(err.to_string().contains("schema_version 9"), "{err}");
    }
}
