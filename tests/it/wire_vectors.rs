//! The reference frames of `tests/data/vectors/*.hex`: every field the README lists, the ICRC, byte-exact
//! re-emission, and the ICRC coverage (every covered bit matters, every masked bit does not).

use crate::vectors;

use std::net::Ipv4Addr;

use roceperf::wire::{
    AethKind, BthRepr, CnpRepr, Encapsulation, Error, Gid, IbRepr, Ipv4Repr, NakCode, NetRepr,
    Opcode, RoceFrame, RoceFrameRepr, UdpRepr,
};

fn parse(name: &str) -> (Vec<u8>, RoceFrameRepr, Vec<u8>) {
    let frame = vectors::vector(name);
    let (repr, payload) = RoceFrameRepr::parse(&frame).unwrap_or_else(|e| panic!("{name}: {e}"));
    let payload = payload.to_vec();
    (frame, repr, payload)
}

fn v4(repr: &RoceFrameRepr) -> (Ipv4Repr, UdpRepr) {
    match repr.net {
        NetRepr::V2v4(ip, udp) => (ip, udp),
        other => panic!("expected RoCE v2/IPv4, got {other:?}"),
    }
}

fn grh(repr: &RoceFrameRepr) -> roceperf::wire::GrhRepr {
    match repr.net {
        NetRepr::V1(g) => g,
        other => panic!("expected RoCE v1, got {other:?}"),
    }
}

fn mapped(a: [u8; 4]) -> Gid {
    Gid::from(Ipv4Addr::from(a).to_ipv6_mapped())
}

fn wire_icrc(frame: &[u8]) -> [u8; 4] {
    frame[frame.len() - 4..].try_into().unwrap()
}

/// The BTH, once its opcode and PSN are asserted.
#[track_caller]
fn assert_bth(repr: &RoceFrameRepr, opcode: Opcode, psn: u32) -> BthRepr {
    let b = repr.ib.bth;
    assert_eq!((b.opcode, b.psn), (opcode, psn));
    b
}

/// The RETH's (virtual address, rkey, DMA length).
#[track_caller]
fn assert_reth(repr: &RoceFrameRepr, va: u64, rkey: u32, dma_len: u32) {
    let reth = repr.ib.reth.unwrap();
    assert_eq!((reth.va, reth.rkey, reth.dma_len), (va, rkey, dma_len));
}

/// The AETH's syndrome byte, what it decodes to, and its MSN.
#[track_caller]
fn assert_aeth(repr: &RoceFrameRepr, syndrome: u8, kind: AethKind, msn: u32) {
    let aeth = repr.ib.aeth.unwrap();
    assert_eq!(aeth.syndrome, syndrome);
    assert_eq!(aeth.kind(), kind);
    assert_eq!(aeth.msn, msn);
}

/// The IB part that `v1_send_only` and `v2_send_only` share: SEND_ONLY of "hello" to QP 0x11, PSN 0x100.
#[track_caller]
fn assert_hello_send_only(repr: &RoceFrameRepr, payload: &[u8]) {
    let b = assert_bth(repr, Opcode::RC_SEND_ONLY, 0x100);
    assert_eq!(b.pad_count, 3);
    assert_eq!(b.dest_qp, 0x11);
    assert!(b.ack_req);
    assert_eq!(payload, b"hello");
}

#[test]
fn v1_hw_write_only_fields() {
    let (frame, r, payload) = parse("v1_hw_write_only");
    let g = grh(&r);
    assert_eq!(r.eth.ethertype, 0x8915);
    assert_eq!(g.sgid, mapped([15, 0, 0, 2]));
    assert_eq!(g.dgid, mapped([15, 0, 0, 2]));
    assert_eq!(g.hop_limit, 0x40);
    let b = assert_bth(&r, Opcode::RC_RDMA_WRITE_ONLY, 0xa788bc);
    assert_eq!(b.opcode, Opcode(0x0a));
    assert!(b.migreq);
    assert_eq!(b.pad_count, 3);
    assert_eq!(b.dest_qp, 0x00010a);
    assert!(b.ack_req);
    assert_reth(&r, 0x0000_55d4_c072_6000, 0x47b3, 5);
    assert_eq!(payload, [0, 0, 0, 0, 1]);
    // The 3 pad bytes sit between the payload and the ICRC.
    assert_eq!(frame.len(), 14 + 40 + 28 + 5 + 3 + 4);
    assert_eq!(wire_icrc(&frame), [0xe3, 0xd8, 0x56, 0xbb]);
}

