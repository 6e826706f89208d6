//! The datapath promise, checked: once connected and warmed up, posting work and polling
//! (receive, engine, timers, framing, ICRC, transmit, completions) allocates nothing, on either
//! backend. A counting global allocator sees every allocation of this test binary.

mod soft_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{
    Completion, CompletionStatus, Endpoint, RecvRequest, RemoteAddr, SendOp,
};
use soft_support::endpoints::{connect, free_port, remote, udp_cfg, veth_packet_cfg, wr};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// The counter is process-wide: the tests take turns so one never counts the other's setup.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `rounds` of: 4 WRITEs of 64 KiB, one SEND, one READ; both sides polled until all complete.
fn traffic(
    a: &mut SoftEndpoint,
    b: &mut SoftEndpoint,
    rounds: usize,
    rw: RemoteAddr,
    rr: RemoteAddr,
) {
    let mut buf = [Completion::EMPTY; 32];
    for _ in 0..rounds {
        b.post_recv(
            0,
            &RecvRequest {
                wr_id: 7,
                offset: 300_000,
                len: 8192,
            },
        )
        .unwrap();
        for k in 0..4 {
            a.post_send(0, &wr(k, SendOp::Write, 0, 65_536, Some(rw)))
                .unwrap();
        }
        a.post_send(0, &wr(4, SendOp::Send, 0, 4000, None)).unwrap();
        a.post_send(0, &wr(5, SendOp::Read, 600_000, 20_000, Some(rr)))
            .unwrap();
        let (mut na, mut nb) = (0, 0);
        let mut spins = 0u64;
        while na < 6 || nb < 1 {
            let n = a.poll_cq(&mut buf).unwrap();
            for c in &buf[..n] {
                assert_eq!(c.status, CompletionStatus::Success);
            }
            na += n;
            nb += b.poll_cq(&mut buf).unwrap();
            spins += 1;
            assert!(spins < 50_000_000, "traffic stalled");
        }
    }
}

#[test]
fn steady_state_datapath_allocates_nothing() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_port("127.0.13.1");
    for gso in [false, true] {
        let mut a = SoftEndpoint::open(SoftConfig {
            gso,
            ..udp_cfg("127.0.13.1", port)
        })
        .unwrap();
        let mut b = SoftEndpoint::open(SoftConfig {
            gso,
            ..udp_cfg("127.0.13.2", port)
        })
        .unwrap();
        connect(&mut a, &mut b);
        // local_info (inside remote) allocates; it is setup, not datapath, so it runs first.
        let (rw, rr) = (remote(&b, 0, 0), remote(&b, 0, 512 * 1024));
        traffic(&mut a, &mut b, 5, rw, rr); // warm-up: lazily sized things settle here
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        traffic(&mut a, &mut b, 50, rw, rr);
        COUNTING.store(false, Ordering::Relaxed);
        let n = ALLOCS.load(Ordering::Relaxed);
        assert_eq!(n, 0, "{n} allocations on the datapath (gso {gso})");
        assert!(a.counters().tx_packets > 50 * (4 * 16 + 1 + 1));
    }
}

#[test]
fn steady_state_packet_datapath_allocates_nothing() {
    use roceperf::params::RoceVersion;
    if !soft_support::is_root() {
        eprintln!("skipped: needs root for network namespaces and AF_PACKET");
        return;
    }
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = soft_support::NetnsPair::up(&["--mtu", "9000"]);
    let open = || SoftEndpoint::open(veth_packet_cfg(RoceVersion::V1)).unwrap();
    let mut a = pair.in_ns('a', open);
    let mut b = pair.in_ns('b', open);
    connect(&mut a, &mut b);
    let (rw, rr) = (remote(&b, 0, 0), remote(&b, 0, 512 * 1024));
    traffic(&mut a, &mut b, 5, rw, rr);
    ALLOCS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    traffic(&mut a, &mut b, 50, rw, rr);
    COUNTING.store(false, Ordering::Relaxed);
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        0,
        "allocations on the AF_PACKET datapath"
    );
}
