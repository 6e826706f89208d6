//! The byte-stream state machine driven by hand: bytes move between two queue pairs through plain
//! vectors, cut wherever a socket could cut them.

use super::*;
use crate::transport::{Completion, CompletionStatus, RemoteAddr};

/// The address the peer's buffer claims to live at (any value works: only offsets travel).
const PEER_VADDR: u64 = 0x7f00_0000_0000;

fn qp(buf_len: usize) -> QpState {
    let mut q = QpState::new(0, buf_len, 64, 64);
    q.set_peer(PEER_VADDR, buf_len as u64, 16);
    q
}

fn wr(wr_id: u64, op: SendOp, offset: u64, len: u32, remote: u64, signaled: bool) -> SendRequest {
    SendRequest {
        wr_id,
        op,
        offset,
        len,
        remote: Some(RemoteAddr {
            addr: PEER_VADDR + remote,
            rkey: 0,
        }),
        signaled,
        inline: false,
    }
}

fn recv(q: &mut QpState, wr_id: u64, offset: u64, len: u32) {
    q.post_recv(&RecvRequest { wr_id, offset, len }).unwrap();
}

/// One writev that the socket cut after `limit` bytes: the bytes it took, already reported as sent.
fn transmit(q: &mut QpState, limit: usize) -> Vec<u8> {
    transmit_from::<{ 2 * TX_BATCH }>(q, limit)
}

/// [`transmit`] with room for `SLICES / 2` frames.
fn transmit_from<const SLICES: usize>(q: &mut QpState, limit: usize) -> Vec<u8> {
    let mut iov = [IoSlice::new(&[]); SLICES];
    let n = q.tx_slices(&mut iov);
    let mut out = Vec::new();
    for s in &iov[..n] {
        let take = (limit - out.len()).min(s.len());
        out.extend_from_slice(&s[..take]);
    }
    q.sent(out.len());
    out
}

/// Everything `q` has queued, written `chunk` bytes at a time.
fn drain(q: &mut QpState, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while q.has_tx() {
        out.extend(transmit(q, chunk));
    }
    out
}

/// Feeds `bytes` to `q` as reads of at most `chunk` bytes, filling the slices `recv_into` offers the
/// way readv/recv would, and applies them. Returns the completions and the bytes not taken (a SEND
/// that waits for a receive stays in the "socket").
fn deliver<'a>(
    q: &mut QpState,
    mut bytes: &'a [u8],
    chunk: usize,
    cq: &mut VecDeque<Completion>,
) -> Result<&'a [u8]> {
    let mut progressed = false;
    loop {
        if q.process(cq, &mut progressed)? == Stop::Receive || bytes.is_empty() {
            return Ok(bytes);
        }
        let mut budget = chunk.min(bytes.len());
        let mut n = 0;
        let mut fill = |dst: &mut [u8]| {
            let take = budget.min(dst.len());
            dst[..take].copy_from_slice(&bytes[n..n + take]);
            budget -= take;
            n += take;
        };
        match q.recv_into() {
            RecvInto::Payload { rest, tail } => {
                fill(rest);
                fill(tail);
            }
            RecvInto::Stage(room) => fill(room),
        }
        bytes = &bytes[n..];
        q.received(n);
    }
}

/// Drains all `from` has to send and [`deliver`]s it to `to` in one read; returns its length.
fn carry(from: &mut QpState, to: &mut QpState, cq: &mut VecDeque<Completion>) -> usize {
    let stream = drain(from, usize::MAX);
    deliver(to, &stream, usize::MAX, cq).unwrap();
    stream.len()
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
}

fn done(wr_id: u64, op: CompletionOp, byte_len: u32, imm: Option<u32>) -> Completion {
    Completion {
        wr_id,
        qp: 0,
        status: CompletionStatus::Success,
        op,
        byte_len,
        imm,
    }
}

