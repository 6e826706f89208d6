//! The report layer as a binary uses it: a sweep rendered to the console, parsed back the way scripts parse
//! perftest output, and written to a results directory as CSV and JSON that read back.

use crate::common::results::run_info;
use roceperf::params::{Metric, RoceVersion, Role, TestKind, TransportKind, Verb};
use roceperf::report::{
    address_block, extras, header_block, table_footer, table_header, table_row,
};
use roceperf::results::{self, AddressLine, Measured, RunInfo, SizeResult, results_paths};
use roceperf::stats::{self, BandwidthStats, LatencyStats};

/// A soft RoCE v2 client on lo with one queue pair each side, a warm-up, and p50 among its percentiles.
fn info(test: TestKind) -> RunInfo {
    RunInfo {
        peer: Some("127.0.0.1".into()),
        cq_mod: 1,
        mtu: Some(1024),
        gid_index: Some(1),
        local: vec![AddressLine {
            lid: 0,
            qpn: 0x11,
            psn: 0x1234,
            out_reads: None,
            rkey: Some(0x100),
            vaddr: Some(0x5555_0000_0000),
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 1]),
        }],
        remote: vec![AddressLine {
            lid: 0,
            qpn: 0x12,
            psn: 0x4321,
            out_reads: None,
            rkey: Some(0x200),
            vaddr: Some(0x7777_0000_0000),
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 1]),
        }],
        percentiles: vec![50.0, 90.0, 99.0, 99.9, 99.99],
        warmup: 100,
        started_at: results::now_rfc3339(),
        notes: vec!["core 0 chosen: first allowed core".into()],
        version: env!("CARGO_PKG_VERSION").into(),
        ..run_info(
            test,
            TransportKind::Soft,
            Some(RoceVersion::V2),
            Role::Client,
        )
    }
}

fn lat_sweep(sizes: &[u64]) -> Vec<SizeResult> {
    sizes
        .iter()
        .map(|&size| {
            let mut h = stats::new_latency_histogram();
            for i in 0..1000u64 {
                h.record(2_000 + size + (i * 7919) % 500).unwrap();
            }
            SizeResult {
                size,
                iterations: 1000,
                measured: Measured::Latency {
                    stats: LatencyStats::from_histogram(&h, &[50.0, 90.0, 99.0, 99.9, 99.99]),
                    histogram: h,
                },
                cpu_util: None,
                lost: None,
            }
        })
        .collect()
}

fn bw_sweep(sizes: &[u64]) -> Vec<SizeResult> {
    sizes
        .iter()
        .map(|&size| {
            let posted: Vec<u64> = (0..1000).map(|k| k * 1000).collect();
            let completed: Vec<u64> = posted.iter().map(|p| p + 5_000).collect();
            let peak = stats::perftest_peak(&posted, &completed, 1);
            SizeResult {
                size,
                iterations: 1000,
                measured: Measured::Bandwidth(BandwidthStats::compute(size, 1000, 1_005_000, peak)),
                cpu_util: None,
                lost: None,
            }
        })
        .collect()
}

fn render(info: &RunInfo, results: &[SizeResult]) -> String {
    let mut out = header_block(info) + &address_block(info) + &table_header(info);
    for r in results {
        out += &table_row(info, r);
    }
    out += &table_footer();
    for r in results {
        out += &extras(info, r);
    }
    out
}

/// What downstream scripts do: find the column header, then take every line that starts with two
/// integers until the closing dashes. A withheld percentile's cell (`n/a`: fewer than 10 samples
/// beyond it) reads as NaN, as a script that knows the mark would read it.
fn scrape(text: &str) -> (bool, Vec<Vec<f64>>) {
    let mut lines = text.lines();
    let header = lines
        .by_ref()
        .find(|l| l.trim_start().starts_with("#bytes"))
        .expect("column header");
    let is_bw = header.contains("BW average");
    let rows = lines
        .take_while(|l| !l.starts_with("---"))
        .map(|l| {
            l.split_whitespace()
                .map(|c| match c {
                    "n/a" => f64::NAN,
                    c => c.parse::<f64>().expect("numeric cell or n/a"),
                })
                .collect()
        })
        .collect();
    (is_bw, rows)
}

