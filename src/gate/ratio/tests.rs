//! Relative gates: their syntax, and their verdicts over a comparison's rows.

use super::*;
use crate::params::{Metric, TestKind, Verb};
use crate::results::{BandwidthFigures, LatencyFigures};

fn row(
    transport: TransportKind,
    roce: Option<RoceVersion>,
    metric: Metric,
    size: u64,
    v: f64,
) -> ResultRow {
    let figures = match metric {
        Metric::Bandwidth => Figures::Bandwidth(BandwidthFigures {
            gbps: v,
            mpps: v / 0.5,
        }),
        Metric::Latency => Figures::Latency(LatencyFigures {
            samples: 10_000,
            median_us: v,
            p99_us: Some(2.0 * v),
            p999_us: Some(3.0 * v),
            max_us: 9.0 * v,
        }),
    };
    ResultRow {
        source: "compare.json".into(),
        line: None,
        label: None,
        test: TestKind::new(Verb::Write, metric),
        transport,
        roce,
        role: None,
        size,
        figures,
        repeats: Vec::new(),
        path: None,
    }
}

const V2: Option<RoceVersion> = Some(RoceVersion::V2);
const V1: Option<RoceVersion> = Some(RoceVersion::V1);
use crate::params::TransportKind::{Soft, Tcp};

/// A comparison: soft v1, soft v2 and TCP; write_bw at 64 KiB and write_lat at 2 B.
fn set(v2_gbps: f64, v2_median: f64) -> Vec<ResultRow> {
    vec![
        row(Soft, V1, Metric::Bandwidth, 65536, 3.0),
        row(Soft, V2, Metric::Bandwidth, 65536, v2_gbps),
        row(Tcp, None, Metric::Bandwidth, 65536, 12.0),
        row(Soft, V1, Metric::Latency, 2, 7.5),
        row(Soft, V2, Metric::Latency, 2, v2_median),
        row(Tcp, None, Metric::Latency, 2, 9.0),
    ]
}

/// Asserts that `check`'s message says `text`.
#[track_caller]
fn assert_says(check: &CheckResult, text: &str) {
    assert!(check.message.contains(text), "{}", check.message);
}

fn run(rows: &[ResultRow], text: &str, bound: Bound) -> Vec<CheckResult> {
    let mut out = Vec::new();
    checks(rows, &parse_ratio(text).unwrap(), bound, &mut out);
    out
}

#[test]
fn the_syntax_names_two_transports_a_figure_and_a_limit() {
    let r = parse_ratio("soft-v2/tcp:bw=0.9").unwrap();
    assert_eq!((r.num.transport, r.num.roce), (Soft, V2));
    assert_eq!((r.den.transport, r.den.roce), (Tcp, None));
    assert_eq!((r.figure, r.limit), (Figure::Bandwidth, 0.9));
    assert_eq!(r.to_string(), "soft-v2/tcp:bw=0.9");
    let r = parse_ratio(" soft / tcp : p99.9 = 1.5x ").unwrap();
    assert_eq!((r.num.roce, r.figure, r.limit), (None, Figure::P999, 1.5));
    assert_eq!(
        parse_ratio("soft-v1/soft-v2:median=1").unwrap().figure,
        Figure::Median
    );
    for (name, figure) in FIGURES {
        let r = parse_ratio(&format!("verbs-v1/tcp:{name}=2")).unwrap();
        assert_eq!(r.figure, figure);
    }
}

#[test]
fn syntax_errors_say_what_to_write() {
    for (bad, says) in [
        ("soft-v2/tcp:bw", "has no =X limit"),
        ("soft-v2/tcp=0.9", "names no figure"),
        ("soft-v2:bw=0.9", "is not NUM/DEN"),
        (
            "rdma/tcp:bw=0.9",
            "\"rdma\" in \"rdma/tcp:bw=0.9\" is not a transport",
        ),
        (
            "soft-v3/tcp:bw=0.9",
            "\"v3\" in \"soft-v3/tcp:bw=0.9\" is not a RoCE version",
        ),
        ("tcp-v2/soft:bw=1", "tcp has no RoCE version"),
        (
            "soft-v2/tcp:speed=0.9",
            "\"speed\" in \"soft-v2/tcp:speed=0.9\" is not a figure",
        ),
        ("soft-v2/tcp:bw=0", "is not a ratio above zero"),
        ("soft-v2/tcp:bw=fast", "\"fast\" in"),
        ("soft/soft-v2:bw=1", "compares soft with itself"),
        ("tcp/tcp:p50=1", "with itself"),
    ] {
        let err = parse_ratio(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
    assert!(
        parse_ratio("x")
            .unwrap_err()
            .contains("e.g. soft-v2/tcp:bw=0.9")
    );
}

#[test]
fn ratios_within_the_limit_pass_and_beyond_it_fail() {
    let rows = set(13.2, 10.8);
    let out = run(&rows, "soft-v2/tcp:bw=0.9", Bound::Min);
    assert_eq!(out.len(), 1, "{out:?}");
    let c = &out[0];
    assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    assert_eq!(c.subject, "write_bw soft v2 65536 B");
    assert_eq!(c.what, "bandwidth / tcp");
    assert_eq!(c.limit, ">= 0.900x tcp");
    assert_eq!(c.measured, "1.100x (13.20 Gb/s / 12.00 Gb/s)");
    assert_eq!(c.flag, "--min-ratio");
    // Soft's median 1.2x TCP's: a ceiling of 1.0 fails and says why, 1.2 passes (inclusive).
    let out = run(&rows, "soft-v2/tcp:p50=1.0", Bound::Max);
    assert_eq!(out[0].verdict, Verdict::Fail);
    assert_eq!(
        out[0].message,
        "write_lat soft v2 2 B median latency is 1.200x tcp's (10.80 µs against 9.000 µs), above \
         --max-ratio soft-v2/tcp:p50=1.0"
    );
    assert_eq!(
        run(&rows, "soft-v2/tcp:p50=1.2", Bound::Max)[0].verdict,
        Verdict::Pass
    );
    // A 2x slowdown of the soft bandwidth is caught by a loose floor.
    let slow = set(6.6, 10.8);
    let out = run(&slow, "soft-v2/tcp:bw=0.6", Bound::Min);
    assert_eq!(out[0].verdict, Verdict::Fail);
    assert_says(&out[0], "is 0.550x tcp's");
}

#[test]
fn soft_alone_holds_both_versions_and_figures_pick_their_tests() {
    let rows = set(13.2, 10.8);
    let out = run(&rows, "soft/tcp:p99=1.0", Bound::Max);
    let verdicts: Vec<(&str, Verdict)> = out
        .iter()
        .map(|c| (c.subject.as_str(), c.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("write_lat soft v1 2 B", Verdict::Pass),
            ("write_lat soft v2 2 B", Verdict::Fail)
        ]
    );
    let out = run(&rows, "soft-v1/soft-v2:msg-rate=0.2", Bound::Min);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].verdict, Verdict::Pass, "{out:?}");
    assert_eq!(out[0].limit, ">= 0.200x soft-v2");
}