/// A sender with one of every frame queued: WRITE, SEND, SEND with immediate, WRITE with immediate
/// (unsignaled), READ. Its buffer holds a pattern.
fn mixed_sender() -> QpState {
    let mut a = qp(4096);
    let data = pattern(4096, 1);
    a.buf_mut().copy_from_slice(&data);
    a.post_send(&wr(1, SendOp::Write, 0, 100, 1000, true))
        .unwrap();
    a.post_send(&wr(2, SendOp::Send, 100, 10, 0, true)).unwrap();
    a.post_send(&wr(3, SendOp::SendWithImm(0xabc), 110, 5, 0, true))
        .unwrap();
    a.post_send(&wr(4, SendOp::WriteWithImm(77), 120, 3, 3000, false))
        .unwrap();
    a.post_send(&wr(5, SendOp::Read, 2000, 64, 512, true))
        .unwrap();
    a
}

/// The receiver of [`mixed_sender`]'s stream, with receives posted for its SENDs and WRITE_IMM.
fn mixed_receiver() -> QpState {
    let mut b = qp(4096);
    b.buf_mut().copy_from_slice(&pattern(4096, 9));
    recv(&mut b, 10, 200, 16);
    recv(&mut b, 11, 300, 16);
    recv(&mut b, 12, 0, 0);
    b
}

fn mixed_expected() -> Vec<Completion> {
    vec![
        done(10, CompletionOp::Recv, 10, None),
        done(11, CompletionOp::Recv, 5, Some(0xabc)),
        done(12, CompletionOp::RecvWithImm, 3, Some(77)),
    ]
}

/// Checks what the receiver of the mixed stream must hold: data placed, completions, owed replies.
fn check_mixed_receiver(b: &QpState, cq: &VecDeque<Completion>, what: &str) {
    let a = pattern(4096, 1);
    let buf = b.buf();
    assert_eq!(&buf[1000..1100], &a[..100], "{what}: WRITE placed");
    assert_eq!(&buf[200..210], &a[100..110], "{what}: SEND placed");
    assert_eq!(&buf[300..305], &a[110..115], "{what}: SEND_IMM placed");
    assert_eq!(&buf[3000..3003], &a[120..123], "{what}: WRITE_IMM placed");
    assert_eq!(
        cq.iter().copied().collect::<Vec<_>>(),
        mixed_expected(),
        "{what}"
    );
    assert_eq!(
        b.acks_owed, 3,
        "{what}: WRITE, SEND, SEND_IMM asked for acks"
    );
    assert_eq!(b.tx.len(), 1, "{what}: one READ response queued");
    assert_eq!(b.stage_start, b.stage_end, "{what}: nothing left staged");
    assert!(b.rx.is_none(), "{what}: no frame half received");
}

#[test]
fn a_mixed_stream_split_at_every_byte_gives_the_same_result() {
    let mut a = mixed_sender();
    let stream = drain(&mut a, usize::MAX);
    assert_eq!(stream.len(), 5 * HEADER_LEN + 100 + 10 + 5 + 3);
    for k in 0..=stream.len() {
        let mut b = mixed_receiver();
        let mut cq = VecDeque::new();
        let left = deliver(&mut b, &stream[..k], usize::MAX, &mut cq).unwrap();
        assert!(left.is_empty());
        let left = deliver(&mut b, &stream[k..], usize::MAX, &mut cq).unwrap();
        assert!(left.is_empty());
        check_mixed_receiver(&b, &cq, &format!("split at {k}"));
    }
}

#[test]
fn a_mixed_stream_read_in_small_pieces_gives_the_same_result() {
    let mut a = mixed_sender();
    let stream = drain(&mut a, usize::MAX);
    for chunk in 1..=HEADER_LEN + 3 {
        let mut b = mixed_receiver();
        let mut cq = VecDeque::new();
        assert!(deliver(&mut b, &stream, chunk, &mut cq).unwrap().is_empty());
        check_mixed_receiver(&b, &cq, &format!("reads of {chunk}"));
    }
}

