//! Selective repeat (issue 15) at virtual time over the simulated link: the same randomised
//! workloads as `rc_lossy` (SEND, WRITE with and without immediate, READ, atomics, both directions,
//! PSNs across the wrap), every byte delivered once and in order of completion, for both
//! recoveries, under loss, bursts, duplication, reordering and corruption.

use crate::rc_lossy::{Recover, run_with};
use roceperf::params::Recovery;
use roceperf::transport::soft::sim::LinkConfig;

#[test]
fn selective_repeat_delivers_exactly_once_over_one_percent_loss() {
    for seed in 2_000..2_008 {
        run_with(seed, LinkConfig::lossy(0.01), Recover::Sr);
    }
}

#[test]
fn selective_repeat_delivers_exactly_once_over_five_percent_loss() {
    for seed in 6_000..6_008 {
        run_with(seed, LinkConfig::lossy(0.05), Recover::Sr);
    }
}

use crate::rc_harness::*;
use roceperf::transport::soft::rc::{Counters, QpConfig};

/// `msgs` 64 KiB WRITEs of one recovery with the soft transport's window (1024 PSNs) at `loss`
/// (in bursts of `burst` when not 0): see [`stream`].
fn run(recovery: Recovery, loss: f64, burst: f64, msgs: u64) -> Stream {
    stream(&StreamSpec {
        burst,
        ..StreamSpec::new(recovery, loss, msgs)
    })
}

/// The targets of issue 15 at virtual time, on a 10 Gb/s link: at 1 % loss selective repeat keeps
/// at least half its loss-free goodput and ten times go-back-N's as rxe runs it; at 0.01 %
/// go-back-N between roceperf endpoints keeps 90 % (`virtual_time_loss_table` over more seeds).
#[test]
fn selective_repeat_keeps_goodput_where_go_back_n_collapses() {
    let msgs = 600;
    let clean = run(Recovery::Sr, 0.0, 0.0, msgs).gbps;
    let gbn_clean = run(Recovery::Gbn, 0.0, 0.0, msgs).gbps;
    let sr1 = run(Recovery::Sr, 0.01, 0.0, msgs);
    let rxe1 = stream(&StreamSpec {
        gbn_fast: false,
        loss_window: false,
        ..StreamSpec::new(Recovery::Gbn, 0.01, msgs)
    });
    let gbn_tiny = run(Recovery::Gbn, 0.0001, 0.0, 2000);
    eprintln!(
        "clean sr {clean:.2} gbn {gbn_clean:.2} Gb/s; 1%: sr {:.2} gbn as rxe {:.2}; 0.01%: gbn {:.2}\n sr {:?}\n gbn {:?}",
        sr1.gbps, rxe1.gbps, gbn_tiny.gbps, sr1.a, rxe1.a
    );
    assert!(sr1.gbps >= 0.5 * clean, "sr at 1%: {sr1:?} vs {clean}");
    assert!(sr1.gbps >= 10.0 * rxe1.gbps, "sr {sr1:?} vs gbn {rxe1:?}");
    assert!(gbn_tiny.lost_ab > 0, "a loss to repair: {gbn_tiny:?}");
    assert!(
        gbn_tiny.gbps >= 0.9 * gbn_clean,
        "gbn at 0.01%: {gbn_tiny:?}"
    );
}

/// One WRITE at a time, each answered (a ping-pong's shape), over a link that loses 5 % both ways:
/// go-back-N waits its 67 ms ACK timeout for every lost tail packet, selective repeat its short one.
fn ping_pong(recovery: Recovery) -> (u64, Counters) {
    let mut s = Setup::new(1024, 4096);
    s.seed = 9;
    if recovery == Recovery::Sr {
        s.tweak = |c: &mut QpConfig| c.recovery = Recovery::Sr;
    }
    lossy_pings(s, 200)
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
        recover in 0..4usize,
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
        run_with(seed, link, Recover::ALL[recover]);
    }
}

