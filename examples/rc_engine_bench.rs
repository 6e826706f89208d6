//! Engine-only benchmark of the RC state machine: no sockets, no ICRC, no clock reads per packet.
//!
//! Two queue pairs in one thread hand packets to each other through one buffer. It reports packets
//! per second on one core for (1) a stream of 4096-byte RDMA WRITEs at PMTU 4096 and (2) a 2-byte
//! SEND ping-pong, counting every packet either engine emits and the other consumes (data and ACKs).
//!
//! `cargo run --release --example rc_engine_bench -- [seconds per round, default 1] [write|pingpong|all]`
//! Each test runs five rounds; the best and the median are printed.

use std::time::{Duration, Instant};

use roceperf::transport::soft::rc::{self, MemoryTable, MrKeys, Qp, QpConfig};
use roceperf::transport::{Access, RecvRequest, RemoteAddr, SendOp, SendRequest};

const ALL: Access = Access(1 | 2 | 4 | 8);

fn pair(pmtu: u32) -> (Qp, Qp, MrKeys) {
    let mk = |qpn, peer, sp, rp, salt| {
        let mut mem = MemoryTable::new(salt);
        let keys = mem.add_registered(1 << 20, ALL);
        let mut cfg = QpConfig::new(qpn, peer, sp, rp, keys.lkey);
        cfg.pmtu = pmtu;
        (Qp::new(cfg, mem).expect("valid config"), keys)
    };
    let (a, _) = mk(0x11, 0x12, 1, 2, 1);
    let (b, kb) = mk(0x12, 0x11, 2, 1, 2);
    (a, b, kb)
}

/// Moves every ready packet from `from` to `to` at `now` ns of virtual time; returns how many.
fn shuttle(from: &mut Qp, to: &mut Qp, now: u64, buf: &mut [u8]) -> u64 {
    let now = rc::Instant::from_nanos(now);
    let mut n = 0;
    while let Some(len) = from.poll_transmit(now, buf) {
        to.handle_packet(now, &buf[..len]);
        n += 1;
    }
    n
}

fn write_stream(secs: f64) -> (u64, u64, Duration) {
    let (mut a, mut b, kb) = pair(4096);
    let mut buf = vec![0u8; a.max_packet_len()];
    let remote = RemoteAddr {
        addr: kb.va,
        rkey: kb.rkey,
    };
    let wr = SendRequest::new(0, SendOp::Write, 0, 4096, Some(remote));
    let (mut packets, mut writes, mut now) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let budget = Duration::from_secs_f64(secs);
    loop {
        for _ in 0..64 {
            while a.post_send(&wr).is_ok() {}
            packets += shuttle(&mut a, &mut b, now, &mut buf);
            packets += shuttle(&mut b, &mut a, now, &mut buf);
            while let Some(c) = a.poll_completion() {
                assert_eq!(c.status, roceperf::transport::CompletionStatus::Success);
                writes += 1;
            }
            now += 1_000;
        }
        if start.elapsed() >= budget {
            return (packets, writes, start.elapsed());
        }
    }
}

fn ping_pong(secs: f64) -> (u64, u64, Duration) {
    let (mut a, mut b, _) = pair(1024);
    let mut buf = vec![0u8; a.max_packet_len()];
    let send = SendRequest {
        inline: true,
        ..SendRequest::new(1, SendOp::Send, 0, 2, None)
    };
    let recv = RecvRequest {
        wr_id: 2,
        offset: 4096,
        len: 2,
    };
    for _ in 0..16 {
        a.post_recv(&recv).expect("room");
        b.post_recv(&recv).expect("room");
    }
    let (mut packets, mut trips, mut now) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let budget = Duration::from_secs_f64(secs);
    loop {
        for _ in 0..256 {
            a.post_send(&send).expect("room");
            // A's SEND reaches B; B answers with its ACK and its own SEND; A ACKs that.
            loop {
                let moved =
                    shuttle(&mut a, &mut b, now, &mut buf) + shuttle(&mut b, &mut a, now, &mut buf);
                packets += moved;
                let mut got = false;
                while let Some(c) = b.poll_completion() {
                    if c.op == roceperf::transport::CompletionOp::Recv {
                        b.post_recv(&recv).expect("room");
                        b.post_send(&send).expect("room");
                    }
                }
                while let Some(c) = a.poll_completion() {
                    if c.op == roceperf::transport::CompletionOp::Recv {
                        a.post_recv(&recv).expect("room");
                        got = true;
                    }
                }
                if got {
                    break;
                }
                assert!(moved > 0, "ping-pong stalled");
            }
            trips += 1;
            now += 1_000;
        }
        if start.elapsed() >= budget {
            return (packets, trips, start.elapsed());
        }
    }
}

/// Runs `test` in `rounds` rounds and returns (best, median) of its packets-per-second, plus the
/// second figure (operations per second) of the best round. A shared machine makes single runs noisy.
fn rounds(n: usize, secs: f64, test: fn(f64) -> (u64, u64, Duration)) -> (f64, f64, f64) {
    let mut r: Vec<(f64, f64)> = (0..n)
        .map(|_| {
            let (packets, ops, t) = test(secs);
            (
                packets as f64 / t.as_secs_f64(),
                ops as f64 / t.as_secs_f64(),
            )
        })
        .collect();
    r.sort_by(|a, b| b.0.total_cmp(&a.0));
    (r[0].0, r[n / 2].0, r[0].1)
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let which = std::env::args().nth(2).unwrap_or_else(|| "all".into());
    if let Some(core) = core_affinity::get_core_ids().and_then(|c| c.into_iter().next()) {
        core_affinity::set_for_current(core);
    }
    const ROUNDS: usize = 5;
    if which == "all" || which == "write" {
        let (best, median, writes) = rounds(ROUNDS, secs, write_stream);
        println!(
            "WRITE 4096 B, PMTU 4096: {:.2} Mpkt/s per core (median of {ROUNDS} rounds {:.2}); {:.2} M WRITEs/s, {:.1} Gb/s of payload",
            best / 1e6,
            median / 1e6,
            writes / 1e6,
            writes * 4096.0 * 8.0 / 1e9,
        );
    }
    if which == "all" || which == "pingpong" {
        let (best, median, trips) = rounds(ROUNDS, secs, ping_pong);
        println!(
            "SEND ping-pong 2 B: {:.2} Mpkt/s per core (median of {ROUNDS} rounds {:.2}); {:.2} M round trips/s, {:.0} ns per round trip of 4 packets",
            best / 1e6,
            median / 1e6,
            trips / 1e6,
            1e9 / trips,
        );
    }
}
