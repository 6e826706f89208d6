use super::*;
use crate::results::read::{Document, parse_json};
use serde_json::{Value, json};

/// Two ranks, one write_bw leg with a flagged pair.
fn doc() -> FabricDoc {
    FabricDoc {
        started_at: "2026-11-29T10:24:25Z".into(),
        finished_at: "2026-11-29T10:25:00Z".into(),
        launcher: "openmpi".into(),
        ranks: 2,
        tests: vec!["write_bw".into()],
        legs: vec![LegLabel {
            leg: Leg::RoceV2,
            label: Some("soft v2".into()),
        }],
        pattern: "all".into(),
        rules: RulesDoc {
            lat_factor: 2.1,
            bw_fraction: 0.93,
            retest: true,
        },
        hosts: (0..2)
            .map(|rank| Host {
                rank,
                host: format!("h{rank}"),
                address: format!("10.0.0.{rank}"),
                ..Host::default()
            })
            .collect(),
        matrices: vec![Matrix {
            leg: Leg::RoceV2,
            label: "soft v2".into(),
            test: "write_bw".into(),
            metric: MatrixMetric::BwAvg,
            unit: "Gb/s".into(),
            size_bytes: Some(65536),
            judged: true,
            values: vec![vec![None, Some(9.123_456_789)], vec![Some(4.5), None]],
            status: vec![
                vec![None, Some(PairState::Ok)],
                vec![Some(PairState::Ok), None],
            ],
            flagged: Some(vec![vec![false, false], vec![true, false]]),
            limit: Some(MatrixLimit {
                reference: 9.123_456_789,
                value: 8.484_814_813_77,
                rule: "bandwidth < 93% of the highest".into(),
            }),
            incast: None,
        }],
        summary: Summary {
            ok: 2,
            flagged: vec![Flag {
                leg: Leg::RoceV2,
                test: "write_bw".into(),
                metric: MatrixMetric::BwAvg,
                client: 1,
                server: 0,
                client_host: "h1".into(),
                server_host: "h0".into(),
                value: Some(4.5),
                limit: Some(8.484_814_813_77),
                bad_pair: true,
                retest_value: Some(4.444_444_444),
                retest_error: None,
                confirmed: Some(true),
                verdict: "bad_pair".into(),
                why: None,
            }],
            ..Summary::default()
        },
        ..FabricDoc::default()
    }
}

#[test]
fn the_document_keeps_its_key_order_and_writes_figures_to_six_decimals() {
    let text = serde_json::to_string(&doc()).unwrap();
    let keys = [
        "\"schema\":\"roceperf.fabric\"",
        "\"schema_version\":1",
        "\"tool\":{\"name\":\"roceperf\"",
        "\"started_at\"",
        "\"finished_at\"",
        "\"interrupted\":false",
        "\"launcher\"",
        "\"ranks\":2",
        "\"tests\"",
        "\"legs\":[{\"leg\":\"roce_v2\",\"label\":\"soft v2\"}]",
        "\"pattern\"",
        "\"serial\"",
        "\"args\"",
        "\"validate\"",
        "\"rules\":{\"lat_factor\":2.1,\"bw_fraction\":0.93,\"retest\":true}",
        "\"hosts\"",
        "\"matrices\"",
        "\"summary\"",
    ];
    let at: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(
        text.contains("\"values\":[[null,9.123457],[4.5,null]]"),
        "{text}"
    );
    assert!(
        text.contains("\"status\":[[null,\"ok\"],[\"ok\",null]]"),
        "{text}"
    );
    // A limit keeps its full precision; a flagged pair's own values are rounded.
    assert!(text.contains("\"reference\":9.123456789"), "{text}");
    assert!(
        text.contains("\"value\":4.5,\"limit\":8.48481481377"),
        "{text}"
    );
    assert!(text.contains("\"retest_value\":4.444444"), "{text}");
    let mut lat = doc().matrices.remove(0);
    lat.flagged = None;
    lat.limit = None;
    let text = serde_json::to_string(&lat).unwrap();
    assert!(
        !text.contains("flagged") && !text.contains("limit"),
        "{text}"
    );
}

#[test]
fn the_document_reads_back_as_written() {
    let value = serde_json::to_value(doc()).unwrap();
    let Document::Fabric(back) = parse_json(value).unwrap() else {
        panic!("not read as a fabric matrix");
    };
    let mut want = doc();
    want.matrices[0].values[0][1] = Some(9.123457);
    want.summary.flagged[0].retest_value = Some(4.444444);
    assert_eq!(*back, want);
    // From a file's bytes, its pair records skipped, a byte-order mark ignored.
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    std::fs::write(&spool, "{\"result\":{\"schema\":\"roceperf.result\"}}\n").unwrap();
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    write_json(&mut bytes, &doc(), &spool).unwrap();
    let read = crate::results::read::parse_json_bytes(Path::new("f.json"), &bytes).unwrap();
    assert_eq!(read, Document::Fabric(Box::new(want)));
}

