//! `--oob perftest`: roceperf against roceperf speaking perftest's out-of-band dialect, for the six tests
//! and the two atomic ones over soft RoCE v2 on lo (and the option sets whose exchange order differs: -b, -a, -q).
//! Pairing with a real perftest is checked in the lab (scripts/interop-rxe.sh).

use crate::common;

use common::{Side, pair_on, rows};
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `test` with `args` on both sides; asserts exit 0 and the number of rows each side prints.
fn pair_rows(test: &str, args: &[&str], want_client: usize, want_server: usize) {
    let _one = ONE_PAIR_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut a = vec!["-d", "lo", "--oob", "perftest"];
    a.extend_from_slice(args);
    let (s, c) = pair_on(
        test,
        Side {
            ns: None,
            args: a.clone(),
        },
        Side { ns: None, args: a },
        "127.0.0.1",
    );
    assert_eq!(
        (c.code(), s.code()),
        (0, 0),
        "{test} {args:?}\nclient:\n{}{}\nserver:\n{}{}",
        c.stdout,
        c.stderr,
        s.stdout,
        s.stderr
    );
    assert_eq!(rows(&c.stdout).len(), want_client, "client: {}", c.stdout);
    assert_eq!(rows(&s.stdout).len(), want_server, "server: {}", s.stdout);
    assert!(
        c.stdout
            .contains("perftest's dialect, peer announced version 6.27"),
        "{}",
        c.stdout
    );
    if let (Some(cr), Some(sr)) = (rows(&c.stdout).last(), rows(&s.stdout).last()) {
        assert_eq!(cr[0], sr[0], "both sides report the same size");
    }
}

#[test]
fn send_bw() {
    pair_rows("send_bw", &["-n", "200"], 1, 1);
}

#[test]
fn write_bw_server_prints_the_clients_report() {
    pair_rows("write_bw", &["-n", "200"], 1, 1);
}

#[test]
fn read_bw() {
    pair_rows("read_bw", &["-n", "200", "-q", "2"], 1, 1);
}

#[test]
fn send_lat() {
    pair_rows("send_lat", &["-n", "200", "-s", "5000"], 1, 1);
}

#[test]
fn write_lat() {
    pair_rows("write_lat", &["-n", "200"], 1, 1);
}

#[test]
fn read_lat_server_prints_no_row_as_ib_read_lat() {
    pair_rows("read_lat", &["-n", "200"], 1, 0);
}

#[test]
fn atomic_bw_server_prints_the_clients_report() {
    pair_rows(
        "atomic_bw",
        &["-n", "200", "-q", "2", "-A", "CMP_AND_SWAP"],
        1,
        1,
    );
    pair_rows("atomic_bw", &["-n", "200", "-b"], 1, 1);
}

#[test]
fn atomic_lat_server_prints_no_row_as_ib_atomic_lat() {
    pair_rows("atomic_lat", &["-n", "200"], 1, 0);
}

#[test]
fn bidirectional_write_and_send_bw() {
    pair_rows("write_bw", &["-n", "200", "-b", "-s", "8K"], 1, 1);
    pair_rows("send_bw", &["-n", "200", "-b", "-s", "8K"], 1, 1);
}

#[test]
fn all_sizes_sweeps() {
    pair_rows("send_bw", &["-a", "-n", "10"], 23, 23);
    pair_rows("write_lat", &["-a", "-n", "10"], 23, 23);
}

#[test]
fn a_roceperf_dialect_peer_is_named() {
    let _one = ONE_PAIR_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (s, c) = pair_on(
        "write_bw",
        Side {
            ns: None,
            args: vec!["-d", "lo", "-n", "20"],
        },
        Side {
            ns: None,
            args: vec![
                "-d",
                "lo",
                "-n",
                "20",
                "--oob",
                "perftest",
                "--connect-timeout",
                "2",
            ],
        },
        "127.0.0.1",
    );
    assert_eq!(c.code(), 2, "{}", c.stderr);
    assert!(c.stderr.contains("--oob perftest"), "{}", c.stderr);
    // Its peer spoke another dialect: a setup error (README, exit codes), not a run failure or a panic.
    assert_eq!(s.code(), 2, "{}", s.stderr);
}
