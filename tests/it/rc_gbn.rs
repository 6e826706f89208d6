//! Go-back-N between roceperf endpoints at virtual time (issue 15, `rc/gbn.rs`): a silence is probed
//! after the round trip, so a lost tail, a lost NAK or a lost resend costs a round trip rather than
//! the 67 ms ACK timeout, and a peer that is only slow costs one probe per timeout, not a window;
//! a loss costs at most one window of resends; the loss-reactive window makes it cost less. The
//! randomised exactly-once workloads run these variants too (`rc_selective`).

use crate::rc_harness::*;
use crate::rc_lossy::{Recover, run_with};
use roceperf::params::Recovery;
use roceperf::transport::soft::rc::{Counters, Instant, LoneAck};
use roceperf::transport::soft::sim::{DropRule, LinkConfig, SimPair};
use roceperf::transport::{CompletionOp, SendOp};
use roceperf::wire::{AethKind, IbRepr, NakCode, Opcode};

/// perftest's default ACK timeout, `-u 14`.
const ACK_TIMEOUT_NS: u64 = 67_108_864;
/// First PSN of side A (the harness's).
const PSN_A: u32 = 100;

fn is_seq_nak(p: &[u8]) -> bool {
    let (r, _) = IbRepr::parse(p).expect("engine emits parseable packets");
    r.bth.opcode == Opcode::RC_ACKNOWLEDGE
        && r.aeth
            .is_some_and(|a| a.kind() == AethKind::Nak(NakCode::PsnSequenceError))
}

fn psn(p: &[u8]) -> u32 {
    head(p).1
}

/// Loses the first `times` transmissions of request PSN `PSN_A + k`.
fn lose_psn(k: u32, times: u32) -> DropRule {
    let mut seen = 0;
    Box::new(move |_, p| {
        let hit = psn(p) == PSN_A + k && seen < times;
        seen += u32::from(hit);
        hit
    })
}

/// Loses the first `times` NAKs (PSN sequence error).
fn lose_naks(times: u32) -> DropRule {
    let mut seen = 0;
    Box::new(move |_, p| {
        let hit = is_seq_nak(p) && seen < times;
        seen += u32::from(hit);
        hit
    })
}

/// One WRITE of `pkts` packets at PMTU 1024 from A to B over links of `delay_ns` each way, A→B
/// losing what `ab` says and B→A what `ba` says; go-back-N between roceperf endpoints when `fast`,
/// as rxe otherwise. The time it took and both sides' counters.
fn one_write(
    fast: bool,
    pkts: u32,
    delay_ns: u64,
    ab: Option<DropRule>,
    ba: Option<DropRule>,
) -> (u64, Counters, Counters) {
    let len = pkts * 1024;
    let mut s = Setup::new(1024, len as usize);
    s.ab.delay_ns = delay_ns;
    s.ba.delay_ns = delay_ns;
    s.gbn_fast = fast;
    let (mut p, _, kb) = s.build();
    p.ab.drop_rule = ab;
    p.ba.drop_rule = ba;
    p.a.post_send(&wr(1, SendOp::Write, 0, len, at(&kb, 0)))
        .unwrap();
    run_to(&mut p, 1, 0);
    ok(&p.a_done[0], 1, CompletionOp::Write, len);
    (p.now, *p.a.counters(), *p.b.counters())
}

#[test]
fn a_lost_tail_costs_a_round_trip_not_the_ack_timeout() {
    // The last packet (the one asking for an ACK) is lost: nothing after it makes the responder NAK.
    let (rxe_ns, rxe, _) = one_write(false, 4, 5_000, Some(lose_psn(3, 1)), None);
    let (ns, a, _) = one_write(true, 4, 5_000, Some(lose_psn(3, 1)), None);
    assert!(
        rxe_ns > ACK_TIMEOUT_NS && rxe.timeouts == 1,
        "{rxe_ns} {rxe:?}"
    );
    assert!(ns < 2_000_000, "repaired in {ns} ns: {a:?}");
    // Probes, one packet each: no window was resent.
    assert!(a.retransmitted_packets <= 2, "{a:?}");
}

#[test]
fn a_lost_nak_costs_a_few_round_trips_and_one_window() {
    // Packet 10 of 64 is lost and so is the responder's only NAK for it: it drops the rest in
    // silence (one NAK per gap, as rxe).
    let (rxe_ns, rxe, _) = one_write(false, 64, 5_000, Some(lose_psn(10, 1)), Some(lose_naks(1)));
    let (ns, a, b) = one_write(true, 64, 5_000, Some(lose_psn(10, 1)), Some(lose_naks(1)));
    assert!(rxe_ns > ACK_TIMEOUT_NS, "{rxe_ns} {rxe:?}");
    assert!(ns < 5_000_000, "repaired in {ns} ns: {a:?}");
    assert_eq!(
        b.naks_sent.psn_seq, 1,
        "the responder still NAKs once per gap"
    );
    assert!(a.retransmitted_packets <= 64 - 10 + 2, "{a:?}");
}

