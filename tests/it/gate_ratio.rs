//! roce_gate over one comparison: ratios between its transports (`--min-ratio`, `--max-ratio`), and
//! a baseline weighed against the run-to-run spread when both comparisons hold repetitions. Fixture
//! files in, exact exit codes out: 0 pass, 1 fail, 2 unreadable input or bad usage.

use crate::common::assert_contains;
use crate::common::gate;
use crate::common::results::{bw_result, lat_result};
use roceperf::params::{Metric, RoceVersion, TestKind, TransportKind, Verb};
use roceperf::results::json::write_document;
use roceperf::results::{
    BandwidthFigures, CompareRun, CompareSet, LatencyFigures, Repetitions, default_label,
};
use std::path::{Path, PathBuf};

const SOFT_V2: (TransportKind, Option<RoceVersion>) = (TransportKind::Soft, Some(RoceVersion::V2));
const TCP: (TransportKind, Option<RoceVersion>) = (TransportKind::Tcp, None);

/// A run of `metric` over `transport`: its repetitions' figures (bandwidth in Gb/s or median latency
/// in µs) when there are several, the first shown.
fn run(
    transport: (TransportKind, Option<RoceVersion>),
    metric: Metric,
    reps: &[f64],
) -> CompareRun {
    let (result, repetitions) = match metric {
        Metric::Bandwidth => (
            bw_result(65536, reps[0]),
            Repetitions {
                size: 65536,
                bandwidth: reps
                    .iter()
                    .map(|&gbps| BandwidthFigures {
                        gbps,
                        mpps: gbps / 0.5,
                    })
                    .collect(),
                latency: vec![],
            },
        ),
        Metric::Latency => (
            lat_result(reps[0]),
            Repetitions {
                size: 2,
                bandwidth: vec![],
                latency: reps
                    .iter()
                    .map(|&m| LatencyFigures {
                        samples: 10_000,
                        median_us: m,
                        p99_us: Some(m),
                        p999_us: Some(m),
                        max_us: m,
                    })
                    .collect(),
            },
        ),
    };
    CompareRun {
        label: default_label(transport.0, transport.1),
        transport: transport.0,
        roce: transport.1,
        test: TestKind::new(Verb::Write, metric),
        results: vec![result],
        notes: vec![],
        link: Some("lo".into()),
        repetitions: if reps.len() > 1 {
            vec![repetitions]
        } else {
            vec![]
        },
        loss: None,
        path: None,
        floors: vec![],
        ceilings: vec![],
    }
}

/// Writes a compare.json of `runs` into `dir` as `name`.
fn comparison(dir: &Path, name: &str, runs: Vec<CompareRun>) -> PathBuf {
    let set = CompareSet {
        started_at: "2026-11-29T10:24:25Z".into(),
        version: "0.1.0".into(),
        runs,
        skipped: vec![],
        ..CompareSet::default()
    };
    let path = dir.join(name);
    write_document(&path, &set.to_json()).unwrap();
    path
}

/// `name`: soft v2 at `v2_gbps` and `v2_us`, TCP at 12 Gb/s and 9 µs; one run each.
fn same_run(dir: &Path, name: &str, v2_gbps: f64, v2_us: f64) -> PathBuf {
    comparison(
        dir,
        name,
        vec![
            run(SOFT_V2, Metric::Bandwidth, &[v2_gbps]),
            run(TCP, Metric::Bandwidth, &[12.0]),
            run(SOFT_V2, Metric::Latency, &[v2_us]),
            run(TCP, Metric::Latency, &[9.0]),
        ],
    )
}

/// Runs the gate, checks its exit code, and returns stdout and stderr.
#[track_caller]
fn exits(args: &[&str], files: &[&Path], code: i32) -> (String, String) {
    let o = gate(args, files);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    (out, err)
}

