use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::sidr::SIDR_PRIVATE_DATA_LEN;
use super::*;
use crate::wire::mad::MAD_LEN;

const A: &str = "10.0.0.1";
const B: &str = "10.0.0.2";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn agent(seed: u64) -> CmAgent {
    CmAgent::new(CmConfig {
        guid: 0x0200_00ff_fe00_0000 | seed,
        retransmit: Duration::from_millis(100),
        max_retries: 3,
        seed,
    })
}

fn offer(qpn: u32, psn: u32) -> QpOffer {
    QpOffer {
        qpn,
        psn,
        mtu: RoceMtu::from_bytes(1024).unwrap(),
        responder_resources: 16,
        initiator_depth: 8,
        retry_count: 7,
        rnr_retry_count: 7,
        ack_timeout: 14,
    }
}

/// Moves every queued MAD from `from` (at address `from_ip`) to `to`; returns how many.
fn carry(from: &mut CmAgent, from_ip: &str, to: &mut CmAgent, now: Instant) -> usize {
    let mut buf = [0u8; MAD_LEN];
    let mut n = 0;
    while let Some((_, len)) = from.poll_transmit(&mut buf) {
        to.handle(now, ip(from_ip), &buf[..len]);
        n += 1;
    }
    n
}

/// Drops every queued MAD; returns how many.
fn lose(from: &mut CmAgent) -> usize {
    let mut buf = [0u8; MAD_LEN];
    std::iter::from_fn(|| from.poll_transmit(&mut buf)).count()
}

fn events(a: &mut CmAgent) -> Vec<CmEvent> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

fn t(ms: u64) -> Instant {
    Instant::from_nanos(ms * 1_000_000)
}

fn start(client: &mut CmAgent, port: u16) -> ConnId {
    client.connect(
        t(0),
        SocketAddr::new(ip(A), 33000),
        SocketAddr::new(ip(B), port),
        &offer(0x100, 0x1111),
        b"hello",
    )
}

/// Two agents, `b` listening on `port` and `a`'s REQ to it carried at t(1): (a, b, a's connection,
/// the request `b` holds).
fn requested(port: u16) -> (CmAgent, CmAgent, ConnId, ConnId) {
    let (mut a, mut b) = (agent(1), agent(2));
    b.listen(port);
    let ca = start(&mut a, port);
    carry(&mut a, A, &mut b, t(1));
    let Some(CmEvent::Request { conn, .. }) = b.poll_event() else {
        panic!("no request")
    };
    (a, b, ca, conn)
}

