//! CI gates: check results against thresholds (`--min-bw 90Gb/s --max-p99 5us`) and against a baseline
//! (`--baseline base.json --max-regression 5%`), and say pass or fail in a table, JUnit XML and GitHub
//! Actions annotations.
//!
//! The same [`GateArgs`] serve `roce_gate` (which reads result files) and the six test binaries (which
//! `#[command(flatten)]` it and call [`check`] on what they just measured), so a threshold means the same
//! thing wherever it is typed.
//!
//! A gate never passes vacuously: a threshold that no result can be held to (`--max-p99` over bandwidth
//! runs only) and a baseline that shares no result with the inputs are failures, not passes.

pub mod input;
pub mod output;
pub mod threshold;

pub use input::{Figures, InputError, ResultRow, load, load_all};
pub use threshold::{Bandwidth, Latency, MsgRate, Percent};

use std::path::PathBuf;

/// The thresholds and baseline a gate checks. Flatten it into a binary's clap options.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Gates (exit 1 when a result misses one)")]
pub struct GateArgs {
    /// Lowest acceptable average bandwidth of a bandwidth test, e.g. 90Gb/s, 11000MiB/s, 12.5GB/s.
    #[arg(long, value_name = "RATE", value_parser = threshold::parse_bandwidth)]
    pub min_bw: Option<Bandwidth>,
    /// Lowest acceptable message rate of a bandwidth test, e.g. 2Mpps, 500Kpps.
    #[arg(long, value_name = "RATE", value_parser = threshold::parse_msg_rate)]
    pub min_msg_rate: Option<MsgRate>,
    /// Highest acceptable median (t_typical) latency, e.g. 3us, 800ns.
    #[arg(long = "max-p50", visible_alias = "max-median", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub max_p50: Option<Latency>,
    /// Highest acceptable 99th-percentile latency, e.g. 5us, 1.2ms.
    #[arg(long, value_name = "TIME", value_parser = threshold::parse_latency)]
    pub max_p99: Option<Latency>,
    /// Highest acceptable 99.9th-percentile latency.
    #[arg(long = "max-p999", visible_alias = "max-p99.9", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub max_p999: Option<Latency>,
    /// Highest acceptable maximum latency (the true max, outliers included).
    #[arg(long = "max-max", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub max_max: Option<Latency>,
    /// A result JSON/CSV to compare with, matched by (test, transport, RoCE version, size). Repeatable.
    #[arg(long, value_name = "FILE")]
    pub baseline: Vec<PathBuf>,
    /// How much worse than the baseline a result may be: lower bandwidth, higher median or p99 latency.
    #[arg(long, value_name = "PERCENT", default_value = "5%", requires = "baseline", value_parser = threshold::parse_percent)]
    pub max_regression: Percent,
}

/// Where a gate's verdicts go besides the terminal. Flatten it next to [`GateArgs`].
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Gate reports")]
pub struct GateOutputArgs {
    /// Write a JUnit XML report (one testcase per check) for CI systems.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print GitHub Actions annotations (::error ...); on by default when GITHUB_ACTIONS=true.
    #[arg(long)]
    pub github: bool,
}

impl GateOutputArgs {
    /// Whether to print GitHub annotations: `--github`, or running under GitHub Actions.
    pub fn github_enabled(&self) -> bool {
        self.github || std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
    }
}

/// `--max-regression` when not given, in percent.
pub const DEFAULT_MAX_REGRESSION: f64 = 5.0;

impl Default for GateArgs {
    /// No threshold, no baseline, the default allowed regression.
    fn default() -> Self {
        GateArgs {
            min_bw: None,
            min_msg_rate: None,
            max_p50: None,
            max_p99: None,
            max_p999: None,
            max_max: None,
            baseline: Vec::new(),
            max_regression: Percent(DEFAULT_MAX_REGRESSION),
        }
    }
}

impl GateArgs {
    /// Whether any threshold or baseline was given (a binary skips the gate otherwise).
    pub fn is_active(&self) -> bool {
        self.min_bw.is_some()
            || self.min_msg_rate.is_some()
            || self.max_p50.is_some()
            || self.max_p99.is_some()
            || self.max_p999.is_some()
            || self.max_max.is_some()
            || !self.baseline.is_empty()
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The result meets the limit.
    Pass,
    /// The result misses the limit (or the limit could not be applied to anything).
    Fail,
    /// Nothing to compare (a result without a baseline counterpart).
    Skip,
}

impl Verdict {
    /// `pass`, `FAIL`, `skip`: capitals make a failure easy to spot in a log.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        }
    }
}

