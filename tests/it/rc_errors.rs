//! Every NAK, RNR, retry exhaustion, memory protection and the error state, at virtual time.

use crate::rc_harness;

use rc_harness::*;
use roceperf::transport::soft::rc::{Instant, MemoryTable, MrKeys, Qp, QpConfig, QpState};
use roceperf::transport::soft::sim::{LinkConfig, SimPair};
use roceperf::transport::{Access, CompletionOp, CompletionStatus, RemoteAddr, SendOp};
use roceperf::wire::{AethRepr, BthRepr, IbRepr, NakCode, Opcode};

const LIMIT: u64 = 600_000_000_000;

#[test]
fn lost_packet_gets_one_psn_sequence_nak_and_go_back_n() {
    let (mut p, _, _) = Setup::new(256, 1 << 16).build();
    p.ab.drop_rule = Some(Box::new(|i, _| i == 4));
    fill(&mut p.a, 0, 2560, 1);
    p.b.post_recv(&recv(1, 0, 4096)).unwrap();
    p.a.post_send(&wr(1, SendOp::Send, 0, 2560, None)).unwrap();
    run_to(&mut p, 1, 1);
    ok(&p.a_done[0], 1, CompletionOp::Send, 2560);
    ok(&p.b_done[0], 1, CompletionOp::Recv, 2560);
    assert_eq!(bytes(&p.b, 0, 2560), pattern(1, 2560));
    let (a, b) = (p.a.counters(), p.b.counters());
    assert_eq!(b.naks_sent.psn_seq, 1, "one NAK per gap");
    assert_eq!(a.naks_received.psn_seq, 1);
    assert_eq!(
        b.drops.protocol.out_of_sequence, 5,
        "packets 5..=9 after the NAK are dropped silently"
    );
    assert_eq!(a.retries, 1);
    assert_eq!(
        a.retransmitted_packets, 7,
        "go back to packet 3 and resend 3..=9"
    );
    assert_eq!(a.timeouts, 0, "the NAK, not the timer, triggered the retry");
}

#[test]
fn send_longer_than_the_receive_is_nak_invalid_request() {
    let (mut p, _, _) = Setup::new(1024, 1 << 16).build();
    p.b.post_recv(&recv(1, 0, 100)).unwrap();
    p.b.post_recv(&recv(2, 100, 100)).unwrap();
    p.a.post_send(&wr(1, SendOp::Send, 0, 200, None)).unwrap();
    p.a.post_send(&wr(2, SendOp::Send, 0, 10, None)).unwrap();
    run_to(&mut p, 2, 2);
    assert_eq!(p.b_done[0].status, CompletionStatus::LocalLengthError);
    assert_eq!(p.b_done[1].status, CompletionStatus::WrFlushError);
    assert_eq!(
        p.a_done[0].status,
        CompletionStatus::RemoteInvalidRequestError
    );
    assert_eq!(p.a_done[1].status, CompletionStatus::WrFlushError);
    assert_eq!(p.b.counters().naks_sent.invalid_request, 1);
    assert_eq!(p.a.counters().naks_received.invalid_request, 1);
    assert_eq!(
        p.a.state(),
        QpState::Error(CompletionStatus::RemoteInvalidRequestError)
    );
    assert!(matches!(p.b.state(), QpState::Error(_)));
}

#[test]
fn misaligned_atomic_is_nak_invalid_request() {
    let (mut p, _, kb) = Setup::new(1024, 4096).build();
    p.a.post_send(&wr(1, SendOp::FetchAdd(1), 0, 8, at(&kb, 4)))
        .unwrap();
    run_to(&mut p, 1, 0);
    assert_eq!(
        p.a_done[0].status,
        CompletionStatus::RemoteInvalidRequestError
    );
    assert_eq!(bytes(&p.b, 0, 16), vec![0; 16], "nothing executed");
}

#[test]
fn read_without_responder_resources_is_nak_invalid_request() {
    let (mut p, _, kb) = Setup::tweaked(1024, 4096, |c| c.max_dest_rd_atomic = 0).build();
    p.a.post_send(&wr(1, SendOp::Read, 0, 64, at(&kb, 0)))
        .unwrap();
    run_to(&mut p, 1, 0);
    assert_eq!(
        p.a_done[0].status,
        CompletionStatus::RemoteInvalidRequestError
    );
}

/// B's memory: [guard | open region (WRITE, READ, ATOMIC) | guard | read-only region | guard].
struct Guarded {
    p: SimPair,
    open: MrKeys,
    read_only: MrKeys,
    write_only: MrKeys,
}

const GUARD: usize = 256;
const REGION: usize = 4096;

