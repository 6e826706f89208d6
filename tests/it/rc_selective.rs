//! Selective repeat (issue 15) at virtual time over the simulated link: the same randomised
//! workloads as `rc_lossy` (SEND, WRITE with and without immediate, READ, atomics, both directions,
//! PSNs across the wrap), every byte delivered once and in order of completion, for both
//! recoveries, under loss, bursts, duplication, reordering and corruption.

use crate::rc_lossy::run_with;
use roceperf::params::Recovery;
use roceperf::transport::soft::sim::LinkConfig;

#[test]
fn selective_repeat_delivers_exactly_once_over_one_percent_loss() {
    for seed in 2_000..2_008 {
        run_with(seed, LinkConfig::lossy(0.01), Recovery::Sr);
    }
}

#[test]
fn selective_repeat_delivers_exactly_once_over_five_percent_loss() {
    for seed in 6_000..6_008 {
        run_with(seed, LinkConfig::lossy(0.05), Recovery::Sr);
    }
}

use crate::rc_harness::*;
use roceperf::transport::SendOp;
use roceperf::transport::soft::rc::{Counters, QpConfig};

/// What one stream of 64 KiB WRITEs achieved at virtual time.
#[derive(Debug)]
struct Stream {
    gbps: f64,
    a: Counters,
}

/// `msgs` WRITEs of 64 KiB at PMTU 4096, 128 in flight, over a 10 Gb/s link with a 5 µs one-way
/// delay that loses `loss` of its packets in both directions (independently, or in bursts of
/// `burst`): the goodput at virtual time.
fn stream(recovery: Recovery, loss: f64, burst: f64, msgs: u64) -> Stream {
    const LEN: u32 = 65_536;
    let link = LinkConfig {
        delay_ns: 5_000,
        rate_gbps: 10.0,
        loss,
        burst,
        ..LinkConfig::perfect()
    };
    let mut s = Setup::new(4096, 128 * LEN as usize);
    s.ab = link.clone();
    s.ba = link;
    s.tweak = match recovery {
        Recovery::Gbn => |c: &mut QpConfig| c.max_unacked_psns = 1024,
        Recovery::Sr => |c: &mut QpConfig| {
            c.max_unacked_psns = 1024;
            c.recovery = Recovery::Sr;
        },
    };
    let (mut p, _, kb) = s.build();
    let mut posted = 0u64;
    let post = |p: &mut roceperf::transport::soft::sim::SimPair, i: u64| {
        let at_b = at(&kb, (i % 128) * u64::from(LEN));
        p.a.post_send(&wr(i, SendOp::Write, (i % 128) * u64::from(LEN), LEN, at_b))
            .unwrap();
    };
    while posted < msgs.min(128) {
        post(&mut p, posted);
        posted += 1;
    }
    loop {
        let done = p.a_done.len() as u64;
        let ok = p.run_until(600_000_000_000, |p| p.a_done.len() as u64 > done);
        assert!(
            ok,
            "{recovery} loss {loss}: stuck at {} of {msgs}",
            p.a_done.len()
        );
        while posted < msgs && posted < p.a_done.len() as u64 + 128 {
            post(&mut p, posted);
            posted += 1;
        }
        if p.a_done.len() as u64 == msgs {
            break;
        }
    }
    assert!(
        p.a_done
            .iter()
            .all(|c| c.status == roceperf::transport::CompletionStatus::Success)
    );
    Stream {
        gbps: (msgs * u64::from(LEN) * 8) as f64 / p.now as f64,
        a: *p.a.counters(),
    }
}

/// The targets of issue 15 at virtual time, on a 10 Gb/s link: at 1 % loss selective repeat keeps
/// at least half its loss-free goodput and ten times go-back-N's; at 0.01 % go-back-N keeps 90 %.
#[test]
fn selective_repeat_keeps_goodput_where_go_back_n_collapses() {
    let msgs = 600;
    let clean = stream(Recovery::Sr, 0.0, 0.0, msgs).gbps;
    let gbn_clean = stream(Recovery::Gbn, 0.0, 0.0, msgs).gbps;
    let sr1 = stream(Recovery::Sr, 0.01, 0.0, msgs);
    let gbn1 = stream(Recovery::Gbn, 0.01, 0.0, msgs);
    let gbn_tiny = stream(Recovery::Gbn, 0.0001, 0.0, msgs);
    eprintln!(
        "clean sr {clean:.2} gbn {gbn_clean:.2} Gb/s; 1%: sr {:.2} gbn {:.2}; 0.01%: gbn {:.2}\n sr {:?}\n gbn {:?}",
        sr1.gbps, gbn1.gbps, gbn_tiny.gbps, sr1.a, gbn1.a
    );
    assert!(sr1.gbps >= 0.5 * clean, "sr at 1%: {sr1:?} vs {clean}");
    assert!(sr1.gbps >= 10.0 * gbn1.gbps, "sr {sr1:?} vs gbn {gbn1:?}");
    assert!(
        gbn_tiny.gbps >= 0.8 * gbn_clean,
        "gbn at 0.01%: {gbn_tiny:?}"
    );
}

