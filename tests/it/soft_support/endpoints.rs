//! Helpers to build, connect and exercise pairs of soft endpoints in one process.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use roceperf::params::{IoKind, RoceVersion};
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::soft::io::impair::ImpairConfig;
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, Endpoint, RecvRequest, RemoteAddr, SendOp,
};

pub use crate::common::work_request::wr;

pub fn udp_cfg(bind: &str, port: u16) -> SoftConfig {
    let mut c = SoftConfig::new("lo", RoceVersion::V2);
    c.bind = Some(bind.parse().unwrap());
    c.udp_port = port;
    c.buffer_len = 1 << 20;
    c.impair = Some(ImpairConfig::default());
    c
}

/// An endpoint on `veth0` (a [`crate::soft_support::NetnsPair`]'s link) over AF_PACKET, with a 1 MiB
/// buffer and the impairment layer in place but idle.
pub fn veth_packet_cfg(version: RoceVersion) -> SoftConfig {
    let mut c = SoftConfig::new("veth0", version);
    c.io = IoKind::Packet;
    c.buffer_len = 1 << 20;
    c.impair = Some(ImpairConfig::default());
    c
}

/// An RC SEND_ONLY of 4 `payload` bytes to `qpn` at `psn`, from `src`:`src_port` to `dst`:`dst_port`
/// (RoCE v2 over IPv4, the IP ID 0) with a correct ICRC: the RoCE part of the UDP datagram.
pub fn send_only_v2(
    (src, src_port): (&str, u16),
    (dst, dst_port): (&str, u16),
    qpn: u32,
    psn: u32,
    payload: [u8; 4],
) -> Vec<u8> {
    let (q, p) = (qpn.to_be_bytes(), psn.to_be_bytes());
    let mut pkt = vec![
        0x04, 0x00, 0xff, 0xff, 0, q[1], q[2], q[3], 0x80, p[1], p[2], p[3],
    ];
    pkt.extend_from_slice(&payload);
    with_icrc_v2((src, src_port), (dst, dst_port), pkt)
}

/// `pkt` (BTH to the end of the payload) with the ICRC it has when sent from `src`:`src_port` to
/// `dst`:`dst_port` (RoCE v2 over IPv4, the IP ID 0) appended: a forged packet the receiver accepts.
pub fn with_icrc_v2(
    (src, src_port): (&str, u16),
    (dst, dst_port): (&str, u16),
    mut pkt: Vec<u8>,
) -> Vec<u8> {
    use roceperf::wire::{Icrc, Ipv4Repr, UdpRepr};
    let ip = Ipv4Repr::roce(src.parse().unwrap(), dst.parse().unwrap());
    let udp = UdpRepr {
        src_port,
        dst_port,
        checksum: 0,
    };
    let icrc = Icrc::v2_ipv4(&ip, &udp, pkt.len()).finish_ib(&pkt);
    pkt.extend_from_slice(&icrc.to_le_bytes());
    pkt
}

/// A well-formed RoCE v2 RC SEND_ONLY of "hi!!" to QPN 0xeeeeee, which no endpoint has, from
/// `src`:`src_port` to `dst`:`dst_port` (IPv4) with a correct ICRC; and the same with one payload bit
/// flipped, whose ICRC is then wrong.
pub fn stray_send_only(src: &str, src_port: u16, dst: &str, dst_port: u16) -> (Vec<u8>, Vec<u8>) {
    let pkt = send_only_v2((src, src_port), (dst, dst_port), 0xee_eeee, 1, *b"hi!!");
    let mut bad = pkt.clone();
    bad[12] ^= 1;
    (pkt, bad)
}