fn guarded() -> Guarded {
    let mut ma = MemoryTable::new(1);
    let ka = ma.add_registered(1 << 16, ALL);
    let mut mb = MemoryTable::new(2);
    let buf = mb.add_buffer(4 * GUARD + 3 * REGION);
    mb.buffer_mut(buf).fill(0xee);
    let open = mb.register(buf, GUARD, REGION, ALL).unwrap();
    let read_only = mb
        .register(buf, 2 * GUARD + REGION, REGION, Access::REMOTE_READ)
        .unwrap();
    let write_only = mb
        .register(buf, 3 * GUARD + 2 * REGION, REGION, Access::REMOTE_WRITE)
        .unwrap();
    let mut ca = QpConfig::new(QPN_A, QPN_B, 10, 20, ka.lkey);
    ca.pmtu = 256;
    let mut cb = QpConfig::new(QPN_B, QPN_A, 20, 10, open.lkey);
    cb.pmtu = 256;
    let a = Qp::new(ca, ma).unwrap();
    let b = Qp::new(cb, mb).unwrap();
    let mut p = SimPair::new(a, b, LinkConfig::perfect(), LinkConfig::perfect(), 3);
    fill(&mut p.a, 0, 1 << 16, 99);
    Guarded {
        p,
        open,
        read_only,
        write_only,
    }
}

fn untouched(p: &SimPair) {
    assert!(
        p.b.memory()
            .buffer(roceperf::transport::soft::rc::BufferId(0))
            .iter()
            .all(|&b| b == 0xee),
        "a byte of B's buffer changed: regions and guards must be untouched"
    );
}

#[test]
fn bad_rkey_bounds_or_rights_are_nak_remote_access_and_write_nothing() {
    type Target = Box<dyn Fn(&Guarded) -> (u64, u32)>;
    let cases: Vec<(&str, SendOp, Target, u32)> = vec![
        (
            "wrong rkey",
            SendOp::Write,
            Box::new(|g| (g.open.va, g.open.rkey ^ 0x100)),
            64,
        ),
        (
            "wrong rkey tag",
            SendOp::Write,
            Box::new(|g| (g.open.va, g.open.rkey ^ 1)),
            64,
        ),
        (
            "one byte before",
            SendOp::Write,
            Box::new(|g| (g.open.va - 1, g.open.rkey)),
            64,
        ),
        (
            "one byte past the end",
            SendOp::Write,
            Box::new(|g| (g.open.va + 1, g.open.rkey)),
            REGION as u32,
        ),
        (
            "multi-packet past the end",
            SendOp::Write,
            Box::new(|g| (g.open.va + 2048, g.open.rkey)),
            4096,
        ),
        (
            "into the next region",
            SendOp::Write,
            Box::new(|g| (g.read_only.va - 8, g.open.rkey)),
            64,
        ),
        (
            "far away",
            SendOp::Write,
            Box::new(|g| (g.open.va + (1 << 40), g.open.rkey)),
            64,
        ),
        (
            "write to read-only",
            SendOp::Write,
            Box::new(|g| (g.read_only.va, g.read_only.rkey)),
            64,
        ),
        (
            "write-with-imm to read-only",
            SendOp::WriteWithImm(1),
            Box::new(|g| (g.read_only.va, g.read_only.rkey)),
            64,
        ),
        (
            "read from write-only",
            SendOp::Read,
            Box::new(|g| (g.write_only.va, g.write_only.rkey)),
            64,
        ),
        (
            "read past the end",
            SendOp::Read,
            Box::new(|g| (g.open.va + 8, g.open.rkey)),
            REGION as u32,
        ),
        (
            "atomic without atomic rights",
            SendOp::FetchAdd(1),
            Box::new(|g| (g.write_only.va, g.write_only.rkey)),
            8,
        ),
        (
            "atomic past the end",
            SendOp::FetchAdd(1),
            Box::new(|g| (g.open.va + REGION as u64, g.open.rkey)),
            8,
        ),
    ];
    for (name, op, target, len) in cases {
        let mut g = guarded();
        let (addr, rkey) = target(&g);
        if matches!(op, SendOp::WriteWithImm(_)) {
            g.p.b.post_recv(&recv(5, 0, 0)).unwrap();
        }
        g.p.a
            .post_send(&wr(1, op, 0, len, Some(RemoteAddr { addr, rkey })))
            .unwrap();
        g.p.a
            .post_send(&wr(
                2,
                SendOp::Write,
                0,
                8,
                Some(RemoteAddr {
                    addr: g.open.va,
                    rkey: g.open.rkey,
                }),
            ))
            .unwrap();
        assert!(g.p.run_idle(LIMIT), "{name}: did not settle");
        let c = &g.p.a_done;
        assert_eq!(c.len(), 2, "{name}: {c:?}");
        assert_eq!(
            c[0].status,
            CompletionStatus::RemoteAccessError,
            "{name}: {}",
            c[0].status.describe()
        );
        assert_eq!(
            c[1].status,
            CompletionStatus::WrFlushError,
            "{name}: later requests are flushed"
        );
        untouched(&g.p);
        let b = g.p.b.counters();
        assert_eq!(
            (b.remote_access_violations, b.naks_sent.remote_access),
            (1, 1),
            "{name}: counted"
        );
        assert_eq!(g.p.a.counters().naks_received.remote_access, 1, "{name}");
        if matches!(op, SendOp::WriteWithImm(_)) {
            assert_eq!(
                g.p.b_done[0].status,
                CompletionStatus::WrFlushError,
                "{name}: the receive is flushed"
            );
        }
    }
}

