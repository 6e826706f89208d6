//! Runs a comparison live: for each test and each transport leg in turn, a `roce_<test>` server and
//! client, bounded by a timeout, then their result JSON into a [`CompareSet`].
//!
//! Where the server runs is behind [`ServerSide`]: a child process on this machine ([`LocalServer`], for
//! `--local`) or a `roce_compare --server` on another host (`compare::remote`). A leg that cannot run
//! or fails becomes a [`Skipped`] note with the reason and the tail of the failing side's stderr, never
//! a silent gap in the table.

use super::error::{Error, Result};
use super::leg::{LegSpec, TestSpec, binary_name, side_args};
use super::{CompareRun, CompareSet, Skipped};
use crate::report::progress::SweepProgress;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a side gets to exit by itself after its peer is done or gone, before it is killed.
const GRACE: Duration = Duration::from_secs(10);
/// How often a running client's progress is looked at.
const TICK: Duration = Duration::from_millis(250);
/// Lines of stderr quoted in a failure note.
const TAIL_LINES: usize = 3;

/// One transport as this comparison runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leg {
    /// Transport, RoCE version and device, the same on both sides.
    pub spec: LegSpec,
    /// How the leg is named in notes before its run says which transport it got.
    pub label: String,
    /// Network namespace the server runs in (RoCE v1 across a veth pair).
    pub server_netns: Option<String>,
    /// Network namespace the client runs in.
    pub client_netns: Option<String>,
    /// The address the client connects to.
    pub host: String,
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
}

/// Where the server side of a run lives.
pub trait ServerSide {
    /// Starts the `roce_<test>` server of `leg`; returns the out-of-band port the client must use.
    fn start(&mut self, test: &TestSpec, leg: &Leg) -> Result<u16>;
    /// Waits until `deadline` for the server to exit (kills it at once when `kill`); Err says how it
    /// failed, with its stderr tail.
    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()>;
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT (Ctrl-C) and SIGTERM stop the comparison instead of the process: the running server
/// and client are killed, the runs left are noted, and the caller still reports what ran and removes
/// what it set up (network namespaces).
pub fn catch_interrupts() {
    let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, handler);
        }
    }
}

/// Whether SIGINT or SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A started binary whose stdout and stderr go to files (so a chatty child never blocks on a pipe).
pub struct Proc {
    child: Child,
    what: String,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Proc {
    /// Starts `program args` (inside `netns` when given), logging to `<dir>/<name>.out|.err`.
    pub fn spawn(
        program: &Path,
        args: &[String],
        netns: Option<&str>,
        dir: &Path,
        name: &str,
        role: &str,
    ) -> Result<Proc> {
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let file = |path: &Path| {
            File::create(path).map_err(|source| Error::Log {
                path: path.to_owned(),
                source,
            })
        };
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        };
        let child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(file(&stdout)?)
            .stderr(file(&stderr)?)
            .spawn()
            .map_err(|source| {
                if netns.is_some() && source.kind() == std::io::ErrorKind::NotFound {
                    Error::IpMissing
                } else {
                    Error::Spawn {
                        program: program.to_owned(),
                        source,
                    }
                }
            })?;
        let base = program.file_name().map_or_else(
            || program.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let what = if role.is_empty() {
            base
        } else {
            format!("{role} {base}")
        };
        Ok(Proc {
            child,
            what,
            stdout,
            stderr,
        })
    }

    /// Waits until `deadline`; None if it is still running then.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() >= deadline || interrupted() => return None,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                // The child is ours; try_wait only fails if it was reaped elsewhere.
                Err(_) => return None,
            }
        }
    }

    /// Kills the process and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until `deadline`, kills the process if it is still running; Err names what went wrong.
    pub fn finish(&mut self, deadline: Instant) -> Result<()> {
        match self.wait_until(deadline) {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(Error::Exited {
                what: self.what.clone(),
                status: exit_text(s),
                tail: self.tail(),
            }),
            None => {
                self.kill();
                Err(Error::Killed {
                    what: self.what.clone(),
                    tail: self.tail(),
                })
            }
        }
    }

    /// `: <what went wrong>`: the `error:` lines of stderr when there are some (a retry notice before
    /// them says nothing), else its last lines, else those of stdout; empty when both are empty.
    pub fn tail(&self) -> String {
        for path in [&self.stderr, &self.stdout] {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if let Some(t) = tail_of(&text) {
                return format!(": {t}");
            }
        }
        String::new()
    }
}

impl Proc {
    /// Message sizes this run has finished so far: the result rows of its perftest-style table
    /// (rows start with the size and the iteration count).
    pub fn sizes_done(&self) -> usize {
        let text = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        count_result_rows(&text)
    }
}

fn count_result_rows(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            let is_num = |w: Option<&str>| w.is_some_and(|w| w.parse::<u64>().is_ok());
            is_num(words.next()) && is_num(words.next())
        })
        .count()
}

/// The lines of a log that say what went wrong, joined with ` / `.
fn tail_of(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        // perftest's banner and clap's "try --help" say nothing about what went wrong.
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with("For more information"))
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("error"))
        .collect();
    let pick = if errors.is_empty() { lines } else { errors };
    let from = pick
        .len()
        .checked_sub(1)
        .map(|last| last.saturating_sub(TAIL_LINES - 1))?;
    Some(pick[from..].join(" / "))
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// `exited with status 2`, or `was killed by signal 9`.
pub fn exit_text(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// A TCP port nobody listens on right now on this host.
pub fn free_port() -> Result<u16> {
    TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| Error::Io {
            action: "cannot find a free TCP port",
            source,
        })
}

