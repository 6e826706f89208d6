//! `--oob perftest`: roceperf against roceperf speaking perftest's out-of-band dialect, for the six tests
//! and the two atomic ones over soft RoCE v2 on lo (and the option sets whose exchange order differs: -b, -a, -q).
//! Pairing with a real perftest is checked in the lab (scripts/interop-rxe.sh).

use crate::common;

use common::{pair_on_lo, rows};
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `test` with `args` on both sides; asserts exit 0 and the number of rows each side prints.
fn pair_rows(test: &str, args: &[&str], want_client: usize, want_server: usize) {
    let mut a = vec!["-d", "lo", "--oob", "perftest"];
    a.extend_from_slice(args);
    let (s, c) = pair_on_lo(test, a.clone(), a);
    let what = format!("{test} {args:?}");
    common::assert_both_ok(&what, &s, &c);
    let (cr, sr) = (rows(&c.stdout), rows(&s.stdout));
    assert_eq!(cr.len(), want_client, "{what} client: {}", c.stdout);
    assert_eq!(sr.len(), want_server, "{what} server: {}", s.stdout);
    assert!(
        c.stdout
            .contains("perftest's dialect, peer announced version 6.27"),
        "{what}: {}",
        c.stdout
    );
    if let (Some(cr), Some(sr)) = (cr.last(), sr.last()) {
        assert_eq!(cr[0], sr[0], "{what}: both sides report the same size");
    }
}

/// Each test, and the option sets whose exchange order differs (-b, -a, -q), in perftest's dialect.
#[test]
fn every_test_pairs_in_perftests_dialect_and_prints_its_rows() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    // (test, args, client rows, server rows): a WRITE or atomic_bw server prints the client's
    // report; a read_lat or atomic_lat server prints no row, as ib_read_lat and ib_atomic_lat.
    for (test, args, want_client, want_server) in [
        ("send_bw", "-n 200", 1, 1),
        ("write_bw", "-n 200", 1, 1),
        ("read_bw", "-n 200 -q 2", 1, 1),
        ("send_lat", "-n 200 -s 5000", 1, 1),
        ("write_lat", "-n 200", 1, 1),
        ("read_lat", "-n 200", 1, 0),
        ("atomic_bw", "-n 200 -q 2 -A CMP_AND_SWAP", 1, 1),
        ("atomic_bw", "-n 200 -b", 1, 1),
        ("atomic_lat", "-n 200", 1, 0),
        ("write_bw", "-n 200 -b -s 8K", 1, 1),
        ("send_bw", "-n 200 -b -s 8K", 1, 1),
        ("send_bw", "-a -n 10", 23, 23),
        ("write_lat", "-a -n 10", 23, 23),
    ] {
        pair_rows(test, &common::argv(args), want_client, want_server);
    }
}

/// Each side of a pair where only one speaks perftest's dialect names the other dialect (issue 33,
/// defect 7): the perftest side recognises roceperf's hello, whichever side writes first.
#[test]
fn a_roceperf_dialect_peer_is_named() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let own = vec!["-d", "lo", "-n", "20", "--connect-timeout", "5"];
    let perftest = [&own[..], &["--oob", "perftest"]].concat();
    let both_or_neither = "give --oob perftest to both sides or to neither";
    let (s, c) = pair_on_lo("write_bw", own.clone(), perftest.clone());
    c.assert_ended(
        2,
        &["--oob perftest", both_or_neither],
        "the perftest client",
    );
    // Its peer spoke another dialect: a setup error (README, exit codes), not a run failure or a panic.
    s.assert_ended(2, &["give this side --oob perftest"], "the roceperf server");
    let (s, c) = pair_on_lo("write_bw", perftest, own);
    s.assert_ended(
        2,
        &["--oob perftest", both_or_neither],
        "the perftest server",
    );
    c.assert_ended(2, &["give this side --oob perftest"], "the roceperf client");
}

/// send_bw exchanges no report in perftest's dialect, so nothing on the wire said the two sides ran
/// different -n (issue 33, defect 6): two roceperf peers compare their run lengths in the version
/// block's padding, which perftest reads as a C string and so never sees.
#[test]
fn two_roceperf_peers_in_perftests_dialect_compare_their_run_length() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let side = |n: &'static str| vec!["-d", "lo", "--oob", "perftest", "-n", n];
    let (s, c) = pair_on_lo("send_bw", side("1000"), side("2000"));
    s.assert_ended(
        2,
        &[
            "this side runs -n 1000, the peer -n 2000",
            "give both sides the same -n",
        ],
        "the send_bw server",
    );
    c.assert_ended(
        2,
        &["this side runs -n 2000, the peer -n 1000"],
        "the send_bw client",
    );
    let timed = vec!["-d", "lo", "--oob", "perftest", "-D", "2"];
    let (s, c) = pair_on_lo("send_bw", side("1000"), timed);
    s.assert_ended(2, &["this side runs -n 1000, the peer -D 2"], "the server");
    c.assert_ended(2, &["this side runs -D 2, the peer -n 1000"], "the client");
}
