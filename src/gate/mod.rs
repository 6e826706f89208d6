//! CI gates: results against thresholds and a baseline, with verdicts for terminals and CI systems.
//!
//! Thresholds (`--min-bw 90Gb/s --max-p99 5us`) and a baseline (`--baseline base.json
//! --max-regression 5%`) give pass or fail in a table, JUnit XML and GitHub Actions annotations.
//!
//! The same [`GateArgs`] serve `roce_gate` (which reads result files) and the six test binaries (which
//! `#[command(flatten)]` it and call [`check`] on what they just measured), so a threshold means the same
//! thing wherever it is typed.
//!
//! A gate never passes vacuously: a threshold that no result can be held to (`--max-p99` over bandwidth
//! runs only) and a baseline that shares no result with the inputs are failures, not passes.

pub mod cli;
pub mod input;
pub mod judge;
pub mod output;
pub mod threshold;

pub use input::{InputError, load, load_all};
pub use judge::{evaluate, fmt_gbps, fmt_mpps, fmt_us};
pub use threshold::{Bandwidth, Latency, MsgRate, Percent};

use crate::params::TransportKind;
use crate::results::{ResultRow, RunInfo, SizeResult};
use std::path::{Path, PathBuf};

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
pub fn check(rows: &[ResultRow], args: &GateArgs) -> Result<GateReport, Vec<InputError>> {
    let baseline = load_all(&args.baseline)?;
    Ok(evaluate(rows, &baseline, args))
}

/// `--transport` / `--gate-transport`: `verbs`, `soft` or `tcp`, the error says which are.
pub fn parse_transport_arg(s: &str) -> Result<TransportKind, String> {
    crate::results::parse_transport(s)
        .ok_or_else(|| format!("{s:?} is not a transport; use verbs, soft or tcp"))
}

#[cfg(test)]
mod tests;
