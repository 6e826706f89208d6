//! Side-by-side comparison of transports (RoCE v1, RoCE v2, TCP) running the same tests: the data model,
//! its JSON form (`compare.json`, schema `roceperf.compare`) and the terminal rendering.
//!
//! The data model knows nothing of how runs are made. A [`CompareSet`] is filled either live, by the
//! orchestrator in [`run`] that starts each transport's `roce_<test>` server and client in turn (on this
//! machine: [`local`]; between two hosts: [`remote`]; their command lines: [`leg`]), or from result
//! files made elsewhere ([`run_from_result_json`], `roce_compare --from`). The files under
//! `results/<timestamp>/` are written by `report::compare`.

pub mod error;
pub mod leg;
pub mod local;
pub mod remote;
pub mod run;
pub mod table;

use crate::params::{Metric, RoceVersion, Role, TestKind, TransportKind};
use crate::report::{Measured, RunInfo, SizeResult};
use crate::stats::{LatencyStats, value_at_percentile};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The `schema` value of a comparison file.
pub const SCHEMA: &str = "roceperf.compare";
/// Bumped whenever a key is renamed or removed or changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// One transport running one test over one or more message sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRun {
    /// How the transport is shown, e.g. "RoCE v2 (soft)", "TCP".
    pub label: String,
    /// What moved the bytes.
    pub transport: TransportKind,
    /// RoCE encapsulation; None for TCP.
    pub roce: Option<RoceVersion>,
    /// Which test.
    pub test: TestKind,
    /// One result per message size, ascending.
    pub results: Vec<SizeResult>,
    /// Why this transport was chosen or what limited it ("soft: no RDMA device").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A transport that could not run, and why (e.g. RoCE v1 needs CAP_NET_RAW for a veth pair).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The transport's label.
    pub label: String,
    /// What was missing and how to get it, or how the run failed.
    pub reason: String,
    /// The transport was tried and its run failed (rather than not being tried at all).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

/// Everything a comparison report shows.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CompareSet {
    /// RFC 3339 UTC time the comparison started.
    pub started_at: String,
    /// roceperf version that made it.
    pub version: String,
    /// The runs, in the order made (usually v1, v2, TCP per test).
    pub runs: Vec<CompareRun>,
    /// Transports that could not run.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// The label a transport gets by default: `RoCE v2 (soft)`, `RoCE v1 (verbs)`, `TCP`.
pub fn default_label(transport: TransportKind, roce: Option<RoceVersion>) -> String {
    match (transport, roce) {
        (TransportKind::Tcp, _) => "TCP".into(),
        (t, Some(r)) => format!("RoCE {r} ({t})"),
        (t, None) => format!("RoCE ({t})"),
    }
}

impl CompareRun {
    /// A run from a result file's RunInfo and results, labelled by [`default_label`].
    pub fn from_run(info: &RunInfo, results: Vec<SizeResult>) -> CompareRun {
        CompareRun {
            label: default_label(info.transport, info.roce),
            transport: info.transport,
            roce: info.roce,
            test: info.test,
            results,
            notes: info.notes.clone(),
        }
    }

    /// The result at `size`, if measured.
    pub fn at(&self, size: u64) -> Option<&SizeResult> {
        self.results.iter().find(|r| r.size == size)
    }
}

/// Order in the table: RoCE v1, then v2 (verbs before soft), TCP last as the reference.
pub fn transport_rank(t: TransportKind, r: Option<RoceVersion>) -> u8 {
    match (t, r) {
        (TransportKind::Tcp, _) => 9,
        (TransportKind::Verbs, Some(RoceVersion::V1)) => 0,
        (TransportKind::Soft, Some(RoceVersion::V1)) => 1,
        (TransportKind::Verbs, _) => 2,
        (TransportKind::Soft, _) => 3,
    }
}

/// A run from a `roceperf.result` document (what a binary writes with `--json`), and the side that
/// wrote it; the error says what is wrong with the document.
pub fn run_from_result_json(doc: Value) -> Result<(CompareRun, Role), String> {
    use crate::report::json::{SCHEMA as RESULT_SCHEMA, SCHEMA_VERSION as RESULT_VERSION};
    match doc.get("schema").and_then(Value::as_str) {
        Some(RESULT_SCHEMA) => {}
        other => {
            return Err(format!(
                "not a roceperf result (schema {}); give the JSON a run wrote with --json or --results",
                other.map_or("missing".to_string(), |s| format!("{s:?}"))
            ));
        }
    }
    let version = doc.get("schema_version").and_then(Value::as_u64);
    if version != Some(u64::from(RESULT_VERSION)) {
        return Err(format!(
            "schema_version {version:?} is not {RESULT_VERSION}; use the roceperf version that wrote it"
        ));
    }
    let info: RunInfo = serde_json::from_value(doc["test"].clone())
        .map_err(|e| format!("\"test\" is not a roceperf run description: {e}"))?;
    let results: Vec<SizeResult> = serde_json::from_value(doc["results"].clone())
        .map_err(|e| format!("\"results\" cannot be read: {e}"))?;
    if results.is_empty() {
        return Err("it holds no results".into());
    }
    Ok((CompareRun::from_run(&info, results), info.role))
}