#[test]
fn req_rep_rtu_connects_both_sides_with_each_others_queue_pairs() {
    let (mut a, mut b) = (agent(1), agent(2));
    b.listen(18515);
    let ca = start(&mut a, 18515);
    assert_eq!(carry(&mut a, A, &mut b, t(1)), 1);
    let ev = events(&mut b);
    let [
        CmEvent::Request {
            conn,
            from,
            port,
            cma,
            peer,
            private_data,
        },
    ] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!((*from, *port), (ip(A), 18515));
    assert_eq!(cma.unwrap().src, SocketAddr::new(ip(A), 33000));
    assert_eq!(
        (peer.qpn, peer.psn, peer.mtu.bytes()),
        (0x100, 0x1111, 1024)
    );
    assert_eq!(&private_data[..5], b"hello");
    b.accept(t(2), *conn, &offer(0x200, 0x2222)).unwrap();
    assert_eq!(carry(&mut b, B, &mut a, t(3)), 1, "REP");
    let ev = events(&mut a);
    let [CmEvent::Established { conn: c, peer }] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(*c, ca);
    assert_eq!((peer.qpn, peer.psn), (0x200, 0x2222));
    // Our responder resources are capped by the peer's initiator depth, and the other way round.
    assert_eq!((peer.responder_resources, peer.initiator_depth), (8, 8));
    assert_eq!(carry(&mut a, A, &mut b, t(4)), 1, "RTU");
    assert!(matches!(&events(&mut b)[..], [CmEvent::Established { .. }]));
    assert_eq!(a.poll_timeout(), None, "nothing left to resend");
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn a_req_for_a_port_nobody_listens_on_is_rejected_as_invalid_service_id() {
    let (mut a, mut b) = (agent(1), agent(2));
    b.listen(1);
    start(&mut a, 18515);
    carry(&mut a, A, &mut b, t(1));
    assert!(events(&mut b).is_empty());
    carry(&mut b, B, &mut a, t(2));
    let ev = events(&mut a);
    assert!(
        matches!(
            &ev[..],
            [CmEvent::Rejected {
                reason: RejectReason::InvalidServiceId,
                ..
            }]
        ),
        "{ev:?}"
    );
    a.handle_timeout(t(1000));
    assert!(events(&mut a).is_empty(), "a rejected REQ is not resent");
}

#[test]
fn the_application_may_reject_with_consumer_reject() {
    let (mut a, mut b, _, conn) = requested(7);
    b.reject(conn, RejectReason::ConsumerDefined).unwrap();
    assert!(b.accept(t(1), conn, &offer(1, 1)).is_err(), "decided once");
    carry(&mut b, B, &mut a, t(2));
    let ev = events(&mut a);
    assert!(matches!(
        &ev[..],
        [CmEvent::Rejected {
            reason: RejectReason::ConsumerDefined,
            ..
        }]
    ));
}

#[test]
fn a_lost_rep_is_recovered_by_the_resent_req() {
    let (mut a, mut b, _, conn) = requested(9);
    b.accept(t(1), conn, &offer(0x200, 5)).unwrap();
    assert_eq!(lose(&mut b), 1, "the REP is lost");
    a.handle_timeout(t(150));
    assert_eq!(carry(&mut a, A, &mut b, t(150)), 1, "REQ again");
    assert!(
        events(&mut b).is_empty(),
        "a duplicate REQ is no new request"
    );
    assert_eq!(carry(&mut b, B, &mut a, t(151)), 1, "REP again");
    assert!(matches!(&events(&mut a)[..], [CmEvent::Established { .. }]));
    // The RTU is lost too: the passive side resends its REP, the active side its RTU.
    lose(&mut a);
    b.handle_timeout(t(300));
    carry(&mut b, B, &mut a, t(300));
    assert!(events(&mut a).is_empty());
    carry(&mut a, A, &mut b, t(301));
    assert!(matches!(&events(&mut b)[..], [CmEvent::Established { .. }]));
    assert_eq!(a.counters.retransmits, 1);
    assert_eq!(b.counters.retransmits, 1);
}

#[test]
fn an_unanswered_req_times_out_after_its_retries() {
    let mut a = agent(1);
    let conn = start(&mut a, 9);
    let mut sent = lose(&mut a);
    for k in 1..10 {
        a.handle_timeout(t(100 * k + 1));
        sent += lose(&mut a);
    }
    assert_eq!(sent, 1 + 3 + 1, "the REQ, 3 resends, then a REJ timeout");
    let ev = events(&mut a);
    assert_eq!(
        ev,
        [CmEvent::TimedOut {
            conn,
            unanswered: "REQ",
            sent: 4
        }]
    );
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn an_mra_buys_time() {
    let (mut a, mut b) = (agent(1), agent(2));
    let conn = start(&mut a, 9);
    lose(&mut a);
    let mra = crate::wire::cm::MraRepr {
        local_comm_id: 77,
        remote_comm_id: conn.0,
        message_mraed: crate::wire::cm::Answered::Req,
        service_timeout: 18, // about 1.07 s
        private_data: [0; 222],
    };
    let mut buf = [0u8; MAD_LEN];
    CmMessage::Mra(mra).emit(1, &mut buf);
    a.handle(t(10), ip(B), &buf);
    a.handle_timeout(t(500));
    assert_eq!(lose(&mut a), 0, "no resend while the MRA's time runs");
    assert!(a.poll_timeout().unwrap() > t(1000));
    let _ = &mut b;
}

#[test]
fn dreq_drep_disconnects_both_and_a_repeated_dreq_is_answered() {
    let (mut a, mut b, ca, cb) = requested(9);
    b.accept(t(1), cb, &offer(2, 2)).unwrap();
    carry(&mut b, B, &mut a, t(2));
    carry(&mut a, A, &mut b, t(3));
    events(&mut a);
    events(&mut b);
    b.disconnect(t(4), cb).unwrap();
    carry(&mut b, B, &mut a, t(5));
    assert_eq!(events(&mut a), [CmEvent::Disconnected { conn: ca }]);
    assert_eq!(carry(&mut a, A, &mut b, t(6)), 1, "DREP");
    assert_eq!(events(&mut b), [CmEvent::Disconnected { conn: cb }]);
    // b's DREQ again (as if the DREP were lost): answered, no second event.
    let mut buf = [0u8; MAD_LEN];
    CmMessage::Dreq(crate::wire::cm::DreqRepr::new(cb.0, ca.0, 0x100)).emit(5, &mut buf);
    a.handle(t(7), ip(B), &buf);
    assert_eq!(carry(&mut a, A, &mut b, t(7)), 1);
    assert!(events(&mut a).is_empty());
    // A DREQ for a connection nobody knows is answered too (ib_cm does), so its sender stops.
    CmMessage::Dreq(crate::wire::cm::DreqRepr::new(5, 6, 7)).emit(6, &mut buf);
    a.handle(t(8), ip(B), &buf);
    assert_eq!(lose(&mut a), 1);
}

#[test]
fn junk_is_counted_and_dropped() {
    let mut a = agent(1);
    a.handle(t(0), ip(B), &[0u8; 10]);
    a.handle(t(0), ip(B), &[1u8; MAD_LEN]);
    let mut buf = [0u8; MAD_LEN];
    CmMessage::Rtu(crate::wire::cm::RtuRepr::new(1, 2)).emit(1, &mut buf);
    a.handle(t(0), ip(B), &buf);
    assert_eq!(a.counters.dropped, 3);
    assert!(events(&mut a).is_empty());
}

fn ask(client: &mut CmAgent, port: u16, now: Instant) -> ConnId {
    client.resolve(
        now,
        SocketAddr::new(ip(A), 33001),
        SocketAddr::new(ip(B), port),
        b"ud?",
    )
}

#[test]
fn sidr_resolves_the_servers_qpn_and_qkey() {
    let (mut a, mut b) = (agent(1), agent(2));
    b.listen_ud(18515);
    b.listen(18515); // a TCP-space listener on the same port is another service
    let ca = ask(&mut a, 18515, t(0));
    assert_eq!(carry(&mut a, A, &mut b, t(1)), 1);
    let ev = events(&mut b);
    let [
        CmEvent::SidrRequest {
            conn,
            from,
            port: 18515,
            cma: Some(cma),
            private_data,
        },
    ] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(*from, ip(A));
    assert_eq!(cma.src, SocketAddr::new(ip(A), 33001));
    assert_eq!(&private_data[..3], b"ud?");
    assert_eq!(private_data.len(), SIDR_PRIVATE_DATA_LEN);
    b.answer_sidr(*conn, 0x42, crate::wire::cm::RDMA_UDP_QKEY, b"ok")
        .unwrap();
    assert!(b.answer_sidr(*conn, 0x42, 1, b"").is_err(), "answered once");
    assert_eq!(carry(&mut b, B, &mut a, t(2)), 1);
    let ev = events(&mut a);
    let [
        CmEvent::Resolved {
            conn,
            from: _,
            qpn: 0x42,
            qkey: 0x0123_4567,
            private_data,
        },
    ] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!((*conn, &private_data[..2]), (ca, &b"ok"[..]));
    assert_eq!(a.poll_timeout(), None, "nothing left to resend");
}

#[test]
fn sidr_for_a_port_nobody_listens_on_is_not_supported_and_a_refusal_is_a_reject() {
    let (mut a, mut b) = (agent(1), agent(2));
    b.listen(18515); // only the TCP port space: no UD service
    let ca = ask(&mut a, 18515, t(0));
    carry(&mut a, A, &mut b, t(1));
    assert!(events(&mut b).is_empty());
    carry(&mut b, B, &mut a, t(1));
    assert_eq!(
        events(&mut a),
        [CmEvent::Unresolved {
            conn: ca,
            status: SidrStatus::Unsupported
        }]
    );
    b.listen_ud(18516);
    let ca = ask(&mut a, 18516, t(2));
    carry(&mut a, A, &mut b, t(3));
    let ev = events(&mut b);
    let [CmEvent::SidrRequest { conn, .. }] = &ev[..] else {
        panic!("{ev:?}")
    };
    b.refuse_sidr(*conn, SidrStatus::Reject).unwrap();
    carry(&mut b, B, &mut a, t(3));
    assert_eq!(
        events(&mut a),
        [CmEvent::Unresolved {
            conn: ca,
            status: SidrStatus::Reject
        }]
    );
}

#[test]
fn sidr_req_is_resent_until_answered_and_a_repeat_gets_the_same_answer() {
    let (mut a, mut b) = (agent(1), agent(2));
    b.listen_ud(18515);
    let ca = ask(&mut a, 18515, t(0));
    assert_eq!(lose(&mut a), 1);
    assert_eq!(a.poll_timeout(), Some(t(100)));
    a.handle_timeout(t(100));
    assert_eq!(a.counters.retransmits, 1);
    carry(&mut a, A, &mut b, t(101));
    let ev = events(&mut b);
    let [CmEvent::SidrRequest { conn, .. }] = &ev[..] else {
        panic!("{ev:?}")
    };
    b.answer_sidr(*conn, 0x77, 5, b"").unwrap();
    assert_eq!(lose(&mut b), 1, "the SIDR_REP is lost");
    a.handle_timeout(t(200));
    carry(&mut a, A, &mut b, t(201));
    assert!(events(&mut b).is_empty(), "a repeat raises no new request");
    assert_eq!(
        carry(&mut b, B, &mut a, t(202)),
        1,
        "the same SIDR_REP again"
    );
    let ev = events(&mut a);
    assert!(
        matches!(ev[..], [CmEvent::Resolved { conn, qpn: 0x77, qkey: 5, .. }] if conn == ca),
        "{ev:?}"
    );
    // A late duplicate of the SIDR_REP is for nothing we still ask.
    let mut buf = [0u8; MAD_LEN];
    let rep = crate::wire::cm::SidrRepRepr::answer(
        &crate::wire::cm::SidrReqRepr {
            request_id: ca.0,
            partition_key: 0xffff,
            service_id: 0,
            private_data: [0; 216],
        },
        SidrStatus::Success,
        1,
        1,
    );
    CmMessage::SidrRep(Box::new(rep)).emit(9, &mut buf);
    a.handle(t(203), ip(B), &buf);
    assert!(events(&mut a).is_empty());
    assert_eq!(a.counters.dropped, 1);
}

#[test]
fn an_unanswered_sidr_req_times_out() {
    let mut a = agent(1);
    let ca = ask(&mut a, 18515, t(0));
    for k in 1..=4 {
        lose(&mut a);
        a.handle_timeout(t(100 * k));
    }
    assert_eq!(lose(&mut a), 0, "no resend after the last");
    assert_eq!(
        events(&mut a),
        [CmEvent::TimedOut {
            conn: ca,
            unanswered: "SIDR_REQ",
            sent: 4
        }]
    );
    assert_eq!(a.poll_timeout(), None);
}
