//! AF_PACKET backend and the UDP backend's headers, checked in the kernel: the RoCE filter, the
//! IPv4 ID/DF and zero UDP checksums a UDP socket really puts on the wire, and the CAP_NET_RAW error.
//! Runs across a veth pair between two network namespaces (scripts/netns.sh) and on lo; needs root.

use crate::soft_support;

use std::net::{IpAddr, SocketAddr};

use roceperf::transport::soft::io::IoError;
use roceperf::transport::soft::io::batch::{RxBatch, TxBatch};
use roceperf::transport::soft::io::packet::{PacketConfig, PacketSocket};
use roceperf::transport::soft::io::udp::{UdpConfig, UdpSocket};
use roceperf::transport::soft::netdev::NetDev;
use roceperf::wire::MacAddr;
use soft_support::{NetnsPair, is_root, wait_until};

fn frame(dst: MacAddr, src: MacAddr, ethertype: u16, body: &[u8]) -> Vec<u8> {
    let mut f = dst.octets().to_vec();
    f.extend_from_slice(src.as_bytes());
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// An IPv4/UDP packet (checksums left 0: nobody but our filter looks at them), with `marker` as payload.
fn ipv4_udp(dport: u16, proto: u8, marker: u8) -> Vec<u8> {
    let mut p = vec![
        0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, proto, 0, 0, 10, 77, 0, 2, 10, 77, 0, 1,
    ];
    p.extend_from_slice(&[0xc0, 0x01]);
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0, 28, 0, 0]);
    p.extend_from_slice(&[marker; 20]);
    p
}

fn ipv6_udp(dport: u16, marker: u8) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0, 0, 28, 17, 64];
    p.extend_from_slice(&"fd77::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p.extend_from_slice(&"fd77::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p.extend_from_slice(&[0xc0, 0x01]);
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0, 28, 0, 0]);
    p.extend_from_slice(&[marker; 20]);
    p
}

/// Collects every frame `sock` receives within the wait, as (ethertype, last byte).
fn collect(sock: &PacketSocket, rx: &mut RxBatch, want: usize) -> Vec<(u16, u8, Vec<u8>)> {
    let mut got = Vec::new();
    wait_until(|| {
        sock.recv_batch(rx).unwrap();
        for i in 0..rx.len() {
            let f = rx.frame(i);
            assert!(!f.truncated);
            got.push((
                u16::from_be_bytes([f.data[12], f.data[13]]),
                *f.data.last().unwrap(),
                f.data.to_vec(),
            ));
        }
        got.len() >= want
    });
    got
}

/// A packet socket with `cfg` on veth0 of `pair`'s side `side`, and that veth's MAC.
fn packet_socket(pair: &NetnsPair, side: char, cfg: PacketConfig) -> (PacketSocket, MacAddr) {
    pair.in_ns(side, move || {
        let dev = NetDev::by_name("veth0").unwrap();
        (PacketSocket::open(&dev, &cfg).unwrap(), dev.mac.unwrap())
    })
}

#[test]
fn filter_in_the_kernel_passes_only_roce_frames() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let (rx_sock, a_mac) = packet_socket(&pair, 'a', PacketConfig::default());
    let (tx_sock, b_mac) = packet_socket(&pair, 'b', PacketConfig::default());
    let frames = [
        frame(a_mac, b_mac, 0x8915, &[0x61; 60]), // RoCE v1: pass
        frame(a_mac, b_mac, 0x0800, &ipv4_udp(4791, 17, 0x62)), // RoCE v2/IPv4: pass
        frame(a_mac, b_mac, 0x86dd, &ipv6_udp(4791, 0x63)), // RoCE v2/IPv6: pass
        frame(a_mac, b_mac, 0x0800, &ipv4_udp(4792, 17, 0x71)), // other port: drop
        frame(a_mac, b_mac, 0x0800, &ipv4_udp(4791, 6, 0x72)), // TCP: drop
        frame(a_mac, b_mac, 0x86dd, &ipv6_udp(53, 0x73)), // IPv6 DNS: drop
        frame(a_mac, b_mac, 0x88b5, &[0x74; 60]), // local experimental Ethertype: drop
    ];
    let mut tx = TxBatch::new(8, 2048);
    for f in &frames {
        assert!(tx.push_frame(|buf| {
            buf[..f.len()].copy_from_slice(f);
            f.len()
        }));
    }
    assert_eq!(tx_sock.send_batch(&mut tx).unwrap(), frames.len());
    let mut rx = RxBatch::new(16, 2048);
    let got = collect(&rx_sock, &mut rx, 3);
    // Let stragglers (the dropped ones, if the filter were wrong) arrive before judging.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut all = got;
    all.extend(collect(&rx_sock, &mut rx, 0));
    let markers: Vec<(u16, u8)> = all.iter().map(|(t, m, _)| (*t, *m)).collect();
    assert_eq!(
        markers,
        vec![(0x8915, 0x61), (0x0800, 0x62), (0x86dd, 0x63)]
    );
    // Frames arrive byte for byte as sent.
    assert_eq!(all[0].2, frames[0]);
    // Nothing of our own comes back to the sender (PACKET_IGNORE_OUTGOING), and the receiver sent
    // nothing, so the sender's queue is empty.
    let mut rx2 = RxBatch::new(4, 2048);
    assert_eq!(tx_sock.recv_batch(&mut rx2).unwrap(), 0);
}

