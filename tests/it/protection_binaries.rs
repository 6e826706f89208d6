//! Memory protection through the binaries (issue 33): a running `roce_write_bw` or `roce_read_bw`
//! server (`--transport soft -d lo`) is sent a forged WRITE, READ or atomic with a bad rkey or an
//! address past its region, with the PSN it expects and a correct ICRC, from its client's address
//! and port while the client is stopped. It must answer with NAK remote access error (AETH syndrome
//! 0x62, what IBA prescribes for an R_Key or bounds violation of every one of these requests) for
//! that PSN, change not one byte of the region, and end its run naming the request (defect 5):
//! exit 1, its source, PSN, rkey, address and the NAK on stderr and in its `--json`'s `test.error`.
//! `soft_protection.rs` checks the same on an endpoint in this process.
//!
//! How the test plays the client, and why:
//! - The server's header gives each queue pair's QPN, rkey and VAddr, and the client's QPN and
//!   first PSN. The client is stopped (SIGSTOP) once the run is going, so the region is quiet.
//! - The PSN the server expects: a WRITE with the PSN before the client's first is a duplicate,
//!   which the responder acknowledges with the PSN before the one it expects. (A PSN far ahead
//!   would draw a PSN-sequence NAK carrying it too, but only when no such NAK is outstanding, which
//!   a loss in the run may have left.)
//! - The region's host address: the soft transport's VAddr is the address a peer names, not a host
//!   address (every queue pair's is 0x100000000000), so the test WRITEs a random marker to the
//!   region's first 64 bytes and another to its last 64 (both acknowledged: the forging is sound
//!   and the region's length is the one `bench::Layout` gives), and finds the one place in the
//!   server's writable memory that holds the first at its start and the second at its end (the
//!   receive batch holds copies of each, but not a region's length apart).
//! - A queue pair that refused a request ends the run within tens of milliseconds and frees the
//!   region, so the server is traced (ptrace) while the forged request goes out and stopped at the
//!   system call that sends its answer; the region and the 64 bytes after it are read there.
//! - The atomics go to a write_bw server: every soft region grants WRITE, READ and atomics
//!   whatever the test, and write_bw's region length is `bench::Layout`'s (atomic_bw's follows
//!   its operation slots).
//! - The client, resumed, fails too (exit 1) and says "remote access error", in one of two ways
//!   that depend on a race it cannot see (see the end of the test).

mod forger;
mod tracee;

use crate::common::{Proc, free_port, one_at_a_time, schema, skip_unless, spawn};
use crate::soft_support::is_root;
use forger::{Forger, Request};
use tracee::Traced;

use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::Duration;

use roceperf::bench::Layout;
use roceperf::wire::{AethKind, IbRepr, Opcode};

/// The runs busy-poll a core each: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The message size of the runs: one packet at lo's MTU, so the responder is never mid-message.
const SIZE: u64 = 4096;

/// The forged request.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Write,
    Read,
    /// CmpSwap whose compare value is what the word holds, so that executing it would change it.
    CompareSwap,
    FetchAdd,
}

/// What is wrong with it.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The rkey of the server's other queue pair: a key that exists, but not for this one.
    Rkey,
    /// The right rkey; WRITE and READ: 64 bytes from 8 before the region's end (a partial write
    /// would show in the region's last 8 bytes); atomics, always 8 aligned bytes: the 8 just past.
    Bounds,
}

/// One queue pair's line of the perftest-style header (`local address: ... QPN ... PSN ... RKey
/// ... VAddr ...`).
#[derive(Clone, Copy, Debug)]
struct QpLine {
    qpn: u32,
    psn: u32,
    rkey: u32,
    vaddr: u64,
}

/// The header's lines that start with `prefix`, in order.
fn qp_lines(stdout: &str, prefix: &str) -> Vec<QpLine> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix(prefix))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |name: &str| {
                let i = f.iter().position(|w| *w == name).unwrap() + 1;
                u64::from_str_radix(f[i].trim_start_matches("0x"), 16).unwrap()
            };
            QpLine {
                qpn: hex("QPN") as u32,
                psn: hex("PSN") as u32,
                rkey: hex("RKey") as u32,
                vaddr: hex("VAddr"),
            }
        })
        .collect()
}