#[test]
fn a_lost_resend_costs_a_few_round_trips() {
    // Packet 10 is lost, NAKed, and its resend is lost too: the responder will not NAK it again.
    let (rxe_ns, _, _) = one_write(false, 64, 5_000, Some(lose_psn(10, 2)), None);
    let (ns, a, b) = one_write(true, 64, 5_000, Some(lose_psn(10, 2)), None);
    assert!(rxe_ns > ACK_TIMEOUT_NS, "{rxe_ns}");
    assert!(ns < 5_000_000, "repaired in {ns} ns: {a:?}");
    assert_eq!(b.naks_sent.psn_seq, 1);
    assert!(a.retransmitted_packets <= 2 * (64 - 10) + 2, "{a:?}");
}

#[test]
fn a_slow_peer_costs_one_probe_per_timeout_not_a_window() {
    // A 6 ms round trip, longer than the first fast timeouts (1 ms, then 2 ms): nothing is lost.
    let (ns, a, b) = one_write(true, 16, 3_000_000, None, None);
    assert!(a.timeouts >= 2, "the fast timer fired while waiting: {a:?}");
    assert_eq!(a.retransmitted_packets, a.timeouts, "one probe per timeout");
    assert_eq!(b.duplicate_requests, a.retransmitted_packets, "{b:?}");
    assert!(ns < 7_000_000, "done when the first ACK came: {ns} ns");
}

/// A datapath asks an engine to transmit only when it says it has work (`has_transmit_work`):
/// once everything is sent, the probe a timeout wants out must say so, or nothing is sent again
/// and no timer runs (a ping-pong hung this way end to end).
#[test]
fn a_probe_due_after_everything_was_sent_is_transmit_work() {
    let mut s = Setup::new(1024, 4096);
    s.gbn_fast = true;
    let (mut p, _, kb) = s.build();
    p.a.post_send(&wr(1, SendOp::Write, 0, 64, at(&kb, 1024)))
        .unwrap();
    let mut buf = vec![0u8; 8192];
    let t0 = Instant::from_nanos(p.now);
    assert!(
        p.a.poll_transmit(t0, &mut buf).is_some(),
        "the WRITE (then lost)"
    );
    assert!(!p.a.has_transmit_work(LoneAck::Send), "all sent");
    let t = p.a.poll_timeout().expect("the retransmission timer runs");
    assert!(
        t.as_nanos() - t0.as_nanos() < ACK_TIMEOUT_NS,
        "a fast timeout"
    );
    p.a.handle_timeout(t);
    assert!(p.a.has_transmit_work(LoneAck::Send), "the probe is work");
    let n = p.a.poll_transmit(t, &mut buf).expect("the probe");
    assert_eq!(psn(&buf[..n]), PSN_A);
    assert!(p.a.poll_timeout().is_some(), "and the timer runs again");
}

/// A probe of the newest PSN (nothing out had asked for an ACK: the first packets of a message the
/// pacer spaces) is answered by an ACK that names it, while the packets sent after the probe are
/// still on their way to a peer that is slow. They left after the probe, so its answer cannot say
/// they were dropped: the next silence probes again, one packet, and does not go back N (a paced
/// DCQCN stream under a parallel test run resent 751 packets at once this way).
#[test]
fn a_probe_answered_before_what_left_after_it_is_no_loss() {
    let mut s = Setup::new(1024, 64 * 1024);
    s.gbn_fast = true;
    let (mut p, _, kb) = s.build();
    p.a.post_send(&wr(1, SendOp::Write, 0, 64 * 1024, at(&kb, 0)))
        .unwrap();
    let mut buf = vec![0u8; 8192];
    let mut send = |p: &mut SimPair, t: Instant| {
        let n = p.a.poll_transmit(t, &mut buf).expect("A has a packet");
        (psn(&buf[..n]), buf[..n].to_vec())
    };
    // Ten of the 64 packets leave and arrive; none asks for an ACK.
    let t0 = Instant::from_nanos(p.now);
    for k in 0..10 {
        let (n, pkt) = send(&mut p, t0);
        assert_eq!(n, PSN_A + k);
        p.b.handle_packet(t0, &pkt);
    }
    assert!(
        p.b.poll_transmit(t0, &mut vec![0u8; 8192]).is_none(),
        "no ACK owed"
    );
    // Silence: the probe asks with the newest PSN, and ten packets more leave after it.
    let t1 = p.a.poll_timeout().expect("the retransmission timer runs");
    p.a.handle_timeout(t1);
    let (probe, probe_pkt) = send(&mut p, t1);
    assert_eq!(probe, PSN_A + 9, "the newest PSN");
    let later: Vec<_> = (0..10).map(|_| send(&mut p, t1)).collect();
    assert_eq!(later[0].0, PSN_A + 10);
    // The probe arrives first and is answered; what left after it is late.
    p.b.handle_packet(t1, &probe_pkt);
    let mut ack = vec![0u8; 8192];
    let n = p.b.poll_transmit(t1, &mut ack).expect("the probe's answer");
    assert_eq!(psn(&ack[..n]), probe, "it names the probe");
    p.a.handle_packet(t1, &ack[..n]);
    // The peer stays silent: a second probe, of the newest PSN, and then the stream goes on.
    let t2 = p.a.poll_timeout().expect("the timer runs again");
    p.a.handle_timeout(t2);
    assert_eq!(send(&mut p, t2).0, PSN_A + 19, "a probe, not a go-back");
    assert_eq!(send(&mut p, t2).0, PSN_A + 20, "and on with new packets");
    assert_eq!(
        p.a.counters().retransmitted_packets,
        2,
        "{:?}",
        p.a.counters()
    );
    for (_, pkt) in &later {
        p.b.handle_packet(t2, pkt);
    }
    assert_eq!(p.b.counters().naks_sent.psn_seq, 0, "nothing was lost");
}

