//! roce_fabric's command line: its own options (clap), the tests to run, and the test flags it passes
//! through to the single-pair binaries unchanged.
//!
//! The test flags are the binaries' to parse; `flags` knows just enough of them, from the binaries'
//! own clap definition, to tell them apart from roce_fabric's options and pass them on.

use super::flags::{
    REFUSED, canonical, flag_value, grouped, known, not_for_tcp, per_host, value_follows, without,
};
use super::rules::Rules;
use super::schedule::Pattern;
use crate::params::TestKind;
use crate::report::export::FormatFiles;
use clap::{Arg, CommandFactory, FromArgMatches, Parser};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Default TCP port of the coordinator (rank 0).
pub(crate) const DEFAULT_COORDINATOR_PORT: u16 = 18510;
/// Default first out-of-band port of the pair tests: a pair's port is this plus its server's rank.
pub(crate) const DEFAULT_BASE_PORT: u16 = 18515;
/// First address of the ranks' soft endpoints on lo: rank r binds 127.0.0.(10 + r).
pub(crate) const DEFAULT_LOOPBACK_BASE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 10);

pub(crate) use crate::results::fabric::Leg;

const ABOUT: &str = "\
roce_fabric: the roceperf tests between every pair of N hosts, launched by srun, mpirun or a \
Kubernetes Indexed Job. Each rank runs the single-pair binaries (roce_write_bw, ...) against the peers \
rank 0 assigns; rank 0 gathers an n x n matrix per test and names the slow hosts and pairs.";

/// `-h`'s page after the common flags: what the test flags are, two examples, where the rest is.
const SHORT_EXAMPLES: &str = "\
Test flags: every other flag is a single-pair binary's (-d, -s, -n, -D, --transport, ...), passed on.

Examples:
  srun -N 16 --ntasks-per-node=1 roce_fabric write_bw -s 1M -d mlx5_0 --results /shared/fabric
  mpirun --oversubscribe -np 4 roce_fabric write_bw --transport soft -d lo -n 200   (one host)

--help lists every flag (incast, pairs, timeouts, Prometheus), the launchers and the exit status.
Exit: 0 every pair ran, 1 a pair failed or a rank was lost, 2 usage/setup.";

/// The flags `-h` shows (clap ids); `--help` shows every one.
const COMMON: &[&str] = &[
    "tests",
    "coordinator",
    "pattern",
    "compare",
    "results",
    "watch",
];

const EXAMPLES: &str = "\
Examples:
  srun -N 16 --ntasks-per-node=1 roce_fabric write_bw -s 1M -d mlx5_0 --results /shared/fabric
  mpirun -np 16 --map-by node roce_fabric write_lat --transport soft -d eth0
  mpirun --oversubscribe -np 4 roce_fabric write_bw --transport soft -d lo -n 200   (one host)
  srun -N 9 roce_fabric write_bw -s 1M -d mlx5_0 --pattern incast --incast-receiver 0   (8 into 1)

Rank and size come from SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/_SIZE, PMI_RANK/PMI_SIZE, \
PMIX_RANK or JOB_COMPLETION_INDEX. Check the matrix with roce_gate fabric.json --min-bw ... --no-flagged.

