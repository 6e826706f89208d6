//! Every RC operation over a perfect simulated link, at the message sizes around the path MTU.

use crate::rc_harness;

use rc_harness::*;
use roceperf::transport::soft::rc::{Instant, Psn};
use roceperf::transport::{CompletionOp, SendOp};
use roceperf::wire::Opcode;

const MIB8: usize = 8 << 20;

/// Calls `f` with each path MTU (256 and 4096) and each message size around it.
fn for_each_size(mut f: impl FnMut(u32, usize)) {
    for pmtu in [256, 4096] {
        let m = pmtu as usize;
        for len in [0, 1, m - 1, m, m + 1, 3 * m + 7, MIB8] {
            f(pmtu, len);
        }
    }
}

#[test]
fn send_and_send_with_imm_deliver_every_size() {
    for_each_size(|pmtu, len| {
        for imm in [None, Some(0xdead_beef)] {
            let (mut p, _, _) = Setup::new(pmtu, MIB8 + 64).build();
            fill(&mut p.a, 0, len, len as u64);
            p.b.post_recv(&recv(7, 64, len as u32)).unwrap();
            let op = imm.map_or(SendOp::Send, SendOp::SendWithImm);
            p.a.post_send(&wr(1, op, 0, len as u32, None)).unwrap();
            run_to(&mut p, 1, 1);
            ok(&p.a_done[0], 1, CompletionOp::Send, len as u32);
            ok(&p.b_done[0], 7, CompletionOp::Recv, len as u32);
            assert_eq!(p.b_done[0].imm, imm);
            assert!(
                bytes(&p.b, 64, len) == pattern(len as u64, len),
                "SEND {len} B at PMTU {pmtu}"
            );
            let npkts = len.div_ceil(pmtu as usize).max(1) as u64;
            assert_eq!(p.a.counters().tx_packets, npkts, "one packet per PMTU");
        }
    });
}

#[test]
fn write_and_write_with_imm_land_at_the_remote_address() {
    for_each_size(|pmtu, len| {
        for imm in [None, Some(42)] {
            let (mut p, _, kb) = Setup::new(pmtu, MIB8 + 64).build();
            fill(&mut p.a, 0, len, 3 + len as u64);
            if imm.is_some() {
                p.b.post_recv(&recv(9, 0, 0)).unwrap();
            }
            let op = imm.map_or(SendOp::Write, SendOp::WriteWithImm);
            p.a.post_send(&wr(2, op, 0, len as u32, at(&kb, 32)))
                .unwrap();
            run_to(&mut p, 1, usize::from(imm.is_some()));
            ok(&p.a_done[0], 2, CompletionOp::Write, len as u32);
            if imm.is_some() {
                ok(&p.b_done[0], 9, CompletionOp::RecvWithImm, len as u32);
                assert_eq!(p.b_done[0].imm, imm);
            } else {
                assert!(p.b_done.is_empty(), "a plain WRITE consumes no receive");
            }
            assert!(
                bytes(&p.b, 32, len) == pattern(3 + len as u64, len),
                "WRITE {len} B at PMTU {pmtu}"
            );
            assert_eq!(bytes(&p.b, 0, 32), vec![0; 32], "nothing before the target");
        }
    });
}

#[test]
fn read_fetches_every_size() {
    for_each_size(|pmtu, len| {
        let (mut p, _, kb) = Setup::new(pmtu, MIB8 + 64).build();
        fill(&mut p.b, 8, len, 5 + len as u64);
        p.a.post_send(&wr(3, SendOp::Read, 16, len as u32, at(&kb, 8)))
            .unwrap();
        run_to(&mut p, 1, 0);
        ok(&p.a_done[0], 3, CompletionOp::Read, len as u32);
        assert!(
            bytes(&p.a, 16, len) == pattern(5 + len as u64, len),
            "READ {len} B at PMTU {pmtu}"
        );
        let npkts = len.div_ceil(pmtu as usize).max(1) as u64;
        assert_eq!(p.b.counters().tx_packets, npkts, "one response per PMTU");
        assert_eq!(p.a.counters().tx_packets, 1, "one READ request");
    });
}

