use std::net::{Ipv4Addr, SocketAddr};

use crate::transport::soft::counters::DropSummary;
use crate::transport::soft::ingress::check_udp;
use crate::transport::soft::io::Nic;
use crate::transport::soft::io::batch::RxDatagram;
use crate::transport::soft::io::device::{Backend, Device, RxMeta};
use crate::transport::soft::io::fault::Impaired;
use crate::transport::soft::io::impair::ImpairConfig;
use crate::transport::soft::io::udp::{UdpConfig, UdpDevice, UdpPlan, UdpSocket};
use crate::transport::soft::path::ipv4_repr;
use crate::transport::soft::rc::Instant;
use crate::wire::{BthRepr, IbRepr, Ipv4IdCache, NetRepr, Opcode, UdpRepr};

/// The datagram a receive handed on as `meta` and `data`: one whole packet (the device splits what
/// GRO merged), never cut.
fn whole_datagram<'a>(meta: RxMeta, data: &'a [u8]) -> RxDatagram<'a> {
    let RxMeta::Datagram {
        src,
        dst,
        truncated: false,
        ..
    } = meta
    else {
        panic!("{meta:?}")
    };
    RxDatagram {
        data,
        src,
        dst,
        truncated: false,
        gro_segment: None,
        tclass: 0,
    }
}

/// A UDP port free at `ip` now.
fn free_port(ip: Ipv4Addr) -> u16 {
    std::net::UdpSocket::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The network headers of RoCE v2 over IPv4 from `a` to `b`, both on `port`.
fn v2v4(a: Ipv4Addr, b: Ipv4Addr, port: u16) -> NetRepr {
    let udp = UdpRepr {
        src_port: port,
        dst_port: port,
        checksum: 0,
    };
    NetRepr::V2v4(ipv4_repr(a, b), udp)
}

fn nic(ip: Ipv4Addr, port: u16, gso: bool) -> Nic {
    let plan = UdpPlan {
        cfg: UdpConfig {
            port,
            gro: gso,
            zero_checksum: !gso,
            slot_len: if gso { 65_536 } else { 2048 },
            ..UdpConfig::default()
        },
        ip: ip.into(),
        may_move: false,
        tx_slot: 2048,
        gso,
    };
    let sock = UdpSocket::bind_scoped(plan.ip, 0, &plan.cfg).unwrap();
    Nic::Udp(UdpDevice::new(sock, &plan))
}

/// RoCE packets (SEND MIDDLE of 1000 bytes, PSN k) sent through an impaired GSO device arrive one
/// by one, each with an ICRC valid for the IP ID its segment got, minus the losses plus the copies.
#[test]
fn impairment_works_per_packet_inside_gso_super_datagrams() {
    let (a, b) = (Ipv4Addr::new(127, 0, 0, 21), Ipv4Addr::new(127, 0, 0, 22));
    let port = free_port(a);
    let cfg = ImpairConfig::parse("loss=10%,dup=5%,seed=3").unwrap();
    let mut tx = Impaired::new(nic(a, port, true), Some(&cfg));
    let mut rx = nic(b, port, true);
    let dst = SocketAddr::new(b.into(), port);
    let net = v2v4(a, b, port);
    let now = Instant::ZERO;
    let sent = 300u32;
    for k in 0..sent {
        if tx.tx_full() {
            tx.flush(now).unwrap();
        }
        assert!(tx.tx_push(now, Some(dst), |buf| {
            let ib = IbRepr::new(BthRepr::new(Opcode::RC_SEND_MIDDLE, 0x12, k));
            Some(net.emit_transport(&ib, &[k as u8; 1000], buf))
        }));
    }
    tx.flush(now).unwrap();
    assert!(
        tx.inner().tx_batches() < u64::from(sent) / 8,
        "GSO stayed on: {} sends for {sent} packets",
        tx.inner().tx_batches()
    );
    let (stats, _) = tx.stats();
    let expect = u64::from(sent) - stats.dropped + stats.duplicated;
    assert!(stats.dropped > 10 && stats.duplicated > 3, "{stats:?}");
    let mut ids = Ipv4IdCache::new();
    let mut drops = DropSummary::default();
    let mut psns = Vec::new();
    for _ in 0..2000 {
        rx.receive(now, |meta, data| {
            // One whole packet a call: the device splits what GRO merged.
            let d = whole_datagram(meta, data);
            let (ib, _src) = check_udp(
                &d,
                SocketAddr::new(b.into(), port),
                &mut ids,
                &mut crate::transport::soft::ingress::RxIcrcs::new(),
                &mut drops,
            )
            .expect("a valid RoCE packet");
            let (r, payload) = IbRepr::parse(ib).unwrap();
            assert_eq!(payload, [r.bth.psn as u8; 1000]);
            psns.push(r.bth.psn);
        })
        .unwrap();
        if psns.len() as u64 >= expect {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(drops, DropSummary::default());
    assert_eq!(psns.len() as u64, expect, "{stats:?}");
    psns.dedup();
    assert_eq!(psns.len() as u64, u64::from(sent) - stats.dropped);
}

/// A packet and a shorter one behind it, sent as one GSO super-datagram, come out of one receive as
/// the two packets (the lone merged datagram's split without the walk), each whole and valid.
#[test]
fn a_merged_packet_and_the_short_one_behind_it_come_apart() {
    let (a, b) = (Ipv4Addr::new(127, 0, 0, 23), Ipv4Addr::new(127, 0, 0, 24));
    let port = free_port(a);
    let (mut tx, mut rx) = (nic(a, port, true), nic(b, port, true));
    let dst = SocketAddr::new(b.into(), port);
    let net = v2v4(a, b, port);
    let now = Instant::ZERO;
    for (k, len) in [(0u32, 100usize), (1, 2)] {
        assert!(tx.tx_push(now, Some(dst), |buf| {
            let ib = IbRepr::new(BthRepr::new(Opcode::RC_SEND_MIDDLE, 0x12, k));
            Some(net.emit_transport(&ib, &vec![k as u8; len], buf))
        }));
    }
    tx.flush(now).unwrap();
    assert_eq!(tx.tx_batches(), 1, "one GSO send");
    let (mut ids, mut icrcs) = (
        Ipv4IdCache::new(),
        crate::transport::soft::ingress::RxIcrcs::new(),
    );
    let mut drops = DropSummary::default();
    let mut got = Vec::new();
    for _ in 0..200 {
        let n = rx
            .receive(now, |meta, data| {
                let d = whole_datagram(meta, data);
                let (ib, _) = check_udp(
                    &d,
                    d.dst.map_or(SocketAddr::new(b.into(), port), |ip| {
                        SocketAddr::new(ip, port)
                    }),
                    &mut ids,
                    &mut icrcs,
                    &mut drops,
                )
                .expect("a valid RoCE packet");
                let (r, payload) = IbRepr::parse(ib).unwrap();
                got.push((r.bth.psn, payload.len()));
            })
            .unwrap();
        if n > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(drops, DropSummary::default());
    assert_eq!(got, [(0, 100), (1, 2)]);
}
