use super::*;
use crate::report::export::{ExportManager, FormatFiles};
use crate::results::testdata::{bw_info, bw_result, lat_info, lat_result, set};

/// The samples of `text` as (name, labels, value), every family's HELP and TYPE checked before them.
fn samples(text: &str) -> Vec<(String, String, f64)> {
    let mut declared = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            declared.push(rest.split(' ').next().unwrap().to_owned());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        assert_eq!(declared.last().map(String::as_str), Some(name), "{line}");
        out.push((
            name.to_owned(),
            labels.trim_end_matches('}').to_owned(),
            value.parse().unwrap(),
        ));
    }
    out
}

fn value(s: &[(String, String, f64)], name: &str, has: &str) -> Option<f64> {
    s.iter()
        .find(|(n, l, _)| n == name && l.contains(has))
        .map(|(_, _, v)| *v)
}

#[test]
fn a_bandwidth_run_gives_bytes_and_messages_per_second_with_its_labels() {
    let info = bw_info();
    let r = bw_result();
    let text = run_exposition(&info, std::slice::from_ref(&r)).text();
    let s = samples(&text);
    let Measured::Bandwidth(b) = &r.measured else {
        unreachable!()
    };
    let bw = value(&s, "roceperf_bandwidth_bytes_per_second", "").unwrap();
    assert_eq!(bw, b.avg_gbps * 1e9 / 8.0);
    assert_eq!(
        value(&s, "roceperf_messages_per_second", "").unwrap(),
        b.msg_rate_mpps * 1e6
    );
    assert!(value(&s, "roceperf_bandwidth_peak_bytes_per_second", "").is_some());
    let labels = &s[0].1;
    for l in [
        "test=\"write_bw\"",
        "transport=\"soft\"",
        "roce=\"v2\"",
        "role=\"client\"",
        "device=\"lo\"",
        "peer=\"127.0.0.1\"",
        "size_bytes=\"65536\"",
    ] {
        assert!(labels.contains(l), "{l} in {labels}");
    }
}

#[test]
fn a_latency_run_gives_only_the_percentiles_that_hold_in_seconds() {
    let info = lat_info();
    let r = lat_result();
    let text = run_exposition(&info, std::slice::from_ref(&r)).text();
    let s = samples(&text);
    let Measured::Latency { stats, .. } = &r.measured else {
        unreachable!()
    };
    // 1,000 samples: p50, p90 and p99 hold; p99.9 and p99.99 are withheld.
    let pcts: Vec<&str> = s
        .iter()
        .filter(|(n, _, _)| n == "roceperf_latency_seconds")
        .map(|(_, l, _)| l.rsplit_once("percentile=").unwrap().1)
        .collect();
    assert_eq!(pcts, ["\"50\"", "\"90\"", "\"99\""]);
    assert_eq!(
        value(&s, "roceperf_latency_seconds", "percentile=\"50\"").unwrap(),
        stats.median_us / 1e6
    );
    assert_eq!(
        value(&s, "roceperf_latency_seconds", "percentile=\"99\"").unwrap(),
        stats.get(99.0).unwrap() / 1e6
    );
    assert_eq!(value(&s, "roceperf_latency_samples", "").unwrap(), 1000.0);
    assert_eq!(
        value(&s, "roceperf_cpu_utilization_ratio", "").unwrap(),
        0.125
    );
    // A TCP server: no RoCE version, no peer.
    assert!(!s[0].1.contains("roce=") && !s[0].1.contains("peer="));
}

#[test]
fn the_transport_counters_become_families_totals_and_per_queue_pair() {
    let mut info = bw_info();
    info.counters = Some(serde_json::json!({
        "retransmitted_packets": 7, "retransmitted_bytes": 28672, "timeouts": 1,
        "np_ecn_marked_roce_packets": 4,
        "drops": {"bad_icrc": 2, "unknown_qpn": 0},
        "naks_sent": {"psn_sequence": 3}, "naks_received": {"psn_sequence": 5},
        "cc": {"np_cnp_sent": 9, "rp_cnp_handled": 8, "rp_rate_cuts": 6,
               "rp_current_rate_kbps": 1, "rp_min_rate_kbps": 1},
        "per_qp": [{"qp": 0, "qpn": 18, "retransmitted_packets": 7, "retransmitted_bytes": 28672,
                    "ce_marked_packets": 4, "cnps_sent": 9, "cnps_handled": 8, "rate_cuts": 6,
                    "rate_now_gbps": null, "rate_lowest_gbps": null}]
    }));
    let s = samples(&run_exposition(&info, &[bw_result()]).text());
    assert_eq!(value(&s, "roceperf_retransmitted_packets", ""), Some(7.0));
    assert_eq!(value(&s, "roceperf_retransmission_timeouts", ""), Some(1.0));
    assert_eq!(value(&s, "roceperf_ce_marked_packets", ""), Some(4.0));
    assert_eq!(
        value(&s, "roceperf_dropped_packets", "reason=\"bad_icrc\""),
        Some(2.0)
    );
    assert_eq!(
        value(&s, "roceperf_naks_received", "kind=\"psn_sequence\""),
        Some(5.0)
    );
    assert_eq!(value(&s, "roceperf_cnps_sent", ""), Some(9.0));
    assert_eq!(value(&s, "roceperf_rate_cuts", ""), Some(6.0));
    assert_eq!(value(&s, "roceperf_qp_cnps_handled", "qp=\"0\""), Some(8.0));
    // Counts are per run: no size label on them.
    let cnps = s
        .iter()
        .find(|(n, _, _)| n == "roceperf_cnps_sent")
        .unwrap();
    assert!(!cnps.1.contains("size_bytes"), "{}", cnps.1);
}

#[test]
fn a_comparison_labels_each_row_and_sets_its_floor_beside_it() {
    let mut set = set();
    set.runs[0].floors = vec![crate::results::Floor {
        size: 2,
        median_us: Some(1.5),
        ..Default::default()
    }];
    let s = samples(&compare_exposition(&set).text());
    let label = format!("label=\"{}\"", set.runs[0].label);
    assert!(value(&s, "roceperf_latency_seconds", &label).is_some());
    assert_eq!(
        value(&s, "roceperf_floor_latency_seconds", &label),
        Some(1.5e-6)
    );
    assert!(value(&s, "roceperf_bandwidth_bytes_per_second", "label=\"TCP\"").is_some());
}

#[test]
fn the_metrics_flag_writes_one_file_replaced_whole_and_nothing_as_a_run_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("roceperf.prom");
    std::fs::write(&path, "old\n".repeat(10_000)).unwrap();
    let formats = FormatFiles {
        metrics: Some(path.clone()),
    };
    let mut m = ExportManager::new().with_formats(&formats);
    m.probe().unwrap();
    let info = bw_info();
    let results = [bw_result()];
    let doc = Document::Run {
        info: &info,
        results: &results,
        both: None,
    };
    assert_eq!(m.write(&doc).result().unwrap(), std::slice::from_ref(&path));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, run_exposition(&info, &results).text());
    assert!(
        m.write(&Document::Start(&info))
            .result()
            .unwrap()
            .is_empty()
    );
}