/// The directory of the running binary, where the six test binaries sit too.
pub fn exe_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        action: "cannot find where roce_compare runs from",
        source,
    })?;
    Ok(exe
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf))
}

/// The server of a run as a child process on this machine (or in one of its network namespaces).
pub struct LocalServer {
    /// Where the `roce_<test>` binaries are.
    pub bin_dir: PathBuf,
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
pub struct ClientSide {
    /// Where the `roce_<test>` binaries are.
    pub bin_dir: PathBuf,
    /// Where logs and result files go.
    pub work: PathBuf,
    /// Core of the client's datapath.
    pub cpu: Option<usize>,
    /// Per-run timeout; None: [`TestSpec::timeout`].
    pub timeout: Option<Duration>,
}

/// Runs every test over every leg of `plan` in turn; progress goes to `progress` (one step per run).
pub fn run_plan(
    plan: &Plan,
    server: &mut dyn ServerSide,
    client: &ClientSide,
    progress: &SweepProgress,
) -> CompareSet {
    let mut set = CompareSet {
        started_at: crate::report::now_rfc3339(),
        version: env!("CARGO_PKG_VERSION").into(),
        runs: Vec::new(),
        skipped: plan.skipped.clone(),
    };
    let mut n = 0usize;
    for test in &plan.tests {
        for leg in &plan.legs {
            n += 1;
            if interrupted() {
                set.skipped.push(Skipped {
                    label: format!("{}, {}", leg.label, test.test),
                    reason: "not run: interrupted".into(),
                    failed: false,
                });
                continue;
            }
            let what = format!("{} over {}", test.test, leg.label);
            progress.start_step(what.clone());
            let sizes = test.size_list().len();
            // A sweep's bar also counts the sizes its client has printed, so a long run shows progress.
            let mut on_tick = |p: &Proc| {
                if sizes > 1 && !progress.is_hidden() {
                    progress.start_step(format!("{what}: {}/{sizes} sizes", p.sizes_done()));
                }
            };
            match run_one(test, leg, server, client, n, &mut on_tick) {
                Ok(run) => set.runs.push(run),
                Err(_) if interrupted() => set.skipped.push(Skipped {
                    label: format!("{}, {}", leg.label, test.test),
                    reason: "interrupted while running; server and client were killed".into(),
                    failed: true,
                }),
                Err(reason) => set.skipped.push(Skipped {
                    label: format!("{}, {}", leg.label, test.test),
                    reason,
                    failed: true,
                }),
            }
            progress.finish_size();
        }
    }
    progress.finish();
    let tests: Vec<_> = plan.tests.iter().map(|t| t.test).collect();
    set.runs.sort_by_key(|r| {
        (
            tests.iter().position(|t| *t == r.test),
            super::transport_rank(r.transport, r.roce),
        )
    });
    set
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
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    super::run_from_result_json(doc)
        .map(|(run, _)| run)
        .map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_child_is_reported_with_its_stderr_tail() {
        let dir = tempfile::tempdir().unwrap();
        let args: Vec<String> = [
            "-c",
            "echo one >&2; echo '' >&2; echo 'error: --transport soft is not built yet' >&2; exit 2",
        ]
        .map(String::from)
        .to_vec();
        let mut p =
            Proc::spawn(Path::new("/bin/sh"), &args, None, dir.path(), "x", "client").unwrap();
        let err = p
            .finish(Instant::now() + Duration::from_secs(10))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "client sh exited with status 2: error: --transport soft is not built yet"
        );
    }

    #[test]
    fn error_lines_are_preferred_over_progress_notices() {
        let log =
            "roceperf: no server at 10.77.0.1:1 yet; retrying\n\nerror: queue pair 0 failed\n";
        assert_eq!(tail_of(log).unwrap(), "error: queue pair 0 failed");
        let log = "a\nb\nc\nd\nFor more information, try '--help'.\n";
        assert_eq!(tail_of(log).unwrap(), "b / c / d");
        assert_eq!(tail_of("\n ** banner **\n"), None);
    }

    #[test]
    fn result_rows_are_counted_and_headers_are_not() {
        let out = " #bytes #iterations    BW peak[Gb/sec]\n 2       1000  0.10\n 4       1000  0.2\n\
                   ---------------\n Size 4[B] : latency 1 2\n";
        assert_eq!(count_result_rows(out), 2);
    }

    #[test]
    fn a_hanging_child_is_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let args = vec!["30".to_string()];
        let mut p = Proc::spawn(Path::new("/bin/sleep"), &args, None, dir.path(), "s", "").unwrap();
        let err = p
            .finish(Instant::now() + Duration::from_millis(100))
            .unwrap_err();
        assert!(matches!(err, Error::Killed { .. }), "{err:?}");
        assert_eq!(err.to_string(), "sleep did not finish and was killed");
        assert!(p.child.try_wait().unwrap().is_some());
    }

    #[test]
    fn a_missing_binary_says_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = Proc::spawn(
            &dir.path().join("roce_nope"),
            &[],
            None,
            dir.path(),
            "n",
            "",
        )
        .err()
        .unwrap();
        assert!(matches!(err, Error::Spawn { .. }), "{err:?}");
        assert!(
            err.to_string().contains("cargo build --release --bins"),
            "{err}"
        );
    }
}
