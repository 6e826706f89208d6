//! Micro-benchmark of the wire layer on one 4096-byte-payload RoCE v2/IPv4 RDMA WRITE packet:
//! parse + ICRC verify, emit + ICRC (with and without copying the payload), and the ICRC alone.
//!
//! Run: `cargo run --release --example wire_bench [seconds-per-case]`. Prints ns/packet and GB/s
//! (10^9 bytes of whole frame per second), from the thread's CPU time in the best of 20 rounds. Timing is
//! reported here, never asserted in tests.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use roceperf::wire::{
    AethRepr, BthRepr, EthernetRepr, IbRepr, Ipv4Repr, NetRepr, Opcode, RethRepr, RoceFrame,
    RoceFrameRepr, UdpRepr,
};

const PAYLOAD: usize = 4096;

/// CPU time this thread has run: unlike wall time, it does not count the time other processes on a
/// shared machine hold the core.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` in rounds for about `budget` in all and returns the best round's mean thread CPU time per
/// call: the round least disturbed by other processes (cache pollution, interrupts).
fn measure(budget: Duration, mut f: impl FnMut()) -> Duration {
    const ROUNDS: u32 = 20;
    // Calibrate: how many calls fill one round.
    let mut iters = 100u32;
    loop {
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        if start.elapsed() >= budget / ROUNDS || iters >= 1 << 30 {
            break;
        }
        iters *= 2;
    }
    (0..ROUNDS)
        .map(|_| {
            let start = thread_cpu_time();
            for _ in 0..iters {
                f();
            }
            (thread_cpu_time() - start) / iters
        })
        .min()
        .unwrap()
}

fn report(name: &str, per_packet: Duration, frame_len: usize) {
    let ns = per_packet.as_secs_f64() * 1e9;
    let gbs = frame_len as f64 / ns;
    println!(
        "{name:<34} {ns:>9.1} ns/packet {gbs:>7.2} GB/s {:>7.2} Mpps",
        1e3 / ns
    );
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds per case must be a number"))
        .unwrap_or(1.0);
    let budget = Duration::from_secs_f64(secs);

    let mut bth = BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, 0x11, 0x100);
    bth.ack_req = true;
    let mut ib = IbRepr::new(bth);
    ib.reth = Some(RethRepr {
        va: 0x7f00_0000_1000,
        rkey: 0x1234,
        dma_len: PAYLOAD as u32,
    });
    let repr = RoceFrameRepr {
        eth: EthernetRepr {
            dst: [2, 0, 0, 0, 0, 2].into(),
            src: [2, 0, 0, 0, 0, 1].into(),
            vlan: None,
            ethertype: 0x0800,
        },
        net: NetRepr::V2v4(
            Ipv4Repr {
                ident: 0x1234,
                ..Ipv4Repr::roce(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            },
            UdpRepr::roce(0xc123),
        ),
        ib,
    };
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| i as u8).collect();
    let len = repr.frame_len(PAYLOAD);
    let mut frame = vec![0u8; len];
    repr.emit(&mut frame, &payload);
    println!(
        "frame: RoCE v2/IPv4 RC_RDMA_WRITE_ONLY, {PAYLOAD} B payload, {len} B frame; crc32fast; {secs} s per case"
    );

    let t = measure(budget, || {
        let (r, p) = RoceFrameRepr::parse(black_box(&frame)).unwrap();
        black_box((r, p.len()));
    });
    report("parse + ICRC verify", t, len);

    let mut out = vec![0u8; len];
    let t = measure(budget, || {
        black_box(repr.emit(black_box(&mut out), black_box(&payload)));
    });
    report("emit + ICRC (payload copied)", t, len);

    let t = measure(budget, || {
        black_box(repr.emit_in_place(black_box(&mut out), PAYLOAD));
    });
    report("emit + ICRC (payload in place)", t, len);

    let view = RoceFrame::new_checked(&frame).unwrap();
    let t = measure(budget, || {
        black_box(black_box(&view).compute_icrc());
    });
    report("ICRC alone", t, len);

    let t = measure(budget, || {
        let (r, p) = RoceFrameRepr::parse_unverified(black_box(&frame)).unwrap();
        black_box((r, p.len()));
    });
    report("parse without ICRC", t, len);
    assert_eq!(out, frame, "emit_in_place wrote a different frame");

    // The smallest RoCE frame: an ACK, where the headers, not the CRC, are the work.
    let mut ack = repr;
    ack.ib = IbRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, 0x12, 0x100));
    ack.ib.aeth = Some(AethRepr::ack(1));
    let ack_len = ack.frame_len(0);
    let mut ack_frame = vec![0u8; ack_len];
    ack.emit(&mut ack_frame, &[]);
    println!("frame: RoCE v2/IPv4 RC_ACKNOWLEDGE, {ack_len} B frame");
    let t = measure(budget, || {
        let (r, p) = RoceFrameRepr::parse(black_box(&ack_frame)).unwrap();
        black_box((r, p.len()));
    });
    report("ACK parse + ICRC verify", t, ack_len);
    let t = measure(budget, || {
        black_box(ack.emit(black_box(&mut ack_frame), black_box(&[])));
    });
    report("ACK emit + ICRC", t, ack_len);
}
