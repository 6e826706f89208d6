//! Real kernel Soft-RoCE traffic (`tests/data/vectors/rxe/*.pcap`, perftest 5 × 3000 B at MTU 1024):
//! every RoCE frame parses, its ICRC verifies and it re-emits byte for byte; the rest is rejected by
//! name.

use crate::vectors;

use std::collections::BTreeMap;

use roceperf::wire::{AethKind, Error, Opcode, RoceFrameRepr};

/// Parses every frame of one capture; returns the RoCE frames' (repr, payload length).
fn roce_frames(file: &str) -> Vec<(RoceFrameRepr, usize)> {
    let path = vectors::rxe_pcap(file);
    let mut out = Vec::new();
    for (i, frame) in vectors::read_pcap(&path).iter().enumerate() {
        match RoceFrameRepr::parse(frame) {
            Ok((repr, payload)) => {
                let mut emitted = vec![0xa5u8; repr.frame_len(payload.len())];
                repr.emit(&mut emitted, payload);
                assert_eq!(
                    &emitted[..],
                    &frame[..],
                    "{file} frame {i}: re-emitted bytes differ"
                );
                out.push((repr, payload.len()));
            }
            // perftest's out-of-band exchange runs over TCP.
            Err(e) => assert_eq!(e, Error::NotUdp(6), "{file} frame {i}"),
        }
    }
    out
}

fn opcode_counts(frames: &[(RoceFrameRepr, usize)]) -> BTreeMap<u8, usize> {
    let mut m = BTreeMap::new();
    for (r, _) in frames {
        *m.entry(r.ib.bth.opcode.0).or_default() += 1;
    }
    m
}

/// A message's FIRST, MIDDLE and LAST packets.
const WRITE: [Opcode; 3] = [
    Opcode::RC_RDMA_WRITE_FIRST,
    Opcode::RC_RDMA_WRITE_MIDDLE,
    Opcode::RC_RDMA_WRITE_LAST,
];
const SEND: [Opcode; 3] = [
    Opcode::RC_SEND_FIRST,
    Opcode::RC_SEND_MIDDLE,
    Opcode::RC_SEND_LAST,
];
const READ_RESPONSE: [Opcode; 3] = [
    Opcode::RC_RDMA_READ_RESPONSE_FIRST,
    Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
    Opcode::RC_RDMA_READ_RESPONSE_LAST,
];

/// The RoCE frames of `file`, once checked: 20 of them, five messages of three packets with the
/// `segments` opcodes (see [`check_segmentation`]) and five of `other`.
fn five_messages(file: &str, segments: [Opcode; 3], other: Opcode) -> Vec<(RoceFrameRepr, usize)> {
    let frames = roce_frames(file);
    assert_eq!(frames.len(), 20);
    let [first, middle, last] = segments;
    let counts = [first, middle, last, other].map(|op| (op.0, 5));
    assert_eq!(opcode_counts(&frames), BTreeMap::from(counts));
    check_segmentation(&frames, segments);
    frames
}

/// FIRST and MIDDLE carry exactly the PMTU, LAST the rest of 3000 bytes; PSNs are consecutive.
fn check_segmentation(frames: &[(RoceFrameRepr, usize)], [first, middle, last]: [Opcode; 3]) {
    let data: Vec<_> = frames
        .iter()
        .filter(|(r, _)| [first, middle, last].contains(&r.ib.bth.opcode))
        .collect();
    assert_eq!(data.len(), 15);
    for msg in data.chunks(3) {
        let ops: Vec<Opcode> = msg.iter().map(|(r, _)| r.ib.bth.opcode).collect();
        assert_eq!(ops, [first, middle, last]);
        let lens: Vec<usize> = msg.iter().map(|(_, n)| *n).collect();
        assert_eq!(lens, [1024, 1024, 3000 - 2048]);
        let psn0 = msg[0].0.ib.bth.psn;
        for (k, (r, _)) in msg.iter().enumerate() {
            assert_eq!(r.ib.bth.psn, (psn0 + k as u32) & 0xff_ffff);
            assert_eq!(r.ib.bth.pad_count, 0);
        }
        // FIRST and MIDDLE never ask for an ACK.
        assert!(!msg[0].0.ib.bth.ack_req && !msg[1].0.ib.bth.ack_req);
    }
}

