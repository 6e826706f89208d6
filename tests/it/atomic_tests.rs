//! roce_atomic_bw and roce_atomic_lat end to end, server and client as separate processes: soft RoCE v2
//! over UDP on lo and the TCP baseline, both `-A` operations, always with `--validate` (every original
//! returned and every word at the server checked), and the exit codes of what they refuse.
//!
//! The pairs run one at a time: each busy-polls two cores, and CI machines have about two.

use crate::common;

use common::{Done, pair_on_lo, pair_with, rows, spawn};
use std::sync::Mutex;

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

const OPS: [&str; 2] = ["FETCH_AND_ADD", "CMP_AND_SWAP"];

/// Both sides exit 0, print perftest's title for `op` and one row of 8 bytes with positive figures, and
/// say that every atomic was checked.
fn assert_ran(what: &str, title: &str, s: &Done, c: &Done) {
    common::assert_both_ok(what, s, c);
    for (side, out) in [("client", &c.stdout), ("server", &s.stdout)] {
        assert!(out.contains(title), "{side} of {what}: {out}");
        // perftest's outstanding reads are an RDMA field: a TCP run leaves it out.
        let tcp = out.contains("Transport type : TCP");
        assert_eq!(out.contains("Outstand reads  : "), !tcp, "{side}: {out}");
        let r = rows(out);
        assert_eq!(r.len(), 1, "{side} of {what} prints one row:\n{out}");
        assert_eq!((r[0][0], r[0][1]), (8.0, 300.0), "{side} of {what}: {out}");
        assert!(r[0][2..].iter().any(|v| *v > 0.0), "{side}: {out}");
        assert!(
            common::unwrapped(out).contains("follow a sequence that fixes every original value"),
            "{side} notes what --validate checks: {out}"
        );
    }
}

fn on_lo(test: &str, args: Vec<&str>) -> (Done, Done) {
    pair_on_lo(test, args.clone(), args)
}

/// Runs both atomic tests with both operations, each pair through `run(test, op)`, and checks that
/// each ran; `over` ends the name each is reported by.
fn assert_each_atomic_runs(over: &str, run: impl Fn(&str, &str) -> (Done, Done)) {
    for op in OPS {
        for (test, kind) in [("atomic_bw", "BW"), ("atomic_lat", "Latency")] {
            let (s, c) = run(test, op);
            assert_ran(
                &format!("{test} -A {op}{over}"),
                &format!("Atomic {op} {kind} Test"),
                &s,
                &c,
            );
        }
    }
}

#[test]
fn atomic_bw_and_lat_over_soft_v2_on_lo_with_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    assert_each_atomic_runs("", |test, op| {
        let qps = if test == "atomic_bw" { "-q 2" } else { "" };
        on_lo(
            test,
            common::argv(&format!("-d lo -A {op} -n 300 {qps} --validate")),
        )
    });
}

#[test]
fn atomic_bw_bidirectional_and_timed_over_soft_with_validate_and_loss() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    // Both sides run atomics at each other and check their own words; the 2 % loss makes the RC engine
    // resend requests, which the responder must answer from its saved results, never run twice.
    let (s, c) = on_lo(
        "atomic_bw",
        common::argv("-d lo -b -A CMP_AND_SWAP -n 300 --validate --impair loss=2%,seed=7"),
    );
    assert_ran(
        "atomic_bw -b",
        "Atomic CMP_AND_SWAP Bidirectional BW Test",
        &s,
        &c,
    );
    // In duration mode the server learns how many operations to expect only from the tally.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let mut client = vec!["-d", "lo", "-D", "2", "--validate"];
    let server = client.clone();
    client.extend(["--json", json.to_str().unwrap()]);
    let (s, c) = pair_on_lo("atomic_bw", server, client);
    common::assert_both_ok("atomic_bw -D 2", &s, &c);
    let doc = common::json_file(&json);
    assert_eq!(doc["test"]["test"]["verb"], "atomic", "{doc}");
    assert_eq!(doc["test"]["atomic_type"], "FETCH_AND_ADD", "{doc}");
    assert_eq!(doc["results"][0]["size_bytes"], 8, "{doc}");
}

#[test]
fn atomics_over_the_tcp_baseline_with_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    assert_each_atomic_runs(" over tcp", |test, op| {
        // -s 8 is what atomics move anyway, so it is accepted (as perftest accepts it).
        let args = ["-A", op, "-n", "300", "-s", "8", "--validate"];
        pair_with(test, &args, &args)
    });
}

#[test]
fn the_two_sides_must_run_the_same_atomic() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let (s, c) = pair_with(
        "atomic_bw",
        &["-n", "300"],
        &["-n", "300", "-A", "CMP_AND_SWAP"],
    );
    common::assert_both_refused(&s, &c, &["atomic type", "give both sides the same -A"]);
}

#[test]
fn what_atomics_refuse_is_a_usage_error_naming_the_flag() {
    for (test, args, expect) in [
        ("atomic_bw", &["-s", "16"][..], "exactly 8 bytes"),
        ("atomic_lat", &["-a"][..], "-a does not apply"),
        ("atomic_bw", &["-I", "64"][..], "-I does not apply"),
        ("atomic_bw", &["-A", "SWAP"][..], "CMP_AND_SWAP"),
        ("write_bw", &["-A", "CMP_AND_SWAP"][..], "-A does not apply"),
        ("atomic_lat", &["-q", "2"][..], "-q does not apply"),
    ] {
        common::assert_refused(test, &[&["--transport", "tcp"], args].concat(), &[expect]);
    }
}

#[test]
fn atomic_help_teaches_what_the_tests_measure() {
    let d = spawn("atomic_bw", &["--help"]).wait(20, "atomic_bw --help");
    assert_eq!(d.code(), 0, "{}", d.stderr);
    for text in [
        "-A, --atomic_type <TYPE>",
        "FETCH_AND_ADD",
        "CMP_AND_SWAP",
        "MsgRate[Mpps]",
        "round trip",
    ] {
        assert!(d.stdout.contains(text), "{text:?} in {}", d.stdout);
    }
    assert!(
        !d.stdout.contains("-a, --all"),
        "atomics refuse -a: {}",
        d.stdout
    );
    let d = spawn("write_bw", &["--help"]).wait(20, "write_bw --help");
    assert!(
        !d.stdout.contains("--atomic_type"),
        "only the atomic tests show -A: {}",
        d.stdout
    );
}
