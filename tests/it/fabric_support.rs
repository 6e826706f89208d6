//! Helpers for the roce_fabric tests: the binaries, ports, a loopback range per test, commands run with
//! a deadline (the whole process group is killed on a hang), and fabric.json.
#![allow(dead_code)]

use serde_json::Value;
use std::ffi::OsStr;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const FABRIC: &str = env!("CARGO_BIN_EXE_roce_fabric");
pub const GATE: &str = env!("CARGO_BIN_EXE_roce_gate");

/// The fabric tests busy-poll several binaries at once: one at a time keeps a 2-core CI machine sane.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds the fabric tests' lock.
pub fn exclusive() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// One fabric test's setting: the lock held, a scratch directory, the ports of its ranks, and where
/// its results go.
pub struct Job {
    _one: MutexGuard<'static, ()>,
    /// Scratch space (logs, wrappers); removed at the end.
    pub dir: tempfile::TempDir,
    /// The coordinator's port.
    pub coord: u16,
    /// The first pair port.
    base: u16,
    /// The results directory (`--results`).
    pub results: PathBuf,
}

impl Job {
    /// Takes the lock, reserves ports for `ranks` ranks and names the results directory `name`.
    pub fn new(ranks: u16, name: &str) -> Job {
        let one = exclusive();
        let dir = tempfile::tempdir().unwrap();
        let (coord, base) = ports(ranks);
        let results = dir.path().join(name);
        Job {
            _one: one,
            dir,
            coord,
            base,
            results,
        }
    }

    /// roce_fabric's arguments: `words` (split at white space), then the coordinator, the pair port and
    /// the results directory.
    pub fn args(&self, words: &str) -> Vec<String> {
        let mut v: Vec<String> = words.split_whitespace().map(String::from).collect();
        v.extend([
            "--coordinator".into(),
            format!("127.0.0.1:{}", self.coord),
            "-p".into(),
            self.base.to_string(),
            "--results".into(),
            self.results.to_str().unwrap().into(),
        ]);
        v
    }

    /// Where rank `r`'s output is logged.
    pub fn log(&self, r: usize) -> PathBuf {
        self.dir.path().join(format!("rank{r}.log"))
    }
}

/// A coordinator port and the first of `n` consecutive free pair ports, below Linux's ephemeral range
/// (32768 and up) so that no outgoing connection of a test running alongside takes one meanwhile.
pub fn ports(n: u16) -> (u16, u16) {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let seed = (std::process::id() as u16).wrapping_mul(97);
    for _ in 0..200 {
        // Each call reserves its own n + 1 offsets, so two calls' ranges never overlap.
        let k = NEXT.fetch_add(n + 1, std::sync::atomic::Ordering::SeqCst);
        let start = 20000 + (seed.wrapping_add(k) % 12000);
        let all: Vec<_> = (start..start + n + 1)
            .map(|p| TcpListener::bind(("0.0.0.0", p)))
            .collect();
        if all.iter().all(Result::is_ok) {
            return (start, start + 1);
        }
    }
    panic!(
        "no {} consecutive free ports between 20000 and 32000",
        n + 1
    );
}

/// Runs `cmd` in its own process group, killing the group after `secs` (and failing the test).
pub fn run(cmd: &mut Command, secs: u64) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id() as i32;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(secs);
            while Instant::now() < deadline {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: kill has no memory preconditions; -pid is the group this test started.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            true
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    if watchdog.join().unwrap() {
        panic!(
            "{cmd:?} still running after {secs} s (hang)\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// stdout and stderr as text, once the exit code is asserted to be `code` (both shown when not).
pub fn expect_code(o: &Output, code: i32) -> (String, String) {
    let (stdout, stderr) = text(o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Redirected output (mpirun's too, whose ranks write to its pseudo-terminals) holds no escape code.
    assert!(
        !stdout.contains('\x1b') && !stderr.contains('\x1b'),
        "an escape code in redirected output:\n{stdout:?}\n{stderr:?}"
    );
    (stdout, stderr)
}

/// roce_gate run over `json` with `args`.
pub fn gate(json: &Path, args: &[&str]) -> Output {
    run(Command::new(GATE).arg(json).args(args), 30)
}

/// stdout and stderr as text.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `mpirun` for `np` ranks of roce_fabric with `args` (fails the test, with the fix, when Open MPI is
/// missing: a missing launcher is never mistaken for a pass).
pub fn mpirun<S: AsRef<OsStr>>(np: usize, env: &[(&str, &str)], args: &[S]) -> Command {
    mpirun_wrapped(np, env, None, args)
}

/// [`mpirun`] with each rank started through `wrapper` (`wrapper roce_fabric ARGS`).
pub fn mpirun_wrapped<S: AsRef<OsStr>>(
    np: usize,
    env: &[(&str, &str)],
    wrapper: Option<&Path>,
    args: &[S],
) -> Command {
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "mpirun is not installed; run `apt-get install -y openmpi-bin` (scripts/deps.sh test does)"
    );
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &np.to_string(),
    ]);
    for (k, v) in env {
        c.env(k, v).args(["-x", k]);
    }
    c.args(wrapper).arg(FABRIC).args(args);
    c
}

/// roce_fabric started for one rank by hand (`--rank`, `--world-size`), as a Kubernetes pod would be.
pub fn rank<S: AsRef<OsStr>>(r: usize, n: usize, args: &[S]) -> Command {
    let mut c = Command::new(FABRIC);
    c.args(["--rank", &r.to_string(), "--world-size", &n.to_string()])
        .args(args);
    c
}

/// Starts ranks 0 .. n of a hand-started job with `args`, each logging to [`Job::log`].
pub fn spawn_ranks<S: AsRef<OsStr>>(job: &Job, n: usize, args: &[S]) -> Vec<std::process::Child> {
    (0..n)
        .map(|r| spawn(rank(r, n, args), &job.log(r)))
        .collect()
}

/// Waits for `c` to exit within `secs`: its exit code (killed, and a panic, past them).
pub fn wait(mut c: std::process::Child, secs: u64) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("a rank or server still runs after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// fabric.json of a results directory.
pub fn fabric_json(dir: &Path) -> Value {
    crate::common::json_file(&dir.join("fabric.json"))
}

/// The pairs of attempt 1, as (client, server, status).
pub fn first_pairs(doc: &Value) -> Vec<(u64, u64, String)> {
    doc["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["attempt"] == 1)
        .map(|p| {
            (
                p["client"].as_u64().unwrap(),
                p["server"].as_u64().unwrap(),
                p["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Whether this process is root (Slurm's daemons need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Starts `c` with its stdout and stderr in the file `log`.
pub fn spawn(mut c: Command, log: &std::path::Path) -> Child {
    let f = std::fs::File::create(log).unwrap();
    c.stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap()
}

/// Rank 0 of an `n`-rank job started alone with `args`, which it must refuse before waiting for any
/// other rank: exit 2 asserted; its log (what it said).
pub fn rank0_refuses<S: AsRef<OsStr>>(job: &Job, n: usize, args: &[S]) -> String {
    let code = wait(spawn(rank(0, n, args), &job.log(0)), 60);
    let log0 = std::fs::read_to_string(job.log(0)).unwrap();
    assert_eq!(code, 2, "{log0}");
    log0
}
