//! The one runner of child processes: a `roce_<test>` binary started (inside a network namespace when
//! asked), its output in log files (so that a chatty child never blocks on a pipe), waited for until it
//! ends, its deadline passes, its caller cancels it or the process is asked to stop ([`super::signals`]),
//! and killed then; the lines of its logs that say what went wrong.
//!
//! A child is started with `PR_SET_PDEATHSIG`, so a runner that dies (killed by a launcher, a second
//! Ctrl-C) leaves no server behind waiting for a client.

use super::signals;
use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a running child is looked at.
const POLL: Duration = Duration::from_millis(10);
/// Lines of a log quoted in a failure note.
const TAIL_LINES: usize = 3;
/// Longest tail quoted, in bytes (a result with every size's histogram never goes there).
const TAIL_BYTES: usize = 600;

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The binary.
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// The network namespace it runs in (through `ip netns exec`); None: this one.
    pub(crate) netns: Option<String>,
    /// Variables added to its environment.
    pub(crate) env: Vec<(String, String)>,
    /// Runs it under SCHED_FIFO at this priority (set before exec, kept across `ip netns exec`'s);
    /// None: the normal scheduler. The spawn fails when the kernel refuses it.
    pub(crate) fifo: Option<u8>,
    /// Runs it on this core alone (its affinity set before exec); None: wherever the scheduler
    /// puts it.
    pub(crate) cpu: Option<usize>,
}

impl Launch {
    /// `program args`, in this namespace, with this process's environment.
    pub(crate) fn new(program: PathBuf, args: Vec<String>) -> Launch {
        Launch {
            program,
            args,
            netns: None,
            env: Vec::new(),
            fifo: None,
            cpu: None,
        }
    }
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    /// A log file could not be created.
    #[error("cannot create the log {path}: {source}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The `ip` command (iproute2), which enters a namespace, is not installed.
    #[error("the ip command is missing; install iproute2 (bash scripts/deps.sh demo)")]
    IpMissing,
    /// The binary could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The binary.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Why the runner killed a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Its deadline passed.
    Deadline,
    /// Its caller cancelled it.
    Cancelled,
    /// SIGINT or SIGTERM asked this process to stop.
    Interrupted,
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited by itself (or a signal from elsewhere ended it).
    Exited(ExitStatus),
    /// The runner killed it.
    Killed(Stop),
    /// Waiting for it failed (it was reaped elsewhere); it was killed to be sure.
    Lost(String),
}

impl Ended {
    /// Whether it exited with status 0.
    pub(crate) fn success(&self) -> bool {
        matches!(self, Ended::Exited(s) if s.success())
    }

    /// Its exit code, when it exited by itself.
    pub(crate) fn code(&self) -> Option<i32> {
        match self {
            Ended::Exited(s) => s.code(),
            _ => None,
        }
    }
}

