//! `roce_compare`'s command line and main: a comparison run live or read from files, then reported.
//!
//! Four modes: `--local` runs every transport on this machine; `--server` and `HOST` run them between
//! two hosts (the client drives); `--from` compares result files made elsewhere. Exit 0 ok (even with
//! notes about transports that could not run), 1 a gate failed, 2 usage error or nothing could run.
//! The binary only calls [`main`].

use super::congestion::plan::CongestionArgs;
use super::leg::{Sizes, TestSpec, Tuning};
use super::run::{self, ClientSide, LocalServer, Plan, ServerSide};
use super::{congestion, files, local, loss, loss_report, port, remote};
use crate::gate::{self, GateArgs, GateOutputArgs, SetGateArgs, parse_transport_arg};
use crate::orchestrate::{child, signals};
use crate::params::{Metric, TestKind, TransportKind, Verb};
use crate::report::export::{Document, ExportManager, FormatFiles};
use crate::report::{emit, progress::SweepProgress, table};
use crate::results::{CompareSet, ResultRow, WirePort, compare_dir};
use anyhow::Context;
use clap::{FromArgMatches, Parser};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const EXAMPLES: &str = "\
What it measures:
  --local runs roceperf's userspace RoCE (soft) and TCP on this host. RoCE v1 and RoCE v2 take one
  host path (AF_PACKET, the same batching), so their rows differ by protocol: headers, ICRC
  coverage, addressing. TCP and RoCE v2 over its UDP socket take other paths; each row shows the
  floor of its own path (roce_ref, same run, same cores) and what the stack adds above it, so compare
  those, not the rows' raw figures. It tells nothing of RDMA NICs: for them run two hosts,
  roce_compare --server -d mlx5_0 on one and roce_compare HOST -d mlx5_0 on the other.