/// Captures what a UdpSocket puts on the wire: IPv4 ID 0 with DF, UDP checksum 0 (roce-wire.md §9).
#[test]
fn udp_backend_sends_ip_id_zero_with_df_and_zero_checksums_across_veth() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let (cap, a_sock) = pair.in_ns('a', || {
        let dev = NetDev::by_name("veth0").unwrap();
        let cap = PacketSocket::open(&dev, &PacketConfig::default()).unwrap();
        let a4 =
            UdpSocket::bind(&dev, "10.77.0.1".parse().unwrap(), &UdpConfig::default()).unwrap();
        (cap, a4)
    });
    let (b4, b6) = pair.in_ns('b', || {
        let dev = NetDev::by_name("veth0").unwrap();
        let b4 =
            UdpSocket::bind(&dev, "10.77.0.2".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b6 = UdpSocket::bind(&dev, "fd77::2".parse().unwrap(), &UdpConfig::default()).unwrap();
        (b4, b6)
    });
    let mut tx = TxBatch::new(4, 256);
    for k in 0..3u8 {
        tx.push("10.77.0.1:4791".parse().unwrap(), |b| {
            b[..4].fill(k);
            4
        });
    }
    assert_eq!(b4.send_batch(&mut tx).unwrap(), 3);
    tx.push("[fd77::1]:4791".parse().unwrap(), |b| {
        b[..4].fill(9);
        4
    });
    assert_eq!(b6.send_batch(&mut tx).unwrap(), 1);
    let mut rx = RxBatch::new(16, 2048);
    // ARP/ND are filtered out; only the four datagrams arrive.
    let got = collect(&cap, &mut rx, 4);
    assert_eq!(
        got.len(),
        4,
        "{:?}",
        got.iter().map(|g| g.0).collect::<Vec<_>>()
    );
    for (ethertype, _, f) in &got[..3] {
        assert_eq!(*ethertype, 0x0800);
        let ip = &f[14..];
        assert_eq!(
            &ip[4..6],
            &[0, 0],
            "IPv4 ID must be 0 from an unconnected DF socket"
        );
        assert_eq!(ip[6] & 0x40, 0x40, "DF set");
        assert_eq!(&ip[12..16], &[10, 77, 0, 2], "source is the bound address");
        assert_eq!(&ip[20 + 6..20 + 8], &[0, 0], "UDP checksum 0 (SO_NO_CHECK)");
        assert_eq!(u16::from_be_bytes([ip[22], ip[23]]), 4791);
    }
    let (ethertype, _, f) = &got[3];
    assert_eq!(*ethertype, 0x86dd);
    assert_eq!(
        &f[14 + 40 + 6..14 + 40 + 8],
        &[0, 0],
        "UDPv6 checksum 0 (UDP_NO_CHECK6_TX)"
    );
    // And the receiving UDP socket got the IPv4 ones.
    let mut urx = RxBatch::new(8, 256);
    let mut n = 0;
    wait_until(|| {
        n += a_sock.recv_batch(&mut urx).unwrap();
        n == 3
    });
    assert_eq!(n, 3);
}

