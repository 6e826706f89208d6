//! What one message costs the soft datapath, in a form that does not depend on the machine's load:
//! two `SoftEndpoint`s on lo driven by one thread, in lock step, so no poll ever spins on an empty
//! socket. Under `valgrind --tool=callgrind` the instructions it reports per message are the
//! datapath's own user-space work (the kernel's is not counted); under `strace -c -f` the syscalls
//! per message are exact.
//!
//! `cargo run --release --example soft_datapath_cost -- [write|send|read|bw|idle] [messages] [size]`
//!
//! - `write`, `send`, `read`: a latency ping-pong as roce_*_lat runs it on soft (one message each way per
//!   iteration for WRITE and SEND, a READ and its response for READ), default 2 bytes.
//! - `bw`: a stream of WRITEs (default 64 KiB) with 128 in flight, as roce_write_bw runs it.
//! - `idle`: `messages` polls of each endpoint with nothing in flight: what a busy-polling side
//!   spends per turn while it waits (one receive syscall), which sets how soon it sees a packet.
//!
//! It prints polls, send and receive batches (one syscall each), packets and ACKs per message from
//! the endpoints' counters, the wall time per message: the mean (meaningful only on a quiet machine)
//! and, for the ping-pong modes, the fastest and the median message (the fastest is what the code
//! path costs when nothing else runs in between: compare it with the same syscalls alone), and the
//! CPU time per message, user and system (both sides' work, nothing spent spinning).
//!
//! Across a veth pair instead of lo (`scripts/netns.sh up`, root): `SDC_NETNS=rpa,rpb` opens one
//! endpoint in each namespace on `veth0` (10.77.0.1 and 10.77.0.2), and `SDC_IO=packet`,
//! `SDC_ROCE=v1` pick the AF_PACKET backend and RoCE v1; `SDC_NO_GSO=1` sends RoCE v2 as `--no-gso`
//! does (over AF_PACKET: single frames and the receive ring, as RoCE v1 moves). `SDC_NO_CE=1` opens
//! the endpoints without reading ECN marks (`SoftConfig::read_ce`: on UDP, no IP_RECVTOS control
//! message per datagram, so one-at-a-time receives are `recvfrom` again), to price the CE reading.
//!
//! `SDC_UNTIMED=1` leaves out the per-message clock reads and the sort of their times (about 120
//! instructions a round trip at 20,000, growing with the count and varying with the times measured),
//! so that an instruction count is the datapath's alone: `scripts/instructions.sh` sets it.

use std::time::Instant;

use roceperf::params::{IoKind, RoceVersion};
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, Endpoint, RecvRequest, RemoteAddr, SendOp,
    SendRequest,
};

fn endpoint(dev: &str, ip: &str, port: u16) -> SoftEndpoint {
    let v1 = std::env::var("SDC_ROCE").is_ok_and(|v| v == "v1");
    let mut c = SoftConfig::new(dev, if v1 { RoceVersion::V1 } else { RoceVersion::V2 });
    if std::env::var("SDC_IO").is_ok_and(|v| v == "packet") {
        c.io = IoKind::Packet;
    }
    if std::env::var("SDC_NO_GSO").is_ok_and(|v| v == "1") {
        c.gso = false;
    }
    if std::env::var("SDC_NO_CE").is_ok_and(|v| v == "1") {
        c.read_ce = false;
    }
    if !v1 {
        c.bind = Some(ip.parse().expect("an address"));
    }
    c.udp_port = port;
    c.buffer_len = 1 << 20;
    SoftEndpoint::open(c).expect("an endpoint")
}

/// Moves this thread into network namespace `name` (as `ip netns exec` does).
fn enter_netns(name: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{name}")).expect("the namespace exists");
    // SAFETY: a valid descriptor of a network namespace, for this thread.
    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {name}: {}", std::io::Error::last_os_error());
}