#[test]
fn a_missing_side_fails_rather_than_passing_vacuously() {
    // TCP's bandwidth run failed: nothing to divide by.
    let mut rows = set(13.2, 10.8);
    rows.remove(2);
    let out = run(&rows, "soft-v2/tcp:bw=0.5", Bound::Min);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].verdict, Verdict::Fail);
    assert_says(&out[0], "no tcp result at this test and size");
    // Soft v2's run failed: TCP's result has nothing to be compared with.
    let mut rows = set(13.2, 10.8);
    rows.remove(1);
    let out = run(&rows, "soft-v2/tcp:bw=0.5", Bound::Min);
    assert_eq!(out[0].subject, "write_bw tcp 65536 B");
    assert!(out[0].message.contains("did its run fail?"), "{out:?}");
    // No result of either side: one failure that says so.
    let out = run(&rows, "verbs-v2/verbs-v1:bw=1", Bound::Min);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].subject, "(no bandwidth result)");
    assert_says(&out[0], "found no bandwidth result of verbs-v2 or verbs-v1");
}

#[test]
fn repetitions_are_judged_by_their_median_and_files_pair_with_themselves() {
    let mut rows = set(13.2, 10.8);
    // Five repetitions of soft v2: the median (12.6) is below 1.1x TCP, whatever the shown one says.
    rows[1].repeats = [14.0, 12.6, 9.0, 13.2, 12.0]
        .iter()
        .map(|&gbps| Figures::Bandwidth(BandwidthFigures { gbps, mpps: 1.0 }))
        .collect();
    let out = run(&rows, "soft-v2/tcp:bw=1.1", Bound::Min);
    assert_eq!(out[0].verdict, Verdict::Fail);
    assert!(
        out[0].measured.starts_with("1.050x (12.60 Gb/s"),
        "{}",
        out[0].measured
    );
    // Two comparisons gated together: each soft result is divided by its own file's TCP.
    let mut other = set(30.0, 10.8);
    for r in &mut other {
        r.source = "other.json".into();
    }
    other[2] = row(Tcp, None, Metric::Bandwidth, 65536, 25.0);
    other[2].source = "other.json".into();
    let mut both = set(13.2, 10.8);
    both.extend(other);
    let out = run(&both, "soft-v2/tcp:bw=1.0", Bound::Min);
    let measured: Vec<&str> = out.iter().map(|c| c.measured.as_str()).collect();
    assert_eq!(
        measured,
        [
            "1.100x (13.20 Gb/s / 12.00 Gb/s)",
            "1.200x (30.00 Gb/s / 25.00 Gb/s)"
        ]
    );
}

#[test]
fn a_ratio_of_a_withheld_percentile_fails_naming_the_side_and_what_it_needs() {
    let mut rows = set(13.2, 10.8);
    // TCP's latency run took 1,000 samples: its p99.9 is withheld.
    if let Figures::Latency(l) = &mut rows[5].figures {
        l.samples = 1000;
        l.p999_us = None;
    }
    let out = run(&rows, "soft-v2/tcp:p999=2", Bound::Max);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].verdict, Verdict::Fail);
    assert_says(
        &out[0],
        "write_lat soft v2 2 B: p99.9 latency of write_lat tcp 2 B is withheld, not enough \
         samples: p99.9 needs 10,000 samples (10 beyond it); this result has 1,000",
    );
    // Its p99 holds: that ratio is judged as before.
    let out = run(&rows, "soft-v2/tcp:p99=2", Bound::Max);
    assert_eq!(out[0].verdict, Verdict::Pass, "{out:?}");
}
