//! `roce_gate`'s command line and main: the CI gate over result files.
//!
//! Exit 0: every check passed; 1: a check failed; 2: bad input or usage. The binary only calls
//! [`main`].

use super::{GateArgs, GateOutputArgs, SetGateArgs, parse_transport_arg};
use crate::params::{TestKind, TransportKind};
use crate::report::emit;
use crate::results::ResultRow;
use clap::{FromArgMatches, Parser};
use std::path::PathBuf;
use std::process::ExitCode;

/// The examples of `-h`.
const SHORT_EXAMPLES: &str = "\
Examples:
  roce_gate --min-bw 90Gb/s --max-p99 5us results/*/compare.json        thresholds
  roce_gate --baseline ci/baseline.json results/*/compare.json          a baseline (--repeat N)
  roce_gate --min-ratio soft-v2/tcp:bw=0.9 results/*/compare.json       same-run ratios
--help lists every flag with more examples. Exit: 0 pass, 1 a check failed, 2 bad input or usage.";

/// The flags `-h` shows (clap ids).
const COMMON: &[&str] = &[
    "files",
    "min_bw",
    "max_p99",
    "baseline",
    "min_ratio",
    "junit",
];

/// roce_gate's command line, as `-h`, `--help`, man pages and completions show it.
pub fn command() -> clap::Command {
    crate::params::argv::short_help_shows(<Cli as clap::CommandFactory>::command(), COMMON)
}

const EXAMPLES: &str = "\
Examples:
  Fail the build when write_bw drops under 90 Gb/s or write_lat's p99 goes over 5 µs:
    roce_gate --min-bw 90Gb/s --max-p99 5us results/*/*.json

  Only hold the RoCE runs of a comparison to a bandwidth floor, and write JUnit for the CI server:
    roce_gate --transport soft --min-bw 11000MiB/s --junit gate.xml results/latest/compare.csv

  Ratios within one comparison, which a slow or busy machine does not move: soft RoCE v2's
  bandwidth at least 0.9x TCP's, and its median latency at most 1.2x TCP's:
    roce_gate --min-ratio soft-v2/tcp:bw=0.9 --max-ratio soft-v2/tcp:p50=1.2 compare.json

  A baseline that knows its noise: recorded with repetitions on the reference commit, then the
  change measured the same way and gated against it:
    roce_compare --local --repeat 5 --results base && cp base/*/compare.json ci/baseline.json
    roce_compare --local --repeat 5 --results results
    roce_gate --baseline ci/baseline.json results/*/compare.json