#[test]
fn allowed_accesses_to_guarded_regions_stay_inside() {
    let mut g = guarded();
    let open = g.open;
    g.p.a
        .post_send(&wr(
            1,
            SendOp::Write,
            0,
            REGION as u32,
            Some(RemoteAddr {
                addr: open.va,
                rkey: open.rkey,
            }),
        ))
        .unwrap();
    g.p.a
        .post_send(&wr(
            2,
            SendOp::Read,
            8192,
            REGION as u32,
            Some(RemoteAddr {
                addr: g.read_only.va,
                rkey: g.read_only.rkey,
            }),
        ))
        .unwrap();
    g.p.a
        .post_send(&wr(
            3,
            SendOp::Write,
            0,
            0,
            Some(RemoteAddr { addr: 0, rkey: 0 }),
        ))
        .unwrap();
    run_to(&mut g.p, 3, 0);
    assert!(
        g.p.a_done
            .iter()
            .all(|c| c.status == CompletionStatus::Success),
        "{:?}",
        g.p.a_done
    );
    let whole =
        g.p.b
            .memory()
            .buffer(roceperf::transport::soft::rc::BufferId(0))
            .to_vec();
    assert!(whole[..GUARD].iter().all(|&b| b == 0xee));
    assert_eq!(
        &whole[GUARD..GUARD + REGION],
        &pattern(99, 1 << 16)[..REGION]
    );
    assert!(whole[GUARD + REGION..].iter().all(|&b| b == 0xee));
    assert_eq!(bytes(&g.p.a, 8192, REGION), vec![0xee; REGION]);
}

fn inject_nak(p: &mut SimPair, syndrome: u8, psn: u32) {
    let mut r = IbRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, QPN_A, psn));
    r.aeth = Some(AethRepr { syndrome, msn: 0 });
    let mut buf = vec![0u8; r.header_len()];
    r.emit(&mut buf);
    p.a.handle_packet(Instant::from_nanos(p.now), &buf);
}

#[test]
fn remote_operational_error_and_unknown_nak_codes_fail_the_request() {
    for (syndrome, name) in [
        (
            AethRepr::nak(NakCode::RemoteOperationalError, 0).syndrome,
            "0x63",
        ),
        (0x6a, "unknown"),
    ] {
        let (mut p, _, _) = Setup::new(1024, 4096).build();
        p.ab.drop_rule = Some(Box::new(|_, _| true));
        p.a.post_send(&wr(1, SendOp::Send, 0, 10, None)).unwrap();
        p.a.post_send(&wr(2, SendOp::Send, 0, 10, None)).unwrap();
        p.pump();
        inject_nak(&mut p, syndrome, 100);
        p.pump();
        assert_eq!(
            p.a_done[0].status,
            CompletionStatus::RemoteOperationalError,
            "{name}"
        );
        assert_eq!(p.a_done[1].status, CompletionStatus::WrFlushError, "{name}");
        assert_eq!(p.a.counters().naks_received.remote_operational, 1);
    }
}

#[test]
fn naks_outside_the_outstanding_window_are_ignored() {
    let (mut p, _, _) = Setup::new(1024, 4096).build();
    p.ab.drop_rule = Some(Box::new(|_, _| true));
    p.a.post_send(&wr(1, SendOp::Send, 0, 10, None)).unwrap();
    p.pump();
    inject_nak(
        &mut p,
        AethRepr::nak(NakCode::RemoteAccessError, 0).syndrome,
        50,
    );
    inject_nak(
        &mut p,
        AethRepr::nak(NakCode::RemoteAccessError, 0).syndrome,
        101,
    );
    p.pump();
    assert!(p.a_done.is_empty());
    assert_eq!(p.a.state(), QpState::Ready);
    assert_eq!(p.a.counters().drops.protocol.stale_response, 2);
}

