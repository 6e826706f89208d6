//! Two processes, as two hosts would run them: this test binary re-runs itself as the peer
//! (`ROCEPERF_SOFT_CHILD=1`), the two exchange their ConnInfo as JSON over the child's stdin and
//! stdout (standing in for the out-of-band channel), and move real RoCE v2 packets over lo.
//! Also: killing the peer mid-run ends the survivor with a retry-exceeded error.

use crate::soft_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use roceperf::transport::soft::endpoint::SoftEndpoint;
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, ConnInfo, Endpoint, RecvRequest, RemoteAddr, SendOp,
};
use soft_support::endpoints::{pattern, udp_cfg, wr};

const CHILD_ENV: &str = "ROCEPERF_SOFT_CHILD";

/// The peer process: opens its endpoint on the address given in the environment, prints its
/// ConnInfo, reads the parent's, then serves (answers WRITE/READ, takes one SEND) until stdin
/// says DONE, and finally reports whether the bytes it got are the expected ones.
#[test]
#[ignore = "run only as the child of the tests below"]
fn soft_process_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let bind = std::env::var("ROCEPERF_SOFT_BIND").unwrap();
    let mut ep = SoftEndpoint::open(udp_cfg(&bind, 4791)).unwrap();
    ep.buffer_mut(0)[600_000..630_000].copy_from_slice(&pattern(0x42, 30_000));
    println!("INFO {}", serde_json::to_string(&ep.local_info()).unwrap());
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line).unwrap();
    let peer: ConnInfo = serde_json::from_str(line.trim()).unwrap();
    ep.connect(&peer).unwrap();
    ep.post_recv(
        0,
        &RecvRequest {
            wr_id: 5,
            offset: 300_000,
            len: 20_000,
        },
    )
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let done_reader = done.clone();
    std::thread::spawn(move || {
        let mut l = String::new();
        while stdin.read_line(&mut l).is_ok_and(|n| n > 0) {
            if l.trim() == "DONE" {
                done_reader.store(true, Ordering::Relaxed);
            }
            l.clear();
        }
    });
    println!("READY");
    let mut buf = [Completion::EMPTY; 8];
    let mut recv = None;
    while !done.load(Ordering::Relaxed) {
        let n = ep.poll_cq(&mut buf).unwrap();
        if n > 0 {
            recv = Some(buf[0]);
        }
    }
    let ok_write = ep.buffer(0)[..200_000] == pattern(9, 200_000)[..];
    let ok_send = ep.buffer(0)[300_000..310_000] == pattern(9, 10_000)[..];
    let ok_recv = recv.is_some_and(|c| c.op == CompletionOp::Recv && c.byte_len == 10_000);
    println!("RESULT write={ok_write} send={ok_send} recv={ok_recv}");
    println!("COUNTERS {}", ep.counters().to_string().replace('\n', " |"));
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn spawn(bind: &str) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "soft_process::soft_process_child",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_ENV, "1")
            .env("ROCEPERF_SOFT_BIND", bind)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Peer {
            child,
            stdin,
            stdout,
        }
    }

    /// The next line of the child's that starts with `tag`, without the tag.
    fn expect(&mut self, tag: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "child ended before {tag}"
            );
            // libtest may print "test soft_process_child ... " in front of the first line.
            if let Some(at) = line.find(tag) {
                return line[at + tag.len()..].trim().to_string();
            }
        }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }
}

fn connect_to(peer: &mut Peer, bind: &str) -> (SoftEndpoint, ConnInfo) {
    let mut ep = SoftEndpoint::open(udp_cfg(bind, 4791)).unwrap();
    let info: ConnInfo = serde_json::from_str(&peer.expect("INFO ")).unwrap();
    peer.say(&serde_json::to_string(&ep.local_info()).unwrap());
    ep.connect(&info).unwrap();
    peer.expect("READY");
    (ep, info)
}

fn wait(ep: &mut SoftEndpoint, want: usize, limit: Duration) -> Vec<Completion> {
    let mut got = Vec::new();
    let mut buf = [Completion::EMPTY; 8];
    let deadline = Instant::now() + limit;
    while got.len() < want && Instant::now() < deadline {
        let n = ep.poll_cq(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
fn write_send_and_read_between_two_processes_on_lo() {
    let mut peer = Peer::spawn("127.0.10.2");
    let (mut ep, info) = connect_to(&mut peer, "127.0.10.1");
    ep.buffer_mut(0)[..200_000].copy_from_slice(&pattern(9, 200_000));
    let q = &info.qps[0];
    let at = |off: u64| {
        Some(RemoteAddr {
            addr: q.vaddr + off,
            rkey: q.rkey,
        })
    };
    ep.post_send(0, &wr(1, SendOp::Write, 0, 200_000, at(0)))
        .unwrap();
    ep.post_send(0, &wr(2, SendOp::Send, 0, 10_000, None))
        .unwrap();
    ep.post_send(0, &wr(3, SendOp::Read, 400_000, 30_000, at(600_000)))
        .unwrap();
    let got = wait(&mut ep, 3, Duration::from_secs(10));
    assert_eq!(got.len(), 3, "{got:?} {:?}", ep.counters());
    assert!(
        got.iter().all(|c| c.status == CompletionStatus::Success),
        "{got:?}"
    );
    assert!(
        ep.buffer(0)[400_000..430_000] == pattern(0x42, 30_000)[..],
        "READ brought the peer's bytes"
    );
    peer.say("DONE");
    let result = peer.expect("RESULT ");
    assert_eq!(result, "write=true send=true recv=true");
    peer.child.wait().unwrap();
}

#[test]
fn killing_the_peer_mid_run_ends_in_a_clear_error() {
    let mut peer = Peer::spawn("127.0.11.2");
    let mut cfg = udp_cfg("127.0.11.1", 4791);
    cfg.timeout = 8; // ≈1 ms per try keeps the test short
    let mut ep = SoftEndpoint::open(cfg).unwrap();
    let info: ConnInfo = serde_json::from_str(&peer.expect("INFO ")).unwrap();
    peer.say(&serde_json::to_string(&ep.local_info()).unwrap());
    ep.connect(&info).unwrap();
    peer.expect("READY");
    let q = &info.qps[0];
    let rw = Some(RemoteAddr {
        addr: q.vaddr,
        rkey: q.rkey,
    });
    // Stream WRITEs; a few complete, then the peer dies (SIGKILL to the child we started).
    let mut posted = 0;
    let mut completions = Vec::new();
    let mut buf = [Completion::EMPTY; 8];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut killed = false;
    while Instant::now() < deadline {
        while posted - completions.len() < 8 {
            ep.post_send(0, &wr(posted as u64, SendOp::Write, 0, 65_536, rw))
                .unwrap();
            posted += 1;
        }
        let n = ep.poll_cq(&mut buf).unwrap();
        completions.extend_from_slice(&buf[..n]);
        if !killed && completions.len() >= 20 {
            peer.child.kill().unwrap();
            peer.child.wait().unwrap();
            killed = true;
        }
        if buf[..n]
            .iter()
            .any(|c| c.status != CompletionStatus::Success)
        {
            break;
        }
    }
    assert!(
        killed,
        "the peer completed too little before the deadline: {completions:?}"
    );
    let failed = completions
        .iter()
        .find(|c| c.status != CompletionStatus::Success)
        .expect("an error after the kill");
    assert_eq!(failed.status, CompletionStatus::RetryExceeded, "{failed:?}");
    assert!(
        failed
            .status
            .describe()
            .contains("check that it is still running")
    );
}
