//! SoftEndpoint end to end: two endpoints in one process exchange real RoCE packets over lo (UDP
//! backend, IPv4 and IPv6) and across a veth pair (AF_PACKET, RoCE v1 and v2), with the payload of
//! every message checked; deliberate loss, duplication, reordering and corruption; junk on the port;
//! a peer that disappears.

use crate::soft_support;

use std::time::{Duration, Instant};

use roceperf::params::{IoKind, RoceVersion};
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::soft::io::impair::ImpairConfig;
use roceperf::transport::{Completion, CompletionStatus, Endpoint, SendOp};
use soft_support::endpoints::{
    connect, exchange, free_port, remote, stray_send_only, udp_cfg, veth_packet_cfg, wr,
};
use soft_support::{NetnsPair, is_root};

#[test]
fn udp_v4_on_loopback_moves_every_byte_of_write_send_and_read() {
    let port = free_port("127.0.3.1");
    let mut a = SoftEndpoint::open(SoftConfig {
        qps: 2,
        ..udp_cfg("127.0.3.1", port)
    })
    .unwrap();
    let mut b = SoftEndpoint::open(SoftConfig {
        qps: 2,
        ..udp_cfg("127.0.3.2", port)
    })
    .unwrap();
    assert_eq!(a.mtu(), 4096, "lo's 64 KiB MTU allows the largest RoCE MTU");
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!(
        ca.drops.bad_icrc + cb.drops.bad_icrc,
        0,
        "every ICRC verifies"
    );
    assert_eq!(ca.retransmitted_packets, 0);
    // Per QP: 49 WRITE packets (200000 B at MTU 4096), 3 SEND packets, 1 READ request.
    assert!(ca.tx_packets >= 2 * (49 + 3 + 1), "{ca:?}");
    assert!(
        ca.tx_batches < ca.tx_packets,
        "packets go out in batches: {ca:?}"
    );
    assert!(
        a.describe()
            .contains("RoCE v2/IPv4 (udp I/O) over UDP socket 127.0.3.1"),
        "{}",
        a.describe()
    );
}

#[test]
fn udp_v6_on_loopback() {
    if crate::common::skip_unless(
        std::net::UdpSocket::bind("[::1]:0").is_ok(),
        "no IPv6 on lo",
    ) {
        return;
    }
    let mut a = SoftEndpoint::open(udp_cfg("::1", free_port("::1"))).unwrap();
    let mut b = SoftEndpoint::open(udp_cfg("::1", free_port("::1"))).unwrap();
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    assert_eq!(b.counters().drops.bad_icrc, 0);
}

#[test]
fn loss_duplication_and_reordering_are_repaired() {
    let port = free_port("127.0.4.1");
    let impair = ImpairConfig {
        loss: 0.03,
        duplicate: 0.02,
        reorder: 0.05,
        seed: 11,
        ..ImpairConfig::default()
    };
    let mut ca = udp_cfg("127.0.4.1", port);
    ca.impair = Some(impair);
    ca.timeout = 8; // ≈1 ms: keep the test quick
    let mut cb = udp_cfg("127.0.4.2", port);
    cb.impair = Some(ImpairConfig { seed: 12, ..impair });
    cb.timeout = 8;
    let mut a = SoftEndpoint::open(ca).unwrap();
    let mut b = SoftEndpoint::open(cb).unwrap();
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    let c = a.counters();
    assert!(
        c.impair.dropped > 0 && c.impair.duplicated > 0 && c.impair.reordered > 0,
        "{c:?}"
    );
    assert!(
        c.retransmitted_packets > 0,
        "losses are repaired by retransmission: {c:?}"
    );
}

#[test]
fn corrupted_packets_fail_the_icrc_and_are_retransmitted() {
    let port = free_port("127.0.5.1");
    let mut ca = udp_cfg("127.0.5.1", port);
    ca.impair = Some(ImpairConfig {
        corrupt: 0.05,
        seed: 5,
        ..ImpairConfig::default()
    });
    ca.timeout = 8;
    let mut cb = udp_cfg("127.0.5.2", port);
    cb.timeout = 8;
    let mut a = SoftEndpoint::open(ca).unwrap();
    let mut b = SoftEndpoint::open(cb).unwrap();
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    let corrupted = a.counters().impair.corrupted;
    assert!(corrupted > 0);
    assert_eq!(
        b.counters().drops.bad_icrc,
        corrupted,
        "every corrupted packet is caught"
    );
}

