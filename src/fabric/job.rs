//! One side of one pair test: the single-pair binary (`roce_write_bw`, ...) started as server or
//! client with the rank's test flags, `-p`, `--bind` and `--json`, watched until it ends, times out or
//! is cancelled, and its result JSON read back. The pair runs exactly the code a two-host run does.

use super::args::{FabricOptions, Leg};
use super::proto::{Job, Side, SideOutcome};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a rank runs its jobs: its flags, where the binaries are, and its own soft address on lo.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The rank's options (its test flags).
    pub options: FabricOptions,
    /// Where the roce_* binaries are.
    pub(crate) bin_dir: PathBuf,
    /// `--bind` for the soft transport, when this rank picked its own loopback address.
    pub bind: Option<String>,
    /// Scratch directory for result files and logs.
    pub(crate) workdir: PathBuf,
}

/// The directory of the running executable, where the roce_* binaries are installed next to it.
pub(crate) fn default_bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The loopback address a rank uses for soft on lo: `base` + rank (127.0.0.10, .11, ... by default).
pub(crate) fn loopback_addr(base: std::net::Ipv4Addr, rank: usize) -> String {
    std::net::Ipv4Addr::from(u32::from(base).wrapping_add(rank as u32)).to_string()
}

impl Runner {
    /// The binary and its arguments for `job`, writing its result to `json`.
    pub(crate) fn command_line(&self, job: &Job, json: &Path) -> (PathBuf, Vec<String>) {
        let bin = self.bin_dir.join(format!("roce_{}", job.test));
        let mut args = self.options.leg_args(job.leg);
        args.extend(["-p".to_owned(), job.port.to_string()]);
        if let (Some(b), false) = (&self.bind, job.leg == Leg::Tcp) {
            args.extend(["--bind".to_owned(), b.clone()]);
        }
        args.extend(["--json".to_owned(), json.display().to_string()]);
        if let (Side::Client, Some(addr)) = (job.side, &job.server_addr) {
            args.push(addr.clone());
        }
        (bin, args)
    }

    /// Runs `job` to its end; `cancel` holding the job's id stops it.
    pub fn run(&self, job: &Job, cancel: &AtomicU64) -> SideOutcome {
        let started = Instant::now();
        let fail = |error: String| SideOutcome {
            exit_code: None,
            error: Some(error),
            result: None,
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        let json = self.workdir.join(format!("job{}.json", job.id));
        let log = self.workdir.join(format!("job{}.log", job.id));
        let (bin, args) = self.command_line(job, &json);
        if !bin.exists() {
            return fail(format!(
                "{} not found (roce_fabric runs the roce_* binaries installed next to it; --bin-dir DIR names another place)",
                bin.display()
            ));
        }
        let stderr = match std::fs::File::create(&log) {
            Ok(f) => f,
            Err(e) => return fail(format!("cannot create {}: {e}", log.display())),
        };
        let mut cmd = Command::new(&bin);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        match &job.impair {
            Some(spec) => cmd.env("ROCEPERF_IMPAIR", spec),
            None => &mut cmd,
        };
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent; it makes the kernel kill
        // the binary when this rank dies, so that a killed rank leaves no server waiting for a client.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return fail(format!("cannot start {}: {e}", bin.display())),
        };
        let timeout = Duration::from_millis(job.timeout_ms);
        let mut stopped = None;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) => {}
                Err(e) => {
                    stopped = Some(format!("waiting for {}: {e}", bin.display()));
                    break None;
                }
            }
            if cancel.load(Ordering::Acquire) == job.id {
                stopped = Some("cancelled: its peer was lost".to_owned());
            } else if started.elapsed() > timeout {
                stopped = Some(format!(
                    "killed after {} s without finishing (--pair-timeout)",
                    timeout.as_secs()
                ));
            }
            if stopped.is_some() {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let exit_code = status.and_then(|s| s.code());
        let mut err_text = String::new();
        if let Ok(mut f) = std::fs::File::open(&log) {
            let _ = f.read_to_string(&mut err_text);
        }
        let _ = std::fs::remove_file(&log);
        let result = std::fs::read(&json)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let _ = std::fs::remove_file(&json);
        let error = match (exit_code, stopped) {
            (Some(0), _) => None,
            (_, Some(why)) => Some(why),
            (code, None) => Some(last_lines(&err_text).unwrap_or_else(|| match code {
                Some(c) => format!("{} exited with code {c}", bin.display()),
                None => format!("{} was killed by a signal", bin.display()),
            })),
        };
        SideOutcome {
            exit_code,
            error,
            result: if job.side == Side::Client {
                result
            } else {
                None
            },
            elapsed_ms: started.elapsed().as_millis() as u64,
        }
    }
}

/// The last few non-empty lines of a binary's stderr (its error message), at most 600 characters.
fn last_lines(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        return None;
    }
    let mut cut = tail.len().min(600);
    while !tail.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(tail[..cut].to_owned())
}
