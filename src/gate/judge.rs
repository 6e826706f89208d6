//! Judging result rows against the thresholds and the baseline; pure, no I/O.
//!
//! Each row is checked against the thresholds, then against its baseline counterpart: one
//! [`CheckResult`] per comparison made.

use super::ratio::{self, Bound};
use super::spread::{self, Compared};
use super::{CheckResult, GateArgs, GateReport, SetGateArgs, Verdict, fmt_gbps, fmt_mpps, fmt_us};
use crate::results::{BandwidthFigures, Figures, LatencyFigures, ResultRow};
use crate::stats::{samples_needed, withheld_because};

/// Checks `rows` against the thresholds of `args` and against `baseline` (ignored when empty and no
/// baseline file was named). Pure: no I/O.
pub(crate) fn evaluate(rows: &[ResultRow], baseline: &[ResultRow], args: &GateArgs) -> GateReport {
    evaluate_set(rows, rows, baseline, args, &SetGateArgs::default())
}

/// [`evaluate`], then the relative gates of `set` over `set_rows` (the result set the ratios look
/// in, which a selection of `rows` by transport must not empty of the denominator), with the
/// baseline's rank test at `set.alpha`. The checks come in that order: thresholds, ratios, baseline.
pub(crate) fn evaluate_set(
    rows: &[ResultRow],
    set_rows: &[ResultRow],
    baseline: &[ResultRow],
    args: &GateArgs,
    set: &SetGateArgs,
) -> GateReport {
    let mut report = GateReport::default();
    for row in rows {
        threshold_checks(row, args, &mut report.checks);
    }
    // Each limit given, as typed.
    fn typed<T: ToString>(limit: &Option<T>) -> Option<String> {
        limit.as_ref().map(T::to_string)
    }
    let limits = [
        (typed(&args.min_bw), "--min-bw", "bandwidth"),
        (typed(&args.min_msg_rate), "--min-msg-rate", "bandwidth"),
        (typed(&args.max_p50), "--max-p50", "latency"),
        (typed(&args.max_p99), "--max-p99", "latency"),
        (typed(&args.max_p999), "--max-p999", "latency"),
        (typed(&args.max_max), "--max-max", "latency"),
    ];
    let has_bw = rows
        .iter()
        .any(|r| matches!(r.figures, Figures::Bandwidth(_)));
    let has_lat = rows
        .iter()
        .any(|r| matches!(r.figures, Figures::Latency(_)));
    for (limit, flag, kind) in limits {
        let applies = if kind == "bandwidth" { has_bw } else { has_lat };
        if let (Some(limit), false) = (limit, applies) {
            report.checks.push(CheckResult {
                subject: format!("(no {kind} result)"),
                what: kind.to_owned(),
                flag,
                limit: limit.clone(),
                measured: "-".into(),
                verdict: Verdict::Fail,
                message: format!(
                    "{flag} {limit} applies to {kind} tests, and no input holds one; \
                     add the {kind} run's result file or drop {flag}"
                ),
                source: None,
                line: None,
            });
        }
    }
    for (ratios, bound) in [(&set.min_ratio, Bound::Min), (&set.max_ratio, Bound::Max)] {
        for r in ratios {
            ratio::checks(set_rows, r, bound, &mut report.checks);
        }
    }
    if !args.baseline.is_empty() || !baseline.is_empty() {
        baseline_checks(
            rows,
            baseline,
            args,
            set.alpha,
            &mut report.checks,
            &mut report.warnings,
        );
    }
    report
}

