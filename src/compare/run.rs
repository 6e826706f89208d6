//! The live comparison loop: each test over each transport leg, one server and one client per run.
//!
//! Each run is bounded by a timeout, and the client's result JSON becomes a run of the [`CompareSet`].
//! Where the server runs is behind [`ServerSide`]: a child process on this machine ([`LocalServer`], for
//! `--local`) or a `roce_compare --server` on another host (`compare::remote`). A leg that cannot run
//! or fails becomes a [`Skipped`] note with the reason and the tail of the failing side's stderr, never
//! a silent gap in the table.

use super::error::{Error, Result};
use super::files::run_of;
use super::leg::{LegSpec, TestSpec, binary_name, side_args};
use super::proc::{Proc, exit_text, free_port, interrupted};
use crate::report::progress::SweepProgress;
use crate::results::read::{self, ReadError};
use crate::results::{CompareRun, CompareSet, Skipped};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a side gets to exit by itself after its peer is done or gone, before it is killed.
const GRACE: Duration = Duration::from_secs(10);
/// How often a running client's progress is looked at.
const TICK: Duration = Duration::from_millis(250);

/// One transport as this comparison runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leg {
    /// Transport, RoCE version and device, the same on both sides.
    pub(crate) spec: LegSpec,
    /// How the leg is named in notes before its run says which transport it got.
    pub label: String,
    /// Network namespace the server runs in (RoCE v1 across a veth pair).
    pub(crate) server_netns: Option<String>,
    /// Network namespace the client runs in.
    pub(crate) client_netns: Option<String>,
    /// The address the client connects to.
    pub host: String,
    /// The link the traffic crosses, recorded in the run (`lo`, `veth (netns ..., MTU 9000)`); None
    /// when this side cannot know it.
    pub link: Option<String>,
}

impl Leg {
    /// The TCP baseline leg, in this network namespace, the client connecting to `host`.
    pub fn tcp(host: &str) -> Leg {
        Leg {
            spec: LegSpec::tcp(),
            label: "TCP".into(),
            server_netns: None,
            client_netns: None,
            host: host.into(),
            link: None,
        }
    }
}

/// The legs to run, and those that cannot run here (with why).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Tests, each run over every leg.
    pub tests: Vec<TestSpec>,
    /// Transports that can be tried.
    pub legs: Vec<Leg>,
    /// Transports skipped before anything ran.
    pub skipped: Vec<Skipped>,
    /// How many times each test runs over each leg (`--repeat`; 0 counts as 1).
    pub repeat: usize,
}

/// Where the server side of a run lives.
pub(crate) trait ServerSide {
    /// Starts the `roce_<test>` server of `leg`; returns the out-of-band port the client must use.
    fn start(&mut self, test: &TestSpec, leg: &Leg) -> Result<u16>;
    /// Waits until `deadline` for the server to exit (kills it at once when `kill`); Err says how it
    /// failed, with its stderr tail.
    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()>;
}

/// The server of a run as a child process on this machine (or in one of its network namespaces).
pub(crate) struct LocalServer {
    /// Where the `roce_<test>` binaries are.
    pub(crate) bin_dir: PathBuf,
    /// Where logs and result files go.
    pub work: PathBuf,
    /// Core of the server's datapath.
    pub cpu: Option<usize>,
    running: Option<Proc>,
    runs: usize,
}

impl LocalServer {
    /// A server side that starts binaries from `bin_dir` with logs in `work`.
    pub fn new(bin_dir: PathBuf, work: PathBuf, cpu: Option<usize>) -> LocalServer {
        LocalServer {
            bin_dir,
            work,
            cpu,
            running: None,
            runs: 0,
        }
    }
}

