//! Super-frames built from whole frames and split back, without a kernel in between (the kernel's
//! part is in tests/it/soft_packet.rs).

use std::net::Ipv4Addr;

use super::*;
use crate::transport::soft::egress::frame_around;
use crate::transport::soft::io::move_icrc_to_ipv4_id;
use crate::transport::soft::path::{ipv4_repr, ipv6_repr};
use crate::wire::{
    BthRepr, EthernetRepr, Gid, GrhRepr, ICRC_LEN, IbRepr, Ipv4IdCache, MacAddr, NetRepr, Opcode,
    RoceFrame, UdpRepr,
};

const MAX: usize = 14 + 48 + 4096 + 64;

/// The Ethernet header of a test frame from 02:..:01 to 02:..:02 (the ingress tests use it too).
pub(in crate::transport::soft) fn eth() -> EthernetRepr {
    EthernetRepr {
        dst: MacAddr([2, 0, 0, 0, 0, 2]),
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        vlan: None,
        ethertype: 0,
    }
}

fn v4(sport: u16) -> NetRepr {
    NetRepr::V2v4(
        ipv4_repr(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
        UdpRepr::roce(sport),
    )
}

fn v6() -> NetRepr {
    NetRepr::V2v6(
        ipv6_repr("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
        UdpRepr::roce(0xc000),
    )
}

/// A whole frame around a WRITE MIDDLE of `payload` bytes of `tag`, its ICRC for IPv4 ID 0.
fn frame_into(buf: &mut [u8], net: &NetRepr, psn: u32, payload: usize, tag: u8) -> usize {
    let e = eth();
    let at = e.header_len() + net.header_len();
    let n = net.emit_transport(
        &IbRepr::new(BthRepr::new(Opcode::RC_RDMA_WRITE_MIDDLE, 0x12, psn)),
        &vec![tag; payload],
        &mut buf[at..],
    );
    let ib_len = n - ICRC_LEN;
    frame_around(buf, &e, net, ib_len, net.icrc_start(ib_len))
}

fn frame(net: &NetRepr, psn: u32, payload: usize, tag: u8) -> Vec<u8> {
    let mut buf = vec![0u8; MAX];
    let n = frame_into(&mut buf, net, psn, payload, tag);
    buf.truncate(n);
    buf
}

/// Pushes a frame, finishing its ICRC for the IPv4 ID its segment will carry, as the NIC does.
fn push(tx: &mut PacketGsoTx, ids: &mut Ipv4IdCache, net: &NetRepr, psn: u32, len: usize) -> u16 {
    let k = tx
        .try_push(|b| Some(frame_into(b, net, psn, len, psn as u8)))
        .expect("room");
    let (pkt, is_v4) = tx.last_packet_mut();
    if k > 0 && is_v4 {
        move_icrc_to_ipv4_id(pkt, k, ids);
    }
    k
}

/// The bytes `send` would hand the kernel for each queued entry (vnet header first).
fn entries(tx: &mut PacketGsoTx) -> Vec<Vec<u8>> {
    (tx.sent..tx.queued)
        .map(|e| {
            tx.finish_entry(e);
            tx.mem.slot(e)[..tx.iovs[e].iov_len].to_vec()
        })
        .collect()
}

fn split(mut entry: Vec<u8>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let n = split_frames(&mut entry, |f| out.push(f.to_vec()));
    assert_eq!(n, out.len());
    out
}

#[test]
fn a_run_of_one_flow_becomes_one_super_frame_and_splits_back_into_valid_frames() {
    for net in [v4(0xc001), v6()] {
        let mut tx = PacketGsoTx::new(4, MAX);
        let mut ids = Ipv4IdCache::new();
        for psn in 0..5 {
            assert_eq!(push(&mut tx, &mut ids, &net, psn, 4096), psn as u16);
        }
        // A shorter last packet joins and closes the entry.
        assert_eq!(push(&mut tx, &mut ids, &net, 5, 1000), 5);
        assert_eq!(push(&mut tx, &mut ids, &net, 6, 4096), 0, "a new entry");
        let sent = entries(&mut tx);
        assert_eq!(sent.len(), 2);
        let vnet = &sent[0][..VNET_HDR_LEN];
        assert_eq!((vnet[0], vnet[1]), (F_NEEDS_CSUM, GSO_UDP_L4));
        let h = 14 + net.header_len();
        assert_eq!(usize::from(u16::from_ne_bytes([vnet[2], vnet[3]])), h);
        assert_eq!(
            usize::from(u16::from_ne_bytes([vnet[4], vnet[5]])),
            12 + 4096 + ICRC_LEN,
            "segment = BTH + payload + ICRC"
        );
        assert_eq!(sent[1][1], GSO_NONE, "a lone frame asks for nothing");
        let frames = split(sent[0].clone());
        assert_eq!(frames.len(), 6);
        for (k, f) in frames.iter().enumerate() {
            let view = RoceFrame::new_checked(f).expect("a well-formed frame");
            view.verify_icrc()
                .unwrap_or_else(|e| panic!("{net:?} segment {k}: {e:?}"));
            let len = if k == 5 { 1000 } else { 4096 };
            assert_eq!(view.ib().len(), 12 + len);
            assert!(view.ib()[12..].iter().all(|&b| b == k as u8), "payload {k}");
            if matches!(net, NetRepr::V2v4(..)) {
                assert_eq!(u16::from_be_bytes([f[18], f[19]]), k as u16, "IP ID {k}");
            }
        }
        let lone = split(sent[1].clone());
        assert_eq!(lone, [frame(&net, 6, 4096, 6)]);
    }
}

#[test]
fn another_flow_a_longer_frame_or_roce_v1_starts_a_new_entry() {
    let mut tx = PacketGsoTx::new(8, MAX);
    let mut ids = Ipv4IdCache::new();
    let a = v4(0xc001);
    assert_eq!(push(&mut tx, &mut ids, &a, 0, 1000), 0);
    assert_eq!(push(&mut tx, &mut ids, &a, 1, 1000), 1);
    assert_eq!(
        push(&mut tx, &mut ids, &v4(0xc002), 2, 1000),
        0,
        "other port"
    );
    assert_eq!(push(&mut tx, &mut ids, &v4(0xc002), 3, 2000), 0, "longer");
    let grh = NetRepr::V1(GrhRepr {
        tclass: 0,
        flow_label: 0,
        hop_limit: 64,
        sgid: Gid::from(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()),
        dgid: Gid::from(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped()),
    });
    assert_eq!(push(&mut tx, &mut ids, &grh, 4, 1000), 0);
    assert_eq!(
        push(&mut tx, &mut ids, &grh, 5, 1000),
        0,
        "RoCE v1 never joins"
    );
    assert_eq!(push(&mut tx, &mut ids, &a, 6, 200), 0);
    assert_eq!(
        push(&mut tx, &mut ids, &a, 7, 200),
        0,
        "tiny packets leave alone"
    );
    let sent = entries(&mut tx);
    assert_eq!(sent.len(), 7);
    let counts: Vec<usize> = sent.into_iter().map(|e| split(e).len()).collect();
    assert_eq!(counts, [2, 1, 1, 1, 1, 1, 1]);
    // The previous payload survives the headers of the frame that moved away.
    let mut tx = PacketGsoTx::new(2, MAX);
    push(&mut tx, &mut ids, &a, 0, 1000);
    push(&mut tx, &mut ids, &v4(9), 1, 1000);
    let sent = entries(&mut tx);
    assert_eq!(split(sent[0].clone()), [frame(&a, 0, 1000, 0)]);
    assert_eq!(split(sent[1].clone()), [frame(&v4(9), 1, 1000, 1)]);
}

#[test]
fn a_declined_fill_leaves_the_entry_as_it_was_and_singles_mode_joins_nothing() {
    let mut tx = PacketGsoTx::new(4, MAX);
    let mut ids = Ipv4IdCache::new();
    let a = v4(0xc001);
    push(&mut tx, &mut ids, &a, 0, 1000);
    assert_eq!(
        tx.try_push(|b| {
            b.fill(0xee);
            None
        }),
        None
    );
    push(&mut tx, &mut ids, &a, 1, 1000);
    let frames = split(entries(&mut tx).remove(0));
    assert_eq!(frames.len(), 2);
    assert!(
        RoceFrame::new_checked(&frames[0])
            .unwrap()
            .verify_icrc()
            .is_ok()
    );
    let mut tx = PacketGsoTx::new(4, MAX);
    assert!(tx.stop_segments());
    assert!(!tx.segmenting());
    push(&mut tx, &mut ids, &a, 0, 1000);
    assert_eq!(push(&mut tx, &mut ids, &a, 1, 1000), 0);
    assert_eq!(tx.pending(), 2);
}

#[test]
fn the_super_frame_carries_its_whole_length_and_the_pseudo_header_sum() {
    let mut tx = PacketGsoTx::new(2, MAX);
    let mut ids = Ipv4IdCache::new();
    let a = v4(0xc001);
    for psn in 0..3 {
        push(&mut tx, &mut ids, &a, psn, 1000);
    }
    let e = entries(&mut tx).remove(0);
    let f = &e[VNET_HDR_LEN..];
    let payload = 3 * (12 + 1000 + ICRC_LEN);
    assert_eq!(
        usize::from(get16(f, 14 + 2)),
        28 + payload,
        "IPv4 total length"
    );
    assert_eq!(fold(sum16(&f[14..34])), 0xffff, "IPv4 header checksum");
    assert_eq!(usize::from(get16(f, 34 + 4)), 8 + payload, "UDP length");
    let pseudo = fold(sum16(&f[26..34]) + 17 + (8 + payload) as u32);
    assert_eq!(get16(f, 34 + 6), pseudo);
}