#[test]
fn udp_backend_on_loopback_sends_ip_id_zero() {
    if crate::common::skip_unless(is_root(), "needs root for AF_PACKET") {
        return;
    }
    let lo = NetDev::by_name("lo").unwrap();
    let ip: IpAddr = "127.0.0.6".parse().unwrap();
    let port = soft_support::endpoints::free_port("127.0.0.6");
    let cap = PacketSocket::open(
        &lo,
        &PacketConfig {
            udp_port: port,
            ..PacketConfig::default()
        },
    )
    .unwrap();
    let cfg = UdpConfig {
        port,
        ..UdpConfig::default()
    };
    let b = UdpSocket::bind(&lo, ip, &cfg).unwrap();
    let a = UdpSocket::bind(&lo, "127.0.0.7".parse().unwrap(), &cfg).unwrap();
    let mut tx = TxBatch::new(2, 64);
    tx.push(SocketAddr::new(ip, port), |buf| {
        buf[..2].copy_from_slice(b"hi");
        2
    });
    a.send_batch(&mut tx).unwrap();
    let mut rx = RxBatch::new(8, 70_000);
    let got = collect(&cap, &mut rx, 1);
    // On lo every frame is seen once as incoming: the outgoing copy is ignored.
    assert_eq!(got.len(), 1);
    let ip_hdr = &got[0].2[14..];
    assert_eq!(
        &ip_hdr[4..8],
        &[0, 0, 0x40, 0],
        "ID 0, DF, no fragment offset"
    );
    let mut urx = RxBatch::new(2, 64);
    assert!(wait_until(|| b.recv_batch(&mut urx).unwrap() == 1));
    assert_eq!(urx.datagram(0).data, b"hi");
}

#[test]
fn missing_cap_net_raw_names_the_capability_and_the_alternatives() {
    let err = std::thread::spawn(|| {
        if is_root() {
            soft_support::drop_capabilities(&[soft_support::CAP_NET_RAW]);
        }
        let lo = NetDev::by_name("lo").unwrap();
        PacketSocket::open(&lo, &PacketConfig::default()).err()
    })
    .join()
    .unwrap()
    .expect("AF_PACKET must fail without CAP_NET_RAW");
    assert!(matches!(err, IoError::NeedCapNetRaw { .. }), "{err}");
    let msg = err.to_string();
    for needle in ["CAP_NET_RAW", "setcap cap_net_raw+ep", "--io udp", "'lo'"] {
        assert!(msg.contains(needle), "{needle} missing from: {msg}");
    }
}

#[test]
fn packet_mmap_ring_receives_filtered_frames_byte_for_byte() {
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    let pair = NetnsPair::up(&[]);
    let (mut rx_sock, a_mac) = packet_socket(
        &pair,
        'a',
        PacketConfig {
            rx_ring_frames: 32,
            ..PacketConfig::default()
        },
    );
    let (tx_sock, b_mac) = packet_socket(&pair, 'b', PacketConfig::default());
    // More frames than ring slots, sent in rounds, so the ring wraps and slots are reused.
    let mut expected = Vec::new();
    let mut got = Vec::new();
    let mut tx = TxBatch::new(16, 2048);
    for round in 0..6u8 {
        for k in 0..10u8 {
            let body = if k % 3 == 0 {
                ipv4_udp(4792, 17, k)
            } else {
                ipv4_udp(4791, 17, round * 10 + k)
            };
            let f = frame(a_mac, b_mac, 0x0800, &body);
            if k % 3 != 0 {
                expected.push(f.clone());
            }
            tx.push_frame(|buf| {
                buf[..f.len()].copy_from_slice(&f);
                f.len()
            });
        }
        tx_sock.send_batch(&mut tx).unwrap();
        let ring = rx_sock.rx_ring().expect("opened with a ring");
        wait_until(|| {
            while let Some(f) = ring.peek() {
                assert!(!f.truncated);
                got.push(f.data.to_vec());
                ring.release();
            }
            got.len() == expected.len()
        });
    }
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "ring frames differ from the sent ones");
    let mut rx = RxBatch::new(4, 2048);
    assert_eq!(
        rx_sock.recv_batch(&mut rx).unwrap(),
        0,
        "with a ring, nothing goes to the socket queue"
    );
}