Watching: roce_fabric write_bw --watch 60 --metrics-listen 0.0.0.0:9464 ... repeats the schedule a minute \
after each round until SIGTERM and serves the latest matrix at http://HOST:9464/metrics for Prometheus \
(--metrics FILE writes the same, for node_exporter's textfile collector).

Exit status: 0 every pair ran, 1 a pair failed or a rank was lost (the matrix is still written), 2 usage \
or setup error, or ranks that disagree on the version or a parameter. With --watch, the last complete \
round's status when SIGTERM or SIGINT stops it (1 if none completed).";

/// roce_fabric's own options, as clap parses them (the test flags never reach clap: [`split`]).
#[derive(Debug, Parser)]
#[command(
    name = "roce_fabric",
    version,
    about = ABOUT,
    override_usage = "roce_fabric [FABRIC OPTIONS] TEST... [TEST FLAGS]",
    next_help_heading = "Fabric options"
)]
struct Cli {
    /// The tests (the list is filled in from the test binaries: [`command`]).
    #[arg(value_name = "TEST")]
    tests: Vec<String>,
    /// Where rank 0 listens [default: from the launcher; 127.0.0.1 on one host; port 18510].
    #[arg(long, value_name = "HOST[:PORT]")]
    coordinator: Option<String>,
    /// This process's rank, when no launcher gives it.
    #[arg(long, value_name = "N")]
    rank: Option<usize>,
    /// Ranks in the job, when no launcher gives it (with a Kubernetes Indexed Job's
    /// JOB_COMPLETION_INDEX).
    #[arg(long = "world-size", value_name = "N")]
    world_size: Option<usize>,
    /// Which pairs: all (n-1 rounds of n/2 pairs, both directions), ring, bisection, or incast
    /// (every other rank sends to one receiver at once) [default: all].
    #[arg(long, value_name = "all|ring|bisection|incast", value_parser = parse_pattern)]
    pattern: Option<Pattern>,
    /// Incast: the rank every sender sends to [default: 0].
    #[arg(long = "incast-receiver", value_name = "RANK")]
    incast_receiver: Option<usize>,
    /// Incast: how many ranks send at once, the first N other than the receiver [default: all others].
    #[arg(long = "incast-senders", value_name = "N")]
    incast_senders: Option<usize>,
    /// Incast: a victim latency pair (write_lat) run while the senders send, CLIENT a rank that does
    /// not send, SERVER the receiver (it then shares the receiver's port: head-of-line blocking shows)
    /// or another rank that does not send.
    #[arg(long, value_name = "CLIENT,SERVER", value_parser = parse_victim)]
    victim: Option<(usize, usize)>,
    /// Pairs to test, one 'CLIENT SERVER' rank pair per line.
    #[arg(long, value_name = "FILE", conflicts_with = "pattern")]
    pairs: Option<PathBuf>,
    /// One pair at a time instead of a whole round at once.
    #[arg(long)]
    serial: bool,
    /// RoCE v1, RoCE v2 and TCP matrices in one job.
    #[arg(long)]
    compare: bool,
    /// Where rank 0 writes fabric.json, fabric.csv and heatmaps [default: results/fabric-<timestamp>].
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,
    /// The formats every tool writes, each to the file its flag names (rank 0 writes them).
    #[command(flatten)]
    formats: FormatFiles,
    /// Repeat the schedule until SIGTERM or SIGINT, SECS after each round ends, writing the files of
    /// each round as it ends (the latest matrix replaces the last).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    watch: Option<Duration>,
    /// With --watch: serve the latest round's matrix as Prometheus metrics at
    /// http://ADDR:PORT/metrics (rank 0; e.g. 127.0.0.1:9464, or 0.0.0.0:9464 for a Prometheus
    /// elsewhere).
    #[arg(long = "metrics-listen", value_name = "ADDR:PORT", requires = "watch",
          value_parser = parse_listen)]
    metrics_listen: Option<SocketAddr>,
    /// Flag a pair whose median latency is over X times the lowest.
    #[arg(long = "lat-factor", value_name = "X", default_value = "2.1",
          value_parser = Rules::parse_factor)]
    lat_factor: f64,
    /// Flag a pair whose bandwidth is under P of the highest.
    #[arg(long = "bw-fraction", value_name = "P", default_value = "93%",
          value_parser = Rules::parse_fraction)]
    bw_fraction: f64,
    /// Do not retest flagged pairs alone.
    #[arg(long = "no-retest")]
    no_retest: bool,
    /// How long rank 0 waits for every rank (and a rank for rank 0), in seconds.
    #[arg(long = "join-timeout", value_name = "SECS", default_value = "60", value_parser = parse_secs)]
    join_timeout: Duration,
    /// Longest one pair test may take, in seconds [default: from -n/-D, at least 30].
    #[arg(long = "pair-timeout", value_name = "SECS", value_parser = parse_secs)]
    pair_timeout: Option<Duration>,
    /// The address the other ranks reach this rank at [default: as rank 0 sees it; 127.0.0.(10+rank)
    /// for soft on lo].
    #[arg(long, value_name = "ADDR")]
    advertise: Option<String>,
    /// Where the roce_* binaries are [default: next to roce_fabric].
    #[arg(long = "bin-dir", value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Soft on lo: rank r binds ADDR + r, so that two jobs on one host do not meet.
    #[arg(long = "loopback-base", value_name = "ADDR", default_value = "127.0.0.10",
          value_parser = parse_loopback)]
    loopback_base: Ipv4Addr,
    /// First out-of-band port of the pair tests; a pair uses N + its server's rank.
    #[arg(short = 'p', long = "port", value_name = "N", default_value_t = DEFAULT_BASE_PORT)]
    port: u16,
}

