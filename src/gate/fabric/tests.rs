use super::*;
use serde_json::json;

/// A two-rank matrix as fabric.json holds it, read the way roce_gate reads one.
fn doc(values: serde_json::Value, flagged: serde_json::Value) -> FabricDoc {
    let doc = json!({
        "schema": "roceperf.fabric",
        "schema_version": 1,
        "hosts": [{"host": "a"}, {"host": "b"}],
        "matrices": [{"leg": "given", "label": "soft v2", "test": "write_bw", "metric": "bw_avg_gbps", "unit": "Gb/s",
                      "values": values}],
        "summary": {"ok": 2, "failed": 0, "missing": 0, "not_run": 0, "flagged": flagged},
    });
    match read::parse_json(doc).unwrap() {
        Document::Fabric(d) => *d,
        other => panic!("not read as a fabric matrix: {other:?}"),
    }
}

fn gate(min_bw: Option<&str>, no_flagged: bool) -> FabricGate {
    FabricGate {
        min_bw: min_bw.map(|t| threshold::parse_bandwidth(t).unwrap()),
        max_p50: None,
        max_p99: None,
        no_flagged,
        baseline: None,
        max_regression: Percent(5.0),
    }
}

#[test]
fn the_weakest_pair_is_held_to_the_floor() {
    let d = doc(json!([[null, 90.0], [40.0, null]]), json!([]));
    let checks = judge(&d, None, &gate(Some("50Gb/s"), false)).unwrap();
    let bw = &checks[0];
    assert!(!bw.pass);
    assert!(
        bw.detail.contains("1 -> 0 (b -> a)") && bw.detail.contains("1 of 2 pairs"),
        "{}",
        bw.detail
    );
    assert!(checks[1].pass, "every pair ran");
    assert!(
        judge(&d, None, &gate(Some("40Gb/s"), false)).unwrap()[0].pass,
        "limits are inclusive"
    );
}

#[test]
fn only_confirmed_flags_fail_no_flagged() {
    let flag = |confirmed: bool| {
        json!([{"leg": "given", "test": "write_bw", "metric": "bw_avg_gbps", "client": 0, "server": 1,
                "confirmed": confirmed}])
    };
    let unconfirmed = flag(false);
    assert!(
        judge(
            &doc(json!([[null, 1.0], [1.0, null]]), unconfirmed),
            None,
            &gate(None, true)
        )
        .unwrap()[0]
            .pass
    );
    let confirmed = flag(true);
    let c = judge(
        &doc(json!([[null, 1.0], [1.0, null]]), confirmed),
        None,
        &gate(None, true),
    )
    .unwrap();
    assert!(!c[0].pass && c[0].detail.contains("0 -> 1 (a -> b)"));
}

#[test]
fn held_back_and_unjudged_flags_pass_no_flagged_and_are_counted_real_ones_fail() {
    // As roce_fabric writes them on one host: a bad host whose peers share its host is held back.
    let flag = |client: usize, server: usize, verdict: &str| {
        json!({"leg": "given", "test": "write_bw", "metric": "bw_avg_gbps", "client": client,
               "server": server, "confirmed": true, "verdict": verdict,
               "why": "ranks 0, 1 share host vm"})
    };
    let values = json!([[null, 1.0], [1.0, null]]);
    let held = doc(
        values.clone(),
        json!([flag(0, 1, "held_back"), flag(1, 0, "held_back")]),
    );
    let c = &judge(&held, None, &gate(None, true)).unwrap()[0];
    assert!(c.pass, "{}", c.detail);
    assert_eq!(c.detail, "none flagged; held back: 2, ranks share a host");
    let unjudged = doc(values.clone(), json!([flag(0, 1, "unjudged")]));
    let c = &judge(&unjudged, None, &gate(None, true)).unwrap()[0];
    assert!(c.pass, "{}", c.detail);
    assert_eq!(c.detail, "none flagged; unjudged: 1, cores oversubscribed");
    // A bad pair (or a bad host on a host of its own) still fails, beside a held-back one.
    for real in ["bad_pair", "bad_host", ""] {
        let mixed = doc(
            values.clone(),
            json!([flag(0, 1, real), flag(1, 0, "held_back")]),
        );
        let c = &judge(&mixed, None, &gate(None, true)).unwrap()[0];
        assert!(!c.pass, "{real}: {}", c.detail);
        assert_eq!(
            c.detail, "1 flagged: write_bw 0 -> 1 (a -> b); held back: 1, ranks share a host",
            "{real}"
        );
    }
}

