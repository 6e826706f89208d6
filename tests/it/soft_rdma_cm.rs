//! `-R` end to end: the six binaries over `--transport soft` on lo (RoCE v2), server and client as
//! separate processes, with their queue pairs connected through the CM (REQ / REP / RTU on QP1) and
//! `--validate`; `-R` refused where it cannot work, naming the flags.

use crate::common;

use common::{Done, SIX, assert_contains, pair_here, pair_on_lo, rows};
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

fn on_lo(test: &str, args: Vec<&str>) -> (Done, Done) {
    pair_on_lo(test, args.clone(), args)
}

fn assert_connected_through_the_cm(test: &str, size: f64, s: &Done, c: &Done) {
    common::assert_both_ok(test, s, c);
    for (side, out) in [("client", &c.stdout), ("server", &s.stdout)] {
        let r = rows(out);
        assert!(!r.is_empty(), "{side} of {test} prints its rows:\n{out}");
        assert_eq!(r[0][0], size, "{side} of {test}: #bytes");
        assert!(r[0][2..].iter().any(|v| *v > 0.0), "{side}: {out}");
        assert!(
            out.contains("connection setup through the CM (-R)"),
            "{side} of {test} says how it connected:\n{out}"
        );
        assert!(out.contains("--validate"), "{side}: {out}");
    }
}

/// The line of `out` that says how the queue pairs connected through the CM.
fn cm_note(out: &str) -> String {
    common::unwrapped(out)
        .lines()
        .find(|l| l.contains("through the CM"))
        .unwrap_or_else(|| panic!("no CM note in:\n{out}"))
        .to_owned()
}

#[test]
fn six_tests_over_soft_with_rdma_cm_and_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for test in SIX {
        let size = common::several_packets(test);
        let args = vec!["-d", "lo", "-R", "-s", size, "-n", "300", "--validate"];
        let (s, c) = on_lo(test, args);
        assert_connected_through_the_cm(test, size.parse().unwrap(), &s, &c);
    }
}

#[test]
fn the_atomic_tests_over_soft_with_rdma_cm_and_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    for (test, op, qps) in [
        ("atomic_bw", "FETCH_AND_ADD", 2),
        ("atomic_bw", "CMP_AND_SWAP", 1),
        ("atomic_lat", "CMP_AND_SWAP", 1),
        ("atomic_lat", "FETCH_AND_ADD", 1),
    ] {
        let json = dir.path().join(format!("{test}-{op}.json"));
        let line = format!("-d lo -R -A {op} -q {qps} -n 300 --validate");
        let server = common::argv(&line);
        let mut client = server.clone();
        client.extend(["--json", json.to_str().unwrap()]);
        let (s, c) = pair_here(test, server, client, "127.0.0.1");
        assert_connected_through_the_cm(test, 8.0, &s, &c);
        let note = cm_note(&c.stdout);
        assert_eq!(note.matches("QPN").count(), qps, "{note}");
        let doc = common::json_file(&json);
        assert_eq!(
            (&doc["test"]["rdma_cm"], &doc["test"]["atomic_type"]),
            (&true.into(), &op.into()),
            "{doc}"
        );
    }
}

#[test]
fn several_queue_pairs_each_get_their_own_cm_connection() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let server = common::argv("-d lo -R -q 3 -s 8192 -n 200 --validate");
    let mut client = server.clone();
    client.extend(["--json", json.to_str().unwrap()]);
    let (s, c) = pair_on_lo("write_bw", server, client);
    assert_connected_through_the_cm("write_bw", 8192.0, &s, &c);
    assert!(c.stdout.contains(" rdma_cm QPs\t : ON"), "{}", c.stdout);
    let doc = common::json_file(&json);
    assert_eq!(doc["test"]["rdma_cm"], true, "{doc}");
    let note = cm_note(&c.stdout);
    assert_eq!(note.matches("QPN").count(), 3, "{note}");
}

