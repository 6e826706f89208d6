//! Output that means what it shows (issue 34): a TCP run prints no RDMA fields and no invented peak,
//! a sweep is one table, console lines fit 100 columns, `--json -` pipes into `roce_gate -`, asked
//! percentiles reach the files, and every run file says where it came from.

use crate::common::{self, assert_fits, pair_on_lo, pair_with};
use std::io::Write;
use std::process::{Command, Stdio};

fn csv_cells(path: &std::path::Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            header
                .iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

#[test]
fn a_tcp_run_prints_no_rdma_fields_and_no_invented_peak() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("t.json"), dir.path().join("t.csv"));
    let (s, c) = pair_with(
        "write_bw",
        &["-n", "50"],
        &[
            "-n",
            "50",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    common::assert_both_ok("tcp write_bw", &s, &c);
    for (side, out) in [("server", &s.stdout), ("client", &c.stdout)] {
        for absent in [
            "Connection type",
            "Using SRQ",
            "local address:",
            "QPN",
            "RKey",
            "Device ",
            "rdma_cm QPs",
            "Max inline data",
            " Transport       :",
            "Mtu",
        ] {
            assert!(!out.contains(absent), "{side} prints {absent:?}:\n{out}");
        }
        assert!(
            out.contains(" Local address   : 127.0.0.1\n") && out.contains("Transport type : TCP"),
            "{side}:\n{out}"
        );
        let row = out
            .lines()
            .find(|l| l.starts_with(" 65536 "))
            .unwrap_or_else(|| panic!("{side}: no row:\n{out}"));
        assert_eq!(row.split_whitespace().nth(2), Some("n/a"), "{row}");
    }
    let doc = common::json_file(&json);
    assert_eq!(doc["test"]["local"], serde_json::json!([]), "{doc}");
    assert_eq!(doc["test"]["remote"], serde_json::json!([]), "{doc}");
    assert!(doc["results"][0]["bandwidth"]["peak_gbps"].is_null());
    // No path MTU or inline data on TCP: null, not lo's 65536 and a made-up 0.
    for key in ["mtu", "inline_size"] {
        assert!(doc["test"][key].is_null(), "{key}: {}", doc["test"][key]);
    }
    common::schema::assert_valid("result", &doc, "tcp write_bw --json");
    let rows = csv_cells(&csv);
    assert_eq!(rows[0]["mtu_bytes"], "");
    assert_eq!(rows[0]["inline_bytes"], "");
    assert_eq!(rows[0]["bw_peak_gbps"], "");
    assert_eq!(rows[0]["bw_peak_mibps"], "");
    assert_eq!(rows[0]["connection"], "");
}

/// A side's soft counters from `-v`: (timeouts, duplicate requests), and the counters' line.
fn timeouts_and_duplicates(d: &common::Done) -> (u64, u64, String) {
    let text = common::unwrapped(&format!("{}\n{}", d.stdout, d.stderr));
    let line = text
        .lines()
        .find(|l| l.starts_with(" retransmitted packets "))
        .unwrap_or_else(|| panic!("no counters line:\n{text}"))
        .to_owned();
    let after = |key: &str| -> u64 {
        let at = line.find(key).unwrap_or_else(|| panic!("{key}: {line}")) + key.len();
        line[at..]
            .split(|ch: char| !ch.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{key}: {line}"))
    };
    (after("timeouts "), after("duplicate requests "), line)
}

/// Issue 34, point 11: `-v` showed `timeouts 1` on a clean run without saying why. On lo nothing is
/// lost, so every timeout is a peer that answered late, which the peer saw as a duplicate request;
/// the line says so whenever it counts one.
fn late_peers_explain_every_timeout(what: &str, s: &common::Done, c: &common::Done) {
    let (server, client) = (timeouts_and_duplicates(s), timeouts_and_duplicates(c));
    for ((timeouts, _, line), (_, peer_dups, _)) in [(&server, &client), (&client, &server)] {
        assert!(
            *timeouts <= *peer_dups,
            "{what}: a timeout on lo is a late answer, a duplicate at the peer: {line}, peer's \
             duplicate requests {peer_dups}"
        );
        if *timeouts > 0 {
            assert!(
                line.contains(" (no ACK within the round-trip timer: a late peer counts too"),
                "{what}: the count says why: {line}"
            );
        } else {
            assert!(!line.contains("late peer"), "{what}: {line}");
        }
    }
}

#[test]
fn console_lines_fit_100_columns_and_a_sweep_is_one_table() {
    // TCP: a sweep, a verbose latency run.
    let (s, c) = pair_with("write_bw", &["-a", "-n", "5"], &["-a", "-n", "5"]);
    common::assert_both_ok("tcp -a", &s, &c);
    assert_eq!(common::rows(&c.stdout).len(), 23, "{}", c.stdout);
    assert!(
        !c.stdout.contains(" Size "),
        "a sweep prints its table once, no size lines without -v:\n{}",
        c.stdout
    );
    for d in [&s, &c] {
        assert_fits("tcp write_bw -a", &d.stdout);
    }
    let (s, c) = pair_with("write_lat", &["-n", "200", "-v"], &["-n", "200", "-v"]);
    common::assert_both_ok("tcp lat -v", &s, &c);
    for d in [&s, &c] {
        assert_fits("tcp write_lat -v", &d.stdout);
        assert_fits("tcp write_lat -v (stderr)", &d.stderr);
    }
    // Soft on lo, verbose: bandwidth (a soft sweep takes minutes on a loaded debug build; the
    // size lines -v brings back are those of one size) and latency.
    let soft = |test, extra: &[&str]| {
        let mut args = vec!["-d", "lo", "-v"];
        args.extend_from_slice(extra);
        let (s, c) = pair_on_lo(test, args.clone(), args);
        common::assert_both_ok(test, &s, &c);
        (s, c)
    };
    let (s, c) = soft("write_bw", &["-s", "65536", "-n", "200"]);
    assert!(c.stdout.contains(" Size 65536[B]   : "), "{}", c.stdout);
    assert_eq!(
        common::rows(&c.stdout).len(),
        1,
        "wrapped lines never read as rows"
    );
    for d in [&s, &c] {
        assert_fits("soft write_bw -v", &d.stdout);
        assert_fits("soft write_bw -v (stderr)", &d.stderr);
    }
    late_peers_explain_every_timeout("soft write_bw -v", &s, &c);
    let (s, c) = soft("write_lat", &["-n", "300"]);
    late_peers_explain_every_timeout("soft write_lat -v", &s, &c);
    for d in [&s, &c] {
        assert_fits("soft write_lat -v", &d.stdout);
        assert_fits("soft write_lat -v (stderr)", &d.stderr);
        // One transport line; -v's connected line without Rust's debug form; the loopback pair's
        // second address is said as the normal case it is.
        assert_eq!(d.stdout.matches("Transport").count(), 1, "{}", d.stdout);
        assert!(d.stdout.contains("Transport type : IB (soft)"));
        for absent in ["Some(", "is taken", "another roceperf"] {
            assert!(!d.stderr.contains(absent), "{absent:?} in:\n{}", d.stderr);
        }
    }
    assert!(
        c.stderr
            .contains("roceperf: data connections up with 127.0.0.1:4791"),
        "{}",
        c.stderr
    );
}

#[test]
fn json_to_standard_output_pipes_into_roce_gate() {
    let (s, c) = pair_with("write_lat", &["-n", "200"], &["-n", "200", "--json", "-"]);
    common::assert_both_ok("--json -", &s, &c);
    let doc: serde_json::Value = serde_json::from_str(&c.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the document alone ({e}):\n{}", c.stdout));
    assert_eq!(doc["schema"], "roceperf.result");
    assert!(
        c.stderr.contains("RDMA_Write Latency Test"),
        "the console went to stderr: {}",
        c.stderr
    );
    assert!(!std::path::Path::new("-").exists(), "no file named -");
    let gate = |limit: &str| {
        let mut g = Command::new(env!("CARGO_BIN_EXE_roce_gate"))
            .args(["--max-p50", limit, "-"])
            .env_remove("GITHUB_ACTIONS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        g.stdin
            .take()
            .unwrap()
            .write_all(c.stdout.as_bytes())
            .unwrap();
        g.wait_with_output().unwrap()
    };
    let pass = gate("1s");
    assert_eq!(pass.status.code(), Some(0), "{pass:?}");
    assert_eq!(gate("1ns").status.code(), Some(1));
    // --csv -: the header and the rows, nothing else.
    let (s, c) = pair_with("write_bw", &["-n", "20"], &["-n", "20", "--csv", "-"]);
    common::assert_both_ok("--csv -", &s, &c);
    let golden = crate::common::schema::golden_csv_header("result");
    assert!(c.stdout.starts_with(&format!("{golden}\n")), "{}", c.stdout);
    assert_eq!(c.stdout.lines().count(), 2, "{}", c.stdout);
    // Two files cannot share it.
    common::assert_refused(
        "write_bw",
        &["--transport", "tcp", "--json", "-", "--csv", "-"],
        &["--json: --csv already writes to standard output (-); one file at most"],
    );
}

#[test]
fn asked_percentiles_and_provenance_reach_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("p.json"), dir.path().join("p.csv"));
    let (s, c) = pair_with(
        "write_lat",
        &["-n", "300"],
        &[
            "-n",
            "300",
            "--percentiles",
            "50,99.999",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "-v",
        ],
    );
    common::assert_both_ok("percentiles", &s, &c);
    let rows = csv_cells(&csv);
    let asked = &rows[0]["lat_percentiles_us"];
    let cells: Vec<&str> = asked.split(' ').collect();
    assert_eq!(cells.len(), 2, "{asked}");
    assert!(
        cells[0].starts_with("p50=") && cells[0].len() > 4,
        "{asked}"
    );
    // 300 samples hold no p99.999: withheld, an empty value.
    assert_eq!(cells[1], "p99.999=", "{asked}");
    let doc = common::json_file(&json);
    let pct = &doc["results"][0]["latency"]["percentiles"];
    assert!(pct.get("p99.999").is_some_and(|v| v.is_null()), "{pct}");
    // Provenance: the same facts in JSON and CSV, and on stderr with -v.
    let p = &doc["test"]["provenance"];
    let read = |f: &str| std::fs::read_to_string(f).unwrap().trim().to_owned();
    assert_eq!(p["host"], read("/proc/sys/kernel/hostname"), "{p}");
    assert_eq!(p["kernel"], read("/proc/sys/kernel/osrelease"), "{p}");
    assert!(p["cpus"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["nic"]["device"], "lo", "tcp on loopback: {p}");
    assert!(
        p["nic"]["driver"].is_null(),
        "lo has no driver to name: {p}"
    );
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"));
    assert!(!p["commit"].as_str().unwrap().is_empty(), "{p}");
    let command = p["command"].as_str().unwrap();
    assert!(
        command.contains("roce_write_lat") && command.contains("--percentiles 50,99.999"),
        "{command}"
    );
    assert_eq!(rows[0]["host"], p["host"].as_str().unwrap());
    assert_eq!(rows[0]["kernel"], p["kernel"].as_str().unwrap());
    assert_eq!(rows[0]["nic"], "lo");
    assert_eq!(rows[0]["command"], command);
    assert_eq!(rows[0]["commit"], p["commit"].as_str().unwrap());
    for key in ["Host", "Kernel", "CPU", "NIC", "Build", "Command"] {
        assert!(
            c.stderr.contains(&format!(" {key:<16}: ")),
            "-v names {key}: {}",
            c.stderr
        );
    }
    assert!(
        !s.stderr.contains("provenance"),
        "only with -v: {}",
        s.stderr
    );
    assert!(
        !c.stdout.contains("Kernel"),
        "not in the report: {}",
        c.stdout
    );
}

#[test]
fn a_csv_of_an_older_roceperf_is_refused_naming_the_columns_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("old.csv");
    let golden = crate::common::schema::golden_csv_header("result");
    let old = golden.split(",lat_percentiles_us").next().unwrap();
    std::fs::write(&csv, format!("{old}\n")).unwrap();
    let d = common::assert_refused(
        "write_bw",
        &["--transport", "tcp", "--csv", csv.to_str().unwrap()],
        &[
            "as an older roceperf wrote it (without the columns added since: lat_percentiles_us, host,",
            "pass a new file to --csv",
        ],
    );
    assert_eq!(d.code(), 2);
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), format!("{old}\n"));
}