#[test]
fn junk_on_the_port_is_dropped_and_counted() {
    let port = free_port("127.0.6.1");
    let mut a = SoftEndpoint::open(udp_cfg("127.0.6.1", port)).unwrap();
    let mut b = SoftEndpoint::open(udp_cfg("127.0.6.2", port)).unwrap();
    connect(&mut a, &mut b);
    let junk = std::net::UdpSocket::bind("127.0.6.3:0").unwrap();
    let jport = junk.local_addr().unwrap().port();
    let to = ("127.0.6.2", port);
    // A well-formed RC SEND_ONLY to a QPN nobody has, with a correct ICRC; then the same with one
    // payload bit flipped: bad ICRC.
    let (pkt, bad) = stray_send_only("127.0.6.3", jport, "127.0.6.2", port);
    junk.send_to(&pkt, to).unwrap();
    junk.send_to(&bad, to).unwrap();
    // Not RoCE at all, and a datagram larger than any RoCE packet (cut by the receive slot).
    junk.send_to(b"GET / HTTP/1.0\r\n", to).unwrap();
    junk.send_to(b"hi", to).unwrap();
    junk.send_to(&vec![0u8; 9000], to).unwrap();
    let mut buf = [Completion::EMPTY; 4];
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.counters().rx_packets < 5 && Instant::now() < deadline {
        b.poll_cq(&mut buf).unwrap();
    }
    let d = b.counters().drops;
    assert_eq!(d.unknown_qpn, 1, "{d:?}");
    // The HTTP line is 16 bytes, long enough to look like BTH+ICRC: its ICRC fails.
    assert_eq!(d.bad_icrc, 2, "{d:?}");
    assert_eq!(d.malformed, 2, "short and truncated: {d:?}");
    // And the endpoint still works.
    exchange(&mut a, &mut b);
}

#[test]
fn a_vanished_peer_ends_in_retry_exceeded() {
    let port = free_port("127.0.7.1");
    let mut ca = udp_cfg("127.0.7.1", port);
    ca.timeout = 6; // ≈262 µs per try
    let mut a = SoftEndpoint::open(ca).unwrap();
    let mut b = SoftEndpoint::open(udp_cfg("127.0.7.2", port)).unwrap();
    connect(&mut a, &mut b);
    let rw = remote(&b, 0, 0);
    drop(b);
    a.post_send(0, &wr(1, SendOp::Write, 0, 4096, Some(rw)))
        .unwrap();
    let mut buf = [Completion::EMPTY; 4];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = None;
    while got.is_none() && Instant::now() < deadline {
        if a.poll_cq(&mut buf).unwrap() > 0 {
            got = Some(buf[0]);
        }
    }
    let c = got.expect("a completion after the retries run out");
    assert_eq!(c.status, CompletionStatus::RetryExceeded, "{c:?}");
    assert!(c.status.describe().contains("still running"));
    assert!(a.counters().timeouts >= 7, "{:?}", a.counters());
}

fn packet_pair(version: RoceVersion, family_v6: bool, ring: usize) {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&["--mtu", "9000"]);
    let open = move |bind: &'static str| {
        move || {
            let mut c = veth_packet_cfg(version);
            c.packet_rx_ring = ring;
            if version == RoceVersion::V2 {
                c.bind = Some(bind.parse().unwrap());
            }
            SoftEndpoint::open(c).unwrap()
        }
    };
    let (ba, bb) = if family_v6 {
        ("fd77::1", "fd77::2")
    } else {
        ("10.77.0.1", "10.77.0.2")
    };
    let mut a = pair.in_ns('a', open(ba));
    let mut b = pair.in_ns('b', open(bb));
    // A neighbour on b's interface, as a congestion study's victim server beside the bulk
    // receiver: its socket's filter keeps b's frames out (QPNs are random; another draw if equal).
    let qpn = |e: &SoftEndpoint| e.local_info().qps[0].qpn;
    let mut n = pair.in_ns('b', open(bb));
    while qpn(&n) == qpn(&b) {
        n = pair.in_ns('b', open(bb));
    }
    assert_eq!(a.mtu(), 4096);
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    assert_eq!(b.counters().drops.bad_icrc, 0);
    assert_eq!(a.counters().drops.bad_icrc, 0);
    let mut out = [roceperf::transport::Completion::EMPTY; 16];
    for _ in 0..100 {
        assert_eq!(n.poll_cq(&mut out).unwrap(), 0);
    }
    let c = n.counters();
    assert_eq!(
        (c.rx_packets, c.drops.unknown_qpn),
        (0, 0),
        "the neighbour read none of b's {} frames: {c:?}",
        b.counters().rx_packets
    );
    assert!(b.counters().rx_packets > 0);
}