/// 64 bytes nothing else in the server holds: `tag` and this process's id under a fresh random
/// hash key.
fn marker(tag: u8) -> Vec<u8> {
    use std::hash::{BuildHasher, RandomState};
    let s = RandomState::new();
    (0..8u8)
        .flat_map(|i| s.hash_one((tag, i, std::process::id())).to_le_bytes())
        .collect()
}

/// The answer to the request just sent, with 10 s to come (a loaded host).
fn answer(wire: &Forger, what: &str) -> (IbRepr, Vec<u8>) {
    wire.answer(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("{what}: the server did not answer"))
}

/// A server and its client, running; whichever is left when the test ends early (a failed
/// assertion) is killed, so a stopped client never outlives its test. Killed, not waited for:
/// a server that crashed under ptrace was reaped by the tracer, and a second panic while one
/// unwinds would abort every test.
struct Run {
    server: Option<Proc>,
    client: Option<Proc>,
}

impl Drop for Run {
    fn drop(&mut self) {
        for p in [self.server.take(), self.client.take()]
            .into_iter()
            .flatten()
        {
            // SAFETY: kill(2) on a child this test started and has not reaped (a server the
            // tracer reaped is taken out first), so the pid is still its own.
            unsafe { libc::kill(p.pid() as libc::pid_t, libc::SIGKILL) };
        }
    }
}

impl Run {
    /// Starts a `test` server and client on 127.0.`net`.1 and .2 with two queue pairs, the server
    /// writing `--json` to `json`; returns once the run goes.
    fn start(test: &str, net: u8, json: &str) -> Run {
        let port = free_port().to_string();
        let size = SIZE.to_string();
        let both = [
            "-d", "lo", "-q", "2", "-s", &size, "-D", "60", "--no-gso", "-p", &port,
        ];
        let (srv, cli) = (format!("127.0.{net}.1"), format!("127.0.{net}.2"));
        let mut s = vec!["--bind", srv.as_str(), "--cpu", "0", "--json", json];
        s.extend_from_slice(&both);
        let mut run = Run {
            server: Some(spawn(test, &s)),
            client: None,
        };
        assert!(
            run.server().wait_stdout("Waiting for client", 20),
            "server up"
        );
        let mut c = vec!["--bind", cli.as_str(), "--cpu", "1"];
        c.extend_from_slice(&both);
        c.push("127.0.0.1");
        run.client = Some(spawn(test, &c));
        assert!(run.client().wait_stdout("#bytes", 30), "the run started");
        run
    }

    fn server(&self) -> &Proc {
        self.server.as_ref().unwrap()
    }

    fn client(&self) -> &Proc {
        self.client.as_ref().unwrap()
    }
}

/// What the server's header says of the queue pair attacked, its neighbour and the client's end.
struct Target {
    q: QpLine,
    other: QpLine,
    client: QpLine,
}

impl Target {
    fn from_header(out: &str) -> Target {
        let (ours, peer) = (
            qp_lines(out, "local address:"),
            qp_lines(out, "remote address:"),
        );
        assert!(ours.len() == 2 && peer.len() == 2, "two queue pairs: {out}");
        Target {
            q: ours[0],
            other: ours[1],
            client: peer[0],
        }
    }
}

/// The PSN queue pair `t.q` expects next: a WRITE with the PSN before the client's first is a
/// duplicate, acknowledged with the PSN before the one expected.
fn expected_psn(wire: &Forger, t: &Target) -> u32 {
    let (q, psn) = (t.q, t.client.psn.wrapping_sub(1));
    wire.send(&forger::write(q.qpn, psn, q.vaddr, q.rkey, &[0; 8]));
    let (ack, _) = answer(wire, "a duplicate WRITE");
    assert_eq!(
        (ack.bth.opcode, ack.bth.dest_qp),
        (Opcode::RC_ACKNOWLEDGE, t.client.qpn),
        "the answer to a duplicate WRITE: {ack:?}"
    );
    (ack.bth.psn + 1) & 0xff_ffff
}