#[test]
fn a_baseline_matrix_is_compared_pair_by_pair() {
    let old = doc(json!([[null, 100.0], [100.0, null]]), json!([]));
    let new = doc(json!([[null, 99.0], [80.0, null]]), json!([]));
    let old = Loaded::Matrix(Box::new(old));
    let checks = judge(&new, Some(&old), &gate(None, false)).unwrap();
    let base = checks
        .iter()
        .find(|c| c.name.starts_with("baseline"))
        .unwrap();
    assert!(!base.pass);
    assert!(
        base.detail
            .contains("1 -> 0: 100.0 -> 80.00 (+20.0% worse)"),
        "{}",
        base.detail
    );
    assert!(
        !base.detail.contains("0 -> 1"),
        "1 % worse is within 5 %: {}",
        base.detail
    );
    let err = judge(&new, Some(&Loaded::NotAMatrix), &gate(None, false)).unwrap_err();
    assert_eq!(err, "the baseline is not a roce_fabric matrix");
}

#[test]
fn inputs_are_read_as_matrices_or_not_and_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let fabric = write(
        "f.json",
        r#"{"schema": "roceperf.fabric", "schema_version": 1}"#,
    );
    assert!(crate::gate::announces(&fabric, FABRIC_SCHEMA));
    assert_eq!(load(&fabric).unwrap(), Loaded::Matrix(Box::default()));
    let run = write("r.json", r#"{"schema": "roceperf.result"}"#);
    assert!(!crate::gate::announces(&run, FABRIC_SCHEMA));
    assert_eq!(load(&run).unwrap(), Loaded::NotAMatrix);
    let bad = write("b.json", "{");
    assert!(load(&bad).unwrap_err().contains("b.json: not valid JSON"));
    let future = write(
        "v.json",
        r#"{"schema": "roceperf.fabric", "schema_version": 9}"#,
    );
    let err = load(&future).unwrap_err();
    assert!(
        err.contains("v.json: fabric matrix schema_version 9 is not supported"),
        "{err}"
    );
    let err = load(&dir.path().join("none.json")).unwrap_err();
    assert!(err.starts_with(&format!("{}: ", dir.path().join("none.json").display())));
}

#[test]
fn a_p99_matrix_without_values_says_its_runs_took_too_few_samples() {
    let doc = json!({
        "schema": "roceperf.fabric",
        "schema_version": 1,
        "hosts": [{"host": "a"}, {"host": "b"}],
        "matrices": [{"leg": "given", "label": "tcp", "test": "write_lat", "metric": "lat_p99_us", "unit": "us",
                      "values": [[null, null], [null, null]]}],
        "summary": {"ok": 2, "failed": 0, "missing": 0, "not_run": 0, "flagged": []},
    });
    let Document::Fabric(d) = read::parse_json(doc).unwrap() else {
        panic!("not a fabric matrix")
    };
    let g = FabricGate {
        max_p99: Some(threshold::parse_latency("1s").unwrap()),
        ..gate(None, false)
    };
    let checks = judge(&d, None, &g).unwrap();
    assert!(!checks[0].pass);
    assert_eq!(
        checks[0].detail,
        "no pair has a value: a pair's p99 is withheld, not enough samples (it needs 1,000 \
         samples, 10 beyond it); run the latency test with -n 1000 or more"
    );
}
