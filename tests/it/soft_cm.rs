//! `-R` on the soft transport, endpoint level: two soft endpoints on lo connect their queue pairs
//! through the CM (REQ / REP / RTU as MADs on QP1, RoCE v2) and then carry WRITE, SEND and READ with
//! every byte checked; a REQ for a port nobody listens on is rejected with "invalid service ID";
//! a REQ to an address where nobody answers times out after its retries; UD queue pairs resolve
//! each other through SIDR.

use crate::soft_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use roceperf::transport::cm::{CmEndpoint, CmEvent, CmQpParams, RejectReason};
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{Endpoint, QpInfo};
use soft_support::endpoints::{exchange, free_port, udp_cfg};

const PARAMS: CmQpParams = CmQpParams {
    responder_resources: 16,
    initiator_depth: 16,
    retry_count: 7,
    rnr_retry_count: 7,
    ack_timeout: 14,
};

fn pair(a_ip: &str, b_ip: &str, qps: usize) -> (SoftEndpoint, SoftEndpoint, u16) {
    let port = free_port(a_ip);
    let a = SoftEndpoint::open(SoftConfig {
        qps,
        ..udp_cfg(a_ip, port)
    })
    .unwrap();
    let b = SoftEndpoint::open(SoftConfig {
        qps,
        ..udp_cfg(b_ip, port)
    })
    .unwrap();
    (a, b, port)
}

/// Polls both sides' CM until `until` says stop (10 s at most); returns every event, per side.
fn run_cm(
    a: &mut SoftEndpoint,
    b: &mut SoftEndpoint,
    mut until: impl FnMut(&[CmEvent], &[CmEvent]) -> bool,
    mut on_a: impl FnMut(&mut SoftEndpoint, &CmEvent),
) -> (Vec<CmEvent>, Vec<CmEvent>) {
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !until(&ea, &eb) {
        assert!(Instant::now() < deadline, "CM events a={ea:?} b={eb:?}");
        if let Some(e) = a.cm_poll().unwrap() {
            on_a(a, &e);
            ea.push(e);
        }
        if let Some(e) = b.cm_poll().unwrap() {
            eb.push(e);
        }
    }
    (ea, eb)
}

/// Runs the CM until `b` hears an answer, `a` refusing every request; returns `b`'s events.
fn reject_all(a: &mut SoftEndpoint, b: &mut SoftEndpoint) -> Vec<CmEvent> {
    let (_, eb) = run_cm(
        a,
        b,
        |_, eb| !eb.is_empty(),
        |a, e| {
            if let CmEvent::Request { req, .. } = e {
                a.cm_reject(*req).unwrap();
            }
        },
    );
    eb
}

/// A pair of one queue pair each: `a` (at `a_ip`) listens on CM port `listen`, `b` (at `b_ip`) has
/// sent a REQ for queue pair 0 to `a_ip`:`connect_to`.
fn connecting(
    a_ip: &str,
    b_ip: &str,
    listen: u16,
    connect_to: u16,
) -> (SoftEndpoint, SoftEndpoint) {
    let (mut a, mut b, _) = pair(a_ip, b_ip, 1);
    a.cm_listen(listen).unwrap();
    let server = format!("{a_ip}:{connect_to}").parse().unwrap();
    b.cm_connect(0, server, &PARAMS, &[]).unwrap();
    (a, b)
}

/// Runs the CM until one connection stands on each side, `a` accepting requests onto queue pair 0.
fn accept_one(a: &mut SoftEndpoint, b: &mut SoftEndpoint) -> (Vec<CmEvent>, Vec<CmEvent>) {
    run_cm(
        a,
        b,
        |ea, eb| established(ea) == 1 && established(eb) == 1,
        |a, e| {
            if let CmEvent::Request { req, .. } = e {
                a.cm_accept(*req, 0, &PARAMS).unwrap();
            }
        },
    )
}

fn established(events: &[CmEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, CmEvent::Established { .. }))
        .count()
}

#[test]
fn queue_pairs_connected_through_the_cm_carry_write_send_and_read() {
    let (mut a, mut b, _) = pair("127.0.5.1", "127.0.5.2", 2);
    a.cm_listen(18515).unwrap();
    let server: SocketAddr = "127.0.5.1:18515".parse().unwrap();
    for qp in 0..2 {
        b.cm_connect(qp, server, &PARAMS, b"roceperf").unwrap();
    }
    let b_qps: Vec<QpInfo> = b.local_info().qps;
    let (ea, eb) = run_cm(
        &mut a,
        &mut b,
        |ea, eb| established(ea) == 2 && established(eb) == 2,
        |a, e| {
            if let CmEvent::Request {
                req,
                from,
                peer_qpn,
                private_data,
            } = e
            {
                assert_eq!(from.to_string(), "127.0.5.2");
                assert_eq!(&private_data[..8], b"roceperf");
                // Queue pair i talks to the peer's queue pair i, as `exchange` expects.
                let qp = b_qps.iter().position(|q| q.qpn == *peer_qpn).unwrap();
                a.cm_accept(*req, qp, &PARAMS).unwrap();
            }
        },
    );
    let (ia, ib) = (a.local_info(), b.local_info());
    for e in eb.iter().chain(&ea) {
        if let CmEvent::Established { qp, peer } = e {
            let other = if ia.qps.iter().any(|q| q.qpn == peer.qpn) {
                &ia
            } else {
                &ib
            };
            let q = &other.qps[*qp];
            assert_eq!((peer.qpn, peer.psn), (q.qpn, q.psn), "{e:?}");
            assert_eq!(peer.mtu, 4096);
        }
    }
    exchange(&mut b, &mut a);
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!(ca.drops.bad_icrc + cb.drops.bad_icrc, 0);
    assert_eq!(ca.drops.malformed + cb.drops.malformed, 0);
}

