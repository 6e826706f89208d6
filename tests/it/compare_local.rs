//! roce_compare live: `--local` runs RoCE v1 and v2 over AF_PACKET (one host path), TCP and RoCE v2
//! over its UDP socket across one veth pair between two network namespaces (as root; otherwise the
//! UDP socket's v2 and TCP on loopback and the AF_PACKET rows skipped with a note), each row beside
//! the floor of its path, says which link every row crossed, prints the tables and writes its files;
//! the run options reach every run; `--repeat` keeps every repetition; two-host mode runs against a
//! `roce_compare --server` on loopback; every console line fits 100 columns; the progress bar shows on a terminal only; timeouts, usage
//! errors and "nothing could run" have their exit codes.

use crate::common::{assert_contains, assert_fits};
use crate::common::{free_port, the_only_dir};
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

/// Table rows of `test`: the lines under its title (`write_lat: ...`), its header and rule, up to
/// the blank line or the legend that ends them.
fn rows<'a>(stdout: &'a str, test: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{test}: ")))
        .skip(3)
        .take_while(|l| !l.is_empty() && !l.starts_with("floor = "))
        .collect()
}

/// The labels of `--local`'s rows as root, in the table's order, and without root.
const ROOT_LABELS: [&str; 4] = [
    "RoCE v1 (soft, AF_PACKET)",
    "RoCE v2 (soft, AF_PACKET)",
    "RoCE v2 (soft, UDP socket)",
    "TCP",
];
const USER_LABELS: [&str; 2] = ["RoCE v2 (soft, UDP socket)", "TCP"];

