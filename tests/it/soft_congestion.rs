//! ECN → CNP → DCQCN end to end through the binaries: a soft `roce_write_bw` pair between two
//! namespaces, the client's RoCE v2 datagrams CE-marked by the kernel (`iptables -j ECN
//! --ecn-ip-ect 3` on a random share, as a switch's marking would), `--validate` on. With `--cc dcqcn`
//! the server counts the marks and answers with CNPs that the capture shows (parsed by the wire code:
//! ICRC, opcode 0x81, BECN, the client's QP, DSCP 48 with ECT(0)) and the client cuts its rate; with
//! `--cc none` the marks are counted and nothing answers them. Needs root, iptables, tcpdump and
//! tshark; says so and returns when one is missing. Goodput under marking is a timing figure: it is
//! `scripts/bench.sh`'s CONGESTION rows, not asserted here.

use std::process::Command;

use crate::soft_capture::{Capture, can_run};
use crate::soft_support::NetnsPair;
use crate::vectors::read_pcap;

use roceperf::wire::{CnpRepr, RoceFrame};

/// Marks `share` of the RoCE v2 datagrams through `chain` of side `side`'s mangle table CE: OUTPUT
/// for what it sends (as the socket sends it), PREROUTING for what arrives.
fn mark_ce(pair: &NetnsPair, side: char, chain: &str, share: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.ns(side), "iptables", "-t", "mangle"])
        .args(["-A", chain, "-p", "udp", "--dport", "4791"])
        .args([
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            share,
        ])
        .args(["-j", "ECN", "--ecn-ip-ect", "3"])
        .output()
        .expect("run iptables");
    assert!(
        out.status.success(),
        "iptables ECN rule: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// iptables with the ECN target; otherwise records the skip.
#[track_caller]
fn have_iptables() -> bool {
    let ok = Command::new("iptables")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    !crate::common::skip_unless(ok, "needs iptables (apt-get install -y iptables)")
}

/// The CNPs among captured frames (ICRC verified): each one's IP TOS and what it names.
fn cnps(frames: &[Vec<u8>]) -> Vec<(u8, CnpRepr)> {
    frames
        .iter()
        .filter_map(|f| {
            let frame = RoceFrame::new_checked(f.as_slice()).ok()?;
            frame.verify_icrc().ok()?;
            let cnp = CnpRepr::parse(frame.ib()).ok()?;
            Some((frame.net_header()[1], cnp))
        })
        .collect()
}

/// `write_bw -d veth0 --validate --json` with `flags` on both sides across a `--wire-segments`
/// veth pair whose server's namespace marks `share` of the arriving RoCE packets CE (PREROUTING):
/// the pair (for the rule's counter) and the server's and the client's soft counters.
fn write_bw_marked_on_arrival(
    share: &str,
    flags: &[&str],
    what: &str,
) -> (NetnsPair, serde_json::Value, serde_json::Value) {
    let pair = NetnsPair::up(&["--wire-segments"]);
    mark_ce(&pair, 'a', "PREROUTING", share);
    let (server, client, _) = write_bw(&pair, flags, what);
    (pair, server, client)
}

/// `write_bw -d veth0 --validate --json` with `flags` on both sides of `pair`, both exiting 0: the
/// server's and the client's soft counters, and what the client printed.
fn write_bw(
    pair: &NetnsPair,
    flags: &[&str],
    what: &str,
) -> (serde_json::Value, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
    let args = |json: &std::path::Path| {
        let mut a = vec!["-d", "veth0", "--validate"];
        a.extend(flags);
        a.extend(["--json", json.to_str().unwrap()]);
        a.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let (sa, ca) = (args(&sj), args(&cj));
    let (s, c) = pair.run_pair(
        "write_bw",
        sa.iter().map(String::as_str).collect(),
        ca.iter().map(String::as_str).collect(),
    );
    crate::common::assert_both_ok(what, &s, &c);
    (
        counters(&sj),
        counters(&cj),
        format!("{}{}", c.stdout, c.stderr),
    )
}

/// The soft counters of a run's `--json`.
fn counters(path: &std::path::Path) -> serde_json::Value {
    crate::common::json_file(path)["test"]["counters"].clone()
}

fn run(cc: &str) -> (serde_json::Value, serde_json::Value, Vec<Vec<u8>>, String) {
    let pair = NetnsPair::up(&[]);
    mark_ce(&pair, 'b', "OUTPUT", "0.05");
    // What comes back to the client (ns b) from the server: ACKs and CNPs.
    let cap = Capture::start(Some(&pair.ns('b')), "veth0", "udp and src host 10.77.0.1");
    let (server, client, printed) = write_bw(
        &pair,
        &["-s", "65536", "-n", "3000", "--cc", cc, "-v"],
        &format!("--cc {cc} under CE marks"),
    );
    let (path, _d) = cap.finish();
    (server, client, read_pcap(&path), printed)
}

#[test]
fn ce_marks_bring_cnps_back_and_dcqcn_cuts_the_rate() {
    if !can_run() || !have_iptables() {
        return;
    }
    let (server, client, frames, output) = run("dcqcn");
    let marked = server["np_ecn_marked_roce_packets"].as_u64().unwrap();
    let sent = server["cc"]["np_cnp_sent"].as_u64().unwrap();
    assert!(marked > 100, "the server counts the marks: {server}");
    assert!(
        (1..=marked).contains(&sent),
        "one CNP at most per mark: {server}"
    );
    assert_eq!(client["np_ecn_marked_roce_packets"], 0, "{client}");
    let handled = client["cc"]["rp_cnp_handled"].as_u64().unwrap();
    assert!(handled > 0 && handled <= sent, "{client} after {sent} CNPs");
    assert!(
        client["cc"]["rp_rate_cuts"].as_u64().unwrap() > 0,
        "{client}"
    );
    let lowest = client["cc"]["rp_min_rate_kbps"].as_u64().unwrap();
    assert!(lowest > 0, "a cut leaves a rate: {client}");
    crate::common::assert_contains(&output, "congestion (DCQCN): CNPs sent 0 handled");
    // The CNPs on the wire, as the project's wire code reads them.
    let cnps = cnps(&frames);
    assert!(!cnps.is_empty(), "no CNP among {} frames", frames.len());
    assert!(
        cnps.len() as u64 <= sent,
        "{} captured, {sent} sent",
        cnps.len()
    );
    for (tclass, cnp) in &cnps {
        assert_eq!(*tclass, 0xc2, "DSCP 48 with ECT(0)");
        assert!(cnp.dest_qp > 0);
    }
}

#[test]
fn with_cc_none_marks_are_counted_and_nothing_answers_them() {
    if !can_run() || !have_iptables() {
        return;
    }
    let (server, client, frames, _) = run("none");
    assert!(
        server["np_ecn_marked_roce_packets"].as_u64().unwrap() > 100,
        "{server}"
    );
    for side in [&server, &client] {
        let cc = &side["cc"];
        for key in ["np_cnp_sent", "rp_cnp_handled", "rp_rate_cuts"] {
            assert!(cc.is_null() || cc[key] == 0, "{key}: {side}");
        }
    }
    assert_eq!(cnps(&frames).len(), 0, "{} frames", frames.len());
}

/// The packets side `side`'s mangle PREROUTING rule matched (its only rule).
fn matched(pair: &NetnsPair, side: char) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.ns(side), "iptables", "-t", "mangle"])
        .args(["-L", "PREROUTING", "-v", "-x", "-n"])
        .output()
        .expect("run iptables -L");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .nth(2)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rule counter in: {text}"))
}