/// The test names, from the test binaries' list: `send_bw write_bw ... atomic_lat`.
fn test_names() -> String {
    TestKind::EVERY.map(|t| t.name()).join(" ")
}

/// `a, b and c`.
fn listed(items: &[String]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => items.join(""),
    }
}

/// roce_fabric's clap command: [`Cli`] with its help completed from the test binaries' definitions
/// (test names, the flags that may differ per rank and those the TCP leg leaves out).
pub(crate) fn command() -> clap::Command {
    let k = known();
    let test_flags = format!(
        "Test flags: every other flag is one of the single-pair binaries' (-d, -s, -n, -D, \
         --transport, --roce, --validate, ...: roce_write_bw --help), passed to them unchanged. {} may \
         differ per rank; the TCP leg of --compare leaves out {} and sets --transport tcp.",
        listed(&k.names(|f| f.per_host)),
        listed(&k.names(|f| f.roce_setup)),
    );
    let cmd = crate::params::argv::short_help_shows(Cli::command(), COMMON);
    cmd.mut_arg("tests", |a: Arg| {
        a.help(format!(
            "The tests: {}, or all (the first six)",
            test_names()
        ))
        .help_heading(None::<&str>)
    })
    .after_help(SHORT_EXAMPLES)
    .after_long_help(format!("{test_flags}\n\n{EXAMPLES}"))
}

fn parse_secs(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err("give a number of seconds above zero".into()),
    }
}

fn parse_listen(v: &str) -> Result<SocketAddr, String> {
    v.parse().map_err(|_| {
        "give an address and a port, ADDR:PORT: 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464".into()
    })
}

fn parse_pattern(v: &str) -> Result<Pattern, String> {
    match v {
        "all" | "all-pairs" => Ok(Pattern::AllPairs),
        "ring" => Ok(Pattern::Ring),
        "bisection" => Ok(Pattern::Bisection),
        "incast" => Ok(Pattern::Incast {
            receiver: 0,
            senders: None,
        }),
        _ => Err(
            "use all (every pair, both directions), ring, bisection or incast, or --pairs FILE"
                .into(),
        ),
    }
}

fn parse_loopback(v: &str) -> Result<Ipv4Addr, String> {
    v.parse()
        .ok()
        .filter(Ipv4Addr::is_loopback)
        .ok_or_else(|| "give an address in 127.0.0.0/8".into())
}