#[test]
fn atomics_fetch_add_and_compare_swap() {
    let (mut p, _, kb) = Setup::new(1024, 4096).build();
    let lkey = p.b.config().local_lkey;
    p.b.memory_mut().region_bytes_mut(lkey).unwrap()[64..72].copy_from_slice(&100u64.to_ne_bytes());
    p.a.post_send(&wr(1, SendOp::FetchAdd(5), 0, 8, at(&kb, 64)))
        .unwrap();
    p.a.post_send(&wr(
        2,
        SendOp::CompareSwap {
            compare: 105,
            swap: 7,
        },
        8,
        8,
        at(&kb, 64),
    ))
    .unwrap();
    p.a.post_send(&wr(
        3,
        SendOp::CompareSwap {
            compare: 105,
            swap: 9,
        },
        16,
        8,
        at(&kb, 64),
    ))
    .unwrap();
    p.a.post_send(&wr(4, SendOp::FetchAdd(u64::MAX), 24, 8, at(&kb, 64)))
        .unwrap();
    run_to(&mut p, 4, 0);
    ok(&p.a_done[0], 1, CompletionOp::FetchAdd, 8);
    ok(&p.a_done[1], 2, CompletionOp::CompareSwap, 8);
    ok(&p.a_done[2], 3, CompletionOp::CompareSwap, 8);
    ok(&p.a_done[3], 4, CompletionOp::FetchAdd, 8);
    let word = |qp: &roceperf::transport::soft::rc::Qp, off| {
        u64::from_ne_bytes(bytes(qp, off, 8).try_into().unwrap())
    };
    assert_eq!(word(&p.a, 0), 100, "fetch-add returns the original");
    assert_eq!(word(&p.a, 8), 105, "compare matched");
    assert_eq!(word(&p.a, 16), 7, "compare failed, original returned");
    assert_eq!(word(&p.a, 24), 7);
    assert_eq!(word(&p.b, 64), 6, "7 + (2^64 - 1) wraps to 6");
}

#[test]
fn psn_wraps_around_for_every_operation() {
    let mut s = Setup::new(256, 64 << 10);
    s.psn_a = 0xff_fff0;
    s.psn_b = 0xff_fffe;
    let (mut p, ka, kb) = s.build();
    fill(&mut p.a, 0, 8192, 11);
    fill(&mut p.b, 16384, 8192, 12);
    p.b.post_recv(&recv(1, 0, 8192)).unwrap();
    p.a.post_send(&wr(1, SendOp::Send, 0, 8192, None)).unwrap();
    p.a.post_send(&wr(2, SendOp::Write, 0, 8192, at(&kb, 8192)))
        .unwrap();
    p.a.post_send(&wr(3, SendOp::Read, 32768, 8192, at(&kb, 16384)))
        .unwrap();
    p.a.post_send(&wr(4, SendOp::FetchAdd(1), 40960, 8, at(&kb, 40960)))
        .unwrap();
    // B sends the other way across its own wrap.
    p.a.post_recv(&recv(5, 49152, 4096)).unwrap();
    fill(&mut p.b, 24576, 4096, 13);
    p.b.post_send(&wr(6, SendOp::Send, 24576, 4096, None))
        .unwrap();
    p.b.post_send(&wr(7, SendOp::Write, 24576, 4096, at(&ka, 53248)))
        .unwrap();
    p.ab.log = Some(Vec::new());
    run_to(&mut p, 5, 3);
    let sends: Vec<_> = p
        .a_done
        .iter()
        .filter(|c| c.op != CompletionOp::Recv)
        .collect();
    assert_eq!(
        sends.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(
        p.a_done
            .iter()
            .chain(&p.b_done)
            .all(|c| c.status == roceperf::transport::CompletionStatus::Success)
    );
    assert_eq!(bytes(&p.b, 0, 8192), pattern(11, 8192));
    assert_eq!(bytes(&p.b, 8192, 8192), pattern(11, 8192));
    assert_eq!(bytes(&p.a, 32768, 8192), pattern(12, 8192));
    assert_eq!(bytes(&p.a, 49152, 4096), pattern(13, 4096));
    assert_eq!(bytes(&p.a, 53248, 4096), pattern(13, 4096));
    // 32 SEND + 32 WRITE packets, then a READ of 32 PSNs, then the atomic: A's PSNs crossed 0.
    let sent = logged(&p.ab);
    let psns: Vec<u32> = sent.iter().map(|h| h.1).collect();
    assert!(psns.contains(&0xff_ffff) && psns.contains(&0), "{psns:x?}");
    let (op, psn, _) = sent
        .iter()
        .rfind(|h| h.0 != Opcode::RC_ACKNOWLEDGE)
        .unwrap();
    assert_eq!(*op, Opcode::RC_FETCH_ADD);
    assert_eq!(Psn::new(*psn), Psn::new(0xff_fff0).add(32 + 32 + 32));
    assert_eq!(p.b.expected_psn(), Psn::new(0xff_fff0).add(97).value());
}

#[test]
fn ack_req_marks_last_packets_and_every_64th() {
    let (mut p, _, kb) = Setup::new(256, 1 << 20).build();
    p.ab.log = Some(Vec::new());
    p.ba.log = Some(Vec::new());
    p.a.post_send(&wr(1, SendOp::Write, 0, 256 * 200, at(&kb, 0)))
        .unwrap();
    run_to(&mut p, 1, 0);
    let sent = p.ab.log.take().unwrap();
    assert_eq!(sent.len(), 200);
    let asked: Vec<usize> = sent
        .iter()
        .enumerate()
        .filter(|(_, b)| head(b).2.bth.ack_req)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        asked,
        vec![64, 129, 194, 199],
        "every 65th packet and the last"
    );
    // Packets that arrive together are answered by one cumulative ACK: never more ACKs than
    // AckReqs, each for a PSN that asked, the last for the last packet.
    let acks = p.ba.log.take().unwrap();
    assert!(
        !acks.is_empty() && acks.len() <= asked.len(),
        "{} ACKs for {} AckReqs",
        acks.len(),
        asked.len()
    );
    for ack in &acks {
        let (op, psn, r) = head(ack);
        assert_eq!(op, Opcode::RC_ACKNOWLEDGE);
        assert!(
            asked.contains(&((psn - 100) as usize)),
            "ACK for PSN {psn} that did not ask"
        );
        assert_eq!(r.aeth.unwrap().syndrome, 0x1f);
        assert!(!r.bth.ack_req);
    }
    assert_eq!(head(acks.last().unwrap()).1, 100 + 199);
    assert_eq!(
        head(acks.last().unwrap()).2.aeth.unwrap().msn,
        1,
        "MSN counts messages"
    );
}