#[test]
fn rnr_nak_waits_and_retries_until_a_receive_is_posted() {
    let (mut p, _, _) = Setup::tweaked(1024, 4096, |c| c.min_rnr_timer = 1 /* 10 µs */).build();
    fill(&mut p.a, 0, 300, 4);
    p.a.post_send(&wr(1, SendOp::Send, 0, 300, None)).unwrap();
    assert!(p.run_until(LIMIT, |p| p.a.counters().naks_received.rnr >= 3));
    let rnr_at = p.now;
    assert!(p.a.counters().naks_received.rnr >= 3);
    assert!(p.a_done.is_empty(), "rnr_retry 7 is infinite");
    p.b.post_recv(&recv(9, 1000, 300)).unwrap();
    run_to(&mut p, 1, 1);
    ok(&p.a_done[0], 1, CompletionOp::Send, 300);
    ok(&p.b_done[0], 9, CompletionOp::Recv, 300);
    assert_eq!(bytes(&p.b, 1000, 300), pattern(4, 300));
    assert!(p.now >= rnr_at);
    assert_eq!(
        p.b.counters().naks_sent.rnr,
        p.a.counters().naks_received.rnr
    );
}

#[test]
fn rnr_wait_follows_the_timer_in_the_nak() {
    let (mut p, _, _) = Setup::tweaked(1024, 4096, |c| {
        c.min_rnr_timer = 14; // 1.28 ms
        c.rnr_retry = 1;
    })
    .build();
    p.a.post_send(&wr(1, SendOp::Send, 0, 1, None)).unwrap();
    run_to(&mut p, 1, 0);
    assert_eq!(p.a_done[0].status, CompletionStatus::RnrRetryExceeded);
    assert_eq!(
        p.a.counters().naks_received.rnr,
        2,
        "the first RNR and one retry"
    );
    assert!(
        p.now >= 1_280_000,
        "waited the RNR time before retrying, t={}",
        p.now
    );
}

#[test]
fn rnr_retry_exhaustion_ends_in_an_error_completion() {
    let (mut p, _, _) = Setup::tweaked(256, 1 << 16, |c| {
        c.rnr_retry = 3;
        c.min_rnr_timer = 1;
    })
    .build();
    p.a.post_send(&wr(1, SendOp::Send, 0, 1000, None)).unwrap();
    p.a.post_send(&wr(
        2,
        SendOp::Write,
        0,
        10,
        None.or(Some(RemoteAddr { addr: 0, rkey: 0 })),
    ))
    .unwrap();
    p.a.post_recv(&recv(3, 0, 10)).unwrap();
    run_to(&mut p, 3, 0);
    ended_with(&p.a_done[0], CompletionStatus::RnrRetryExceeded);
    assert_eq!((p.a_done[0].wr_id, p.a_done[0].op), (1, CompletionOp::Send));
    assert_eq!(p.a_done[1].status, CompletionStatus::WrFlushError);
    assert_eq!(
        (p.a_done[2].wr_id, p.a_done[2].status),
        (3, CompletionStatus::WrFlushError)
    );
    assert_eq!(
        p.a.counters().naks_received.rnr,
        4,
        "the first RNR and three retries"
    );
    assert!(p.run_idle(LIMIT), "an errored QP has no timers left");
    p.a.post_send(&wr(4, SendOp::Send, 0, 1, None)).unwrap();
    p.pump();
    assert_eq!(
        (p.a_done[3].wr_id, p.a_done[3].status),
        (4, CompletionStatus::WrFlushError)
    );
}

#[test]
fn retry_exhaustion_on_a_dead_link_ends_in_an_error_completion() {
    let s = Setup::dead_link(|c| {
        c.retry_cnt = 3;
        c.timeout = 10; // 4.2 ms
    });
    let (mut p, _, kb) = s.build();
    p.a.post_send(&wr(1, SendOp::Write, 0, 100, at(&kb, 0)))
        .unwrap();
    p.a.post_send(&wr(2, SendOp::Read, 0, 100, at(&kb, 0)))
        .unwrap();
    run_to(&mut p, 2, 0);
    ended_with(&p.a_done[0], CompletionStatus::RetryExceeded);
    assert_eq!(p.a_done[1].status, CompletionStatus::WrFlushError);
    assert_eq!(
        p.a.counters().timeouts,
        4,
        "first try plus three retries each timed out"
    );
    assert_eq!(p.ab.stats.sent, 8, "two packets per attempt");
    assert_eq!(p.now, 4 * (4096 << 10), "four timeouts of 4.096 µs × 2^10");
}

#[test]
fn retry_backoff_doubles_the_timeout_per_spent_retry_up_to_its_cap() {
    let s = Setup::dead_link(|c| {
        c.retry_cnt = 5;
        c.timeout = 10; // 4.2 ms
        c.retry_backoff_max_shift = 2;
    });
    let (mut p, _, kb) = s.build();
    p.a.post_send(&wr(1, SendOp::Write, 0, 100, at(&kb, 0)))
        .unwrap();
    run_to(&mut p, 1, 0);
    assert_eq!(p.a_done[0].status, CompletionStatus::RetryExceeded);
    assert_eq!(p.a.counters().timeouts, 6, "first try plus five retries");
    assert_eq!(
        p.ab.stats.sent, 6,
        "the first send and each retransmission went out"
    );
    // Waits of 1, 2, 4, 4, 4, 4 timeouts: doubled per spent retry, capped at 2^2.
    assert_eq!(p.now, 19 * (4096 << 10));
}

