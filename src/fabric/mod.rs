//! Fabric mode (`roce_fabric`): the single-pair tests between every pair of N hosts, with rank and size
//! from the launcher (srun, mpirun, a Kubernetes Indexed Job), a TCP rendezvous at rank 0, n × n
//! matrices, outliers named by ClusterKit's rules, and a verdict `roce_gate` can read.
//!
//! Layout: `args` (command line, clap) and `flags` (what it knows of the single-pair binaries' flags,
//! read from their clap definition), `launch` (rank, size, coordinator), `schedule` (which pairs when),
//! `job` (what a rank runs for a pair test, through `crate::orchestrate`'s runner, control protocol and
//! worker loop), `driver` (rank 0's sans-IO scheduler, `plan` its vocabulary) and `coordinator` (its
//! I/O), `cell`, `rules` (outliers), `summary`, `files` and `sink` (the document, written by
//! `report::export`), `metrics_http` (`--watch`'s latest round served to Prometheus), `scale` (the
//! arithmetic of big runs); `gate::fabric` judges a fabric.json.

pub(crate) mod args;
pub(crate) mod cell;
pub(crate) mod coordinator;
pub(crate) mod driver;
pub(crate) mod files;
pub(crate) mod flags;
pub mod job;
pub(crate) mod launch;
pub(crate) mod metrics_http;
pub(crate) mod plan;
pub(crate) mod rules;
pub mod scale;
pub(crate) mod schedule;
pub(crate) mod sink;
pub(crate) mod summary;
pub(crate) mod verdict;

use crate::oob::HostPort;
use crate::oob::dial::{self, DialError, Retry};
use crate::orchestrate::control::Hello;
use crate::orchestrate::worker::{self, Serve};
use crate::orchestrate::{child, signals};
use args::{FabricOptions, UsageError};
use driver::Plan;
use std::collections::BTreeSet;
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Extra time past a job's own timeout before rank 0 counts its rank as lost.
pub(crate) const GRACE: Duration = Duration::from_secs(15);

/// How long a test binary may take to parse its flags and print its help.
const PREFLIGHT: Duration = Duration::from_secs(30);

/// How long a rank waits for any word from rank 0 before it concludes rank 0 is gone (generous: rank 0
/// may be writing a big matrix's snapshot; it pings every 5 s).
pub(crate) const SILENCE_LIMIT: Duration = Duration::from_secs(120);

/// `ROCEPERF_FABRIC_IMPAIR`: impair chosen pairs or ranks (read on rank 0) to rehearse the outlier rules.
pub(crate) const IMPAIR_ENV: &str = "ROCEPERF_FABRIC_IMPAIR";

/// roce_fabric's command line, as `--help` shows it (the man page and completions are made from it).
pub fn command() -> clap::Command {
    args::command()
}

/// The binary's entry point: parse, run, exit.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args::text(&args) {
        Ok(args) => ExitCode::from(run(&args)),
        Err(e) => ExitCode::from(fail(None, e, 2)),
    }
}

/// Writes a line to stderr, ignoring a closed one: a launcher that gives up (mpirun aborting the job)
/// closes the ranks' output first, and rank 0 must still write its files rather than panic.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn fail(rank: Option<usize>, msg: impl std::fmt::Display, code: u8) -> u8 {
    match rank {
        Some(r) => say(&format!("roce_fabric: rank {r}: error: {msg}")),
        None => say(&format!("roce_fabric: error: {msg}")),
    }
    code
}

/// Connects to rank 0 at `host:port`, retrying until `timeout` (rank 0 may start last, and its name
/// may not resolve yet: a Kubernetes pod's record appears when the pod does).
pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let target = HostPort::new(host, port);
    let retry = Retry {
        wait: timeout,
        pause: Duration::from_millis(200),
        attempt: Some(Duration::from_secs(2)),
    };
    dial::connect_host(&target, retry)
        .map(|(stream, _)| stream)
        .map_err(|e| {
            let reason = match e {
                DialError::Fatal(e) | DialError::GaveUp(Some(e)) => e.to_string(),
                DialError::GaveUp(None) => "no address".into(),
            };
            format!(
                "cannot reach the coordinator (rank 0) at {target} within {} s: {reason}",
                timeout.as_secs()
            )
        })
}