#[test]
fn v1_hw_ack_fields() {
    let (frame, r, payload) = parse("v1_hw_ack");
    let b = assert_bth(&r, Opcode::RC_ACKNOWLEDGE, 0xa788c0);
    assert!(b.migreq);
    assert_eq!(b.dest_qp, 0x000109);
    assert_aeth(&r, 0x00, AethKind::Ack { credits: 0 }, 5);
    assert!(payload.is_empty());
    assert_eq!(wire_icrc(&frame), [0x25, 0xf0, 0xc0, 0x38]);
}

#[test]
fn v1_send_only_fields() {
    let (_, r, payload) = parse("v1_send_only");
    let g = grh(&r);
    assert_eq!(g.sgid, mapped([10, 0, 0, 1]));
    assert_eq!(g.dgid, mapped([10, 0, 0, 2]));
    assert_eq!(g.hop_limit, 64);
    assert_hello_send_only(&r, &payload);
}

#[test]
fn v2_send_only_fields() {
    let (_, r, payload) = parse("v2_send_only");
    let (ip, udp) = v4(&r);
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    // ID 0x1234, DF, TTL 64; to port 4791 with no UDP checksum.
    assert_eq!(
        ip,
        Ipv4Repr {
            ident: 0x1234,
            ..Ipv4Repr::roce(a, b)
        }
    );
    assert_eq!(udp, UdpRepr::roce(0xc123));
    assert_hello_send_only(&r, &payload);
}

#[test]
fn v2_ack_fields() {
    let (_, r, payload) = parse("v2_ack");
    let (ip, udp) = v4(&r);
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!((ip.src, ip.dst), (a, b));
    assert_eq!(udp, UdpRepr::roce(0xc456));
    assert_eq!(assert_bth(&r, Opcode::RC_ACKNOWLEDGE, 0x100).dest_qp, 0x12);
    assert_aeth(&r, 0x1f, AethKind::Ack { credits: 0x1f }, 1);
    assert!(payload.is_empty());
}

#[test]
fn v2_write_only_fields() {
    let (_, r, payload) = parse("v2_write_only");
    let b = assert_bth(&r, Opcode::RC_RDMA_WRITE_ONLY, 0x101);
    assert_reth(&r, 0x7f00_0000_1000, 0x1234, 8);
    assert_eq!(payload, b"ABCDEFGH");
    assert_eq!(b.pad_count, 0);
}

#[test]
fn v2_read_req_fields() {
    let (_, r, payload) = parse("v2_read_req");
    assert_bth(&r, Opcode::RC_RDMA_READ_REQUEST, 0x102);
    assert_reth(&r, 0x7f00_0000_2000, 0x1234, 3000);
    assert!(payload.is_empty());
}

#[test]
fn v2_read_resp_first_fields() {
    let (_, r, payload) = parse("v2_read_resp_first");
    assert_bth(&r, Opcode::RC_RDMA_READ_RESPONSE_FIRST, 0x102);
    let aeth = r.ib.aeth.unwrap();
    assert_eq!((aeth.syndrome, aeth.msn), (0x1f, 3));
    assert_eq!(payload.len(), 1024);
    assert!(payload.iter().enumerate().all(|(i, &v)| v == i as u8));
}

#[test]
fn v2_nak_seq_fields() {
    let (_, r, _) = parse("v2_nak_seq");
    assert_bth(&r, Opcode::RC_ACKNOWLEDGE, 0x105);
    assert_aeth(&r, 0x60, AethKind::Nak(NakCode::PsnSequenceError), 3);
}

#[test]
fn v2_rnr_nak_fields() {
    let (_, r, _) = parse("v2_rnr_nak");
    assert_eq!(r.ib.bth.psn, 0x106);
    let aeth = r.ib.aeth.unwrap();
    assert_eq!(aeth.syndrome, 0x2e);
    assert_eq!(aeth.kind(), AethKind::RnrNak { timer: 14 });
}

#[test]
fn v2_send_imm_fields() {
    let (_, r, payload) = parse("v2_send_imm");
    assert_bth(&r, Opcode::RC_SEND_ONLY_WITH_IMMEDIATE, 0x107);
    assert_eq!(r.ib.imm, Some(0xdead_beef));
    assert_eq!(payload, b"abcd");
}

