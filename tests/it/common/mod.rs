//! Helpers for the integration tests: run the built binaries as server and client on 127.0.0.1, with
//! timeouts so that a hang fails the test instead of blocking CI.
#![allow(dead_code)]

pub mod results;
pub mod schema;
pub mod skip;
pub mod work_request;

pub use skip::{skip, skip_unless};

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Path of one of the test binaries.
pub fn bin(test: &str) -> &'static str {
    match test {
        "send_bw" => env!("CARGO_BIN_EXE_roce_send_bw"),
        "write_bw" => env!("CARGO_BIN_EXE_roce_write_bw"),
        "read_bw" => env!("CARGO_BIN_EXE_roce_read_bw"),
        "send_lat" => env!("CARGO_BIN_EXE_roce_send_lat"),
        "write_lat" => env!("CARGO_BIN_EXE_roce_write_lat"),
        "read_lat" => env!("CARGO_BIN_EXE_roce_read_lat"),
        "atomic_bw" => env!("CARGO_BIN_EXE_roce_atomic_bw"),
        "atomic_lat" => env!("CARGO_BIN_EXE_roce_atomic_lat"),
        other => panic!("no binary for {other}"),
    }
}

/// Runs roce_gate on `files` outside GitHub Actions (so without workflow annotations) and waits.
pub fn gate(args: &[&str], files: &[&std::path::Path]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_roce_gate"))
        .args(args)
        .args(files)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap()
}

/// The one directory a run made under `results` (a comparison's `<timestamp>/`).
pub fn the_only_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Asserts that `text` contains `needle` (and shows `text` when it does not).
#[track_caller]
pub fn assert_contains(text: &str, needle: &str) {
    assert!(
        text.contains(needle) || unwrapped(text).contains(needle),
        "{text}"
    );
}

/// The console's text with the lines `report::wrap` broke at 100 columns joined again: a line
/// indented 4 or more spaces that follows a long line (not a rule of dashes) continues it, so that
/// a test can look for a whole sentence.
pub fn unwrapped(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let continues = line.starts_with("    ")
            && !line.trim().is_empty()
            && out
                .last()
                .is_some_and(|prev| prev.chars().count() >= 60 && !prev.starts_with("---"));
        match out.last_mut() {
            Some(prev) if continues => {
                prev.push(' ');
                prev.push_str(line.trim_start());
            }
            _ => out.push(line.to_owned()),
        }
    }
    out.join("\n")
}

/// Columns a line takes on a terminal (tabs to the next multiple of 8).
pub fn columns(line: &str) -> usize {
    line.chars()
        .fold(0, |c, ch| if ch == '\t' { (c / 8 + 1) * 8 } else { c + 1 })
}

/// Every line of `text` fits 100 columns, but perftest's latency table (its header and rows, kept
/// byte for byte for perftest's parsers).
pub fn assert_fits(what: &str, text: &str) {
    let mut in_lat_table = false;
    for line in text.lines() {
        if line.starts_with(" #bytes #iterations    t_min[usec]") {
            in_lat_table = true;
            continue;
        }
        if line.starts_with("-----") {
            in_lat_table = false;
        }
        if in_lat_table {
            continue;
        }
        assert!(
            columns(line) <= 100,
            "{what}: a line of {} columns:\n{line}",
            columns(line)
        );
    }
}

/// A TCP port nobody listens on right now (tests run in parallel, so each asks for its own).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running binary whose stdout and stderr go to files.
pub struct Proc {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    _dir: tempfile::TempDir,
}

/// What a finished binary left behind.
#[derive(Debug)]
pub struct Done {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Done {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Asserts that stderr says `text` (and shows stderr when it does not).
    #[track_caller]
    pub fn assert_stderr(&self, text: &str) {
        assert!(self.stderr.contains(text), "{}", self.stderr);
    }

