//! roce_compare live: `--local` runs RoCE v2 (soft), RoCE v1 (soft) and TCP across one veth pair
//! between two network namespaces (as root; otherwise v2 and TCP on loopback and v1 skipped with a
//! note), says which link every row crossed, prints the side-by-side table and writes its files;
//! `--repeat` keeps every repetition; two-host mode runs against a `roce_compare --server` on loopback; the progress bar
//! shows on a terminal only; timeouts, usage errors and "nothing could run" have their exit codes.

use crate::common::assert_contains;
use crate::common::free_port;
use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_roce_compare");

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs roce_compare with `args`, killing it (and failing the test) after `secs`.
fn compare(args: &[&str], secs: u64) -> Output {
    compare_pid(args, secs).0
}

/// [`compare`], and the process id it ran as.
fn compare_pid(args: &[&str], secs: u64) -> (Output, u32) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "roce_compare {args:?} hung for {secs} s; stdout: {} stderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

/// stdout and stderr, once the exit code is asserted to be `code` (both shown when not).
#[track_caller]
fn expect_code(o: &Output, code: i32) -> (String, String) {
    let (stdout, stderr) = text(o);
    assert_eq!(o.status.code(), Some(code), "{stdout}\n{stderr}");
    (stdout, stderr)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The words of `line`, split at white space.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// A path as an argument.
fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Table rows of `test` (lines starting with the test name and a transport label).
fn rows<'a>(stdout: &'a str, test: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter(|l| l.starts_with(&format!("{test} ")) && !l.contains("samples"))
        .collect()
}