impl ServerSide for LocalServer {
    fn start(&mut self, test: &TestSpec, leg: &Leg) -> Result<u16> {
        self.runs += 1;
        let port = free_port()?;
        let name = format!("{}-server-{}", test.test, self.runs);
        let json = self.work.join(format!("{name}.json"));
        let args = side_args(test, &leg.spec, port, self.cpu, &json, None);
        let bin = self.bin_dir.join(binary_name(test.test));
        self.running = Some(Proc::spawn(
            &bin,
            &args,
            leg.server_netns.as_deref(),
            &self.work,
            &name,
            "server",
        )?);
        Ok(port)
    }

    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()> {
        let Some(mut p) = self.running.take() else {
            return Ok(());
        };
        if kill {
            p.kill();
            return Ok(());
        }
        p.finish(deadline)
    }
}

/// How the client side runs.
#[derive(Debug, Clone)]
pub(crate) struct ClientSide {
    /// Where the `roce_<test>` binaries are.
    pub(crate) bin_dir: PathBuf,
    /// Where logs and result files go.
    pub work: PathBuf,
    /// Core of the client's datapath.
    pub cpu: Option<usize>,
    /// Per-run timeout; None: [`TestSpec::timeout`].
    pub timeout: Option<Duration>,
}

/// Runs every test over every leg of `plan` in turn, `plan.repeat` times (each repetition runs every
/// leg once, so that a slow spell of the machine falls on every transport alike); progress goes to
/// `progress` (one step per run).
pub(crate) fn run_plan(
    plan: &Plan,
    server: &mut dyn ServerSide,
    client: &ClientSide,
    progress: &SweepProgress,
) -> CompareSet {
    let mut set = CompareSet {
        started_at: crate::results::now_rfc3339(),
        version: env!("CARGO_PKG_VERSION").into(),
        runs: Vec::new(),
        skipped: plan.skipped.clone(),
    };
    let repeat = plan.repeat.max(1);
    let mut n = 0usize;
    for test in &plan.tests {
        let mut outcomes: Vec<Vec<std::result::Result<CompareRun, Skipped>>> =
            vec![Vec::new(); plan.legs.len()];
        for rep in 1..=repeat {
            for (leg, out) in plan.legs.iter().zip(&mut outcomes) {
                n += 1;
                let label = format!("{}, {}", leg.label, test.test);
                if interrupted() {
                    out.push(Err(Skipped {
                        label,
                        reason: "not run: interrupted".into(),
                        failed: false,
                    }));
                    continue;
                }
                let mut what = format!("{} over {}", test.test, leg.label);
                if repeat > 1 {
                    what.push_str(&format!(" ({rep}/{repeat})"));
                }
                progress.start_step(what.clone());
                let sizes = test.size_list().len();
                // A sweep's bar also counts the sizes its client has printed, so a long run shows
                // progress.
                let mut on_tick = |p: &Proc| {
                    if sizes > 1 && !progress.is_hidden() {
                        progress.start_step(format!("{what}: {}/{sizes} sizes", p.sizes_done()));
                    }
                };
                out.push(match run_one(test, leg, server, client, n, &mut on_tick) {
                    Ok(run) => Ok(run),
                    Err(_) if interrupted() => Err(Skipped {
                        label,
                        reason: "interrupted while running; server and client were killed".into(),
                        failed: true,
                    }),
                    Err(reason) => Err(Skipped {
                        label,
                        reason,
                        failed: true,
                    }),
                });
                progress.finish_size();
            }
        }
        for out in outcomes {
            collect(&mut set, out, repeat);
        }
    }
    progress.finish();
    let tests: Vec<_> = plan.tests.iter().map(|t| t.test).collect();
    set.sort_runs(&tests);
    set
}

/// Adds one leg's outcomes of one test to `set`: its run (the repetitions merged when `repeat` > 1)
/// and a note per repetition that failed or did not run (said once when none ran).
fn collect(
    set: &mut CompareSet,
    outcomes: Vec<std::result::Result<CompareRun, Skipped>>,
    repeat: usize,
) {
    if repeat == 1 {
        for o in outcomes {
            match o {
                Ok(run) => set.runs.push(run),
                Err(s) => set.skipped.push(s),
            }
        }
        return;
    }
    let mut runs = Vec::new();
    let mut not_run: Option<Skipped> = None;
    for (i, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok(run) => runs.push(run),
            Err(s) if !s.failed => {
                not_run.get_or_insert(Skipped {
                    reason: format!("{} (repetitions {} to {repeat})", s.reason, i + 1),
                    ..s
                });
            }
            Err(s) => set.skipped.push(Skipped {
                reason: format!("repetition {} of {repeat}: {}", i + 1, s.reason),
                ..s
            }),
        }
    }
    set.skipped.extend(not_run);
    set.runs.extend(CompareRun::from_repetitions(runs));
}

