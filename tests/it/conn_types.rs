//! Issue 17, `-c RC|UC|UD` through the binaries: UC write and send tests and UD send tests over soft
//! RoCE v2 on lo with `--validate`, every receiver's loss accounted for; UC and UD across a veth pair
//! with deliberate loss, which is counted and not repaired while the runs still end with exit 0; and
//! the usage errors (TCP cannot follow, READ has no UC, UD no WRITE, -s over the MTU, -c mismatch).
//!
//! The pairs run one at a time: each busy-polls two cores.

use crate::common::{self, Done, Side, pair_on, pair_on_lo, rows, spawn};
use crate::soft_support::{NetnsPair, is_root};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// One run's outcome: both sides' processes and JSON documents.
struct Run {
    server: Done,
    client: Done,
    sj: Value,
    cj: Value,
}

/// Runs `test` with `args` on both sides (in `ns` namespaces when given), each writing --json.
fn run(test: &str, args: &[&str], ns: Option<(&str, &str)>, host: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
    fn side<'a>(args: &[&'a str], json: &'a Path) -> Vec<&'a str> {
        let mut a = args.to_vec();
        a.extend(["--json", json.to_str().unwrap()]);
        a
    }
    let (sargs, cargs) = (side(args, &sj), side(args, &cj));
    let (server, client) = pair_on(
        test,
        Side {
            ns: ns.map(|n| n.0),
            args: sargs,
        },
        Side {
            ns: ns.map(|n| n.1),
            args: cargs,
        },
        host,
    );
    common::assert_both_ok(&format!("{test} {args:?}"), &server, &client);
    let read = |p: &Path| -> Value { common::json_file(p) };
    Run {
        sj: read(&sj),
        cj: read(&cj),
        server,
        client,
    }
}

fn lost(doc: &Value) -> Option<u64> {
    doc["results"][0]["lost_messages"].as_u64()
}

/// What a UC/UD run must show on both sides: its type in the header and the JSON, one row.
fn check_common(r: &Run, conn: &str) {
    for (side, out, doc) in [
        ("server", &r.server.stdout, &r.sj),
        ("client", &r.client.stdout, &r.cj),
    ] {
        assert!(
            out.contains(&format!(" Connection type : {conn}\t")),
            "{side}: {out}"
        );
        assert_eq!(doc["test"]["connection"], conn, "{side}");
        assert_eq!(rows(out).len(), 1, "{side}: {out}");
    }
}

/// The receiving side's accounting: messages that arrived plus those counted lost are what was sent.
fn check_send_bw(r: &Run, n: u64) {
    let got = r.sj["results"][0]["bandwidth"]["messages"]
        .as_u64()
        .unwrap();
    let lost_s = lost(&r.sj).expect("the receiver counts lost messages");
    assert_eq!(got + lost_s, n, "{}", r.server.stdout);
    assert_eq!(
        lost(&r.cj),
        Some(lost_s),
        "the sender's row carries the receiver's count"
    );
    let u = &r.sj["test"]["counters"]["unreliable"];
    assert!(u["messages_received"].as_u64().unwrap() >= got, "{u}");
    assert!(
        r.server.stdout.contains(&format!("lost {lost_s} messages")),
        "{}",
        r.server.stdout
    );
}

/// A ping-pong's accounting: the client has a sample for every iteration but those lost; the server,
/// which sees a loss only as a jump in the iterations, also drops the interval spanning each jump.
fn check_lat(r: &Run, n: u64) {
    for (side, doc, per_loss) in [("server", &r.sj, 2), ("client", &r.cj, 1)] {
        let samples = doc["results"][0]["latency"]["samples"].as_u64().unwrap();
        let l = lost(doc).unwrap_or_else(|| panic!("{side} counts lost iterations"));
        assert!(
            samples <= n && samples + per_loss * l >= n,
            "{side}: {samples} samples, {l} lost of {n}"
        );
    }
}

#[test]
fn uc_and_ud_run_on_soft_v2_over_lo_with_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let n = 300u64;
    let ns = n.to_string();
    let cases: [(&str, &str, &str); 6] = [
        ("write_bw", "UC", "20000"),
        ("send_bw", "UC", "20000"),
        ("write_lat", "UC", "3000"),
        ("send_lat", "UC", "3000"),
        ("send_bw", "UD", "1024"),
        ("send_lat", "UD", "1024"),
    ];
    for (test, conn, size) in cases {
        let args = ["-d", "lo", "-c", conn, "-s", size, "-n", &ns, "--validate"];
        let r = run(test, &args, None, "127.0.0.1");
        check_common(&r, conn);
        match test {
            "send_bw" => check_send_bw(&r, n),
            "write_bw" => {
                // The written side counts WRITEs that never landed; the writer cannot know.
                let l = lost(&r.sj).expect("the written side counts");
                let u = &r.sj["test"]["counters"]["unreliable"];
                let landed = u["messages_received"].as_u64().unwrap();
                assert_eq!(landed + l, n + 100, "warm-up included: {u}");
            }
            _ => check_lat(&r, n),
        }
    }
}

