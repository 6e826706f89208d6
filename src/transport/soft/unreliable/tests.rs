//! The UC and UD engines at virtual time: what they put on the wire, what they deliver, and what
//! they count when packets go missing.

use super::*;
use crate::params::DEFAULT_QKEY;
use crate::transport::RemoteAddr;
use crate::transport::soft::rc::Instant;
use crate::wire::{DethRepr, RethRepr};

const A: u32 = 0x11;
const B: u32 = 0x12;
const ALL: Access = Access(1 | 2 | 4 | 8);

fn cfg(qpn: u32, peer: u32, psn: u32, peer_psn: u32, lkey: u32) -> QpConfig {
    let mut c = QpConfig::new(qpn, peer, psn, peer_psn, lkey);
    c.pmtu = 256;
    c.sq_depth = 16;
    c.rq_depth = 16;
    c
}

fn mem(salt: u32) -> (MemoryTable, u32, RemoteAddr) {
    let mut m = MemoryTable::new(salt);
    let k = m.add_registered(8192, ALL);
    (
        m,
        k.lkey,
        RemoteAddr {
            addr: k.va,
            rkey: k.rkey,
        },
    )
}

fn uc_pair() -> (UcQp, UcQp, RemoteAddr) {
    let (ma, la, _) = mem(1);
    let (mb, lb, rb) = mem(2);
    let a = UcQp::new(cfg(A, B, 100, 900, la), ma).unwrap();
    let b = UcQp::new(cfg(B, A, 900, 100, lb), mb).unwrap();
    (a, b, rb)
}

/// Every packet `q` has to send.
fn drain(mut next: impl FnMut(&mut [u8]) -> Option<usize>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(n) = next(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

fn fill(m: &mut MemoryTable, lkey: u32, from: u8) {
    for (i, b) in m.region_bytes_mut(lkey).unwrap().iter_mut().enumerate() {
        *b = from.wrapping_add(i as u8);
    }
}

#[test]
fn uc_segments_like_rc_without_ack_requests_and_completes_at_the_last_packet() {
    let (mut a, _, rb) = uc_pair();
    a.post_send(&SendRequest::new(7, SendOp::Send, 0, 600, None))
        .unwrap();
    a.post_send(&SendRequest::new(
        8,
        SendOp::WriteWithImm(0xfeed),
        0,
        10,
        Some(rb),
    ))
    .unwrap();
    let pkts = drain(|b| a.poll_transmit(Instant::ZERO, b));
    let reprs: Vec<IbRepr> = pkts.iter().map(|p| IbRepr::parse(p).unwrap().0).collect();
    let ops: Vec<Opcode> = reprs.iter().map(|r| r.bth.opcode).collect();
    assert_eq!(
        ops,
        [
            Opcode::UC_SEND_FIRST,
            Opcode::UC_SEND_MIDDLE,
            Opcode::UC_SEND_LAST,
            Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE
        ]
    );
    for (i, r) in reprs.iter().enumerate() {
        assert_eq!(
            (r.bth.psn, r.bth.dest_qp, r.bth.ack_req),
            (100 + i as u32, B, false)
        );
        assert_eq!(r.bth.pkey, 0xffff);
    }
    assert_eq!(
        reprs[3].reth,
        Some(RethRepr {
            va: rb.addr,
            rkey: rb.rkey,
            dma_len: 10
        })
    );
    assert_eq!(reprs[3].imm, Some(0xfeed));
    let c: Vec<(u64, CompletionOp)> = std::iter::from_fn(|| a.poll_completion())
        .map(|c| (c.wr_id, c.op))
        .collect();
    assert_eq!(c, [(7, CompletionOp::Send), (8, CompletionOp::Write)]);
    assert_eq!(a.counters().messages_sent, 2);
    // UC carries no READ.
    let read = SendRequest::new(9, SendOp::Read, 0, 8, Some(rb));
    assert!(
        a.post_send(&read)
            .unwrap_err()
            .to_string()
            .contains("-c RC")
    );
}

#[test]
fn uc_delivers_sends_and_writes_whole() {
    let (mut a, mut b, rb) = uc_pair();
    let (la, lb) = (a.config().local_lkey, b.config().local_lkey);
    fill(a.memory_mut(), la, 3);
    b.post_recv(&RecvRequest {
        wr_id: 1,
        offset: 4096,
        len: 4096,
    })
    .unwrap();
    a.post_send(&SendRequest::new(1, SendOp::Send, 0, 600, None))
        .unwrap();
    let mut target = rb;
    target.addr += 1000;
    a.post_send(&SendRequest::new(2, SendOp::Write, 0, 300, Some(target)))
        .unwrap();
    for p in drain(|buf| a.poll_transmit(Instant::ZERO, buf)) {
        b.handle_packet(&p);
    }
    let c = b.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.op, c.byte_len, c.status),
        (1, CompletionOp::Recv, 600, CompletionStatus::Success)
    );
    let src = a.memory().region_bytes(la).unwrap()[..600].to_vec();
    let dst = b.memory().region_bytes(lb).unwrap();
    assert_eq!(&dst[4096..4696], &src[..]);
    assert_eq!(&dst[1000..1300], &src[..300]);
    assert_eq!(
        b.poll_completion(),
        None,
        "a WRITE without immediate completes nowhere"
    );
    let k = b.counters();
    assert_eq!(
        (k.messages_received, k.messages_dropped, k.psn_gaps),
        (2, 0, 0)
    );
}

