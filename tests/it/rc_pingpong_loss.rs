//! A WRITE ping-pong (both queue pairs requester and responder at once, as `roce_write_lat` runs
//! them) in which the ACK of one side's WRITE is lost while that side's peer sends its own WRITE:
//! the lonely WRITE must complete after a retransmission and a re-ACK, never with a retry error.

use crate::rc_harness;

use rc_harness::*;
use roceperf::transport::soft::rc::{Instant, Qp};
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
    assert_eq!(p.a.counters().drops.stale_response, 0);
}
