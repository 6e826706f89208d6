//! `--persist` (issue 34): a server that serves clients one after another until SIGTERM. Two
//! clients in turn leave two result files; two at once both finish, the second told it waited and
//! for whom (and the server says so too); a client the server cannot serve is refused by name, one
//! killed mid-run fails only its own run, and the server, idle, ends on SIGTERM with exit 0.

use crate::common::schema::assert_valid_file;
use crate::common::{self, Proc, free_port, spawn};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

static ONE_SERVER_AT_A_TIME: Mutex<()> = Mutex::new(());

const RUN: &str = "--transport tcp -D 2";

/// A client of the server on `port` with `extra` flags on top of [`RUN`].
fn client(port: &str, extra: &str) -> Proc {
    let mut a = vec!["-p", port, "--cpu", "1"];
    a.extend(common::argv(RUN));
    a.extend(common::argv(extra));
    a.push("127.0.0.1");
    spawn("write_bw", &a)
}

/// Waits until the server has printed its banner `n` times (it waits for its n-th client).
fn await_waiting(server: &Proc, n: usize) {
    assert!(
        server.wait_stdout_times("Waiting for client", n, 30),
        "the server never waited for client {n}:\n{}{}",
        server.stdout_now(),
        server.stderr_now()
    );
}

fn run_file(dir: &Path, k: u64) -> std::path::PathBuf {
    dir.join(format!("server-run{k}.json"))
}

#[test]
fn a_persisting_server_serves_clients_in_turn_queues_one_refuses_one_and_ends_on_sigterm() {
    let _one = common::one_at_a_time(&ONE_SERVER_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let json = dir.path().join("server.json").display().to_string();
    let mut sa = vec!["-p", &port, "--cpu", "0", "--persist", "--json", &json];
    sa.extend(common::argv(RUN));
    let server = spawn("write_bw", &sa);
    await_waiting(&server, 1);

    // Two clients one after another: two runs, two files.
    for k in 1..=2 {
        client(&port, "")
            .wait(30, &format!("client {k}"))
            .assert_ended(0, &[], "client");
        assert!(run_file(dir.path(), k).exists(), "no file of run {k}");
    }

    // Two at once: the second waits for the first, is told so, and both finish.
    let first = client(&port, "");
    await_waiting(&server, 3);
    std::thread::sleep(Duration::from_millis(300));
    let second = client(&port, "");
    let first = first.wait(30, "the first of two at once");
    let second = second.wait(30, "the second of two at once");
    first.assert_ended(0, &[], "the first of two");
    second.assert_ended(
        0,
        &["is serving 127.0.0.1:", "waits for its turn"],
        "the second",
    );

    // One the server cannot serve: refused, naming the parameter, on both sides.
    let bad = client(&port, "-s 1024").wait(30, "a client with another -s");
    bad.assert_usage_error("parameter mismatch: size");

    // One killed mid-run fails its own run only.
    let killed = client(&port, "");
    std::thread::sleep(Duration::from_millis(1500));
    killed.signal(libc::SIGKILL);
    let _ = killed.wait(10, "the killed client");
    client(&port, "")
        .wait(30, "the client after the killed one")
        .assert_ended(0, &[], "the client after");

    // Runs 1, 2, 3, 4 and 7 ran whole; 5 was refused and 6 failed, and wrote what they had.
    for k in [1, 2, 3, 4, 7] {
        let doc = assert_valid_file("result", &run_file(dir.path(), k));
        assert!(
            doc["test"].get("error").is_none(),
            "run {k}: {}",
            doc["test"]
        );
        assert_eq!(doc["results"].as_array().unwrap().len(), 1, "run {k}");
    }
    await_waiting(&server, 8);
    server.signal(libc::SIGTERM);
    let s = server.wait(10, "the server after SIGTERM");
    assert_eq!(s.code(), 0, "{}{}", s.stdout, s.stderr);
    assert!(
        s.stdout.contains("Stopped by SIGTERM after 7 run(s)"),
        "{}",
        s.stdout
    );
    assert!(s.stderr.contains("waits while 127.0.0.1:"), "{}", s.stderr);
    assert!(
        s.stderr.contains("run 5: parameter mismatch: size"),
        "{}",
        s.stderr
    );
    assert!(
        s.stderr.contains("still serving; the next client is run 7"),
        "{}",
        s.stderr
    );
}

#[test]
fn persist_is_a_servers_flag() {
    let d = spawn(
        "write_bw",
        &["--transport", "tcp", "--persist", "127.0.0.1"],
    )
    .wait(10, "a client given --persist");
    d.assert_usage_error("--persist");
    d.assert_stderr("drop --persist here and give it to the server");
}