fn threshold_checks(row: &ResultRow, args: &GateArgs, out: &mut Vec<CheckResult>) {
    let check = |what: &str, flag: &'static str, limit: String, measured: String, ok: bool| {
        let verdict = if ok { Verdict::Pass } else { Verdict::Fail };
        let message = if ok {
            String::new()
        } else {
            // "{>= 90Gb/s}" -> "is below --min-bw 90Gb/s".
            let (relation, text) = match limit.split_once(' ') {
                Some((">=", text)) => ("is below", text),
                Some((_, text)) => ("is above", text),
                None => ("misses", limit.as_str()),
            };
            format!(
                "{} {what} {measured} {relation} {flag} {text}",
                row.subject()
            )
        };
        CheckResult {
            subject: row.subject(),
            what: what.to_owned(),
            flag,
            limit,
            measured,
            verdict,
            message,
            source: Some(row.source.clone()),
            line: row.line,
        }
    };
    match row.figures {
        Figures::Bandwidth(BandwidthFigures { gbps, mpps }) => {
            if let Some(t) = &args.min_bw {
                out.push(check(
                    "bandwidth",
                    "--min-bw",
                    format!(">= {}", t.text),
                    fmt_gbps(gbps),
                    gbps >= t.gbps,
                ));
            }
            if let Some(t) = &args.min_msg_rate {
                out.push(check(
                    "message rate",
                    "--min-msg-rate",
                    format!(">= {}", t.text),
                    fmt_mpps(mpps),
                    mpps >= t.mpps,
                ));
            }
        }
        Figures::Latency(LatencyFigures {
            samples,
            median_us,
            p99_us,
            p999_us,
            max_us,
        }) => {
            let lat = [
                (
                    &args.max_p50,
                    "median latency",
                    "--max-p50",
                    Some(median_us),
                    50.0,
                ),
                (&args.max_p99, "p99 latency", "--max-p99", p99_us, 99.0),
                (&args.max_p999, "p99.9 latency", "--max-p999", p999_us, 99.9),
                (
                    &args.max_max,
                    "max latency",
                    "--max-max",
                    Some(max_us),
                    100.0,
                ),
            ];
            for (limit, what, flag, v, pct) in lat {
                let Some(t) = limit else { continue };
                out.push(match v {
                    Some(v) => check(what, flag, format!("<= {}", t.text), fmt_us(v), v <= t.us),
                    // A withheld percentile cannot be held to a limit: fail, saying what it needs.
                    None => withheld(row, what, flag, &t.text, samples, pct),
                });
            }
        }
    }
}

/// The failed check of a threshold on a percentile the result withholds (fewer than 10 samples
/// beyond it), saying how many samples it needs.
fn withheld(
    row: &ResultRow,
    what: &str,
    flag: &'static str,
    limit: &str,
    samples: u64,
    pct: f64,
) -> CheckResult {
    CheckResult {
        subject: row.subject(),
        what: what.to_owned(),
        flag,
        limit: format!("<= {limit}"),
        measured: "n/a".into(),
        verdict: Verdict::Fail,
        message: format!(
            "{} {what} is withheld, not enough samples: {}; run more iterations (-n {}) or longer \
             (-D), or drop {flag}",
            row.subject(),
            withheld_because(samples, pct),
            samples_needed(pct)
        ),
        source: Some(row.source.clone()),
        line: row.line,
    }
}

/// The figures a baseline comparison looks at, for a bandwidth or a latency result.
fn compared(f: &Figures) -> Vec<Compared> {
    match f {
        Figures::Bandwidth(_) => vec![Compared {
            what: "bandwidth vs baseline",
            value: |f| f.bandwidth().map(|b| b.gbps),
            higher_better: true,
            fmt: fmt_gbps,
        }],
        Figures::Latency(_) => vec![
            Compared {
                what: "median vs baseline",
                value: |f| f.latency().map(|l| l.median_us),
                higher_better: false,
                fmt: fmt_us,
            },
            Compared {
                what: "p99 vs baseline",
                value: |f| f.latency().and_then(|l| l.p99_us),
                higher_better: false,
                fmt: fmt_us,
            },
        ],
    }
}

/// `row`'s result in `baseline`: the same test, transport, RoCE version and size, preferring the same
/// host path (a comparison may hold RoCE v2 over two), then the same side (client/server).
fn counterpart<'a>(row: &ResultRow, baseline: &'a [ResultRow]) -> Option<&'a ResultRow> {
    baseline
        .iter()
        .filter(|b| b.key() == row.key())
        .min_by_key(|b| (b.path != row.path, b.role != row.role))
}

