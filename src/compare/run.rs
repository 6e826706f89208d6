//! The live comparison loop: each test over each transport leg, one server and one client per run.
//!
//! Each run is bounded by a timeout, and the client's result JSON becomes a run of the [`CompareSet`].
//! Where the server runs is behind [`ServerSide`]: a child process on this machine ([`LocalServer`], for
//! `--local`) or a `roce_compare --server` on another host (`compare::remote`). A leg that cannot run
//! or fails becomes a [`Skipped`] note with the reason and the tail of the failing side's stderr, never
//! a silent gap in the table. With [`Plan::floors`], each run is followed by its floor (`super::floor`):
//! `roce_ref` over the run's host path, through the same server side and client.

use super::error::{Error, Result};
use super::files::run_of;
use super::floor::{self, FloorJob, FloorPlan};
use super::leg::{self, LegSpec, Sides, TestSpec, TransportChoice};
use crate::orchestrate::child::{Child, Ended, exit_text};
use crate::orchestrate::control::{Job, Side};
use crate::orchestrate::signals::stop_requested as interrupted;
use crate::orchestrate::worker::{self, Jobs, Running};
use crate::report::progress::SweepProgress;
use crate::results::read::{self, ReadError};
use crate::results::{CompareRun, CompareSet, Floor, HostPath, Skipped, path_label};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a side gets to exit by itself after its peer is done or gone, before it is killed.
pub(crate) const GRACE: Duration = Duration::from_secs(10);
/// How often a running client's progress is looked at.
const TICK: Duration = Duration::from_millis(250);

/// One transport as this comparison runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leg {
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
    /// The way the packets go through the host; None: the transport's default, known once the run
    /// says which transport it got (`--transport auto`).
    pub(crate) path: Option<HostPath>,
}

impl Leg {
    /// The TCP baseline leg, in this network namespace, the client connecting to `host`.
    pub(crate) fn tcp(host: &str) -> Leg {
        Leg {
            spec: LegSpec::tcp(),
            label: "TCP".into(),
            server_netns: None,
            client_netns: None,
            host: host.into(),
            link: None,
            path: Some(HostPath::TcpSocket),
        }
    }

    /// Names `run` (which this leg made) by the path it took: the leg's own label, or for a leg that
    /// let the binary pick its transport, the transport it got with its default path.
    fn name_run(&self, run: &mut CompareRun) {
        let path = self
            .path
            .unwrap_or_else(|| HostPath::default_for(run.transport, run.roce));
        run.path = Some(path);
        run.label = match self.spec.transport {
            TransportChoice::Auto => path_label(run.transport, run.roce, path),
            _ => self.label.clone(),
        };
    }
}

/// The legs to run, and those that cannot run here (with why).
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Tests, each run over every leg.
    pub tests: Vec<TestSpec>,
    /// Transports that can be tried.
    pub legs: Vec<Leg>,
    /// Transports skipped before anything ran.
    pub skipped: Vec<Skipped>,
    /// How many times each test runs over each leg (`--repeat`; 0 counts as 1).
    pub repeat: usize,
    /// Follow each run with its floor (`roce_ref` over its path); a loss sweep does not.
    pub floors: bool,
}

/// Where the server side of a run lives.
pub(crate) trait ServerSide {
    /// Starts the `roce_<test>` server of `leg` (with `floor`, the `roce_ref` server of that floor);
    /// returns the port the client must use.
    fn start(&mut self, test: &TestSpec, leg: &Leg, floor: Option<&FloorJob>) -> Result<u16>;
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
    running: Option<(Job<leg::CompareRun>, Sides, Running)>,
    runs: usize,
}

impl LocalServer {
    /// A server side that starts binaries from `bin_dir` with logs in `work`.
    pub(crate) fn new(bin_dir: PathBuf, work: PathBuf, cpu: Option<usize>) -> LocalServer {
        LocalServer {
            bin_dir,
            work,
            cpu,
            running: None,
            runs: 0,
        }
    }
}