#[test]
fn latency_sweep_scrapes_like_ib_send_lat() {
    let info = info(TestKind::new(Verb::Send, Metric::Latency));
    let results = lat_sweep(&[2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
    let text = render(&info, &results);
    let (is_bw, rows) = scrape(&text);
    assert!(!is_bw);
    assert_eq!(rows.len(), results.len());
    for (row, r) in rows.iter().zip(&results) {
        assert_eq!(row.len(), 9, "perftest's nine latency columns");
        assert_eq!(row[0] as u64, r.size);
        assert_eq!(row[1], 1000.0);
        let (min, max, median, avg) = (row[2], row[3], row[4], row[5]);
        assert!(min <= median && median <= max && min <= avg && avg <= max);
        // 1,000 samples: p99 has 10 beyond it, p99.9 one, so it is n/a.
        assert!(row[7] <= max, "p99 <= max");
        assert!(row[8].is_nan(), "p99.9 withheld: {row:?}");
    }
    // Lines that are not result rows never look like one.
    let numeric_rows = text
        .lines()
        .filter(|l| {
            let mut cells = l.split_whitespace();
            matches!((cells.next(), cells.next()), (Some(a), Some(b)) if a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok())
        })
        .count();
    assert_eq!(numeric_rows, results.len());
    assert_eq!(
        text.lines().filter(|l| l.contains("latency[usec]")).count(),
        results.len()
    );
}

#[test]
fn bandwidth_sweep_scrapes_like_ib_write_bw() {
    let info = info(TestKind::new(Verb::Write, Metric::Bandwidth));
    let results = bw_sweep(&[1024, 4096, 65536]);
    let text = render(&info, &results);
    let (is_bw, rows) = scrape(&text);
    assert!(is_bw);
    assert!(text.contains("BW average[Gb/sec]"));
    assert_eq!(rows.len(), 3);
    for (row, r) in rows.iter().zip(&results) {
        let Measured::Bandwidth(b) = &r.measured else {
            unreachable!()
        };
        assert_eq!(row.len(), 5);
        assert_eq!(row[0] as u64, r.size);
        assert!(
            (row[3] - b.avg_gbps).abs() < 0.01,
            "{} vs {}",
            row[3],
            b.avg_gbps
        );
        // One post per us, each done 5 us later: the best window is the whole run,
        // (999 us + 5 us) / 1000 messages = 1.004 us per message.
        assert!(
            (row[2] - r.size as f64 * 8.0 / 1004.0).abs() < 0.01,
            "{}",
            row[2]
        );
    }
}

#[test]
fn results_dir_gets_a_csv_and_a_json_that_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let lat = info(TestKind::new(Verb::Write, Metric::Latency));
    let results = lat_sweep(&[2, 64]);
    let (csv_path, json_path) = results_paths(dir.path(), &lat);
    results::append_csv(&csv_path, &lat, &results).unwrap();
    results::write_json(&json_path, &lat, &results).unwrap();

    let doc = crate::common::json_file(&json_path);
    assert_eq!(doc["schema"], "roceperf.result");
    let back: Vec<SizeResult> = serde_json::from_value(doc["results"].clone()).unwrap();
    assert_eq!(back.len(), 2);
    let back_info: RunInfo = serde_json::from_value(doc["test"].clone()).unwrap();
    assert_eq!(back_info, lat);
    for (a, b) in back.iter().zip(&results) {
        let (
            Measured::Latency {
                histogram: ha,
                stats: sa,
            },
            Measured::Latency { histogram: hb, .. },
        ) = (&a.measured, &b.measured)
        else {
            panic!("kind changed");
        };
        assert_eq!(ha.len(), hb.len());
        assert_eq!(ha.max(), hb.max());
        // Stats recomputed from the decoded histogram agree with the stored ones.
        assert_eq!(&LatencyStats::from_histogram(ha, &lat.percentiles), sa);
    }

    let mut rdr = csv::Reader::from_path(&csv_path).unwrap();
    assert!(rdr.headers().unwrap().iter().any(|h| h == "lat_p99_99_us"));
    assert_eq!(rdr.records().count(), 2);
}
