//! Issue 15 through the public API: `--impair`, `--impair-seed` and `--recovery` on the command line;
//! two soft endpoints that negotiate selective repeat (or do not) and repair deliberate loss,
//! duplication, reordering and corruption with it, every byte checked.

use crate::common::assert_contains;
use crate::soft_support;

use roceperf::cli::Options;
use roceperf::params::{Recovery, TestKind};
use roceperf::transport::soft::endpoint::SoftEndpoint;
use roceperf::transport::soft::io::impair::ImpairConfig;
use soft_support::endpoints::{connect, exchange, free_port, udp_cfg};

fn parse(args: &[&str]) -> Result<Options, String> {
    let mut v = vec!["roce_write_bw"];
    v.extend_from_slice(args);
    let test: TestKind = "write_bw".parse().unwrap();
    match Options::try_parse_from(test, v) {
        Ok(Ok(o)) => Ok(o),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn the_flags_parse_on_soft_and_are_refused_elsewhere() {
    let o = parse(&[
        "-d",
        "lo",
        "--impair",
        "loss=1%,burst=4,rx:dup=0.5%",
        "--impair-seed",
        "9",
        "--recovery",
        "sr",
    ])
    .unwrap();
    let i = o.device.impair.unwrap();
    assert_eq!((i.loss, i.burst, i.rx.duplicate), (0.01, 4.0, 0.005));
    assert_eq!(
        (o.device.impair_seed, o.device.recovery),
        (Some(9), Recovery::Sr)
    );
    assert_eq!(parse(&["-d", "lo"]).unwrap().device.recovery, Recovery::Gbn);
    let e = parse(&["-d", "lo", "--impair", "los=1%"]).unwrap_err();
    assert_contains(&e, "--impair: unknown key 'los'");
    for flags in [
        &["--impair", "loss=1%"][..],
        &["--impair-seed", "3"],
        &["--recovery", "sr"],
    ] {
        let mut args = vec!["--transport", "tcp"];
        args.extend_from_slice(flags);
        let e = parse(&args).unwrap_err();
        assert!(
            e.starts_with(&format!("{} does not apply to --transport tcp", flags[0])),
            "{e}"
        );
    }
}

fn lossy(bind: &str, port: u16, recovery: Recovery, seed: u64) -> SoftEndpoint {
    let mut c = udp_cfg(bind, port);
    c.impair = Some(ImpairConfig {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.02,
        corrupt: 0.005,
        seed,
        ..ImpairConfig::default()
    });
    c.recovery = recovery;
    c.timeout = 8;
    SoftEndpoint::open(c).unwrap()
}

#[test]
fn selective_repeat_repairs_deliberate_impairment_when_both_sides_ask() {
    let port = free_port("127.0.15.1");
    let mut a = lossy("127.0.15.1", port, Recovery::Sr, 21);
    let mut b = lossy("127.0.15.2", port, Recovery::Sr, 22);
    assert_eq!(a.agree_recovery(Recovery::Sr), Recovery::Sr);
    assert_eq!(b.agree_recovery(Recovery::Sr), Recovery::Sr);
    assert_contains(&a.describe(), "loss recovery: selective repeat");
    connect(&mut a, &mut b);
    for _ in 0..3 {
        exchange(&mut a, &mut b);
    }
    let (ka, kb) = (a.counters(), b.counters());
    assert!(
        ka.impair.dropped > 0 && kb.impair.dropped > 0,
        "{ka:?} {kb:?}"
    );
    // Losses are repaired by resending what was lost, reported by SACK NAKs.
    assert!(
        ka.retransmitted_packets > 0 && kb.naks_sent.psn_seq > 0,
        "{ka:?} {kb:?}"
    );
}

#[test]
fn a_peer_that_does_not_ask_for_selective_repeat_gets_go_back_n() {
    let port = free_port("127.0.15.3");
    let mut a = lossy("127.0.15.3", port, Recovery::Sr, 31);
    let mut b = lossy("127.0.15.4", port, Recovery::Gbn, 32);
    assert_eq!(a.agree_recovery(Recovery::Gbn), Recovery::Gbn);
    assert_eq!(b.agree_recovery(Recovery::Sr), Recovery::Gbn);
    assert_contains(
        &a.describe(),
        "go-back-N: this side asked for --recovery sr, the peer did not",
    );
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    assert!(a.counters().retransmitted_packets > 0);
}

#[test]
fn gbn_rxe_keeps_rxe_timing_against_a_roceperf_peer_and_still_repairs() {
    let port = free_port("127.0.15.5");
    let mut a = lossy("127.0.15.5", port, Recovery::GbnRxe, 41);
    let mut b = lossy("127.0.15.6", port, Recovery::Sr, 42);
    // What each side tells the other: gbn-rxe is go-back-N on the wire.
    assert_eq!(Recovery::GbnRxe.asked(), Recovery::Gbn);
    assert_eq!(a.agree_recovery(Recovery::Sr.asked()), Recovery::GbnRxe);
    assert_eq!(b.agree_recovery(Recovery::GbnRxe.asked()), Recovery::Gbn);
    assert_contains(
        &a.describe(),
        "loss recovery: go-back-N timed as rxe times it",
    );
    assert_contains(
        &b.describe(),
        "go-back-N: this side asked for --recovery sr, the peer did not",
    );
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    assert!(a.counters().retransmitted_packets > 0);
}
