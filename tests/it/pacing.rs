//! `--rate_limit` end to end: refused combinations exit 2 naming their flags, a paced run never sends
//! faster than it is allowed, and the target and the achieved rate are in the console, JSON and CSV.
//!
//! No assertion here depends on how fast the machine is: pacing can only make a run slower, so each
//! check is a bound that a loaded machine keeps (the accuracy figures are a benchmark, not a test).

use crate::common;
use crate::common::schema::{assert_csv_header, assert_valid_file};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn refused_combinations_exit_2_and_name_their_flags() {
    let cases: [(&str, &str, &[&str]); 8] = [
        (
            "send_lat",
            "--transport tcp --rate_limit 1",
            &["--rate_limit", "send_lat"],
        ),
        (
            "write_bw",
            "--transport tcp --rate_limit 1 --rate_limit_type HW",
            &["--rate_limit_type HW", "tcp"],
        ),
        (
            "write_bw",
            "-d lo --transport soft --rate_limit 1 --rate_limit_type PP",
            &["--rate_limit_type PP", "soft"],
        ),
        (
            "send_bw",
            "--transport verbs --rate_limit 1 --rate_limit_type HW",
            &["--rate_limit_type HW", "verbs", "sideway"],
        ),
        (
            "write_bw",
            "--transport tcp --burst_size 8",
            &["--burst_size", "--rate_limit"],
        ),
        (
            "read_bw",
            "--transport tcp --latency_gap 10",
            &["--latency_gap", "read_bw"],
        ),
        (
            "write_bw",
            "--transport tcp --rate_limit 1 --rate_units kbit",
            &["--rate_units"],
        ),
        (
            "write_bw",
            "--transport tcp --rate_limit=-3",
            &["--rate_limit"],
        ),
    ];
    for (test, args, words) in cases {
        common::assert_refused(test, &common::argv(args), words);
    }
}

/// A paced pair of `test` on lo with the command line `args` on both sides, each writing --json and
/// --csv into `dir` (`common::pair_writing_files`): the client's document, checked against its
/// schema, and stdout, once both CSVs start with the golden header.
fn paced_pair(dir: &Path, test: &str, args: &str) -> (Value, String) {
    let (_, c) = common::pair_writing_files(dir, "", test, &common::argv(args));
    for role in ["client", "server"] {
        assert_csv_header("result", &dir.join(format!("{role}.csv")));
    }
    (
        assert_valid_file("result", &dir.join("client.json")),
        c.stdout,
    )
}

/// The pacing object of the first result, and its CSV row's rate cells.
fn pacing(doc: &Value, csv: &Path) -> (Value, Vec<String>) {
    let p = doc["results"][0]["bandwidth"]["pacing"].clone();
    let mut rdr = ::csv::Reader::from_path(csv).unwrap();
    let h = rdr.headers().unwrap().clone();
    let rec = rdr.records().next().unwrap().unwrap();
    let cell = |n: &str| rec[h.iter().position(|c| c == n).unwrap()].to_string();
    (
        p,
        vec![
            cell("rate_limit"),
            cell("rate_limit_units"),
            cell("rate_achieved"),
        ],
    )
}

#[test]
fn a_paced_tcp_run_never_sends_faster_than_permitted_and_says_so() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    // 2000 messages/s in bursts of 10: a burst every 5 ms, so 200 messages take 19 periods at least.
    let (doc, stdout) = paced_pair(
        dir.path(),
        "write_bw",
        "--transport tcp -s 4096 -n 200 --warmup 0 --rate_limit 2000 --rate_units p --burst_size 10",
    );
    assert_eq!(doc["test"]["rate_limit"]["type"], "SW");
    assert_eq!(doc["test"]["rate_limit"]["burst_size"], 10);
    let bw = &doc["results"][0]["bandwidth"];
    let elapsed_s = bw["elapsed_ns"].as_f64().unwrap() / 1e9;
    assert!(
        elapsed_s >= 0.095,
        "200 messages in {elapsed_s} s: faster than 2000/s"
    );
    let (p, cells) = pacing(&doc, &dir.path().join("client.csv"));
    assert_eq!(
        (p["target"].as_f64(), p["units"].as_str()),
        (Some(2000.0), Some("msg/s"))
    );
    let achieved = p["achieved"].as_f64().unwrap();
    assert!(
        achieved <= 2000.0 * 1.000_001 && achieved > 0.0,
        "{achieved}"
    );
    assert_eq!(p["measured_at"], "sender");
    assert_eq!(cells[..2], ["2000".to_string(), "msg/s".to_string()]);
    assert!((cells[2].parse::<f64>().unwrap() - achieved).abs() < 1e-3);
    assert!(
        stdout.contains("Rate limit      : 2000[msg/s] SW, burst 10"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Rate limit      : target 2000 msg/s, achieved"),
        "{stdout}"
    );
}

