//! The gate's flags as a binary flattens them, and its verdicts on thresholds and baselines.

use super::*;
use crate::params::{Metric, RoceVersion, TestKind, TransportKind, Verb};
use crate::results::{BandwidthFigures, Figures, LatencyFigures};
use clap::{CommandFactory, Parser};

/// A binary's options with the gate flattened in, as the six test binaries do.
#[derive(Debug, Parser)]
struct Bin {
    #[arg(short = 's', long)]
    size: Option<u64>,
    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    out: GateOutputArgs,
}

fn row(test: TestKind, size: u64, figures: Figures) -> ResultRow {
    ResultRow {
        source: "r.json".into(),
        line: None,
        label: None,
        test,
        transport: TransportKind::Soft,
        roce: Some(RoceVersion::V2),
        role: None,
        size,
        figures,
        repeats: Vec::new(),
        path: None,
    }
}

fn wbw(gbps: f64) -> ResultRow {
    row(
        TestKind::new(Verb::Write, Metric::Bandwidth),
        65536,
        Figures::Bandwidth(BandwidthFigures {
            gbps,
            mpps: gbps / 0.524,
        }),
    )
}

fn wlat(median_us: f64) -> ResultRow {
    row(
        TestKind::new(Verb::Write, Metric::Latency),
        2,
        Figures::Latency(LatencyFigures {
            samples: 10_000,
            median_us,
            p99_us: Some(median_us * 2.0),
            p999_us: Some(median_us * 3.0),
            max_us: median_us * 10.0,
        }),
    )
}

#[test]
fn flattens_into_a_binary() {
    Bin::command().debug_assert();
    let b = Bin::try_parse_from([
        "roce_write_bw",
        "-s",
        "65536",
        "--min-bw",
        "90Gb/s",
        "--max-p99.9",
        "7us",
        "--junit",
        "g.xml",
    ])
    .unwrap();
    assert!(b.gate.is_active());
    assert_eq!(b.gate.min_bw.unwrap().gbps, 90.0);
    assert_eq!(b.gate.max_p999.unwrap().us, 7.0);
    assert_eq!(b.gate.max_regression, Percent(DEFAULT_MAX_REGRESSION));
    assert_eq!(b.out.junit, Some("g.xml".into()));
    let idle = Bin::try_parse_from(["roce_write_bw"]).unwrap();
    assert!(!idle.gate.is_active());
    let err = Bin::try_parse_from(["x", "--max-p99", "5"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("no unit"), "{err}");
}

#[test]
fn limits_are_inclusive_and_kinds_apply_to_their_tests() {
    let args = GateArgs {
        min_bw: Some(threshold::parse_bandwidth("90Gb/s").unwrap()),
        max_p50: Some(threshold::parse_latency("2us").unwrap()),
        ..GateArgs::default()
    };
    let r = evaluate(&[wbw(90.0), wlat(2.0)], &[], &args);
    assert_eq!((r.checks.len(), r.exit_code()), (2, 0), "{r:?}");
    let r = evaluate(&[wbw(89.99), wlat(2.001)], &[], &args);
    assert_eq!(r.count(Verdict::Fail), 2);
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn baseline_regressions_in_both_directions() {
    let args = GateArgs {
        baseline: vec!["base.json".into()],
        max_regression: Percent(5.0),
        ..GateArgs::default()
    };
    let base = [wbw(100.0), wlat(2.0)];
    // Faster is never a regression, however large.
    let r = evaluate(&[wbw(150.0), wlat(1.0)], &base, &args);
    assert!(r.passed(), "{}", r.table());
    assert_eq!(r.checks.len(), 3, "bandwidth, median and p99");
    // Exactly 5 % worse passes; more fails.
    assert!(evaluate(&[wbw(95.0)], &base, &args).passed());
    assert!(!evaluate(&[wbw(94.9)], &base, &args).passed());
    assert!(evaluate(&[wlat(2.1)], &base, &args).passed());
    let r = evaluate(&[wlat(2.2)], &base, &args);
    assert_eq!(r.count(Verdict::Fail), 2, "{}", r.table());
    // A size the baseline lacks is skipped, not failed, when something else matched.
    let mut other = wbw(10.0);
    other.size = 4096;
    let r = evaluate(&[wbw(100.0), other], &base, &args);
    assert!(r.passed());
    assert_eq!(r.count(Verdict::Skip), 1);
}

/// A write_lat row of `samples` samples whose p99.9 is withheld (and p99 too below 1,000).
fn wlat_of(samples: u64, median_us: f64) -> ResultRow {
    let mut r = wlat(median_us);
    if let Figures::Latency(l) = &mut r.figures {
        l.samples = samples;
        l.p999_us = None;
        if samples < 1000 {
            l.p99_us = None;
        }
    }
    r
}

#[test]
fn a_threshold_on_a_withheld_percentile_fails_saying_how_many_samples_it_needs() {
    let args = GateArgs {
        max_p999: Some(threshold::parse_latency("1s").unwrap()),
        max_p99: Some(threshold::parse_latency("1s").unwrap()),
        ..GateArgs::default()
    };
    let r = evaluate(&[wlat_of(1000, 2.0)], &[], &args);
    assert_eq!(r.exit_code(), 1, "{}", r.table());
    let fail: Vec<&CheckResult> = r
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .collect();
    assert_eq!(fail.len(), 1, "p99 holds at 1,000 samples: {}", r.table());
    assert_eq!(
        (fail[0].flag, fail[0].measured.as_str()),
        ("--max-p999", "n/a")
    );
    assert_eq!(
        fail[0].message,
        "write_lat soft v2 2 B p99.9 latency is withheld, not enough samples: p99.9 needs 10,000 \
         samples (10 beyond it); this result has 1,000; run more iterations (-n 10000) or longer \
         (-D), or drop --max-p999"
    );
    // At 500 samples both fail.
    let r = evaluate(&[wlat_of(500, 2.0)], &[], &args);
    assert_eq!(r.count(Verdict::Fail), 2, "{}", r.table());
    assert!(
        r.checks
            .iter()
            .any(|c| c.message.contains("p99 needs 1,000 samples"))
    );
    // A baseline comparison of p99 skips (rather than fails) what either side withholds.
    let args = GateArgs {
        baseline: vec!["base.json".into()],
        ..GateArgs::default()
    };
    let r = evaluate(&[wlat_of(500, 2.0)], &[wlat(2.0)], &args);
    assert!(r.passed(), "{}", r.table());
    assert!(
        r.checks
            .iter()
            .any(|c| c.verdict == Verdict::Skip && c.message.contains("the result withholds")),
        "{}",
        r.table()
    );
}

#[test]
fn roce_gate_s_short_help_names_the_tool_and_fits_a_screen() {
    let short = cli::command().render_help().to_string();
    assert!(short.starts_with("roce_gate: "), "{short}");
    assert!(short.lines().count() <= 40, "{short}");
    let long = cli::command().render_long_help().to_string();
    assert!(long.contains("--allow-single-run") && long.contains("--spread-factor"));
    assert!(!short.contains("scripts/") && !long.contains("scripts/"));
}