#[test]
fn a_hand_made_matrix_reads_with_defaults() {
    let doc = json!({"schema": "roceperf.fabric", "schema_version": 1,
                     "hosts": [{"host": "a"}], "pairs": [{"anything": 1}]});
    let Document::Fabric(d) = parse_json(doc).unwrap() else {
        panic!("not read as a fabric matrix");
    };
    assert_eq!(d.hosts[0].host, "a");
    assert!(d.matrices.is_empty() && !d.interrupted && d.summary.ok == 0);
    let err = parse_json(json!({"schema": "roceperf.fabric", "schema_version": 1, "ranks": "x"}));
    assert!(err.unwrap_err().to_string().contains("invalid type"));
}

#[test]
fn fabric_json_streams_the_pair_records_after_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join(".pairs.jsonl");
    std::fs::write(&spool, "{\"round\":0}\n\n{\"round\":1}\n").unwrap();
    let mut out = Vec::new();
    write_json(&mut out, &doc(), &spool).unwrap();
    let text = String::from_utf8(out).unwrap();
    let whole: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(whole["pairs"], json!([{"round": 0}, {"round": 1}]));
    assert!(
        text.ends_with("\n    {\"round\":0},\n    {\"round\":1}\n  ]\n}\n"),
        "{text}"
    );
    let pretty = serde_json::to_string_pretty(&doc()).unwrap();
    assert!(text.starts_with(pretty.strip_suffix("\n}").unwrap()));
    let mut none = Vec::new();
    write_json(&mut none, &doc(), &dir.path().join("missing")).unwrap();
    let whole: Value = serde_json::from_slice(&none).unwrap();
    assert_eq!(whole["pairs"], json!([]));
}

struct Rows(Vec<PairRow<'static>>);

impl PairRows for Rows {
    fn rows(&self) -> Box<dyn Iterator<Item = PairRow<'_>> + '_> {
        Box::new(self.0.iter().cloned())
    }
}

#[test]
fn fabric_csv_has_a_row_per_pair_test_with_units_in_the_header() {
    let write_bw = TestKind::from_name("write_bw").unwrap();
    let row = |attempt: u8, gbps: f32, error: Option<&'static str>| PairRow {
        leg: Leg::AsGiven,
        label: "tcp",
        test: write_bw,
        round: 3,
        run: if attempt == 1 { "matrix" } else { "retest" },
        client: 1,
        server: 0,
        client_host: "h1",
        server_host: "h0",
        status: if error.is_some() { "failed" } else { "ok" },
        within_limit: (attempt == 1).then_some(false),
        verdict: if attempt == 1 {
            "bad_pair"
        } else {
            "confirmed"
        },
        size_bytes: if error.is_some() { 0 } else { 65536 },
        figures: [gbps, f32::NAN, 0.25, f32::NAN, f32::NAN, f32::NAN],
        incast: (attempt == 1).then_some(IncastCells {
            role: "sender",
            share_pct: Some(40.0),
            sum_gbps: Some(23.75),
            jain: Some(0.961_538_461_5),
        }),
        error,
    };
    let rows = Rows(vec![
        row(1, 9.5, None),
        row(2, f32::NAN, Some("it, failed")),
    ]);
    let mut out = Vec::new();
    write_csv(&mut out, &rows).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], CSV_COLUMNS.join(","));
    assert_eq!(
        include_str!("../../../tests/data/golden/fabric.csv").trim_end(),
        lines[0],
        "tests/data/golden/fabric.csv holds the header"
    );
    assert_eq!(
        lines[1],
        "none,tcp,write_bw,3,matrix,1,0,h1,h0,ok,false,bad_pair,65536,9.5,,0.25,,,,sender,40,23.75,0.961538,"
    );
    assert_eq!(
        lines[2],
        "none,tcp,write_bw,3,retest,1,0,h1,h0,failed,,confirmed,,,,0.25,,,,,,,,\"it, failed\""
    );
}

#[test]
fn values_show_four_significant_digits() {
    assert_eq!(fmt_value(12.3456), "12.35");
    assert_eq!(fmt_value(0.18123), "0.1812");
    assert_eq!(fmt_value(0.00034561), "0.0003456");
    assert_eq!(fmt_value(1234.4), "1234");
    assert_eq!(fmt_value(0.0), "0");
}

#[test]
fn an_incast_share_sums_its_senders_and_takes_their_jain_index() {
    // Senders 1 and 2 into 0; rank 3 sent nothing (failed): the share is over the two measured.
    let v = vec![
        vec![None, None, None, None],
        vec![Some(3.0), None, None, None],
        vec![Some(6.0), None, None, None],
        vec![None, None, None, None],
    ];
    let s = IncastShare::of(&v, 0, &[1, 2, 3]);
    assert_eq!(
        (s.receiver, s.senders.clone(), s.measured, s.sum),
        (0, vec![1, 2, 3], 2, 9.0)
    );
    assert!((s.jain.unwrap() - 0.9).abs() < 1e-12, "{s:?}");
    let text = serde_json::to_string(&s).unwrap();
    assert!(
        text.contains("\"sum\":9.0") && text.contains("\"measured\":2"),
        "{text}"
    );
}
