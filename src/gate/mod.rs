//! CI gates: results against thresholds and a baseline, with verdicts for terminals and CI systems.
//!
//! Thresholds (`--min-bw 90Gb/s --max-p99 5us`) and a baseline (`--baseline base.json
//! --max-regression 5%`) give pass or fail in a table, JUnit XML and GitHub Actions annotations.
//!
//! The same [`GateArgs`] serve `roce_gate` (which reads result files) and the six test binaries (which
//! `#[command(flatten)]` it and call [`check`] on what they just measured), so a threshold means the same
//! thing wherever it is typed.
//!
//! Over a result set (`roce_gate`, `roce_compare`), [`SetGateArgs`] adds relative gates between
//! transports of the same run (`--min-ratio soft-v2/tcp:bw=0.9`, [`ratio`]), and weighs a baseline
//! comparison against the run-to-run spread when both sides hold repetitions ([`spread`], by the
//! rank test of [`rank`]).
//!
//! A fabric run's matrix (fabric.json) is judged pair by pair instead ([`fabric`]): `roce_gate` hands
//! it there when an input is one.
//!
//! A gate never passes vacuously: a threshold that no result can be held to (`--max-p99` over bandwidth
//! runs only), a ratio whose transports have no result, and a baseline that shares no result with the
//! inputs are failures, not passes.

pub mod cli;
pub(crate) mod congestion;
pub(crate) mod fabric;
pub(crate) mod input;
pub(crate) mod judge;
pub(crate) mod output;
pub(crate) mod rank;
pub(crate) mod ratio;
pub(crate) mod spread;
pub(crate) mod threshold;

pub(crate) use input::{InputError, load_all};
pub(crate) use judge::{evaluate, evaluate_set};
pub(crate) use ratio::Ratio;
pub(crate) use threshold::Percent;
pub(crate) use threshold::{Bandwidth, Latency, MsgRate};

use crate::params::TransportKind;
use crate::results::{ResultRow, RunInfo, SizeResult};
use std::path::{Path, PathBuf};

/// The thresholds and baseline a gate checks. Flatten it into a binary's clap options.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Gates (exit 1 when a result misses one)")]
pub struct GateArgs {
    /// Lowest acceptable average bandwidth of a bandwidth test, e.g. 90Gb/s, 11000MiB/s, 12.5GB/s.
    #[arg(long, value_name = "RATE", value_parser = threshold::parse_bandwidth)]
    pub(crate) min_bw: Option<Bandwidth>,
    /// Lowest acceptable message rate of a bandwidth test, e.g. 2Mpps, 500Kpps.
    #[arg(long, value_name = "RATE", value_parser = threshold::parse_msg_rate)]
    pub(crate) min_msg_rate: Option<MsgRate>,
    /// Highest acceptable median (t_typical) latency, e.g. 3us, 800ns.
    #[arg(long = "max-p50", visible_alias = "max-median", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub(crate) max_p50: Option<Latency>,
    /// Highest acceptable 99th-percentile latency, e.g. 5us, 1.2ms.
    #[arg(long, value_name = "TIME", value_parser = threshold::parse_latency)]
    pub(crate) max_p99: Option<Latency>,
    /// Highest acceptable 99.9th-percentile latency.
    #[arg(long = "max-p999", visible_alias = "max-p99.9", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub(crate) max_p999: Option<Latency>,
    /// Highest acceptable maximum latency (the true max, outliers included).
    #[arg(long = "max-max", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub(crate) max_max: Option<Latency>,
    /// A result JSON/CSV to compare with, matched by (test, transport, RoCE version, size). Repeatable.
    #[arg(long, value_name = "FILE")]
    pub baseline: Vec<PathBuf>,
    /// How much worse than the baseline a result may be: lower bandwidth, higher median or p99
    /// latency. Widened to K x the baseline's spread when its repetitions strayed further.
    #[arg(long, value_name = "PERCENT", default_value = "5%", requires = "baseline", value_parser = threshold::parse_percent)]
    pub(crate) max_regression: Percent,
    /// K: a baseline with repetitions allows a result K times as far from its median as its own
    /// farthest repetition strayed, when that is more than --max-regression.
    #[arg(long, value_name = "K", default_value_t = spread::DEFAULT_SPREAD_FACTOR, requires = "baseline", value_parser = parse_factor)]
    pub(crate) spread_factor: f64,
    /// Gate against a baseline measured once (refused otherwise, exit 2: one run has no spread, and
    /// its noise often exceeds --max-regression); the table then warns.
    #[arg(long, requires = "baseline")]
    pub(crate) allow_single_run: bool,
}