/// Runs roce_fabric with `args` (without the program name); the exit code.
pub fn run(args: &[String]) -> u8 {
    let opts = match args::parse(args) {
        Ok(o) => o,
        // clap's own: a usage error (exit 2), or --help and --version (exit 0).
        Err(UsageError::Clap(e)) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
        Err(e) => {
            return fail(
                None,
                format!("{e}\n\nFor more information, try '--help'."),
                2,
            );
        }
    };
    let env = |k: &str| std::env::var(k).ok();
    let place = match launch::place(
        &env,
        opts.rank,
        opts.world_size,
        opts.coordinator.as_deref(),
    ) {
        Ok(p) => p,
        Err(e) => return fail(None, e, 2),
    };
    let rank = place.rank;
    let bin_dir = opts
        .bin_dir
        .clone()
        .unwrap_or_else(|| child::exe_dir().unwrap_or_else(|_| PathBuf::from(".")));
    let bind = opts
        .soft_on_loopback()
        .then(|| job::loopback_addr(opts.loopback_base, rank));
    let workdir = match tempfile::Builder::new().prefix("roce_fabric").tempdir() {
        Ok(d) => d,
        Err(e) => {
            return fail(
                Some(rank),
                format!("cannot create a scratch directory: {e}"),
                2,
            );
        }
    };
    let hello = Hello::new(
        rank,
        place.size,
        opts.shared_params(),
        opts.advertise.clone().or_else(|| bind.clone()),
        opts.device(),
    );
    let runner = job::Runner {
        options: opts.clone(),
        bin_dir: bin_dir.clone(),
        bind,
    };
    let serve = Serve {
        driver: "the coordinator (rank 0)",
        silence: Some(SILENCE_LIMIT),
        dir: workdir.path().to_path_buf(),
    };
    let (host, port) = place.coordinator.clone();
    if rank != 0 {
        let stream = match connect(&host, port, opts.join_timeout) {
            Ok(s) => s,
            Err(e) => {
                let hint = format!("{e} (coordinator from {})", place.coordinator_source);
                return fail(Some(rank), hint, 1);
            }
        };
        return match worker::serve(stream, hello, runner, &serve) {
            Ok(code) => code,
            Err(e) => fail(Some(rank), &e, e.exit_code()),
        };
    }
    rank0(&opts, &place, hello, runner, serve, &bin_dir)
}

/// Runs each test binary once per leg with the test flags and `--help` (clap parses every flag before
/// it honours --help), logging in `dir`: a flag a binary refuses stops the run before it starts.
fn preflight(opts: &FabricOptions, bin_dir: &Path, dir: &Path) -> Result<(), String> {
    let victim = opts.victim.map(|_| driver::VICTIM_TEST);
    for test in opts.tests.iter().chain(victim.as_ref()) {
        let bin = bin_dir.join(format!("roce_{}", test.name()));
        for leg in opts.legs() {
            let mut args = opts.leg_args(leg);
            args.push("--help".into());
            let launch = child::Launch::new(bin.clone(), args);
            let mut probe = child::Child::spawn(&launch, dir, "preflight")
                .map_err(|e| format!("{e} (--bin-dir DIR says where the roce_* binaries are)"))?;
            let ended = probe.wait(std::time::Instant::now() + PREFLIGHT, || false);
            if !ended.success() {
                return Err(format!(
                    "roce_{} refuses the test flags: {}",
                    test.name(),
                    probe.tail().unwrap_or_default()
                ));
            }
        }
    }
    Ok(())
}

/// The ranks of each side of the pairs that run at once: a step's, or one pair's with `--serial`.
fn concurrent_sides(
    steps: &[schedule::Step],
    serial: bool,
    victim: Option<schedule::Pair>,
) -> verdict::Concurrent {
    let sides = |pairs: &mut dyn Iterator<Item = &schedule::Pair>| {
        pairs.flat_map(|p| [p.client, p.server]).collect::<Vec<_>>()
    };
    if serial {
        steps
            .iter()
            .flat_map(|s| s.pairs.iter())
            .map(|p| vec![p.client, p.server])
            .collect()
    } else {
        steps
            .iter()
            .map(|s| sides(&mut s.pairs.iter().chain(victim.as_ref())))
            .collect()
    }
}