fn check_acks(frames: &[(RoceFrameRepr, usize)]) {
    let mut msn = 0;
    for (r, len) in frames
        .iter()
        .filter(|(r, _)| r.ib.bth.opcode == Opcode::RC_ACKNOWLEDGE)
    {
        let aeth = r.ib.aeth.unwrap();
        assert_eq!(aeth.kind(), AethKind::Ack { credits: 0x1f });
        assert_eq!(aeth.msn, msn + 1);
        msn = aeth.msn;
        assert_eq!(*len, 0);
    }
    assert_eq!(msn, 5);
}

#[test]
fn rxe_write_bw() {
    let frames = five_messages("rc_write_bw_3000B_x5.pcap", WRITE, Opcode::RC_ACKNOWLEDGE);
    for (r, _) in &frames {
        assert_eq!(
            r.ib.reth.is_some(),
            r.ib.bth.opcode == Opcode::RC_RDMA_WRITE_FIRST
        );
        if let Some(reth) = r.ib.reth {
            assert_eq!(reth.dma_len, 3000);
        }
    }
    check_acks(&frames);
}

#[test]
fn rxe_send_bw() {
    let frames = five_messages("rc_send_bw_3000B_x5.pcap", SEND, Opcode::RC_ACKNOWLEDGE);
    check_acks(&frames);
}

#[test]
fn rxe_read_bw() {
    let frames = five_messages(
        "rc_read_bw_3000B_x5.pcap",
        READ_RESPONSE,
        Opcode::RC_RDMA_READ_REQUEST,
    );
    // Each READ request consumes 3 PSNs (3000 B at PMTU 1024); its responses use them.
    let reqs: Vec<u32> = frames
        .iter()
        .filter(|(r, _)| r.ib.bth.opcode == Opcode::RC_RDMA_READ_REQUEST)
        .map(|(r, _)| {
            assert_eq!(r.ib.reth.unwrap().dma_len, 3000);
            r.ib.bth.psn
        })
        .collect();
    for w in reqs.windows(2) {
        assert_eq!(w[1], (w[0] + 3) & 0xff_ffff);
    }
    let firsts: Vec<u32> = frames
        .iter()
        .filter(|(r, _)| r.ib.bth.opcode == Opcode::RC_RDMA_READ_RESPONSE_FIRST)
        .map(|(r, _)| r.ib.bth.psn)
        .collect();
    assert_eq!(firsts, reqs);
}

/// What a UDP socket receives of rxe's packets lacks the IPv4 ID that rxe hashes and the ICRC covers;
/// the ID-independent check still verifies every one of them, and finds the ID that was on the wire.
#[test]
fn rxe_icrcs_verify_without_seeing_the_ipv4_id() {
    use roceperf::wire::{Ipv4IdCache, NetRepr, RoceFrame, icrc_v2_ipv4};
    let mut cache = Ipv4IdCache::new();
    let mut checked = 0;
    let mut nonzero_ids = 0;
    for file in [
        "rc_write_bw_3000B_x5.pcap",
        "rc_send_bw_3000B_x5.pcap",
        "rc_read_bw_3000B_x5.pcap",
    ] {
        let path = vectors::rxe_pcap(file);
        for frame in vectors::read_pcap(&path) {
            let Ok((repr, _)) = RoceFrameRepr::parse(&frame) else {
                continue;
            };
            let NetRepr::V2v4(ip, udp) = repr.net else {
                panic!("rxe sends RoCE v2 over IPv4 here");
            };
            let view = RoceFrame::new_checked(&frame).unwrap();
            let ib = view.ib();
            let wire_id = u16::from_be_bytes([view.net_header()[4], view.net_header()[5]]);
            // The receiver knows everything but the ID: it computes the ICRC under ID 0.
            let blind = roceperf::wire::Ipv4Repr { ident: 0, ..ip };
            let computed = icrc_v2_ipv4(&blind, &udp, ib);
            assert_eq!(
                cache.get(ib.len()).solve(computed, view.icrc()),
                Some(wire_id),
                "{file}: ID {wire_id:#06x}"
            );
            // And one flipped payload bit is caught.
            let mut bad = ib.to_vec();
            let last = bad.len() - 1;
            bad[last] ^= 0x01;
            let computed = icrc_v2_ipv4(&blind, &udp, &bad);
            assert_eq!(cache.get(ib.len()).solve(computed, view.icrc()), None);
            checked += 1;
            nonzero_ids += usize::from(wire_id != 0);
        }
    }
    assert!(checked >= 60, "{checked} RoCE frames");
    assert!(
        nonzero_ids > checked / 2,
        "rxe hashes its IDs: {nonzero_ids}"
    );
}