/// `--spread-factor`: a number, zero or more.
fn parse_factor(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|k| k.is_finite() && *k >= 0.0)
        .ok_or_else(|| format!("{s:?} is not a factor; use a number such as 2 or 1.5"))
}

/// Gates over a result set: ratios between its transports, and the rank test's level against a
/// baseline with repetitions. Flatten it next to [`GateArgs`] in a tool that reads a whole set.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Gates (exit 1 when a result misses one)")]
pub(crate) struct SetGateArgs {
    /// Lowest acceptable ratio of one transport's figure to another's at each test and size both ran:
    /// NUM/DEN:FIGURE=X, e.g. soft-v2/tcp:bw=0.9 (soft RoCE v2's bandwidth at least 0.9x TCP's).
    /// Transports: tcp, soft, soft-v1, soft-v2, verbs, verbs-v1, verbs-v2; figures: bw, msg-rate,
    /// p50 (median), p99, p999, max. Repeatable.
    #[arg(long, value_name = "NUM/DEN:FIG=X", value_parser = ratio::parse_ratio)]
    pub(crate) min_ratio: Vec<Ratio>,
    /// Highest acceptable ratio, e.g. soft-v2/tcp:p50=1.0 (soft RoCE v2's median latency at most
    /// TCP's). Repeatable.
    #[arg(long, value_name = "NUM/DEN:FIG=X", value_parser = ratio::parse_ratio)]
    pub(crate) max_ratio: Vec<Ratio>,
    /// With --baseline, when both sides hold repetitions (roce_compare --repeat N): a change fails
    /// only when it is worse than --max-regression and a one-sided Mann-Whitney U test gives
    /// p <= ALPHA (it exceeds the run-to-run spread).
    #[arg(long, value_name = "P", default_value_t = DEFAULT_ALPHA, value_parser = parse_alpha)]
    pub alpha: f64,
}

/// `--alpha` when not given.
pub(crate) const DEFAULT_ALPHA: f64 = 0.01;

impl Default for SetGateArgs {
    /// No ratio, the default level.
    fn default() -> Self {
        SetGateArgs {
            min_ratio: Vec::new(),
            max_ratio: Vec::new(),
            alpha: DEFAULT_ALPHA,
        }
    }
}

impl SetGateArgs {
    /// Whether a ratio was given.
    pub(crate) fn is_active(&self) -> bool {
        !self.min_ratio.is_empty() || !self.max_ratio.is_empty()
    }
}

/// `--alpha`: a probability above 0 and at most 0.5.
fn parse_alpha(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|a| *a > 0.0 && *a <= 0.5)
        .ok_or_else(|| {
            format!("{s:?} is not a significance level; use a number such as 0.01 or 0.05")
        })
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
    pub(crate) fn github_enabled(&self) -> bool {
        self.github || std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
    }
}

/// `--max-regression` when not given, in percent.
pub(crate) const DEFAULT_MAX_REGRESSION: f64 = 5.0;

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
            spread_factor: spread::DEFAULT_SPREAD_FACTOR,
            allow_single_run: false,
        }
    }
}

impl GateArgs {
    /// Whether any threshold or baseline was given (a binary skips the gate otherwise).
    pub(crate) fn is_active(&self) -> bool {
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
pub(crate) enum Verdict {
    /// The result meets the limit.
    Pass,
    /// The result misses the limit (or the limit could not be applied to anything).
    Fail,
    /// Nothing to compare (a result without a baseline counterpart).
    Skip,
}

impl Verdict {
    /// `pass`, `FAIL`, `skip`: capitals make a failure easy to spot in a log.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        }
    }
}

/// One check of one result against one limit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CheckResult {
    /// The result checked, e.g. `write_bw soft v2 65536 B`, or `(no latency result)`.
    pub(crate) subject: String,
    /// What is compared, e.g. `bandwidth`, `p99 latency`, `bandwidth vs baseline`.
    pub what: String,
    /// The flag that set the limit, e.g. `--min-bw`.
    pub flag: &'static str,
    /// The limit as shown, e.g. `>= 90Gb/s`.
    pub limit: String,
    /// The measured value as shown, e.g. `92.41 Gb/s`.
    pub measured: String,
    /// Pass, fail or skip.
    pub(crate) verdict: Verdict,
    /// One sentence on a failure or skip (empty on a pass).
    pub message: String,
    /// The file the result came from.
    pub source: Option<PathBuf>,
    /// Its line, for CSV inputs.
    pub line: Option<usize>,
}