#[test]
fn retry_cnt_7_is_infinite_only_when_configured() {
    for infinite in [false, true] {
        let s = Setup::dead_link(if infinite {
            |c| {
                c.timeout = 8;
                c.retry_cnt_7_is_infinite = true
            }
        } else {
            |c| c.timeout = 8
        });
        let (mut p, _, kb) = s.build();
        p.a.post_send(&wr(1, SendOp::Write, 0, 100, at(&kb, 0)))
            .unwrap();
        let ended = p.run_until(1_000_000_000, |p| !p.a_done.is_empty());
        if infinite {
            assert!(
                !ended && p.a.counters().timeouts > 100,
                "still retrying after {} timeouts",
                p.a.counters().timeouts
            );
            p.ab.cfg.loss = 0.0;
            run_to(&mut p, 1, 0);
            ok(&p.a_done[0], 1, CompletionOp::Write, 100);
        } else {
            assert!(ended);
            assert_eq!(p.a_done[0].status, CompletionStatus::RetryExceeded);
            assert_eq!(p.a.counters().timeouts, 8, "retry_cnt 7 means 7 retries");
        }
    }
}

#[test]
fn read_is_retried_after_a_lost_middle_response() {
    let (mut p, _, kb) = Setup::new(256, 1 << 16).build();
    fill(&mut p.b, 0, 2560, 8);
    p.ab.log = Some(Vec::new());
    p.ba.log = Some(Vec::new());
    // Responses 1..=10 on B->A: lose the sixth, a READ_RESPONSE_MIDDLE.
    p.ba.drop_rule = Some(Box::new(|i, b| {
        i == 6 && head(b).0 == Opcode::RC_RDMA_READ_RESPONSE_MIDDLE
    }));
    p.a.post_send(&wr(1, SendOp::Read, 4096, 2560, at(&kb, 0)))
        .unwrap();
    run_to(&mut p, 1, 0);
    ok(&p.a_done[0], 1, CompletionOp::Read, 2560);
    assert_eq!(bytes(&p.a, 4096, 2560), pattern(8, 2560));
    let a = p.a.counters();
    assert_eq!(
        (a.timeouts, a.retries),
        (1, 1),
        "the timer recovers a lost READ response"
    );
    assert_eq!(
        a.drops.protocol.stale_response, 4,
        "responses 7..=10 were out of order and dropped"
    );
    let reqs: Vec<IbRepr> = logged(&p.ab).into_iter().map(|h| h.2).collect();
    assert_eq!(reqs.len(), 2, "the first READ and one resumed READ");
    let (first, again) = (reqs[0].reth.unwrap(), reqs[1].reth.unwrap());
    assert_eq!(
        reqs[1].bth.psn,
        reqs[0].bth.psn + 5,
        "resumes at the lost PSN"
    );
    assert_eq!(again.va, first.va + 5 * 256);
    assert_eq!(again.dma_len, 2560 - 5 * 256);
    assert_eq!(
        p.b.counters().duplicate_requests,
        1,
        "B replays from its saved READ"
    );
    let replay: Vec<Opcode> = logged(&p.ba)[10..].iter().map(|h| h.0).collect();
    assert_eq!(
        replay,
        [
            vec![Opcode::RC_RDMA_READ_RESPONSE_MIDDLE; 4],
            vec![Opcode::RC_RDMA_READ_RESPONSE_LAST]
        ]
        .concat(),
        "the replay continues with MIDDLE/LAST"
    );
}

#[test]
fn lost_read_responses_behind_an_ack_trigger_an_immediate_retry() {
    let (mut p, _, kb) = Setup::new(256, 1 << 16).build();
    fill(&mut p.b, 0, 512, 2);
    // Lose both responses of the READ; the ACK of the SEND behind it then implies the loss.
    p.ba.drop_rule = Some(Box::new(|i, _| i <= 2));
    p.b.post_recv(&recv(1, 8192, 16)).unwrap();
    p.a.post_send(&wr(1, SendOp::Read, 4096, 512, at(&kb, 0)))
        .unwrap();
    p.a.post_send(&wr(2, SendOp::Send, 0, 16, None)).unwrap();
    run_to(&mut p, 2, 1);
    ok(&p.a_done[0], 1, CompletionOp::Read, 512);
    ok(&p.a_done[1], 2, CompletionOp::Send, 16);
    assert_eq!(bytes(&p.a, 4096, 512), pattern(2, 512));
    assert_eq!(p.a.counters().timeouts, 0, "no timer needed");
    assert_eq!(p.a.counters().retries, 1);
    assert_eq!(p.b_done.len(), 1, "the SEND executed once");
}

