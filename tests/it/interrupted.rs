//! Ctrl-C on either side of a `-n` / `-D` run (issue 34): the signalled side and its peer both stop
//! within moments, print the size cut short, write every file marked `interrupted` (the JSON's
//! `test.interrupted`, valid against the schema; the CSV's `interrupted` column on that size's row),
//! and exit 128 + the signal's number; the peer says "peer interrupted". A second signal ends the
//! process at once.

use crate::common::schema::{assert_valid_file, result_csv};
use crate::common::{self, Done, Proc};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A server and a client of `test` with `args` on 127.0.0.1, each writing `<role>.json` and
/// `<role>.csv` in `dir`; returns them once the client prints its table's header (connected).
fn start(test: &str, args: &str, dir: &Path) -> (Proc, Proc) {
    let (server, client) = common::start_pair(test, &common::argv(args), |role| {
        ["json", "csv"]
            .into_iter()
            .flat_map(|ext| {
                [
                    format!("--{ext}"),
                    dir.join(format!("{role}.{ext}")).display().to_string(),
                ]
            })
            .collect()
    });
    assert!(
        client.wait_stdout("#bytes", 30),
        "{test}: the client never started its table:\n{}{}",
        client.stdout_now(),
        client.stderr_now()
    );
    (server, client)
}

/// What one side left of a run a signal cut short during its one size: exit `code`, the console's
/// and stderr's words, and both files marked `by`; returns the JSON's last result.
fn check_side(d: &Done, dir: &Path, role: &str, by: &str, code: i32, size: u64) -> Value {
    assert_eq!(d.code(), code, "{role}:\n{}{}", d.stdout, d.stderr);
    let said = match by {
        "peer" => "peer interrupted".to_string(),
        sig => format!("interrupted by {sig}"),
    };
    assert!(d.stderr.contains(&said), "{role}: {}", d.stderr);
    assert!(
        !d.stderr.contains("error:"),
        "{role}: an interruption is no error: {}",
        d.stderr
    );
    assert!(
        d.stdout
            .contains(&format!(" during size {size}; its row holds")),
        "{role}:\n{}",
        d.stdout
    );
    let doc = assert_valid_file("result", &dir.join(format!("{role}.json")));
    let i = &doc["test"]["interrupted"];
    assert_eq!(i["by"], by, "{role}: {i}");
    assert_eq!(i["size_bytes"], size, "{role}: {i}");
    assert_eq!(i["partial"], true, "{role}: {i}");
    let (h, recs) = result_csv(&dir.join(format!("{role}.csv")));
    let at = |n: &str| h.iter().position(|c| c == n).unwrap();
    let last = recs.last().expect("the size cut short has its row");
    assert_eq!(&last[at("interrupted")], by, "{role}: {last:?}");
    assert_eq!(&last[at("size_bytes")], size.to_string(), "{role}");
    doc["results"].as_array().unwrap().last().unwrap().clone()
}

/// Runs a pair, signals `side` with `sig` about a second into its run, and checks both.
fn interrupt(test: &str, args: &str, side: &str, sig: libc::c_int, size: u64) -> (Value, Value) {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = start(test, args, dir.path());
    std::thread::sleep(Duration::from_millis(1000));
    let (signalled, peer, peer_side) = match side {
        "client" => (client, server, "server"),
        _ => (server, client, "client"),
    };
    let (name, code) = match sig {
        libc::SIGINT => ("SIGINT", 130),
        _ => ("SIGTERM", 143),
    };
    let sent = Instant::now();
    signalled.signal(sig);
    let signalled = signalled.wait(30, &format!("{test} {side} after {name}"));
    let peer = peer.wait(30, &format!("{test} {peer_side} after its peer's {name}"));
    // A -D 10 run that went on would take 9 s more; both ended with the signal.
    assert!(
        sent.elapsed() < Duration::from_secs(8),
        "{:?}",
        sent.elapsed()
    );
    let mine = check_side(&signalled, dir.path(), side, name, code, size);
    let theirs = check_side(&peer, dir.path(), peer_side, "peer", code, size);
    (mine, theirs)
}

#[test]
fn sigint_to_a_tcp_client_mid_n_keeps_what_completed_on_both_sides() {
    let (client, server) = interrupt(
        "write_bw",
        "--transport tcp -s 65536 -n 100000000",
        "client",
        libc::SIGINT,
        65536,
    );
    // The client measured: its row counts the messages that completed, far fewer than -n.
    let done = client["iterations"].as_u64().unwrap();
    assert!(done > 0 && done < 100_000_000, "{client}");
    assert_eq!(client["bandwidth"]["messages"], done);
    assert!(client["bandwidth"]["avg_gbps"].as_f64().unwrap() > 0.0);
    // The server prints the client's figures (write_bw's passive side).
    assert_eq!(server["iterations"], client["iterations"]);
}

#[test]
fn sigint_to_a_soft_server_stops_the_sending_client_with_the_servers_figures() {
    // send_bw's server is the receiver: it measured, and a -n receiver stops on the signal with
    // what arrived, not waiting for messages the client will no longer send.
    let (server, client) = interrupt(
        "send_bw",
        "-d lo -s 4096 -n 100000000",
        "server",
        libc::SIGINT,
        4096,
    );
    let got = server["iterations"].as_u64().unwrap();
    assert!(got > 0 && got < 100_000_000, "{server}");
    assert!(client["iterations"].as_u64().unwrap() > 0, "{client}");
}

#[test]
fn sigterm_to_a_soft_latency_client_mid_d_keeps_its_samples() {
    let (client, server) = interrupt(
        "write_lat",
        "-d lo -s 64 -D 10 -f 0",
        "client",
        libc::SIGTERM,
        64,
    );
    for (role, r) in [("client", &client), ("server", &server)] {
        let samples = r["latency"]["samples"].as_u64().unwrap();
        assert!(samples > 0, "{role}: {r}");
        assert_eq!(r["iterations"], samples, "{role}");
    }
}

#[test]
fn sigint_to_a_tcp_server_mid_d_stops_the_measuring_client() {
    let (server, client) = interrupt(
        "read_bw",
        "--transport tcp -s 65536 -D 10 -f 0",
        "server",
        libc::SIGINT,
        65536,
    );
    let ns = client["bandwidth"]["elapsed_ns"].as_u64().unwrap();
    // The window ended at the stop, about a second in, not at -D 10.
    assert!(ns > 0 && ns < 8_000_000_000, "{client}");
    assert_eq!(server["iterations"], client["iterations"]);
}

#[test]
fn a_second_signal_ends_the_process_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = start("write_bw", "--transport tcp -D 10 -f 0", dir.path());
    // A server that no longer answers: the client's first SIGINT stops its run, and it then waits
    // for the server's results; the second ends it there.
    server.signal(libc::SIGSTOP);
    client.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    client.signal(libc::SIGINT);
    let d = client.wait(10, "the client after a second SIGINT");
    assert_eq!(d.status.signal(), Some(libc::SIGINT), "{d:?}");
    server.signal(libc::SIGCONT);
    server.signal(libc::SIGKILL);
    let _ = server.wait(10, "the server");
}