#[test]
fn rdma_cm_is_refused_on_tcp_and_roce_v1_naming_the_flags() {
    let out = common::spawn("write_bw", &["--transport", "tcp", "-R"]).wait(20, "tcp -R");
    out.assert_usage_error("-R does not apply to --transport tcp");
    let out = common::spawn("write_bw", &["-d", "lo", "--roce", "v1", "-R"]).wait(20, "v1 -R");
    out.assert_usage_error("-R and --roce v1 cannot be used together");
}

/// perftest's `-R` dialect (`--oob perftest -R`, what `ib_*_bw -R` speaks: its messages on a
/// CM-connected queue pair, binary key records, the data queue pairs connected through the CM
/// between two barriers, DREQ/DREP at the end), both sides ours: every test runs and both exit 0.
/// perftest names the server by its RDMA address, so the server binds one and the client names it.
#[test]
fn six_tests_in_perftests_rdma_cm_dialect() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for test in SIX {
        let size = common::several_packets(test);
        let common = [
            "-d", "lo", "-R", "--oob", "perftest", "-s", size, "-n", "200",
        ];
        let mut server = vec!["--bind", "127.0.7.1"];
        server.extend(common);
        let mut client = vec!["--bind", "127.0.7.2"];
        client.extend(common);
        let (s, c) = pair_here(test, server, client, "127.0.7.1");
        common::assert_both_ok(test, &s, &c);
        let r = rows(&c.stdout);
        assert!(
            !r.is_empty() && r[0][0] == size.parse::<f64>().unwrap(),
            "{}",
            c.stdout
        );
        for out in [&c.stdout, &s.stdout] {
            assert!(out.contains("through the CM (-R)"), "{test}: {out}");
            assert!(out.contains("perftest's dialect"), "{test}: {out}");
        }
    }
}

/// perftest's `-R -c UD` (`--oob perftest -R -c UD`, what `ib_send_bw -R -c UD` speaks), both
/// sides ours: the messages on an RC queue pair beside the UD ones, which SIDR resolves. Where
/// perftest's server needs the client's QPN (send_lat, send_bw -b) the client sends it in a first
/// datagram on each queue pair (a SIDR_REQ carries none in perftest's dialect), so the server's
/// note names the client's queue pairs, as the client's lines print them.
#[test]
fn ud_send_tests_in_perftests_rdma_cm_dialect() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for (test, extra) in [
        ("send_bw", &[][..]),
        ("send_bw", &["-b", "-q", "2"][..]),
        ("send_lat", &[][..]),
    ] {
        let common = [
            "-d", "lo", "-R", "-c", "UD", "--oob", "perftest", "-s", "1000", "-n", "200",
        ];
        let side = |bind: &'static str| {
            let mut v = vec!["--bind", bind];
            v.extend(common);
            v.extend(extra);
            v
        };
        let (s, c) = pair_here(test, side("127.0.7.1"), side("127.0.7.2"), "127.0.7.1");
        common::assert_both_ok(test, &s, &c);
        let r = rows(&c.stdout);
        assert!(!r.is_empty() && r[0][0] == 1000.0, "{}", c.stdout);
        for out in [&c.stdout, &s.stdout] {
            assert_contains(out, "SIDR_REQ/SIDR_REP");
            assert_contains(out, "perftest's dialect");
        }
        if test == "send_lat" || !extra.is_empty() {
            let local: Vec<&str> = c
                .stdout
                .lines()
                .filter_map(|l| l.split("local address: LID 0000 QPN ").nth(1))
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            assert_eq!(
                local.len(),
                1 + usize::from(!extra.is_empty()),
                "{}",
                c.stdout
            );
            for qpn in local {
                assert_contains(&s.stdout, &format!("QPN {qpn} PSN 0x0"));
            }
        }
    }
}