Inputs: a run's JSON (--results), its CSV (--csv), or roce_compare's compare.json / compare.csv;
- reads one of them from standard input (JSON or CSV by content).
A roce_fabric matrix (fabric.json) and a roce_compare --congestion study (congestion.json) are judged
with flags of their own: roce_gate FILE --help lists them (docs/ci-gate.md, docs/congestion.md).
Units: bandwidth Gb/s, Mb/s, GB/s, MiB/s, GiB/s (b = bit, B = byte); time ns, us (µs), ms, s;
message rate pps, Kpps, Mpps; regression N% (5% when not given).
Limits are inclusive: --min-bw 90Gb/s passes at exactly 90 Gb/s.
Ratios: NUM/DEN:FIGURE=X divides NUM's figure by DEN's at every test and size both have (from the
same file when it holds both); NUM and DEN are tcp, soft, soft-v1, soft-v2, verbs, verbs-v1 or
verbs-v2, FIGURE is bw, msg-rate, p50 (median), p99, p999 or max, X a number (0.9 or 0.9x).
--test and --size select the results ratios look at; --transport does not apply to them. A result
of either side without a counterpart fails.
Baselines: each figure's limit (the limit column) is the baseline's median made worse by
max(--max-regression, --spread-factor x the spread of the baseline's repetitions). When both sides
hold repetitions (roce_compare --repeat N), a median past it fails only if a one-sided Mann-Whitney
U test also gives p <= --alpha (0.01: at least 5 repetitions a side). A baseline measured once is
refused (exit 2) unless --allow-single-run; a result measured once is warned about (docs/ci-gate.md).
Under GitHub Actions (GITHUB_ACTIONS=true) failures are also printed as ::error annotations.
Exit status: 0 all checks passed, 1 a check failed, 2 unreadable or malformed input, or bad usage.";

/// roce_gate: check roceperf results against thresholds, ratios and baselines (pass/fail, JUnit, CI
/// annotations).
#[derive(Debug, Parser)]
#[command(name = "roce_gate", version, after_help = SHORT_EXAMPLES, after_long_help = EXAMPLES)]
struct Cli {
    /// Result files: roceperf JSON or CSV (one run or a comparison); - is standard input.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,

    /// Only check results of this test (send_bw, write_lat, ...). Repeatable.
    #[arg(long = "test", value_name = "TEST", value_parser = parse_test, help_heading = "Selection")]
    tests: Vec<TestKind>,
    /// Only check results over this transport (verbs, soft, tcp). Repeatable.
    #[arg(long = "transport", value_name = "NAME", value_parser = parse_transport_arg, help_heading = "Selection")]
    transports: Vec<TransportKind>,
    /// Only check results at this message size in bytes. Repeatable.
    #[arg(long = "size", value_name = "BYTES", help_heading = "Selection")]
    sizes: Vec<u64>,

    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    set: SetGateArgs,
    #[command(flatten)]
    output: GateOutputArgs,
}

fn parse_test(s: &str) -> Result<TestKind, String> {
    TestKind::from_name(s).ok_or_else(|| format!("{s:?} is not a test; use {}", TestKind::names()))
}

fn bad_input(messages: impl IntoIterator<Item = String>) -> ExitCode {
    for m in messages {
        eprintln!("roce_gate: error: {m}");
    }
    ExitCode::from(2)
}

/// The command lines roce_gate takes instead when an input file is a fabric matrix or a congestion
/// study, each with the file it applies to (`fabric.json`, `congestion.json`).
pub fn by_input() -> [(&'static str, clap::Command); 2] {
    [
        ("fabric.json", super::fabric::command()),
        ("congestion.json", super::congestion::command()),
    ]
}

/// roce_gate: parses the command line, reads the inputs, checks them, prints and writes the verdicts;
/// returns the exit status.
pub fn main() -> ExitCode {
    // A roce_fabric matrix (fabric.json) is judged pair by pair, with its own flags.
    if let Some(code) = super::fabric::main_if_fabric() {
        return code;
    }
    // A congestion study (congestion.json) is judged per discipline, with its own flags.
    if let Some(code) = super::congestion::main_if_congestion() {
        return code;
    }
    let matches = crate::params::argv::matches(crate::report::term::clap_colors(command()));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if !cli.gate.is_active() && !cli.set.is_active() {
        return bad_input([
            "nothing to check: give a threshold (--min-bw, --min-msg-rate, --max-p50, --max-p99, \
             --max-p999, --max-max), a ratio (--min-ratio, --max-ratio) or --baseline FILE; see \
             roce_gate --help"
                .to_string(),
        ]);
    }
    let rows = match super::load_all(&cli.files) {
        Ok(rows) => rows,
        Err(errors) => return bad_input(errors.iter().map(ToString::to_string)),
    };
    // Ratios look at every transport of the tests and sizes chosen; the other gates at the
    // transports chosen too.
    let in_set: Vec<ResultRow> = rows
        .into_iter()
        .filter(|r| cli.tests.is_empty() || cli.tests.contains(&r.test))
        .filter(|r| cli.sizes.is_empty() || cli.sizes.contains(&r.size))
        .collect();
    let selected: Vec<ResultRow> = in_set
        .iter()
        .filter(|r| cli.transports.is_empty() || cli.transports.contains(&r.transport))
        .cloned()
        .collect();
    if in_set.is_empty() || (selected.is_empty() && cli.gate.is_active()) {
        return bad_input([
            "no result in the inputs matches --test/--transport/--size; check the selection"
                .to_string(),
        ]);
    }
    let report = match super::check_set(&selected, &in_set, &cli.gate, &cli.set) {
        Ok(report) => report,
        Err(errors) => {
            return bad_input(errors.iter().map(|e| format!("baseline: {e}")));
        }
    };
    emit(&report.table());
    if cli.output.github_enabled() {
        emit(&report.github_annotations());
        // The job summary page shows the whole table; failing to write it must not change the verdict.
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            let written = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .and_then(|mut f| std::io::Write::write_all(&mut f, report.markdown().as_bytes()));
            if let Err(e) = written {
                eprintln!(
                    "roce_gate: warning: cannot append the summary to GITHUB_STEP_SUMMARY ({}): {e}",
                    PathBuf::from(path).display()
                );
            }
        }
    }
    if let Some(path) = &cli.output.junit
        && let Err(e) = report.write_junit(path)
    {
        return bad_input([format!(
            "cannot write the JUnit report {}: {e}; check that its directory exists and is writable",
            path.display()
        )]);
    }
    ExitCode::from(report.exit_code() as u8)
}