/// scripts/bench.sh's congestion phase: the client sends with GSO, the veth ends take no
/// super-datagrams (`netns.sh up --wire-segments`), so the kernel cuts them into packets at the
/// device and the rule in the server's PREROUTING marks packets, not ~20 KB datagrams: every match
/// arrives CE on its own (the server counts exactly what the rule matched) and the share of marked
/// packets is the rule's.
#[test]
fn marks_on_arrival_fall_on_single_packets_when_the_veth_cuts_gso_sends() {
    if !can_run() || !have_iptables() {
        return;
    }
    let (pair, server, _) = write_bw_marked_on_arrival(
        "0.05",
        &["-s", "65536", "-n", "2000", "-m", "1024", "--cc", "none"],
        "--wire-segments, marks on arrival",
    );
    let marked = server["np_ecn_marked_roce_packets"].as_u64().unwrap();
    let received = server["rx_packets"].as_u64().unwrap();
    assert_eq!(marked, matched(&pair, 'a'), "{server}");
    // 2000 messages of 64 packets: 5 % is 6,400, give or take a few hundred.
    let share = marked as f64 / received as f64;
    assert!((0.04..0.06).contains(&share), "{marked} of {received}");
}

/// scripts/bench.sh's congestion phase as a test of what it must not do: DCQCN at the study's
/// slow-link parameters cuts a `--rate_limit 1G` stream of 1 KB WRITEs marked CE on arrival (1 %),
/// and its pacer holds packets for milliseconds. Nothing is lost on the veth, so only a real
/// silence of the peer may send a packet twice: the retransmission timer runs for packets that
/// left and asked, not for those the pacer holds (issue 29's bench resent 11,612 packets per 3 s
/// with no gap NAKed).
#[test]
fn paced_by_dcqcn_a_run_that_loses_nothing_resends_only_after_real_silences() {
    if !can_run() || !have_iptables() {
        return;
    }
    let slow = [
        "rp_dce_tcp_rtt=300",
        "rp_dce_tcp_g=1020",
        "rp_time_reset=300",
        "rp_byte_reset=10000000",
        "rp_threshold=5",
        "rp_ai_rate=5",
        "rp_hai_rate=25",
        "np_min_time_between_cnps=300",
        "rp_rate_reduce_monitor_period=300",
        "rp_clamp_tgt_rate=1",
        "rp_max_rate=1000",
    ];
    let mut flags = vec![
        "-s",
        "65536",
        "-m",
        "1024",
        "-n",
        "3000",
        "--rate_limit",
        "1",
        "--rate_units",
        "g",
        "--cc",
        "dcqcn",
        "-v",
        // Four messages (256 PSNs) in flight, far above what 1 Gb/s needs on a veth: a silence of
        // the server past the ACK timeout goes back N, as rxe does (a parallel test run starved
        // the busy-polling server for 140 ms), and the default depth's 1,024-PSN window then
        // resent more than the bound below at once.
        "-t",
        "4",
    ];
    for p in slow {
        flags.extend(["--cc-param", p]);
    }
    let (_, server, client) =
        write_bw_marked_on_arrival("0.01", &flags, "--cc dcqcn paced under CE marks");
    assert!(
        client["cc"]["rp_rate_cuts"].as_u64().unwrap() > 0,
        "DCQCN cut the rate (else the pacer held nothing): {client}"
    );
    assert_eq!(
        server["naks_sent"]["psn_sequence"], 0,
        "nothing was lost: {server}"
    );
    let (sent, resent) = (
        client["tx_packets"].as_u64().unwrap(),
        client["retransmitted_packets"].as_u64().unwrap(),
    );
    // A peer the scheduler keeps off the CPU for longer than the timeout is a real silence (a
    // parallel test run, a build finishing): late ACKs may cost a few resends, 5 of ~198,000
    // packets on a quiet machine, 89 under a parallel test run, and a silence past the ACK
    // timeout a window (256 PSNs at `-t 4`), twice if the resend meets it too. A timer that counted the pacer's
    // holds resent ~3 % (11,612 of ~366,000 in the bench's 3 s run at these parameters), six times
    // this bound.
    assert!(
        resent * 200 <= sent,
        "at most 0.5 % of the packets resent ({resent} of {sent}): {client}"
    );
    assert!(
        server["duplicate_requests"].as_u64().unwrap() <= resent,
        "the server saw no duplicate the client did not resend: {server}"
    );
}