#[test]
fn partial_writes_resume_where_the_socket_stopped() {
    let whole = drain(&mut mixed_sender(), usize::MAX);
    for chunk in [1, 2, 5, HEADER_LEN - 1, HEADER_LEN, HEADER_LEN + 1, 100] {
        let mut a = mixed_sender();
        assert_eq!(drain(&mut a, chunk), whole, "writes of {chunk}");
        // Signaled SEND/WRITEs wait for their ack, the unsignaled WRITE_IMM retired once written,
        // the READ waits for its response.
        assert_eq!(a.unacked.len(), 3);
        assert_eq!(a.outstanding, 4);
        assert_eq!(a.reads.len(), 1);
    }
}

#[test]
fn a_small_slice_array_writes_the_first_frames_and_the_rest_follows() {
    let whole = drain(&mut mixed_sender(), usize::MAX);
    let mut a = mixed_sender();
    let first = transmit_from::<4>(&mut a, usize::MAX);
    assert_eq!(
        first.len(),
        2 * HEADER_LEN + 100 + 10,
        "two frames: WRITE and SEND"
    );
    let mut out = first;
    while a.has_tx() {
        out.extend(transmit_from::<2>(&mut a, usize::MAX));
    }
    assert_eq!(out, whole);
}

#[test]
fn a_frame_is_retired_only_when_its_last_byte_is_written() {
    let mut a = qp(4096);
    a.post_send(&wr(1, SendOp::Write, 0, 8, 0, false)).unwrap();
    assert_eq!(transmit(&mut a, HEADER_LEN + 7).len(), HEADER_LEN + 7);
    assert_eq!(a.outstanding, 1, "one payload byte still queued");
    assert_eq!(transmit(&mut a, usize::MAX).len(), 1);
    assert_eq!(a.outstanding, 0, "an unsignaled WRITE retires when written");
    assert!(!a.has_tx());
}

#[test]
fn acknowledgements_complete_the_sender_at_every_split() {
    let mut a = mixed_sender();
    let stream = drain(&mut a, usize::MAX);
    let mut b = mixed_receiver();
    let mut cq = VecDeque::new();
    deliver(&mut b, &stream, usize::MAX, &mut cq).unwrap();
    b.queue_acks();
    assert_eq!(b.acks_owed, 0);
    let reply = drain(&mut b, usize::MAX);
    assert_eq!(
        reply.len(),
        HEADER_LEN + 64,
        "the READ response carries the three acks"
    );
    let answer = pattern(4096, 9);
    for k in 0..=reply.len() {
        let mut a2 = mixed_sender();
        drain(&mut a2, usize::MAX);
        let mut cq = VecDeque::new();
        deliver(&mut a2, &reply[..k], usize::MAX, &mut cq).unwrap();
        deliver(&mut a2, &reply[k..], usize::MAX, &mut cq).unwrap();
        // Posting order, as an RC send queue completes: the acks ride in the READ response's
        // header and complete their WRITE and SENDs before its payload completes the READ.
        let want = [
            done(1, CompletionOp::Write, 100, None),
            done(2, CompletionOp::Send, 10, None),
            done(3, CompletionOp::Send, 5, None),
            done(5, CompletionOp::Read, 64, None),
        ];
        assert_eq!(cq.iter().copied().collect::<Vec<_>>(), want, "split at {k}");
        assert_eq!(&a2.buf()[2000..2064], &answer[512..576], "READ placed");
        assert_eq!((a2.outstanding, a2.unacked.len()), (0, 0), "all retired");
    }
}