/// Latency figures the comparison shows, in µs (from the histogram, so every transport gets the same
/// percentiles whatever it was asked to report).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyFigures {
    /// Median.
    pub median_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// True maximum.
    pub max_us: f64,
}

/// Bandwidth figures the comparison shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandwidthFigures {
    /// Average, Gb/s.
    pub gbps: f64,
    /// Average message rate, Mpps.
    pub mpps: f64,
}

/// The latency figures of a latency result; None for a bandwidth result.
pub fn latency_figures(r: &SizeResult) -> Option<LatencyFigures> {
    match &r.measured {
        Measured::Latency { stats, histogram } => Some(LatencyFigures::of(stats, histogram)),
        Measured::Bandwidth(_) => None,
    }
}

impl LatencyFigures {
    /// The figures of a latency summary and its histogram (percentiles from the histogram when it has
    /// samples, else from the summary).
    pub fn of(stats: &LatencyStats, histogram: &Histogram<u64>) -> LatencyFigures {
        let pct = |p: f64| {
            if histogram.is_empty() {
                stats.get(p).unwrap_or(0.0)
            } else {
                value_at_percentile(histogram, p) as f64 / 1000.0
            }
        };
        LatencyFigures {
            median_us: stats.median_us,
            p99_us: pct(99.0),
            p999_us: pct(99.9),
            max_us: stats.max_us,
        }
    }
}

/// The bandwidth figures of a bandwidth result; None for a latency result.
pub fn bandwidth_figures(r: &SizeResult) -> Option<BandwidthFigures> {
    match &r.measured {
        Measured::Bandwidth(b) => Some(BandwidthFigures {
            gbps: b.avg_gbps,
            mpps: b.msg_rate_mpps,
        }),
        Measured::Latency { .. } => None,
    }
}

impl CompareSet {
    /// The TCP run of `test`, if there is one.
    pub fn tcp_run(&self, test: TestKind) -> Option<&CompareRun> {
        self.runs
            .iter()
            .find(|r| r.test == test && r.transport == TransportKind::Tcp)
    }

    /// How many times better than TCP `run` is at `size`: bandwidth ÷ TCP's bandwidth for bandwidth
    /// tests, TCP's median ÷ the median for latency tests (so above 1 is better either way).
    /// None without a TCP result at that size or when a figure is zero.
    pub fn ratio_to_tcp(&self, run: &CompareRun, size: u64) -> Option<f64> {
        let tcp = self.tcp_run(run.test)?.at(size)?;
        let this = run.at(size)?;
        let ratio = match run.test.metric {
            Metric::Bandwidth => bandwidth_figures(this)?.gbps / bandwidth_figures(tcp)?.gbps,
            Metric::Latency => latency_figures(tcp)?.median_us / latency_figures(this)?.median_us,
        };
        ratio.is_finite().then_some(ratio)
    }

    /// The tests present, in the order first seen.
    pub fn tests(&self) -> Vec<TestKind> {
        let mut out: Vec<TestKind> = Vec::new();
        for r in &self.runs {
            if !out.contains(&r.test) {
                out.push(r.test);
            }
        }
        out
    }

    /// The comparison as a `roceperf.compare` JSON document.
    pub fn to_json(&self) -> Value {
        json!({
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "roceperf", "version": self.version},
            "started_at": self.started_at,
            "runs": self.runs,
            "skipped": self.skipped,
        })
    }
}

/// Reads a `roceperf.compare` document (schema and version already checked or not); the error says what
/// is wrong.
pub fn from_json_value(doc: Value) -> Result<CompareSet, String> {
    if doc.get("schema").and_then(Value::as_str) != Some(SCHEMA) {
        return Err(format!("not a {SCHEMA:?} document"));
    }
    match doc.get("schema_version").and_then(Value::as_u64) {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        other => {
            return Err(format!(
                "schema_version {} is not {SCHEMA_VERSION}",
                other.map_or("(missing)".to_string(), |v| v.to_string())
            ));
        }
    }
    #[derive(Deserialize)]
    struct Doc {
        started_at: String,
        tool: Tool,
        runs: Vec<CompareRun>,
        #[serde(default)]
        skipped: Vec<Skipped>,
    }
    #[derive(Deserialize)]
    struct Tool {
        version: String,
    }
    let d: Doc = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    Ok(CompareSet {
        started_at: d.started_at,
        version: d.tool.version,
        runs: d.runs,
        skipped: d.skipped,
    })
}

