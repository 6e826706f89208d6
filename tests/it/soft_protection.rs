//! Memory protection on the wire (issue 33): a forged RoCE v2 WRITE, READ or atomic with the
//! expected PSN and a correct ICRC, from the connected peer's address, but with a wrong rkey or an
//! address beyond the registered region, is answered with NAK remote access error (AETH syndrome
//! 0x62) for its PSN, and not one byte of the responder's region changes. A plain UDP socket on
//! the peer's address plays the requester, so what is asserted is the datagram that came back.

use crate::soft_support::endpoints::{connect, free_port, pattern, remote, udp_cfg, with_icrc_v2};

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{Completion, CompletionStatus, Endpoint, SendOp, SendRequest};

/// The request forged.
#[derive(Clone, Copy, Debug)]
enum Op {
    Write,
    Read,
    FetchAdd,
}

/// What is wrong with it.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// An rkey the responder never registered.
    Rkey,
    /// The right rkey, 8 bytes that start 4 bytes before the region's end (atomic: just past it).
    OutOfBounds,
}

/// BTH (RC, AckReq) to the end of the payload of `op` to `qpn` at `psn`, naming `va` and `rkey`.
fn request(op: Op, qpn: u32, psn: u32, va: u64, rkey: u32) -> Vec<u8> {
    let opcode = match op {
        Op::Write => 0x0a,    // RDMA WRITE Only
        Op::Read => 0x0c,     // RDMA READ Request
        Op::FetchAdd => 0x14, // FetchAdd
    };
    let (q, p) = (qpn.to_be_bytes(), psn.to_be_bytes());
    let mut pkt = vec![
        opcode, 0x00, 0xff, 0xff, 0, q[1], q[2], q[3], 0x80, p[1], p[2], p[3],
    ];
    pkt.extend_from_slice(&va.to_be_bytes());
    pkt.extend_from_slice(&rkey.to_be_bytes());
    match op {
        // RETH's DMA length, then the 8 bytes written.
        Op::Write => {
            pkt.extend_from_slice(&8u32.to_be_bytes());
            pkt.extend_from_slice(&[0xee; 8]);
        }
        Op::Read => pkt.extend_from_slice(&8u32.to_be_bytes()),
        // AtomicETH: add 0xeeee…, compare (unused).
        Op::FetchAdd => {
            pkt.extend_from_slice(&0xeeee_eeee_eeee_eeeeu64.to_be_bytes());
            pkt.extend_from_slice(&0u64.to_be_bytes());
        }
    }
    pkt
}

fn forged_request_is_refused_and_changes_nothing(op: Op, fault: Fault, net: u8) {
    let (a_ip, b_ip) = (format!("127.0.{net}.1"), format!("127.0.{net}.2"));
    let port = free_port(&a_ip);
    let open = |ip: &str| {
        SoftEndpoint::open(SoftConfig {
            buffer_len: 1 << 16,
            ..udp_cfg(ip, port)
        })
        .unwrap()
    };
    let (mut a, mut b) = (open(&a_ip), open(&b_ip));
    connect(&mut a, &mut b);
    let (peer, ours) = (a.local_info().qps[0].clone(), b.local_info().qps[0].clone());
    // The requester steps aside; a socket on its address sends what it never would.
    drop(a);
    let wire = UdpSocket::bind((a_ip.as_str(), port)).unwrap();
    wire.set_nonblocking(true).unwrap();
    let len = b.buffer(0).len();
    b.buffer_mut(0).copy_from_slice(&pattern(0x5a, len));
    let before = b.buffer(0).to_vec();

    let (va, rkey) = match fault {
        Fault::Rkey => (ours.vaddr, ours.rkey ^ 0x8000_0000),
        Fault::OutOfBounds => match op {
            Op::FetchAdd => (ours.vaddr + ours.len, ours.rkey),
            _ => (ours.vaddr + ours.len - 4, ours.rkey),
        },
    };
    let psn = peer.psn; // what the responder expects next
    let ib = request(op, ours.qpn, psn, va, rkey);
    let pkt = with_icrc_v2((&a_ip, port), (&b_ip, port), ib);
    wire.send_to(&pkt, (b_ip.as_str(), port)).unwrap();

    let mut comps = [Completion::EMPTY; 8];
    let mut answer = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 2048];
    while answer.is_none() && Instant::now() < deadline {
        b.poll_cq(&mut comps).unwrap();
        if let Ok((n, _)) = wire.recv_from(&mut buf) {
            answer = Some(buf[..n].to_vec());
        }
    }
    // Anything that would still leave (a READ response, a second answer) has had its chance.
    for _ in 0..1000 {
        b.poll_cq(&mut comps).unwrap();
    }
    let nak = answer.unwrap_or_else(|| panic!("{op:?} {fault:?}: no answer; {:?}", b.counters()));
    let what = format!("{op:?} with a bad {fault:?}: answer {nak:02x?}");
    // BTH Acknowledge to the requester's QP, for the forged PSN; AETH syndrome NAK remote access.
    assert_eq!(nak[0], 0x11, "{what}");
    assert_eq!(&nak[5..8], &peer.qpn.to_be_bytes()[1..], "{what}");
    assert_eq!(&nak[9..12], &psn.to_be_bytes()[1..], "{what}");
    assert_eq!(nak[12], 0x62, "{what}");
    assert_eq!(
        nak.len(),
        12 + 4 + 4,
        "BTH, AETH, ICRC and nothing else: {what}"
    );
    assert!(
        wire.recv_from(&mut buf).is_err(),
        "{what}: a second datagram came back"
    );
    let after = b.buffer(0);
    let changed = before.iter().zip(after).position(|(x, y)| x != y);
    assert_eq!(changed, None, "{what}: the region changed");
    let c = b.counters();
    assert_eq!(c.naks_sent.remote_access, 1, "{what}: {c:?}");
    // Issue 33, defect 5: the responder's side names the request it refused and the NAK it sent.
    let failure = b
        .failure()
        .unwrap_or_else(|| panic!("{what}: no failure named"));
    let opcode = match op {
        Op::Write => "RC_RDMA_WRITE_ONLY",
        Op::Read => "RC_RDMA_READ_REQUEST",
        Op::FetchAdd => "RC_FETCH_ADD",
    };
    for part in [
        format!(
            "queue pair 0 (QPN {:#08x}), whose peer is {a_ip}:{port}",
            ours.qpn
        ),
        format!("refused {opcode} at PSN {psn:#08x}"),
        format!("rkey {rkey:#010x}, address {va:#x}"),
        "NAK remote access error (syndrome 0x62)".to_string(),
    ] {
        assert!(
            failure.contains(&part),
            "{what}: {failure:?} lacks {part:?}"
        );
    }
}