#[test]
fn duplicated_requests_execute_once() {
    let mut s = Setup::new(256, 1 << 16);
    s.ab = LinkConfig {
        duplicate: 1.0,
        ..LinkConfig::perfect()
    };
    s.ba = LinkConfig {
        duplicate: 1.0,
        ..LinkConfig::perfect()
    };
    let (mut p, _, kb) = s.build();
    fill(&mut p.a, 0, 1000, 6);
    for i in 0..3 {
        p.b.post_recv(&recv(i, i * 1000, 1000)).unwrap();
    }
    p.a.post_send(&wr(1, SendOp::Send, 0, 1000, None)).unwrap();
    p.a.post_send(&wr(2, SendOp::FetchAdd(3), 2000, 8, at(&kb, 8000)))
        .unwrap();
    p.a.post_send(&wr(3, SendOp::WriteWithImm(5), 0, 1000, at(&kb, 4000)))
        .unwrap();
    p.a.post_send(&wr(4, SendOp::Read, 3000, 1000, at(&kb, 0)))
        .unwrap();
    assert!(p.run_idle(LIMIT));
    let ids: Vec<_> = p.a_done.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        ids,
        (1..=4)
            .map(|i| (i, CompletionStatus::Success))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        p.b_done.len(),
        2,
        "one receive per SEND / WRITE-with-imm: {:?}",
        p.b_done
    );
    assert_eq!(
        u64::from_ne_bytes(bytes(&p.b, 8000, 8).try_into().unwrap()),
        3,
        "added once"
    );
    assert_eq!(bytes(&p.a, 3000, 1000), pattern(6, 1000));
    assert!(p.b.counters().duplicate_requests >= 4);
}

#[test]
fn garbage_and_misaddressed_packets_are_counted_and_dropped() {
    let (mut p, _, _) = Setup::new(1024, 4096).build();
    p.b.handle_packet(Instant::ZERO, &[1, 2, 3]);
    let mut r = IbRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x99, 5000));
    let mut buf = vec![0u8; r.header_len()];
    r.emit(&mut buf);
    p.b.handle_packet(Instant::ZERO, &buf);
    r.bth.dest_qp = QPN_B;
    r.bth.opcode = Opcode(0x24);
    r.emit(&mut buf);
    p.b.handle_packet(Instant::ZERO, &buf);
    r.bth.opcode = Opcode::RC_SEND_ONLY;
    r.bth.tver = 1;
    r.emit(&mut buf);
    p.b.handle_packet(Instant::ZERO, &buf);
    let d = p.b.counters().drops;
    assert_eq!((d.malformed, d.unknown_qpn), (3, 1));
    assert_eq!(p.b.state(), QpState::Ready);
    assert!(!p.pump(), "nothing to answer");
}

/// Sends one hand-built request to B and returns B's answers.
fn poke(p: &mut SimPair, r: &IbRepr, payload: &[u8]) -> Vec<IbRepr> {
    let mut buf = vec![0u8; r.header_len() + payload.len() + 3];
    let n = r.header_len();
    r.emit(&mut buf[..n]);
    buf[n..n + payload.len()].copy_from_slice(payload);
    let total = n + payload.len() + roceperf::wire::pad_len(payload.len());
    p.b.handle_packet(Instant::ZERO, &buf[..total]);
    let mut out = vec![0u8; p.b.max_packet_len()];
    let mut answers = Vec::new();
    while let Some(n) = p.b.poll_transmit(Instant::ZERO, &mut out) {
        answers.push(IbRepr::parse(&out[..n]).unwrap().0);
    }
    answers
}

fn request(op: Opcode, psn: u32, payload_len: usize) -> IbRepr {
    let mut bth = BthRepr::new(op, QPN_B, psn);
    bth.pad_count = roceperf::wire::pad_len(payload_len) as u8;
    bth.ack_req = true;
    IbRepr::new(bth)
}

#[test]
fn opcode_sequence_length_and_unsupported_requests_are_nak_invalid_request() {
    let cases: Vec<(&str, Opcode, usize)> = vec![
        ("SEND_MIDDLE without FIRST", Opcode::RC_SEND_MIDDLE, 1024),
        ("SEND_LAST without FIRST", Opcode::RC_SEND_LAST, 10),
        (
            "WRITE_MIDDLE without FIRST",
            Opcode::RC_RDMA_WRITE_MIDDLE,
            1024,
        ),
        (
            "SEND_FIRST shorter than the PMTU",
            Opcode::RC_SEND_FIRST,
            1000,
        ),
        ("SEND_ONLY longer than the PMTU", Opcode::RC_SEND_ONLY, 1028),
        (
            "SEND_ONLY_WITH_INVALIDATE (unsupported)",
            Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
            4,
        ),
    ];
    for (name, op, len) in cases {
        let (mut p, _, _) = Setup::new(1024, 8192).build();
        p.b.post_recv(&recv(1, 0, 4096)).unwrap();
        let mut r = request(op, 100, len);
        if op == Opcode::RC_SEND_ONLY_WITH_INVALIDATE {
            r.ieth = Some(0x1234);
        }
        let answers = poke(&mut p, &r, &vec![7u8; len]);
        assert_eq!(answers.len(), 1, "{name}");
        assert_eq!(answers[0].bth.opcode, Opcode::RC_ACKNOWLEDGE, "{name}");
        assert_eq!(answers[0].aeth.unwrap().syndrome, 0x61, "{name}");
        assert_eq!(answers[0].bth.psn, 100, "{name}");
        assert!(matches!(p.b.state(), QpState::Error(_)), "{name}");
        assert_eq!(p.b.counters().naks_sent.invalid_request, 1, "{name}");
        assert_eq!(
            p.b.poll_completion().map(|c| c.status),
            Some(CompletionStatus::WrFlushError),
            "{name}"
        );
    }
}

