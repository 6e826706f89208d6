//! Unit tests of the pacing and reporting flags: perftest's defaults, and the combinations refused.

use super::tests::{clap_err, parse_raw};
use super::*;
use crate::params::{RateLimitType, RateUnits, RunMode, TestKind};
use std::path::PathBuf;
use std::time::Duration;

const WBW: TestKind = TestKind::WRITE_BW;
const SBW: TestKind = TestKind::SEND_BW;
const SLAT: TestKind = TestKind::SEND_LAT;

fn parse_on(transport: &str, test: TestKind, args: &[&str]) -> Result<Options, Error> {
    let mut v = vec!["--transport", transport];
    if transport == "soft" {
        v.extend(["-d", "lo"]);
    }
    v.extend_from_slice(args);
    parse_raw(test, &v)
}

fn parse(test: TestKind, args: &[&str]) -> Result<Options, Error> {
    parse_on("tcp", test, args)
}

/// The error's message, which must name every one of `words`.
fn refused(r: Result<Options, Error>, words: &[&str]) {
    let msg = r.expect_err("refused").to_string();
    for w in words {
        assert!(msg.contains(w), "{w:?} not in: {msg}");
    }
}

#[test]
fn the_rate_limiter_takes_perftests_units_and_defaults() {
    let o = parse(WBW, &["--rate_limit", "2.5"]).unwrap();
    let l = o.rate_limit.unwrap();
    assert_eq!(
        (l.value, l.units, l.kind, l.burst_size),
        (2.5, RateUnits::GbPerSec, RateLimitType::Sw, 128)
    );
    let o = parse(
        SBW,
        &[
            "--rate_limit=100",
            "--rate_units=M",
            "--burst_size=16",
            "--rate_limit_type=SW",
            "-t",
            "64",
        ],
    )
    .unwrap();
    let l = o.rate_limit.unwrap();
    assert_eq!((l.units, l.burst_size), (RateUnits::MibPerSec, 16));
    assert_eq!(
        parse(WBW, &["--rate_limit", "1", "-t", "32"])
            .unwrap()
            .rate_limit
            .unwrap()
            .burst_size,
        32
    );
    assert_eq!(parse(WBW, &[]).unwrap().rate_limit, None);
    let p = parse(WBW, &["--rate_limit", "5000", "--rate_units", "p"]).unwrap();
    assert_eq!(p.rate_limit.unwrap().msgs_per_sec(65536), 5000.0);
}

#[test]
fn hardware_pacing_is_refused_on_every_transport_naming_why() {
    for (transport, words) in [
        ("tcp", vec!["--rate_limit_type HW", "tcp", "SW"]),
        ("soft", vec!["--rate_limit_type HW", "soft", "SW"]),
        (
            "verbs",
            vec![
                "--rate_limit_type HW",
                "verbs",
                "sideway",
                "IBV_QP_RATE_LIMIT",
            ],
        ),
    ] {
        refused(
            parse_on(
                transport,
                WBW,
                &["--rate_limit", "1", "--rate_limit_type", "HW"],
            ),
            &words,
        );
    }
    refused(
        parse_on(
            "soft",
            WBW,
            &["--rate_limit", "1", "--rate_limit_type", "PP"],
        ),
        &["--rate_limit_type PP"],
    );
}

#[test]
fn pacing_flags_without_a_limit_or_on_latency_tests_are_named() {
    for flag in [
        ["--burst_size", "8"],
        ["--rate_units", "p"],
        ["--rate_limit_type", "SW"],
    ] {
        refused(parse(WBW, &flag), &[flag[0], "--rate_limit"]);
    }
    refused(
        parse(SLAT, &["--rate_limit", "1"]),
        &["--rate_limit", "send_lat", "--latency_gap"],
    );
    refused(
        parse(WBW, &["--latency_gap", "10"]),
        &["--latency_gap", "write_bw", "--rate_limit"],
    );
    let o = parse(SLAT, &["--latency_gap", "250ns"]).unwrap();
    assert_eq!(o.latency_gap, Duration::from_nanos(250));
    assert_eq!(parse(SLAT, &[]).unwrap().latency_gap, Duration::ZERO);
}

