//! The frame header and greeting formats, byte by byte.

use super::*;

#[test]
fn header_round_trips_and_rejects_garbage() {
    let h = Header {
        op: FrameOp::WriteImm,
        flags: FLAG_ACK_REQ,
        len: 70000,
        offset: 0x1234_5678_9abc,
        imm: 0xdead_beef,
        acks: 7,
    };
    assert_eq!(Header::parse(&h.emit()), Some(h));
    let mut bad = h.emit();
    bad[0] = 11;
    assert_eq!(Header::parse(&bad), None);
    let mut bad = h.emit();
    bad[1] = 2;
    assert_eq!(Header::parse(&bad), None);
    let mut bad = h.emit();
    bad[2] = 1;
    assert_eq!(Header::parse(&bad), None);
}

#[test]
fn acknowledgements_ride_on_any_header_until_the_count_would_overflow() {
    let mut b = Header::bare(FrameOp::Write, 2, 64).emit();
    assert!(Header::add_acks(&mut b, 3));
    assert!(Header::add_acks(&mut b, 2));
    let h = Header::parse(&b).unwrap();
    assert_eq!((h.op, h.len, h.offset, h.acks), (FrameOp::Write, 2, 64, 5));
    assert!(
        !Header::add_acks(&mut b, u32::MAX),
        "5 + u32::MAX overflows"
    );
    assert_eq!(Header::parse(&b).unwrap().acks, 5, "left as it was");
    let ack = Header::parse(&Header::ack(9).emit()).unwrap();
    assert_eq!(
        (ack.op, ack.acks, ack.has_payload()),
        (FrameOp::Ack, 9, false)
    );
}

#[test]
fn only_data_frames_carry_a_payload() {
    for (op, payload) in [
        (FrameOp::Send, true),
        (FrameOp::SendImm, true),
        (FrameOp::Write, true),
        (FrameOp::WriteImm, true),
        (FrameOp::ReadResp, true),
        (FrameOp::ReadReq, false),
        (FrameOp::Ack, false),
        (FrameOp::FetchAdd, false),
        (FrameOp::CmpSwap, false),
        (FrameOp::AtomicResp, false),
    ] {
        assert_eq!(Header::bare(op, 8, 0).has_payload(), payload, "{op:?}");
    }
}

#[test]
fn only_atomic_requests_carry_operands() {
    for op in [FrameOp::FetchAdd, FrameOp::CmpSwap] {
        assert_eq!(Header::bare(op, 8, 0).operands_len(), OPERANDS_LEN);
        assert_eq!(
            Header::parse(&Header::bare(op, 8, 64).emit()),
            Some(Header::bare(op, 8, 64))
        );
    }
    for op in [FrameOp::ReadReq, FrameOp::AtomicResp, FrameOp::Write] {
        assert_eq!(Header::bare(op, 8, 0).operands_len(), 0);
    }
}

#[test]
fn greeting_round_trips_and_rejects_a_stranger() {
    let g = greeting(3, 0x00ab_cdef);
    assert_eq!(parse_greeting(&g), Some((3, 0x00ab_cdef)));
    let mut stranger = [0u8; GREETING_LEN];
    stranger.copy_from_slice(b"GET / HTTP/1.0\r\n");
    assert_eq!(parse_greeting(&stranger), None);
    assert!(!other_framing(&stranger));
    let mut older = g;
    older[..8].copy_from_slice(b"rpdata01");
    assert_eq!(parse_greeting(&older), None);
    assert!(
        other_framing(&older),
        "a roceperf of the previous framing is named as such"
    );
}
