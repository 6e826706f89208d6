//! `roce_compare`'s command line and main: a comparison run live or read from files, then reported.
//!
//! Four modes: `--local` runs every transport on this machine; `--server` and `HOST` run them between
//! two hosts (the client drives); `--from` compares result files made elsewhere. Exit 0 ok (even with
//! notes about transports that could not run), 1 a gate failed, 2 usage error or nothing could run.
//! The binary only calls [`main`].

use super::leg::{Sizes, TestSpec};
use super::run::{self, ClientSide, LocalServer, Plan, ServerSide};
use super::{files, local, loss, loss_report, remote};
use crate::gate::{self, GateArgs, GateOutputArgs, SetGateArgs, parse_transport_arg};
use crate::orchestrate::{child, signals};
use crate::params::{Metric, TestKind, TransportKind, Verb};
use crate::report::export::{Document, ExportManager, FormatFiles};
use crate::report::{emit, progress::SweepProgress, table};
use crate::results::{CompareSet, ResultRow, compare_dir};
use anyhow::Context;
use clap::{FromArgMatches, Parser};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  Everything on this machine: write_lat at 2 B and write_bw at 64 KiB over RoCE v2 (soft), RoCE
  v1 (soft) and TCP, all across one veth pair between two network namespaces (as root; otherwise
  RoCE v2 and TCP on lo, and RoCE v1 skipped):
    roce_compare --local

  Five interleaved repetitions of each, to gate against a baseline beyond the run-to-run spread;
  and a same-run gate a slow machine does not trip (soft v2 median latency at most 2x TCP's):
    roce_compare --local --repeat 5
    roce_compare --local write_lat -D 2 --max-ratio soft-v2/tcp:p50=2

  Two hosts (verbs where -d is an RDMA device, soft where it is an interface):
    server$ roce_compare --server -d eth0
    client$ roce_compare -d eth0 192.0.2.10 send_lat read_bw -a

  Compare runs made with --results, and re-render an earlier comparison with a gate:
    roce_compare --from results/*-write_lat-*-client.json
    roce_compare --from results/20261129-102425/compare.json --gate-transport soft --min-bw 10Gb/s

Runs of one test, transport and RoCE version at different sizes are merged into one curve. The files
go to <results>/<timestamp>/: compare.csv, compare.json, one .hlog per latency run, latency.svg and
bandwidth.svg. \"vs TCP\" needs a TCP run of the same test and size. The table, the files and the
plots say which link each run crossed. With --repeat N the table shows each transport's median
repetition and compare.json also holds every repetition's figures.";

/// Compare RoCE v1, RoCE v2 and TCP side by side: table, histograms, CSV, JSON, HdrHistogram logs and
/// SVG plots.
#[derive(Debug, Parser)]
#[command(name = "roce_compare", version, after_help = EXAMPLES)]
struct Cli {
    #[arg(value_name = "TEST|HOST", help = format!(
        "Tests to run ({}) [default: write_lat at 2 B and write_bw at 64 KiB]; in two-host mode also \
         the server's HOST",
        test_names()
    ))]
    args: Vec<String>,
    /// Run every transport on this machine, across one veth pair between two network namespaces when
    /// this process may make one (root), else on lo (without RoCE v1).
    #[arg(long, conflicts_with_all = ["server", "from"])]
    local: bool,
    /// Serve two-host comparisons: start each run's server when a `roce_compare HOST` asks.
    #[arg(long, conflicts_with = "from")]
    server: bool,
    /// With --server: serve one comparison, then exit.
    #[arg(long, requires = "server")]
    once: bool,
    /// Result JSON files (a run's --results output, or an earlier compare.json) to compare.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    from: Vec<PathBuf>,
    /// Message size for every test, with an optional K or M suffix.
    #[arg(short = 's', long = "size", value_parser = crate::params::parse_size)]
    size: Option<u64>,
    /// Every size from 2 B to 8 MiB, for every test.
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    all: bool,
    /// Iterations per size [default: each test's own].
    #[arg(short = 'n', long = "iters", value_parser = clap::value_parser!(u64).range(5..=1u64 << 32))]
    iters: Option<u64>,
    /// Seconds per size instead of -n iterations.
    #[arg(short = 'D', long = "duration", conflicts_with = "iters",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: Option<u64>,
    /// Two-host mode: the RDMA device (verbs) or network interface (soft) RoCE runs over.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    device: Option<String>,
    /// TCP port of the two-host control connection.
    #[arg(long, value_name = "PORT", default_value_t = remote::DEFAULT_CONTROL_PORT)]
    control_port: u16,
    /// Run each test over each transport N times, interleaved (every transport once, then again), and
    /// keep every repetition's figures; the report shows the median repetition.
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with_all = ["server", "from"],
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Seconds one run may take before its server and client are killed [default: from the work].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// Directory under which the comparison's <timestamp>/ directory is created.
    #[arg(long, value_name = "DIR", default_value = "results")]
    results: PathBuf,
    /// Print the report only; write no files.
    #[arg(long)]
    no_files: bool,
    /// The formats every tool writes, each to the file its flag names (--no-files leaves them be).
    #[command(flatten)]
    formats: FormatFiles,
    /// Loss sweep: run every test over RoCE v2 (go-back-N and selective repeat), RoCE v1 and TCP across
    /// one veth pair at each of these packet loss rates, e.g. 0,0.01%,0.1%,1%,5% (needs root).
    #[arg(long = "loss-sweep", value_name = "RATES", value_delimiter = ',',
          value_parser = loss::parse_rate, conflicts_with_all = ["server", "from", "local"])]
    loss_sweep: Vec<f64>,
    /// How the loss sweep drops packets: kernel (iptables statistic for TCP and RoCE v2; roceperf's
    /// impairer for RoCE v1, which iptables cannot see) or impairer (roceperf's for every RoCE run).
    #[arg(
        long = "loss-via",
        value_enum,
        default_value = "kernel",
        requires = "loss_sweep"
    )]
    loss_via: loss::LossVia,
    /// Loss sweep: losses in Gilbert–Elliott bursts of this mean length (RoCE through roceperf's
    /// impairer; iptables has no bursts, so TCP runs only loss-free).
    #[arg(long = "loss-burst", value_name = "N", requires = "loss_sweep")]
    loss_burst: Option<f64>,
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
    set_gate: SetGateArgs,
    #[command(flatten)]
    gate_output: GateOutputArgs,
}

/// A usage error: printed as clap prints its own, exit 2.
fn usage(msg: &str) -> anyhow::Result<ExitCode> {
    eprintln!("roce_compare: error: {msg}\n\nFor more information, try '--help'.");
    Ok(ExitCode::from(2))
}

fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    let live_flags = cli.size.is_some()
        || cli.all
        || cli.iters.is_some()
        || cli.duration.is_some()
        || cli.timeout.is_some();
    if !cli.from.is_empty() {
        if !cli.args.is_empty() || live_flags || cli.device.is_some() {
            return usage(
                "--from compares files; tests, a host, -s, -a, -n, -D, -d and --timeout are for live runs",
            );
        }
        return from_files(cli);
    }
    if cli.server {
        if !cli.args.is_empty() || live_flags {
            return usage(
                "--server takes its tests and sizes from the client; give them to `roce_compare HOST`",
            );
        }
        return serve(cli);
    }
    let (tests, hosts) = split_args(&cli.args);
    if !cli.loss_sweep.is_empty() {
        return loss_sweep(cli, &tests, &hosts);
    }
    if cli.local && !hosts.is_empty() {
        return usage(&format!(
            "{:?} is not a test ({}); --local takes no host",
            hosts[0],
            test_names()
        ));
    }
    if !cli.local && hosts.len() != 1 {
        return usage(&match hosts.len() {
            0 => "say what to compare: --local (this machine), HOST (with a roce_compare --server there), or --from FILES".to_string(),
            _ => format!(
                "one server host only, got {}; tests are {}",
                hosts.join(", "),
                test_names()
            ),
        });
    }
    let specs = test_specs(cli, &tests);
    let bin_dir = bin_dir()?;
    let work = tempfile::Builder::new()
        .prefix("roce_compare-")
        .tempdir()
        .context("cannot create a temporary directory for the runs' logs")?;
    let timeout = cli.timeout.map(Duration::from_secs);
    // The client runs the same way against either server, only pinned where it can be.
    let client = |cpu| ClientSide {
        bin_dir: bin_dir.clone(),
        work: work.path().to_owned(),
        cpu,
        timeout,
    };
    signals::catch();
    let set = if cli.local {
        if cli.device.is_some() {
            return usage(
                "-d is for two-host runs; --local uses a veth pair between two namespaces (as root), else lo",
            );
        }
        let netns = local::netns_pair();
        let plan = Plan {
            repeat: cli.repeat as usize,
            ..local::plan(specs, netns.as_ref())
        };
        let (server_cpu, client_cpu) = local::cores();
        let mut server = LocalServer::new(bin_dir.clone(), work.path().to_owned(), server_cpu);
        run_live(&plan, &mut server, &client(client_cpu))
    } else {
        let host = hosts[0];
        let plan = Plan {
            repeat: cli.repeat as usize,
            ..remote::plan(specs, host, cli.device.as_deref())
        };
        let connected =
            remote::RemoteServer::connect(host, cli.control_port, Duration::from_secs(10), timeout);
        let mut server = match connected {
            Ok(s) => s,
            Err(e) => {
                eprintln!("roce_compare: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        run_live(&plan, &mut server, &client(None))
    };
    let nothing_ran = set.runs.is_empty();
    let code = report_and_gate(cli, &set)?;
    if signals::stop_requested() {
        eprintln!("roce_compare: interrupted; the report above holds the runs that finished");
        return Ok(ExitCode::from(130));
    }
    if nothing_ran {
        eprintln!("roce_compare: error: no transport could run; see the notes above");
        return Ok(ExitCode::from(2));
    }
    Ok(code)
}

/// `--loss-sweep`: every transport at every loss rate on this machine, then the sweep's report and
/// the comparison's files and gates.
fn loss_sweep(cli: &Cli, tests: &[TestKind], hosts: &[&str]) -> anyhow::Result<ExitCode> {
    if let Some(h) = hosts.first() {
        return usage(&format!(
            "{h:?} is not a test; a loss sweep runs on this machine and takes no host"
        ));
    }
    if cli.device.is_some() {
        return usage("-d is for two-host runs; a loss sweep runs across its own veth pair");
    }
    if cli.loss_burst.is_some_and(|b| b.is_nan() || b < 1.0) {
        return usage("--loss-burst is a mean burst length of at least 1 packet");
    }
    let work = tempfile::Builder::new()
        .prefix("roce_compare-loss-")
        .tempdir()
        .context("cannot create a temporary directory for the runs' logs")?;
    let sweep = loss::Sweep {
        tests: test_specs(cli, tests),
        rates: cli.loss_sweep.clone(),
        via: cli.loss_via,
        burst: cli.loss_burst,
        bin_dir: bin_dir()?,
        work: work.path().to_owned(),
        timeout: cli.timeout.map(Duration::from_secs),
    };
    signals::catch();
    let steps = (sweep.tests.len() * sweep.rates.len() * 4) as u64;
    let progress = SweepProgress::steps(steps, "runs");
    let set = match loss::run(&sweep, &progress) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("roce_compare: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    emit(&loss_report::table(&set));
    if !cli.no_files {
        let dir = compare_dir(&cli.results, &set.started_at);
        let files = ExportManager::loss_sweep(&dir)
            .write(&Document::Compare(&set))
            .result()?;
        emit(&format!("\nLoss sweep files in {}:\n", dir.display()));
        for f in files {
            emit(&format!(
                "  {}\n",
                f.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    if set.runs.is_empty() {
        eprintln!("roce_compare: error: no run of the loss sweep succeeded; see the notes above");
        return Ok(ExitCode::from(2));
    }
    report_and_gate(cli, &set)
}

/// Every run of the plan, with a progress bar on the terminal (none when stdout is piped).
fn run_live(plan: &Plan, server: &mut dyn ServerSide, client: &ClientSide) -> CompareSet {
    let steps = (plan.tests.len() * plan.legs.len() * plan.repeat.max(1)) as u64;
    let progress = SweepProgress::steps(steps, "runs");
    run::run_plan(plan, server, client, &progress)
}

/// Every test there is a binary for: `send_bw, write_bw, ..., atomic_lat`.
fn test_names() -> String {
    TestKind::EVERY.map(|t| t.name()).join(", ")
}

/// Where the `roce_<test>` binaries are: beside this one.
fn bin_dir() -> anyhow::Result<PathBuf> {
    child::exe_dir().context("cannot find where roce_compare runs from")
}

/// Splits positional arguments into tests (`write_lat`, `roce_write_lat`) and anything else (hosts).
fn split_args(args: &[String]) -> (Vec<TestKind>, Vec<&str>) {
    let mut tests = Vec::new();
    let mut hosts = Vec::new();
    for a in args {
        match TestKind::from_name(a.strip_prefix("roce_").unwrap_or(a)) {
            Some(t) if !tests.contains(&t) => tests.push(t),
            Some(_) => {}
            None => hosts.push(a.as_str()),
        }
    }
    (tests, hosts)
}

/// The tests with the sizes and run length the flags ask for.
fn test_specs(cli: &Cli, tests: &[TestKind]) -> Vec<TestSpec> {
    let tests = if tests.is_empty() {
        vec![
            TestKind::new(Verb::Write, Metric::Latency),
            TestKind::new(Verb::Write, Metric::Bandwidth),
        ]
    } else {
        tests.to_vec()
    };
    let sizes = match (cli.all, cli.size) {
        (true, _) => Sizes::All,
        (false, Some(s)) => Sizes::One(s),
        (false, None) => Sizes::Default,
    };
    tests
        .into_iter()
        .map(|test| TestSpec {
            test,
            sizes,
            iters: cli.iters,
            duration: cli.duration,
        })
        .collect()
}

/// `roce_compare --server`: serve comparisons on the control port.
fn serve(cli: &Cli) -> anyhow::Result<ExitCode> {
    let listener = std::net::TcpListener::bind(("0.0.0.0", cli.control_port)).with_context(|| {
        format!(
            "cannot listen on TCP port {} (--control-port); is another roce_compare --server running?",
            cli.control_port
        )
    })?;
    eprintln!(
        "roce_compare: serving comparisons on TCP port {}; on the other host run: roce_compare{} <this host>",
        cli.control_port,
        cli.device
            .as_deref()
            .map(|d| format!(" -d {d}"))
            .unwrap_or_default()
    );
    let cfg = remote::ServeConfig {
        bin_dir: bin_dir()?,
        device: cli.device.clone(),
        cpu: None,
        once: cli.once,
    };
    remote::serve(&listener, &cfg).context("serving comparisons")?;
    Ok(ExitCode::SUCCESS)
}

fn from_files(cli: &Cli) -> anyhow::Result<ExitCode> {
    match files::compare_files(&cli.from) {
        Ok(set) => report_and_gate(cli, &set),
        Err(errors) => {
            for e in errors {
                eprintln!("roce_compare: error: {e}");
            }
            Ok(ExitCode::from(2))
        }
    }
}

/// Prints the table and histograms, writes the files, and applies the gates.
fn report_and_gate(cli: &Cli, set: &CompareSet) -> anyhow::Result<ExitCode> {
    emit(&table::render(set));
    if !cli.no_files {
        let dir = compare_dir(&cli.results, &set.started_at);
        let files = ExportManager::comparison(&dir)
            .write(&Document::Compare(set))
            .result()?;
        emit(&format!("\nFiles in {}:\n", dir.display()));
        for n in files {
            emit(&format!(
                "  {}\n",
                n.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    ExportManager::new()
        .with_formats(&cli.formats)
        .write(&Document::Compare(set))
        .result()?;
    if !cli.gate.is_active() && !cli.set_gate.is_active() {
        return Ok(ExitCode::SUCCESS);
    }
    let only = cli.gate_transport;
    let all = ResultRow::from_compare(set, Path::new("compare.json"));
    let rows: Vec<ResultRow> = all
        .iter()
        .filter(|r| only.is_none_or(|t| r.transport == t))
        .cloned()
        .collect();
    let report = match gate::check_set(&rows, &all, &cli.gate, &cli.set_gate) {
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
        report
            .write_junit(path)
            .with_context(|| format!("cannot write the JUnit report {}", path.display()))?;
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

/// roce_compare: parses the command line, runs or reads the comparison, reports it and applies the
/// gates; returns the exit status.
pub fn main() -> ExitCode {
    let matches = crate::params::argv::matches(<Cli as clap::CommandFactory>::command());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("roce_compare: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn roce_compare_takes_every_format_flag() {
        assert!(crate::report::export::takes_format_files(
            &super::Cli::command()
        ));
    }
}