/// One check of one result against one limit.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    /// The result checked, e.g. `write_bw soft v2 65536 B`, or `(no latency result)`.
    pub subject: String,
    /// What is compared, e.g. `bandwidth`, `p99 latency`, `bandwidth vs baseline`.
    pub what: String,
    /// The flag that set the limit, e.g. `--min-bw`.
    pub flag: &'static str,
    /// The limit as shown, e.g. `>= 90Gb/s`.
    pub limit: String,
    /// The measured value as shown, e.g. `92.41 Gb/s`.
    pub measured: String,
    /// Pass, fail or skip.
    pub verdict: Verdict,
    /// One sentence on a failure or skip (empty on a pass).
    pub message: String,
    /// The file the result came from.
    pub source: Option<PathBuf>,
    /// Its line, for CSV inputs.
    pub line: Option<usize>,
}

/// Every check of a gate run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateReport {
    /// In the order made: per result, thresholds then baseline.
    pub checks: Vec<CheckResult>,
}

impl GateReport {
    /// Number of checks with this verdict.
    pub fn count(&self, v: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == v).count()
    }

    /// True when no check failed.
    pub fn passed(&self) -> bool {
        self.count(Verdict::Fail) == 0
    }

    /// 0 when every check passed (or was skipped), 1 when one failed.
    pub fn exit_code(&self) -> i32 {
        if self.passed() { 0 } else { 1 }
    }
}

/// Checks what a binary just measured: [`check`] over [`ResultRow::from_run`] (`source` is the run's JSON
/// path, or any name to show in the report).
pub fn check_run(
    info: &crate::report::RunInfo,
    results: &[crate::report::SizeResult],
    source: &std::path::Path,
    args: &GateArgs,
) -> Result<GateReport, Vec<InputError>> {
    check(&ResultRow::from_run(info, results, source), args)
}

/// Checks `rows` against the thresholds of `args` and, when `args.baseline` names files, against them.
///
/// Fails only when a baseline file cannot be read; the errors name each file.
pub fn check(rows: &[ResultRow], args: &GateArgs) -> Result<GateReport, Vec<InputError>> {
    let baseline = load_all(&args.baseline)?;
    Ok(evaluate(rows, &baseline, args))
}

/// Checks `rows` against the thresholds of `args` and against `baseline` (ignored when empty and no
/// baseline file was named). Pure: no I/O.
pub fn evaluate(rows: &[ResultRow], baseline: &[ResultRow], args: &GateArgs) -> GateReport {
    let mut report = GateReport::default();
    for row in rows {
        threshold_checks(row, args, &mut report.checks);
    }
    let limits = [
        (
            args.min_bw.as_ref().map(|t| &t.text),
            "--min-bw",
            "bandwidth",
        ),
        (
            args.min_msg_rate.as_ref().map(|t| &t.text),
            "--min-msg-rate",
            "bandwidth",
        ),
        (
            args.max_p50.as_ref().map(|t| &t.text),
            "--max-p50",
            "latency",
        ),
        (
            args.max_p99.as_ref().map(|t| &t.text),
            "--max-p99",
            "latency",
        ),
        (
            args.max_p999.as_ref().map(|t| &t.text),
            "--max-p999",
            "latency",
        ),
        (
            args.max_max.as_ref().map(|t| &t.text),
            "--max-max",
            "latency",
        ),
    ];
    let has_bw = rows
        .iter()
        .any(|r| matches!(r.figures, Figures::Bandwidth { .. }));
    let has_lat = rows
        .iter()
        .any(|r| matches!(r.figures, Figures::Latency { .. }));
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
    if !args.baseline.is_empty() || !baseline.is_empty() {
        baseline_checks(rows, baseline, args, &mut report.checks);
    }
    report
}

/// `92.41 Gb/s`.
pub fn fmt_gbps(v: f64) -> String {
    format!("{v:.2} Gb/s")
}

/// `1.234 µs`, `12.35 µs`, `123.5 µs`: about four significant digits.
pub fn fmt_us(v: f64) -> String {
    let decimals = if v < 10.0 {
        3
    } else if v < 100.0 {
        2
    } else {
        1
    };
    format!("{v:.decimals$} µs")
}

/// `1.234 Mpps`.
pub fn fmt_mpps(v: f64) -> String {
    format!("{v:.3} Mpps")
}