/// One WRITE at a time, each answered (a ping-pong's shape), over a link that loses 5 % both ways:
/// go-back-N waits its 67 ms ACK timeout for every lost tail packet, selective repeat its short one.
fn ping_pong(recovery: Recovery) -> (u64, Counters) {
    let link = LinkConfig {
        delay_ns: 5_000,
        loss: 0.05,
        ..LinkConfig::perfect()
    };
    let mut s = Setup::new(1024, 4096);
    s.ab = link.clone();
    s.ba = link;
    s.seed = 9;
    if recovery == Recovery::Sr {
        s.tweak = |c: &mut QpConfig| c.recovery = Recovery::Sr;
    }
    let (mut p, _, kb) = s.build();
    for i in 0..200u64 {
        p.a.post_send(&wr(i, SendOp::Write, 0, 64, at(&kb, 1024)))
            .unwrap();
        run_to(&mut p, i as usize + 1, 0);
    }
    (p.now, *p.a.counters())
}

#[test]
fn a_lost_ping_costs_the_short_timeout_under_selective_repeat() {
    let (gbn_ns, gbn) = ping_pong(Recovery::Gbn);
    let (sr_ns, sr) = ping_pong(Recovery::Sr);
    eprintln!("200 pings at 5% loss: gbn {gbn_ns} ns {gbn:?}\n sr {sr_ns} ns {sr:?}");
    assert!(gbn.timeouts > 5 && sr.timeouts > 5, "{gbn:?} {sr:?}");
    // Each lost ping or ACK costs 67 ms under go-back-N, 0.25 ms under selective repeat.
    assert!(sr_ns * 50 < gbn_ns, "sr {sr_ns} ns, gbn {gbn_ns} ns");
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random workloads (every operation, both directions, PSNs across the wrap) over links that
    /// lose (independently or in bursts), duplicate, reorder, delay and corrupt: whichever recovery,
    /// every byte arrives once, every completion is in order and matches its work request.
    #[test]
    fn every_byte_once_and_in_order_whatever_the_link_and_recovery(
        seed in any::<u64>(),
        loss in 0.0..0.05f64,
        burst in prop_oneof![Just(0.0), 2.0..8.0f64],
        duplicate in 0.0..0.05f64,
        reorder in 0.0..0.05f64,
        jitter_ns in prop_oneof![Just(0u64), 0..2_000u64],
        sr in any::<bool>(),
    ) {
        let link = LinkConfig {
            delay_ns: 2_000,
            jitter_ns,
            loss,
            burst,
            duplicate,
            reorder,
            reorder_delay_ns: 10_000,
            corrupt: loss / 4.0,
            ..LinkConfig::perfect()
        };
        let recovery = if sr { Recovery::Sr } else { Recovery::Gbn };
        run_with(seed, link, recovery);
    }
}

/// The study's virtual-time table (docs/lossy-roce.md): goodput of both recoveries on the 10 Gb/s
/// simulated link at each loss rate, Bernoulli and in bursts of 8. Prints; `--ignored --nocapture`.
#[test]
#[ignore = "prints the table of docs/lossy-roce.md; run with --ignored --nocapture"]
fn virtual_time_loss_table() {
    for burst in [0.0, 8.0] {
        eprintln!(
            "burst {burst}: loss | gbn Gb/s (retx/pkt, timeouts) | sr Gb/s (retx/pkt, timeouts)"
        );
        for loss in [0.0, 0.0001, 0.001, 0.01, 0.05] {
            let msgs = if loss >= 0.05 { 150 } else { 600 };
            let g = stream(Recovery::Gbn, loss, burst, msgs);
            let s = stream(Recovery::Sr, loss, burst, msgs);
            let per = |c: &Counters| c.retransmitted_packets as f64 / (msgs * 16) as f64;
            eprintln!(
                "{:>6}% | {:6.3} ({:.3}, {}) | {:6.3} ({:.3}, {})",
                loss * 100.0,
                g.gbps,
                per(&g.a),
                g.a.timeouts,
                s.gbps,
                per(&s.a),
                s.a.timeouts
            );
        }
    }
}