/// `2 B`, `64 KiB`, `1 MiB`, `1000 B`: powers of two in binary units, anything else in bytes.
pub fn fmt_size(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
pub(crate) mod testdata {
    //! Synthetic comparisons: three transports, write_lat at 2 B and write_bw over a sweep.
    use super::*;
    use crate::params::Verb;
    use crate::stats::{self, BandwidthStats, LatencyStats};

    /// A latency result whose samples are spread around `base_ns` with a tail.
    pub fn lat(size: u64, base_ns: u64, samples: u64) -> SizeResult {
        let mut h = stats::new_latency_histogram();
        for i in 0..samples {
            // Deterministic spread: mostly within 40 % of base, every 100th sample 5x, one 20x.
            let jitter = (i * 7919) % 1000;
            let mut v = base_ns + base_ns * jitter * 4 / 10_000;
            if i % 100 == 99 {
                v *= 5;
            }
            if i == samples / 2 {
                v = base_ns * 20;
            }
            h.record(v).unwrap();
        }
        SizeResult {
            size,
            iterations: samples,
            measured: Measured::Latency {
                stats: LatencyStats::from_histogram(&h, &[90.0, 99.0, 99.9, 99.99]),
                histogram: h,
            },
            cpu_util: None,
        }
    }

    /// A bandwidth result of `gbps` at `size`.
    pub fn bw(size: u64, gbps: f64) -> SizeResult {
        let messages = 10_000;
        let elapsed = (size as f64 * 8.0 * messages as f64 / gbps).round() as u64;
        SizeResult {
            size,
            iterations: messages,
            measured: Measured::Bandwidth(BandwidthStats::compute(size, messages, elapsed, None)),
            cpu_util: None,
        }
    }

    /// RoCE v1 (soft), RoCE v2 (soft) and TCP; write_lat at 2 B and write_bw at 4 KiB .. 64 KiB.
    pub fn set() -> CompareSet {
        let wlat = TestKind::new(Verb::Write, Metric::Latency);
        let wbw = TestKind::new(Verb::Write, Metric::Bandwidth);
        let transports = [
            (TransportKind::Soft, Some(RoceVersion::V1), 1800, 1.0),
            (TransportKind::Soft, Some(RoceVersion::V2), 2000, 0.9),
            (TransportKind::Tcp, None, 6000, 0.5),
        ];
        let mut runs = Vec::new();
        for (t, r, base, _) in transports {
            runs.push(CompareRun {
                label: default_label(t, r),
                transport: t,
                roce: r,
                test: wlat,
                results: vec![lat(2, base, 10_000)],
                notes: vec![],
            });
        }
        for (t, r, _, factor) in transports {
            runs.push(CompareRun {
                label: default_label(t, r),
                transport: t,
                roce: r,
                test: wbw,
                results: [4096u64, 16384, 65536]
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| bw(s, factor * (20.0 + 15.0 * i as f64)))
                    .collect(),
                notes: vec![],
            });
        }
        CompareSet {
            started_at: "2026-11-29T10:24:25Z".into(),
            version: "0.1.0".into(),
            runs,
            skipped: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testdata::*;
    use super::*;

    #[test]
    fn labels_and_sizes() {
        assert_eq!(
            default_label(TransportKind::Soft, Some(RoceVersion::V2)),
            "RoCE v2 (soft)"
        );
        assert_eq!(default_label(TransportKind::Tcp, None), "TCP");
        assert_eq!(fmt_size(2), "2 B");
        assert_eq!(fmt_size(65536), "64 KiB");
        assert_eq!(fmt_size(1 << 20), "1 MiB");
        assert_eq!(fmt_size(1000), "1000 B");
        assert_eq!(fmt_size(3 << 10), "3 KiB");
    }

    #[test]
    fn ratio_to_tcp_is_better_above_one() {
        let set = set();
        let v2_bw = &set.runs[4];
        assert_eq!(v2_bw.label, "RoCE v2 (soft)");
        let r = set.ratio_to_tcp(v2_bw, 65536).unwrap();
        assert!((r - 1.8).abs() < 1e-3, "{r}");
        let v1_lat = &set.runs[0];
        let r = set.ratio_to_tcp(v1_lat, 2).unwrap();
        // Both medians sit at the same point of the same spread: 6000 / 1800 ns base.
        assert!((r - 6000.0 / 1800.0).abs() < 0.01, "{r}");
        let tcp = &set.runs[2];
        assert_eq!(set.ratio_to_tcp(tcp, 2), Some(1.0));
        assert_eq!(set.ratio_to_tcp(v1_lat, 4096), None);
    }

    #[test]
    fn compare_json_round_trips() {
        let set = set();
        let text = serde_json::to_string_pretty(&set.to_json()).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["schema"], SCHEMA);
        assert_eq!(doc["runs"][0]["label"], "RoCE v1 (soft)");
        assert_eq!(doc["runs"][0]["test"]["metric"], "latency");
        let back = from_json_value(doc).unwrap();
        assert_eq!(back, set);
        let err = from_json_value(json!({"schema": SCHEMA, "schema_version": 9})).unwrap_err();
        assert!(err.contains("schema_version 9"), "{err}");
    }
}