#[test]
fn window_limits_unacked_psns_and_outstanding_reads() {
    let s = Setup::tweaked(256, 1 << 20, |c| {
        c.max_rd_atomic = 2;
        c.max_unacked_psns = 16;
    });
    let (mut p, _, kb) = s.build();
    // Hold everything on the wire for a while and look at what A dared to send.
    for i in 0..5 {
        p.a.post_send(&wr(i, SendOp::Read, i * 256, 256, at(&kb, 0)))
            .unwrap();
    }
    p.a.post_send(&wr(9, SendOp::Write, 8192, 256 * 40, at(&kb, 0)))
        .unwrap();
    let mut buf = vec![0u8; p.a.max_packet_len()];
    let mut n = 0;
    while p.a.poll_transmit(Instant::ZERO, &mut buf).is_some() {
        n += 1;
    }
    assert_eq!(n, 2, "two READs outstanding at most");
    run_to(&mut p, 6, 0);
    assert!(
        p.a_done
            .iter()
            .all(|c| c.status == roceperf::transport::CompletionStatus::Success)
    );
    let (mut p, _, kb) = s.build();
    p.a.post_send(&wr(9, SendOp::Write, 0, 256 * 40, at(&kb, 0)))
        .unwrap();
    let mut n = 0;
    while p.a.poll_transmit(Instant::ZERO, &mut buf).is_some() {
        n += 1;
    }
    assert_eq!(
        n, 16,
        "the window stops the requester at 16 unacknowledged PSNs"
    );
}

#[test]
fn unsignaled_requests_complete_silently_and_in_order() {
    let (mut p, _, kb) = Setup::new(1024, 1 << 16).build();
    for i in 0..10u64 {
        let mut w = wr(i, SendOp::Write, i * 100, 100, at(&kb, i * 100));
        w.signaled = i % 3 == 2;
        p.a.post_send(&w).unwrap();
    }
    assert!(p.run_idle(1_000_000_000));
    let ids: Vec<u64> = p.a_done.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, vec![2, 5, 8]);
    assert_eq!(p.a.outstanding(), (0, 0));
}

#[test]
fn bad_work_requests_are_refused_with_a_reason() {
    let (mut p, _, kb) = Setup::new(256, 4096).build();
    for (request, reason) in [
        (wr(1, SendOp::Send, 4000, 200, None), "local range 4000+200"),
        (
            wr(2, SendOp::FetchAdd(1), 0, 4, at(&kb, 0)),
            "exactly 8 bytes",
        ),
        (wr(3, SendOp::Write, 0, 8, None), "remote address"),
        (wr(4, SendOp::Read, 0, 1 << 31, at(&kb, 0)), "larger MTU"),
    ] {
        let e = p.a.post_send(&request).unwrap_err().to_string();
        assert!(e.contains(reason), "{reason:?} not in {e}");
    }
    assert_eq!(p.a.outstanding(), (0, 0));
}
