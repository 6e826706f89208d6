//! All six tests over `--transport tcp` on 127.0.0.1, as separate server and client processes.

use crate::common;
use crate::common::assert_contains;
use common::{pair, pair_plus, pair_with, rows};

/// Runs one test with a small -n and checks that both sides exit 0 and print a result row.
fn both_sides_print(test: &str, size: f64) {
    let (s, c) = pair(test, &["-n", "50"]);
    assert_eq!(c.code(), 0, "client failed:\n{}\n{}", c.stdout, c.stderr);
    assert_eq!(s.code(), 0, "server failed:\n{}\n{}", s.stdout, s.stderr);
    for (side, out) in [("client", &c.stdout), ("server", &s.stdout)] {
        let r = rows(out);
        assert_eq!(r.len(), 1, "{side} of {test} prints one row:\n{out}");
        assert_eq!(r[0][0], size, "{side}: #bytes");
        // Every figure after the size and iteration count is a positive measurement (BW peak is 0.00
        // on TCP, where it is not measured).
        let figures: Vec<f64> = r[0][2..].iter().copied().filter(|v| *v != 0.0).collect();
        assert!(
            !figures.is_empty() && figures.iter().all(|v| *v > 0.0),
            "{side}: {out}"
        );
        assert!(out.contains("Transport type : TCP"), "{side} header");
    }
}

#[test]
fn write_bw() {
    both_sides_print("write_bw", 65536.0);
}

#[test]
fn read_bw() {
    both_sides_print("read_bw", 65536.0);
}

#[test]
fn send_bw() {
    both_sides_print("send_bw", 65536.0);
}

#[test]
fn write_lat() {
    both_sides_print("write_lat", 2.0);
}

#[test]
fn send_lat() {
    both_sides_print("send_lat", 2.0);
}

#[test]
fn read_lat() {
    both_sides_print("read_lat", 2.0);
}

