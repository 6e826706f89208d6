//! roce_gate and roce_compare read their inputs within a bound (issue 33, defect 2): a file, a device or
//! standard input that cannot start a result file fails on its first bytes, naming it, and a stream that
//! never ends is cut at the limit, naming it too; memory never grows with what the input holds. Each
//! tool runs here with its address space limited to 1 GiB, so that a reader without a bound fails this
//! test instead of the host.

use crate::common;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Address space each tool gets: far more than a bounded read needs, far less than a reader that
/// keeps what it reads reaches within the time allowed.
const ADDRESS_SPACE: u64 = 1 << 30;

/// `bin` with `args`, its address space limited, standard input from `stdin`.
fn limited(bin: &str, args: &[&str], stdin: Stdio) -> Child {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("GITHUB_ACTIONS")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Waits at most 60 s for `child` (killed and failed as a hang after that).
fn finished(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: still reading after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Asserts exit 2 and a message that holds each of `texts`.
#[track_caller]
fn refused(out: &Output, what: &str, texts: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    for t in texts {
        assert!(err.contains(t), "{what}: expected {t:?} in {err}");
    }
}

const GATE: &str = env!("CARGO_BIN_EXE_roce_gate");
const COMPARE: &str = env!("CARGO_BIN_EXE_roce_compare");

#[test]
fn devices_that_never_end_fail_on_their_first_bytes() {
    let zero_then = |bin, args: &[&str], what| {
        let out = finished(limited(bin, args, Stdio::null()), what);
        refused(
            &out,
            what,
            &["/dev/zero", "byte 0 (0x00)", "not a result file"],
        );
    };
    zero_then(
        GATE,
        &["/dev/zero", "--max-p99", "1s"],
        "roce_gate /dev/zero",
    );
    zero_then(
        GATE,
        &["--baseline", "/dev/zero", "/dev/zero", "--max-p99", "1s"],
        "roce_gate --baseline /dev/zero",
    );
    zero_then(
        COMPARE,
        &["--from", "/dev/zero"],
        "roce_compare --from /dev/zero",
    );
    let out = finished(
        limited(GATE, &["/dev/urandom", "--max-p99", "1s"], Stdio::null()),
        "roce_gate /dev/urandom",
    );
    refused(
        &out,
        "roce_gate /dev/urandom",
        &["/dev/urandom", "not a result file"],
    );
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let out = finished(
        limited(GATE, &["-", "--max-p99", "1s"], zero.into()),
        "roce_gate - < /dev/zero",
    );
    refused(
        &out,
        "roce_gate - < /dev/zero",
        &["<stdin>", "byte 0 (0x00)"],
    );
}

#[test]
fn a_large_file_of_zeros_fails_at_its_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["zeros.json", "zeros.csv", "zeros"] {
        // 200 MB of zeros, sparse: the test takes no disk.
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(200 << 20)
            .unwrap();
        let p = path.to_str().unwrap();
        let out = finished(limited(GATE, &[p, "--max-p99", "1s"], Stdio::null()), p);
        refused(&out, p, &[p, "byte 0 (0x00)", "not a result file"]);
    }
}

#[test]
fn text_that_cannot_start_a_result_csv_fails_at_its_first_line() {
    // `yes | roce_gate -`: text forever, but its first line is no CSV header of ours.
    let mut child = limited(GATE, &["-", "--max-p99", "1s"], Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let chunk = "y\n".repeat(32 << 10);
        while stdin.write_all(chunk.as_bytes()).is_ok() {}
    });
    let out = finished(child, "yes | roce_gate -");
    feeder.join().unwrap();
    refused(
        &out,
        "yes | roce_gate -",
        &["<stdin> line 1", "no \"test\" column"],
    );
}

#[test]
fn a_stream_without_end_is_cut_at_the_limit_naming_it() {
    // Valid JSON text that never closes its string: only the limit stops it.
    let mut child = limited(COMPARE, &["--from", "/dev/stdin"], Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(br#"{"schema": "roceperf.result", "padding": ""#);
        let chunk = "a".repeat(1 << 20);
        while stdin.write_all(chunk.as_bytes()).is_ok() {}
    });
    let out = finished(
        child,
        "an endless JSON string on roce_compare --from /dev/stdin",
    );
    feeder.join().unwrap();
    refused(
        &out,
        "an endless stream",
        &["/dev/stdin", "256 MiB", "not a regular file"],
    );
}

#[test]
fn a_result_file_still_reads_through_a_pipe() {
    // The bound changes nothing for what roceperf writes: a run's JSON through standard input passes.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let info = common::results::run_info(
        roceperf::params::TestKind::WRITE_BW,
        roceperf::params::TransportKind::Tcp,
        None,
        roceperf::params::Role::Client,
    );
    roceperf::results::write_json(&json, &info, &[common::results::bw_result(65536, 10.0)])
        .unwrap();
    let out = finished(
        limited(
            GATE,
            &["-", "--min-bw", "1Gb/s"],
            std::fs::File::open(&json).unwrap().into(),
        ),
        "roce_gate - < r.json",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