/// One side of run `n` of `test` over `leg` (or of its `floor`), as a job: the server picks its port,
/// the client is told it.
fn side_job(
    n: usize,
    test: &TestSpec,
    leg: &Leg,
    floor: Option<&FloorJob>,
    side: Side,
    port: Option<u16>,
) -> Job<leg::CompareRun> {
    Job {
        id: n as u64,
        run: leg::CompareRun {
            test: test.clone(),
            leg: leg.spec.clone(),
            floor: floor.copied(),
        },
        side,
        port,
        peer: 0,
        server_addr: (side == Side::Client).then(|| leg.host.clone()),
        impair: None,
        timeout_ms: 0,
    }
}

impl LocalServer {
    /// The name of its current run's server (or floor) side: its logs and result file.
    fn name(&self, test: &TestSpec, floor: bool) -> String {
        let what = if floor { "floor" } else { "server" };
        format!("{}-{what}-{}", test.test, self.runs)
    }

    /// The result JSON its last server of `test` wrote.
    pub(crate) fn server_json(&self, test: &TestSpec) -> PathBuf {
        self.work.join(format!("{}.json", self.name(test, false)))
    }
}

impl ServerSide for LocalServer {
    fn start(&mut self, test: &TestSpec, leg: &Leg, floor: Option<&FloorJob>) -> Result<u16> {
        self.runs += 1;
        let job = side_job(self.runs, test, leg, floor, Side::Server, None);
        let sides = Sides {
            bin_dir: self.bin_dir.clone(),
            cpu: self.cpu,
            netns: leg.server_netns.clone(),
            from_peer: false,
            device: None,
        };
        let name = self.name(test, floor.is_some());
        let running = worker::start(&sides, &job, &self.work, &name)
            .map_err(|o| Error::Side(o.error.unwrap_or_default()))?;
        let port = running.port;
        self.running = Some((job, sides, running));
        Ok(port)
    }

    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()> {
        let Some((job, sides, mut running)) = self.running.take() else {
            return Ok(());
        };
        if kill {
            running.kill();
            return Ok(());
        }
        match worker::finish(&sides, &job, &mut running, deadline, || false).error {
            None => Ok(()),
            Some(e) => Err(Error::Side(e)),
        }
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
    /// What chose that core, as the runs' notes say it (the binary would say `--cpu`, which the
    /// user did not give it); None: leave the binary's note.
    pub cpu_note: Option<String>,
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
        provenance: Some(crate::results::Provenance::of_this_process(None)),
        runs: Vec::new(),
        skipped: plan.skipped.clone(),
        ..CompareSet::default()
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
                let mut on_tick = |done: usize| {
                    if sizes > 1 && !progress.is_hidden() {
                        progress.start_step(format!("{what}: {done}/{sizes} sizes"));
                    }
                };
                out.push(match run_one(test, leg, server, client, n, &mut on_tick) {
                    Ok((mut run, mtu)) => {
                        if plan.floors {
                            progress.start_step(format!("{what}: its floor"));
                            run.floors = floors(test, leg, &run, mtu, server, client, n);
                        }
                        Ok(run)
                    }
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

/// One run: server, client, the client's results, named by the path it took. Err is the note the
/// table shows (the failures of both sides, composed). `on_tick` is told, now and then, how many
/// sizes the client has finished.
fn run_one(
    test: &TestSpec,
    leg: &Leg,
    server: &mut dyn ServerSide,
    client: &ClientSide,
    n: usize,
    on_tick: &mut dyn FnMut(usize),
) -> std::result::Result<(CompareRun, u32), String> {
    let name = format!("{}-client-{n}", test.test);
    let (json, _) = run_sides(test, leg, None, server, client, (n, &name), on_tick)?;
    let (mut run, info) = load_client_json(&json.path).map_err(|e| e.to_string())?;
    run.notes.extend(json.server_note);
    for note in &mut run.notes {
        // The binary says "datapath on core N chosen with --cpu" (the --cpu roce_compare gave it), or
        // "... by default ...; choose another with --cpu": roce_compare's flag is --client-cpu.
        if note.starts_with("datapath on ") {
            *note = match &client.cpu_note {
                Some(why) => format!("datapath on {why}"),
                None => note.replace("with --cpu", "with roce_compare's --client-cpu"),
            };
        }
    }
    run.link = leg.link.clone();
    leg.name_run(&mut run);
    // TCP has no RoCE MTU (its floor is a TCP stream's, not segmented by one).
    Ok((run, info.mtu.unwrap_or(0)))
}

/// What a client left: its result file, and the note of a server that failed after it succeeded.
pub(crate) struct ClientDone {
    /// The client's result JSON.
    pub(crate) path: std::path::PathBuf,
    /// What the server said when it failed after its client succeeded.
    pub(crate) server_note: Option<String>,
}

/// Runs the server and the client of `test` over `leg` (or of its `floor`); `name` is the client's
/// (its logs and result file). Ok: the client's result file and its stdout log. A congestion study
/// runs two of these at once (the bulk flows and the victim), each with its own server side.
pub(crate) fn run_sides(
    test: &TestSpec,
    leg: &Leg,
    floor: Option<&FloorJob>,
    server: &mut dyn ServerSide,
    client: &ClientSide,
    (n, name): (usize, &str),
    on_tick: &mut dyn FnMut(usize),
) -> std::result::Result<(ClientDone, std::path::PathBuf), String> {
    let timeout = match floor {
        Some(_) => FLOOR_TIMEOUT,
        None => client.timeout.unwrap_or_else(|| test.timeout()),
    };
    let port = server.start(test, leg, floor).map_err(|e| e.to_string())?;
    let json = client.work.join(format!("{name}.json"));
    let sides = Sides {
        bin_dir: client.bin_dir.clone(),
        cpu: client.cpu,
        netns: leg.client_netns.clone(),
        from_peer: false,
        device: None,
    };
    let job = side_job(n, test, leg, floor, Side::Client, Some(port));
    let deadline = Instant::now() + timeout;
    let spawned = sides
        .command(&job, port, &json)
        .map_err(Error::Side)
        .and_then(|launch| Child::spawn(&launch, &client.work, name).map_err(Error::from));
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = server.finish(true, Instant::now());
            return Err(e.to_string());
        }
    };
    let stdout = child.stdout_log().to_owned();
    let mut last_tick = Instant::now();
    let ended = child.wait(deadline, || {
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            let text = std::fs::read_to_string(&stdout).unwrap_or_default();
            on_tick(count_result_rows(&text));
        }
        false
    });
    let tail = child.tail().map(|t| format!(": {t}")).unwrap_or_default();
    match ended {
        Ended::Killed(_) | Ended::Lost(_) => {
            let server_err = server.finish(true, Instant::now()).err();
            let flag = if floor.is_some() { "" } else { " (--timeout)" };
            Err(format!(
                "timed out after {} s{flag} and was killed; client{tail}{}",
                timeout.as_secs(),
                server_err.map(|s| format!("; {s}")).unwrap_or_default()
            ))
        }
        Ended::Exited(status) if !status.success() => {
            // The server usually stops by itself once its client gave up; its reason may be the real one.
            let server_err = server.finish(false, Instant::now() + GRACE).err();
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
        Ended::Exited(_) => {
            let server_note = server
                .finish(false, Instant::now() + GRACE)
                .err()
                .map(|e| e.to_string());
            let done = ClientDone {
                path: json,
                server_note,
            };
            Ok((done, stdout))
        }
    }
}

/// How long a floor (a ping-pong of 20,000 round trips, or a stream of a few seconds) may take.
const FLOOR_TIMEOUT: Duration = Duration::from_secs(60);

/// The floors of `run` (which `leg` made over `test`, at RoCE MTU `mtu`): per size, `roce_ref` over
/// its path, each distinct reference run once, or a note saying why there is none.
fn floors(
    test: &TestSpec,
    leg: &Leg,
    run: &CompareRun,
    mtu: u32,
    server: &mut dyn ServerSide,
    client: &ClientSide,
    n: usize,
) -> Vec<Floor> {
    let path = run
        .path
        .unwrap_or_else(|| HostPath::default_for(run.transport, run.roce));
    let device = leg.spec.device.as_deref();
    // Each reference's outcome (client stdout, or why it failed), by job.
    let mut measured: Vec<(FloorJob, std::result::Result<String, String>)> = Vec::new();
    let mut out = Vec::new();
    for result in &run.results {
        let size = result.size;
        let figures = result.figures();
        let figure = match (figures.latency(), figures.bandwidth()) {
            (Some(l), _) => l.median_us,
            (_, Some(b)) => b.gbps,
            _ => continue,
        };
        let plan: FloorPlan = match floor::plan(
            path,
            (run.transport, run.roce),
            run.test,
            size,
            mtu,
            test.duration,
        ) {
            Ok(p) => p,
            Err(why) => {
                out.push(Floor::missing(size, why));
                continue;
            }
        };
        let reference = plan.job.describe(device);
        let printed = match measured.iter().find(|(j, _)| *j == plan.job) {
            Some((_, printed)) => printed.clone(),
            None => {
                let name = format!("{}-floor-{n}-{}", test.test, measured.len());
                let printed = run_sides(
                    test,
                    leg,
                    Some(&plan.job),
                    server,
                    client,
                    (n, &name),
                    &mut |_| {},
                )
                .map(|(_, stdout)| std::fs::read_to_string(stdout).unwrap_or_default());
                measured.push((plan.job, printed.clone()));
                printed
            }
        };
        out.push(match printed {
            Ok(text) => floor::floor_of(&plan, reference, size, &text, figure),
            Err(why) => Floor::missing(size, format!("{reference} failed: {why}")),
        });
    }
    out
}

/// Message sizes a run has finished so far: the result rows of its perftest-style table (rows start
/// with the size and the iteration count).
fn count_result_rows(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            let is_num = |w: Option<&str>| w.is_some_and(|w| w.parse::<u64>().is_ok());
            is_num(words.next()) && is_num(words.next())
        })
        .count()
}