#[test]
fn acknowledgements_take_a_frame_of_their_own_only_when_nothing_waits_to_leave() {
    let (mut a, mut b) = (qp(4096), qp(4096));
    let mut cq = VecDeque::new();
    a.post_send(&wr(1, SendOp::Write, 0, 2, 0, true)).unwrap();
    a.post_send(&wr(2, SendOp::Write, 0, 2, 0, true)).unwrap();
    carry(&mut a, &mut b, &mut cq);
    // Nothing queued: one ACK frame for both.
    b.queue_acks();
    assert_eq!(carry(&mut b, &mut a, &mut cq), HEADER_LEN);
    assert_eq!(cq.len(), 2, "both WRITEs complete");
    // A reply queued and not started: the ack rides on its header, as one 26-byte message.
    a.post_send(&wr(3, SendOp::Write, 0, 2, 0, true)).unwrap();
    carry(&mut a, &mut b, &mut cq);
    b.post_send(&wr(9, SendOp::Write, 0, 2, 0, true)).unwrap();
    b.queue_acks();
    cq.clear();
    assert_eq!(carry(&mut b, &mut a, &mut cq), HEADER_LEN + 2);
    assert_eq!(
        cq.iter().copied().collect::<Vec<_>>(),
        [done(3, CompletionOp::Write, 2, None)]
    );
    // A frame that started to leave takes no more acks: they follow in a frame of their own.
    b.post_send(&wr(10, SendOp::Write, 0, 2, 0, true)).unwrap();
    transmit(&mut b, 5);
    a.post_send(&wr(4, SendOp::Write, 0, 2, 0, true)).unwrap();
    carry(&mut a, &mut b, &mut cq);
    b.queue_acks();
    assert_eq!(b.tx.len(), 2, "the half-sent WRITE, then an ACK");
}

#[test]
fn a_large_payload_goes_straight_into_the_buffer_and_the_next_header_into_the_stage() {
    let len = 100_000;
    let mut a = qp(1 << 18);
    a.buf_mut()[..len].copy_from_slice(&pattern(len, 3));
    a.post_send(&wr(1, SendOp::Write, 0, len as u32, 4096, true))
        .unwrap();
    a.post_send(&wr(2, SendOp::Write, 0, 2, 0, true)).unwrap();
    let stream = drain(&mut a, 65536);
    for chunk in [1000, 4096, 65536, usize::MAX] {
        let mut b = qp(1 << 18);
        let mut cq = VecDeque::new();
        assert!(deliver(&mut b, &stream, chunk, &mut cq).unwrap().is_empty());
        assert_eq!(
            &b.buf()[4096..4096 + len],
            &pattern(len, 3)[..],
            "reads of {chunk}"
        );
        assert_eq!(&b.buf()[..2], &pattern(2, 3)[..]);
        assert_eq!(b.acks_owed, 2);
        assert!(cq.is_empty(), "plain WRITEs complete nothing at the target");
    }
}

#[test]
fn a_send_waits_in_the_socket_until_a_receive_is_posted() {
    let mut a = qp(4096);
    a.post_send(&wr(1, SendOp::Send, 0, 64, 0, true)).unwrap();
    a.post_send(&wr(2, SendOp::Send, 0, 64, 0, true)).unwrap();
    let stream = drain(&mut a, usize::MAX);
    let mut b = qp(4096);
    let mut cq = VecDeque::new();
    // The reader stops at the first header it cannot place; what it already read stays staged.
    let left = deliver(&mut b, &stream, 10, &mut cq).unwrap();
    assert!(cq.is_empty());
    assert_eq!(
        left.len(),
        stream.len() - HEADER_LEN - 6,
        "read in 10-byte steps"
    );
    recv(&mut b, 7, 0, 64);
    let left = deliver(&mut b, left, 10, &mut cq).unwrap();
    assert_eq!(
        cq.iter().copied().collect::<Vec<_>>(),
        [done(7, CompletionOp::Recv, 64, None)]
    );
    assert!(
        !left.is_empty(),
        "the second SEND waits for its own receive"
    );
    recv(&mut b, 8, 64, 64);
    assert!(deliver(&mut b, left, 10, &mut cq).unwrap().is_empty());
    assert_eq!(cq.len(), 2);
}