/// A WRITE's later segments are held to its RETH as the first is (the responder's fast path takes
/// MIDDLE and LAST and must decline, untouched, what the general path refuses): a MIDDLE short of
/// the PMTU, a LAST that ends the message early and a MIDDLE past its length are each NAK'd
/// invalid, and the bytes of a well-formed WRITE land whole, acknowledged packet by packet.
#[test]
fn a_writes_middle_and_last_segments_are_held_to_its_length() {
    let write = |op: Opcode, psn: u32, len: usize, kb: &MrKeys| {
        let mut r = request(op, psn, len);
        if op == Opcode::RC_RDMA_WRITE_FIRST {
            r.reth = Some(roceperf::wire::RethRepr {
                va: kb.va,
                rkey: kb.rkey,
                dma_len: 768,
            });
        }
        r
    };
    let (first, middle, last) = (
        Opcode::RC_RDMA_WRITE_FIRST,
        Opcode::RC_RDMA_WRITE_MIDDLE,
        Opcode::RC_RDMA_WRITE_LAST,
    );
    let cases: Vec<(&str, Vec<(Opcode, usize)>)> = vec![
        (
            "MIDDLE shorter than the PMTU",
            vec![(first, 256), (middle, 200)],
        ),
        (
            "LAST before the RETH's length",
            vec![(first, 256), (last, 256)],
        ),
        (
            "MIDDLE past the RETH's length",
            vec![(first, 256), (middle, 256), (middle, 256), (middle, 256)],
        ),
    ];
    for (name, packets) in cases {
        let (mut p, _, kb) = Setup::new(256, 4096).build();
        let bad = packets.len() - 1;
        for (i, &(op, len)) in packets.iter().enumerate() {
            let psn = 100 + i as u32;
            let answers = poke(&mut p, &write(op, psn, len, &kb), &vec![9u8; len]);
            assert_eq!(answers.len(), 1, "{name}: packet {i}");
            let syndrome = answers[0].aeth.unwrap().syndrome;
            assert_eq!(
                (answers[0].bth.psn, syndrome == 0x61),
                (psn, i == bad),
                "{name}"
            );
        }
        assert!(matches!(p.b.state(), QpState::Error(_)), "{name}");
        assert_eq!(p.b.counters().naks_sent.invalid_request, 1, "{name}");
    }
    let (mut p, _, kb) = Setup::new(256, 4096).build();
    for (i, op) in [first, middle, last].into_iter().enumerate() {
        let payload = vec![i as u8 + 1; 256];
        let answers = poke(&mut p, &write(op, 100 + i as u32, 256, &kb), &payload);
        assert_eq!(answers.len(), 1);
        assert_eq!(
            answers[0].aeth.unwrap().syndrome >> 5,
            0,
            "an ACK, not a NAK"
        );
    }
    assert_eq!(p.b.state(), QpState::Ready);
    let landed = bytes(&p.b, 0, 768);
    assert_eq!(landed[..256], [1; 256]);
    assert_eq!(landed[256..512], [2; 256]);
    assert_eq!(landed[512..], [3; 256]);
}

#[test]
fn psn_gap_is_answered_once_and_duplicates_are_re_acked() {
    let (mut p, _, _) = Setup::new(1024, 8192).build();
    for i in 0..3 {
        p.b.post_recv(&recv(i, 0, 64)).unwrap();
    }
    // Expected PSN is 100. 102 and 103 arrive first: one NAK naming 100, then silence.
    let a = poke(&mut p, &request(Opcode::RC_SEND_ONLY, 102, 4), &[1; 4]);
    assert_eq!(
        (a.len(), a[0].aeth.unwrap().syndrome, a[0].bth.psn),
        (1, 0x60, 100)
    );
    assert!(poke(&mut p, &request(Opcode::RC_SEND_ONLY, 103, 4), &[1; 4]).is_empty());
    // 100 is executed and ACKed; then a duplicate of it is not executed again, and its ACK names the
    // last PSN acknowledged.
    for _ in 0..2 {
        let a = poke(&mut p, &request(Opcode::RC_SEND_ONLY, 100, 4), &[1; 4]);
        let aeth = a[0].aeth.unwrap();
        assert_eq!((aeth.syndrome, a[0].bth.psn, aeth.msn), (0x1f, 100, 1));
    }
    assert_eq!(p.b.counters().duplicate_requests, 1);
    assert_eq!(p.b.poll_completion().map(|c| c.wr_id), Some(0));
    assert_eq!(p.b.poll_completion(), None, "executed once");
    assert_eq!(p.b.expected_psn(), 101);
}