/// Every check of a gate run.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GateReport {
    /// In the order made: per result, thresholds then baseline.
    pub checks: Vec<CheckResult>,
    /// What the verdicts rest on that may mislead: a single-run baseline or result.
    pub(crate) warnings: Vec<String>,
}

impl GateReport {
    /// Number of checks with this verdict.
    pub(crate) fn count(&self, v: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == v).count()
    }

    /// True when no check failed.
    pub(crate) fn passed(&self) -> bool {
        self.count(Verdict::Fail) == 0
    }

    /// 0 when every check passed (or was skipped), 1 when one failed.
    pub(crate) fn exit_code(&self) -> i32 {
        if self.passed() { 0 } else { 1 }
    }
}

/// Checks what a binary just measured: [`check`] over [`ResultRow::from_run`] (`source` is the run's JSON
/// path, or any name to show in the report).
pub(crate) fn check_run(
    info: &RunInfo,
    results: &[SizeResult],
    source: &Path,
    args: &GateArgs,
) -> Result<GateReport, Vec<InputError>> {
    check(&ResultRow::from_run(info, results, source), args)
}

/// Checks `rows` against the thresholds of `args` and, when `args.baseline` names files, against them.
///
/// Fails only when a baseline file cannot be read; the errors name each file.
pub(crate) fn check(rows: &[ResultRow], args: &GateArgs) -> Result<GateReport, Vec<InputError>> {
    let baseline = load_baseline(rows, args)?;
    Ok(evaluate(rows, &baseline, args))
}

/// The baseline files of `args`, refused when a result would be compared with a single run and
/// `--allow-single-run` was not given.
fn load_baseline(rows: &[ResultRow], args: &GateArgs) -> Result<Vec<ResultRow>, Vec<InputError>> {
    let baseline = load_all(&args.baseline)?;
    let single = judge::single_run_baselines(rows, &baseline);
    if args.allow_single_run || single.is_empty() {
        return Ok(baseline);
    }
    let mut files: Vec<PathBuf> = single.iter().map(|b| b.source.clone()).collect();
    files.dedup();
    Err(files
        .into_iter()
        .map(|path| InputError::SingleRun {
            results: single.iter().filter(|b| b.source == path).count(),
            path,
            allowed: args.max_regression,
        })
        .collect())
}

/// [`check`] with the gates of `set` over `set_rows`, the whole result set the ratios look in.
pub(crate) fn check_set(
    rows: &[ResultRow],
    set_rows: &[ResultRow],
    args: &GateArgs,
    set: &SetGateArgs,
) -> Result<GateReport, Vec<InputError>> {
    let baseline = load_baseline(rows, args)?;
    Ok(evaluate_set(rows, set_rows, &baseline, args, set))
}

/// Whether `path` is a document of `schema` (its schema says so near the top): how `roce_gate`
/// tells a fabric matrix or a congestion study, judged with flags of their own, from results.
pub(crate) fn announces(path: &Path, schema: &str) -> bool {
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = vec![0u8; 256];
    let n = std::io::Read::read(&mut f, &mut head).unwrap_or(0);
    String::from_utf8_lossy(&head[..n]).contains(&format!("\"{schema}\""))
}

/// roce_gate's command line read as `C` when one of its file arguments is a document of `schema`
/// (paths may be any bytes: they stay OsStrings, and clap names one that must be text); None when
/// none is. A usage error exits 2 as clap says it.
pub(crate) fn args_for<C: clap::Parser>(schema: &str) -> Option<C> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if !args
        .iter()
        .skip(1)
        .any(|a| !a.as_encoded_bytes().starts_with(b"-") && announces(Path::new(a), schema))
    {
        return None;
    }
    let matches =
        crate::params::argv::matches_from(crate::report::term::clap_colors(C::command()), &args)
            .unwrap_or_else(|e| e.exit());
    Some(C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()))
}

// How gates show a figure: shared by the thresholds (`judge`), the ratios and the spread checks.

/// `92.41 Gb/s`.
pub(crate) fn fmt_gbps(v: f64) -> String {
    format!("{v:.2} Gb/s")
}

/// `1.234 µs`, `12.35 µs`, `123.5 µs`: about four significant digits.
pub(crate) fn fmt_us(v: f64) -> String {
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
pub(crate) fn fmt_mpps(v: f64) -> String {
    format!("{v:.3} Mpps")
}

/// `--transport` / `--gate-transport`: `verbs`, `soft` or `tcp`, the error says which are.
pub(crate) fn parse_transport_arg(s: &str) -> Result<TransportKind, String> {
    crate::results::parse_transport(s)
        .ok_or_else(|| format!("{s:?} is not a transport; use verbs, soft or tcp"))
}

#[cfg(test)]
mod tests;
