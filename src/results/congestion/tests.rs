use super::testdata::{doc, victim};
use super::*;

#[test]
fn the_document_reads_back_as_written() {
    let d = doc();
    let text = serde_json::to_string_pretty(&d).unwrap();
    assert!(
        text.contains("\"schema\": \"roceperf.congestion\""),
        "{text}"
    );
    assert!(text.contains("\"discipline\": \"ecn-dcqcn\""));
    let back: CongestionDoc = serde_json::from_str(&text).unwrap();
    assert_eq!(back, d);
}

#[test]
fn disciplines_say_what_they_run() {
    let rows: Vec<_> = Discipline::ALL
        .iter()
        .map(|d| {
            (
                d.name(),
                d.switch(),
                d.transport().name(),
                d.cc(),
                d.recovery().map(|r| r.name()),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("lossy-gbn", "lossy", "soft", "none", Some("gbn")),
            ("lossy-sr", "lossy", "soft", "none", Some("sr")),
            ("ecn-dcqcn", "ecn", "soft", "dcqcn", None),
            ("pfc", "pfc", "soft", "none", None),
            ("pfc-dcqcn", "pfc-ecn", "soft", "dcqcn", None),
            ("tcp-cubic", "lossy", "tcp", "cubic", None),
        ]
    );
    assert_eq!(Discipline::parse(" pfc "), Ok(Discipline::Pfc));
    let err = Discipline::parse("red").unwrap_err();
    assert_eq!(
        err,
        "\"red\" is not a discipline; use lossy-gbn, lossy-sr, ecn-dcqcn, pfc, pfc-dcqcn, tcp-cubic"
    );
}

#[test]
fn a_victim_withholds_what_its_samples_do_not_hold() {
    // 2,000 samples: p99 holds (20 beyond it), p99.9 does not (2 beyond it).
    let v = victim(2000, 50);
    assert_eq!(v.samples, 2000);
    // HdrHistogram's buckets: within 0.1 % of 10 µs.
    assert!((v.p50_us.unwrap() - 10.0).abs() < 0.011, "{:?}", v.p50_us);
    assert!(v.p99_us.is_some());
    assert_eq!(v.p99_9_us, None);
    assert_eq!(v.withheld.len(), 1);
    assert!(v.withheld[0].starts_with("p99.9"), "{:?}", v.withheld);
    // 200,000: p99.9 lies in the 1 % tail at 50 µs.
    let v = victim(200_000, 50);
    assert!((v.p99_9_us.unwrap() - 50.0).abs() < 0.1, "{:?}", v.p99_9_us);
    assert!(v.withheld.is_empty());
}

#[test]
fn the_victims_p99_is_held_against_the_idle_one() {
    let d = doc();
    let ecn = d.run(Discipline::EcnDcqcn).unwrap();
    let r = d.victim_p99_vs_idle(ecn).unwrap();
    let (loaded, idle) = (
        ecn.victim.as_ref().unwrap().p99_us.unwrap(),
        d.idle_victim.as_ref().unwrap().p99_us.unwrap(),
    );
    assert!((r - loaded / idle).abs() < 1e-12);
    assert!(d.run(Discipline::Pfc).is_none());
}

#[test]
fn the_csv_has_a_row_per_flow_and_a_total_per_discipline() {
    let text = csv::congestion_csv(&doc()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], csv::header_line());
    // lossy-gbn: 2 flows + total; ecn-dcqcn: 2 flows + total.
    assert_eq!(lines.len(), 1 + 3 + 3);
    let cells: Vec<Vec<&str>> = lines.iter().map(|l| l.split(',').collect()).collect();
    assert!(cells.iter().all(|c| c.len() == csv::COLUMNS.len()));
    let col = |name: &str| csv::COLUMNS.iter().position(|c| *c == name).unwrap();
    let total = &cells[6];
    assert_eq!(
        (
            total[col("discipline")],
            total[col("row")],
            total[col("flow")]
        ),
        ("ecn-dcqcn", "total", "")
    );
    assert_eq!(total[col("bytes")], "455000000");
    assert_eq!(total[col("goodput_fraction")], "0.9100");
    assert_eq!(total[col("drops")], "0");
    assert_eq!(total[col("cnps_handled")], "238");
    assert_eq!(total[col("recovery")], "");
    let lossy_flow = &cells[2];
    assert_eq!(
        (
            lossy_flow[col("discipline")],
            lossy_flow[col("flow")],
            lossy_flow[col("recovery")],
            lossy_flow[col("retransmitted_bytes")],
            lossy_flow[col("goodput_fraction")],
            lossy_flow[col("drops")],
        ),
        ("lossy-gbn", "1", "gbn", "60000000", "0.1500", "")
    );
}

#[test]
fn the_document_matches_its_json_schema() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/results/schema/congestion.json"
    );
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut d = doc();
    // Nulls where a run measured nothing validate too.
    d.runs[0].victim = None;
    d.runs[0].series = None;
    d.runs[0].outcome.error = Some("client exited 1".into());
    let value = serde_json::to_value(&d).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut bad = value.clone();
    bad["runs"][0]["discipline"] = "red".into();
    assert!(!validator.is_valid(&bad));
}