/// WRITEs in [`pings`].
const PINGS: u64 = 2000;

/// [`PINGS`] lossy pings ([`lossy_pings`]) with go-back-N timed as between roceperf endpoints or as rxe:
/// the time it took and A's counters.
fn pings(fast: bool) -> (u64, Counters) {
    let mut s = Setup::new(1024, 4096);
    s.seed = 11;
    s.gbn_fast = fast;
    lossy_pings(s, PINGS)
}

#[test]
fn lost_pings_keep_costing_a_round_trip_not_the_ack_timeout() {
    let (rxe_ns, rxe) = pings(false);
    let (ns, a) = pings(true);
    assert!(rxe.timeouts > 5 && a.timeouts > 5, "{rxe:?} {a:?}");
    // Each lost ping or ACK costs 67 ms as rxe, about the 0.25 ms floor here: the probes' answers
    // must not feed the round-trip estimate (Karn), or each timeout would lengthen the next.
    assert!(ns * 50 < rxe_ns, "{ns} ns, as rxe {rxe_ns} ns; {a:?}");
    let per_timeout = (ns - PINGS * 2 * 5_000) / a.timeouts;
    assert!(per_timeout < 500_000, "{per_timeout} ns per timeout: {a:?}");
}

/// A stream of 64 KiB WRITEs (`rc_harness::stream`) at `loss` both ways.
fn stream_at(loss: f64, gbn_fast: bool, loss_window: bool, seed: u64) -> (Stream, StreamSpec) {
    let spec = StreamSpec {
        gbn_fast,
        loss_window,
        seed,
        ..StreamSpec::new(Recovery::Gbn, loss, 1500)
    };
    (stream(&spec), spec)
}

#[test]
fn a_loss_costs_at_most_one_window_of_resends() {
    for (loss, seed) in [(0.0001, 1), (0.0001, 2), (0.001, 3)] {
        for fast in [false, true] {
            let (s, spec) = stream_at(loss, fast, false, seed);
            // Each loss event resends the window once (plus a probe per fast timeout): a NAK or
            // probe answered during a go-back must not start another.
            let bound = (s.lost_ab + s.lost_ba) * u64::from(spec.window) + s.a.timeouts;
            assert!(
                s.a.retransmitted_packets <= bound,
                "{spec:?}: {} resent for {} + {} lost: {:?}",
                s.a.retransmitted_packets,
                s.lost_ab,
                s.lost_ba,
                s.a
            );
        }
    }
}

#[test]
fn the_loss_reactive_window_resends_less_and_keeps_more_goodput() {
    for (loss, seed) in [(0.001, 5), (0.01, 6)] {
        let (fixed, _) = stream_at(loss, true, false, seed);
        let (adaptive, _) = stream_at(loss, true, true, seed);
        assert!(
            adaptive.a.retransmitted_packets * 2 < fixed.a.retransmitted_packets,
            "loss {loss}: {:?} vs {:?}",
            adaptive.a,
            fixed.a
        );
        assert!(
            adaptive.gbps > fixed.gbps,
            "{} vs {}",
            adaptive.gbps,
            fixed.gbps
        );
    }
    // Without loss it never shrinks: the same goodput as a fixed window.
    let (fixed, _) = stream_at(0.0, true, false, 7);
    let (adaptive, _) = stream_at(0.0, true, true, 7);
    assert_eq!(fixed.gbps, adaptive.gbps);
}

#[test]
fn the_probe_repairs_what_the_ack_timeout_did_under_one_percent_loss() {
    // The same stream with and without the probe: rxe's waits are 67 ms each.
    let (rxe, _) = stream_at(0.01, false, false, 8);
    let (fast, _) = stream_at(0.01, true, false, 8);
    assert!(rxe.a.timeouts > 0, "{:?}", rxe.a);
    assert!(fast.gbps > rxe.gbps, "{} vs {}", fast.gbps, rxe.gbps);
}

#[test]
fn go_back_n_between_roceperf_peers_delivers_exactly_once() {
    for (i, loss) in [0.01, 0.05].into_iter().enumerate() {
        for seed in 0..6u64 {
            let seed = 7_000 + 100 * i as u64 + seed;
            run_with(seed, LinkConfig::lossy(loss), Recover::GbnFast);
            run_with(seed, LinkConfig::lossy(loss), Recover::GbnWindow);
        }
    }
}
