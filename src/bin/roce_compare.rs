//! roce_compare: RoCE v1, RoCE v2 and TCP side by side: a table, a histogram per transport, and
//! compare.csv, compare.json, HdrHistogram logs, latency.svg and bandwidth.svg under results/<timestamp>/.
//!
//! This version compares runs made elsewhere (`--from` result files); exit 0 ok, 1 a gate failed,
//! 2 bad input or usage.

use anyhow::Context;
use clap::Parser;
use roceperf::compare::{CompareRun, CompareSet, table};
use roceperf::gate::{self, GateArgs, GateOutputArgs, ResultRow};
use roceperf::params::{RoceVersion, Role, TransportKind};
use roceperf::report::{self, RunInfo, SizeResult};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const EXAMPLES: &str = "\
Examples:
  Compare three runs made with --results (any tests, any sizes):
    roce_compare --from results/*-write_lat-soft-v1-client.json \\
                        results/*-write_lat-soft-v2-client.json \\
                        results/*-write_lat-tcp-client.json

  Re-render an earlier comparison, and fail if a soft RoCE run's bandwidth is under 10 Gb/s:
    roce_compare --from results/20261129-102425/compare.json --gate-transport soft --min-bw 10Gb/s

Runs of one test, transport and RoCE version at different sizes are merged into one curve. The files
go to <results>/<timestamp>/: compare.csv, compare.json, one .hlog per latency run, latency.svg and
bandwidth.svg. \"vs TCP\" needs a TCP run of the same test and size.";

/// Compare roceperf runs side by side: table, histograms, CSV, JSON, HdrHistogram logs and SVG plots.
#[derive(Debug, Parser)]
#[command(name = "roce_compare", version, after_help = EXAMPLES)]
struct Cli {
    /// Result JSON files (a run's --results output, or an earlier compare.json) to compare.
    #[arg(long, value_name = "FILE", num_args = 1.., required = true)]
    from: Vec<PathBuf>,
    /// Directory under which the comparison's <timestamp>/ directory is created.
    #[arg(long, value_name = "DIR", default_value = "results")]
    results: PathBuf,
    /// Print the report only; write no files.
    #[arg(long)]
    no_files: bool,
    /// Hold only the runs of this transport (verbs, soft, tcp) to the gates below.
    #[arg(
        long,
        value_name = "NAME",
        value_parser = parse_transport_arg,
        help_heading = "Gates (exit 1 when a result misses one)"
    )]
    gate_transport: Option<TransportKind>,
    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    gate_output: GateOutputArgs,
}

fn parse_transport_arg(s: &str) -> Result<TransportKind, String> {
    gate::input::parse_transport(s)
        .ok_or_else(|| format!("{s:?} is not a transport; use verbs, soft or tcp"))
}

/// A run with where it came from, to merge sizes and tell duplicates apart.
struct Loaded {
    run: CompareRun,
    role: Option<Role>,
    file: String,
}

fn load(path: &Path) -> anyhow::Result<Vec<Loaded>> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "cannot read {}; check the path (and that the run that writes it succeeded)",
            path.display()
        )
    })?;
    let doc: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    match doc.get("schema").and_then(Value::as_str) {
        Some(report::json::SCHEMA) => {
            let version = doc.get("schema_version").and_then(Value::as_u64);
            if version != Some(u64::from(report::json::SCHEMA_VERSION)) {
                anyhow::bail!(
                    "{}: schema_version {version:?} is not {}; use the roceperf version that wrote it",
                    path.display(),
                    report::json::SCHEMA_VERSION
                );
            }
            let info: RunInfo = serde_json::from_value(doc["test"].clone()).with_context(|| {
                format!(
                    "{}: \"test\" is not a roceperf run description",
                    path.display()
                )
            })?;
            let results: Vec<SizeResult> = serde_json::from_value(doc["results"].clone())
                .with_context(|| format!("{}: \"results\" cannot be read", path.display()))?;
            if results.is_empty() {
                anyhow::bail!("{} holds no results", path.display());
            }
            Ok(vec![Loaded {
                run: CompareRun::from_run(&info, results),
                role: Some(info.role),
                file,
            }])
        }
        Some(roceperf::compare::SCHEMA) => {
            let set = roceperf::compare::from_json_value(doc)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Ok(set
                .runs
                .into_iter()
                .map(|run| Loaded {
                    run,
                    role: None,
                    file: file.clone(),
                })
                .collect())
        }
        other => anyhow::bail!(
            "{} is not a roceperf result (schema {}); give the JSON a run wrote with --results, or a compare.json",
            path.display(),
            other.map_or("missing".to_string(), |s| format!("{s:?}"))
        ),
    }
}

/// Order in the table: RoCE v1, then v2 (verbs before soft), TCP last as the reference.
fn transport_rank(t: TransportKind, r: Option<RoceVersion>) -> u8 {
    match (t, r) {
        (TransportKind::Tcp, _) => 9,
        (TransportKind::Verbs, Some(RoceVersion::V1)) => 0,
        (TransportKind::Soft, Some(RoceVersion::V1)) => 1,
        (TransportKind::Verbs, _) => 2,
        (TransportKind::Soft, _) => 3,
    }
}

/// Merges runs of the same test, transport, RoCE version and side (their sizes join one curve), and
/// gives the rest distinct labels.
fn assemble(loaded: Vec<Loaded>) -> Vec<CompareRun> {
    let mut merged: Vec<Loaded> = Vec::new();
    for l in loaded {
        let same = merged.iter_mut().find(|m| {
            m.run.test == l.run.test
                && m.run.transport == l.run.transport
                && m.run.roce == l.run.roce
                && m.role == l.role
                && m.run.label == l.run.label
                && l.run.results.iter().all(|r| m.run.at(r.size).is_none())
        });
        match same {
            Some(m) => {
                m.run.results.extend(l.run.results);
                m.run.results.sort_by_key(|r| r.size);
            }
            None => merged.push(l),
        }
    }
    // Still two runs with one (test, label): tell them apart by side, else by file.
    for i in 0..merged.len() {
        let clash: Vec<usize> = (0..merged.len())
            .filter(|&j| {
                merged[j].run.test == merged[i].run.test
                    && merged[j].run.label == merged[i].run.label
            })
            .collect();
        if clash.len() > 1 {
            let roles_differ = clash.iter().any(|&j| merged[j].role != merged[i].role);
            for j in clash {
                let suffix = match merged[j].role {
                    Some(role) if roles_differ => report::role_name(role).to_owned(),
                    _ => merged[j].file.clone(),
                };
                merged[j].run.label = format!("{} [{suffix}]", merged[j].run.label);
            }
        }
    }
    let tests: Vec<_> = {
        let mut t = Vec::new();
        for m in &merged {
            if !t.contains(&m.run.test) {
                t.push(m.run.test);
            }
        }
        t
    };
    let mut runs: Vec<CompareRun> = merged.into_iter().map(|m| m.run).collect();
    runs.sort_by_key(|r| {
        (
            tests.iter().position(|t| *t == r.test),
            transport_rank(r.transport, r.roce),
        )
    });
    runs
}

fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for path in &cli.from {
        match load(path) {
            Ok(l) => loaded.extend(l),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    if !errors.is_empty() {
        for e in errors {
            eprintln!("roce_compare: error: {e}");
        }
        return Ok(ExitCode::from(2));
    }
    let set = CompareSet {
        started_at: report::now_rfc3339(),
        version: env!("CARGO_PKG_VERSION").into(),
        runs: assemble(loaded),
        skipped: Vec::new(),
    };
    emit(&table::render(&set));
    if !cli.no_files {
        let dir = report::compare::compare_dir(&cli.results, &set.started_at);
        let files = report::compare::write_compare_files(&dir, &set)?;
        emit(&format!("\nFiles in {}:\n", dir.display()));
        let mut names = vec![files.csv, files.json];
        names.extend(files.hdr_logs);
        names.extend(files.latency_svg);
        names.extend(files.bandwidth_svg);
        for n in names {
            emit(&format!(
                "  {}\n",
                n.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    if !cli.gate.is_active() {
        return Ok(ExitCode::SUCCESS);
    }
    let only = cli.gate_transport;
    let rows: Vec<ResultRow> = ResultRow::from_compare(&set, Path::new("compare.json"))
        .into_iter()
        .filter(|r| only.is_none_or(|t| r.transport == t))
        .collect();
    let report = match gate::check(&rows, &cli.gate) {
        Ok(r) => r,
        Err(errors) => {
            for e in errors {
                eprintln!("roce_compare: error: baseline: {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    emit("\n");
    emit(&report.table());
    if cli.gate_output.github_enabled() {
        emit(&report.github_annotations());
    }
    if let Some(path) = &cli.gate_output.junit {
        std::fs::write(path, report.junit_xml())
            .with_context(|| format!("cannot write the JUnit report {}", path.display()))?;
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

/// Writes to stdout, ignoring a closed pipe (`| head`): the verdict is in the exit status and the files,
/// and a reader that has seen enough is no reason to panic.
fn emit(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("roce_compare: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