/// Posts `n` receives (4 KiB at offset 4096) on `b` and `n` 600-byte SENDs on `a`, wr_ids 0 up;
/// returns the packets `a` sends.
fn sends_of_600(a: &mut UcQp, b: &mut UcQp, n: u64) -> Vec<Vec<u8>> {
    for id in 0..n {
        b.post_recv(&RecvRequest {
            wr_id: id,
            offset: 4096,
            len: 4096,
        })
        .unwrap();
        a.post_send(&SendRequest::new(id, SendOp::Send, 0, 600, None))
            .unwrap();
    }
    drain(|buf| a.poll_transmit(Instant::ZERO, buf))
}

#[test]
fn a_uc_gap_drops_the_rest_of_its_message_and_the_next_first_resynchronises() {
    let (mut a, mut b, _) = uc_pair();
    // Three 600-byte SENDs: 3 packets each (PSN 100..108). Lose the second packet of the first.
    let pkts = sends_of_600(&mut a, &mut b, 3);
    assert_eq!(pkts.len(), 9);
    for (i, p) in pkts.iter().enumerate() {
        if i != 1 {
            b.handle_packet(p);
        }
    }
    // Messages 2 and 3 arrive; the first's receive (wr_id 0) takes the second message.
    let got: Vec<(u64, u32)> = std::iter::from_fn(|| b.poll_completion())
        .map(|c| (c.wr_id, c.byte_len))
        .collect();
    assert_eq!(got, [(0, 600), (1, 600)]);
    let k = *b.counters();
    assert_eq!((k.messages_received, k.messages_dropped), (2, 1));
    assert_eq!(
        (k.psn_gaps, k.packets_missing, k.packets_discarded),
        (1, 1, 1)
    );

    // Losing a FIRST: the MIDDLE and LAST that follow are dropped, the next message is whole.
    let (mut a, mut b, _) = uc_pair();
    let pkts = sends_of_600(&mut a, &mut b, 2);
    for p in &pkts[1..] {
        b.handle_packet(p);
    }
    assert_eq!(b.poll_completion().map(|c| c.wr_id), Some(0));
    let k = *b.counters();
    assert_eq!(
        (k.messages_received, k.messages_dropped, k.packets_discarded),
        (1, 1, 2)
    );
}

#[test]
fn uc_without_a_receive_drops_the_send_and_a_bad_rkey_drops_the_write() {
    let (mut a, mut b, rb) = uc_pair();
    a.post_send(&SendRequest::new(1, SendOp::Send, 0, 100, None))
        .unwrap();
    let bad = RemoteAddr {
        rkey: rb.rkey ^ 0x100,
        ..rb
    };
    a.post_send(&SendRequest::new(2, SendOp::Write, 0, 100, Some(bad)))
        .unwrap();
    for p in drain(|buf| a.poll_transmit(Instant::ZERO, buf)) {
        b.handle_packet(&p);
    }
    assert_eq!(b.poll_completion(), None);
    let k = *b.counters();
    assert_eq!(
        (k.no_receive, k.access_violations, k.messages_received),
        (1, 1, 0)
    );
    // Nothing goes back: UC never answers.
    assert_eq!(b.poll_transmit(Instant::ZERO, &mut [0u8; 512]), None);
}

fn ud_pair(qkey_b: u32) -> (UdQp, UdQp) {
    let (ma, la, _) = mem(1);
    let (mb, lb, _) = mem(2);
    let a = UdQp::new(cfg(A, B, 100, 0, la), ma, DEFAULT_QKEY, qkey_b).unwrap();
    let b = UdQp::new(cfg(B, A, 900, 0, lb), mb, qkey_b, DEFAULT_QKEY).unwrap();
    (a, b)
}