/// The baseline results `rows` would be compared with that are single runs: no spread, so the
/// percentage alone decides, which one run's noise can exceed.
pub(crate) fn single_run_baselines<'a>(
    rows: &[ResultRow],
    baseline: &'a [ResultRow],
) -> Vec<&'a ResultRow> {
    let mut single: Vec<&ResultRow> = rows
        .iter()
        .filter_map(|r| counterpart(r, baseline))
        .filter(|b| !spread::is_repeated(b))
        .collect();
    single.dedup_by(|a, b| std::ptr::eq(*a, *b));
    single
}

/// `write_bw soft v2 65536 B`, or `write_bw soft v2 65536 B and 3 more`.
fn some_of(rows: &[&ResultRow]) -> String {
    match rows {
        [] => String::new(),
        [one] => one.subject(),
        [first, rest @ ..] => format!("{} and {} more", first.subject(), rest.len()),
    }
}

/// The warning when baseline checks rest on single runs: `side` is `baseline` or `result`.
fn single_run_warning(rows: &[&ResultRow], side: &str, args: &GateArgs) -> Option<String> {
    let first = rows.first()?;
    let (is, run) = if rows.len() == 1 {
        ("is", "a single run")
    } else {
        ("are", "single runs")
    };
    Some(if side == "baseline" {
        format!(
            "the baseline of {} {is} {run} ({}): no spread, so --max-regression {} alone \
             decides, and one run's noise often exceeds it (a p99 can double between two runs of \
             unchanged code); record the baseline from repetitions (roce_compare --repeat 5)",
            some_of(rows),
            first.source.display(),
            args.max_regression
        )
    } else {
        format!(
            "{} {is} {run} ({}): held to the limit the baseline's spread widened, with no rank \
             test; repeat {} (roce_compare --repeat 5) for a median and the test",
            some_of(rows),
            first.source.display(),
            if rows.len() == 1 { "it" } else { "them" }
        )
    })
}

fn baseline_checks(
    rows: &[ResultRow],
    baseline: &[ResultRow],
    args: &GateArgs,
    alpha: f64,
    out: &mut Vec<CheckResult>,
    warnings: &mut Vec<String>,
) {
    let rule = spread::Rule {
        allowed: args.max_regression,
        factor: args.spread_factor,
        alpha,
    };
    let mut matched_any = false;
    // The rows judged against a single run, and the single runs judged against repetitions.
    let (mut single_bases, mut single_rows) = (Vec::new(), Vec::new());
    for row in rows {
        // Prefer a baseline row of the same host path (a comparison may hold RoCE v2 over two), then
        // from the same side (client/server) when a file holds both.
        let Some(base) = counterpart(row, baseline) else {
            out.push(CheckResult {
                subject: row.subject(),
                what: "vs baseline".into(),
                flag: "--baseline",
                limit: "-".into(),
                measured: "-".into(),
                verdict: Verdict::Skip,
                message: format!(
                    "{}: no baseline result for this test, transport and size",
                    row.subject()
                ),
                source: Some(row.source.clone()),
                line: row.line,
            });
            continue;
        };
        matched_any = true;
        // The key includes the test, so bandwidth never meets latency here.
        if std::mem::discriminant(&row.figures) != std::mem::discriminant(&base.figures) {
            continue;
        }
        for c in compared(&row.figures) {
            out.push(spread::check(row, base, &c, rule));
        }
        if !spread::is_repeated(base) {
            single_bases.push(base);
        } else if !spread::is_repeated(row) {
            single_rows.push(row);
        }
    }
    warnings.extend(single_run_warning(&single_bases, "baseline", args));
    warnings.extend(single_run_warning(&single_rows, "result", args));
    if !matched_any {
        let names: Vec<String> = args
            .baseline
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        out.push(CheckResult {
            subject: "(baseline)".into(),
            what: "vs baseline".into(),
            flag: "--baseline",
            limit: "-".into(),
            measured: "-".into(),
            verdict: Verdict::Fail,
            message: format!(
                "the baseline {} shares no (test, transport, RoCE version, size) with the results; \
                 compare runs of the same test and sizes",
                names.join(", ")
            ),
            source: args.baseline.first().cloned(),
            line: None,
        });
    }
}