/// Everything roce_fabric was asked to do.
#[derive(Debug, Clone)]
pub(crate) struct FabricOptions {
    /// The tests, in the order given.
    pub tests: Vec<TestKind>,
    /// Test flags passed through to the binaries, as given (no port, host or output flags).
    pub pass: Vec<String>,
    /// `--coordinator HOST[:PORT]`.
    pub coordinator: Option<String>,
    /// `--rank N` (overrides the launcher's).
    pub rank: Option<usize>,
    /// `--world-size N` (needed with `JOB_COMPLETION_INDEX` or `PMIX_RANK` alone).
    pub(crate) world_size: Option<usize>,
    /// Which pairs to test.
    pub pattern: Pattern,
    /// `--serial`: one pair at a time instead of a whole round at once.
    pub serial: bool,
    /// `--victim CLIENT,SERVER` (incast only).
    pub victim: Option<(usize, usize)>,
    /// `--compare`: RoCE v1, RoCE v2 and TCP matrices in one job.
    pub compare: bool,
    /// `--results DIR` (rank 0 writes there).
    pub results: Option<PathBuf>,
    /// The files of the formats every tool writes (rank 0 writes them).
    pub(crate) formats: FormatFiles,
    /// `--watch SECS`: repeat the schedule, this long after each round, until stopped.
    pub(crate) watch: Option<Duration>,
    /// `--metrics-listen ADDR:PORT`: where rank 0 serves the latest round's metrics.
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// Outlier rules.
    pub rules: Rules,
    /// Retest flagged pairs alone (`--no-retest` turns it off).
    pub retest: bool,
    /// How long rank 0 waits for every rank, and a rank for rank 0.
    pub(crate) join_timeout: Duration,
    /// Longest one pair test may take before it is killed; None: from the test flags.
    pub(crate) pair_timeout: Option<Duration>,
    /// `--advertise ADDR`: the address peers reach this rank at.
    pub(crate) advertise: Option<String>,
    /// `--bin-dir DIR`: where the roce_* binaries are (default: next to roce_fabric).
    pub(crate) bin_dir: Option<PathBuf>,
    /// `--loopback-base ADDR`: for soft on lo, rank r binds ADDR + r (default 127.0.0.10).
    pub(crate) loopback_base: Ipv4Addr,
    /// First out-of-band port of the pair tests (`-p`).
    pub(crate) base_port: u16,
}

/// A command line roce_fabric cannot run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UsageError {
    /// What clap found (a bad option value), or `--help` and `--version`, which clap prints.
    #[error("{0}")]
    Clap(clap::Error),
    /// What roce_fabric found past clap.
    #[error("{0}")]
    Usage(String),
}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError::Usage(msg.into())
}

/// Parses a test name: `write_bw`, `roce_write_bw`; `all` is the six.
pub(crate) fn parse_tests(word: &str) -> Option<Vec<TestKind>> {
    if word == "all" {
        return Some(TestKind::ALL.to_vec());
    }
    TestKind::from_name(word.strip_prefix("roce_").unwrap_or(word)).map(|t| vec![t])
}

/// Whether `tok` is one of roce_fabric's own options in `cmd`, and if so, whether its value is the
/// next token (`--rank 3`, not `--rank=3` or `-p18600`).
fn own_option(cmd: &clap::Command, tok: &str) -> Option<bool> {
    let arg = match tok.strip_prefix("--") {
        Some(long) => {
            let name = long.split('=').next().unwrap_or(long);
            cmd.get_arguments().find(|a| {
                a.get_long() == Some(name)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&name))
            })?
        }
        None => {
            let c = tok.chars().nth(1)?;
            cmd.get_arguments().find(|a| a.get_short() == Some(c))?
        }
    };
    let attached = tok.contains('=') || (!tok.starts_with("--") && tok.len() > 2);
    Some(arg.get_action().takes_values() && !attached)
}

/// Splits the command line into what clap parses (roce_fabric's options and the test names) and the
/// test flags passed through (each with its value, as the binaries' definition says).
fn split(cmd: &clap::Command, args: &[String]) -> Result<(Vec<String>, Vec<String>), UsageError> {
    let (mut own, mut pass) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let tok = &args[i];
        let (to, n) = if !tok.starts_with('-') || tok == "-" {
            (&mut own, 1)
        } else if let Some(value_next) = own_option(cmd, tok) {
            (&mut own, if value_next { 2 } else { 1 })
        } else {
            let long = canonical(tok);
            if let Some((_, why)) = REFUSED.iter().find(|(f, _)| *f == long) {
                return Err(usage(format!("{tok} is not a roce_fabric flag: {why}")));
            }
            (&mut pass, if value_follows(args, i) { 2 } else { 1 })
        };
        to.extend(args[i..(i + n).min(args.len())].iter().cloned());
        i += n;
    }
    Ok((own, pass))
}

/// roce_fabric's arguments (without the program name) as the text it passes on; one that is not UTF-8
/// is named by its flag, roce_fabric's own or the test binaries'.
pub(crate) fn text(args: &[std::ffi::OsString]) -> Result<Vec<String>, String> {
    crate::params::argv::utf8(&[&command(), &crate::cli::args::Args::command()], args)
}

