//! Property tests: emit → parse is the identity over random headers, every known opcode, payloads of
//! 0…4096 bytes and every pad count; the repr-only ICRC functions agree with the emitted frames.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use roceperf::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Error, EthernetRepr, Gid,
    GrhRepr, ICRC_LEN, IbRepr, Ipv4Repr, Ipv6Repr, MacAddr, NetRepr, Opcode, RethRepr, RoceFrame,
    RoceFrameRepr, UdpRepr, icrc_v1, icrc_v2_ipv4, icrc_v2_ipv6, split_icrc,
};

fn known_opcodes() -> Vec<Opcode> {
    (0..=255u8).map(Opcode).filter(|o| o.is_known()).collect()
}

fn bth(op: Opcode) -> impl Strategy<Value = BthRepr> {
    (
        any::<(bool, bool, bool, bool, bool)>(),
        0..4u8,
        0..16u8,
        any::<u16>(),
        0..1u32 << 24,
        0..1u32 << 24,
    )
        .prop_map(
            move |(
                (solicited, migreq, fecn, becn, ack_req),
                pad_count,
                tver,
                pkey,
                dest_qp,
                psn,
            )| {
                BthRepr {
                    opcode: op,
                    solicited,
                    migreq,
                    pad_count,
                    tver,
                    pkey,
                    fecn,
                    becn,
                    dest_qp,
                    ack_req,
                    psn,
                }
            },
        )
}

/// A consistent header stack for a random known opcode.
fn ib_repr() -> impl Strategy<Value = IbRepr> {
    prop::sample::select(known_opcodes()).prop_flat_map(|op| {
        (
            bth(op),
            any::<(u64, u32, u32)>(),
            any::<(u64, u32, u64, u64)>(),
            (any::<u8>(), 0..1u32 << 24),
            any::<u64>(),
            any::<(u32, u32)>(),
            (any::<u32>(), 0..1u32 << 24),
        )
            .prop_map(
                move |(bth, reth, atomic, aeth, orig, (imm, ieth), deth)| IbRepr {
                    bth,
                    reth: op.has_reth().then_some(RethRepr {
                        va: reth.0,
                        rkey: reth.1,
                        dma_len: reth.2,
                    }),
                    atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
                        va: atomic.0,
                        rkey: atomic.1,
                        swap_add: atomic.2,
                        compare: atomic.3,
                    }),
                    aeth: op.has_aeth().then_some(AethRepr {
                        syndrome: aeth.0,
                        msn: aeth.1,
                    }),
                    atomic_ack_eth: op.has_atomic_ack_eth().then_some(AtomicAckEthRepr { orig }),
                    imm: op.has_immdt().then_some(imm),
                    ieth: op.has_ieth().then_some(ieth),
                    deth: op.has_deth().then_some(DethRepr {
                        qkey: deth.0,
                        src_qp: deth.1,
                    }),
                },
            )
    })
}

fn udp() -> impl Strategy<Value = UdpRepr> {
    (any::<u16>(), any::<u16>()).prop_map(|(src_port, checksum)| UdpRepr {
        src_port,
        dst_port: 4791,
        checksum,
    })
}

fn net_repr() -> impl Strategy<Value = NetRepr> {
    prop_oneof![
        (any::<(u8, u8, [u8; 16], [u8; 16])>(), 0..1u32 << 20).prop_map(
            |((tclass, hop_limit, sgid, dgid), flow_label)| NetRepr::V1(GrhRepr {
                tclass,
                flow_label,
                hop_limit,
                sgid: Gid(sgid),
                dgid: Gid(dgid),
            })
        ),
        (any::<([u8; 4], [u8; 4], u8, u16, bool, u8)>(), udp()).prop_map(
            |((src, dst, tos, ident, dont_frag, ttl), udp)| NetRepr::V2v4(
                Ipv4Repr {
                    src: Ipv4Addr::from(src),
                    dst: Ipv4Addr::from(dst),
                    tos,
                    ident,
                    dont_frag,
                    ttl,
                },
                udp
            )
        ),
        (any::<([u8; 16], [u8; 16], u8, u8)>(), 0..1u32 << 20, udp()).prop_map(
            |((src, dst, traffic_class, hop_limit), flow_label, udp)| NetRepr::V2v6(
                Ipv6Repr {
                    src: Ipv6Addr::from(src),
                    dst: Ipv6Addr::from(dst),
                    traffic_class,
                    flow_label,
                    hop_limit,
                },
                udp
            )
        ),
    ]
}