fn expect_connection_error(r: Result<&[u8]>, needle: &str) {
    match r {
        Err(Error::Connection(m)) => assert!(m.contains(needle), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("no error, expected one containing {needle:?}"),
    }
}

#[test]
fn a_corrupt_or_impossible_stream_is_a_connection_error() {
    let mut cq = VecDeque::new();
    let garbage = [0xffu8; HEADER_LEN];
    expect_connection_error(
        deliver(&mut qp(4096), &garbage, 1, &mut cq),
        "not roceperf's",
    );
    let ack = Header::ack(1).emit();
    expect_connection_error(
        deliver(&mut qp(4096), &ack, 1, &mut cq),
        "acknowledged more than this side sent",
    );
    let resp = Header::bare(FrameOp::ReadResp, 8, 0).emit();
    expect_connection_error(
        deliver(&mut qp(4096), &resp, 1, &mut cq),
        "matches no outstanding READ",
    );
    let far = Header::bare(FrameOp::Write, 8, 4090).emit();
    expect_connection_error(
        deliver(&mut qp(4096), &far, 1, &mut cq),
        "WRITE of 8 bytes at offset 4090",
    );
    let mut small = qp(4096);
    recv(&mut small, 1, 0, 4);
    let send = Header::bare(FrameOp::Send, 8, 0).emit();
    expect_connection_error(
        deliver(&mut small, &send, 1, &mut cq),
        "larger than the posted receive",
    );
}

#[test]
fn a_closed_stream_is_an_error_only_while_work_waits() {
    let mut idle = qp(4096);
    idle.close_by_peer().unwrap();
    assert!(idle.peer_closed());
    let mut busy = qp(4096);
    busy.post_send(&wr(1, SendOp::Write, 0, 8, 0, true))
        .unwrap();
    drain(&mut busy, usize::MAX);
    assert!(matches!(busy.close_by_peer(), Err(Error::Connection(m)) if m.contains("closed")));
    let mut midframe = qp(4096);
    let mut cq = VecDeque::new();
    let head = Header::bare(FrameOp::Write, 8, 0).emit();
    deliver(&mut midframe, &head, usize::MAX, &mut cq).unwrap();
    assert!(midframe.close_by_peer().is_err(), "half a frame received");
}

#[test]
fn posting_checks_depths_and_ranges() {
    let mut a = QpState::new(3, 4096, 2, 1);
    a.set_peer(PEER_VADDR, 4096, 1);
    let too_far = wr(1, SendOp::Write, 0, 8, 4090, true);
    assert!(
        matches!(a.post_send(&too_far), Err(Error::InvalidRequest(m)) if m.contains("peer's 4096-byte"))
    );
    let local = wr(1, SendOp::Write, 4090, 8, 0, true);
    assert!(
        matches!(a.post_send(&local), Err(Error::InvalidRequest(m)) if m.contains("queue pair 3's"))
    );
    let unaligned = wr(1, SendOp::FetchAdd(1), 0, 8, 4, true);
    assert!(
        matches!(a.post_send(&unaligned), Err(Error::InvalidRequest(m)) if m.contains("8-byte aligned"))
    );
    let long = wr(
        1,
        SendOp::CompareSwap {
            compare: 1,
            swap: 2,
        },
        0,
        16,
        0,
        true,
    );
    assert!(
        matches!(a.post_send(&long), Err(Error::InvalidRequest(m)) if m.contains("exactly 8 bytes"))
    );
    a.post_send(&wr(1, SendOp::Read, 0, 8, 0, true)).unwrap();
    let second_read = wr(2, SendOp::Read, 0, 8, 0, true);
    assert!(
        matches!(a.post_send(&second_read), Err(Error::QueueFull)),
        "peer answers one READ"
    );
    a.post_send(&wr(2, SendOp::Write, 0, 8, 0, true)).unwrap();
    let third = wr(3, SendOp::Write, 0, 8, 0, true);
    assert!(
        matches!(a.post_send(&third), Err(Error::QueueFull)),
        "send queue of 2"
    );
    recv(&mut a, 1, 0, 8);
    let extra = RecvRequest {
        wr_id: 2,
        offset: 0,
        len: 8,
    };
    assert!(matches!(a.post_recv(&extra), Err(Error::QueueFull)));
}

#[test]
fn atomics_run_at_the_responder_in_order_however_the_stream_is_cut() {
    for chunk in [1, 7, HEADER_LEN, HEADER_LEN + 5, 41, 1000] {
        let mut a = qp(4096);
        let mut b = qp(4096);
        b.buf_mut()[64..72].copy_from_slice(&10u64.to_ne_bytes());
        b.buf_mut()[128..136].copy_from_slice(&5u64.to_ne_bytes());
        a.post_send(&wr(1, SendOp::FetchAdd(3), 0, 8, 64, false))
            .unwrap();
        a.post_send(&wr(2, SendOp::FetchAdd(3), 8, 8, 64, true))
            .unwrap();
        // Succeeds (5 → 9), then fails (9 is not 5) and leaves the word alone.
        let cas = SendOp::CompareSwap {
            compare: 5,
            swap: 9,
        };
        a.post_send(&wr(3, cas, 16, 8, 128, true)).unwrap();
        a.post_send(&wr(4, cas, 24, 8, 128, true)).unwrap();
        let stream = drain(&mut a, chunk);
        assert_eq!(
            stream.len(),
            4 * (HEADER_LEN + OPERANDS_LEN),
            "requests carry operands"
        );
        let mut cq = VecDeque::new();
        assert!(deliver(&mut b, &stream, chunk, &mut cq).unwrap().is_empty());
        assert!(cq.is_empty(), "the responder completes nothing");
        let word =
            |q: &QpState, at: usize| u64::from_ne_bytes(q.buf()[at..at + 8].try_into().unwrap());
        assert_eq!((word(&b, 64), word(&b, 128)), (16, 9), "chunk {chunk}");
        let answers = drain(&mut b, chunk);
        assert_eq!(answers.len(), 4 * HEADER_LEN, "answers are headers only");
        assert!(
            deliver(&mut a, &answers, chunk, &mut cq)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            cq.iter().copied().collect::<Vec<_>>(),
            [
                done(2, CompletionOp::FetchAdd, 8, None),
                done(3, CompletionOp::CompareSwap, 8, None),
                done(4, CompletionOp::CompareSwap, 8, None)
            ],
            "the unsignaled add retires silently"
        );
        assert_eq!(
            [word(&a, 0), word(&a, 8), word(&a, 16), word(&a, 24)],
            [10, 13, 5, 9],
            "each original in its slot"
        );
        assert!(a.close_by_peer().is_ok(), "nothing outstanding");
    }
}

#[test]
fn an_atomic_response_matches_no_read() {
    let mut a = qp(4096);
    a.post_send(&wr(1, SendOp::Read, 0, 8, 0, true)).unwrap();
    let mut cq = VecDeque::new();
    let resp = Header::bare(FrameOp::AtomicResp, 8, 7).emit();
    let e = deliver(&mut a, &resp, usize::MAX, &mut cq).unwrap_err();
    assert!(e.to_string().contains("no outstanding atomic"), "{e}");
    let mut b = qp(4096);
    b.post_send(&wr(1, SendOp::FetchAdd(1), 0, 8, 0, true))
        .unwrap();
    let resp = Header::bare(FrameOp::ReadResp, 8, 0).emit();
    let mut bytes = resp.to_vec();
    bytes.extend_from_slice(&[0; 8]);
    let e = deliver(&mut b, &bytes, usize::MAX, &mut cq).unwrap_err();
    assert!(e.to_string().contains("no outstanding READ"), "{e}");
}

#[test]
fn a_misaligned_or_outside_atomic_from_the_peer_ends_the_connection() {
    for (offset, what) in [(4u64, "aligned"), (4096, "outside")] {
        let mut b = qp(4096);
        let mut bytes = Header::bare(FrameOp::FetchAdd, 8, offset).emit().to_vec();
        bytes.extend_from_slice(&[0; OPERANDS_LEN]);
        let e = deliver(&mut b, &bytes, usize::MAX, &mut VecDeque::new()).unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }
}
