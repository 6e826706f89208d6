//! Throughput and latency of SoftEndpoint over lo (ignored by default: measurements, not tests).
//!
//! `cargo test --release --test soft_bench -- --ignored --nocapture --test-threads 1`
//!
//! Two endpoints, each driven by its own thread pinned to its own core, as two roceperf processes
//! would be: RDMA WRITE of 64 KiB with 128 in flight (write_bw), and a 2-byte SEND ping-pong
//! (send_lat, half the round trip). ROCEPERF_BENCH_SECS sets the duration (default 2);
//! ROCEPERF_BENCH_GSO=1 turns on UDP GSO/GRO (`SoftConfig::gso`).

use crate::soft_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{
    Completion, CompletionStatus, Endpoint, RecvRequest, RemoteAddr, SendOp,
};
use soft_support::endpoints::{connect, remote, udp_cfg, veth_packet_cfg, wr};
use soft_support::pin;

fn secs() -> Duration {
    soft_support::secs_from_env("ROCEPERF_BENCH_SECS", 2.0)
}

/// Lets the calling thread run on every core again.
fn unpin() {
    // SAFETY: a cpu_set_t filled by CPU_SET for every possible core, applied to this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn pair(tag: u8) -> (SoftEndpoint, SoftEndpoint) {
    let gso = std::env::var("ROCEPERF_BENCH_GSO").is_ok_and(|v| v == "1");
    let a_ip = format!("127.0.{tag}.1");
    let b_ip = format!("127.0.{tag}.2");
    let mut a = SoftEndpoint::open(SoftConfig {
        gso,
        ..udp_cfg(&a_ip, 4791)
    })
    .unwrap();
    let mut b = SoftEndpoint::open(SoftConfig {
        gso,
        ..udp_cfg(&b_ip, 4791)
    })
    .unwrap();
    connect(&mut a, &mut b);
    (a, b)
}

