//! The engine's packet path does not allocate: a counting allocator watches a steady-state run of
//! WRITEs, READs, SENDs and atomics through two queue pairs.

use crate::alloc_counter;
use roceperf::transport::soft::rc::{Instant, MemoryTable, Qp, QpConfig};
use roceperf::transport::{Access, RecvRequest, RemoteAddr, SendOp, SendRequest};

fn shuttle(from: &mut Qp, to: &mut Qp, now: u64, buf: &mut [u8]) -> usize {
    let now = Instant::from_nanos(now);
    let mut n = 0;
    while let Some(len) = from.poll_transmit(now, buf) {
        to.handle_packet(now, &buf[..len]);
        n += 1;
    }
    n
}

#[test]
fn steady_state_traffic_allocates_nothing() {
    let mk = |qpn, peer, salt| {
        let mut mem = MemoryTable::new(salt);
        let keys = mem.add_registered(1 << 20, Access(15));
        let mut cfg = QpConfig::new(qpn, peer, 0xff_ff00, 0xff_ff00, keys.lkey);
        cfg.pmtu = 1024;
        (Qp::new(cfg, mem).unwrap(), keys)
    };
    let (mut a, _) = mk(0x11, 0x12, 1);
    let (mut b, kb) = mk(0x12, 0x11, 2);
    let mut buf = vec![0u8; a.max_packet_len()];
    let remote = |off| {
        Some(RemoteAddr {
            addr: kb.va + off,
            rkey: kb.rkey,
        })
    };
    let ops = [
        (SendOp::Write, 0, 5000, remote(0)),
        (SendOp::Read, 8192, 3000, remote(0)),
        (SendOp::Send, 0, 2000, None),
        (SendOp::WriteWithImm(3), 0, 100, remote(16384)),
        (SendOp::FetchAdd(1), 16384, 8, remote(32768)),
        (
            SendOp::CompareSwap {
                compare: 0,
                swap: 1,
            },
            16392,
            8,
            remote(32776),
        ),
    ];
    let mut packets = 0;
    let mut completions = 0;
    for round in 0..200u64 {
        if round == 20 {
            alloc_counter::watch(); // after warm-up: every ring is at its working size
        }
        for (i, (op, offset, len, remote)) in ops.iter().enumerate() {
            if matches!(op, SendOp::Send | SendOp::WriteWithImm(_)) {
                b.post_recv(&RecvRequest {
                    wr_id: i as u64,
                    offset: 65536,
                    len: 4096,
                })
                .unwrap();
            }
            let wr = SendRequest::new(i as u64, *op, *offset, *len, *remote);
            a.post_send(&wr).unwrap();
        }
        loop {
            let moved =
                shuttle(&mut a, &mut b, round, &mut buf) + shuttle(&mut b, &mut a, round, &mut buf);
            packets += moved;
            if moved == 0 {
                break;
            }
        }
        while a.poll_completion().is_some() {
            completions += 1;
        }
        while b.poll_completion().is_some() {}
        a.handle_timeout(Instant::from_nanos(round));
    }
    let allocations = alloc_counter::stop();
    assert_eq!(completions, 200 * ops.len());
    assert!(packets > 200 * 15, "{packets} packets");
    assert_eq!(allocations, 0, "allocations on the packet path");
}