#[test]
fn ud_and_uc_across_a_veth_pair_count_deliberate_loss_and_end_cleanly() {
    if common::skip_unless(is_root(), "network namespaces need root (CI runs as root)") {
        return;
    }
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let pair = NetnsPair::up(&[]);
    let (a, b) = (pair.ns('a'), pair.ns('b'));
    let n = 1000u64;
    let ns = n.to_string();
    for (test, conn, size) in [
        ("send_bw", "UD", "1024"),
        ("send_lat", "UD", "64"),
        ("write_bw", "UC", "3000"),
        ("send_lat", "UC", "3000"),
    ] {
        // 3 % of what each side sends, seeded: a thousand messages lose some for certain.
        let args = [
            "-d",
            "veth0",
            "-c",
            conn,
            "-s",
            size,
            "-n",
            &ns,
            "--validate",
            "--impair",
            "loss=3%,seed=17",
        ];
        let r = run(test, &args, Some((&a, &b)), "10.77.0.1");
        check_common(&r, conn);
        let dropped = |doc: &Value| {
            doc["test"]["counters"]["impair"]["dropped"]
                .as_u64()
                .unwrap()
        };
        assert!(
            dropped(&r.cj) > 0,
            "{test} {conn}: the client's impairment dropped nothing"
        );
        // Nothing is resent: no retransmission, no NAK, no ACK on UC or UD.
        for doc in [&r.sj, &r.cj] {
            let k = &doc["test"]["counters"];
            assert_eq!(
                (k["retransmitted_packets"].as_u64(), k["acks_sent"].as_u64()),
                (Some(0), Some(0)),
                "{k}"
            );
        }
        match test {
            "send_bw" => {
                check_send_bw(&r, n);
                assert!(lost(&r.sj).unwrap() > 0, "{}", r.server.stdout);
                let u = &r.sj["test"]["counters"]["unreliable"];
                assert!(
                    u["psn_gaps"].as_u64().unwrap() > 0,
                    "UD counts PSN gaps: {u}"
                );
            }
            "write_bw" => {
                assert!(lost(&r.sj).unwrap() > 0, "{}", r.server.stdout);
                let u = &r.sj["test"]["counters"]["unreliable"];
                assert!(
                    u["messages_dropped"].as_u64().unwrap() > 0,
                    "UC cuts messages: {u}"
                );
            }
            _ => {
                check_lat(&r, n);
                assert!(lost(&r.cj).unwrap() > 0, "{}", r.client.stdout);
            }
        }
    }
}

/// Runs one side alone and returns it: for errors that come before any peer.
fn alone(test: &str, args: &[&str]) -> Done {
    let port = common::free_port().to_string();
    let mut a = vec!["-p", port.as_str()];
    a.extend_from_slice(args);
    spawn(test, &a).wait(30, test)
}

#[test]
fn what_cannot_run_is_refused_with_exit_2_naming_the_flags() {
    let tcp = alone("send_bw", &["--transport", "tcp", "-c", "UD"]);
    tcp.assert_usage_error("-c UD does not apply to --transport tcp");
    let read = alone("read_bw", &["-d", "lo", "-c", "UC"]);
    read.assert_usage_error("-c UC does not apply to read_bw");
    let write = alone("write_lat", &["-d", "lo", "-c", "UD"]);
    write.assert_usage_error("UD carries only SENDs");
    // lo offers a 4096-byte path MTU: 8 KiB is more than one UD datagram.
    let big = alone("send_bw", &["-d", "lo", "-c", "UD", "-s", "8192"]);
    big.assert_usage_error("-s 8192 is larger than the MTU (4096 bytes");
}

#[test]
fn both_sides_must_run_the_same_connection_type() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let (s, c) = pair_on_lo(
        "send_bw",
        vec!["-d", "lo", "-c", "UC", "-n", "10"],
        vec!["-d", "lo", "-n", "10"],
    );
    common::assert_both_refused(&s, &c, &["give both sides the same -c"]);
}