#[test]
fn ratios_within_one_comparison_pass_and_fail_with_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let json = same_run(dir.path(), "compare.json", 13.2, 10.8);
    let (out, _) = exits(&["--min-ratio", "soft-v2/tcp:bw=0.9"], &[&json], 0);
    assert!(
        out.starts_with("roce_gate: PASS, 1 checks: 1 passed\n"),
        "{out}"
    );
    assert_contains(&out, ">= 0.900x tcp");
    assert_contains(&out, "1.100x (13.20 Gb/s / 12.00 Gb/s)");
    let (out, _) = exits(
        &[
            "--min-ratio",
            "soft-v2/tcp:bw=0.9",
            "--max-ratio",
            "soft-v2/tcp:p50=1.0",
        ],
        &[&json],
        1,
    );
    assert_contains(&out, "2 checks: 1 passed, 1 failed");
    assert_contains(
        &out,
        "FAIL: write_lat soft v2 2 B median latency is 1.200x tcp's (10.81 µs against 9.007 µs), \
             above --max-ratio soft-v2/tcp:p50=1.0",
    );
    // A 2x slowdown of soft's bandwidth trips a loose floor.
    let slow = same_run(dir.path(), "slow.json", 6.0, 10.8);
    let (out, _) = exits(&["--min-ratio", "soft-v2/tcp:bw=0.6"], &[&slow], 1);
    assert_contains(&out, "is 0.500x tcp's");
    // --transport chooses what thresholds hold, not the denominator of a ratio.
    exits(
        &[
            "--transport",
            "soft",
            "--min-bw",
            "10Gb/s",
            "--min-ratio",
            "soft-v2/tcp:bw=0.9",
        ],
        &[&json],
        0,
    );
    // --test narrows the ratios too: no bandwidth result left is a failure, not a pass.
    let (out, _) = exits(
        &["--test", "write_lat", "--min-ratio", "soft-v2/tcp:bw=0.9"],
        &[&json],
        1,
    );
    assert_contains(&out, "found no bandwidth result of soft-v2 or tcp");
}

#[test]
fn a_ratio_missing_a_side_fails_rather_than_passing() {
    let dir = tempfile::tempdir().unwrap();
    // TCP's bandwidth run failed in this comparison: only soft v2 has a write_bw result.
    let json = comparison(
        dir.path(),
        "no-tcp.json",
        vec![
            run(SOFT_V2, Metric::Bandwidth, &[13.2]),
            run(SOFT_V2, Metric::Latency, &[10.8]),
            run(TCP, Metric::Latency, &[9.0]),
        ],
    );
    let (out, _) = exits(&["--min-ratio", "soft-v2/tcp:bw=0.5"], &[&json], 1);
    assert_contains(
        &out,
        "FAIL: write_bw soft v2 65536 B: no tcp result at this test and size",
    );
    let (out, _) = exits(&["--max-ratio", "tcp/soft-v2:p50=1.0"], &[&json], 0);
    assert_contains(&out, "0.833x (9.007 µs / 10.81 µs)");
}

#[test]
fn bad_ratios_and_levels_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let json = same_run(dir.path(), "compare.json", 13.2, 10.8);
    for (args, says) in [
        (&["--min-ratio", "soft-v2:bw=0.9"][..], "is not NUM/DEN"),
        (
            &["--max-ratio", "soft-v2/tcp:speed=1"][..],
            "is not a figure",
        ),
        (&["--min-ratio", "soft/soft-v2:bw=1"][..], "with itself"),
        (
            &["--min-ratio", "soft-v2/tcp:bw=1", "--alpha", "2"][..],
            "is not a significance level",
        ),
        (&[][..], "a ratio (--min-ratio, --max-ratio)"),
    ] {
        let (_, err) = exits(args, &[&json], 2);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Unreadable input is exit 2 whatever the gates.
    let cut = dir.path().join("cut.json");
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let (_, err) = exits(&["--min-ratio", "soft-v2/tcp:bw=0.9"], &[&cut], 2);
    assert_contains(&err, "cut.json is not valid JSON");
}

/// A comparison of soft v2 and TCP write_bw, each with the repetitions given.
fn repeated(dir: &Path, name: &str, v2: &[f64], tcp: &[f64]) -> PathBuf {
    comparison(
        dir,
        name,
        vec![
            run(SOFT_V2, Metric::Bandwidth, v2),
            run(TCP, Metric::Bandwidth, tcp),
        ],
    )
}