/// `--victim 3,0`: the victim pair's client and server ranks.
fn parse_victim(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--victim {text:?}: give CLIENT,SERVER ranks, such as 3,0");
    let (a, b) = text.split_once(',').ok_or_else(bad)?;
    let a: usize = a.trim().parse().map_err(|_| bad())?;
    let b: usize = b.trim().parse().map_err(|_| bad())?;
    if a == b {
        return Err(format!(
            "--victim {text}: the client and the server must be two ranks"
        ));
    }
    Ok((a, b))
}

/// Parses roce_fabric's arguments (without the program name).
pub(crate) fn parse(args: &[String]) -> Result<FabricOptions, UsageError> {
    let mut cmd = crate::report::term::clap_colors(command());
    cmd.build();
    let (own, pass) = split(&cmd, args)?;
    let matches = cmd
        .try_get_matches_from(std::iter::once("roce_fabric".to_owned()).chain(own))
        .map_err(UsageError::Clap)?;
    let cli = Cli::from_arg_matches(&matches).map_err(UsageError::Clap)?;
    let mut tests = Vec::new();
    for word in &cli.tests {
        match parse_tests(word) {
            Some(t) => {
                for t in t {
                    if !tests.contains(&t) {
                        tests.push(t);
                    }
                }
            }
            None => {
                return Err(usage(format!(
                    "unexpected argument {word:?}: give test names ({}, or all) and test flags; \
                     roce_fabric picks every peer itself, so there is no host argument",
                    TestKind::EVERY.map(|t| t.name()).join(", ")
                )));
            }
        }
    }
    let mut pattern = match (&cli.pairs, cli.pattern) {
        (Some(f), _) => Pattern::from_file(f).map_err(usage)?,
        (None, p) => p.unwrap_or(Pattern::AllPairs),
    };
    match &mut pattern {
        Pattern::Incast { receiver, senders } => {
            *receiver = cli.incast_receiver.unwrap_or(0);
            *senders = cli.incast_senders;
            if cli.victim.is_some() && cli.serial {
                return Err(usage(
                    "--victim probes the receiver while every sender sends, and --serial runs them \
                     one at a time: leave out --serial (a victim's idle figure is its pair alone: \
                     --pairs FILE with the line 'CLIENT SERVER')",
                ));
            }
        }
        _ => {
            let flag = match (cli.incast_receiver, cli.incast_senders) {
                (Some(_), _) => Some("--incast-receiver"),
                (None, Some(_)) => Some("--incast-senders"),
                (None, None) => None,
            };
            let flag = flag.or(cli.victim.map(|_| "--victim"));
            if let Some(flag) = flag {
                return Err(usage(format!(
                    "{flag} applies to --pattern incast only; add --pattern incast or leave it out"
                )));
            }
        }
    }
    let o = FabricOptions {
        tests,
        pass,
        coordinator: cli.coordinator,
        rank: cli.rank,
        world_size: cli.world_size,
        pattern,
        serial: cli.serial,
        victim: cli.victim,
        compare: cli.compare,
        results: cli.results,
        formats: cli.formats,
        watch: cli.watch,
        metrics_listen: cli.metrics_listen,
        rules: Rules {
            lat_factor: cli.lat_factor,
            bw_fraction: cli.bw_fraction,
        },
        retest: !cli.no_retest,
        join_timeout: cli.join_timeout,
        pair_timeout: cli.pair_timeout,
        advertise: cli.advertise,
        bin_dir: cli.bin_dir,
        loopback_base: cli.loopback_base,
        base_port: cli.port,
    };
    if o.tests.is_empty() {
        return Err(usage(format!(
            "no test given: name one or more of {} (or all)",
            test_names()
        )));
    }
    if o.compare && flag_value(&o.pass, "--roce").is_some() {
        return Err(usage(
            "--compare runs RoCE v1, v2 and TCP itself: leave out --roce",
        ));
    }
    if o.compare && flag_value(&o.pass, "--transport").as_deref() == Some("tcp") {
        return Err(usage(
            "--compare runs TCP itself: give the RoCE transport (auto, soft or verbs)",
        ));
    }
    if matches!(o.rank, Some(r) if o.world_size.is_some_and(|n| r >= n)) {
        return Err(usage("--rank must be below --world-size"));
    }
    Ok(o)
}

