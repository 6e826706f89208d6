//! The gate flags of roce_gate work on the six binaries directly: a missed threshold is exit 1 with the
//! table, a met one exit 0, an unreadable baseline exit 2.

use crate::common;
use common::pair_plus;

#[test]
fn an_impossible_min_bw_fails_the_run_with_exit_1() {
    let (s, c) = pair_plus("write_bw", &["-n", "50"], &["--min-bw", "100000Gb/s"]);
    assert_eq!(s.code(), 0, "the server had no gate: {}", s.stderr);
    assert_eq!(c.code(), 1, "{}\n{}", c.stdout, c.stderr);
    assert!(
        c.stdout.contains("FAIL") && c.stdout.contains("--min-bw"),
        "{}",
        c.stdout
    );
    assert!(c.stderr.contains("gate check(s) failed"), "{}", c.stderr);
}

#[test]
fn a_lenient_gate_passes_with_exit_0_and_writes_junit() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("gate.xml");
    let gate = ["--max-p99", "10s", "--junit", junit.to_str().unwrap()];
    // 1,000 samples: the least that holds p99 (10 beyond it).
    let (s, c) = pair_plus("send_lat", &["-n", "1000"], &gate);
    common::assert_both_ok("a_lenient_gate_passes_with_exit_0_and_writes_junit", &s, &c);
    assert!(c.stdout.contains("pass"), "{}", c.stdout);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testcase") && !xml.contains("<failure"),
        "{xml}"
    );
}

#[test]
fn a_limit_on_a_withheld_percentile_fails_with_exit_1_saying_what_it_needs() {
    let (s, c) = pair_plus("send_lat", &["-n", "500"], &["--max-p99", "10s"]);
    assert_eq!(s.code(), 0, "the server had no gate: {}", s.stderr);
    assert_eq!(c.code(), 1, "{}\n{}", c.stdout, c.stderr);
    assert!(
        c.stdout.contains(
            "p99 latency is withheld, not enough samples: p99 needs 1,000 samples (10 beyond \
             it); this result has 500; run more iterations (-n 1000)"
        ),
        "{}",
        c.stdout
    );
}

#[test]
fn a_latency_limit_on_a_bandwidth_test_is_not_a_vacuous_pass() {
    let (_, c) = pair_plus("read_bw", &["-n", "20"], &["--max-p99", "1s"]);
    assert_eq!(c.code(), 1, "{}\n{}", c.stdout, c.stderr);
}

#[test]
fn an_unreadable_baseline_is_exit_2_naming_it() {
    let (_, c) = pair_plus(
        "write_bw",
        &["-n", "20"],
        &["--baseline", "/nonexistent/base.json"],
    );
    assert_eq!(c.code(), 2, "{}\n{}", c.stdout, c.stderr);
    assert!(c.stderr.contains("/nonexistent/base.json"), "{}", c.stderr);
}