#[test]
fn a_baseline_with_repetitions_fails_only_beyond_the_spread() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tcp = [12.0, 12.4, 11.8, 12.1, 12.2];
    let base = repeated(d, "base.json", &[20.3, 19.7, 20.9, 21.2, 19.9], &tcp);
    let b = base.to_str().unwrap();
    // Soft v2 halved in every repetition: beyond any spread.
    let slow = repeated(d, "slow.json", &[10.1, 9.8, 10.4, 9.9, 10.0], &tcp);
    let (out, _) = exits(&["--baseline", b], &[&slow], 1);
    assert_contains(&out, "2 checks: 1 passed, 1 failed");
    assert_contains(
        &out,
        "beyond the run-to-run spread (Mann-Whitney p=0.0040 <= --alpha 0.01)",
    );
    assert_contains(&out, "10.00 Gb/s (-50.7%) p=0.004, 5:5 runs");
    // A 10 % lower median inside a wide spread: noise, not a regression...
    let noisy = repeated(d, "noisy.json", &[18.0, 23.0, 16.5, 21.0, 18.3], &tcp);
    let (out, _) = exits(&["--baseline", b], &[&noisy], 0);
    assert_contains(&out, "(-9.9%) p=");
    // ...which the plain percentage rule, without repetitions, would have failed.
    let once = repeated(d, "once.json", &[18.3], &[12.0]);
    let base_once = repeated(d, "base-once.json", &[20.3], &[12.0]);
    let (_, err) = exits(&["--baseline", base_once.to_str().unwrap()], &[&once], 2);
    assert_contains(&err, "base-once.json was measured once");
    let single = [
        "--allow-single-run",
        "--baseline",
        base_once.to_str().unwrap(),
    ];
    let (out, _) = exits(&single, &[&once], 1);
    assert_contains(
        &out,
        "WARNING: the baseline of write_bw soft v2 65536 B and 1 more are single runs",
    );
    // A stricter level lets nothing through at five repetitions: the gate says how many it needs.
    let (out, _) = exits(&["--baseline", b, "--alpha", "0.001"], &[&slow], 1);
    assert_contains(
        &out,
        "5 and 5 repetitions can never show a change at --alpha 0.001",
    );
    assert_contains(&out, "record at least 7 per side (roce_compare --repeat 7)");
}

#[test]
fn latency_repetitions_regress_upwards() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lat = |name: &str, v2: &[f64]| {
        comparison(
            d,
            name,
            vec![
                run(SOFT_V2, Metric::Latency, v2),
                run(TCP, Metric::Latency, &[9.0, 9.1, 8.9, 9.0, 9.2]),
            ],
        )
    };
    let base = lat("base.json", &[10.0, 10.2, 9.9, 10.1, 10.3]);
    let b = base.to_str().unwrap();
    let worse = lat("worse.json", &[20.0, 20.4, 19.8, 20.2, 20.6]);
    let (out, _) = exits(&["--baseline", b], &[&worse], 1);
    assert_contains(&out, "FAIL: write_lat soft v2 2 B median vs baseline");
    let better = lat("better.json", &[5.0, 5.1, 4.9, 5.0, 5.2]);
    exits(&["--baseline", b], &[&better], 0);
}

#[test]
fn a_baseline_from_repetitions_passes_its_rerun_and_widens_its_limit_by_its_spread() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tcp = [12.0, 12.4, 11.8, 12.1, 12.2];
    // Soft v2's repetitions strayed by 0.9 Gb/s from their median 20.3: 4.4 %, twice that 8.9 %.
    let base = repeated(d, "base.json", &[20.3, 19.7, 20.9, 21.2, 19.9], &tcp);
    let b = base.to_str().unwrap();
    // Unchanged code run again: other figures, the same spread.
    let rerun = repeated(
        d,
        "rerun.json",
        &[19.6, 20.8, 20.1, 19.4, 21.0],
        &[12.3, 11.9, 12.0, 12.5, 11.7],
    );
    let (out, err) = exits(&["--baseline", b], &[&rerun], 0);
    assert_contains(&out, "roce_gate: PASS, 2 checks: 2 passed");
    // The limit column holds the limit: 20.30 Gb/s less 8.9 %.
    assert_contains(&out, ">= 18.50 Gb/s or p > 0.01");
    assert!(!out.contains("WARNING") && err.is_empty(), "{out}{err}");
    exits(&["--baseline", b], &[&base], 0);
    // A single run against it is held to the widened limit, and warned about.
    let once = repeated(d, "once.json", &[18.6], &[12.0]);
    let (out, _) = exits(&["--baseline", b], &[&once], 0);
    assert_contains(&out, ">= 18.50 Gb/s  18.60 Gb/s (-8.4%)");
    assert_contains(
        &out,
        "WARNING: write_bw soft v2 65536 B and 1 more are single runs (",
    );
    let slow = repeated(d, "slow-once.json", &[17.0], &[12.0]);
    let (out, _) = exits(&["--baseline", b], &[&slow], 1);
    assert_contains(
        &out,
        "FAIL: write_bw soft v2 65536 B bandwidth vs baseline: 17.00 Gb/s is 16.3% worse, past \
         the limit 18.50 Gb/s (the baseline's median 20.30 Gb/s -8.9%: 2 x its repetitions' \
         spread of 4.4% (--spread-factor), wider than --max-regression 5%)",
    );
    // --spread-factor 1 narrows it to 4.4 %, under the 5 % that then holds: 19.29 Gb/s.
    let (out, _) = exits(&["--baseline", b, "--spread-factor", "1"], &[&once], 1);
    assert_contains(&out, ">= 19.29 Gb/s");
}