#[test]
fn packet_v1_across_veth() {
    packet_pair(RoceVersion::V1, false, 512);
}

#[test]
fn packet_v1_across_veth_without_the_mmap_ring() {
    packet_pair(RoceVersion::V1, false, 0);
}

#[test]
fn packet_v2_ipv4_across_veth() {
    packet_pair(RoceVersion::V2, false, 512);
}

#[test]
fn packet_v2_ipv6_across_veth() {
    packet_pair(RoceVersion::V2, true, 512);
}

#[test]
fn gso_and_gro_on_loopback_deliver_the_same_bytes() {
    let port = free_port("127.0.12.1");
    let gso = |bind: &str| SoftConfig {
        gso: true,
        ..udp_cfg(bind, port)
    };
    // Both sides with GSO/GRO, then a GSO sender against a plain receiver (the kernel segments).
    for (ca, cb) in [
        (gso("127.0.12.1"), gso("127.0.12.2")),
        (gso("127.0.12.3"), udp_cfg("127.0.12.4", port)),
    ] {
        let mut a = SoftEndpoint::open(ca).unwrap();
        let mut b = SoftEndpoint::open(cb).unwrap();
        connect(&mut a, &mut b);
        exchange(&mut a, &mut b);
        let (ka, kb) = (a.counters(), b.counters());
        assert_eq!(ka.drops.bad_icrc + kb.drops.bad_icrc, 0, "{ka:?} {kb:?}");
        // 49 WRITE packets of one message leave in a handful of sends, not 49.
        assert!(ka.tx_batches * 4 < ka.tx_packets, "{ka:?}");
        assert_eq!(
            kb.rx_packets, ka.tx_packets,
            "every segment counted once at the receiver"
        );
    }
    // Impairment works on each RoCE packet inside the super-datagrams: GSO stays on (issue 15), the
    // losses are repaired, and every packet that arrives verifies.
    let lossy = |bind: &str, seed| {
        let mut c = gso(bind);
        c.impair = Some(ImpairConfig {
            loss: 0.05,
            duplicate: 0.02,
            reorder: 0.02,
            seed,
            ..ImpairConfig::default()
        });
        c.timeout = 8;
        c
    };
    let mut a = SoftEndpoint::open(lossy("127.0.12.5", 1)).unwrap();
    let mut b = SoftEndpoint::open(lossy("127.0.12.6", 2)).unwrap();
    assert!(
        a.describe().contains("up to 64 packets per send")
            && a.describe().contains("inside GSO/GRO batches"),
        "{}",
        a.describe()
    );
    connect(&mut a, &mut b);
    exchange(&mut a, &mut b);
    let (ka, kb) = (a.counters(), b.counters());
    assert_eq!(ka.drops.bad_icrc + kb.drops.bad_icrc, 0, "{ka:?} {kb:?}");
    assert!(ka.tx_batches * 4 < ka.tx_packets, "{ka:?}");
    assert!(
        ka.impair.dropped > 0 && ka.retransmitted_packets > 0,
        "{ka:?}"
    );
}