/// WRITEs a marker to the first and to the last 64 bytes of `t.q`'s region of `len` bytes from
/// `psn` on, each acknowledged, and finds the region in the server's memory: its host address.
fn locate_region(wire: &Forger, t: &Target, psn: &mut u32, len: usize, pid: u32) -> u64 {
    let q = t.q;
    let (first, last) = (marker(1), marker(2));
    for (offset, m) in [(0, &first), (len - 64, &last)] {
        let va = q.vaddr + offset as u64;
        wire.send(&forger::write(q.qpn, *psn, va, q.rkey, m));
        let (ack, _) = answer(wire, "a marker WRITE");
        let acked = ack
            .aeth
            .is_some_and(|a| matches!(a.kind(), AethKind::Ack { .. }));
        assert_eq!(
            (ack.bth.opcode, ack.bth.psn, acked),
            (Opcode::RC_ACKNOWLEDGE, *psn, true),
            "the marker WRITE at offset {offset} of {len} bytes: {ack:?}"
        );
        *psn = (*psn + 1) & 0xff_ffff;
    }
    tracee::find_region(pid, &first, &last, len)
}

/// The forged request at `psn`, and the rkey and address it names; `region` is the region's
/// bytes, `len` long.
fn forge(
    op: Op,
    fault: Fault,
    t: &Target,
    psn: u32,
    region: &[u8],
    len: usize,
) -> (Request, u32, u64) {
    let q = t.q;
    let end = q.vaddr + len as u64;
    let (va, rkey) = match (fault, op) {
        (Fault::Rkey, _) => {
            assert_ne!(t.other.rkey, q.rkey, "the two queue pairs' rkeys");
            (q.vaddr + 64, t.other.rkey)
        }
        (Fault::Bounds, Op::Write | Op::Read) => (end - 8, q.rkey),
        (Fault::Bounds, _) => (end, q.rkey),
    };
    // The word at offset 64 as the responder compares it: in host order.
    let word = u64::from_ne_bytes(region[64..72].try_into().unwrap());
    let req = match op {
        Op::Write => forger::write(q.qpn, psn, va, rkey, &[0xee; 64]),
        Op::Read => forger::read(q.qpn, psn, va, rkey, 64),
        Op::CompareSwap => forger::atomic(q.qpn, psn, va, rkey, !word, Some(word)),
        Op::FetchAdd => forger::atomic(q.qpn, psn, va, rkey, 0x0101_0101_0101_0101, None),
    };
    (req, rkey, va)
}

/// (a) The answer on the wire: an Acknowledge to the client's queue pair for the forged PSN with
/// AETH syndrome 0x62, and nothing else (no READ data, no atomic's original value, no second).
fn assert_nakked(wire: &Forger, t: &Target, psn: u32, what: &str) {
    let (nak, payload) = answer(wire, what);
    let aeth = nak
        .aeth
        .unwrap_or_else(|| panic!("{what}: no AETH in {nak:?}"));
    assert_eq!(
        (nak.bth.opcode, nak.bth.dest_qp, nak.bth.psn, aeth.syndrome),
        (Opcode::RC_ACKNOWLEDGE, t.client.qpn, psn, 0x62),
        "{what}: {nak:?}"
    );
    assert!(
        payload.is_empty() && nak.atomic_ack_eth.is_none(),
        "{what}: {nak:?}"
    );
    assert!(
        wire.answer(Duration::from_millis(300)).is_none(),
        "{what}: a second answer"
    );
}