impl FabricOptions {
    /// The legs this run has: the flags as given, or RoCE v1, RoCE v2 and TCP with `--compare`.
    pub(crate) fn legs(&self) -> Vec<Leg> {
        if self.compare {
            vec![Leg::RoceV1, Leg::RoceV2, Leg::Tcp]
        } else {
            vec![Leg::AsGiven]
        }
    }

    /// The test flags of one leg, as this rank passes them to a binary.
    pub(crate) fn leg_args(&self, leg: Leg) -> Vec<String> {
        match leg {
            Leg::AsGiven => self.pass.clone(),
            Leg::RoceV1 | Leg::RoceV2 => {
                let mut a = self.pass.clone();
                let v = if leg == Leg::RoceV1 { "v1" } else { "v2" };
                a.extend(["--roce".to_owned(), v.to_owned()]);
                a
            }
            Leg::Tcp => {
                let mut a = without(&self.pass, not_for_tcp);
                a.extend(["--transport".to_owned(), "tcp".to_owned()]);
                a
            }
        }
    }

    /// The device (`-d`) this rank tests with, if given.
    pub(crate) fn device(&self) -> Option<String> {
        flag_value(&self.pass, "--ib-dev")
    }

    /// Whether this rank runs the soft transport on the loopback interface, where every rank needs an
    /// address of its own (UDP port 4791 is taken once per address).
    pub(crate) fn soft_on_loopback(&self) -> bool {
        let transport = flag_value(&self.pass, "--transport");
        self.device().as_deref() == Some("lo")
            && matches!(transport.as_deref(), None | Some("auto") | Some("soft"))
            && flag_value(&self.pass, "--bind").is_none()
    }

    /// The parameters every rank must share, by name, for the check at the rendezvous.
    pub(crate) fn shared_params(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert(
            "tests".into(),
            self.tests
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(","),
        );
        m.insert("--pattern".into(), self.pattern.describe());
        m.insert("--serial".into(), self.serial.to_string());
        m.insert("--compare".into(), self.compare.to_string());
        m.insert("--lat-factor".into(), self.rules.lat_factor.to_string());
        m.insert("--bw-fraction".into(), self.rules.bw_fraction.to_string());
        m.insert("--no-retest".into(), (!self.retest).to_string());
        m.insert(
            "--pair-timeout".into(),
            self.pair_timeout
                .map_or("default".into(), |d| format!("{}s", d.as_secs_f64())),
        );
        m.insert("--port".into(), self.base_port.to_string());
        for (k, v) in grouped(&self.pass) {
            if !per_host(&k) {
                m.insert(k, v.join(" "));
            }
        }
        m
    }

    /// How long one side of one pair test may run: `--pair-timeout`, or generous for the test flags.
    pub(crate) fn pair_timeout_for(&self, test: TestKind) -> Duration {
        if let Some(t) = self.pair_timeout {
            return t;
        }
        let g = grouped(&self.pass);
        let sizes = if g.contains_key("--all") { 23.0 } else { 1.0 };
        let per_size = match g
            .get("--duration")
            .and_then(|v| v.last()?.parse::<f64>().ok())
        {
            Some(d) => d + 5.0,
            None => {
                let iters = g
                    .get("--iters")
                    .and_then(|v| v.last()?.parse::<f64>().ok())
                    .unwrap_or(test.default_iters() as f64);
                // Up to 8 MiB messages at 20 MB/s, a loaded machine's soft transport at its slowest.
                let size = if g.contains_key("--all") {
                    8.0 * 1048576.0
                } else {
                    65536.0
                };
                2.0 + iters * size / 20e6
            }
        };
        Duration::from_secs_f64((30.0 + sizes * per_size).min(3600.0))
    }
}

#[cfg(test)]
mod tests;
