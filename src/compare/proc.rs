//! The child processes of a live comparison, and the Ctrl-C handling that stops a comparison.
//!
//! A `roce_<test>` binary is started with its output in log files, waited for until a deadline and
//! killed past it; its logs say what went wrong.

use super::error::{Error, Result};
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Lines of stderr quoted in a failure note.
const TAIL_LINES: usize = 3;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT (Ctrl-C) and SIGTERM stop the comparison instead of the process: the running server
/// and client are killed, the runs left are noted, and the caller still reports what ran and removes
/// what it set up (network namespaces).
pub(crate) fn catch_interrupts() {
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
    pub(crate) fn sizes_done(&self) -> usize {
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
pub(crate) fn exit_text(s: ExitStatus) -> String {
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
pub(crate) fn exe_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        action: "cannot find where roce_compare runs from",
        source,
    })?;
    Ok(exe
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf))
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