/// RoCE v2 super-frames (PACKET_VNET_HDR, GSO UDP_L4) from one namespace to the other: across a
/// plain veth pair they arrive whole and split into valid frames; with `--wire-segments` the kernel
/// cuts them on the way out, and each packet arrives on its own with the IP ID its ICRC was
/// computed for.
#[test]
fn virtio_net_hdr_super_frames_arrive_whole_or_cut_and_split_into_valid_frames() {
    use roceperf::transport::soft::io::packet_gso::{PacketGsoTx, VNET_HDR_LEN, split_frames};
    use roceperf::wire::{
        BthRepr, EthernetRepr, IbRepr, Ipv4Repr, NetRepr, Opcode, RoceFrame, RoceFrameRepr,
        UdpRepr, pad_len,
    };
    if crate::common::skip_unless(is_root(), "needs root for network namespaces and AF_PACKET") {
        return;
    }
    const MAX: usize = 14 + 48 + 4096 + 64;
    let vnet = || PacketConfig {
        vnet_hdr: true,
        slot_len: MAX,
        ..PacketConfig::default()
    };
    // MTU 9000: the frames carry 4096-byte payloads, as at RoCE MTU 4096 (a super-frame crosses a
    // smaller MTU whole, its packets would not).
    for args in [
        &["--mtu", "9000"][..],
        &["--mtu", "9000", "--wire-segments"][..],
    ] {
        let pair = NetnsPair::up(args);
        let (rx_sock, a_mac) = packet_socket(&pair, 'a', vnet());
        let (tx_sock, b_mac) = packet_socket(&pair, 'b', vnet());
        assert!(
            tx_sock.vnet_hdr() && rx_sock.vnet_hdr(),
            "Linux 6.2 or later"
        );
        // Frame k carries IP ID k in the header its ICRC covers: where the kernel cuts the
        // super-frame, segment k gets ID k; only frame 0's headers travel in the super-frame.
        let frame = |k: u16, len: usize| {
            let repr = RoceFrameRepr {
                eth: EthernetRepr {
                    dst: a_mac,
                    src: b_mac,
                    vlan: None,
                    ethertype: 0,
                },
                net: NetRepr::V2v4(
                    Ipv4Repr {
                        src: "10.77.0.2".parse().unwrap(),
                        dst: "10.77.0.1".parse().unwrap(),
                        tos: 0,
                        ident: k,
                        dont_frag: true,
                        ttl: 64,
                    },
                    UdpRepr::roce(0xc123),
                ),
                ib: IbRepr::new(BthRepr {
                    pad_count: pad_len(len) as u8,
                    ..BthRepr::new(Opcode::RC_RDMA_WRITE_MIDDLE, 0x11, u32::from(k))
                }),
            };
            let mut buf = vec![0u8; MAX];
            let n = repr.emit(&mut buf, &vec![k as u8; len]);
            buf.truncate(n);
            buf
        };
        let mut tx = PacketGsoTx::new(4, MAX);
        for k in 0..5u16 {
            let f = frame(k, if k == 4 { 1000 } else { 4096 });
            let seg = tx.try_push(|b| {
                b[..f.len()].copy_from_slice(&f);
                Some(f.len())
            });
            assert_eq!(seg, Some(k), "{args:?}");
        }
        assert_eq!(tx.pending(), 1, "one super-frame");
        assert_eq!(tx_sock.send_gso_batch(&mut tx).unwrap(), 1);
        let mut rx = RxBatch::new(8, VNET_HDR_LEN + 18 + 65_535);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut arrivals = 0;
        wait_until(|| {
            let n = rx_sock.recv_batch(&mut rx).unwrap();
            for i in 0..n {
                let f = rx.frame(i);
                assert!(!f.truncated);
                let mut copy = f.data.to_vec();
                split_frames(&mut copy, |one| got.push(one.to_vec()));
            }
            arrivals += n;
            got.len() >= 5
        });
        let whole = args.len() == 2;
        assert_eq!(arrivals, if whole { 1 } else { 5 }, "{args:?}");
        assert_eq!(got.len(), 5, "{args:?}");
        for (k, f) in got.iter().enumerate() {
            let view = RoceFrame::new_checked(f).unwrap();
            assert!(view.verify_icrc().is_ok(), "{args:?}: frame {k}'s ICRC");
            assert_eq!(u16::from_be_bytes([f[18], f[19]]), k as u16, "IP ID");
            let len = if k == 4 { 1000 } else { 4096 };
            assert_eq!(view.ib().len(), 12 + len + pad_len(len));
            assert!(view.ib()[12..12 + len].iter().all(|&b| b == k as u8));
        }
    }
}