#[test]
fn rnr_on_the_last_packet_of_a_write_with_imm_keeps_the_earlier_data() {
    let (mut p, _, kb) = Setup::tweaked(256, 1 << 16, |c| c.min_rnr_timer = 1).build();
    fill(&mut p.a, 0, 1000, 21);
    p.a.post_send(&wr(1, SendOp::WriteWithImm(77), 0, 1000, at(&kb, 512)))
        .unwrap();
    assert!(p.run_until(LIMIT, |p| p.a.counters().naks_received.rnr >= 2));
    assert_eq!(
        p.b.expected_psn(),
        103,
        "FIRST and two MIDDLEs executed, LAST refused"
    );
    p.b.post_recv(&recv(4, 0, 0)).unwrap();
    run_to(&mut p, 1, 1);
    ok(&p.a_done[0], 1, CompletionOp::Write, 1000);
    ok(&p.b_done[0], 4, CompletionOp::RecvWithImm, 1000);
    assert_eq!(p.b_done[0].imm, Some(77));
    assert_eq!(bytes(&p.b, 512, 1000), pattern(21, 1000));
}

#[test]
fn duplicate_atomic_is_answered_from_the_saved_result() {
    let (mut p, _, kb) = Setup::new(1024, 8192).build();
    let mut r = request(Opcode::RC_FETCH_ADD, 100, 0);
    r.atomic_eth = Some(roceperf::wire::AtomicEthRepr {
        va: kb.va + 64,
        rkey: kb.rkey,
        swap_add: 5,
        compare: 0,
    });
    let first = poke(&mut p, &r, &[]);
    let again = poke(&mut p, &r, &[]);
    assert_eq!(first[0].bth.opcode, Opcode::RC_ATOMIC_ACKNOWLEDGE);
    assert_eq!(first[0].atomic_ack_eth.unwrap().orig, 0);
    assert_eq!(
        again[0].atomic_ack_eth.unwrap().orig,
        0,
        "replayed, not re-executed"
    );
    assert_eq!(
        u64::from_ne_bytes(bytes(&p.b, 64, 8).try_into().unwrap()),
        5
    );
}

#[test]
fn duplicate_read_must_stay_inside_the_saved_one() {
    let (mut p, _, kb) = Setup::new(256, 8192).build();
    fill(&mut p.b, 0, 1024, 3);
    let read = |va: u64, len: u32| {
        let mut r = request(Opcode::RC_RDMA_READ_REQUEST, 100, 0);
        r.reth = Some(roceperf::wire::RethRepr {
            va,
            rkey: kb.rkey,
            dma_len: len,
        });
        r
    };
    // A zero-length READ names an address nobody checks; its duplicates must not overflow.
    assert_eq!(poke(&mut p, &read(0, 0), &[]).len(), 1);
    let mut r = read(u64::MAX, 1 << 31);
    assert!(
        poke(&mut p, &r, &[]).is_empty(),
        "outside the saved READ: dropped"
    );
    r.reth = Some(roceperf::wire::RethRepr {
        va: 0,
        rkey: kb.rkey,
        dma_len: 0,
    });
    assert_eq!(
        poke(&mut p, &r, &[]).len(),
        1,
        "the same READ again: replayed"
    );
    let mut next = read(kb.va, 1024);
    next.bth.psn = 101;
    let answers = poke(&mut p, &next, &[]);
    assert_eq!(answers.len(), 4, "1024 bytes in four responses");
    // A resumed duplicate from the third PSN gets the last two responses again.
    let mut again = read(kb.va + 512, 512);
    again.bth.psn = 103;
    let replay = poke(&mut p, &again, &[]);
    let ops: Vec<_> = replay.iter().map(|r| (r.bth.opcode, r.bth.psn)).collect();
    assert_eq!(
        ops,
        vec![
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 103),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 104)
        ]
    );
    let mut wider = read(kb.va + 512, 1024);
    wider.bth.psn = 103;
    assert!(
        poke(&mut p, &wider, &[]).is_empty(),
        "a duplicate asking for more than the original is dropped"
    );
    assert_eq!(p.b.counters().drops.protocol.duplicate_unmatched, 2);
}