fn threshold_checks(row: &ResultRow, args: &GateArgs, out: &mut Vec<CheckResult>) {
    let mut push = |what: &str, flag: &'static str, limit: String, measured: String, ok: bool| {
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
        out.push(CheckResult {
            subject: row.subject(),
            what: what.to_owned(),
            flag,
            limit,
            measured,
            verdict,
            message,
            source: Some(row.source.clone()),
            line: row.line,
        });
    };
    match row.figures {
        Figures::Bandwidth { gbps, mpps } => {
            if let Some(t) = &args.min_bw {
                push(
                    "bandwidth",
                    "--min-bw",
                    format!(">= {}", t.text),
                    fmt_gbps(gbps),
                    gbps >= t.gbps,
                );
            }
            if let Some(t) = &args.min_msg_rate {
                push(
                    "message rate",
                    "--min-msg-rate",
                    format!(">= {}", t.text),
                    fmt_mpps(mpps),
                    mpps >= t.mpps,
                );
            }
        }
        Figures::Latency {
            median_us,
            p99_us,
            p999_us,
            max_us,
        } => {
            let lat = [
                (&args.max_p50, "median latency", "--max-p50", median_us),
                (&args.max_p99, "p99 latency", "--max-p99", p99_us),
                (&args.max_p999, "p99.9 latency", "--max-p999", p999_us),
                (&args.max_max, "max latency", "--max-max", max_us),
            ];
            for (limit, what, flag, v) in lat {
                if let Some(t) = limit {
                    push(what, flag, format!("<= {}", t.text), fmt_us(v), v <= t.us);
                }
            }
        }
    }
}

/// (what, current value, baseline value, higher is better, formatter) for one baseline comparison.
type Comparison = (&'static str, f64, f64, bool, fn(f64) -> String);

fn baseline_checks(
    rows: &[ResultRow],
    baseline: &[ResultRow],
    args: &GateArgs,
    out: &mut Vec<CheckResult>,
) {
    let allowed = args.max_regression.0;
    let mut matched_any = false;
    for row in rows {
        // Prefer a baseline row from the same side (client/server) when a file holds both.
        let base = baseline
            .iter()
            .filter(|b| b.key() == row.key())
            .min_by_key(|b| b.role != row.role);
        let Some(base) = base else {
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
        let pairs: Vec<Comparison> = match (&row.figures, &base.figures) {
            (Figures::Bandwidth { gbps, .. }, Figures::Bandwidth { gbps: b, .. }) => {
                vec![("bandwidth vs baseline", *gbps, *b, true, fmt_gbps)]
            }
            (
                Figures::Latency {
                    median_us, p99_us, ..
                },
                Figures::Latency {
                    median_us: bm,
                    p99_us: bp,
                    ..
                },
            ) => vec![
                ("median vs baseline", *median_us, *bm, false, fmt_us),
                ("p99 vs baseline", *p99_us, *bp, false, fmt_us),
            ],
            // The key includes the test, so bandwidth never meets latency here.
            _ => vec![],
        };
        for (what, cur, base_v, higher_better, fmt) in pairs {
            let (verdict, measured, message) = if base_v <= 0.0 || !base_v.is_finite() {
                (
                    Verdict::Skip,
                    fmt(cur),
                    format!(
                        "{}: the baseline value is {base_v}, nothing to compare with",
                        row.subject()
                    ),
                )
            } else {
                let change = (cur - base_v) / base_v * 100.0;
                let worse = if higher_better { -change } else { change };
                // Inclusive, and immune to float noise: 2.1 µs against 2.0 µs is 5.000000000000004 %.
                let ok = worse <= allowed + 1e-9;
                let measured = format!("{} ({change:+.1}%)", fmt(cur));
                let message = if ok {
                    String::new()
                } else {
                    format!(
                        "{} {what}: {} against {} is {worse:.1}% worse, more than --max-regression {}",
                        row.subject(),
                        fmt(cur),
                        fmt(base_v),
                        args.max_regression
                    )
                };
                (
                    if ok { Verdict::Pass } else { Verdict::Fail },
                    measured,
                    message,
                )
            };
            let sign = if higher_better { ">=" } else { "<=" };
            out.push(CheckResult {
                subject: row.subject(),
                what: what.to_owned(),
                flag: "--max-regression",
                limit: format!(
                    "{sign} {} {}{}",
                    fmt(base_v),
                    if higher_better { "-" } else { "+" },
                    args.max_regression
                ),
                measured,
                verdict,
                message,
                source: Some(row.source.clone()),
                line: row.line,
            });
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Metric, RoceVersion, TestKind, TransportKind, Verb};
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
        }
    }

    fn wbw(gbps: f64) -> ResultRow {
        row(
            TestKind::new(Verb::Write, Metric::Bandwidth),
            65536,
            Figures::Bandwidth {
                gbps,
                mpps: gbps / 0.524,
            },
        )
    }

    fn wlat(median_us: f64) -> ResultRow {
        row(
            TestKind::new(Verb::Write, Metric::Latency),
            2,
            Figures::Latency {
                median_us,
                p99_us: median_us * 2.0,
                p999_us: median_us * 3.0,
                max_us: median_us * 10.0,
            },
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
}