/// The run a client wrote with `--json`. The client's file is enough in every test: a client always
/// posts, so it always measures, and where the server measures too (send_bw's receiver) the client's
/// sending rate is the figure perftest's client reports.
fn load_client_json(path: &Path) -> Result<(CompareRun, Box<crate::results::RunInfo>)> {
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
        Err(
            e
            @ (ReadError::Csv { .. } | ReadError::NotAResult { .. } | ReadError::Unbounded { .. }),
        ) => return Err(bad(e.to_string())),
    };
    run_of(doc).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::leg::sample_test as spec;

    #[test]
    fn result_rows_are_counted_and_headers_are_not() {
        let out = " #bytes #iterations    BW peak[Gb/sec]\n 2       1000  0.10\n 4       1000  0.2\n\
                   ---------------\n Size 4[B] : latency 1 2\n";
        assert_eq!(count_result_rows(out), 2);
    }

    #[test]
    fn a_server_that_fails_or_cannot_start_is_named_with_its_stderr_tail() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let mut server = LocalServer::new(bin.clone(), dir.path().to_owned(), None);
        let err = server
            .start(&spec(), &Leg::tcp("127.0.0.1"), None)
            .unwrap_err();
        assert!(
            err.to_string().starts_with("cannot start ")
                && err.to_string().contains("cargo build --release --bins"),
            "{err}"
        );
        let path = bin.join("roce_write_lat");
        let failing = "#!/bin/sh\necho 'error: -d nosuch0 is not an interface' >&2\nexit 2\n";
        for (script, wait, says) in [
            (
                failing,
                Duration::from_secs(10),
                "server roce_write_lat exited with status 2: error: -d nosuch0 is not an interface",
            ),
            (
                "#!/bin/sh\nsleep 30\n",
                Duration::from_millis(100),
                "server roce_write_lat did not finish and was killed",
            ),
        ] {
            std::fs::write(&path, script).unwrap();
            let exec =
                <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
            std::fs::set_permissions(&path, exec).unwrap();
            server.start(&spec(), &Leg::tcp("127.0.0.1"), None).unwrap();
            let err = server.finish(false, Instant::now() + wait).unwrap_err();
            assert_eq!(err.to_string(), says);
        }
    }
}