    /// Asserts exit code `code` and a stderr that says each of `texts`; a failure names `what` and
    /// shows stderr.
    #[track_caller]
    pub fn assert_ended(&self, code: i32, texts: &[&str], what: &str) {
        assert_eq!(self.code(), code, "{what}: {}", self.stderr);
        for text in texts {
            assert!(
                self.stderr.contains(text),
                "{what}: expected {text:?} in {}",
                self.stderr
            );
        }
    }

    /// Asserts a usage or setup error: exit code 2, and stderr says `text`.
    #[track_caller]
    pub fn assert_usage_error(&self, text: &str) {
        self.assert_ended(2, &[text], "a usage error");
    }
}

/// Starts `roce_<test>` with `args`.
pub fn spawn(test: &str, args: &[&str]) -> Proc {
    spawn_in(None, test, args)
}

/// Starts `roce_<test>` with `args` and extra environment variables.
pub fn spawn_env(test: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
    spawn_with(None, test, args, env)
}

/// Starts `roce_<test>` with `args`, inside network namespace `ns` when given (`ip netns exec`).
pub fn spawn_in(ns: Option<&str>, test: &str, args: &[&str]) -> Proc {
    spawn_with(ns, test, args, &[])
}

fn spawn_with(ns: Option<&str>, test: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout");
    let err = dir.path().join("stderr");
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, bin(test)]);
            c
        }
        None => Command::new(bin(test)),
    };
    let child = cmd
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    Proc {
        child,
        out,
        err,
        _dir: dir,
    }
}

