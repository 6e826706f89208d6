//! roce_compare --from: result files made elsewhere in, the side-by-side report and its files out.

use crate::common;
use crate::common::assert_contains;

use common::results::{bw_result as bw, run_info as info};
use roceperf::params::{Metric, RoceVersion, Role, TestKind, TransportKind, Verb};
use roceperf::results::{self, Measured, SizeResult};
use roceperf::stats::{self, LatencyStats};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lat(base_ns: u64) -> SizeResult {
    let mut h = stats::new_latency_histogram();
    for i in 0..2000u64 {
        h.record(base_ns + (i * 37) % (base_ns / 2)).unwrap();
    }
    SizeResult {
        size: 2,
        iterations: 2000,
        measured: Measured::Latency {
            stats: LatencyStats::from_histogram(&h, &[99.0]),
            histogram: h,
        },
        cpu_util: None,
        lost: None,
    }
}

const WLAT: TestKind = TestKind::new(Verb::Write, Metric::Latency);
const WBW: TestKind = TestKind::new(Verb::Write, Metric::Bandwidth);

/// Six client runs: write_lat on v1, v2, TCP, and write_bw on each at two sizes in two files.
fn runs(dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    let transports = [
        (
            "v1",
            TransportKind::Soft,
            Some(RoceVersion::V1),
            1_800,
            40.0,
        ),
        (
            "v2",
            TransportKind::Soft,
            Some(RoceVersion::V2),
            2_000,
            36.0,
        ),
        ("tcp", TransportKind::Tcp, None, 6_000, 20.0),
    ];
    for (name, t, r, lat_ns, gbps) in transports {
        let p = dir.join(format!("lat-{name}.json"));
        results::write_json(&p, &info(WLAT, t, r, Role::Client), &[lat(lat_ns)]).unwrap();
        paths.push(p);
        for (size, factor) in [(4096u64, 0.5), (65536, 1.0)] {
            let p = dir.join(format!("bw-{name}-{size}.json"));
            results::write_json(
                &p,
                &info(WBW, t, r, Role::Client),
                &[bw(size, gbps * factor)],
            )
            .unwrap();
            paths.push(p);
        }
    }
    paths
}

fn compare(args: &[&str], files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce_compare"))
        .args(args)
        .arg("--from")
        .args(files)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn from_files_prints_the_table_and_histograms_and_writes_every_file() {
    let tmp = tempfile::tempdir().unwrap();
    let files = runs(tmp.path());
    let results = tmp.path().join("results");
    let o = compare(&["--results", results.to_str().unwrap()], &files);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let out = text(&o.stdout);
    for line in out.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("RoCE ") || l.starts_with("TCP "))
        .collect();
    // 3 latency rows + 3 transports x 2 sizes merged from separate files.
    assert_eq!(rows.len(), 3 + 6, "{out}");
    // TCP comes last in each group.
    assert!(rows[2].starts_with("TCP "), "{}", rows[2]);
    // A run's own file does not say which host path it took: no row is divided by v1's, and
    // none has a floor (only a live comparison measures one).
    assert!(rows.iter().all(|r| r.ends_with(" -")), "{out}");
    let v1_64k = rows
        .iter()
        .find(|l| l.starts_with("RoCE v1 (soft)") && l.contains("64 KiB"))
        .unwrap();
    assert!(v1_64k.contains("  -  "), "no floor: {v1_64k}");
    assert!(!out.contains("vs TCP"), "{out}");
    assert!(out.matches(" µs |").count() > 3, "{out}");
    assert_contains(&out, "write_lat TCP, 2 B: 2000 samples");
    // The files, in one timestamped directory.
    let dirs: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1);
    let dir = &dirs[0];
    for name in [
        "compare.csv",
        "compare.json",
        "latency.svg",
        "bandwidth.svg",
        "write_lat-roce-v1-soft-2B.hlog",
        "write_lat-roce-v2-soft-2B.hlog",
        "write_lat-tcp-2B.hlog",
    ] {
        assert!(
            dir.join(name).is_file(),
            "{name} missing in {}",
            dir.display()
        );
        assert!(out.contains(name), "{name} not listed");
    }
    let mut rdr = csv::Reader::from_path(dir.join("compare.csv")).unwrap();
    assert_eq!(rdr.records().count(), 9);
    crate::common::schema::assert_csv_header("compare", &dir.join("compare.csv"));
    crate::common::schema::assert_valid_file("compare", &dir.join("compare.json"));
    // The written comparison re-renders the same table.
    let again = compare(&["--no-files"], &[dir.join("compare.json")]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let again_rows: Vec<String> = text(&again.stdout)
        .lines()
        .filter(|l| l.starts_with("RoCE ") || l.starts_with("TCP "))
        .map(str::to_owned)
        .collect();
    assert_eq!(again_rows, rows);
}