/// One run: server, client, the client's results. Err is the note the table shows (the failures of
/// both sides, composed).
fn run_one(
    test: &TestSpec,
    leg: &Leg,
    server: &mut dyn ServerSide,
    client: &ClientSide,
    n: usize,
    on_tick: &mut dyn FnMut(&Proc),
) -> std::result::Result<CompareRun, String> {
    let timeout = client.timeout.unwrap_or_else(|| test.timeout());
    let port = server.start(test, leg).map_err(|e| e.to_string())?;
    let name = format!("{}-client-{n}", test.test);
    let json = client.work.join(format!("{name}.json"));
    let args = side_args(test, &leg.spec, port, client.cpu, &json, Some(&leg.host));
    let bin = client.bin_dir.join(binary_name(test.test));
    let deadline = Instant::now() + timeout;
    let mut proc = match Proc::spawn(
        &bin,
        &args,
        leg.client_netns.as_deref(),
        &client.work,
        &name,
        "client",
    ) {
        Ok(p) => p,
        Err(e) => {
            let _ = server.finish(true, Instant::now());
            return Err(e.to_string());
        }
    };
    let exit = loop {
        let step = deadline.min(Instant::now() + TICK);
        match proc.wait_until(step) {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline || interrupted() => break None,
            None => on_tick(&proc),
        }
    };
    match exit {
        None => {
            proc.kill();
            let server_err = server.finish(true, Instant::now()).err();
            Err(format!(
                "timed out after {} s (--timeout) and was killed; client{}{}",
                timeout.as_secs(),
                proc.tail(),
                server_err.map(|s| format!("; {s}")).unwrap_or_default()
            ))
        }
        Some(status) if !status.success() => {
            // The server usually stops by itself once its client gave up; its reason may be the real one.
            let server_err = server.finish(false, Instant::now() + GRACE).err();
            let tail = proc.tail();
            // Both sides usually print the same verdict (the server quotes the client's); say it once.
            let verdict = tail.rsplit(" / ").next().unwrap_or_default();
            let verdict = verdict
                .trim_start_matches(": ")
                .trim_start_matches("error: ");
            let server_part = server_err
                .map(|e| e.to_string())
                .filter(|s| verdict.is_empty() || !s.contains(verdict))
                .map(|s| format!("; {s}"))
                .unwrap_or_default();
            Err(format!("client {}{tail}{server_part}", exit_text(status)))
        }
        Some(_) => {
            let server_err = server.finish(false, Instant::now() + GRACE).err();
            let mut run = load_client_json(&json).map_err(|e| e.to_string())?;
            if let Some(e) = server_err {
                run.notes.push(e.to_string());
            }
            run.link = leg.link.clone();
            Ok(run)
        }
    }
}

/// The run a client wrote with `--json`. The client's file is enough in every test: a client always
/// posts, so it always measures, and where the server measures too (send_bw's receiver) the client's
/// sending rate is the figure perftest's client reports.
fn load_client_json(path: &Path) -> Result<CompareRun> {
    let bad = |detail: String| Error::Results {
        path: path.to_owned(),
        detail,
    };
    let doc = match read::read_json(path) {
        Ok(doc) => Ok(doc),
        Err(ReadError::Schema { problem, .. }) => Err(problem),
        Err(ReadError::Read { source, .. }) => return Err(bad(source.to_string())),
        Err(ReadError::Json { source, .. }) => {
            return Err(bad(format!("not valid JSON: {source}")));
        }
        Err(e @ ReadError::Csv { .. }) => return Err(bad(e.to_string())),
    };
    run_of(doc).map(|(run, _)| run).map_err(bad)
}