impl Proc {
    /// The process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it signal `sig` (SIGSTOP, SIGCONT, ...).
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on a child process this test started and has not reaped.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({sig}): {}", std::io::Error::last_os_error());
    }

    /// What the process has written to stdout so far.
    pub fn stdout_now(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// What the process has written to stderr so far.
    pub fn stderr_now(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits at most `secs`; kills the process and panics (naming it) if it is still running.
    pub fn wait(mut self, secs: u64, what: &str) -> Done {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Done {
                    status,
                    stdout: std::fs::read_to_string(&self.out).unwrap_or_default(),
                    stderr: std::fs::read_to_string(&self.err).unwrap_or_default(),
                };
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{what} still running after {secs} s (hang)\nstdout:\n{}\nstderr:\n{}",
                    std::fs::read_to_string(&self.out).unwrap_or_default(),
                    std::fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (the test is done with it).
    pub fn kill(mut self) -> Done {
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        Done {
            status,
            stdout: std::fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }

    /// True once stdout contains `text` (polled up to `secs`).
    pub fn wait_stdout(&self, text: &str, secs: u64) -> bool {
        self.wait_stdout_times(text, 1, secs)
    }

    /// Waits at most `secs` until stdout holds `text` `n` times; false if it does not by then.
    pub fn wait_stdout_times(&self, text: &str, n: usize, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if std::fs::read_to_string(&self.out)
                .unwrap_or_default()
                .matches(text)
                .count()
                >= n
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

/// Starts a server and a client of `test` on 127.0.0.1 (a free port, cores 0 and 1) with `args`
/// and each side's own `extra(role)`; returns them once the server listens and the client started.
pub fn start_pair(test: &str, args: &[&str], extra: impl Fn(&str) -> Vec<String>) -> (Proc, Proc) {
    let port = free_port().to_string();
    let side = |role: &str, core: &str| {
        let mut a: Vec<String> = ["-p", &port, "--cpu", core].map(String::from).to_vec();
        a.extend(args.iter().map(|s| s.to_string()));
        a.extend(extra(role));
        a
    };
    let sa = side("server", "0");
    let server = spawn(test, &sa.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(server.wait_stdout("Waiting for client", 20), "no server");
    let mut ca = side("client", "1");
    ca.push("127.0.0.1".into());
    let client = spawn(test, &ca.iter().map(String::as_str).collect::<Vec<_>>());
    (server, client)
}

/// Starts a TCP-transport server of `test` on `port`, pinned to core 0, with `extra` arguments;
/// returns it once it listens.
pub fn tcp_server(test: &str, port: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["--transport", "tcp", "-p", port, "--cpu", "0"];
    args.extend_from_slice(extra);
    let server = spawn(test, &args);
    assert!(
        server.wait_stdout("Waiting for client", 20),
        "{test} server did not start listening"
    );
    server
}

/// Starts a TCP-transport client of `test` for a server on 127.0.0.1:`port`, with `extra` arguments.
pub fn tcp_client(test: &str, port: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["--transport", "tcp", "-p", port];
    args.extend_from_slice(extra);
    args.push("127.0.0.1");
    spawn(test, &args)
}

/// Runs a server (pinned to core 0) and a client (core 1) of `test` with the same `args` on a fresh
/// port; returns (server, client) once both have exited.
pub fn pair(test: &str, args: &[&str]) -> (Done, Done) {
    pair_with(test, args, args)
}

/// Like [`pair`], with different arguments for the two sides.
pub fn pair_with(test: &str, server_args: &[&str], client_args: &[&str]) -> (Done, Done) {
    let port = free_port().to_string();
    let mut s: Vec<&str> = vec!["--transport", "tcp", "-p", &port, "--cpu", "0"];
    s.extend_from_slice(server_args);
    let server = spawn(test, &s);
    if server_args.iter().any(|a| a.starts_with("--output")) {
        // Quiet servers print no banner; the client retries until the server listens anyway.
        std::thread::sleep(Duration::from_millis(200));
    } else {
        assert!(
            server.wait_stdout("Waiting for client", 20),
            "server did not start listening"
        );
    }
    let mut c: Vec<&str> = vec!["--transport", "tcp", "-p", &port, "--cpu", "1"];
    c.extend_from_slice(client_args);
    c.push("127.0.0.1");
    let client = spawn(test, &c).wait(120, &format!("{test} client"));
    let server = server.wait(30, &format!("{test} server"));
    (server, client)
}

/// Like [`pair`], the client with `client_only` arguments after the shared `both`.
pub fn pair_plus(test: &str, both: &[&str], client_only: &[&str]) -> (Done, Done) {
    pair_with(test, both, &[both, client_only].concat())
}

/// Where and how one side of [`pair_on`] runs.
pub struct Side<'a> {
    /// Network namespace, or the current one.
    pub ns: Option<&'a str>,
    /// Arguments (the port and core are added).
    pub args: Vec<&'a str>,
}

/// Runs a server and a client of `test` on a fresh out-of-band port; the client connects to `host`.
/// Returns (server, client) once both have exited.
pub fn pair_on(test: &str, server: Side, client: Side, host: &str) -> (Done, Done) {
    let port = free_port().to_string();
    let mut s: Vec<&str> = vec!["-p", &port, "--cpu", "0"];
    s.extend_from_slice(&server.args);
    let sp = spawn_in(server.ns, test, &s);
    assert!(
        sp.wait_stdout("Waiting for client", 20),
        "server did not start listening"
    );
    let mut c: Vec<&str> = vec!["-p", &port, "--cpu", "1"];
    c.extend_from_slice(&client.args);
    c.push(host);
    let client = spawn_in(client.ns, test, &c).wait(120, &format!("{test} client"));
    let server = sp.wait(30, &format!("{test} server"));
    (server, client)
}

/// Runs a server and a client of `test` on lo, each with its own arguments; the client connects to
/// 127.0.0.1. Returns (server, client) once both have exited.
pub fn pair_on_lo(test: &str, server: Vec<&str>, client: Vec<&str>) -> (Done, Done) {
    pair_here(test, server, client, "127.0.0.1")
}

/// Runs `test` on lo with `args` on both sides, each side also writing `--json` and `--csv` into `dir`
/// as `<prefix><role>.json` and `<prefix><role>.csv`; asserts that both exited 0 and returns them.
pub fn pair_writing_files(dir: &Path, prefix: &str, test: &str, args: &[&str]) -> (Done, Done) {
    let files = |role: &str| {
        let f = |ext: &str| {
            dir.join(format!("{prefix}{role}.{ext}"))
                .display()
                .to_string()
        };
        [f("json"), f("csv")]
    };
    let (sf, cf) = (files("server"), files("client"));
    fn side<'a>(args: &[&'a str], [json, csv]: &'a [String; 2]) -> Vec<&'a str> {
        let mut a = args.to_vec();
        a.extend(["--json", json, "--csv", csv]);
        a
    }
    let (s, c) = pair_on_lo(test, side(args, &sf), side(args, &cf));
    assert_both_ok(&format!("{test} {args:?}"), &s, &c);
    (s, c)
}

/// [`pair_on`] with both sides in this namespace, the client asking for `peer`.
pub fn pair_here(test: &str, server: Vec<&str>, client: Vec<&str>, peer: &str) -> (Done, Done) {
    let side = |args| Side { ns: None, args };
    pair_on(test, side(server), side(client), peer)
}

/// The six perftest tests, as the binaries are named.
pub const SIX: [&str; 6] = [
    "send_bw",
    "write_bw",
    "read_bw",
    "send_lat",
    "write_lat",
    "read_lat",
];

/// A message size that spans several packets yet runs quickly: 20000 bytes for a bandwidth test,
/// 3000 for a latency one.
pub fn several_packets(test: &str) -> &'static str {
    if test.ends_with("_bw") {
        "20000"
    } else {
        "3000"
    }
}

/// Holds `lock` for the rest of a test, so that pairs which busy-poll two cores each run one at a
/// time (a test that failed while holding it does not stop the next).
pub fn one_at_a_time(lock: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Asserts that both sides of `what` exited 0, showing what each printed when not.
#[track_caller]
pub fn assert_both_ok(what: &str, s: &Done, c: &Done) {
    assert_eq!(
        (c.code(), s.code()),
        (0, 0),
        "{what}\nclient:\n{}{}\nserver:\n{}{}",
        c.stdout,
        c.stderr,
        s.stdout,
        s.stderr
    );
    // Their output is piped, never a terminal: no colour, no progress bar (issue 34, point 7).
    for (side, d) in [("client", c), ("server", s)] {
        let out = format!("{}{}", d.stdout, d.stderr);
        assert!(
            !out.contains('\x1b'),
            "{what}: {side}'s piped output holds an escape code: {out:?}"
        );
    }
}

/// Asserts that both sides stopped with a usage or setup error (exit 2) whose message holds each of
/// `texts`, naming the side that did not.
#[track_caller]
pub fn assert_both_refused(s: &Done, c: &Done, texts: &[&str]) {
    for (side, d) in [("server", s), ("client", c)] {
        d.assert_ended(2, texts, side);
    }
}

/// Runs `roce_<test> args` alone and asserts a usage or setup error: exit 2 within 20 s, with a
/// message that holds each of `texts`; a failure names the command line. Returns what it printed.
#[track_caller]
pub fn assert_refused(test: &str, args: &[&str], texts: &[&str]) -> Done {
    let case = format!("{test} {args:?}");
    let d = spawn(test, args).wait(20, &case);
    d.assert_ended(2, texts, &case);
    d
}

/// The drop counters a pair started by hand wrote to `json`, once the client (within 60 s) and then
/// the server (within 30 s) have exited 0.
#[track_caller]
pub fn drops_once_both_ok(server: Proc, client: Proc, json: &std::path::Path) -> serde_json::Value {
    let c = client.wait(60, "client");
    let s = server.wait(30, "server");
    assert_both_ok("a pair started by hand", &s, &c);
    json_file(json)["test"]["counters"]["drops"].clone()
}

/// The JSON document in `path` (what a run wrote with `--json`, a schema, ...), panicking with the path
/// when it cannot be read or is not JSON.
#[track_caller]
pub fn json_file(path: &std::path::Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// The numeric rows of the result table: lines that start with a space and a number.
pub fn rows(stdout: &str) -> Vec<Vec<f64>> {
    stdout
        .lines()
        .filter(|l| {
            l.starts_with(' ')
                && l.trim_start()
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
        })
        .map(|l| {
            l.split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .collect()
}

/// A command line written as one string, split at whitespace (for arguments without spaces).
pub fn argv(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}