fn the_only_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn local_compare_prints_every_transport_and_writes_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let (out, pid) = compare_pid(&["--local", "-n", "100", "--results", path(&results)], 240);
    let (stdout, stderr) = expect_code(&out, 0);

    // The table: v1 (or its skip note), v2 and TCP, for write_lat at 2 B and write_bw at 64 KiB.
    let lat = rows(&stdout, "write_lat");
    let bw = rows(&stdout, "write_bw");
    let v1_expected = is_root();
    for (rows, size) in [(&lat, "2 B"), (&bw, "64 KiB")] {
        let has = |label: &str| rows.iter().any(|r| r.contains(label) && r.contains(size));
        assert!(has("RoCE v2 (soft)"), "{stdout}");
        assert!(has("TCP"), "{stdout}");
        assert_eq!(has("RoCE v1 (soft)"), v1_expected, "{stdout}");
    }
    let tcp_lat = lat.iter().find(|r| r.contains("TCP")).unwrap();
    assert!(tcp_lat.ends_with("1.00x"), "{tcp_lat}");
    if !v1_expected {
        assert!(
            stdout.contains("skipped RoCE v1 (soft)") && stdout.contains("CAP_NET_RAW"),
            "{stdout}"
        );
    }
    assert!(!stdout.contains("failed "), "no run failed: {stdout}");
    // One histogram per latency run, and everything within 100 columns.
    let titles = stdout
        .lines()
        .filter(|l| l.starts_with("write_lat ") && l.contains("100 samples"))
        .count();
    assert_eq!(titles, if v1_expected { 3 } else { 2 }, "{stdout}");
    for line in stdout.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
    // Piped output carries the report only: no progress bar, no terminal control characters.
    assert!(
        !stdout.contains('\r') && !stdout.contains('\x1b'),
        "{stdout:?}"
    );
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "{stderr:?}"
    );

    // The files.
    let dir = the_only_dir(&results);
    assert_contains(&stdout, &format!("Files in {}", dir.display()));
    let csv_rows: Vec<HashMap<String, String>> = csv::Reader::from_path(dir.join("compare.csv"))
        .unwrap()
        .deserialize()
        .map(Result::unwrap)
        .collect();
    let runs_per_test = if v1_expected { 3 } else { 2 };
    assert_eq!(csv_rows.len(), 2 * runs_per_test, "{csv_rows:?}");
    for r in &csv_rows {
        match r["test"].as_str() {
            "write_lat" => {
                assert_eq!(r["size_bytes"], "2");
                assert_eq!(r["lat_samples"], "100");
                let median: f64 = r["lat_median_us"].parse().unwrap();
                assert!(median > 0.0, "{r:?}");
            }
            "write_bw" => {
                assert_eq!(r["size_bytes"], "65536");
                let gbps: f64 = r["bw_avg_gbps"].parse().unwrap();
                assert!(gbps > 0.0, "{r:?}");
            }
            other => panic!("unexpected test {other}"),
        }
        let expected_roce = match r["transport"].as_str() {
            "tcp" => "",
            "soft" => r["label"].split(' ').nth(1).unwrap(),
            other => panic!("unexpected transport {other}"),
        };
        assert_eq!(r["roce"], expected_roce, "{r:?}");
    }
    crate::common::schema::assert_csv_header("compare-linked", &dir.join("compare.csv"));
    let doc = crate::common::schema::assert_valid_file("compare", &dir.join("compare.json"));
    assert_eq!(doc["schema"], "roceperf.compare");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * runs_per_test);
    let labels: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
    let expected: Vec<&str> = if v1_expected {
        vec!["RoCE v1 (soft)", "RoCE v2 (soft)", "TCP"]
    } else {
        vec!["RoCE v2 (soft)", "TCP"]
    };
    assert_eq!(labels[..runs_per_test], expected[..]);
    assert_eq!(labels[runs_per_test..], expected[..]);
    assert_eq!(
        doc["skipped"].as_array().unwrap().len(),
        usize::from(!v1_expected)
    );
    // Like for like: every row crossed one link, the veth pair between our namespaces as root, else
    // lo; the table, compare.json, compare.csv and the plots say which.
    let link = if v1_expected {
        format!("veth (netns rpc{pid}a<->rpc{pid}b, MTU 9000)")
    } else {
        "lo".to_string()
    };
    for r in runs {
        assert_eq!(r["link"], link.as_str(), "{r}");
    }
    for r in &csv_rows {
        assert_eq!(r["link"], link, "{r:?}");
    }
    assert_contains(&stdout, &format!("\nlink: every row crossed {link}\n"));

    // One HdrHistogram log per latency run, each with one interval that decodes to 100 samples.
    let hlogs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlog"))
        .collect();
    assert_eq!(hlogs.len(), runs_per_test, "{hlogs:?}");
    for path in &hlogs {
        let bytes = std::fs::read(path).unwrap();
        let mut intervals = 0;
        for entry in IntervalLogIterator::new(&bytes) {
            if let LogEntry::Interval(i) = entry.unwrap() {
                intervals += 1;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(i.encoded_histogram())
                    .unwrap();
                let h: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut raw.as_slice())
                    .unwrap();
                assert_eq!(h.len(), 100, "{}", path.display());
            }
        }
        assert_eq!(intervals, 1, "{}", path.display());
    }
    for svg in ["latency.svg", "bandwidth.svg"] {
        let text = std::fs::read_to_string(dir.join(svg)).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(
            text.contains("RoCE v2 (soft)") && text.contains("TCP"),
            "{svg}"
        );
        let legend = if v1_expected {
            "TCP over veth (netns"
        } else {
            "TCP over lo"
        };
        assert!(text.contains(legend), "{svg}: {legend}");
    }
    // No namespace of ours is left behind.
    if is_root() {
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&list.stdout).contains(&format!("rpc{pid}")),
            "namespaces left behind"
        );
    }
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_host_mode_runs_against_a_compare_server_on_loopback() {
    let port = free_port().to_string();
    let _server = Server(
        Command::new(BIN)
            .args(["--server", "--once", "-d", "lo", "--control-port", &port])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let host = ["127.0.0.1", "-d", "lo", "--control-port", &port];
    let out = compare(
        &[&host[..], &words("roce_write_lat -n 100 --no-files")].concat(),
        240,
    );
    let (stdout, _) = expect_code(&out, 0);
    let lat = rows(&stdout, "write_lat");
    assert!(lat.iter().any(|r| r.contains("RoCE v2 (soft)")), "{stdout}");
    assert!(lat.iter().any(|r| r.contains("TCP")), "{stdout}");
    assert!(
        rows(&stdout, "write_bw").is_empty(),
        "only the test asked for: {stdout}"
    );
    // RoCE v1 on lo either runs or is reported, never silently dropped.
    assert!(
        lat.iter().any(|r| r.contains("RoCE v1")) || stdout.contains("failed RoCE v1, write_lat:"),
        "{stdout}"
    );
    assert!(!stdout.contains("Files in"), "--no-files: {stdout}");
}

#[test]
fn no_server_at_the_host_is_a_clear_setup_error() {
    let port = free_port().to_string();
    let out = compare(&["127.0.0.1", "--control-port", &port, "-n", "5"], 60);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_contains(
        &stderr,
        &format!("127.0.0.1:{port}: no roce_compare --server answers there"),
    );
}

#[test]
fn runs_that_outlive_the_timeout_are_killed_and_nothing_ran_is_exit_2() {
    let out = compare(&words("--local write_lat -D 5 --timeout 1 --no-files"), 120);
    let (stdout, stderr) = expect_code(&out, 2);
    assert_contains(
        &stdout,
        "failed RoCE v2 (soft), write_lat: timed out after 1 s (--timeout)",
    );
    assert_contains(&stdout, "failed TCP, write_lat: timed out");
    assert_contains(&stderr, "no transport could run");
}

#[test]
fn usage_errors_exit_2_and_say_what_to_do() {
    for (args, says) in [
        (&[][..], "say what to compare: --local"),
        (&["--local", "somehost"][..], "--local takes no host"),
        (&["hosta", "hostb"][..], "one server host only"),
        (&["--local", "-d", "eth0"][..], "-d is for two-host runs"),
        (&["--server", "write_lat"][..], "--server takes its tests"),
    ] {
        let out = compare(args, 30);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn the_progress_bar_shows_on_a_terminal() {
    // `script` gives roce_compare a pseudo-terminal for stdout and stderr.
    if crate::common::skip_unless(
        Command::new("script").arg("--version").output().is_ok(),
        "needs script (util-linux) for a pseudo-terminal",
    ) {
        return;
    }
    let cmd = format!("{BIN} --local write_lat -n 100 --no-files");
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains('\x1b') && stdout.contains("runs"),
        "a bar counting runs: {stdout:?}"
    );
    assert!(
        stdout.contains("write_lat over "),
        "names the run: {stdout:?}"
    );
    assert!(
        stdout.contains("write_lat  TCP"),
        "and the table: {stdout:?}"
    );
}

#[test]
fn sigterm_stops_the_comparison_and_reports_what_ran() {
    let child = Command::new(BIN)
        .args(["--local", "write_lat", "write_bw", "-D", "4", "--no-files"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill has no memory preconditions; pid is our own child, not yet reaped.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = expect_code(&out, 130);
    assert_contains(&stdout, "TCP, write_bw: not run: interrupted");
    assert_contains(&stderr, "interrupted");
    if is_root() {
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&list.stdout).contains(&format!("rpc{pid}")),
            "namespaces left behind"
        );
    }
}

#[test]
fn a_gate_missed_by_a_live_run_exits_1() {
    let args = "--local write_lat -n 100 --no-files --gate-transport tcp --max-p50 1ns";
    let out = compare(&words(args), 240);
    let (stdout, _) = expect_code(&out, 1);
    assert_contains(&stdout, "FAIL: write_lat tcp 2 B median latency");
    assert!(
        !stdout.contains("write_lat soft"),
        "only TCP is gated: {stdout}"
    );
}

#[test]
fn repeated_runs_keep_every_repetition_for_the_gates() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut args = words("--local write_lat -n 100 --repeat 2 --max-ratio soft-v2/tcp:p50=1000");
    args.extend(["--results", path(&results)]);
    let out = compare(&args, 240);
    let (stdout, _) = expect_code(&out, 0);
    // One row per transport, the median repetition's, and a line that says so.
    let lat = rows(&stdout, "write_lat");
    assert_eq!(lat.len(), if is_root() { 3 } else { 2 }, "{stdout}");
    assert_contains(&stdout, "each row: the median of up to 2 repetitions");
    assert_contains(&stdout, "roce_gate: PASS, 1 checks: 1 passed");
    let json = the_only_dir(&results).join("compare.json");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for run in doc["runs"].as_array().unwrap() {
        let reps = &run["repetitions"];
        assert_eq!(reps.as_array().unwrap().len(), 1, "{run}");
        assert_eq!(reps[0]["size_bytes"], 2);
        let lat = reps[0]["latency"].as_array().unwrap();
        assert_eq!(lat.len(), 2, "{run}");
        assert!(lat.iter().all(|l| l["median_us"].as_f64().unwrap() > 0.0));
    }
    // roce_gate reads them back: a ratio no run can meet fails with exit 1.
    let gate = Command::new(env!("CARGO_BIN_EXE_roce_gate"))
        .args(["--max-ratio", "soft-v2/tcp:p50=0.001"])
        .arg(&json)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    let gate_out = String::from_utf8_lossy(&gate.stdout);
    assert_eq!(gate.status.code(), Some(1), "{gate_out}");
    assert_contains(&gate_out, "FAIL: write_lat soft v2 2 B median latency is");
}