Examples:
  Everything on this machine: write_lat at 2 B and write_bw at 64 KiB over RoCE v1 and v2 (soft,
  AF_PACKET), TCP and RoCE v2 over its UDP socket, all across one veth pair between two network
  namespaces (as root; otherwise RoCE v2 over its UDP socket and TCP on lo, the AF_PACKET rows
  skipped):
    roce_compare --local

  The same with the cores, queue pairs and percentiles of your choice, and each protocol's goodput
  ceiling on a 100 Gb/s port (what v1, v2 and TCP would differ by there):
    roce_compare --local --server-cpu 3 --client-cpu 2 -q 4 --percentiles 50,99 --link-speed 100G

  Five interleaved repetitions of each, to gate against a baseline beyond the run-to-run spread;
  and a same-run gate a slow machine does not trip (soft v2 median latency at most 2x TCP's):
    roce_compare --local --repeat 5
    roce_compare --local write_lat -D 2 --max-ratio soft-v2/tcp:p50=2

  Two hosts (verbs where -d is an RDMA device, soft where it is an interface):
    server$ roce_compare --server -d mlx5_0
    client$ roce_compare -d mlx5_0 192.0.2.10 send_lat read_bw -a

  A congestion study (as root): 4 flows and a latency victim through a 1 Gb/s switch port under
  lossy go-back-N and selective repeat, ECN with DCQCN, PFC, PFC with DCQCN and TCP cubic, 10 s
  each; then hold it to issue 30's targets:
    roce_compare --congestion
    roce_gate results/<timestamp>/congestion.json

  Compare runs made with --results, and re-render an earlier comparison with a gate:
    roce_compare --from results/*-write_lat-*-client.json
    roce_compare --from results/20261129-102425/compare.json --gate-transport soft --min-bw 10Gb/s

Runs of one test, transport and RoCE version at different sizes are merged into one curve. The files
go to <results>/<timestamp>/: compare.csv, compare.json, one .hlog per latency run, latency.svg and
bandwidth.svg. \"÷v1\" divides a row's figure by RoCE v1's on the same host path (none across
paths). The table, the files and the plots say which link each run crossed. With --repeat N the
table shows each transport's median repetition with the spread of all of them (± half their range,
in %), and compare.json also holds every repetition's figures. A percentile with fewer than 10
samples beyond it is n/a (withheld), so latency tests take 100,000 iterations per size unless -n or
-D says otherwise.";

/// Compare RoCE v1, RoCE v2 and TCP side by side, each row against the floor of its host path: table,
/// histograms, CSV, JSON, HdrHistogram logs and SVG plots.
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
    /// this process may make one (root), else on lo (without the AF_PACKET rows).
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
    /// Iterations per size [default: 100,000 for latency tests, by count, so that p99.99 rests on 10
    /// samples beyond it (with -a, the test's own 1,000: p99.9 and p99.99 are then withheld); each
    /// bandwidth test's own].
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
    /// Core of every run's server side (and its floor's) [default: the last core this process may
    /// use]; with --server, of the servers it starts [default: the binaries']. The binaries' --cpu.
    #[arg(long, value_name = "N", conflicts_with = "from", help_heading = RUN_OPTIONS)]
    server_cpu: Option<usize>,
    /// Core of every run's client side (and its floor's) [default: with --local the second-to-last
    /// core, else the binaries' default]. The binaries' --cpu.
    #[arg(long, value_name = "N", conflicts_with_all = ["from", "server"], help_heading = RUN_OPTIONS)]
    client_cpu: Option<usize>,
    /// Queue pairs of the bandwidth runs [default: the binaries' 1]. The binaries' -q.
    #[arg(short = 'q', long = "qp", value_name = "QPS", help_heading = RUN_OPTIONS,
          value_parser = clap::value_parser!(u32).range(1..=16384))]
    qps: Option<u32>,
    /// Operations in flight per queue pair in the bandwidth runs [default: the binaries' 128]. The
    /// binaries' -t.
    #[arg(short = 't', long = "tx-depth", value_name = "N", help_heading = RUN_OPTIONS,
          value_parser = clap::value_parser!(u32).range(1..=15000))]
    tx_depth: Option<u32>,
    /// Iterations every run makes before it measures [default: the binaries' 100]. The binaries'
    /// --warmup.
    #[arg(long, value_name = "N", help_heading = RUN_OPTIONS)]
    warmup: Option<u64>,
    /// Percentiles the latency runs report, comma-separated [default: the binaries' 90,99,99.9,99.99].
    /// The binaries' --percentiles.
    #[arg(long, value_name = "LIST", value_delimiter = ',', help_heading = RUN_OPTIONS,
          value_parser = crate::params::parse_percentile)]
    percentiles: Option<Vec<f64>>,
    /// Show each bandwidth result as a share of its protocol's goodput ceiling on a port of this
    /// speed (100G, 25G, 2.5G): headers and ICRC per packet, packets per message, Ethernet's framing,
    /// TCP/IP's headers [default: a NIC's own speed in two-host mode; none on lo or a veth pair].
    #[arg(long, value_name = "SPEED", value_parser = port::parse_speed, help_heading = WIRE)]
    link_speed: Option<f64>,
    /// The MTU of that port [default: the runs' link's: the veth pair's 9000, a NIC's own; 9000 on lo].
    #[arg(long, value_name = "BYTES", requires = "link_speed", help_heading = WIRE,
          value_parser = clap::value_parser!(u32).range(576..=65536))]
    link_mtu: Option<u32>,
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
    congestion: CongestionArgs,
    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    set_gate: SetGateArgs,
    #[command(flatten)]
    gate_output: GateOutputArgs,
}

/// The help heading of the options passed to every run.
const RUN_OPTIONS: &str = "Run options (passed to every run)";
/// The help heading of the wire ceilings' options.
const WIRE: &str = "What the wire would allow";

/// A usage error: printed as clap prints its own, exit 2.
fn usage(msg: &str) -> anyhow::Result<ExitCode> {
    eprintln!("roce_compare: error: {msg}\n\nFor more information, try '--help'.");
    Ok(ExitCode::from(2))
}

fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    if cli.congestion.congestion {
        return congestion(cli);
    }
    let live_flags = cli.size.is_some()
        || cli.all
        || cli.iters.is_some()
        || cli.duration.is_some()
        || cli.timeout.is_some();
    let tuned = cli.qps.is_some()
        || cli.tx_depth.is_some()
        || cli.warmup.is_some()
        || cli.percentiles.is_some();
    if !cli.from.is_empty() {
        if !cli.args.is_empty() || live_flags || tuned || cli.device.is_some() {
            return usage(
                "--from compares files; tests, a host, -s, -a, -n, -D, -q, -t, --warmup, --percentiles, -d and --timeout are for live runs",
            );
        }
        return from_files(cli);
    }
    if cli.server {
        if !cli.args.is_empty() || live_flags || tuned || cli.link_speed.is_some() {
            return usage(
                "--server takes its tests, sizes and run options from the client; give them to `roce_compare HOST`",
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
    let specs = test_specs(cli, &tests, true);
    emit(&latency_samples_note(cli, &specs));
    let bin_dir = bin_dir()?;
    let work = tempfile::Builder::new()
        .prefix("roce_compare-")
        .tempdir()
        .context("cannot create a temporary directory for the runs' logs")?;
    let timeout = cli.timeout.map(Duration::from_secs);
    signals::catch();
    let mut notes = Vec::new();
    let (mut set, link_mtu) = if cli.local {
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
        let cores = local::Cores::choose(cli.server_cpu, cli.client_cpu);
        notes.push(format!("cores: {}", cores.note()));
        let mut server = LocalServer::new(bin_dir.clone(), work.path().to_owned(), cores.server);
        let client = ClientSide {
            bin_dir: bin_dir.clone(),
            work: work.path().to_owned(),
            cpu: cores.client,
            cpu_note: Some(cores.client_note()),
            timeout,
        };
        let mtu = netns.as_ref().ok().map(|_| local::VETH_MTU);
        (run_live(&plan, &mut server, &client), mtu)
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
        notes.push(format!(
            "cores: server: as roce_compare --server on {host} chose (its --server-cpu, else the binaries' default); client: {}",
            match cli.client_cpu {
                Some(c) => format!("core {c} chosen with --client-cpu"),
                None => "the binaries' default (the second-to-last core; --client-cpu)".into(),
            }
        ));
        let client = ClientSide {
            bin_dir: bin_dir.clone(),
            work: work.path().to_owned(),
            cpu: cli.client_cpu,
            cpu_note: cli
                .client_cpu
                .map(|c| format!("core {c} chosen with --client-cpu")),
            timeout,
        };
        (run_live(&plan, &mut server, &client), None)
    };
    notes.extend(run_notes(cli));
    set.notes = notes;
    attach_wire(cli, &mut set, link_mtu);
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
        cores: local::Cores::choose(cli.server_cpu, cli.client_cpu),
        tests: test_specs(cli, tests, false),
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
        let doc = Document::Compare(&set);
        write_files(cli, ExportManager::loss_sweep, &doc, "Loss sweep files")?;
    }
    if set.runs.is_empty() {
        eprintln!("roce_compare: error: no run of the loss sweep succeeded; see the notes above");
        return Ok(ExitCode::from(2));
    }
    report_and_gate(cli, &set)
}

/// `--congestion`: the study on this machine, its tables and its files.
fn congestion(cli: &Cli) -> anyhow::Result<ExitCode> {
    let others = !cli.args.is_empty()
        || cli.local
        || cli.server
        || !cli.from.is_empty()
        || !cli.loss_sweep.is_empty()
        || cli.all
        || cli.iters.is_some()
        || cli.device.is_some()
        || cli.qps.is_some()
        || cli.repeat > 1;
    if others {
        return usage(
            "--congestion runs its own write_bw flows (--flows N, not -q) and write_lat victim on              this machine for -D seconds each; it takes no test, host, -d, -a, -n, -q, --repeat,              --local, --server, --from or --loss-sweep",
        );
    }
    if cli.gate.is_active() || cli.set_gate.is_active() {
        return usage(
            "--congestion's targets are roce_gate's: run roce_gate on its congestion.json              (docs/congestion.md)",
        );
    }
    let study = match congestion::plan::Study::new(&cli.congestion, cli.size, cli.duration) {
        Ok(s) => s,
        Err(e) => return usage(&e),
    };
    let work = tempfile::Builder::new()
        .prefix("roce_compare-congestion-")
        .tempdir()
        .context("cannot create a temporary directory for the runs' logs")?;
    let env = congestion::run::Env {
        bin_dir: bin_dir()?,
        work: work.path().to_owned(),
        cores: local::Cores::choose(cli.server_cpu, cli.client_cpu),
        timeout: cli.timeout.map(Duration::from_secs),
    };
    signals::catch();
    let steps = study.disciplines.len() as u64 + u64::from(study.victim.is_some());
    let progress = SweepProgress::steps(steps, "runs");
    let doc = match congestion::run::run(&study, &env, &progress) {
        Ok(doc) => doc,
        Err(e) => {
            eprintln!("roce_compare: error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    emit(&crate::report::congestion::render(&doc));
    if !cli.no_files {
        let doc = Document::Congestion(&doc);
        write_files(
            cli,
            ExportManager::congestion,
            &doc,
            "Congestion study files",
        )?;
    }
    ExportManager::new()
        .with_formats(&cli.formats)
        .write(&Document::Congestion(&doc))
        .result()?;
    if signals::stop_requested() {
        return Ok(ExitCode::from(130));
    }
    if doc.runs.iter().all(|r| !r.outcome.ok) {
        eprintln!("roce_compare: error: no discipline's run succeeded; see the notes above");
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
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

/// Iterations per size a latency test of a live comparison takes when neither -n nor -D is given:
/// enough that p99.99, the highest percentile the binaries print, has 10 samples beyond it.
const LATENCY_ITERS: u64 = 100_000;

/// The tests with the sizes and run length the flags ask for; `live`: a comparison's own runs, whose
/// latency tests default to [`LATENCY_ITERS`] (a loss sweep keeps each test's own count: its lossy
/// runs wait out retransmission timeouts).
fn test_specs(cli: &Cli, tests: &[TestKind], live: bool) -> Vec<TestSpec> {
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
        .map(|test| {
            // -a's 23 sizes up to 8 MiB at 100,000 round trips each would take hours.
            let by_default =
                live && test.metric == Metric::Latency && cli.duration.is_none() && !cli.all;
            TestSpec {
                test,
                sizes,
                iters: cli.iters.or(by_default.then_some(LATENCY_ITERS)),
                duration: cli.duration,
                tuning: Tuning {
                    qps: cli.qps,
                    tx_depth: cli.tx_depth,
                    warmup: cli.warmup,
                    percentiles: cli.percentiles.clone().unwrap_or_default(),
                },
            }
        })
        .collect()
}

/// What chose the runs' length and options, one note each: the user's flag, or the binaries' default.
fn run_notes(cli: &Cli) -> Vec<String> {
    let length = match (cli.iters, cli.duration) {
        (Some(n), _) => format!("iterations: -n {n} per size (--iters)"),
        (_, Some(d)) => format!("iterations: as many as {d} s per size allows (--duration)"),
        _ if cli.all => {
            "iterations: each test's default (the binaries'; -n or -D to choose)".into()
        }
        _ => {
            "iterations: latency tests 100,000 per size (roce_compare's default), bandwidth tests \
              the binaries' default (-n or -D to choose)"
                .into()
        }
    };
    let given = |flag: &str, v: Option<String>, default: &str| match v {
        Some(v) => format!("{flag} {v} (as given)"),
        None => format!("{flag}: the binaries' default{default}"),
    };
    let percentiles = cli
        .percentiles
        .as_ref()
        .map(|p| p.iter().map(f64::to_string).collect::<Vec<_>>().join(","));
    vec![
        length,
        format!(
            "run options: {}; {}; {}; {}",
            given("-q", cli.qps.map(|q| q.to_string()), " (1)"),
            given("-t", cli.tx_depth.map(|t| t.to_string()), " (128)"),
            given("--warmup", cli.warmup.map(|w| w.to_string()), " (100)"),
            given("--percentiles", percentiles, ""),
        ),
    ]
}

/// The port of the wire ceilings: `--link-speed` (with `--link-mtu`, else `link_mtu`, the runs' link's,
/// else the device's, else [`port::DEFAULT_MTU`]), or in two-host mode the NIC's own; then every
/// bandwidth row's ceiling.
fn attach_wire(cli: &Cli, set: &mut CompareSet, link_mtu: Option<u32>) {
    let probed = cli
        .device
        .as_deref()
        .filter(|_| !cli.local)
        .and_then(|d| port::probe(Path::new("/sys"), d));
    let wire = match cli.link_speed {
        Some(speed) => {
            let (mtu, why) = match (cli.link_mtu, link_mtu, &probed) {
                (Some(m), _, _) => (m, "--link-mtu".to_string()),
                (None, Some(m), _) => (m, "the MTU of the runs' link".into()),
                (None, None, Some(p)) => (p.mtu, format!("the MTU from {}", p.source)),
                (None, None, None) => (
                    port::DEFAULT_MTU,
                    "a jumbo MTU, the runs' link having no Ethernet one; --link-mtu to choose"
                        .into(),
                ),
            };
            Some(WirePort {
                speed_gbps: speed,
                mtu,
                source: format!("--link-speed; {why}"),
            })
        }
        None => probed,
    };
    if let Some(w) = wire {
        port::attach(set, w);
    }
}

/// The header line that says how many samples the latency tests take, when roce_compare chose it;
/// empty when the user did (-n, -D) or no latency test runs.
fn latency_samples_note(cli: &Cli, specs: &[TestSpec]) -> String {
    let lat = specs.iter().any(|s| s.test.metric == Metric::Latency);
    if !lat || cli.iters.is_some() || cli.duration.is_some() {
        return String::new();
    }
    if cli.all {
        return "roce_compare: with -a, latency tests take each test's own 1,000 iterations per size, \
                so p99.9 and p99.99 are withheld (n/a); -n 100000 makes them hold\n"
            .into();
    }
    // The figure is spelt out for people; this keeps it the constant's.
    const _: () = assert!(LATENCY_ITERS == 100_000);
    "roce_compare: latency tests take 100,000 iterations per size (by count, not duration), so that \
     p99.99 rests on 10 samples beyond it; -n N or -D SECS to change\n"
        .into()
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
        cpu: cli.server_cpu,
        once: cli.once,
    };
    remote::serve(&listener, &cfg).context("serving comparisons")?;
    Ok(ExitCode::SUCCESS)
}

fn from_files(cli: &Cli) -> anyhow::Result<ExitCode> {
    match files::compare_files(&cli.from) {
        Ok(mut set) => {
            attach_wire(cli, &mut set, None);
            report_and_gate(cli, &set)
        }
        Err(errors) => {
            for e in errors {
                eprintln!("roce_compare: error: {e}");
            }
            Ok(ExitCode::from(2))
        }
    }
}

/// Writes `doc`'s files with the manager `formats` makes for `<results>/<timestamp>/`, and lists
/// them under `title`.
fn write_files(
    cli: &Cli,
    formats: fn(&Path) -> ExportManager,
    doc: &Document<'_>,
    title: &str,
) -> anyhow::Result<()> {
    let started_at = match doc {
        Document::Compare(set) => &set.started_at,
        Document::Congestion(study) => &study.started_at,
        _ => return Ok(()),
    };
    let dir = compare_dir(&cli.results, started_at);
    let files = formats(&dir).write(doc).result()?;
    emit(&format!("\n{title} in {}:\n", dir.display()));
    for f in files {
        emit(&format!(
            "  {}\n",
            f.file_name().unwrap_or_default().to_string_lossy()
        ));
    }
    Ok(())
}

/// Prints the table and histograms, writes the files, and applies the gates.
fn report_and_gate(cli: &Cli, set: &CompareSet) -> anyhow::Result<ExitCode> {
    emit(&table::render(set));
    if !cli.no_files {
        write_files(
            cli,
            ExportManager::comparison,
            &Document::Compare(set),
            "Files",
        )?;
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

/// roce_compare's command line, as `--help` shows it (the man page and completions are made from it).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// roce_compare: parses the command line, runs or reads the comparison, reports it and applies the
/// gates; returns the exit status.
pub fn main() -> ExitCode {
    let matches = crate::params::argv::matches(command());
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
    use super::*;
    use clap::CommandFactory;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("roce_compare").chain(args.iter().copied())).unwrap()
    }

    fn iters(args: &[&str], live: bool) -> Vec<(String, Option<u64>)> {
        let c = cli(args);
        let (tests, _) = split_args(&c.args);
        test_specs(&c, &tests, live)
            .iter()
            .map(|s| (s.test.name().to_owned(), s.iters))
            .collect()
    }

    #[test]
    fn latency_runs_take_100000_samples_unless_told() {
        let want = |n| vec![("write_lat".into(), n), ("write_bw".into(), None)];
        assert_eq!(iters(&["--local"], true), want(Some(100_000)));
        assert_eq!(
            iters(&["--local", "-n", "500"], true),
            vec![
                ("write_lat".into(), Some(500)),
                ("write_bw".into(), Some(500))
            ]
        );
        assert_eq!(iters(&["--local", "-D", "2"], true), want(None));
        assert_eq!(iters(&["--local", "-a"], true), want(None));
        // A loss sweep keeps each test's own count.
        assert_eq!(iters(&["--local"], false), want(None));
        // The header says so, and says nothing when the user chose.
        let note = |args: &[&str]| {
            let c = cli(args);
            latency_samples_note(&c, &test_specs(&c, &split_args(&c.args).0, true))
        };
        assert!(
            note(&["--local"]).contains("latency tests take 100,000 iterations per size (by count"),
            "{}",
            note(&["--local"])
        );
        assert!(note(&["--local", "-a"]).contains("p99.9 and p99.99 are withheld"));
        assert_eq!(note(&["--local", "-n", "500"]), "");
        assert_eq!(note(&["--local", "write_bw"]), "");
    }

    #[test]
    fn roce_compare_takes_every_format_flag() {
        assert!(crate::report::export::takes_format_files(
            &super::Cli::command()
        ));
    }
}
