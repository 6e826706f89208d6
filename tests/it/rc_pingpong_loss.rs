//! A WRITE ping-pong (both queue pairs requester and responder at once, as `roce_write_lat` runs
//! them) in which the ACK of one side's WRITE is lost while that side's peer sends its own WRITE:
//! the lonely WRITE must complete after a retransmission and a re-ACK, never with a retry error.

use crate::rc_harness;

use rc_harness::*;
use roceperf::params::Recovery;
use roceperf::transport::soft::rc::{Counters, Instant, Qp};
use roceperf::transport::soft::sim::LinkConfig;
use roceperf::transport::{CompletionOp, SendOp};

/// Everything `qp` has to send now.
fn drain(qp: &mut Qp, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; qp.max_packet_len()];
    let mut out = Vec::new();
    while let Some(n) = qp.poll_transmit(now, &mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

fn is_ack(p: &[u8]) -> bool {
    head(p).0 == roceperf::wire::Opcode::RC_ACKNOWLEDGE
}

#[test]
fn a_lost_ack_during_a_write_ping_pong_is_recovered_by_a_re_ack() {
    let (mut p, ka, kb) = Setup::new(1024, 4096).build();
    let mut now = Instant::ZERO;
    for i in 0..20u64 {
        // A writes; B executes it and, like the latency server, answers with its own WRITE at once.
        p.a.post_send(&wr(2 * i, SendOp::Write, 0, 2, at(&kb, 2048)))
            .unwrap();
        for pkt in drain(&mut p.a, now) {
            p.b.handle_packet(now, &pkt);
        }
        p.b.post_send(&wr(2 * i + 1, SendOp::Write, 0, 2, at(&ka, 2048)))
            .unwrap();
        let from_b = drain(&mut p.b, now);
        assert_eq!(from_b.len(), 2, "B sends its WRITE and the ACK of A's");
        for pkt in &from_b {
            // Every third round the ACK of A's WRITE is lost.
            if i % 3 == 1 && is_ack(pkt) {
                continue;
            }
            p.a.handle_packet(now, pkt);
        }
        // From here on the links are perfect: time runs until both WRITEs completed.
        let mut rounds = 0;
        while p.a.outstanding().0 + p.b.outstanding().0 > 0 {
            rounds += 1;
            assert!(
                rounds < 50,
                "round {i}: stuck; A {:?} B {:?}",
                p.a.counters(),
                p.b.counters()
            );
            for pkt in drain(&mut p.a, now) {
                p.b.handle_packet(now, &pkt);
            }
            for pkt in drain(&mut p.b, now) {
                p.a.handle_packet(now, &pkt);
            }
            if p.a.outstanding().0 + p.b.outstanding().0 == 0 {
                break;
            }
            if let Some(t) = [p.a.poll_timeout(), p.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
            {
                now = now.max(t);
                p.a.handle_timeout(now);
                p.b.handle_timeout(now);
            }
        }
        let a = p.a.poll_completion().expect("A's WRITE completes");
        ok(&a, 2 * i, CompletionOp::Write, 2);
        let b = p.b.poll_completion().expect("B's WRITE completes");
        ok(&b, 2 * i + 1, CompletionOp::Write, 2);
    }
    // 7 of the 20 rounds lost an ACK: each cost exactly one timeout, one retransmission and one re-ACK.
    assert_eq!(p.a.counters().timeouts, 7);
    assert_eq!(p.a.counters().retransmitted_packets, 7);
    assert_eq!(p.b.counters().duplicate_requests, 7);
    assert_eq!(p.b.counters().acks_sent, 20 + 7);
    assert_eq!(p.a.counters().drops.protocol.stale_response, 0);
}

/// One way across the link of [`lazy_ping_pong`]: long enough that 16 round trips (what an
/// unsignaled message may wait for its ACK) are well above the 0.25 ms timeout floor.
const DELAY_NS: u64 = 20_000;

/// A SEND ping-pong as `roce_send_lat` runs it between soft peers: one SEND in `every` signaled (so
/// only those ask for an ACK), each side answering the other's SEND with its own, over links that
/// lose `loss` both ways with [`DELAY_NS`] of delay. Returns the virtual time it took and A's and B's
/// counters.
fn lazy_ping_pong(
    recovery: Recovery,
    gbn_fast: bool,
    loss: f64,
    n: u64,
    every: u64,
) -> (u64, Counters, Counters) {
    let link = LinkConfig {
        delay_ns: DELAY_NS,
        loss,
        ..LinkConfig::perfect()
    };
    let mut s = Setup::new(1024, 4096);
    s.seed = 5;
    s.ab = link.clone();
    s.ba = link;
    s.recovery = Some(recovery);
    s.gbn_fast = gbn_fast;
    let (mut p, _, _) = s.build();
    let received = |done: &[roceperf::transport::Completion]| {
        done.iter().filter(|c| c.op == CompletionOp::Recv).count()
    };
    let signaled = |i: u64| i % every == every - 1 || i + 1 == n;
    p.a.post_recv(&recv(0, 1024, 64)).unwrap();
    p.b.post_recv(&recv(0, 1024, 64)).unwrap();
    let mut sends = 0;
    for i in 0..n {
        let send = |id, sig| roceperf::transport::SendRequest {
            signaled: sig,
            ..wr(id, SendOp::Send, 0, 2, None)
        };
        p.a.post_send(&send(i, signaled(i))).unwrap();
        run_to_recvs(&mut p, i as usize + 1, true, received);
        p.b.post_recv(&recv(i + 1, 1024, 64)).unwrap();
        p.b.post_send(&send(i, signaled(i))).unwrap();
        run_to_recvs(&mut p, i as usize + 1, false, received);
        p.a.post_recv(&recv(i + 1, 1024, 64)).unwrap();
        sends += u64::from(signaled(i));
    }
    // Every signaled SEND completes, and then nothing is left to resend.
    let sent = |done: &[roceperf::transport::Completion]| {
        done.iter().filter(|c| c.op == CompletionOp::Send).count() as u64
    };
    assert!(p.run_until(60_000_000_000, |p| sent(&p.a_done) == sends
        && sent(&p.b_done) == sends));
    assert!(p.run_idle(60_000_000_000), "both sides go idle");
    (p.now, *p.a.counters(), *p.b.counters())
}

/// Runs `p` until `b` (else `a`) has `n` receive completions.
fn run_to_recvs(
    p: &mut roceperf::transport::soft::sim::SimPair,
    n: usize,
    b: bool,
    received: impl Fn(&[roceperf::transport::Completion]) -> usize,
) {
    let ok = p.run_until(60_000_000_000, |p| {
        received(if b { &p.b_done } else { &p.a_done }) >= n
    });
    assert!(
        ok,
        "stuck at {} ns: A {:?} B {:?}",
        p.now,
        p.a.counters(),
        p.b.counters()
    );
}

#[test]
fn a_lost_unsignaled_ping_costs_no_more_than_a_signaled_one() {
    // Each loss costs about one fast timeout (0.25 ms) when every ping asks for its ACK. With one
    // in 16 asking it must cost no more: the probe asks with the newest packet, which answers for
    // the unsignaled ones before it (asking with the oldest, long delivered, takes a second
    // timeout), and the intentional wait for a lazy ACK stays out of the round-trip estimate (it
    // would lengthen every timeout).
    let n = 400;
    for (recovery, fast) in [(Recovery::Gbn, true), (Recovery::Sr, false)] {
        let cost = |every| {
            let (ns, a, b) = lazy_ping_pong(recovery, fast, 0.02, n, every);
            let timeouts = a.timeouts + b.timeouts;
            assert!(timeouts > 5, "{recovery:?}, 1 in {every}: {a:?} {b:?}");
            (ns - n * 2 * DELAY_NS, a, b)
        };
        let (every_post, ..) = cost(1);
        let (lazy, a, b) = cost(16);
        assert!(
            lazy * 4 <= every_post * 5,
            "{recovery:?}: losses cost {lazy} ns with one ping in 16 signaled, {every_post} ns with \
             every one: A {a:?} B {b:?}"
        );
    }
}