/// Issue 33, defect 5: the forger uses the PSN the responder expects next, which the real
/// requester has not sent yet; the responder NAKs it to the requester and stops answering. The
/// requester ignores a NAK for a PSN it never sent, but no longer forgets it: when its own WRITE then
/// runs out of retries, it names that NAK instead of blaming only the silence.
#[test]
fn a_requester_names_the_nak_its_peer_sent_for_a_psn_it_never_sent() {
    let (a_ip, b_ip) = ("127.0.47.1", "127.0.47.2");
    let port = free_port(a_ip);
    let mut ca = udp_cfg(a_ip, port);
    ca.timeout = 6; // ≈262 µs per try
    let mut a = SoftEndpoint::open(ca).unwrap();
    let mut b = SoftEndpoint::open(udp_cfg(b_ip, port)).unwrap();
    connect(&mut a, &mut b);
    let (peer, ours) = (a.local_info().qps[0].clone(), b.local_info().qps[0].clone());
    // Same address as the requester (the check is on the source address), another port.
    let forger = UdpSocket::bind((a_ip, 0)).unwrap();
    let forged_port = forger.local_addr().unwrap().port();
    let ib = request(
        Op::Write,
        ours.qpn,
        peer.psn,
        ours.vaddr,
        ours.rkey ^ 0x8000_0000,
    );
    let pkt = with_icrc_v2((a_ip, forged_port), (b_ip, port), ib);
    forger.send_to(&pkt, (b_ip, port)).unwrap();
    let mut comps = [Completion::EMPTY; 8];
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.failure().is_none() && Instant::now() < deadline {
        assert_eq!(a.poll_cq(&mut comps).unwrap(), 0);
        b.poll_cq(&mut comps).unwrap();
    }
    let write = SendRequest::new(1, SendOp::Write, 0, 4096, Some(remote(&b, 0, 0)));
    a.post_send(0, &write).unwrap();
    let mut got = None;
    while got.is_none() && Instant::now() < deadline + Duration::from_secs(5) {
        if a.poll_cq(&mut comps).unwrap() > 0 {
            got = Some(comps[0]);
        }
        b.poll_cq(&mut comps).unwrap();
    }
    let c = got.expect("the WRITE completes once its retries run out");
    assert_eq!(c.status, CompletionStatus::RetryExceeded, "{c:?}");
    let failure = a.failure().expect("the foreign NAK is named");
    for part in [
        format!(
            "the peer answered PSN {:#08x}, which this side had not sent",
            peer.psn
        ),
        "NAK remote access error (syndrome 0x62)".to_string(),
    ] {
        assert!(failure.contains(&part), "{failure:?} lacks {part:?}");
    }
    assert!(
        b.failure()
            .is_some_and(|f| f.contains("RC_RDMA_WRITE_ONLY"))
    );
}

#[test]
fn a_write_with_a_bad_rkey_is_nakked_and_writes_nothing() {
    forged_request_is_refused_and_changes_nothing(Op::Write, Fault::Rkey, 41);
}

#[test]
fn a_write_past_the_region_is_nakked_and_writes_nothing() {
    forged_request_is_refused_and_changes_nothing(Op::Write, Fault::OutOfBounds, 42);
}

#[test]
fn a_read_with_a_bad_rkey_is_nakked_and_returns_nothing() {
    forged_request_is_refused_and_changes_nothing(Op::Read, Fault::Rkey, 43);
}

#[test]
fn a_read_past_the_region_is_nakked_and_returns_nothing() {
    forged_request_is_refused_and_changes_nothing(Op::Read, Fault::OutOfBounds, 44);
}

#[test]
fn an_atomic_with_a_bad_rkey_is_nakked_and_changes_nothing() {
    forged_request_is_refused_and_changes_nothing(Op::FetchAdd, Fault::Rkey, 45);
}

#[test]
fn an_atomic_past_the_region_is_nakked_and_changes_nothing() {
    forged_request_is_refused_and_changes_nothing(Op::FetchAdd, Fault::OutOfBounds, 46);
}