/// A UDP-backend endpoint bound to `ba` in namespace a and an AF_PACKET one bound to `bb` in b.
fn udp_and_packet_on_veth(
    pair: &NetnsPair,
    ba: &'static str,
    bb: &'static str,
) -> (SoftEndpoint, SoftEndpoint) {
    let a = pair.in_ns('a', move || {
        let mut c = udp_cfg(ba, 4791);
        c.device = "veth0".into();
        SoftEndpoint::open(c).unwrap()
    });
    let b = pair.in_ns('b', move || {
        let mut c = udp_cfg(bb, 4791);
        c.device = "veth0".into();
        c.io = IoKind::Packet;
        SoftEndpoint::open(c).unwrap()
    });
    (a, b)
}

/// The UDP backend's packets (kernel-written IPv4/IPv6 headers) verify on the AF_PACKET backend,
/// which checks the ICRC over the real headers, and the other way round: the two backends speak
/// the same wire format, and the kernel really sends what our ICRC assumed (IPv4 ID 0, DF).
#[test]
fn udp_and_packet_backends_interoperate_across_veth() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&["--mtu", "9000"]);
    for (ba, bb) in [("10.77.0.1", "10.77.0.2"), ("fd77::1", "fd77::2")] {
        let (mut a, mut b) = udp_and_packet_on_veth(&pair, ba, bb);
        connect(&mut a, &mut b);
        exchange(&mut a, &mut b);
        let (ka, kb) = (a.counters(), b.counters());
        assert_eq!(
            kb.drops.bad_icrc, 0,
            "UDP-socket packets verify over their real headers: {kb:?}"
        );
        assert_eq!(ka.drops.bad_icrc, 0, "{ka:?}");
        assert!(
            kb.rx_packets >= 53, // 49 WRITE + 3 SEND + 1 READ request
            "WRITE, SEND and READ request all arrived: {kb:?}"
        );
    }
}

/// A verbs or perftest peer sends only its GID: the AF_PACKET backend finds the peer's MAC in the
/// kernel's neighbour table (resolving it first), for IPv4 and IPv6, and the two sides talk.
#[test]
fn packet_backend_resolves_a_peer_that_sent_no_mac() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&["--mtu", "9000"]);
    for (ba, bb) in [("10.77.0.1", "10.77.0.2"), ("fd77::1", "fd77::2")] {
        let (mut a, b) = udp_and_packet_on_veth(&pair, ba, bb);
        let mut ia = a.local_info();
        ia.mac = None; // as a verbs endpoint or perftest describes itself
        let ib = b.local_info();
        a.connect(&ib).unwrap();
        // The neighbour table is per network namespace: connect where b lives.
        let mut b = pair.in_ns('b', move || {
            let mut b = b;
            b.connect(&ia).unwrap();
            b
        });
        exchange(&mut a, &mut b);
        let kb = b.counters();
        assert_eq!(kb.drops.bad_icrc, 0, "{kb:?}");
        assert!(kb.rx_packets >= 53, "{ba}: {kb:?}");
    }
}

/// AF_PACKET on lo (no MAC, every frame seen by every packet socket): v1 and v2 still work, each
/// endpoint's socket filter keeping out the frames to the other's queue pairs.
#[test]
fn packet_v1_and_v2_on_loopback() {
    if crate::common::skip_unless(is_root(), "needs root for AF_PACKET") {
        return;
    }
    for (version, ba, bb) in [
        (RoceVersion::V1, "127.0.14.1", "127.0.14.2"),
        (RoceVersion::V2, "127.0.14.3", "127.0.14.4"),
    ] {
        let open = |bind: &str| {
            let mut c = udp_cfg(bind, 4791);
            c.version = version;
            c.io = IoKind::Packet;
            SoftEndpoint::open(c).unwrap()
        };
        let (mut a, mut b) = (open(ba), open(bb));
        connect(&mut a, &mut b);
        exchange(&mut a, &mut b);
        let (ka, kb) = (a.counters(), b.counters());
        assert_eq!(ka.drops.bad_icrc + kb.drops.bad_icrc, 0);
        // Every frame on lo reaches every packet socket; b's filter keeps out those to a's queue
        // pairs (which b's destination check counted as not for it before the filter).
        assert_eq!(
            (kb.drops.not_for_us, kb.drops.unknown_qpn),
            (0, 0),
            "b's socket filter passes only frames to its own queue pairs: {kb:?}"
        );
    }
}