/// The ConnectX-4 Lx CNP (scapy's `roce.uts`): every field, the ICRC, and our CNP emitted from the
/// parsed form, byte for byte.
#[test]
fn v2_cnp_connectx4lx_fields_and_our_cnp_is_the_same_frame() {
    let (frame, r, payload) = parse("v2_cnp_connectx4lx");
    let (ip, udp) = v4(&r);
    assert_eq!(
        ip,
        Ipv4Repr {
            tos: 0xc2, // DSCP 48, ECT(0)
            ident: 0x718c,
            ..Ipv4Repr::roce(Ipv4Addr::new(10, 0, 17, 1), Ipv4Addr::new(10, 0, 18, 1))
        }
    );
    assert_eq!((udp.src_port, udp.dst_port, udp.checksum), (0, 4791, 0));
    let b = assert_bth(&r, Opcode::CNP, 0);
    assert!(b.becn && !b.fecn && !b.ack_req && !b.solicited && !b.migreq);
    assert_eq!(
        (b.pkey, b.dest_qp, b.pad_count, b.tver),
        (0xffff, 0x118, 0, 0)
    );
    assert!(
        payload.is_empty(),
        "the 16 reserved bytes are the CNP's header, not payload"
    );
    assert_eq!(wire_icrc(&frame), [0x82, 0xfd, 0x00, 0x2a]);
    // Our CNP for the same queue pair, framed with the capture's network header, is the capture.
    let view = RoceFrame::new_checked(&frame).unwrap();
    let cnp = CnpRepr::parse(view.ib()).unwrap();
    assert_eq!(cnp, CnpRepr { dest_qp: 0x118 });
    let ours = RoceFrameRepr { ib: cnp.ib(), ..r };
    let mut out = vec![0u8; frame.len()];
    assert_eq!(ours.emit(&mut out, &[]), frame.len());
    assert_eq!(out, frame);
    let mut ib = [0u8; CnpRepr::LEN];
    assert_eq!(cnp.emit(&mut ib), CnpRepr::LEN);
    assert_eq!(&ib[..], view.ib());
}

#[test]
fn every_vector_verifies_and_re_emits_byte_for_byte() {
    let names = vectors::vector_names();
    assert!(
        names.len() >= 11,
        "expected the 11 README vectors, found {names:?}"
    );
    for name in names {
        let frame = vectors::vector(&name);
        let view = RoceFrame::new_checked(&frame).unwrap();
        assert_eq!(view.verify_icrc(), Ok(()), "{name}");
        assert_eq!(
            view.as_bytes(),
            &frame[..],
            "{name}: length fields disagree with the file"
        );
        let (repr, payload) = RoceFrameRepr::parse(&frame).unwrap();
        assert_eq!(repr.frame_len(payload.len()), frame.len(), "{name}");
        let mut out = vec![0xa5u8; frame.len()];
        let n = repr.emit(&mut out, payload);
        assert_eq!(n, frame.len(), "{name}");
        assert_eq!(out, frame, "{name}: re-emitted bytes differ");
        // The IB layer alone round-trips too.
        let (ib, p) = IbRepr::parse(view.ib()).unwrap();
        assert_eq!((ib, p), (repr.ib, payload), "{name}");
    }
}

/// (offset from the network header, bits) that the ICRC masks, per encapsulation (roce-wire.md §5).
fn masked_bits(encap: Encapsulation) -> Vec<(usize, u8)> {
    // IPv6 and the GRH: the traffic class and flow label (byte 0's low nibble, bytes 1-3) and the hop
    // limit (7); IPv4: TOS (1), TTL (8) and the checksum (10-11); v2: the UDP checksum; always the
    // BTH's FECN/BECN/resv6a byte (BTH + 4).
    let (tclass, whole) = match encap {
        Encapsulation::V1 => (true, vec![1, 2, 3, 7, 40 + 4]),
        Encapsulation::V2v4 => (false, vec![1, 8, 10, 11, 26, 27, 32]),
        Encapsulation::V2v6 => (true, vec![1, 2, 3, 7, 46, 47, 48 + 4]),
    };
    let nibble = tclass.then_some((0, 0x0f));
    nibble
        .into_iter()
        .chain(whole.into_iter().map(|at| (at, 0xff)))
        .collect()
}