/// The study's virtual-time table (docs/lossy-roce.md): goodput on the 10 Gb/s simulated link at
/// each loss rate, Bernoulli and in bursts of 8, of go-back-N as rxe runs it, go-back-N between
/// roceperf endpoints with a fixed window (the probe only) and as they run it (the probe and the
/// loss-reactive window), and selective repeat; the mean of three seeds, with enough messages for
/// about ten loss events at 0.01 %. Prints, then checks issue 15's targets on it;
/// `cargo test --release --test it -- --ignored virtual_time_loss_table --nocapture`.
#[test]
#[ignore = "prints the table of docs/lossy-roce.md; run with --release --ignored --nocapture"]
fn virtual_time_loss_table() {
    const RATES: [f64; 5] = [0.0, 0.0001, 0.001, 0.01, 0.05];
    let variants: [(&str, Recovery, bool, bool); 4] = [
        ("gbn as rxe", Recovery::Gbn, false, false),
        ("gbn, fixed window", Recovery::Gbn, true, false),
        ("gbn (roceperf)", Recovery::Gbn, true, true),
        ("sr", Recovery::Sr, true, false),
    ];
    // Goodput of each variant at each rate, independent losses.
    let mut bernoulli = [[0.0f64; 4]; RATES.len()];
    for burst in [0.0, 8.0] {
        eprintln!("burst {burst}: loss | Gb/s (resent per data packet, timeouts) of each:");
        let names: Vec<_> = variants.iter().map(|v| format!("{:>24}", v.0)).collect();
        eprintln!("{:>7} | {}", "loss", names.join(" | "));
        for (r, loss) in RATES.into_iter().enumerate() {
            let msgs = match loss {
                l if l >= 0.05 => 150,
                l if l > 0.0 && l < 0.001 => 6000,
                _ => 600,
            };
            let cells: Vec<_> = variants
                .iter()
                .enumerate()
                .map(|(v, &(_, recovery, gbn_fast, loss_window))| {
                    let (mut gbps, mut retx, mut timeouts) = (0.0, 0.0, 0);
                    for seed in 1..=3 {
                        let spec = StreamSpec {
                            burst,
                            gbn_fast,
                            loss_window,
                            seed,
                            ..StreamSpec::new(recovery, loss, msgs)
                        };
                        let s = stream(&spec);
                        gbps += s.gbps / 3.0;
                        retx += s.retx_per_packet(&spec) / 3.0;
                        timeouts += s.a.timeouts;
                    }
                    if burst == 0.0 {
                        bernoulli[r][v] = gbps;
                    }
                    format!("{gbps:6.3} ({retx:7.3}, {timeouts:4})")
                })
                .collect();
            eprintln!("{:>6}% | {}", loss * 100.0, cells.join(" | "));
        }
    }
    // Issue 15's targets on the Bernoulli rows (0: loss-free, 1: 0.01 %, 3: 1 %).
    let [rxe, fixed, gbn, sr] = [0, 1, 2, 3];
    let b = &bernoulli;
    let gbn_kept = b[1][gbn] / b[0][gbn];
    let sr_kept = b[3][sr] / b[0][sr];
    eprintln!(
        "targets: gbn keeps {:.1} % at 0.01 % (fixed window {:.1} %); sr keeps {:.1} % at 1 %, \
         {:.1}x gbn as rxe, {:.1}x gbn with a fixed window, {:.1}x gbn (roceperf)",
        100.0 * gbn_kept,
        100.0 * b[1][fixed] / b[0][fixed],
        100.0 * sr_kept,
        b[3][sr] / b[3][rxe],
        b[3][sr] / b[3][fixed],
        b[3][sr] / b[3][gbn],
    );
    assert!(gbn_kept >= 0.9, "go-back-N at 0.01 %: {gbn_kept}");
    assert!(sr_kept >= 0.5, "selective repeat at 1 %: {sr_kept}");
    assert!(
        b[3][sr] >= 10.0 * b[3][rxe],
        "selective repeat against go-back-N as rxe at 1 %: {b:?}"
    );
}

/// A case the property test drew (CI, stop 24): bursts of loss on go-back-N as rxe run it, where the
/// answers to a READ were lost more times in a row than RC retries. The READ fails with
/// RetryExceeded, as rxe's would; the check accepts that only when the links really lost that many
/// packets in a row, and checks everything else.
#[test]
fn a_burst_that_outlasts_every_retry_may_fail_a_request_with_retry_exceeded() {
    let loss = 0.037_388_705_641_026_38;
    let link = LinkConfig {
        delay_ns: 2_000,
        loss,
        burst: 2.0,
        duplicate: 0.014_846_375_788_473_809,
        reorder: 0.006_358_830_571_236_623,
        reorder_delay_ns: 10_000,
        corrupt: loss / 4.0,
        ..LinkConfig::perfect()
    };
    run_with(355_456_135_290_553_827, link, Recover::Rxe);
}