/// A UDP socket cannot see the sender's IPv4 ID, which the ICRC covers. A packet whose ICRC was
/// computed for a hashed ID (as rxe sends) still passes the ICRC check and goes on to the QPN check;
/// the same packet with one payload bit flipped is dropped as a bad ICRC.
#[test]
fn ipv4_icrc_is_checked_whatever_the_senders_ip_id() {
    use roceperf::wire::{Ipv4Repr, UdpRepr, icrc_v2_ipv4};
    let port = free_port("127.0.15.1");
    let mut b = SoftEndpoint::open(udp_cfg("127.0.15.1", port)).unwrap();
    let junk = std::net::UdpSocket::bind("127.0.15.3:0").unwrap();
    // SEND ONLY to QPN 0xeeeeee (nobody), 4 payload bytes, then the ICRC.
    let ib = [
        4u8, 0, 0xff, 0xff, 0, 0xee, 0xee, 0xee, 0x80, 0, 0, 1, 1, 2, 3, 4,
    ];
    let ip = Ipv4Repr {
        ident: 0x9d3b,
        ..Ipv4Repr::roce("127.0.15.3".parse().unwrap(), "127.0.15.1".parse().unwrap())
    };
    let udp = UdpRepr {
        src_port: junk.local_addr().unwrap().port(),
        dst_port: port,
        checksum: 0,
    };
    let icrc = icrc_v2_ipv4(&ip, &udp, &ib);
    let mut good = ib.to_vec();
    good.extend_from_slice(&icrc.to_le_bytes());
    let mut bad = good.clone();
    bad[13] ^= 0x40;
    junk.send_to(&good, ("127.0.15.1", port)).unwrap();
    junk.send_to(&bad, ("127.0.15.1", port)).unwrap();
    let mut buf = [Completion::EMPTY; 4];
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.counters().rx_packets < 2 && Instant::now() < deadline {
        b.poll_cq(&mut buf).unwrap();
    }
    let d = b.counters().drops;
    assert_eq!((d.bad_icrc, d.unknown_qpn), (1, 1), "{d:?}");
}

/// Issue 33, defect 4: a thousand queue pairs, each with a window's worth of 64 KiB WRITEs posted,
/// once sent all of it at once into the peer's one socket buffer (8 MiB): most of it was dropped,
/// every queue pair went back N into the same overflow, and the run ended in "retry counter
/// exceeded" with resends several times the data. The endpoint now holds what all its queue pairs
/// have out together to `max_unacked_psns`, so the same posts finish with few resends.
#[test]
fn a_thousand_queue_pairs_share_the_peers_buffer_without_collapse() {
    const QPS: usize = 1024;
    let port = free_port("127.0.16.1");
    let cfg = |bind| SoftConfig {
        qps: QPS,
        buffer_len: 1 << 17,
        ..udp_cfg(bind, port)
    };
    let mut a = SoftEndpoint::open(cfg("127.0.16.1")).unwrap();
    let mut b = SoftEndpoint::open(cfg("127.0.16.2")).unwrap();
    // As the binaries do between two roceperf endpoints: go-back-N with the probe and loss window.
    a.agree_recovery(roceperf::params::Recovery::Gbn);
    b.agree_recovery(roceperf::params::Recovery::Gbn);
    connect(&mut a, &mut b);
    for qp in 0..QPS {
        for k in 0..2u64 {
            let to = remote(&b, qp, k << 16);
            a.post_send(qp, &wr(k, SendOp::Write, k << 16, 1 << 16, Some(to)))
                .unwrap();
        }
    }
    let (done, _) = soft_support::endpoints::drive(&mut a, &mut b, 2 * QPS, 0);
    let failed: Vec<_> = done
        .iter()
        .filter(|c| c.status != CompletionStatus::Success)
        .take(3)
        .collect();
    assert!(failed.is_empty(), "{failed:?}; {:?}", a.counters());
    let c = a.counters();
    // 2048 WRITEs of 16 packets: 32768 packets; a few resends are the loopback's business.
    assert!(
        c.retransmitted_packets * 10 < c.tx_packets,
        "resends {} of {} packets: {c:?}",
        c.retransmitted_packets,
        c.tx_packets
    );
}