fn eth_repr() -> impl Strategy<Value = EthernetRepr> {
    (
        any::<([u8; 6], [u8; 6])>(),
        prop::option::of((0..8u8, any::<bool>(), 0..4096u16)),
    )
        .prop_map(|((dst, src), vlan)| EthernetRepr {
            dst: MacAddr(dst),
            src: MacAddr(src),
            vlan: vlan.map(|(pcp, dei, vid)| roceperf::wire::VlanTag { pcp, dei, vid }),
            ethertype: 0,
        })
}

fn frame_repr() -> impl Strategy<Value = RoceFrameRepr> {
    (eth_repr(), net_repr(), ib_repr()).prop_map(|(mut eth, net, ib)| {
        eth.ethertype = net.ethertype();
        RoceFrameRepr { eth, net, ib }
    })
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=4096)
}

proptest! {
    #[test]
    fn frame_emit_then_parse_is_identity(repr in frame_repr(), payload in payload()) {
        let len = repr.frame_len(payload.len());
        let mut buf = vec![0xa5u8; len + 16];
        let n = repr.emit(&mut buf, &payload);
        prop_assert_eq!(n, len);
        // Nothing written past the frame; the pad is zeros.
        prop_assert!(buf[len..].iter().all(|&b| b == 0xa5));
        let pad = usize::from(repr.ib.bth.pad_count);
        prop_assert!(buf[len - ICRC_LEN - pad..len - ICRC_LEN].iter().all(|&b| b == 0));
        let (back, back_payload) = RoceFrameRepr::parse(&buf[..len]).unwrap();
        prop_assert_eq!(back, repr);
        prop_assert_eq!(back_payload, &payload[..]);
        // Trailing bytes (Ethernet padding, FCS) do not change the result.
        let (again, _) = RoceFrameRepr::parse(&buf).unwrap();
        prop_assert_eq!(again, repr);
    }

    #[test]
    fn repr_only_icrc_matches_the_emitted_frame(repr in frame_repr(), payload in payload()) {
        let len = repr.frame_len(payload.len());
        let mut buf = vec![0xa5u8; len];
        repr.emit(&mut buf, &payload);
        let view = RoceFrame::new_checked(&buf).unwrap();
        let ib = view.ib();
        let icrc = match &repr.net {
            NetRepr::V1(grh) => icrc_v1(grh, ib),
            NetRepr::V2v4(ip, udp) => icrc_v2_ipv4(ip, udp, ib),
            NetRepr::V2v6(ip, udp) => icrc_v2_ipv6(ip, udp, ib),
        };
        prop_assert_eq!(icrc, view.icrc());
        prop_assert_eq!(repr.net.icrc(ib), icrc);
        // What a UDP socket would deliver: BTH through ICRC.
        let (split_ib, carried) = split_icrc(&buf[len - ib.len() - 4..]).unwrap();
        prop_assert_eq!((split_ib, carried), (ib, icrc));
        prop_assert_eq!(&buf[len - 4..], &icrc.to_le_bytes()[..]);
    }

    #[test]
    fn udp_socket_view_matches_the_frame(repr in frame_repr(), payload in payload()) {
        let len = repr.frame_len(payload.len());
        let mut frame = vec![0xa5u8; len];
        repr.emit(&mut frame, &payload);
        let tlen = NetRepr::transport_len(&repr.ib, payload.len());
        let mut t = vec![0x5au8; tlen + 3];
        prop_assert_eq!(repr.net.emit_transport(&repr.ib, &payload, &mut t), tlen);
        prop_assert_eq!(&t[..tlen], &frame[len - tlen..]);
        prop_assert_eq!(&t[tlen..], &[0x5a; 3]);
        let (ib, p) = repr.net.parse_transport(&t[..tlen]).unwrap();
        prop_assert_eq!(ib, repr.ib);
        prop_assert_eq!(p, &payload[..]);
        t[tlen / 2] ^= 0x10;
        let caught = matches!(repr.net.parse_transport(&t[..tlen]), Err(Error::BadIcrc { .. }));
        prop_assert!(caught);
    }

    #[test]
    fn oversized_transport_is_an_error_not_a_panic(net in net_repr()) {
        let max = net.max_transport_len();
        let big = vec![0u8; max + 1];
        let e = net.parse_transport(&big).unwrap_err();
        prop_assert!(matches!(e, Error::Malformed(_)));
        // The longest one that fits is checked (and here fails) on its ICRC.
        let e = net.parse_transport(&big[..max]).unwrap_err();
        let bad_icrc = matches!(e, Error::BadIcrc { .. });
        prop_assert!(bad_icrc, "{:?}", e);
    }

    #[test]
    fn emit_in_place_matches_emit(repr in frame_repr(), payload in payload()) {
        let len = repr.frame_len(payload.len());
        let mut a = vec![0xa5u8; len];
        repr.emit(&mut a, &payload);
        let mut b = vec![0x5au8; len];
        let at = repr.header_len();
        b[at..at + payload.len()].copy_from_slice(&payload);
        repr.emit_in_place(&mut b, payload.len());
        prop_assert_eq!(a, b);
    }

    #[test]
    fn ib_emit_then_parse_is_identity(ib in ib_repr(), payload in prop::collection::vec(any::<u8>(), 0..=4096)) {
        let hl = ib.header_len();
        let pad = usize::from(ib.bth.pad_count);
        let mut buf = vec![0xa5u8; hl + payload.len() + pad];
        ib.emit(&mut buf);
        buf[hl..hl + payload.len()].copy_from_slice(&payload);
        let (back, p) = IbRepr::parse(&buf).unwrap();
        prop_assert_eq!(back, ib);
        prop_assert_eq!(p, &payload[..]);
    }

    #[test]
    fn unknown_opcodes_keep_everything_after_the_bth(
        op in any::<u8>().prop_filter("unknown", |v| !Opcode(*v).is_known()),
        psn in 0..1u32 << 24,
        payload in prop::collection::vec(any::<u8>(), 0..=512),
    ) {
        let ib = IbRepr::new(BthRepr::new(Opcode(op), 0x11, psn));
        let mut buf = vec![0xa5u8; 12 + payload.len()];
        ib.emit(&mut buf);
        buf[12..].copy_from_slice(&payload);
        let (back, p) = IbRepr::parse(&buf).unwrap();
        prop_assert_eq!(back.bth.opcode, Opcode(op));
        prop_assert_eq!(back.bth.psn, psn);
        prop_assert_eq!(p, &payload[..]);
    }

    #[test]
    fn a_flipped_covered_bit_is_always_caught(
        repr in frame_repr(),
        payload in prop::collection::vec(any::<u8>(), 0..=256),
        pick in any::<prop::sample::Index>(),
        bit in 0..8u8,
    ) {
        let len = repr.frame_len(payload.len());
        let mut buf = vec![0u8; len];
        repr.emit(&mut buf, &payload);
        // Flip a bit after the BTH (never masked): extension headers, payload, pad or ICRC.
        let ib_at = repr.eth.header_len() + repr.net.header_len() + 12;
        let at = ib_at + pick.index(len - ib_at);
        buf[at] ^= 1 << bit;
        prop_assert!(RoceFrameRepr::parse(&buf).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = RoceFrameRepr::parse(&data);
        let _ = IbRepr::parse(&data);
        let _ = RoceFrame::new_checked(&data).map(|v| v.verify_icrc());
    }
}
