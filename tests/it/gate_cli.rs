//! roce_gate end to end: crafted result files in, exit code, table, JUnit and annotations out.

use crate::common;
use crate::common::assert_contains;

use common::gate;
use common::results::{bw_result, run_info};
use roceperf::params::{Metric, RoceVersion, Role, TestKind, TransportKind, Verb};
use roceperf::report;
use roceperf::results::{self, Measured, RunInfo, SizeResult};
use roceperf::stats::{self, LatencyStats};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A client's run that names its peer and ran on core 1.
fn info(test: TestKind, transport: TransportKind, roce: Option<RoceVersion>) -> RunInfo {
    RunInfo {
        peer: Some("127.0.0.1".into()),
        cpu: Some(1),
        ..run_info(test, transport, roce, Role::Client)
    }
}

fn write_bw() -> TestKind {
    TestKind::new(Verb::Write, Metric::Bandwidth)
}

fn write_lat() -> TestKind {
    TestKind::new(Verb::Write, Metric::Latency)
}

/// A 64 KiB bandwidth result of `gbps`.
fn bw(gbps: f64) -> SizeResult {
    bw_result(65536, gbps)
}

/// A 2-byte latency result: 990 samples at `body_ns`, 10 at `tail_ns` (so p99 = body, p99.9 = tail).
/// 10,000 samples, the least that hold p99.9: 99 % at `body_ns`, 1 % in the tail.
fn lat(body_ns: u64, tail_ns: u64) -> SizeResult {
    let mut h = stats::new_latency_histogram();
    h.record_n(body_ns, 9900).unwrap();
    h.record_n(tail_ns, 100).unwrap();
    SizeResult {
        size: 2,
        iterations: 10_000,
        measured: Measured::Latency {
            // Asked for p90 only: the gate must still find p99 and p99.9 (from the histogram).
            stats: LatencyStats::from_histogram(&h, &[90.0]),
            histogram: h,
        },
        cpu_util: None,
        lost: None,
    }
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn json(&self, name: &str, info: &RunInfo, results: &[SizeResult]) -> PathBuf {
        let p = self.path(name);
        results::write_json(&p, info, results).unwrap();
        p
    }

    /// A write_bw result file of one 64 KiB result at `gbps`.
    fn bw_run(
        &self,
        name: &str,
        transport: TransportKind,
        roce: Option<RoceVersion>,
        gbps: f64,
    ) -> PathBuf {
        self.json(name, &info(write_bw(), transport, roce), &[bw(gbps)])
    }

    fn csv(&self, name: &str, runs: &[(&RunInfo, &[SizeResult])]) -> PathBuf {
        let p = self.path(name);
        for (info, results) in runs {
            results::append_csv(&p, info, results).unwrap();
        }
        p
    }

    fn text(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
}

/// Runs the gate, checks its exit code and returns its stdout.
#[track_caller]
fn gate_stdout(args: &[&str], files: &[&Path], code: i32) -> String {
    let o = gate(args, files);
    assert_exit(&o, code);
    stdout(&o)
}

/// Runs the gate on something it must refuse (exit 2) and checks that stderr holds `needle`;
/// returns stderr.
#[track_caller]
fn bad_input(args: &[&str], files: &[&Path], needle: &str) -> String {
    let o = gate(args, files);
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert_contains(&err, needle);
    err
}

#[test]
fn bandwidth_above_the_floor_passes() {
    let f = Files::new();
    let run = f.bw_run("bw.json", TransportKind::Soft, Some(RoceVersion::V2), 92.0);
    let out = gate_stdout(&["--min-bw", "90Gb/s"], &[&run], 0);
    assert!(
        out.starts_with("roce_gate: PASS, 1 checks: 1 passed"),
        "{out}"
    );
    assert!(
        out.contains("write_bw soft v2 65536 B") && out.contains("92.00 Gb/s"),
        "{out}"
    );
    // 11000 MiB/s = 92.27 Gb/s: just above the measured 92 Gb/s.
    assert_exit(&gate(&["--min-bw", "11000MiB/s"], &[&run]), 1);
    assert_exit(&gate(&["--min-bw", "10900MiB/s"], &[&run]), 0);
}

#[test]
fn bandwidth_below_the_floor_fails_and_says_why() {
    let f = Files::new();
    let run = f.bw_run("bw.json", TransportKind::Tcp, None, 45.0);
    let out = gate_stdout(
        &["--min-bw", "90Gb/s", "--min-msg-rate", "0.05Mpps"],
        &[&run],
        1,
    );
    assert!(
        out.starts_with("roce_gate: FAIL, 2 checks: 1 passed, 1 failed"),
        "{out}"
    );
    assert_contains(
        &out,
        "FAIL: write_bw tcp 65536 B bandwidth 45.00 Gb/s is below --min-bw 90Gb/s",
    );
}

#[test]
fn latency_thresholds_read_csv_and_use_every_percentile() {
    let f = Files::new();
    let i = info(write_lat(), TransportKind::Soft, Some(RoceVersion::V1));
    let csv = f.csv("runs.csv", &[(&i, &[lat(2_000, 40_000)])]);
    let out = gate_stdout(
        &[
            "--max-p50",
            "2.5us",
            "--max-p99",
            "3us",
            "--max-max",
            "50us",
        ],
        &[&csv],
        0,
    );
    assert_contains(&out, "3 checks: 3 passed");
    // p99.9 is in the 40 µs tail.
    let out = gate_stdout(&["--max-p99.9", "10us"], &[&csv], 1);
    assert_contains(&out, "p99.9 latency");
    let o = gate(&["--max-median", "1800ns"], &[&csv]);
    assert_exit(&o, 1);
    // The same result as JSON gives the same verdicts.
    let json = f.json("lat.json", &i, &[lat(2_000, 40_000)]);
    assert_exit(&gate(&["--max-p999", "10us"], &[&json]), 1);
    assert_exit(&gate(&["--max-p999", "41us"], &[&json]), 0);
}

#[test]
fn a_threshold_on_a_percentile_withheld_in_csv_or_json_fails_saying_why() {
    let f = Files::new();
    let i = info(write_lat(), TransportKind::Soft, Some(RoceVersion::V2));
    // 1,000 samples: p99 holds, p99.9 is an empty cell in the CSV and null in the JSON.
    let mut h = stats::new_latency_histogram();
    h.record_n(2_000, 1000).unwrap();
    let r = SizeResult {
        size: 2,
        iterations: 1000,
        measured: Measured::Latency {
            stats: LatencyStats::from_histogram(&h, &[99.0, 99.9]),
            histogram: h,
        },
        cpu_util: None,
        lost: None,
    };
    let csv = f.csv("withheld.csv", &[(&i, std::slice::from_ref(&r))]);
    let json = f.json("withheld.json", &i, std::slice::from_ref(&r));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(doc["results"][0]["latency"]["percentiles"]["p99.9"].is_null());
    for file in [&csv, &json] {
        gate_stdout(&["--max-p99", "1s"], &[file], 0);
        let out = gate_stdout(&["--max-p999", "1s"], &[file], 1);
        assert_contains(
            &out,
            "write_lat soft v2 2 B p99.9 latency is withheld, not enough samples: p99.9 needs \
             10,000 samples (10 beyond it); this result has 1,000",
        );
    }
}

#[test]
fn a_threshold_with_nothing_to_check_fails_rather_than_passing_vacuously() {
    let f = Files::new();
    let run = f.bw_run("bw.json", TransportKind::Tcp, None, 45.0);
    let out = gate_stdout(&["--min-bw", "1Gb/s", "--max-p99", "5us"], &[&run], 1);
    assert_contains(&out, "--max-p99 5us applies to latency tests");
}

#[test]
fn baseline_regression_beyond_the_allowance_fails() {
    let f = Files::new();
    let i = info(write_bw(), TransportKind::Soft, Some(RoceVersion::V2));
    let base = f.json("base.json", &i, &[bw(100.0)]);
    let now = f.json("now.json", &i, &[bw(92.0)]);
    // A baseline measured once is refused (exit 2) unless asked for, and then warned about.
    let err = stderr(&gate(&["--baseline", base.to_str().unwrap()], &[&now]));
    assert_contains(
        &err,
        "base.json was measured once (1 results are compared with a single run)",
    );
    assert_contains(&err, "add --allow-single-run to gate against it anyway");
    assert_exit(&gate(&["--baseline", base.to_str().unwrap()], &[&now]), 2);
    let single = ["--allow-single-run", "--baseline", base.to_str().unwrap()];
    let out = gate_stdout(&single, &[&now], 1);
    assert_contains(
        &out,
        "WARNING: the baseline of write_bw soft v2 65536 B is a single run",
    );
    assert!(
        out.contains("bandwidth vs baseline") && out.contains("(-8.0%)"),
        "{out}"
    );
    assert_contains(&out, ">= 95.00 Gb/s");
    assert_contains(
        &out,
        "92.00 Gb/s is 8.0% worse, past the limit 95.00 Gb/s (the baseline's value 100.00 Gb/s -5%)",
    );
    let o = gate(
        &[
            "--allow-single-run",
            "--baseline",
            base.to_str().unwrap(),
            "--max-regression",
            "10%",
        ],
        &[&now],
    );
    assert_exit(&o, 0);
    // Latency: higher is worse. A CSV baseline works too.
    let li = info(write_lat(), TransportKind::Soft, Some(RoceVersion::V2));
    let lbase = f.csv("base.csv", &[(&li, &[lat(2_000, 40_000)])]);
    let faster = f.json("faster.json", &li, &[lat(1_500, 40_000)]);
    let slower = f.json("slower.json", &li, &[lat(2_200, 40_000)]);
    assert_exit(
        &gate(
            &["--allow-single-run", "--baseline", lbase.to_str().unwrap()],
            &[&faster],
        ),
        0,
    );
    let out = gate_stdout(
        &["--allow-single-run", "--baseline", lbase.to_str().unwrap()],
        &[&slower],
        1,
    );
    assert_contains(&out, "median vs baseline");
}

#[test]
fn a_baseline_that_matches_nothing_fails_and_unmatched_rows_are_skipped() {
    let f = Files::new();
    let base = f.bw_run("base.json", TransportKind::Tcp, None, 40.0);
    let now = f.bw_run("now.json", TransportKind::Soft, Some(RoceVersion::V2), 92.0);
    let out = gate_stdout(&["--baseline", base.to_str().unwrap()], &[&now], 1);
    assert!(
        out.contains("skip") && out.contains("shares no (test, transport"),
        "{out}"
    );
}

/// Writes `text` to `name` and checks that a gate over it is a bad input whose stderr holds
/// `needle`; returns stderr.
#[track_caller]
fn bad_file(f: &Files, name: &str, text: &str, needle: &str) -> String {
    let o = gate(&["--min-bw", "1Gb/s"], &[&f.text(name, text)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{name}: {err}");
    assert!(err.contains(needle), "{name}: {needle:?} not in {err}");
    err
}

#[test]
fn malformed_json_is_a_bad_input_naming_the_file() {
    let f = Files::new();
    let json = "{\"schema\": \"roceperf.result\", \"results\": [";
    let err = bad_file(&f, "broken.json", json, "broken.json is not valid JSON");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_missing_file_is_a_bad_input_naming_it() {
    let f = Files::new();
    let good = f.bw_run("bw.json", TransportKind::Tcp, None, 45.0);
    let missing = f.path("nope.json");
    let err = bad_input(&["--min-bw", "1Gb/s"], &[&good, &missing], "cannot read");
    assert_contains(&err, "nope.json");
    // A missing baseline too.
    bad_input(
        &["--baseline", missing.to_str().unwrap()],
        &[&good],
        "baseline: cannot read",
    );
}

#[test]
fn wrong_schema_or_version_is_a_bad_input() {
    let f = Files::new();
    let i = info(write_bw(), TransportKind::Tcp, None);
    let mut future = results::to_json(&i, &[bw(1.0)]);
    future["schema_version"] = 99.into();
    let mut broken = results::to_json(&i, &[bw(1.0)]);
    broken["results"][0]["bandwidth"] = serde_json::Value::Null;
    for (name, text, needle) in [
        (
            "other.json",
            r#"{"schema": "someone.else", "schema_version": 1}"#.to_string(),
            "schema \"someone.else\" is unknown",
        ),
        (
            "plain.json",
            r#"{"results": []}"#.to_string(),
            "no \"schema\" key",
        ),
        (
            "future.json",
            future.to_string(),
            "schema_version 99 is not supported",
        ),
        ("broken-result.json", broken.to_string(), "results[0]"),
    ] {
        bad_file(&f, name, &text, needle);
    }
}

#[test]
fn malformed_csv_rows_are_named_by_line() {
    let f = Files::new();
    for (name, text, needle) in [
        (
            "bad.csv",
            "test,transport,roce,size_bytes,bw_avg_gbps\nwrite_bw,soft,v2,65536,91.5\nwrite_bw,carrier-pigeon,,8,1\n".to_string(),
            "bad.csv line 3: transport \"carrier-pigeon\"",
        ),
        ("x.csv", "a,b\n1,2\n".to_string(), "no \"test\" column"),
        ("empty.csv", results::csv::header_line(), "holds no results"),
    ] {
        bad_file(&f, name, &text, needle);
    }
}

#[test]
fn bad_usage_exits_2_with_advice() {
    let f = Files::new();
    let run = f.bw_run("bw.json", TransportKind::Tcp, None, 45.0);
    bad_input(&["--min-bw", "90"], &[&run], "90Gb/s");
    bad_input(&[], &[&run], "nothing to check");
    bad_input(
        &["--min-bw", "1Gb/s", "--max-regression", "3%"],
        &[&run],
        "--baseline",
    );
    bad_input(
        &["--min-bw", "1Gb/s", "--test", "read_lat"],
        &[&run],
        "no result in the inputs matches",
    );
}

#[test]
fn selection_limits_which_results_are_held_to_a_threshold() {
    let f = Files::new();
    let soft = f.bw_run(
        "soft.json",
        TransportKind::Soft,
        Some(RoceVersion::V2),
        92.0,
    );
    let tcp = f.bw_run("tcp.json", TransportKind::Tcp, None, 45.0);
    assert_exit(&gate(&["--min-bw", "90Gb/s"], &[&soft, &tcp]), 1);
    assert_exit(
        &gate(
            &["--min-bw", "90Gb/s", "--transport", "soft"],
            &[&soft, &tcp],
        ),
        0,
    );
}

#[test]
fn junit_and_github_annotations_describe_each_check() {
    let f = Files::new();
    let run = f.bw_run("bw.json", TransportKind::Tcp, None, 45.0);
    let lat_run = f.json(
        "lat.json",
        &info(write_lat(), TransportKind::Tcp, None),
        &[lat(2_000, 40_000)],
    );
    let junit = f.path("gate.xml");
    let summary = f.text("summary.md", "# earlier step\n");
    let o = Command::new(env!("CARGO_BIN_EXE_roce_gate"))
        .args(["--min-bw", "90Gb/s", "--max-p99", "5us", "--junit"])
        .arg(&junit)
        .arg(&run)
        .arg(&lat_run)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_exit(&o, 1);
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("# earlier step\n### roce_gate: FAIL"),
        "{md}"
    );
    assert_eq!(
        md.lines().filter(|l| l.starts_with("| write_")).count(),
        2,
        "{md}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 2);
    let failed: Vec<_> = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]
            .attribute("name")
            .unwrap()
            .contains("write_bw tcp 65536 B: bandwidth")
    );
    let out = stdout(&o);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 1, "{out}");
    assert!(
        errors[0].contains("bw.json") && errors[0].contains("title=roce_gate --min-bw::"),
        "{}",
        errors[0]
    );
    // Without GITHUB_ACTIONS or --github: no workflow commands.
    let o = gate(&["--min-bw", "90Gb/s"], &[&run]);
    assert!(!stdout(&o).contains("::error"));
    let o = gate(&["--min-bw", "90Gb/s", "--github"], &[&run]);
    assert!(stdout(&o).contains("::error file="));
}

/// A comparison written by `report::export`: RoCE v2 (soft) and TCP, write_bw and write_lat.
fn comparison(dir: &Path) -> (PathBuf, PathBuf) {
    use roceperf::results::{CompareRun, CompareSet, default_label};
    let mut runs = Vec::new();
    for (t, r, gbps, lat_ns) in [
        (TransportKind::Soft, Some(RoceVersion::V2), 92.0, 2_000),
        (TransportKind::Tcp, None, 45.0, 6_000),
    ] {
        for (test, result) in [
            (write_bw(), bw(gbps)),
            (write_lat(), lat(lat_ns, lat_ns * 10)),
        ] {
            runs.push(CompareRun {
                label: default_label(t, r),
                transport: t,
                roce: r,
                test,
                results: vec![result],
                notes: vec![],
                link: None,
                repetitions: vec![],
                loss: None,
                path: None,
                floors: vec![],
                ceilings: vec![],
            });
        }
    }
    let set = CompareSet {
        started_at: "2026-11-29T10:24:25Z".into(),
        version: "0.1.0".into(),
        runs,
        skipped: vec![],
        ..CompareSet::default()
    };
    let files = report::export::write_compare_files(dir, &set).unwrap();
    let written = |name: &str| files.iter().find(|p| p.ends_with(name)).unwrap().clone();
    (written("compare.json"), written("compare.csv"))
}

#[test]
fn comparison_json_and_csv_give_the_same_verdicts() {
    let f = Files::new();
    let (json, csv) = comparison(f.dir.path());
    for input in [&json, &csv] {
        let out = gate_stdout(&["--min-bw", "90Gb/s", "--max-p50", "3us"], &[input], 1);
        assert_contains(&out, "4 checks: 2 passed, 2 failed");
        assert_contains(&out, "write_bw tcp 65536 B bandwidth 45.00 Gb/s is below");
        let o = gate(
            &[
                "--transport",
                "soft",
                "--min-bw",
                "90Gb/s",
                "--max-p50",
                "3us",
            ],
            &[input],
        );
        assert_exit(&o, 0);
        // The comparison is its own baseline: nothing regressed.
        let own = ["--allow-single-run", "--baseline", json.to_str().unwrap()];
        let out = gate_stdout(&own, &[input], 0);
        assert_contains(&out, "6 checks: 6 passed");
    }
}
