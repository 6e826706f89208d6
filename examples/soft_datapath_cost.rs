//! What one message costs the soft datapath, in a form that does not depend on the machine's load:
//! two `SoftEndpoint`s on lo driven by one thread, in lock step, so no poll ever spins on an empty
//! socket. Under `valgrind --tool=callgrind` the instructions it reports per message are the
//! datapath's own user-space work (the kernel's is not counted); under `strace -c -f` the syscalls
//! per message are exact.
//!
//! `cargo run --release --example soft_datapath_cost -- [write|send|read|bw] [messages] [size]`
//!
//! - `write`, `send`, `read`: a latency ping-pong as roce_*_lat runs it (one message each way per
//!   iteration for WRITE and SEND, a READ and its response for READ), default 2 bytes.
//! - `bw`: a stream of WRITEs (default 64 KiB) with 128 in flight, as roce_write_bw runs it.
//!
//! It prints polls, syscalls' worth of batches and packets per message from the endpoints' counters,
//! and the wall time per message (meaningful only on a quiet machine).

use std::time::Instant;

use roceperf::params::RoceVersion;
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, Endpoint, RecvRequest, RemoteAddr, SendOp,
    SendRequest,
};

fn endpoint(ip: &str, port: u16) -> SoftEndpoint {
    let mut c = SoftConfig::new("lo", RoceVersion::V2);
    c.bind = Some(ip.parse().expect("an address"));
    c.udp_port = port;
    c.buffer_len = 1 << 20;
    SoftEndpoint::open(c).expect("two addresses on lo")
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
    let port = free_port();
    let (mut a, mut b) = (endpoint("127.0.0.61", port), endpoint("127.0.0.62", port));
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
    let wr = |id, op, remote| SendRequest::new(id, op, 0, size, remote);
    let recv = RecvRequest {
        wr_id: 0,
        offset: half,
        len: size,
    };
    let (mut polls, mut sa, mut ra, mut sb, mut rb) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    match mode.as_str() {
        "write" | "send" => {
            let send = mode == "send";
            let tail = (half + u64::from(size) - 1) as usize;
            if send {
                a.post_recv(0, &recv).expect("recv");
                b.post_recv(0, &recv).expect("recv");
            }
            for i in 0..count {
                let marker = (i + 1) as u8;
                a.buffer_mut(0)[size as usize - 1] = marker;
                let (op, ra_, rb_) = if send {
                    (SendOp::Send, None, None)
                } else {
                    (SendOp::Write, Some(to_b), Some(to_a))
                };
                a.post_send(0, &wr(i, op, ra_)).expect("post a");
                // b waits for a's message, then answers with its own.
                loop {
                    poll(&mut a, &mut polls, &mut sa, &mut ra);
                    poll(&mut b, &mut polls, &mut sb, &mut rb);
                    let arrived = if send {
                        rb > i
                    } else {
                        b.buffer(0)[tail] == marker
                    };
                    if arrived && sb == i {
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
                    let arrived = if send {
                        ra > i
                    } else {
                        a.buffer(0)[tail] == marker
                    };
                    if arrived && sa > i {
                        break;
                    }
                }
                if send {
                    a.post_recv(0, &recv).expect("recv");
                }
            }
            while sb < count {
                poll(&mut a, &mut polls, &mut sa, &mut ra);
                poll(&mut b, &mut polls, &mut sb, &mut rb);
            }
        }
        "read" => {
            for i in 0..count {
                a.post_send(0, &wr(i, SendOp::Read, Some(to_b)))
                    .expect("post");
                while sa <= i {
                    poll(&mut a, &mut polls, &mut sa, &mut ra);
                    poll(&mut b, &mut polls, &mut sb, &mut rb);
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
        other => panic!("mode {other}: write, send, read or bw"),
    }
    let elapsed = start.elapsed();
    let (ka, kb) = (a.counters(), b.counters());
    let per = |v: u64| v as f64 / count as f64;
    println!(
        "{mode} {size} B x {count}: {:.2} us/message; per message: polls {:.2}, send batches {:.2}, receive batches {:.2}, packets {:.2}, ACKs {:.2}",
        elapsed.as_secs_f64() * 1e6 / count as f64,
        per(polls),
        per(ka.tx_batches + kb.tx_batches),
        per(ka.rx_batches + kb.rx_batches),
        per(ka.tx_packets + kb.tx_packets),
        per(ka.acks_sent + kb.acks_sent),
    );
}