#[test]
fn a_req_for_a_port_nobody_listens_on_is_rejected_with_invalid_service_id() {
    let (mut a, mut b) = connecting("127.0.5.3", "127.0.5.4", 18515, 18516);
    let (ea, eb) = run_cm(&mut a, &mut b, |_, eb| !eb.is_empty(), |_, _| {});
    assert!(ea.is_empty(), "{ea:?}");
    assert_eq!(
        eb,
        [CmEvent::Rejected {
            qp: 0,
            reason: RejectReason::InvalidServiceId
        }]
    );
}

#[test]
fn the_listener_may_refuse_with_consumer_reject() {
    let (mut a, mut b) = connecting("127.0.5.5", "127.0.5.6", 7, 7);
    let eb = reject_all(&mut a, &mut b);
    assert_eq!(
        eb,
        [CmEvent::Rejected {
            qp: 0,
            reason: RejectReason::ConsumerDefined
        }]
    );
}

#[test]
fn a_req_nobody_answers_times_out_after_its_retries() {
    let port = free_port("127.0.5.7");
    let mut b = SoftEndpoint::open(udp_cfg("127.0.5.7", port)).unwrap();
    b.cm_connect(0, "127.0.5.8:1".parse().unwrap(), &PARAMS, &[])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let e = loop {
        assert!(Instant::now() < deadline, "no timeout");
        if let Some(e) = b.cm_poll().unwrap() {
            break e;
        }
    };
    let CmEvent::Unanswered { qp: 0, detail } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(detail, "REQ sent 9 times, never answered");
}

#[test]
fn dreq_and_drep_take_the_connection_down_on_both_sides() {
    let (mut a, mut b) = connecting("127.0.5.9", "127.0.5.10", 9, 9);
    accept_one(&mut a, &mut b);
    a.cm_disconnect(0).unwrap();
    let (ea, eb) = run_cm(
        &mut a,
        &mut b,
        |ea, eb| !ea.is_empty() && !eb.is_empty(),
        |_, _| {},
    );
    assert_eq!(ea, [CmEvent::Disconnected { qp: 0 }]);
    assert_eq!(eb, [CmEvent::Disconnected { qp: 0 }]);
}

/// `-c UD`: a queue pair is resolved (SIDR_REQ → SIDR_REP), not connected. A port nobody listens on
/// reads as REJ "invalid service ID" (SIDR status "not supported"), a refusal as "consumer reject";
/// an accepted request gives each side the other's QPN, the requester's from its private data.
#[test]
fn ud_queue_pairs_resolve_each_other_through_sidr() {
    let port = free_port("127.0.5.11");
    let ud = |ip| SoftConfig {
        qps: 1,
        connection: roceperf::params::ConnType::Ud,
        qkey: roceperf::transport::cm::RDMA_UDP_QKEY,
        ..udp_cfg(ip, port)
    };
    let mut a = SoftEndpoint::open(ud("127.0.5.11")).unwrap();
    let mut b = SoftEndpoint::open(ud("127.0.5.12")).unwrap();
    let server: SocketAddr = "127.0.5.11:18515".parse().unwrap();
    a.cm_listen(18514).unwrap(); // another port
    b.cm_connect(0, server, &PARAMS, &[]).unwrap();
    let (ea, eb) = run_cm(&mut a, &mut b, |_, eb| !eb.is_empty(), |_, _| {});
    assert!(ea.is_empty(), "{ea:?}");
    let invalid = CmEvent::Rejected {
        qp: 0,
        reason: RejectReason::InvalidServiceId,
    };
    assert_eq!(eb, [invalid]);
    a.cm_listen(18515).unwrap();
    b.cm_connect(0, server, &PARAMS, &[]).unwrap();
    let eb = reject_all(&mut a, &mut b);
    let refused = CmEvent::Rejected {
        qp: 0,
        reason: RejectReason::ConsumerDefined,
    };
    assert_eq!(eb, [refused]);
    let (qa, qb) = (a.local_info().qps[0].qpn, b.local_info().qps[0].qpn);
    b.cm_connect(0, server, &PARAMS, &[]).unwrap();
    let (ea, eb) = accept_one(&mut a, &mut b);
    // Every request `a` heard names the requester's QPN (there was at least one).
    let requesters: Vec<u32> = ea
        .iter()
        .filter_map(|e| match e {
            CmEvent::Request { peer_qpn, .. } => Some(*peer_qpn),
            _ => None,
        })
        .collect();
    assert!(
        !requesters.is_empty() && requesters.iter().all(|q| *q == qb),
        "the requester's QPN: {ea:?}"
    );
    for (events, want, ip) in [(&ea, qb, "127.0.5.12"), (&eb, qa, "127.0.5.11")] {
        let peer = events
            .iter()
            .find_map(|e| match e {
                CmEvent::Established { qp: 0, peer } => Some(*peer),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            (peer.qpn, peer.psn, peer.ip.to_string()),
            (want, 0, ip.into())
        );
    }
    // No CM connection to tear down: disconnecting is immediate.
    b.cm_disconnect(0).unwrap();
    assert_eq!(b.cm_poll().unwrap(), Some(CmEvent::Disconnected { qp: 0 }));
}