pub fn free_port(ip: &str) -> u16 {
    let ip: IpAddr = ip.parse().unwrap();
    std::net::UdpSocket::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Opens side a's endpoint in its namespace of `pair` with `open("10.77.0.1")` and side b's with
/// `open("10.77.0.2")`, connects them and has them [`exchange`]; returns both, for their counters.
pub fn exchange_across<F>(
    pair: &crate::soft_support::NetnsPair,
    open: impl Fn(&'static str) -> F,
) -> (SoftEndpoint, SoftEndpoint)
where
    F: FnOnce() -> SoftEndpoint + Send + 'static,
{
    let mut a = pair.in_ns('a', open("10.77.0.1"));
    let mut b = pair.in_ns('b', open("10.77.0.2"));
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    (a, b)
}

pub fn connect(a: &mut SoftEndpoint, b: &mut SoftEndpoint) {
    let (ia, ib) = (a.local_info(), b.local_info());
    a.connect(&ib).unwrap();
    b.connect(&ia).unwrap();
}

pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed as u32) as u8)
        .collect()
}

/// Polls both endpoints until `a` has `want_a` and `b` has `want_b` completions (10 s at most).
pub fn drive(
    a: &mut SoftEndpoint,
    b: &mut SoftEndpoint,
    want_a: usize,
    want_b: usize,
) -> (Vec<Completion>, Vec<Completion>) {
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    let mut buf = [Completion::EMPTY; 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    while (ca.len() < want_a || cb.len() < want_b) && Instant::now() < deadline {
        let n = a.poll_cq(&mut buf).unwrap();
        ca.extend_from_slice(&buf[..n]);
        let n = b.poll_cq(&mut buf).unwrap();
        cb.extend_from_slice(&buf[..n]);
    }
    // A few more rounds so the last ACKs are delivered and counted.
    for _ in 0..50 {
        let n = a.poll_cq(&mut buf).unwrap();
        ca.extend_from_slice(&buf[..n]);
        let n = b.poll_cq(&mut buf).unwrap();
        cb.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        (ca.len(), cb.len()),
        (want_a, want_b),
        "completions a={ca:?} b={cb:?}; counters a={:?} b={:?}",
        a.counters(),
        b.counters()
    );
    (ca, cb)
}

pub fn remote(peer: &SoftEndpoint, qp: usize, offset: u64) -> RemoteAddr {
    let q = &peer.local_info().qps[qp];
    RemoteAddr {
        addr: q.vaddr + offset,
        rkey: q.rkey,
    }
}

/// WRITE 200 KiB, SEND 10000 B with immediate, READ 30000 B, and checks every byte at the other end.
pub fn exchange(a: &mut SoftEndpoint, b: &mut SoftEndpoint) {
    let qps = a.qp_count();
    for qp in 0..qps {
        let seed = 7 + qp as u8;
        a.buffer_mut(qp)[..200_000].copy_from_slice(&pattern(seed, 200_000));
        b.buffer_mut(qp)[600_000..630_000].copy_from_slice(&pattern(seed ^ 0x55, 30_000));
        b.post_recv(
            qp,
            &RecvRequest {
                wr_id: 900,
                offset: 300_000,
                len: 16_384,
            },
        )
        .unwrap();
        let rw = remote(b, qp, 0);
        a.post_send(qp, &wr(1, SendOp::Write, 0, 200_000, Some(rw)))
            .unwrap();
        a.post_send(qp, &wr(2, SendOp::SendWithImm(0xabcd), 0, 10_000, None))
            .unwrap();
        let rr = remote(b, qp, 600_000);
        a.post_send(qp, &wr(3, SendOp::Read, 400_000, 30_000, Some(rr)))
            .unwrap();
    }
    let (ca, cb) = drive(a, b, 3 * qps, qps);
    for c in &ca {
        assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
    }
    for c in &cb {
        assert_eq!(
            (c.status, c.op, c.byte_len, c.imm),
            (
                CompletionStatus::Success,
                CompletionOp::Recv,
                10_000,
                Some(0xabcd)
            )
        );
    }
    for qp in 0..qps {
        let seed = 7 + qp as u8;
        assert!(
            b.buffer(qp)[..200_000] == pattern(seed, 200_000)[..],
            "WRITE payload on qp {qp}"
        );
        assert!(
            b.buffer(qp)[300_000..310_000] == pattern(seed, 10_000)[..],
            "SEND payload on qp {qp}"
        );
        assert!(
            a.buffer(qp)[400_000..430_000] == pattern(seed ^ 0x55, 30_000)[..],
            "READ payload on qp {qp}"
        );
    }
}