/// User and system CPU seconds of this process so far.
fn cpu_secs() -> (f64, f64) {
    // SAFETY: all-zero is a valid rusage, which the call fills.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a live rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    (t(r.ru_utime), t(r.ru_stime))
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Polls `ep` once; counts completions of each kind and checks their status.
fn poll(ep: &mut SoftEndpoint, polls: &mut u64, sends: &mut u64, recvs: &mut u64) {
    // A few slots, as the latency drivers keep: clearing a large array per poll would be counted.
    let mut comps = [Completion::EMPTY; 4];
    let n = ep.poll_cq(&mut comps).expect("poll");
    *polls += 1;
    for c in &comps[..n] {
        assert_eq!(c.status, CompletionStatus::Success, "{c:?}");
        match c.op {
            CompletionOp::Recv | CompletionOp::RecvWithImm => *recvs += 1,
            _ => *sends += 1,
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "write".into());
    let count: u64 = args.next().map_or(20_000, |a| a.parse().expect("messages"));
    let default_size = if mode == "bw" { 65_536 } else { 2 };
    let size: u32 = args
        .next()
        .map_or(default_size, |a| a.parse().expect("size"));
    let (mut a, mut b) = match std::env::var("SDC_NETNS") {
        Ok(ns) => {
            let (na, nb) = ns.split_once(',').expect("SDC_NETNS=a,b");
            enter_netns(na);
            let a = endpoint("veth0", "10.77.0.1", 4791);
            enter_netns(nb);
            (a, endpoint("veth0", "10.77.0.2", 4791))
        }
        Err(_) => {
            let port = free_port();
            (
                endpoint("lo", "127.0.0.61", port),
                endpoint("lo", "127.0.0.62", port),
            )
        }
    };
    let (ia, ib) = (a.local_info(), b.local_info());
    a.connect(&ib).expect("connect a");
    b.connect(&ia).expect("connect b");
    let half = 1u64 << 19;
    let to_b = RemoteAddr {
        addr: ib.qps[0].vaddr + half,
        rkey: ib.qps[0].rkey,
    };
    let to_a = RemoteAddr {
        addr: ia.qps[0].vaddr + half,
        rkey: ia.qps[0].rkey,
    };
    // The ping-pongs as roce_write_lat and roce_send_lat run on soft: one SEND or WRITE in 16
    // signaled (so acknowledged by the peer, whose ACK retires the unsignaled ones before it too),
    // and the last. READ and the bandwidth stream (64 KiB: one completion per message, as
    // roce_write_bw) signal every one.
    let ping_pong = matches!(mode.as_str(), "write" | "send");
    let signaled = |id: u64| !ping_pong || id % 16 == 15 || id + 1 == count;
    let wr = |id: u64, op, remote| SendRequest {
        signaled: signaled(id),
        ..SendRequest::new(id, op, 0, size, remote)
    };
    // Signaled SENDs or WRITEs each side has posted.
    let mut posted_signaled = 0u64;
    let recv = RecvRequest {
        wr_id: 0,
        offset: half,
        len: size,
    };
    let (mut polls, mut sa, mut ra, mut sb, mut rb) = (0u64, 0u64, 0u64, 0u64, 0u64);
    // Wall time of each ping-pong message (one round trip), in nanoseconds.
    let timed = std::env::var_os("SDC_UNTIMED").is_none_or(|v| v != "1");
    let mut trips: Vec<u64> = Vec::with_capacity(if timed { count as usize } else { 0 });
    let start = Instant::now();
    let cpu0 = cpu_secs();
    match mode.as_str() {
        "write" | "send" => {
            let send = mode == "send";
            let tail = (half + u64::from(size) - 1) as usize;
            if send {
                a.post_recv(0, &recv).expect("recv");
                b.post_recv(0, &recv).expect("recv");
            }
            for i in 0..count {
                let t0 = timed.then(Instant::now);
                let marker = (i + 1) as u8;
                a.buffer_mut(0)[size as usize - 1] = marker;
                let (op, ra_, rb_) = if send {
                    (SendOp::Send, None, None)
                } else {
                    (SendOp::Write, Some(to_b), Some(to_a))
                };
                // Message i stands at a side: its receive completed (SEND), or the marker landed at
                // its target's tail (WRITE).
                let arrived = |ep: &SoftEndpoint, recvd: u64| {
                    if send {
                        recvd > i
                    } else {
                        ep.buffer(0)[tail] == marker
                    }
                };
                a.post_send(0, &wr(i, op, ra_)).expect("post a");
                // b waits for a's message, then answers with its own.
                loop {
                    poll(&mut a, &mut polls, &mut sa, &mut ra);
                    poll(&mut b, &mut polls, &mut sb, &mut rb);
                    if arrived(&b, rb) {
                        break;
                    }
                }
                if send {
                    b.post_recv(0, &recv).expect("recv");
                }
                b.buffer_mut(0)[size as usize - 1] = marker;
                b.post_send(0, &wr(i, op, rb_)).expect("post b");
                loop {
                    poll(&mut b, &mut polls, &mut sb, &mut rb);
                    poll(&mut a, &mut polls, &mut sa, &mut ra);
                    if arrived(&a, ra) {
                        break;
                    }
                }
                if send {
                    a.post_recv(0, &recv).expect("recv");
                }
                posted_signaled += u64::from(signaled(i));
                if let Some(t0) = t0 {
                    trips.push(t0.elapsed().as_nanos() as u64);
                }
            }
            while sa < posted_signaled || sb < posted_signaled {
                poll(&mut a, &mut polls, &mut sa, &mut ra);
                poll(&mut b, &mut polls, &mut sb, &mut rb);
            }
        }
        "read" => {
            for i in 0..count {
                let t0 = timed.then(Instant::now);
                a.post_send(0, &wr(i, SendOp::Read, Some(to_b)))
                    .expect("post");
                while sa <= i {
                    poll(&mut a, &mut polls, &mut sa, &mut ra);
                    poll(&mut b, &mut polls, &mut sb, &mut rb);
                }
                if let Some(t0) = t0 {
                    trips.push(t0.elapsed().as_nanos() as u64);
                }
            }
        }
        "bw" => {
            let mut posted = 0u64;
            while sa < count {
                while posted < count && posted - sa < 128 {
                    a.post_send(0, &wr(posted, SendOp::Write, Some(to_b)))
                        .expect("post");
                    posted += 1;
                }
                poll(&mut a, &mut polls, &mut sa, &mut ra);
                poll(&mut b, &mut polls, &mut sb, &mut rb);
            }
        }
        "idle" => {
            for _ in 0..count {
                poll(&mut a, &mut polls, &mut sa, &mut ra);
                poll(&mut b, &mut polls, &mut sb, &mut rb);
            }
        }
        other => panic!("mode {other}: write, send, read, bw or idle"),
    }
    let elapsed = start.elapsed();
    let cpu1 = cpu_secs();
    let (ka, kb) = (a.counters(), b.counters());
    let per = |v: u64| v as f64 / count as f64;
    let us = |secs: f64| secs * 1e6 / count as f64;
    println!(
        "{mode} {size} B x {count}: {:.2} us/message, CPU user {:.2} + system {:.2} us/message ({:.3} + {:.3} us/KiB); per message: polls {:.2}, send batches {:.2}, receive batches {:.2}, packets {:.2}, ACKs {:.2}",
        us(elapsed.as_secs_f64()),
        us(cpu1.0 - cpu0.0),
        us(cpu1.1 - cpu0.1),
        us(cpu1.0 - cpu0.0) * 1024.0 / f64::from(size),
        us(cpu1.1 - cpu0.1) * 1024.0 / f64::from(size),
        per(polls),
        per(ka.tx_batches + kb.tx_batches),
        per(ka.rx_batches + kb.rx_batches),
        per(ka.tx_packets + kb.tx_packets),
        per(ka.acks_sent + kb.acks_sent),
    );
    if !trips.is_empty() {
        trips.sort_unstable();
        println!(
            "  round trip: fastest {:.2} us, median {:.2} us",
            trips[0] as f64 / 1e3,
            trips[trips.len() / 2] as f64 / 1e3
        );
    }
}