#[test]
fn every_covered_bit_matters_and_every_masked_bit_does_not() {
    for name in vectors::vector_names() {
        let frame = vectors::vector(&name);
        let view = RoceFrame::new_checked(&frame).unwrap();
        let net_at = view.ethernet().header_len();
        let masks = masked_bits(view.encapsulation());
        let (orig, orig_payload) = RoceFrameRepr::parse(&frame).unwrap();
        let (mut covered, mut masked) = (0u32, 0u32);
        for byte in net_at..frame.len() {
            for bit in 0..8 {
                let flip = 1u8 << bit;
                let is_masked = masks
                    .iter()
                    .any(|&(at, m)| net_at + at == byte && m & flip != 0);
                let mut f = frame.clone();
                f[byte] ^= flip;
                let parsed = RoceFrameRepr::parse(&f);
                if is_masked {
                    masked += 1;
                    let (r, p) = parsed.unwrap_or_else(|e| {
                        panic!("{name}: flipping masked byte {byte} bit {bit} broke the frame: {e}")
                    });
                    assert_eq!(p, orig_payload, "{name}");
                    assert_eq!(r.ib.bth.dest_qp, orig.ib.bth.dest_qp);
                } else {
                    covered += 1;
                    assert!(
                        parsed.is_err(),
                        "{name}: flipping covered byte {byte} bit {bit} still verifies"
                    );
                    // Where the headers still hold together, it is the ICRC that catches it.
                    if let Ok(v) = RoceFrame::new_checked(&f)
                        && v.as_bytes().len() == frame.len()
                    {
                        assert!(
                            matches!(v.verify_icrc(), Err(Error::BadIcrc { .. })),
                            "{name}: byte {byte} bit {bit}"
                        );
                    }
                }
            }
        }
        let mask_bits: u32 = masks.iter().map(|&(_, m)| m.count_ones()).sum();
        assert_eq!(masked, mask_bits, "{name}");
        assert_eq!(
            covered + masked,
            8 * (frame.len() - net_at) as u32,
            "{name}"
        );
    }
}

#[test]
fn masked_fields_change_the_repr_but_not_the_icrc() {
    // TTL, TOS, UDP checksum, FECN and BECN on an IPv4 frame; HopLmt and TClass on a v1 frame.
    let frame = vectors::vector("v2_write_only");
    let (mut r, payload) = RoceFrameRepr::parse(&frame).unwrap();
    let icrc = wire_icrc(&frame);
    if let NetRepr::V2v4(ip, udp) = &mut r.net {
        ip.ttl = 1;
        ip.tos = 0x03;
        udp.checksum = 0xbeef;
    }
    r.ib.bth.fecn = true;
    r.ib.bth.becn = true;
    let mut out = vec![0u8; frame.len()];
    r.emit(&mut out, payload);
    assert_ne!(out, frame);
    assert_eq!(wire_icrc(&out), icrc);
    let (back, _) = RoceFrameRepr::parse(&out).unwrap();
    assert_eq!(back, r);

    let frame = vectors::vector("v1_hw_write_only");
    let (mut r, payload) = RoceFrameRepr::parse(&frame).unwrap();
    if let NetRepr::V1(g) = &mut r.net {
        g.hop_limit = 1;
        g.tclass = 0xe0;
        g.flow_label = 0xabcde;
    }
    let mut out = vec![0u8; frame.len()];
    r.emit(&mut out, payload);
    assert_ne!(out, frame);
    assert_eq!(wire_icrc(&out), wire_icrc(&frame));
}

#[test]
fn truncations_are_errors_not_panics() {
    for name in vectors::vector_names() {
        let frame = vectors::vector(&name);
        for cut in 0..frame.len() {
            assert!(
                RoceFrameRepr::parse(&frame[..cut]).is_err(),
                "{name} cut at {cut}"
            );
        }
        // Ethernet padding after the ICRC is ignored: lengths come from the headers.
        let mut padded = frame.clone();
        padded.extend_from_slice(&[0u8; 6]);
        let (r, _) = RoceFrameRepr::parse(&padded).unwrap();
        assert_eq!(r, RoceFrameRepr::parse(&frame).unwrap().0);
    }
}