/// Keeps `b` polling (its responder must answer) until `stop`.
fn passive(mut b: SoftEndpoint, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<SoftEndpoint> {
    std::thread::spawn(move || {
        pin(1);
        let mut buf = [Completion::EMPTY; 16];
        while !stop.load(Ordering::Relaxed) {
            b.poll_cq(&mut buf).unwrap();
        }
        b
    })
}

/// Keeps 128 WRITEs of `size` bytes to `rw` in flight from `a` for [`secs`]; `on_poll` sees each batch
/// of `a`'s completions. Returns (WRITEs completed, seconds taken).
fn write_for(
    a: &mut SoftEndpoint,
    rw: RemoteAddr,
    size: u32,
    mut on_poll: impl FnMut(&[Completion]),
) -> (u64, f64) {
    let mut buf = [Completion::EMPTY; 64];
    let (mut in_flight, mut done, mut posted) = (0u32, 0u64, 0u64);
    let start = Instant::now();
    let dur = secs();
    while start.elapsed() < dur {
        while in_flight < 128 {
            a.post_send(0, &wr(posted, SendOp::Write, 0, size, Some(rw)))
                .unwrap();
            posted += 1;
            in_flight += 1;
        }
        let n = a.poll_cq(&mut buf).unwrap();
        on_poll(&buf[..n]);
        in_flight -= n as u32;
        done += n as u64;
    }
    (done, start.elapsed().as_secs_f64())
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn write_bw_64k_over_lo() {
    let (mut a, b) = pair(20);
    let size = 65536u32;
    let rw = remote(&b, 0, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let server = passive(b, stop.clone());
    pin(0);
    let (done, elapsed) = write_for(&mut a, rw, size, |cs| {
        for c in cs {
            assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
        }
    });
    stop.store(true, Ordering::Relaxed);
    let b = server.join().unwrap();
    let gbps = done as f64 * f64::from(size) * 8.0 / elapsed / 1e9;
    println!(
        "soft v2 udp lo write_bw 64 KiB: {gbps:.2} Gb/s, {:.3} Mmsg/s ({done} messages in {elapsed:.2} s)",
        done as f64 / elapsed / 1e6
    );
    println!("  requester {:?}", a.counters());
    println!("  responder {:?}", b.counters());
    assert!(done > 0);
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn send_lat_2b_over_lo() {
    let (a, b) = pair(21);
    send_lat("soft v2 udp lo", a, b);
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn send_lat_2b_packet_v1_over_veth_ring_and_recvmmsg() {
    use roceperf::params::RoceVersion;
    if crate::common::skip_unless(soft_support::is_root(), "needs root") {
        return;
    }
    for ring in [0usize, 512, 0] {
        let pair = soft_support::NetnsPair::up(&["--mtu", "9000"]);
        // The helper threads that open the endpoints inherit this thread's affinity; opened from a
        // thread pinned to core 0 (as after the first round), later rounds measured milliseconds.
        unpin();
        let open = move || {
            let mut c = veth_packet_cfg(RoceVersion::V1);
            c.packet_rx_ring = ring;
            SoftEndpoint::open(c).unwrap()
        };
        let mut a = pair.in_ns('a', open);
        let mut b = pair.in_ns('b', open);
        connect(&mut a, &mut b);
        send_lat(&format!("soft v1 packet veth (rx ring {ring})"), a, b);
    }
}

/// Where each side of the ping-pong receives the other's 2-byte SEND.
const PONG_RECV: RecvRequest = RecvRequest {
    wr_id: 0,
    offset: 4096,
    len: 64,
};

/// A 2-byte SEND ping-pong between `a` (this thread, core 0) and `b` (a thread on core 1).
fn send_lat(what: &str, mut a: SoftEndpoint, mut b: SoftEndpoint) {
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    // b: answer every 2-byte SEND with a 2-byte SEND.
    b.post_recv(0, &PONG_RECV).unwrap();
    let server = std::thread::spawn(move || {
        pin(1);
        let mut buf = [Completion::EMPTY; 16];
        while !stop_b.load(Ordering::Relaxed) {
            let n = b.poll_cq(&mut buf).unwrap();
            for c in &buf[..n] {
                if c.op == roceperf::transport::CompletionOp::Recv {
                    b.post_recv(0, &PONG_RECV).unwrap();
                    b.post_send(0, &wr(1, SendOp::Send, 0, 2, None)).unwrap();
                }
            }
        }
        b.counters()
    });
    pin(0);
    let mut buf = [Completion::EMPTY; 16];
    let mut samples = Vec::with_capacity(1 << 20);
    let start = Instant::now();
    let dur = secs();
    a.post_recv(0, &PONG_RECV).unwrap();
    while start.elapsed() < dur {
        let t0 = Instant::now();
        a.post_send(0, &wr(1, SendOp::Send, 0, 2, None)).unwrap();
        'wait: loop {
            let n = a.poll_cq(&mut buf).unwrap();
            for c in &buf[..n] {
                // A failed QP flushes at once: never let that pass for a fast round trip.
                assert_eq!(
                    c.status,
                    CompletionStatus::Success,
                    "{c:?} {:?}",
                    a.counters()
                );
                if c.op == roceperf::transport::CompletionOp::Recv {
                    break 'wait;
                }
            }
        }
        samples.push(t0.elapsed().as_nanos() as u64);
        a.post_recv(0, &PONG_RECV).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let b_counters = server.join().unwrap();
    eprintln!("  a: {:?}\n  b: {b_counters:?}", a.counters());
    samples.sort_unstable();
    let q = |p: f64| samples[((samples.len() - 1) as f64 * p) as usize] as f64 / 2.0 / 1000.0;
    println!(
        "{what} send_lat 2 B (half RTT): median {:.2} us, p99 {:.2} us, min {:.2} us ({} samples)",
        q(0.5),
        q(0.99),
        q(0.0),
        samples.len()
    );
}

/// Both endpoints driven from one thread: no cross-core scheduling effects, shows the stack's own cost.
#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn write_bw_64k_one_thread() {
    let (mut a, mut b) = pair(22);
    let size = 65536u32;
    let rw = remote(&b, 0, 0);
    pin(0);
    let mut b_buf = [Completion::EMPTY; 64];
    let (done, elapsed) = write_for(&mut a, rw, size, |_| {
        b.poll_cq(&mut b_buf).unwrap();
    });
    println!(
        "soft v2 udp lo write_bw 64 KiB, one thread for both sides: {:.2} Gb/s ({done} messages)",
        done as f64 * f64::from(size) * 8.0 / elapsed / 1e9
    );
    println!("  requester {:?}", a.counters());
}