#[test]
fn client_and_server_files_of_one_run_are_told_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for role in [Role::Client, Role::Server] {
        let p = tmp
            .path()
            .join(format!("{}.json", results::role_name(role)));
        results::write_json(
            &p,
            &info(WLAT, TransportKind::Tcp, None, role),
            &[lat(5_000)],
        )
        .unwrap();
        files.push(p);
    }
    let o = compare(&["--no-files"], &files);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("TCP [client]") && out.contains("TCP [server]"),
        "{out}"
    );
}

#[test]
fn bad_inputs_exit_2_and_gates_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let files = runs(tmp.path());
    let broken = tmp.path().join("broken.json");
    std::fs::write(&broken, "{\"schema\":").unwrap();
    let missing = tmp.path().join("missing.json");
    let o = compare(&["--no-files"], &[files[0].clone(), broken, missing]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_contains(&err, "broken.json is not valid JSON");
    assert!(
        err.contains("cannot read") && err.contains("missing.json"),
        "{err}"
    );
    // Gates over the comparison: TCP misses 15 Gb/s at 4 KiB, the soft runs do not.
    let o = compare(&["--no-files", "--size-gate-free", "x"], &files);
    assert_eq!(o.status.code(), Some(2), "unknown flags are usage errors");
    let o = compare(&["--no-files", "--min-bw", "15Gb/s"], &files[..3]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    let o = compare(&["--no-files", "--min-bw", "15Gb/s"], &files);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let o = compare(
        &[
            "--no-files",
            "--gate-transport",
            "soft",
            "--min-bw",
            "15Gb/s",
        ],
        &files,
    );
    // TCP's 10 Gb/s at 4 KiB is not held to it; the soft runs are at 18 Gb/s and more.
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
}

#[test]
fn a_comparison_read_back_keeps_its_links_and_repetitions_and_takes_ratio_gates() {
    use roceperf::results::{BandwidthFigures, CompareRun, CompareSet, Repetitions};
    let tmp = tempfile::tempdir().unwrap();
    let veth = "veth (netns rpc9a<->rpc9b, MTU 9000)";
    let run = |t: TransportKind, r: Option<RoceVersion>, gbps: &[f64]| CompareRun {
        link: Some(veth.into()),
        repetitions: vec![Repetitions {
            size: 65536,
            bandwidth: gbps
                .iter()
                .map(|&gbps| BandwidthFigures { gbps, mpps: 1.0 })
                .collect(),
            latency: vec![],
        }],
        ..CompareRun::from_run(&info(WBW, t, r, Role::Client), vec![bw(65536, gbps[0])])
    };
    let set = CompareSet {
        started_at: "2026-11-29T10:24:25Z".into(),
        version: "0.1.0".into(),
        runs: vec![
            run(
                TransportKind::Soft,
                Some(RoceVersion::V2),
                &[13.0, 12.0, 14.0],
            ),
            run(TransportKind::Tcp, None, &[12.0, 11.0, 12.5]),
        ],
        ..CompareSet::default()
    };
    let json = tmp.path().join("compare.json");
    results::json::write_document(&json, &set.to_json()).unwrap();
    let results_dir = tmp.path().join("results");
    let o = compare(
        &[
            "--results",
            results_dir.to_str().unwrap(),
            "--min-ratio",
            "soft-v2/tcp:bw=0.9",
        ],
        std::slice::from_ref(&json),
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert_contains(&out, &format!("\nlink: every row crossed {veth}\n"));
    assert_contains(&out, "each row: the median of up to 3 repetitions");
    // The ratio of the medians of the repetitions: 13 / 12.
    assert_contains(&out, "1.083x (13.00 Gb/s / 12.00 Gb/s)");
    let dir = std::fs::read_dir(&results_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc = common::json_file(&dir.join("compare.json"));
    for r in doc["runs"].as_array().unwrap() {
        assert_eq!(r["link"], veth, "{r}");
        assert_eq!(
            r["repetitions"][0]["bandwidth"].as_array().unwrap().len(),
            3
        );
    }
    let o = compare(
        &["--no-files", "--max-ratio", "tcp/soft-v2:bw=0.5"],
        std::slice::from_ref(&json),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    // --repeat is for live runs.
    let o = compare(&["--repeat", "3"], std::slice::from_ref(&json));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn a_newer_schema_version_is_said_as_roce_gate_says_it() {
    // Issue 33, defect 10: the number, and what this build reads, not `Some(99) is not 1`.
    let tmp = tempfile::tempdir().unwrap();
    let future = tmp.path().join("future.json");
    std::fs::write(
        &future,
        r#"{"schema": "roceperf.result", "schema_version": 99}"#,
    )
    .unwrap();
    let o = compare(&["--no-files"], std::slice::from_ref(&future));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_contains(
        &text(&o.stderr),
        "future.json: result schema_version 99 is not supported (this roce_compare reads version 1); \
         use the roce_compare of the roceperf version that wrote it",
    );
    let gate = common::gate(&["--max-p99", "1s"], &[&future]);
    assert_contains(
        &text(&gate.stderr),
        "result schema_version 99 is not supported (this roce_gate reads version 1); \
         use the roce_gate of the roceperf version that wrote it",
    );
}