#[test]
fn ud_sends_datagrams_with_deth_and_delivers_the_grh_in_front() {
    let (mut a, mut b) = ud_pair(DEFAULT_QKEY);
    let la = a.config().local_lkey;
    fill(a.memory_mut(), la, 9);
    a.post_send(&SendRequest::new(5, SendOp::SendWithImm(7), 0, 256, None))
        .unwrap();
    let long = SendRequest::new(6, SendOp::Send, 0, 257, None);
    let e = a.post_send(&long).unwrap_err().to_string();
    assert!(e.contains("UD message") && e.contains("256 bytes"), "{e}");
    let pkts = drain(|buf| a.poll_transmit(Instant::ZERO, buf));
    assert_eq!(pkts.len(), 1);
    let (r, payload) = IbRepr::parse(&pkts[0]).unwrap();
    assert_eq!(r.bth.opcode, Opcode::UD_SEND_ONLY_WITH_IMMEDIATE);
    assert_eq!((r.bth.dest_qp, r.bth.psn, r.bth.ack_req), (B, 100, false));
    assert_eq!(
        r.deth,
        Some(DethRepr {
            qkey: 0x1111_1111,
            src_qp: A
        })
    );
    assert_eq!(payload.len(), 256);
    b.post_recv(&RecvRequest {
        wr_id: 3,
        offset: 0,
        len: 296,
    })
    .unwrap();
    let grh = Grh([0xab; 40]);
    b.handle_packet(&pkts[0], || grh);
    let c = b.poll_completion().unwrap();
    assert_eq!((c.wr_id, c.byte_len, c.imm), (3, 296, Some(7)));
    let got = &b.memory().region_bytes(b.config().local_lkey).unwrap()[..296];
    assert_eq!(&got[..40], &[0xab; 40]);
    assert_eq!(&got[40..], payload);
}

#[test]
fn ud_drops_a_foreign_q_key_a_missing_receive_and_counts_lost_datagrams() {
    let (mut a, mut b) = ud_pair(0x4242);
    let (_, mut wrong_key) = ud_pair(0x9999);
    for id in 0..4 {
        a.post_send(&SendRequest::new(id, SendOp::Send, 0, 16, None))
            .unwrap();
    }
    let pkts = drain(|buf| a.poll_transmit(Instant::ZERO, buf));
    let grh = || Grh([0; 40]);
    wrong_key
        .post_recv(&RecvRequest {
            wr_id: 0,
            offset: 0,
            len: 100,
        })
        .unwrap();
    wrong_key.handle_packet(&pkts[0], grh);
    assert_eq!(wrong_key.counters().qkey_mismatch, 1);
    assert_eq!(wrong_key.poll_completion(), None);
    // Datagram 1 is lost on the way; 0 and 2 find receives, 3 none.
    b.post_recv(&RecvRequest {
        wr_id: 0,
        offset: 0,
        len: 100,
    })
    .unwrap();
    b.post_recv(&RecvRequest {
        wr_id: 1,
        offset: 100,
        len: 20,
    })
    .unwrap();
    for i in [0, 2, 3] {
        b.handle_packet(&pkts[i], grh);
    }
    let k = *b.counters();
    assert_eq!(
        (k.messages_received, k.psn_gaps, k.packets_missing),
        (1, 1, 1)
    );
    assert_eq!((k.bad_length, k.no_receive), (1, 1));
    let c: Vec<CompletionStatus> = std::iter::from_fn(|| b.poll_completion())
        .map(|c| c.status)
        .collect();
    // The second receive holds 20 bytes: no room for the GRH and 16 bytes.
    assert_eq!(
        c,
        [
            CompletionStatus::Success,
            CompletionStatus::LocalLengthError
        ]
    );
}

/// perftest's `-R -c UD` server: its queue pair is resolved before it knows the requester's QPN
/// (a librdmacm SIDR_REQ carries none); it receives the first datagram, then learns the QPN from it.
#[test]
fn a_ud_queue_pair_without_the_peers_qpn_receives_and_sends_only_once_told() {
    let (mut a, _) = ud_pair(DEFAULT_QKEY);
    let (mb, lb, _) = mem(2);
    let mut b = UdQp::new(cfg(B, 0, 900, 0, lb), mb, DEFAULT_QKEY, DEFAULT_QKEY).unwrap();
    let e = b
        .post_send(&SendRequest::new(1, SendOp::Send, 0, 4, None))
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not know its peer's QPN"), "{e}");
    a.post_send(&SendRequest::new(2, SendOp::SendWithImm(A), 0, 4, None))
        .unwrap();
    let pkts = drain(|buf| a.poll_transmit(Instant::ZERO, buf));
    b.post_recv(&RecvRequest {
        wr_id: 3,
        offset: 0,
        len: 44,
    })
    .unwrap();
    b.handle_packet(&pkts[0], || Grh([0; 40]));
    let c = b.poll_completion().unwrap();
    assert_eq!((c.byte_len, c.imm), (44, Some(A)));
    b.set_remote_qpn(c.imm.unwrap());
    b.post_send(&SendRequest::new(4, SendOp::Send, 0, 4, None))
        .unwrap();
    let pkts = drain(|buf| b.poll_transmit(Instant::ZERO, buf));
    let (r, _) = IbRepr::parse(&pkts[0]).unwrap();
    assert_eq!(r.bth.dest_qp, A);
}
