use super::*;
use serde_json::json;

fn doc(values: serde_json::Value, flagged: serde_json::Value) -> Value {
    json!({
        "schema": "roceperf.fabric",
        "hosts": [{"host": "a"}, {"host": "b"}],
        "matrices": [{"leg": "given", "label": "soft v2", "test": "write_bw", "metric": "bw_avg_gbps", "unit": "Gb/s",
                      "values": values}],
        "summary": {"ok": 2, "failed": 0, "missing": 0, "not_run": 0, "flagged": flagged},
    })
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
    let unconfirmed = json!([{"test": "write_bw", "client": 0, "server": 1, "confirmed": false}]);
    assert!(
        judge(
            &doc(json!([[null, 1.0], [1.0, null]]), unconfirmed),
            None,
            &gate(None, true)
        )
        .unwrap()[0]
            .pass
    );
    let confirmed = json!([{"test": "write_bw", "client": 0, "server": 1, "confirmed": true}]);
    let c = judge(
        &doc(json!([[null, 1.0], [1.0, null]]), confirmed),
        None,
        &gate(None, true),
    )
    .unwrap();
    assert!(!c[0].pass && c[0].detail.contains("0 -> 1 (a -> b)"));
}

#[test]
fn a_baseline_matrix_is_compared_pair_by_pair() {
    let old = doc(json!([[null, 100.0], [100.0, null]]), json!([]));
    let new = doc(json!([[null, 99.0], [80.0, null]]), json!([]));
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
    assert!(judge(&json!({"schema": "x"}), None, &gate(None, false)).is_err());
}
