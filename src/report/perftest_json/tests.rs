//! Unit tests of perftest's JSON document: its keys, their order and types, valid JSON in every mode.

use super::*;
use crate::results::testdata::*;
use serde_json::Value;

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn doc<'a>(info: &'a RunInfo, r: &'a SizeResult) -> PerftestJson<'a> {
    PerftestJson {
        info,
        result: r,
        single: None,
        both: None,
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[test]
fn a_bandwidth_client_writes_perftests_keys_in_perftests_order() {
    let (info, r) = (bw_info(), bw_result());
    let text = perftest_json(&doc(&info, &r));
    assert!(text.starts_with("{\n\"test_info\": {\n\"test\": \"RDMA_Write_BW_Test\",\n"));
    assert!(text.ends_with("\"MsgRate\": 0.176455\n}\n}\n"), "{text}");
    let v = parse(&text);
    assert_eq!(keys(&v), ["test_info", "results"]);
    assert_eq!(
        keys(&v["test_info"]),
        [
            "test",
            "Dual_port",
            "Device",
            "Number_of_qps",
            "Transport_type",
            "Connection_type",
            "Using_SRQ",
            "PCIe_relax_order",
            "ibv_wr_API",
            "TX_depth",
            "CQ_Moderation",
            "Mtu",
            "Link_type",
            "GID_index",
            "Max_inline_data",
            "rdma_cm_QPs",
            "Use_ROCm_memory",
            "Use_MUSA_memory",
            "Data_ex_method"
        ]
    );
    assert_eq!(
        keys(&v["results"]),
        [
            "MsgSize",
            "n_iterations",
            "BW_peak",
            "BW_average",
            "MsgRate"
        ]
    );
    assert_eq!(v["results"]["BW_average"], 11028.45);
    assert_eq!(v["test_info"]["Mtu"], 4096);
    assert!(
        text.contains("\"BW_peak\": 11030.12,\n"),
        "two decimals, as %.2lf"
    );
}

#[test]
fn a_latency_server_has_rx_depth_and_perftests_latency_keys() {
    let (info, r) = (lat_info(), lat_result());
    let v = parse(&perftest_json(&doc(&info, &r)));
    assert_eq!(v["test_info"]["test"], "Send_Latency_Test");
    let ti = keys(&v["test_info"]);
    assert!(
        !ti.contains(&"TX_depth".into()),
        "a server without -b has no TX depth"
    );
    assert!(ti.contains(&"RX_depth".into()) && !ti.contains(&"CQ_Moderation".into()));
    assert_eq!(
        keys(&v["results"]),
        [
            "MsgSize",
            "n_iterations",
            "t_min",
            "t_max",
            "t_typical",
            "t_avg",
            "t_stdev",
            "percentile_99",
            "percentile_99.9",
            "CPU_util"
        ]
    );
    assert_eq!(v["results"]["CPU_util"], 12.5);
}

#[test]
fn duration_latency_reports_the_average_and_transactions_per_second() {
    let mut info = lat_info();
    info.duration_s = Some(5);
    let mut r = lat_result();
    r.cpu_util = None;
    let v = parse(&perftest_json(&doc(&info, &r)));
    assert_eq!(
        keys(&v["results"]),
        ["MsgSize", "n_iterations", "t_avg", "tps_average"]
    );
    let t_avg = v["results"]["t_avg"].as_f64().unwrap();
    let tps = v["results"]["tps_average"].as_f64().unwrap();
    // One transaction per round trip of 2 × t_avg µs (SEND).
    assert!(
        (tps * 2.0 * t_avg / 1e6 - 1.0).abs() < 0.01,
        "{t_avg} {tps}"
    );
}

#[test]
fn every_single_figure_mode_is_valid_json() {
    // perftest writes `"bw_avg": x,` and then `}`: a trailing comma. Ours is valid.
    let (info, r) = (bw_info(), bw_result());
    for (sel, key) in [
        (OutputSelect::Bandwidth, "bw_avg"),
        (OutputSelect::MessageRate, "msgRate_avg"),
    ] {
        let text = perftest_json(&PerftestJson {
            single: Some(sel),
            ..doc(&info, &r)
        });
        assert_eq!(keys(&parse(&text)["results"]), [key]);
    }
    let (info, r) = (lat_info(), lat_result());
    let single = |info: &RunInfo| {
        perftest_json(&PerftestJson {
            single: Some(OutputSelect::Latency),
            ..doc(info, &r)
        })
    };
    assert_eq!(keys(&parse(&single(&info))["results"]), ["avg_lat"]);
    let timed = RunInfo {
        duration_s: Some(3),
        ..info
    };
    assert_eq!(keys(&parse(&single(&timed))["results"]), ["t_avg"]);
}

#[test]
fn report_both_is_one_document_with_the_sum_and_each_side() {
    let mut info = bw_info();
    info.bidirectional = true;
    let (mine, theirs) = (bw(65536, 10.0), bw(65536, 30.0));
    let sum = bw(65536, 40.0);
    let text = perftest_json(&PerftestJson {
        both: Some((&mine, &theirs)),
        ..doc(&info, &sum)
    });
    let v = parse(&text);
    assert_eq!(
        keys(&v),
        ["test_info", "results", "results_local", "results_remote"]
    );
    assert_eq!(v["test_info"]["test"], "RDMA_Write_Bidirectional_BW_Test");
    let avg = |k: &str| v[k]["BW_average"].as_f64().unwrap();
    assert!((avg("results") - avg("results_local") - avg("results_remote")).abs() < 0.02);
}

#[test]
fn slow_gbits_figures_get_six_decimals_and_odd_names_stay_json() {
    let mut info = bw_info();
    info.report_gbits = true;
    info.device = "we\"ird\\dev".into();
    let r = bw(64, 0.0123456);
    let text = perftest_json(&doc(&info, &r));
    assert!(text.contains("\"BW_average\": 0.012346,"), "{text}");
    assert_eq!(parse(&text)["test_info"]["Device"], "we\"ird\\dev");
    let mut nan = bw_result();
    if let Measured::Bandwidth(b) = &mut nan.measured {
        b.avg_mibps = f64::NAN;
    }
    parse(&perftest_json(&doc(&bw_info(), &nan)));
}

/// The `test_info` of `info` as a JSON object.
fn info_of(info: &RunInfo) -> Value {
    let r = bw_result();
    parse(&perftest_json(&doc(info, &r)))["test_info"].clone()
}

#[test]
fn the_atomic_tests_are_named_and_described_as_perftests_ib_atomic_tests() {
    use crate::params::{AtomicOp, TestKind};
    for (test, op, name) in [
        (
            "atomic_bw",
            AtomicOp::FetchAndAdd,
            "Atomic_FETCH_AND_ADD_BW_Test",
        ),
        (
            "atomic_bw",
            AtomicOp::CmpAndSwap,
            "Atomic_CMP_AND_SWAP_BW_Test",
        ),
        (
            "atomic_lat",
            AtomicOp::FetchAndAdd,
            "Atomic_FETCH_AND_ADD_Latency_Test",
        ),
    ] {
        let mut info = if test == "atomic_bw" {
            bw_info()
        } else {
            lat_info()
        };
        info.test = test.parse::<TestKind>().unwrap();
        info.atomic_type = Some(op);
        info.out_reads = Some(16);
        let t = info_of(&info);
        assert_eq!(t["test"], name);
        // ib_atomic_* print the outstanding reads where the others print the inline size.
        assert_eq!(t["Outstand_reads"], 16, "{t}");
        assert!(t.get("Max_inline_data").is_none(), "{t}");
    }
}

#[test]
fn connection_type_and_rdma_cm_are_the_runs() {
    use crate::params::ConnType;
    let mut info = bw_info();
    let t = info_of(&info);
    assert_eq!(
        (
            &t["Connection_type"],
            &t["rdma_cm_QPs"],
            &t["Data_ex_method"]
        ),
        (&"RC".into(), &"OFF".into(), &"Ethernet".into())
    );
    info.connection = Some(ConnType::Ud);
    assert_eq!(info_of(&info)["Connection_type"], "UD");
    info.connection = Some(ConnType::Uc);
    assert_eq!(info_of(&info)["Connection_type"], "UC");
    // -R with roceperf's dialect: the queue pairs through the CM, the exchange still on TCP.
    info.connection = Some(ConnType::Rc);
    info.rdma_cm = true;
    let t = info_of(&info);
    assert_eq!(
        (&t["rdma_cm_QPs"], &t["Data_ex_method"]),
        (&"ON".into(), &"Ethernet".into())
    );
    // -R --oob perftest: perftest's messages rode a CM-connected queue pair, as ib_*_bw -R says.
    info.exchange_rdma_cm = true;
    assert_eq!(info_of(&info)["Data_ex_method"], "rdma_cm");
    // The key order stays perftest's whatever the values.
    let keys_now = keys(&info_of(&info));
    assert_eq!(keys_now, keys(&info_of(&bw_info())));
}