fn forged_request_to_a_running_server(op: Op, fault: Fault, net: u8) {
    if skip_unless(
        is_root(),
        "needs root: a raw IP socket, ptrace and /proc/<pid>/mem",
    ) {
        return;
    }
    let _one = one_at_a_time(&ONE_AT_A_TIME);
    let what = match fault {
        Fault::Rkey => format!("a forged {op:?} with another queue pair's rkey"),
        Fault::Bounds => format!("a forged {op:?} past the region's end"),
    };
    let test = if op == Op::Read {
        "read_bw"
    } else {
        "write_bw"
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("server.json");
    let mut run = Run::start(test, net, json.to_str().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    run.client().signal(libc::SIGSTOP);
    // What the client sent before it stopped reaches the server and is answered.
    std::thread::sleep(Duration::from_millis(300));
    let t = Target::from_header(&run.server().stdout_now());
    let cli = Ipv4Addr::new(127, 0, net, 2);
    let wire = Forger::open(cli, Ipv4Addr::new(127, 0, net, 1));
    wire.drain();
    let mut psn = expected_psn(&wire, &t);
    let pid = run.server().pid();
    let len = Layout::for_size(SIZE).buffer_len();
    let at = locate_region(&wire, &t, &mut psn, len, pid);
    // The region and the 64 bytes after it, which no request may reach either.
    let before = tracee::read_mem(pid, at, len + 64);
    let (forged, rkey, va) = forge(op, fault, &t, psn, &before, len);
    let traced = Traced::seize(pid);
    wire.send(&forged);
    if let Err(end) = traced.until_it_answers() {
        // Reaped by the tracer: its pid is no longer this test's to signal.
        let stderr = run.server.take().map(|p| p.stderr_now());
        panic!(
            "{what}: the server {end} instead of answering\n{}",
            stderr.unwrap_or_default()
        );
    }
    let after = tracee::read_mem(pid, at, len + 64);
    traced.detach();

    // (b) Not one byte changed.
    if let Some(i) = before.iter().zip(&after).position(|(b, a)| b != a) {
        panic!("{what}: byte {i} changed (the region is {len} bytes, then 64 past it)");
    }
    assert_nakked(&wire, &t, psn, &what);

    // How the server ends: exit 1, the request named (defect 5), on stderr and in its JSON.
    let s = run
        .server
        .take()
        .unwrap()
        .wait(30, "the server whose queue pair refused");
    let opcode = match op {
        Op::Write => "RC_RDMA_WRITE_ONLY",
        Op::Read => "RC_RDMA_READ_REQUEST",
        Op::CompareSwap => "RC_COMPARE_SWAP",
        Op::FetchAdd => "RC_FETCH_ADD",
    };
    let named = [
        format!(
            "queue pair 0 (QPN {:#08x}), whose peer is {cli}:4791",
            t.q.qpn
        ),
        format!("refused {opcode} at PSN {psn:#08x}"),
        format!("rkey {rkey:#010x}, address {va:#x}"),
        "NAK remote access error (syndrome 0x62)".to_string(),
    ];
    s.assert_ended(
        1,
        &named.each_ref().map(String::as_str),
        &format!("{what}: the server"),
    );
    let doc = schema::assert_valid_file("result", &json);
    let error = &doc["test"]["error"];
    let message = error["message"].as_str().unwrap_or_default();
    for part in &named {
        assert!(
            message.contains(part.as_str()),
            "{what}: test.error lacks {part:?}: {error}"
        );
    }
    assert_eq!(
        (error["exit_code"].as_i64(), error["failed"].as_str()),
        (Some(1), Some("test")),
        "{error}"
    );
    // The counters then: the one NAK remote access, the forged request's.
    let naks = &doc["test"]["counters"]["naks_sent"];
    assert_eq!(naks["remote_access"], 1, "{what}: {naks}");

    // The client, resumed, fails its run too (exit 1), and what it can say is the NAK: the
    // server sent it to the client's queue pair for a PSN the client had not yet sent. Resumed,
    // the client first transmits what it had posted, so whether that PSN is one it has sent by the
    // time it reads the NAK is a race it cannot see: either the NAK ends one of its WRITEs
    // ("remote access error: the peer rejected the rkey, address range or access rights"), or it
    // is kept as a NAK for a PSN never sent and named when its requests go unanswered ("the peer
    // answered PSN ..., which this side had not sent, with NAK remote access error").
    let client = run.client.take().unwrap();
    client.signal(libc::SIGCONT);
    let c = client.wait(60, "the client, resumed");
    c.assert_ended(1, &["remote access error"], &format!("{what}: the client"));
}

#[test]
fn a_forged_write_with_a_bad_rkey_is_nakked_named_and_writes_nothing() {
    forged_request_to_a_running_server(Op::Write, Fault::Rkey, 61);
}

#[test]
fn a_forged_write_past_the_region_is_nakked_and_writes_nothing() {
    forged_request_to_a_running_server(Op::Write, Fault::Bounds, 62);
}

#[test]
fn a_forged_read_with_a_bad_rkey_is_nakked_and_returns_nothing() {
    forged_request_to_a_running_server(Op::Read, Fault::Rkey, 63);
}

#[test]
fn a_forged_read_past_the_region_is_nakked_and_returns_nothing() {
    forged_request_to_a_running_server(Op::Read, Fault::Bounds, 64);
}

#[test]
fn a_forged_compare_swap_with_a_bad_rkey_is_nakked_and_changes_nothing() {
    forged_request_to_a_running_server(Op::CompareSwap, Fault::Rkey, 65);
}

#[test]
fn a_forged_fetch_add_past_the_region_is_nakked_and_changes_nothing() {
    forged_request_to_a_running_server(Op::FetchAdd, Fault::Bounds, 66);
}