#[test]
fn run_infinitely_is_endless_with_perftests_interval_rules() {
    let o = parse(WBW, &["--run_infinitely"]).unwrap();
    assert_eq!(
        (o.mode, o.output.report_interval),
        (RunMode::endless(), Some(Duration::from_secs(1)))
    );
    // perftest prints a line every -D seconds.
    let o = parse(WBW, &["--run_infinitely", "-D", "3"]).unwrap();
    assert_eq!(o.output.report_interval, Some(Duration::from_secs(3)));
    let o = parse(
        WBW,
        &[
            "--run_infinitely",
            "--report-interval",
            "0.25",
            "--cpu_util",
        ],
    )
    .unwrap();
    assert_eq!(o.output.report_interval, Some(Duration::from_millis(250)));
    let o = parse(SBW, &["--run_infinitely", "--json-stream", "s.jsonl"]).unwrap();
    assert_eq!(
        o.output.reporting_files.json_stream,
        Some(PathBuf::from("s.jsonl"))
    );
    // perftest refuses rate limits here (#327); roceperf paces a run without end too.
    assert!(
        parse(WBW, &["--run_infinitely", "--rate_limit", "1"])
            .unwrap()
            .rate_limit
            .is_some()
    );
}

#[test]
fn run_infinitely_refuses_what_it_cannot_do() {
    refused(
        parse(SLAT, &["--run_infinitely"]),
        &["--run_infinitely", "send_lat"],
    );
    refused(
        parse(WBW, &["--run_infinitely", "-n", "100"]),
        &["--run_infinitely", "-n"],
    );
    refused(
        parse(WBW, &["--run_infinitely", "-a"]),
        &["--run_infinitely", "-a"],
    );
    refused(
        parse(
            WBW,
            &["--run_infinitely", "-D", "2", "--report-interval", "1"],
        ),
        &["-D", "--report-interval"],
    );
    refused(
        parse_on("soft", WBW, &["--run_infinitely", "--oob", "perftest"]),
        &["--run_infinitely", "--oob perftest"],
    );
    refused(
        parse(WBW, &["--report-interval", "1"]),
        &["--report-interval", "--run_infinitely"],
    );
    refused(
        parse(WBW, &["--json-stream", "x"]),
        &["--json-stream", "--run_infinitely"],
    );
}

#[test]
fn out_json_and_report_both_follow_perftest() {
    let o = parse(WBW, &["--out_json"]).unwrap();
    assert_eq!(
        o.output.reporting_files.out_json(),
        Some(PathBuf::from("perftest_out.json"))
    );
    let o = parse(SLAT, &["--out_json_file=/tmp/x.json"]).unwrap();
    assert_eq!(
        o.output.reporting_files.out_json(),
        Some(PathBuf::from("/tmp/x.json"))
    );
    assert_eq!(
        parse(WBW, &[]).unwrap().output.reporting_files.out_json(),
        None
    );
    assert!(
        parse(WBW, &["-b", "--report-both"])
            .unwrap()
            .output
            .report_both
    );
    refused(parse(WBW, &["--report-both"]), &["--report-both", "-b"]);
    refused(
        parse(SLAT, &["--report-both"]),
        &["--report-both", "send_lat"],
    );
}

#[test]
fn bad_values_are_clap_errors() {
    for args in [
        vec!["--rate_limit", "0"],
        vec!["--rate_limit", "fast"],
        vec!["--rate_units", "k"],
        vec!["--rate_limit_type", "sw"],
        vec!["--burst_size", "0"],
        vec!["--latency_gap", "1s"],
        vec!["--report-interval", "0"],
    ] {
        let e = clap_err(&args);
        assert_eq!(e.exit_code(), 2, "{args:?}");
    }
}
