//! Each queue pair's own figures through the real binaries: its share of a size (`results[].qps`),
//! its bytes over time (`--qp-series`), its counters (`test.counters.per_qp`), in JSON (validated
//! against the schema), CSV (read back) and `-v`, over soft and TCP.

use crate::common::schema::assert_valid;
use crate::common::{self, pair_on_lo};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The JSON result's one size, with each queue pair's share checked to add up to it exactly.
fn shares_add_up(doc: &Value, qps: usize) -> &Value {
    let r = &doc["results"][0];
    let size = r["size_bytes"].as_u64().unwrap();
    let messages = r["bandwidth"]["messages"].as_u64().unwrap();
    let shares = r["qps"].as_array().unwrap_or_else(|| panic!("no qps: {r}"));
    assert_eq!(shares.len(), qps, "{r}");
    for (i, q) in shares.iter().enumerate() {
        assert_eq!(q["qp"], i as u64);
        assert_eq!(
            q["bytes"].as_u64().unwrap(),
            q["messages"].as_u64().unwrap() * size
        );
    }
    let bytes: u64 = shares.iter().map(|q| q["bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        bytes,
        messages * size,
        "the shares' bytes are the size's: {r}"
    );
    let gbps: f64 = shares
        .iter()
        .map(|q| q["goodput_gbps"].as_f64().unwrap())
        .sum();
    let avg = r["bandwidth"]["avg_gbps"].as_f64().unwrap();
    assert!((gbps - avg).abs() <= avg * 1e-9 + 1e-9, "{gbps} vs {avg}");
    r
}

fn csv_text(path: &Path) -> (Vec<u8>, csv::Reader<std::io::Cursor<Vec<u8>>>) {
    let bytes = std::fs::read(path).unwrap();
    (
        bytes.clone(),
        csv::Reader::from_reader(std::io::Cursor::new(bytes)),
    )
}

#[test]
fn soft_four_queue_pairs_share_a_timed_run_with_a_series_in_json_csv_and_v() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("c.json"), dir.path().join("c.csv"));
    let server = vec!["-d", "lo", "-q", "4", "-D", "2", "-s", "16384"];
    let mut client = server.clone();
    client.extend(["--qp-series", "10", "-v"]);
    client.extend([
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let (s, c) = pair_on_lo("write_bw", server, client);
    common::assert_both_ok("write_bw -q 4 --qp-series 10 -D 2", &s, &c);
    let doc = common::json_file(&json);
    assert_valid("result", &doc, "write_bw -q 4 --qp-series 10");
    let r = shares_add_up(&doc, 4);
    // The series: cumulative per queue pair, its last sample each queue pair's bytes.
    let series = &r["qp_series"];
    assert_eq!(series["interval_ms"], 10);
    let t: Vec<f64> = series["t_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let rows = series["bytes"].as_array().unwrap();
    assert_eq!(t.len(), rows.len());
    // The measured window of a 2 s run (less -f's margins) holds dozens of 10 ms samples.
    assert!(t.len() > 20, "{} samples: {t:?}", t.len());
    assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    for q in 0..4 {
        let col: Vec<u64> = rows.iter().map(|row| row[q].as_u64().unwrap()).collect();
        assert!(
            col.windows(2).all(|w| w[0] <= w[1]),
            "cumulative, qp {q}: {col:?}"
        );
        assert_eq!(col.last(), r["qps"][q]["bytes"].as_u64().as_ref(), "qp {q}");
    }
    // Each queue pair's counters, with its QPN.
    let per_qp = doc["test"]["counters"]["per_qp"].as_array().unwrap();
    assert_eq!(per_qp.len(), 4);
    assert!(
        per_qp.iter().all(|q| q["qpn"].as_u64().is_some()),
        "{per_qp:?}"
    );
    // -v: a line of shares under the row, a line per queue pair's counters.
    assert!(c.stdout.contains(" per QP [Gb/s]: 0: "), "{}", c.stdout);
    assert!(c.stdout.contains("Jain's index"), "{}", c.stdout);
    assert!(c.stderr.contains(" QP 3 (QPN "), "{}", c.stderr);
    // CSV: the size's row, then one per queue pair; read back as the one size.
    let (bytes, mut rdr) = csv_text(&csv);
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let recs: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(recs.len(), 5, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(&recs[0][col("qp")], "");
    let qp_bytes: u64 = recs[1..]
        .iter()
        .map(|r| r[col("qp_bytes")].parse::<u64>().unwrap())
        .sum();
    let size = 16384u64;
    let messages = r["bandwidth"]["messages"].as_u64().unwrap();
    assert_eq!(qp_bytes, messages * size);
    assert_eq!(&recs[4][col("qp")], "3");
    assert_eq!(
        roceperf::results::read::rows_from_bytes(&csv, &bytes),
        Ok(1),
        "read back as one size"
    );
}

#[test]
fn a_retransmission_is_counted_on_its_queue_pair_under_seeded_loss() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let server = vec![
        "-d",
        "lo",
        "-q",
        "2",
        "-n",
        "2000",
        "-s",
        "16384",
        "--validate",
    ];
    let mut client = server.clone();
    client.extend(["--impair", "loss=1%", "--impair-seed", "7"]);
    client.extend(["--json", json.to_str().unwrap()]);
    let (s, c) = pair_on_lo("write_bw", server, client);
    common::assert_both_ok("write_bw -q 2 with 1 % loss", &s, &c);
    let doc = common::json_file(&json);
    assert_valid("result", &doc, "write_bw -q 2 --impair loss=1%");
    shares_add_up(&doc, 2);
    let k = &doc["test"]["counters"];
    let per_qp = k["per_qp"].as_array().unwrap();
    let sum = |key: &str| per_qp.iter().map(|q| q[key].as_u64().unwrap()).sum::<u64>();
    let total = k["retransmitted_packets"].as_u64().unwrap();
    assert!(
        total > 0,
        "1 % loss over 2 × 2000 × 4 packets resends some: {k}"
    );
    assert_eq!(sum("retransmitted_packets"), total, "{k}");
    assert_eq!(
        sum("retransmitted_bytes"),
        k["retransmitted_bytes"].as_u64().unwrap()
    );
    assert!(
        per_qp
            .iter()
            .all(|q| q["retransmitted_packets"].as_u64().unwrap() > 0),
        "both queue pairs lost packets: {per_qp:?}"
    );
    // No congestion control ran: no CNP, no rate.
    assert!(
        per_qp
            .iter()
            .all(|q| q["cnps_sent"] == 0 && q["rate_now_gbps"].is_null())
    );
}

#[test]
fn tcp_two_connections_each_report_their_bytes_and_retransmissions() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let j = json.to_str().unwrap();
    let (s, c) = common::pair_plus(
        "send_bw",
        &["-q", "2", "-n", "300", "-s", "65536"],
        &["--json", j, "--qp-series", "1"],
    );
    common::assert_both_ok("tcp send_bw -q 2", &s, &c);
    let doc = common::json_file(&json);
    assert_valid("result", &doc, "tcp send_bw -q 2");
    let r = shares_add_up(&doc, 2);
    for q in r["qps"].as_array().unwrap() {
        assert_eq!(q["messages"], 300, "{q}");
        assert_eq!(q["bytes"], 300 * 65536, "{q}");
    }
    let last = r["qp_series"]["bytes"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last, serde_json::json!([300 * 65536, 300 * 65536]));
    let k = &doc["test"]["counters"];
    let per_qp = k["per_qp"].as_array().unwrap();
    assert_eq!(per_qp.len(), 2, "{k}");
    for q in per_qp {
        // What TCP cannot count is null, not 0.
        assert!(
            q["qpn"].is_null() && q["ce_marked_packets"].is_null() && q["cnps_sent"].is_null(),
            "{q}"
        );
        assert!(q["retransmitted_packets"].as_u64().is_some(), "{q}");
    }
    assert!(k["retransmitted_bytes"].as_u64().is_some(), "{k}");
}

#[test]
fn qp_series_is_refused_where_it_cannot_apply() {
    common::assert_refused(
        "write_lat",
        &[
            "--transport",
            "tcp",
            "--qp-series",
            "10",
            "--json",
            "x.json",
        ],
        &["--qp-series", "latency test"],
    );
    common::assert_refused(
        "write_bw",
        &["--transport", "tcp", "--qp-series", "10"],
        &["--qp-series", "--json FILE or --results DIR"],
    );
    common::assert_refused(
        "write_bw",
        &["--transport", "tcp", "--qp-series", "0", "--json", "x.json"],
        &["--qp-series"],
    );
}