/// A client whose REQ names a port nobody listens on gets REJ "invalid service ID" from the
/// server's CM, keeps asking until --connect-timeout is up (the server may not listen yet), then
/// exits 2 naming the reason.
#[test]
fn a_req_for_a_port_nobody_listens_on_ends_in_exit_2_naming_the_rej() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let port = common::free_port();
    let other = port + 1;
    let line = format!("-d lo --bind 127.0.7.5 -R --oob perftest -p {port}");
    let server = common::spawn("write_bw", &common::argv(&line));
    assert!(server.wait_stdout("Waiting for client", 20));
    let line = format!(
        "-d lo --bind 127.0.7.6 -R --oob perftest -p {other} --connect-timeout 2 127.0.7.5"
    );
    let c = common::spawn("write_bw", &common::argv(&line)).wait(30, "client");
    server.kill();
    assert_eq!(c.code(), 2, "{}{}", c.stdout, c.stderr);
    assert!(
        c.stderr
            .contains(&format!("no CM connection to 127.0.7.5:{other}"))
            && c.stderr.contains("REJ \"invalid service ID\" (reason 8)"),
        "{}",
        c.stderr
    );
}

/// A client whose REQ nobody answers (no CM at that address) gives up after --connect-timeout with
/// exit 2 and says what to check.
#[test]
fn a_req_nobody_answers_ends_in_exit_2() {
    let args =
        common::argv("-d lo --bind 127.0.7.8 -R --oob perftest --connect-timeout 2 127.0.7.9");
    let c = common::spawn("write_bw", &args).wait(30, "client");
    assert_eq!(c.code(), 2, "{}{}", c.stdout, c.stderr);
    assert!(
        c.stderr.contains("no CM connection to 127.0.7.9:18515")
            && c.stderr.contains("is the server running with -R"),
        "{}",
        c.stderr
    );
}

/// `-R -c UD`: each UD queue pair learns the server's QPN and Q_Key from a SIDR_REP (rdma_cm's UDP
/// port space) instead of REQ / REP / RTU; the datagrams then carry rdma_cm's Q_Key.
#[test]
fn ud_send_tests_over_soft_with_rdma_cm_sidr_and_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for (test, qps) in [("send_bw", 2), ("send_lat", 1)] {
        let line = format!("-d lo -R -c UD -q {qps} -s 1000 -n 300 --validate");
        let (s, c) = on_lo(test, common::argv(&line));
        assert_connected_through_the_cm(test, 1000.0, &s, &c);
        for out in [&s.stdout, &c.stdout] {
            let note = cm_note(out);
            assert!(note.contains("PSN 0x0"), "UD has no PSN to agree: {note}");
            assert!(
                note.contains("SIDR_REQ/SIDR_REP"),
                "resolved, not connected: {note}"
            );
            assert_eq!(note.matches("QPN").count(), qps, "{note}");
        }
    }
}

/// SIDR has no RTU: a server whose SIDR_REP is lost must still answer the requester's repeats
/// while it waits for the peer out of band (before, the requester asked nine times unanswered and
/// both sides failed after the connect timeout). The server's impairer drops what it sends, which
/// for a UD send_bw server is only its SIDR_REPs; seed 3 loses the first one.
#[test]
fn a_lost_sidr_rep_is_sent_again_when_the_requester_asks_again() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let base = common::argv("-d lo -R -c UD -s 1000 -n 300 --validate --connect-timeout 8");
    let mut server = base.clone();
    server.extend([
        "--impair",
        "loss=50%,seed=3",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (s, c) = pair_on_lo("send_bw", server, base);
    assert_connected_through_the_cm("send_bw", 1000.0, &s, &c);
    // The scenario happened: the server's impairer dropped a SIDR_REP (the only packets a UD
    // send_bw server sends).
    let doc = common::json_file(&json);
    let dropped = doc["test"]["counters"]["impair"]["dropped"].as_u64();
    assert!(dropped.is_some_and(|n| n >= 1), "{doc}");
}