#[test]
fn local_compare_prints_every_transport_and_writes_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let (out, pid) = compare_pid(&["--local", "-n", "100", "--results", path(&results)], 240);
    let (stdout, stderr) = expect_code(&out, 0);
    // Issue 34: every console line of a comparison (its tables, notes, histograms) fits 100 columns.
    assert_fits("roce_compare --local", &stdout);
    assert_fits("roce_compare --local (stderr)", &stderr);

    // The tables: v1 and v2 over AF_PACKET (or their skip notes), v2 over the UDP socket and TCP,
    // for write_lat at 2 B and write_bw at 64 KiB.
    let lat = rows(&stdout, "write_lat");
    let bw = rows(&stdout, "write_bw");
    let root = is_root();
    let labels: &[&str] = if root { &ROOT_LABELS } else { &USER_LABELS };
    for (rows, size) in [(&lat, "2 B"), (&bw, "64 KiB")] {
        assert_eq!(rows.len(), labels.len(), "{stdout}");
        for (row, label) in rows.iter().zip(labels) {
            assert!(
                row.starts_with(label) && row.contains(size),
                "{label}: {row}\n{stdout}"
            );
        }
    }
    // The ratio column compares v2 with v1 on their one path only: TCP and the UDP socket get none.
    let last = |row: &str| row.split_whitespace().last().unwrap().to_owned();
    for rows in [&lat, &bw] {
        for row in rows.iter() {
            let ratio = last(row);
            if root && row.contains("AF_PACKET") {
                let r: f64 = ratio.parse().unwrap_or_else(|_| panic!("{row}"));
                assert!(r > 0.0, "{row}");
            } else {
                assert_eq!(ratio, "-", "{row}");
            }
        }
    }
    assert!(!stdout.contains("vs TCP"), "{stdout}");
    if !root {
        assert!(
            stdout.contains("skipped RoCE v1 (soft, AF_PACKET)") && stdout.contains("CAP_NET_RAW"),
            "{stdout}"
        );
    }
    assert!(!stdout.contains("failed "), "no run failed: {stdout}");
    assert!(stdout.starts_with("What this measures: "), "{stdout}");
    let prose = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_contains(&prose, "`roce_compare HOST -d mlx5_0`");
    if root {
        assert_contains(&prose, "RoCE v1 and v2 over AF_PACKET take one host path");
    }
    // What chose the cores, said as roce_compare chose them (never the binaries' "--cpu").
    assert_contains(&prose, "roce_compare's default, the last two cores");
    assert!(!stdout.contains("chosen with --cpu"), "{stdout}");
    // One histogram per latency run, and everything within 100 columns.
    let titles = stdout
        .lines()
        .filter(|l| l.starts_with("write_lat ") && l.contains("100 samples"))
        .count();
    assert_eq!(titles, labels.len(), "{stdout}");
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
    let runs_per_test = labels.len();
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
        // Every row has its floor, measured: a reference, and its figure.
        assert!(r["floor_reference"].starts_with("roce_ref "), "{r:?}");
        let floor = match r["test"].as_str() {
            "write_lat" => &r["floor_us"],
            _ => &r["floor_gbps"],
        };
        assert!(floor.parse::<f64>().unwrap() > 0.0, "{r:?}");
        let path = if r["label"].contains("AF_PACKET") {
            "af_packet"
        } else if r["label"].contains("UDP") {
            "udp_gso"
        } else {
            "tcp_socket"
        };
        assert_eq!(r["path"], path, "{r:?}");
    }
    crate::common::schema::assert_csv_header("compare-linked", &dir.join("compare.csv"));
    let doc = crate::common::schema::assert_valid_file("compare", &dir.join("compare.json"));
    assert_eq!(doc["schema"], "roceperf.compare");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * runs_per_test);
    let names: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(names[..runs_per_test], labels[..]);
    assert_eq!(names[runs_per_test..], labels[..]);
    assert_eq!(
        doc["skipped"].as_array().unwrap().len(),
        if root { 0 } else { 2 }
    );
    // Both RoCE rows of a test took one backend, and say so; every row carries its floor, from the
    // reference of its own path.
    for run in runs {
        let label = run["label"].as_str().unwrap();
        let want = if label.contains("AF_PACKET") {
            "af_packet"
        } else if label.contains("UDP") {
            "udp_gso"
        } else {
            "tcp_socket"
        };
        assert_eq!(run["path"], want, "{run}");
        let floors = run["floors"].as_array().unwrap();
        assert_eq!(floors.len(), 1, "{run}");
        let reference = floors[0]["reference"].as_str().unwrap();
        let mode = match (want, run["test"]["metric"].as_str().unwrap()) {
            ("af_packet", "latency") => "packet-pingpong",
            ("af_packet", _) => "packet-stream",
            ("udp_gso", "latency") => "udp-pingpong",
            ("udp_gso", _) => "udp-stream",
            (_, "latency") => "tcp-pingpong",
            _ => "tcp-stream",
        };
        assert!(reference.starts_with(&format!("roce_ref {mode} ")), "{run}");
        let figure = floors[0].get("median_us").or(floors[0].get("gbps"));
        assert!(figure.and_then(|v| v.as_f64()).unwrap() > 0.0, "{run}");
    }
    let paths = |metric: &str| -> Vec<&str> {
        runs.iter()
            .filter(|r| {
                r["test"]["metric"] == metric && r["label"].as_str().unwrap().contains("AF_PACKET")
            })
            .map(|r| r["path"].as_str().unwrap())
            .collect()
    };
    if root {
        assert_eq!(paths("latency"), ["af_packet", "af_packet"]);
        assert_eq!(paths("bandwidth"), ["af_packet", "af_packet"]);
    }
    // Like for like: every row crossed one link, the veth pair between our namespaces as root, else
    // lo; the table, compare.json, compare.csv and the plots say which.
    let link = if root {
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
            text.contains("RoCE v2 (soft, UDP socket)") && text.contains("TCP"),
            "{svg}"
        );
        let legend = if root {
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
    // Soft's default paths between two hosts: v2 over its UDP socket, v1 over AF_PACKET; each
    // with its floor, from a roce_ref server the compare server started.
    let v2 = lat
        .iter()
        .find(|r| r.starts_with("RoCE v2 (soft, UDP socket)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(v2.contains(" +"), "a floor and the stack above it: {v2}");
    assert!(lat.iter().any(|r| r.starts_with("TCP ")), "{stdout}");
    assert!(!stdout.contains("--cpu;"), "{stdout}");
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
        "failed RoCE v2 (soft, UDP socket), write_lat: timed out after 1 s (--timeout)",
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
        stdout.contains("write_lat: one-way latency"),
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
    let soft_v2 = if is_root() { 2 } else { 1 };
    assert_eq!(
        lat.len(),
        soft_v2 + if is_root() { 2 } else { 1 },
        "{stdout}"
    );
    assert_contains(&stdout, "each row: the median of up to 2 repetitions");
    // Both RoCE v2 rows (AF_PACKET and the UDP socket) are held to TCP's.
    assert_contains(
        &stdout,
        &format!("roce_gate: PASS, {soft_v2} checks: {soft_v2} passed"),
    );
    let json = the_only_dir(&results).join("compare.json");
    let doc = crate::common::json_file(&json);
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

#[test]
fn the_run_options_reach_every_run_and_the_notes_say_what_chose_them() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if crate::common::skip_unless(
        cores >= 2,
        "needs two cores for --server-cpu 1 --client-cpu 0",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut args = words(
        "--local write_lat -n 100 --server-cpu 1 --client-cpu 0 --warmup 7 --percentiles 50,99",
    );
    args.extend(["--results", path(&results)]);
    let out = compare(&args, 240);
    let (stdout, _) = expect_code(&out, 0);
    assert_contains(
        &stdout,
        "cores: server on core 1 chosen with --server-cpu; client on core 0 chosen with --client-cpu",
    );
    assert_contains(&stdout, "--warmup 7 (as given)");
    assert!(!stdout.contains("chosen with --cpu"), "{stdout}");
    let doc = crate::common::json_file(&the_only_dir(&results).join("compare.json"));
    let notes = doc["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("--percentiles 50,99 (as given)")),
        "{notes:?}"
    );
    for run in doc["runs"].as_array().unwrap() {
        // The client's core, and why, as roce_compare chose it.
        let notes: Vec<&str> = run["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert!(
            notes.contains(&"datapath on core 0 chosen with --client-cpu"),
            "{notes:?}"
        );
        // The percentiles the binaries were asked for, and no others.
        let pct = run["results"][0]["latency"]["percentiles"]
            .as_object()
            .unwrap();
        let keys: Vec<&str> = pct.keys().map(String::as_str).collect();
        assert_eq!(keys, ["p50", "p99"], "{run}");
    }
}