/// Rank 0: checks what it can alone, then coordinates the run while its own worker (`runner`, served
/// as `serve` says) works for it from a thread, as every other rank does.
fn rank0(
    opts: &FabricOptions,
    place: &launch::Place,
    hello: Hello,
    runner: job::Runner,
    serve: Serve,
    bin_dir: &Path,
) -> u8 {
    let n = place.size;
    let steps = match opts.pattern.steps(n) {
        Ok(s) => s,
        Err(e) => return fail(Some(0), e, 2),
    };
    if usize::from(opts.base_port) + n > 65535 {
        return fail(
            Some(0),
            format!(
                "-p {}: the pair ports run up to {} + {n}, past 65535",
                opts.base_port, opts.base_port
            ),
            2,
        );
    }
    let incast = match opts.pattern {
        schedule::Pattern::Incast { receiver, senders } => {
            schedule::Pattern::incast(receiver, senders, n).ok()
        }
        _ => None,
    };
    let victim = match (opts.victim, &incast) {
        (Some(v), Some((receiver, senders))) => {
            match schedule::Pattern::victim(v, *receiver, senders, n) {
                Ok(p) => Some(p),
                Err(e) => return fail(Some(0), e, 2),
            }
        }
        _ => None,
    };
    let impair = match std::env::var(IMPAIR_ENV)
        .ok()
        .map(|v| driver::parse_impair(&v))
        .transpose()
    {
        Ok(i) => i.unwrap_or_default(),
        Err(e) => return fail(Some(0), e, 2),
    };
    if let Err(e) = preflight(opts, bin_dir, &serve.dir) {
        return fail(Some(0), e, 2);
    }
    let started_at = crate::results::now_rfc3339();
    let dir = opts.results.clone().unwrap_or_else(|| {
        let stamp: String = started_at.chars().filter(char::is_ascii_digit).collect();
        PathBuf::from("results").join(format!("fabric-{}-{}", &stamp[..8], &stamp[8..14]))
    });
    let scheduled: BTreeSet<(usize, usize)> = steps
        .iter()
        .flat_map(|s| s.pairs.iter().map(|p| (p.client, p.server)))
        .collect();
    let info = files::RunInfo {
        started_at,
        finished_at: String::new(),
        launcher: place.launcher.name().into(),
        pattern: opts.pattern.describe(),
        serial: opts.serial,
        args: opts.pass.clone(),
        rules: opts.rules,
        retest: opts.retest,
        interrupted: false,
        validate: flags::flag_value(&opts.pass, "--validate").is_some(),
        concurrent: concurrent_sides(&steps, opts.serial, victim),
        incast,
    };
    let served = opts.watch.and(opts.metrics_listen).map(|addr| {
        let exposition = metrics_http::Exposition::default();
        metrics_http::serve(addr, exposition.clone()).map(|bound| (exposition, bound))
    });
    let served = match served.transpose() {
        Ok(s) => s.map(|(exposition, bound)| {
            say(&format!(
                "roce_fabric: serving the latest round's metrics at http://{bound}/metrics"
            ));
            exposition
        }),
        Err(e) => return fail(Some(0), e, 2),
    };
    let sink =
        sink::Sink::new(&dir, info, scheduled, opts.formats.clone()).map(|s| match opts.watch {
            Some(every) => s.watching(every, served),
            None => s,
        });
    let mut sink = match sink {
        Ok(s) => s,
        Err(e) => {
            return fail(
                Some(0),
                format!(
                    "cannot write in the results directory {}: {e}",
                    dir.display()
                ),
                2,
            );
        }
    };
    let listener = match TcpListener::bind((Ipv4Addr::UNSPECIFIED, place.coordinator.1)) {
        Ok(l) => l,
        Err(e) => {
            return fail(
                Some(0),
                format!(
                    "cannot listen on the coordinator port {}: {e}; pick another with --coordinator HOST:PORT",
                    place.coordinator.1
                ),
                2,
            );
        }
    };
    signals::catch();
    let mut own_hello = hello.clone();
    own_hello.addr = None;
    let worker_thread = {
        let port = place.coordinator.1;
        let timeout = opts.join_timeout;
        std::thread::spawn(move || match connect("127.0.0.1", port, timeout) {
            Ok(s) => worker::serve(s, hello, runner, &serve).map_err(|e| e.to_string()),
            Err(e) => Err(e),
        })
    };
    let plan = Plan {
        n,
        legs: opts.legs(),
        tests: opts.tests.clone(),
        steps: steps.clone(),
        serial: opts.serial,
        retest: opts.retest,
        rules: opts.rules,
        base_port: opts.base_port,
        timeouts: opts
            .tests
            .iter()
            .map(|t| opts.pair_timeout_for(*t))
            .collect(),
        grace: GRACE,
        impair,
        victim,
    };
    let env = |k: &str| std::env::var(k).ok();
    let coord = coordinator::Coordinator::new(listener, n, own_hello, opts.join_timeout)
        .with_expected_hosts(launch::expected_hosts(&env, place.launcher, n))
        .watching(opts.watch);
    let finished = match coord.run(plan, &mut sink) {
        Ok(f) => f,
        Err(m) => {
            sink.discard();
            return fail(Some(0), m, 2);
        }
    };
    let interrupted = finished.interrupted;
    let code = if finished.rounds > 0 {
        sink.stop_watching(finished.rounds, interrupted)
    } else {
        let (members, phases) = finished.driver.finish();
        sink.finish(&members, &phases, interrupted)
    };
    // Rank 0's own worker has its Finish by now; a lost one must not hold the exit.
    if worker_thread.is_finished() {
        let _ = worker_thread.join();
    }
    code
}
