//! Feeds arbitrary packets to an RC queue pair with registered regions and checks that nothing
//! panics and no byte outside a region that grants the access ever changes.
//!
//! Input: a sequence of chunks `[ctl, len, bytes..len]`. When `ctl & 1`, the chunk's BTH gets this
//! QP's number and a PSN near the expected one (so the fuzzer reaches deep responder states
//! instead of bouncing off the QPN check); `ctl >> 1` advances virtual time.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roceperf::transport::soft::rc::{Instant, MemoryTable, Qp, QpConfig};
use roceperf::transport::{Access, RecvRequest, RemoteAddr, SendOp, SendRequest};

const GUARD: usize = 64;
const QPN: u32 = 0x11;

fn filled(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Asserts that the guards on both sides of a region of `len` bytes in `after` are as in `before`.
fn assert_guards_kept(after: &[u8], before: &[u8], len: usize, region: &str) {
    assert_eq!(&after[..GUARD], &before[..GUARD], "write before {region}");
    assert_eq!(
        &after[GUARD + len..],
        &before[GUARD + len..],
        "write after {region}"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut mem = MemoryTable::new(5);
    // Buffer 0: a fully open region with guards on both sides.
    let open_buf = mem.add_buffer(GUARD + 4096 + GUARD);
    let open = mem
        .register(open_buf, GUARD, 4096, Access(1 | 2 | 4 | 8))
        .unwrap();
    // Buffer 1: a region the peer may only READ.
    let ro_buf = mem.add_buffer(GUARD + 1024 + GUARD);
    let ro = mem
        .register(ro_buf, GUARD, 1024, Access::REMOTE_READ)
        .unwrap();
    // Buffer 2: the QP's own buffer for receives and READ results; no remote rights.
    let local_buf = mem.add_buffer(GUARD + 2048 + GUARD);
    let local = mem
        .register(local_buf, GUARD, 2048, Access::LOCAL_WRITE)
        .unwrap();
    for (b, seed) in [(open_buf, 1u8), (ro_buf, 2), (local_buf, 3)] {
        let len = mem.buffer(b).len();
        mem.buffer_mut(b).copy_from_slice(&filled(len, seed));
    }
    let before_open = mem.buffer(open_buf).to_vec();
    let before_ro = mem.buffer(ro_buf).to_vec();
    let before_local = mem.buffer(local_buf).to_vec();

    let mut cfg = QpConfig::new(QPN, 0x12, 0x100, 0xff_fff0, local.lkey);
    cfg.pmtu = 256;
    cfg.timeout = 1;
    cfg.retry_cnt = 2;
    cfg.rnr_retry = 2;
    cfg.sq_depth = 8;
    cfg.rq_depth = 4;
    cfg.max_dest_rd_atomic = 2;
    let mut qp = Qp::new(cfg, mem).unwrap();
    // Receives land in [0, 1024) of the local region; READ and atomic results in [1024, 2048).
    for i in 0..4u64 {
        qp.post_recv(&RecvRequest {
            wr_id: i,
            offset: i * 256,
            len: 256,
        })
        .unwrap();
    }
    let remote = Some(RemoteAddr {
        addr: 0x1000,
        rkey: 0x1234,
    });
    let sends = [
        (SendOp::Read, 1024, 512),
        (SendOp::FetchAdd(1), 1536, 8),
        (SendOp::Write, 0, 300),
        (
            SendOp::CompareSwap {
                compare: 0,
                swap: 1,
            },
            1544,
            8,
        ),
        (SendOp::Read, 1600, 256),
    ];
    for (i, (op, offset, len)) in sends.into_iter().enumerate() {
        let wr = SendRequest::new(100 + i as u64, op, offset, len, remote);
        qp.post_send(&wr).unwrap();
    }

    let mut now = Instant::ZERO;
    let mut out = vec![0u8; qp.max_packet_len()];
    let mut pkt = Vec::with_capacity(512);
    let mut rest = data;
    while rest.len() >= 2 {
        let (ctl, len) = (rest[0], usize::from(rest[1]) * 2);
        rest = &rest[2..];
        let take = len.min(rest.len());
        pkt.clear();
        pkt.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if ctl & 1 == 1 && pkt.len() >= 12 {
            pkt[4..8].copy_from_slice(&QPN.to_be_bytes());
            let delta = u32::from(pkt[11] & 0x07);
            let psn = if pkt[0] >= 0x0d && pkt[0] <= 0x12 {
                0x100 + delta
            } else {
                qp.expected_psn().wrapping_add(delta).wrapping_sub(2) & 0xff_ffff
            };
            pkt[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
            pkt[2..4].copy_from_slice(&[0xff, 0xff]);
            pkt[1] &= 0xf0;
        }
        now = Instant::from_nanos(now.as_nanos() + u64::from(ctl >> 1) * 10_000);
        qp.handle_packet(now, &pkt);
        if qp.poll_timeout().is_some_and(|t| t <= now) {
            qp.handle_timeout(now);
        }
        while let Some(n) = qp.poll_transmit(now, &mut out) {
            assert!(n <= out.len());
            assert!(
                roceperf::wire::IbRepr::parse(&out[..n]).is_ok(),
                "the engine emitted an unparseable packet"
            );
        }
        while qp.poll_completion().is_some() {}
    }

    let mem = qp.memory();
    assert_guards_kept(mem.buffer(open_buf), &before_open, 4096, "the open region");
    assert_eq!(
        mem.buffer(ro_buf),
        &before_ro[..],
        "write into the read-only region or its guards"
    );
    let after_local = mem.buffer(local_buf);
    assert_guards_kept(after_local, &before_local, 2048, "the local region");
    // The peer has no right to write the local region: only receives and our own READ/atomic results.
    let changed_outside_posted = after_local[GUARD..GUARD + 2048]
        .iter()
        .zip(&before_local[GUARD..GUARD + 2048])
        .enumerate()
        .any(|(i, (a, b))| {
            a != b
                && !(i < 1024
                    || (1024..1536).contains(&i)
                    || (1536..1552).contains(&i)
                    || (1600..1856).contains(&i))
        });
    assert!(
        !changed_outside_posted,
        "a byte of the local region outside every posted range changed"
    );
    let _ = (open, ro);
});