#[test]
fn a_paced_soft_duration_run_counts_whole_periods_on_both_sides() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    // 0.2 Gb/s of 8 KiB messages (3052 msg/s), bursts of 8, over soft RoCE v2 on lo, for 2 s.
    let (doc, _) = paced_pair(
        dir.path(),
        "send_bw",
        "--transport soft -d lo -s 8192 -D 2 --rate_limit 0.2 --burst_size 8",
    );
    let (p, _) = pacing(&doc, &dir.path().join("client.csv"));
    let achieved = p["achieved"].as_f64().unwrap();
    // The window spans whole periods: bursts released inside it, never more than the schedule's.
    assert!(achieved <= 0.2 * 1.000_001 && achieved > 0.0, "{p}");
    let messages = doc["results"][0]["bandwidth"]["messages"].as_u64().unwrap();
    assert_eq!(messages % 8, 0, "whole bursts of 8: {messages}");
    // The receiver measured what arrived and compares it with its own --rate_limit.
    let server = assert_valid_file("result", &dir.path().join("server.json"));
    let sp = &server["results"][0]["bandwidth"]["pacing"];
    assert_eq!(sp["measured_at"], "receiver", "{server}");
    assert!(sp["achieved"].as_f64().unwrap() > 0.0);
}

#[test]
fn atomics_and_uc_are_paced_and_the_gap_spaces_ud_latency_iterations() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    // An atomic test is paced like any bandwidth test (perftest refuses its SW limiter there).
    let dir = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    let (doc, out) = paced_pair(
        dir.path(),
        "atomic_bw",
        "--transport soft -d lo -A CMP_AND_SWAP -n 600 --validate --rate_limit 2000 --rate_units p --burst_size 20",
    );
    // 30 bursts of 20, 10 ms apart: the last leaves 290 ms after the first.
    assert!(t0.elapsed() >= std::time::Duration::from_millis(290));
    let (p, cells) = pacing(&doc, &dir.path().join("client.csv"));
    assert!(p["achieved"].as_f64().unwrap() <= 2000.0 * 1.01, "{p}");
    assert_eq!(cells[..2], ["2000", "msg/s"], "{out}");
    assert_eq!(doc["test"]["atomic_type"], "CMP_AND_SWAP");
    // UC: the pacer shapes what the writer posts; nothing is resent either way.
    let dir = tempfile::tempdir().unwrap();
    let (doc, _) = paced_pair(
        dir.path(),
        "write_bw",
        "--transport soft -d lo -c UC -s 4096 -n 400 --rate_limit 0.05",
    );
    let p = &doc["results"][0]["bandwidth"]["pacing"];
    assert!(p["achieved"].as_f64().unwrap() <= 0.05 * 1.01, "{p}");
    assert_eq!(doc["test"]["connection"], "UC");
    // UD send_lat: the gap spaces the iterations and stays out of every sample.
    let dir = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    let (doc, out) = paced_pair(
        dir.path(),
        "send_lat",
        "--transport soft -d lo -c UD -s 64 -n 40 --warmup 0 --latency_gap 5ms",
    );
    assert!(
        t0.elapsed() >= std::time::Duration::from_millis(39 * 5),
        "{out}"
    );
    assert_eq!(doc["test"]["latency_gap_ns"], 5_000_000);
    let min = doc["results"][0]["latency"]["min_us"].as_f64().unwrap();
    assert!(
        min < 2500.0,
        "the gap is not in the samples: {min} µs\n{out}"
    );
}