#[test]
fn latency_rows_have_perftest_columns_and_percentiles_below() {
    let (_, c) = pair("send_lat", &["-n", "1000", "-s", "64"]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    assert!(c.stdout.contains("t_typical[usec]"), "{}", c.stdout);
    let r = rows(&c.stdout);
    // #bytes #iterations t_min t_max t_typical t_avg t_stdev p99, and p99.9 is n/a: 1,000 samples
    // put one beyond it.
    assert_eq!(r[0].len(), 8, "{:?}", r[0]);
    assert_eq!((r[0][0], r[0][1]), (64.0, 1000.0));
    let (min, max, median, p99) = (r[0][2], r[0][3], r[0][4], r[0][7]);
    assert!(min <= median && median <= p99 && p99 <= max, "{:?}", r[0]);
    let row = c.stdout.lines().find(|l| l.starts_with(" 64 ")).unwrap();
    assert_eq!(row.split_whitespace().nth(8), Some("n/a"), "{row}");
    assert!(
        c.stdout.contains("  p99.99 n/a (needs 100,000 samples)"),
        "{}",
        c.stdout
    );
}

#[test]
fn all_sizes_sweep_two_bytes_to_eight_mib() {
    let (s, c) = pair("write_bw", &["-a", "-n", "5"]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    assert_eq!(s.code(), 0, "{}", s.stderr);
    for out in [&c.stdout, &s.stdout] {
        let sizes: Vec<f64> = rows(out).iter().map(|r| r[0]).collect();
        let want: Vec<f64> = (1..=23).map(|e| (1u64 << e) as f64).collect();
        assert_eq!(sizes, want, "{out}");
    }
}

#[test]
fn latency_sweep_runs_every_size() {
    let (s, c) = pair("write_lat", &["-a", "-n", "5", "--warmup", "2"]);
    common::assert_both_ok("latency_sweep_runs_every_size", &s, &c);
    assert_eq!(rows(&c.stdout).len(), 23);
    assert_eq!(rows(&s.stdout).len(), 23);
}

#[test]
fn duration_mode_counts_iterations() {
    let (s, c) = pair("send_bw", &["-D", "2", "-s", "4K"]);
    common::assert_both_ok("duration_mode_counts_iterations", &s, &c);
    for out in [&c.stdout, &s.stdout] {
        let r = rows(out);
        assert_eq!(r.len(), 1, "{out}");
        assert!(r[0][1] > 0.0, "iterations counted in the window: {out}");
    }
}

#[test]
fn duration_mode_latency() {
    let (s, c) = pair("write_lat", &["-D", "2"]);
    common::assert_both_ok("duration_mode_latency", &s, &c);
    assert!(rows(&c.stdout)[0][1] > 0.0, "{}", c.stdout);
    assert!(rows(&s.stdout)[0][1] > 0.0, "{}", s.stdout);
}

#[test]
fn bidirectional_write_bw_sums_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
    let args = ["-b", "-n", "200", "-s", "16K"];
    let with = |p: &std::path::Path| {
        let mut a = args.to_vec();
        a.extend(["--json", p.to_str().unwrap()]);
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let (sa, ca) = (with(&sj), with(&cj));
    let (s, c) = pair_with(
        "write_bw",
        &sa.iter().map(String::as_str).collect::<Vec<_>>(),
        &ca.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    common::assert_both_ok("bidirectional_write_bw_sums_both_directions", &s, &c);
    assert!(c.stdout.contains("Bidirectional BW Test"), "{}", c.stdout);
    assert_eq!(rows(&c.stdout).len(), 1);
    assert_eq!(rows(&s.stdout).len(), 1);
    // Each side measured its own direction and reports it plus the peer's: both documents carry the
    // same total, made of both directions' 200 messages.
    let (cd, sd) = (common::json_file(&cj), common::json_file(&sj));
    assert_eq!(cd["test"]["bidirectional"], true);
    let (cb, sb) = (
        &cd["results"][0]["bandwidth"],
        &sd["results"][0]["bandwidth"],
    );
    assert_eq!(cb["messages"], 400, "both directions' messages: {cb}");
    for key in [
        "messages",
        "elapsed_ns",
        "avg_gbps",
        "avg_mibps",
        "msg_rate_mpps",
    ] {
        assert_eq!(
            cb[key], sb[key],
            "{key}: the two sides report one total\n{cb}\n{sb}"
        );
    }
    // The total is a sum of two rates, each over its own direction's time, and elapsed_ns is the longer
    // of the two: so it is at least all bytes of both directions over that longer time, and at most
    // twice the faster direction, i.e. the sum of the message rates agrees with the bytes.
    let f = |k: &str| cb[k].as_f64().unwrap_or_else(|| panic!("{k} in {cb}"));
    let bits_both = 8.0 * 16384.0 * 400.0;
    let floor_gbps = bits_both / f("elapsed_ns");
    assert!(
        f("avg_gbps") >= floor_gbps * (1.0 - 1e-9),
        "avg_gbps {} < both directions' bits over the longer time {floor_gbps}: not a sum\n{cb}",
        f("avg_gbps")
    );
    let from_rate = f("msg_rate_mpps") * 16384.0 * 8.0 / 1e3;
    assert!(
        (from_rate - f("avg_gbps")).abs() <= 1e-6 * f("avg_gbps"),
        "message rate {} and bandwidth {} are not sums of the same two directions",
        f("msg_rate_mpps"),
        f("avg_gbps")
    );
    let mib = f("avg_gbps") * 1e9 / 8.0 / 1_048_576.0;
    assert!((mib - f("avg_mibps")).abs() <= 1e-6 * mib, "{cb}");
}

#[test]
fn bidirectional_send_bw_receives_while_sending() {
    let (s, c) = pair("send_bw", &["-b", "-n", "300", "-s", "32K"]);
    common::assert_both_ok("bidirectional_send_bw_receives_while_sending", &s, &c);
    for out in [&c.stdout, &s.stdout] {
        assert_contains(out, "Send Bidirectional BW Test");
        let r = rows(out);
        assert_eq!((r.len(), r[0][0]), (1, 32768.0), "{out}");
    }
}

#[test]
fn bidirectional_duration_write_bw() {
    let (s, c) = pair("write_bw", &["-b", "-D", "2", "-s", "4K"]);
    common::assert_both_ok("bidirectional_duration_write_bw", &s, &c);
    assert!(rows(&c.stdout)[0][1] > 0.0, "{}", c.stdout);
}

#[test]
fn several_queue_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let cj = dir.path().join("c.json");
    let (s, c) = pair_plus(
        "read_bw",
        &["-q", "3", "-n", "40", "-s", "8K"],
        &["--json", cj.to_str().unwrap()],
    );
    common::assert_both_ok("several_queue_pairs", &s, &c);
    assert!(c.stdout.contains("Number of qps   : 3"), "{}", c.stdout);
    // Three connections on each side; TCP has no queue pair numbers or address lines to show.
    let doc = common::json_file(&cj);
    assert_eq!(doc["test"]["qps"], 3);
    for side in ["local", "remote"] {
        assert_eq!(doc["test"][side], serde_json::json!([]), "{side}");
    }
    // -n is per queue pair and no queue pair may post past it: 3 x 40 completed messages means every
    // one of the three carried its 40 messages of 8 KiB.
    let bw = &doc["results"][0]["bandwidth"];
    assert_eq!(bw["messages"], 120, "{bw}");
    assert_eq!(doc["results"][0]["iterations"], 40, "{}", doc["results"][0]);
    let gbps = bw["avg_gbps"].as_f64().unwrap();
    let expect = 8.0 * 8192.0 * 120.0 / bw["elapsed_ns"].as_f64().unwrap();
    assert!((gbps - expect).abs() <= 1e-6 * expect, "{bw}");
}

#[test]
fn output_selects_a_single_number() {
    let (s, c) = pair(
        "write_bw",
        &["-n", "50", "--output=bandwidth", "--report_gbits"],
    );
    common::assert_both_ok("output_selects_a_single_number", &s, &c);
    let v: f64 = c
        .stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("one number: {:?}", c.stdout));
    assert!(v > 0.0);
}

/// A 500-sample run: no tail percentile holds (p90 has 50 samples beyond it, p99 only 5). The console
/// marks each as n/a with what it needs, the JSON writes null with the reason, the CSV empty cells.
#[test]
fn a_500_sample_run_withholds_every_percentile_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = common::pair_writing_files(
        dir.path(),
        "n500-",
        "write_lat",
        &["--transport", "tcp", "-n", "500"],
    );
    common::assert_both_ok("a_500_sample_run_withholds_every_percentile", &s, &c);
    let row = c.stdout.lines().find(|l| l.starts_with(" 2 ")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.len(), 9, "perftest's nine columns: {row}");
    assert_eq!((cells[7], cells[8]), ("n/a", "n/a"), "{row}");
    for want in [
        "  p99 n/a (needs 1,000 samples)",
        "  p99.9 n/a (needs 10,000 samples)",
        "  p99.99 n/a (needs 100,000 samples)",
        "(500 samples, one-way)",
    ] {
        assert_contains(&c.stdout, want);
    }
    assert!(!c.stdout.contains("p90 n/a"), "{}", c.stdout);
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("n500-client.json")).unwrap(),
    )
    .unwrap();
    let lat = &doc["results"][0]["latency"];
    assert_eq!(lat["samples"], 500);
    assert!(lat["percentiles"]["p90"].is_f64(), "{lat}");
    for (label, needed) in [("p99", 1_000), ("p99.9", 10_000), ("p99.99", 100_000)] {
        assert!(lat["percentiles"][label].is_null(), "{label}: {lat}");
        let why = &lat["percentiles_withheld"][label];
        assert_eq!(why["reason"], "not_enough_samples", "{lat}");
        assert_eq!(why["samples_needed"], needed, "{lat}");
    }
    let csv = std::fs::read_to_string(dir.path().join("n500-client.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cells: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cell = |name: &str| cells[header.iter().position(|h| *h == name).unwrap()];
    assert!(cell("lat_p90_us").parse::<f64>().is_ok());
    for name in ["lat_p99_us", "lat_p99_9_us", "lat_p99_99_us"] {
        assert_eq!(cell(name), "", "{name}");
    }
}
