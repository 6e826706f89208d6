//! The datapath promise, checked: once connected and warmed up, posting work and polling
//! (receive, engine, timers, framing, ICRC, transmit, completions) allocates nothing, on either
//! backend. The test binary's counting allocator (`alloc_counter`) sees every allocation of this thread.

use crate::alloc_counter;
use crate::soft_support;
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{
    Completion, CompletionStatus, Endpoint, RecvRequest, RemoteAddr, SendOp,
};
use soft_support::endpoints::{connect, free_port, remote, udp_cfg, veth_packet_cfg, wr};

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
        alloc_counter::watch();
        traffic(&mut a, &mut b, 50, rw, rr);
        let n = alloc_counter::stop();
        assert_eq!(n, 0, "{n} allocations on the datapath (gso {gso})");
        assert!(a.counters().tx_packets > 50 * (4 * 16 + 1 + 1));
    }
}

#[test]
fn steady_state_packet_datapath_allocates_nothing() {
    use roceperf::params::RoceVersion;
    if crate::common::skip_unless(
        soft_support::is_root(),
        "needs root for network namespaces and AF_PACKET",
    ) {
        return;
    }
    let pair = soft_support::NetnsPair::up(&["--mtu", "9000"]);
    let open = || SoftEndpoint::open(veth_packet_cfg(RoceVersion::V1)).unwrap();
    let mut a = pair.in_ns('a', open);
    let mut b = pair.in_ns('b', open);
    connect(&mut a, &mut b);
    let (rw, rr) = (remote(&b, 0, 0), remote(&b, 0, 512 * 1024));
    traffic(&mut a, &mut b, 5, rw, rr);
    alloc_counter::watch();
    traffic(&mut a, &mut b, 50, rw, rr);
    assert_eq!(
        alloc_counter::stop(),
        0,
        "allocations on the AF_PACKET datapath"
    );
}

/// Issue 17: the UC and UD engines keep the promise too. Each round: UC a 16 KiB WRITE and a SEND of
/// `size`, UD a datagram of `size`, into a receive posted for it; polled until both sides complete.
#[test]
fn steady_state_uc_and_ud_datapaths_allocate_nothing() {
    use roceperf::params::ConnType;
    let port = free_port("127.0.13.5");
    for (conn, size) in [(ConnType::Uc, 4000u32), (ConnType::Ud, 1024)] {
        let open = |ip| {
            SoftEndpoint::open(SoftConfig {
                connection: conn,
                ..udp_cfg(ip, port)
            })
            .unwrap()
        };
        let (mut a, mut b) = (open("127.0.13.5"), open("127.0.13.6"));
        connect(&mut a, &mut b);
        let rw = (conn == ConnType::Uc).then(|| remote(&b, 0, 0));
        let round = |a: &mut SoftEndpoint, b: &mut SoftEndpoint| {
            let mut buf = [Completion::EMPTY; 32];
            b.post_recv(
                0,
                &RecvRequest {
                    wr_id: 7,
                    offset: 300_000,
                    len: 8192,
                },
            )
            .unwrap();
            let mut sends = 1;
            if let Some(rw) = rw {
                a.post_send(0, &wr(1, SendOp::Write, 0, 16_384, Some(rw)))
                    .unwrap();
                sends += 1;
            }
            a.post_send(0, &wr(2, SendOp::Send, 0, size, None)).unwrap();
            let (mut na, mut nb) = (0, 0);
            let mut spins = 0u64;
            while na < sends || nb < 1 {
                na += a.poll_cq(&mut buf).unwrap();
                let n = b.poll_cq(&mut buf).unwrap();
                for c in &buf[..n] {
                    assert_eq!(c.status, CompletionStatus::Success);
                }
                nb += n;
                spins += 1;
                assert!(
                    spins < 50_000_000,
                    "{conn} traffic stalled (a lost datagram?)"
                );
            }
        };
        for _ in 0..5 {
            round(&mut a, &mut b);
        }
        alloc_counter::watch();
        for _ in 0..50 {
            round(&mut a, &mut b);
        }
        let n = alloc_counter::stop();
        assert_eq!(n, 0, "{n} allocations on the {conn} datapath");
        assert_eq!(
            b.counters().unreliable.messages_received as usize,
            55 * (1 + rw.is_some() as usize)
        );
    }
}