/// `exited with status 2`, or `was killed by signal 9`.
pub(crate) fn exit_text(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// A started binary whose stdout and stderr go to files.
#[derive(Debug)]
pub(crate) struct Child {
    child: std::process::Child,
    program: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Child {
    /// Starts `launch`, logging to `<logs>/<name>.out` and `.err`.
    pub(crate) fn spawn(launch: &Launch, logs: &Path, name: &str) -> Result<Child, SpawnError> {
        let stdout = logs.join(format!("{name}.out"));
        let stderr = logs.join(format!("{name}.err"));
        let file = |path: &Path| {
            File::create(path).map_err(|source| SpawnError::Log {
                path: path.to_owned(),
                source,
            })
        };
        let mut cmd = match &launch.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&launch.program);
                c
            }
            None => Command::new(&launch.program),
        };
        cmd.args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file(&stdout)?)
            .stderr(file(&stderr)?);
        let (fifo, cpu) = (launch.fifo, launch.cpu);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent; it makes the kernel
        // kill the child when the thread that started it dies (`ip netns exec` execs the binary, which
        // keeps the setting). sched_setscheduler is a plain system call on a value copied into the
        // closure, and SCHED_FIFO is kept across exec; so is the CPU affinity, set from a zeroed (empty)
        // cpu_set_t with one bit written by CPU_SET.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(core) = cpu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(core, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if let Some(prio) = fifo {
                    let param = libc::sched_param {
                        sched_priority: i32::from(prio),
                    };
                    if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| {
            if launch.netns.is_some() && source.kind() == std::io::ErrorKind::NotFound {
                SpawnError::IpMissing
            } else {
                SpawnError::Spawn {
                    program: launch.program.clone(),
                    source,
                }
            }
        })?;
        Ok(Child {
            child,
            program: launch.program.clone(),
            stdout,
            stderr,
        })
    }

    /// The binary.
    pub(crate) fn program(&self) -> &Path {
        &self.program
    }

    /// The binary's file name (`roce_write_lat`).
    pub(crate) fn name(&self) -> String {
        self.program.file_name().map_or_else(
            || self.program.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// Waits until it ends; kills it when `deadline` passes, `cancelled` says so (asked at every look,
    /// so it may also show progress) or this process is asked to stop.
    pub(crate) fn wait(&mut self, deadline: Instant, mut cancelled: impl FnMut() -> bool) -> Ended {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ended::Exited(status),
                Ok(None) => {}
                Err(e) => {
                    self.kill();
                    return Ended::Lost(e.to_string());
                }
            }
            let stop = if signals::stop_requested() {
                Some(Stop::Interrupted)
            } else if cancelled() {
                Some(Stop::Cancelled)
            } else if Instant::now() >= deadline {
                Some(Stop::Deadline)
            } else {
                None
            };
            if let Some(why) = stop {
                self.kill();
                return Ended::Killed(why);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Whether it has ended (and was reaped), without waiting.
    pub(crate) fn has_ended(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks it to stop with SIGTERM (a child that writes its files on the way out, as `roce_switch`
    /// does) and waits up to `grace` for it to end; kills it after that.
    pub(crate) fn terminate(&mut self, grace: Duration) -> Ended {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child, which has not been reaped (try_wait said so).
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ended::Exited(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                Ok(None) => {
                    self.kill();
                    return Ended::Killed(Stop::Deadline);
                }
                Err(e) => {
                    self.kill();
                    return Ended::Lost(e.to_string());
                }
            }
        }
    }

    /// Kills the process and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What its logs say went wrong: the `error:` lines of stderr when there are some (a retry notice
    /// before them says nothing), else its last lines, else those of stdout; None when both are empty.
    pub(crate) fn tail(&self) -> Option<String> {
        [&self.stderr, &self.stdout]
            .into_iter()
            .find_map(|path| tail_of(&std::fs::read_to_string(path).unwrap_or_default()))
    }

    /// The file its stdout goes to (to read its progress while it runs).
    pub(crate) fn stdout_log(&self) -> &Path {
        &self.stdout
    }

    /// Removes its log files.
    pub(crate) fn remove_logs(&self) {
        let _ = std::fs::remove_file(&self.stdout);
        let _ = std::fs::remove_file(&self.stderr);
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// The lines of a log that say what went wrong, joined with ` / `, at most [`TAIL_BYTES`].
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
    let from = pick.len().checked_sub(1)?.saturating_sub(TAIL_LINES - 1);
    let tail = pick[from..].join(" / ");
    let mut cut = tail.len().min(TAIL_BYTES);
    while !tail.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(tail[..cut].to_owned())
}

/// A TCP port nobody listens on right now on this host.
pub(crate) fn free_port() -> std::io::Result<u16> {
    TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
}

/// The directory of the running executable, where the test binaries are installed beside it.
pub(crate) fn exe_dir() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(exe
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Launch {
        Launch::new("/bin/sh".into(), vec!["-c".into(), script.into()])
    }

    #[test]
    fn a_failing_child_ends_with_its_status_and_its_error_lines() {
        let dir = tempfile::tempdir().unwrap();
        let launch = sh(
            "echo one >&2; echo '' >&2; echo 'error: --transport soft is not built yet' >&2; exit 2",
        );
        let mut c = Child::spawn(&launch, dir.path(), "x").unwrap();
        let end = c.wait(Instant::now() + Duration::from_secs(10), || false);
        assert_eq!(end.code(), Some(2));
        assert!(!end.success());
        assert_eq!(
            c.tail().as_deref(),
            Some("error: --transport soft is not built yet")
        );
        assert_eq!(c.name(), "sh");
        c.remove_logs();
        assert!(!dir.path().join("x.err").exists());
    }

    #[test]
    fn error_lines_are_preferred_over_progress_notices() {
        let log =
            "roceperf: no server at 10.77.0.1:1 yet; retrying\n\nerror: queue pair 0 failed\n";
        assert_eq!(tail_of(log).unwrap(), "error: queue pair 0 failed");
        let log = "a\nb\nc\nd\nFor more information, try '--help'.\n";
        assert_eq!(tail_of(log).unwrap(), "b / c / d");
        assert_eq!(tail_of("\n ** banner **\n"), None);
        assert_eq!(tail_of(&"é".repeat(400)).unwrap().len(), TAIL_BYTES);
    }

    #[test]
    fn stdout_is_the_tail_when_stderr_is_empty_and_the_environment_is_passed() {
        let dir = tempfile::tempdir().unwrap();
        let mut launch = sh("echo \"$ROCEPERF_X\"; exit 1");
        launch
            .env
            .push(("ROCEPERF_X".into(), "from the launch".into()));
        let mut c = Child::spawn(&launch, dir.path(), "e").unwrap();
        let end = c.wait(Instant::now() + Duration::from_secs(10), || false);
        assert_eq!(end.code(), Some(1));
        assert_eq!(c.tail().as_deref(), Some("from the launch"));
        let stdout = std::fs::read_to_string(c.stdout_log()).unwrap();
        assert_eq!(stdout, "from the launch\n");
    }

    #[test]
    fn a_child_given_a_core_runs_on_that_core_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut launch = sh("grep Cpus_allowed_list /proc/self/status");
        launch.cpu = Some(0);
        let mut c = Child::spawn(&launch, dir.path(), "c").unwrap();
        let end = c.wait(Instant::now() + Duration::from_secs(10), || false);
        assert!(end.success());
        let stdout = std::fs::read_to_string(c.stdout_log()).unwrap();
        assert_eq!(stdout.split_whitespace().last(), Some("0"), "{stdout}");
    }

    #[test]
    fn a_hanging_child_is_killed_at_its_deadline_or_when_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let sleep = Launch::new("/bin/sleep".into(), vec!["30".into()]);
        let mut c = Child::spawn(&sleep, dir.path(), "s").unwrap();
        let end = c.wait(Instant::now() + Duration::from_millis(100), || false);
        assert_eq!(end, Ended::Killed(Stop::Deadline));
        assert!(c.child.try_wait().unwrap().is_some(), "killed and reaped");
        let mut c = Child::spawn(&sleep, dir.path(), "s").unwrap();
        let mut looks = 0;
        let end = c.wait(Instant::now() + Duration::from_secs(30), || {
            looks += 1;
            looks == 3
        });
        assert_eq!(end, Ended::Killed(Stop::Cancelled));
        assert_eq!(end.code(), None);
    }

    #[test]
    fn terminate_lets_a_child_finish_on_sigterm_and_kills_one_that_ignores_it() {
        let dir = tempfile::tempdir().unwrap();
        let polite = sh("trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.01; done");
        let mut c = Child::spawn(&polite, dir.path(), "p").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let end = c.terminate(Duration::from_secs(10));
        assert!(end.success(), "{end:?}");
        let out = std::fs::read_to_string(c.stdout_log()).unwrap();
        assert!(out.ends_with("bye\n"), "{out}");
        let deaf = sh("trap '' TERM; while :; do sleep 0.01; done");
        let mut c = Child::spawn(&deaf, dir.path(), "d").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            c.terminate(Duration::from_millis(200)),
            Ended::Killed(Stop::Deadline)
        );
    }

    #[test]
    fn a_missing_binary_or_namespace_tool_is_a_spawn_error() {
        let dir = tempfile::tempdir().unwrap();
        let launch = Launch::new(dir.path().join("roce_nope"), Vec::new());
        let err = Child::spawn(&launch, dir.path(), "n").unwrap_err();
        assert!(matches!(err, SpawnError::Spawn { .. }), "{err:?}");
        assert!(err.to_string().starts_with("cannot start "), "{err}");
        let err = Child::spawn(&launch, &dir.path().join("no/such/dir"), "n").unwrap_err();
        assert!(matches!(err, SpawnError::Log { .. }), "{err:?}");
    }
}
