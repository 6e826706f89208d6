//! Randomised workloads over lossy, duplicating, reordering, corrupting links: every message is
//! delivered exactly once, in order, byte-identical, and completions match work requests one to one.
//!
//! Each run is fixed by its seed; failures print it. Replay one with `RC_SEED=<seed>`, soak with
//! `RC_SOAK_SEEDS=<n>` (default 8 per loss rate).

use crate::rc_harness;

use rc_harness::*;
use roceperf::params::Recovery;
use roceperf::transport::soft::rc::{MemoryTable, Qp, QpConfig};
use roceperf::transport::soft::sim::{LinkConfig, SimPair, SimRng};
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, RemoteAddr, SendOp, SendRequest,
};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Send,
    SendImm,
    Write,
    WriteImm,
    Read,
    FetchAdd(u64),
    CompareSwap,
}

/// One operation and where its bytes live on each side.
#[derive(Clone, Copy, Debug)]
struct Op {
    kind: Kind,
    len: u32,
    /// Offset in the requester's buffer (source, or destination for READ/atomics).
    local: u64,
    /// Offset in the responder's buffer (destination, or source for READ, or the atomic word).
    remote: u64,
}

/// Requests one side issues, planned before the run.
struct Plan {
    ops: Vec<Op>,
}

const COUNTER: u64 = 0; // offset of the shared fetch-add counter in each responder buffer
const COUNTER_START: u64 = 1_000_000;

fn plan(rng: &mut SimRng, pmtu: u32, n: usize, buf: u64) -> (Plan, u64) {
    let mut local = 0u64;
    let mut remote = 64u64; // after the counter
    let mut ops = Vec::new();
    for _ in 0..n {
        let kind = match rng.below(10) {
            0 | 1 => Kind::Send,
            2 => Kind::SendImm,
            3 | 4 => Kind::Write,
            5 => Kind::WriteImm,
            6 | 7 => Kind::Read,
            8 => Kind::FetchAdd(rng.below(1000) + 1),
            _ => Kind::CompareSwap,
        };
        let m = u64::from(pmtu);
        let len = match kind {
            Kind::FetchAdd(_) | Kind::CompareSwap => 8,
            _ => match rng.below(8) {
                0 => 0,
                1 => 1,
                2 => m - 1,
                3 => m,
                4 => m + 1,
                5 => rng.below(4 * m),
                _ => rng.below(40_000),
            },
        };
        let a = (len + 7) & !7;
        ops.push(Op {
            kind,
            len: len as u32,
            local,
            remote,
        });
        local += a.max(8);
        remote += a.max(8);
    }
    assert!(local <= buf && remote <= buf);
    (Plan { ops }, remote)
}

fn request(id: u64, op: &Op, peer_va: u64, peer_rkey: u32, base: u64) -> SendRequest {
    let remote = Some(RemoteAddr {
        addr: peer_va + op.remote,
        rkey: peer_rkey,
    });
    let (sop, remote) = match op.kind {
        Kind::Send => (SendOp::Send, None),
        Kind::SendImm => (SendOp::SendWithImm(id as u32 ^ 0xabcd), None),
        Kind::Write => (SendOp::Write, remote),
        Kind::WriteImm => (SendOp::WriteWithImm(id as u32 ^ 0x1234), remote),
        Kind::Read => (SendOp::Read, remote),
        Kind::FetchAdd(v) => (
            SendOp::FetchAdd(v),
            Some(RemoteAddr {
                addr: peer_va + COUNTER,
                rkey: peer_rkey,
            }),
        ),
        Kind::CompareSwap => (
            SendOp::CompareSwap {
                compare: op.remote,
                swap: id,
            },
            remote,
        ),
    };
    SendRequest::new(id, sop, base + op.local, op.len, remote)
}

fn expected_op(k: Kind) -> CompletionOp {
    match k {
        Kind::Send | Kind::SendImm => CompletionOp::Send,
        Kind::Write | Kind::WriteImm => CompletionOp::Write,
        Kind::Read => CompletionOp::Read,
        Kind::FetchAdd(_) => CompletionOp::FetchAdd,
        Kind::CompareSwap => CompletionOp::CompareSwap,
    }
}

fn word(qp: &Qp, off: u64) -> u64 {
    u64::from_ne_bytes(bytes(qp, off as usize, 8).try_into().unwrap())
}

/// How both queue pairs of a workload recover from loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recover {
    /// Go-back-N as rxe: fixed window, the ACK timeout.
    Rxe,
    /// Go-back-N as between roceperf endpoints: the probe after the round trip.
    GbnFast,
    /// The same with the loss-reactive window.
    GbnWindow,
    /// Selective repeat.
    Sr,
}

impl Recover {
    /// Every variant.
    pub(crate) const ALL: [Recover; 4] = [
        Recover::Rxe,
        Recover::GbnFast,
        Recover::GbnWindow,
        Recover::Sr,
    ];

    fn apply(self, cfg: &mut QpConfig) {
        cfg.recovery = match self {
            Recover::Sr => Recovery::Sr,
            _ => Recovery::Gbn,
        };
        cfg.gbn_fast = matches!(self, Recover::GbnFast | Recover::GbnWindow);
        cfg.gbn_loss_window = self == Recover::GbnWindow;
    }
}

/// Runs one seeded workload over links that lose `loss` of their packets; panics naming the seed.
fn run(seed: u64, loss: f64) {
    run_with(seed, LinkConfig::lossy(loss), Recover::Rxe);
}

/// Runs one seeded workload over links configured as `link` (both ways), both queue pairs
/// recovering as `recovery` says; panics naming the seed. Every message is delivered once, in order
/// of completion, byte-identical, and completions match work requests one to one.
pub(crate) fn run_with(seed: u64, link: LinkConfig, recovery: Recover) {
    let (loss, burst) = (link.loss, link.burst);
    let mut rng = SimRng::new(seed);
    let pmtu = [256, 512, 1024, 2048, 4096][rng.below(5) as usize];
    let n = 10 + rng.below(30) as usize;
    let both_ways = rng.chance(0.5);
    const HALF: u64 = 2 << 20; // requester area, then responder area, in each buffer
    let (plan_a, _) = plan(&mut rng, pmtu, n, HALF);
    let (plan_b, _) = if both_ways {
        plan(&mut rng, pmtu, n / 2, HALF)
    } else {
        (Plan { ops: vec![] }, 0)
    };
    let psn_a = if rng.chance(0.3) {
        0xff_ffff - rng.below(200) as u32
    } else {
        rng.below(1 << 24) as u32
    };
    let psn_b = rng.below(1 << 24) as u32;
    let max_rd = 1 + rng.below(8) as u32;

    let mk = |qpn, peer, sp, rp, salt| {
        let mut mem = MemoryTable::new(salt);
        let keys = mem.add_registered(2 * HALF as usize, ALL);
        let mut cfg = QpConfig::new(qpn, peer, sp, rp, keys.lkey);
        cfg.pmtu = pmtu;
        cfg.max_rd_atomic = max_rd;
        cfg.max_dest_rd_atomic = 8;
        recovery.apply(&mut cfg);
        (Qp::new(cfg, mem).unwrap(), keys)
    };
    let (qa, ka) = mk(QPN_A, QPN_B, psn_a, psn_b, 1);
    let (qb, kb) = mk(QPN_B, QPN_A, psn_b, psn_a, 2);
    let mut p = SimPair::new(qa, qb, link.clone(), link, seed);
    let ctx = format!(
        "seed {seed} ({recovery:?}, loss {loss}, PMTU {pmtu}, {n} ops, both ways {both_ways}, psn {psn_a:#x}/{psn_b:#x})"
    );

    // Each side: requester data at [0, HALF), responder data at [HALF, 2*HALF).
    for (qp, fill_seed) in [(&mut p.a, seed), (&mut p.b, !seed)] {
        fill(qp, 0, 2 * HALF as usize, fill_seed);
        let (lkey, off) = (qp.config().local_lkey, (HALF + COUNTER) as usize);
        qp.memory_mut().region_bytes_mut(lkey).unwrap()[off..off + 8]
            .copy_from_slice(&COUNTER_START.to_ne_bytes());
    }
    // Compare-and-swap words start equal to their compare value (the offset), so each swap succeeds once.
    for (plan, qp) in [(&plan_a, &mut p.b), (&plan_b, &mut p.a)] {
        for op in plan
            .ops
            .iter()
            .filter(|o| matches!(o.kind, Kind::CompareSwap))
        {
            let lkey = qp.config().local_lkey;
            let at = (HALF + op.remote) as usize;
            qp.memory_mut().region_bytes_mut(lkey).unwrap()[at..at + 8]
                .copy_from_slice(&op.remote.to_ne_bytes());
        }
    }
    let before_a = bytes(&p.a, 0, 2 * HALF as usize);
    let before_b = bytes(&p.b, 0, 2 * HALF as usize);

    // Receives first (in message order), then the requests.
    for (plan, resp, id0) in [(&plan_a, &mut p.b, 0u64), (&plan_b, &mut p.a, 10_000)] {
        for (i, op) in plan.ops.iter().enumerate() {
            if matches!(op.kind, Kind::Send | Kind::SendImm | Kind::WriteImm) {
                let len = if matches!(op.kind, Kind::WriteImm) {
                    0
                } else {
                    op.len
                };
                resp.post_recv(&recv(id0 + i as u64, HALF + op.remote, len))
                    .unwrap();
            }
        }
    }
    for (i, op) in plan_a.ops.iter().enumerate() {
        p.a.post_send(&request(i as u64, op, kb.va + HALF, kb.rkey, 0))
            .unwrap();
    }
    for (i, op) in plan_b.ops.iter().enumerate() {
        p.b.post_send(&request(10_000 + i as u64, op, ka.va + HALF, ka.rkey, 0))
            .unwrap();
    }

    assert!(
        p.run_idle(3_600_000_000_000),
        "{ctx}: did not settle by t={} ns",
        p.now
    );
    // RC gives up after retry_cnt + 1 unanswered tries. The links' bursts are counted in packets, not
    // time, so one can outlast every retry (requests lost one way, answers the other): then a work
    // request may fail with RetryExceeded, as rxe's would, and there is nothing more to check.
    let tries = u64::from(p.a.config().retry_cnt) + 1;
    if p.ab.stats.longest_loss_run + p.ba.stats.longest_loss_run >= tries
        && p.a_done
            .iter()
            .chain(&p.b_done)
            .any(|c| c.status == CompletionStatus::RetryExceeded)
    {
        return;
    }

    for (plan, req_done, resp_done, req_qp, resp_qp, req_before, resp_before, id0, side) in [
        (
            &plan_a, &p.a_done, &p.b_done, &p.a, &p.b, &before_a, &before_b, 0u64, "A->B",
        ),
        (
            &plan_b, &p.b_done, &p.a_done, &p.b, &p.a, &before_b, &before_a, 10_000, "B->A",
        ),
    ] {
        // Requester completions: one per work request, in posting order, all successful.
        let sends: Vec<&Completion> = req_done
            .iter()
            .filter(|c| {
                c.wr_id >= id0
                    && c.wr_id < id0 + 10_000
                    && !matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm)
            })
            .collect();
        assert_eq!(
            sends.len(),
            plan.ops.len(),
            "{ctx} {side}: {} completions for {} requests",
            sends.len(),
            plan.ops.len()
        );
        let mut counter = COUNTER_START;
        let mut recvs = resp_done.iter().filter(|c| {
            matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm)
                && c.wr_id >= id0
                && c.wr_id < id0 + 10_000
        });
        for (i, (op, c)) in plan.ops.iter().zip(&sends).enumerate() {
            let id = id0 + i as u64;
            assert_eq!(
                (c.wr_id, c.status, c.op, c.byte_len),
                (id, CompletionStatus::Success, expected_op(op.kind), op.len),
                "{ctx} {side}: op {i} {op:?}"
            );
            let (src, dst, len) = (
                op.local as usize,
                (HALF + op.remote) as usize,
                op.len as usize,
            );
            match op.kind {
                Kind::Send | Kind::SendImm | Kind::Write | Kind::WriteImm => {
                    let sent = &req_before[src..src + len];
                    let landed = bytes(resp_qp, dst, len);
                    assert_eq!(
                        crc32fast::hash(sent),
                        crc32fast::hash(&landed),
                        "{ctx} {side}: op {i} {op:?} bytes differ"
                    );
                    if !matches!(op.kind, Kind::Write) {
                        let r = recvs.next().unwrap_or_else(|| {
                            panic!("{ctx} {side}: op {i} has no receive completion")
                        });
                        let imm = match op.kind {
                            Kind::SendImm => Some(id as u32 ^ 0xabcd),
                            Kind::WriteImm => Some(id as u32 ^ 0x1234),
                            _ => None,
                        };
                        assert_eq!(
                            (r.wr_id, r.status, r.byte_len, r.imm),
                            (id, CompletionStatus::Success, op.len, imm),
                            "{ctx} {side}: receive for op {i}"
                        );
                    }
                }
                Kind::Read => {
                    let source = &resp_before[dst..dst + len];
                    assert_eq!(
                        crc32fast::hash(source),
                        crc32fast::hash(&bytes(req_qp, src, len)),
                        "{ctx} {side}: READ op {i} bytes differ"
                    );
                }
                Kind::FetchAdd(v) => {
                    assert_eq!(
                        word(req_qp, op.local),
                        counter,
                        "{ctx} {side}: fetch-add {i} saw the counter out of order or twice"
                    );
                    counter += v;
                }
                Kind::CompareSwap => {
                    assert_eq!(
                        word(req_qp, op.local),
                        op.remote,
                        "{ctx} {side}: compare-swap {i} original"
                    );
                    assert_eq!(
                        word(resp_qp, HALF + op.remote),
                        id,
                        "{ctx} {side}: compare-swap {i} swapped once"
                    );
                }
            }
        }
        assert_eq!(
            word(resp_qp, HALF + COUNTER),
            counter,
            "{ctx} {side}: every add applied exactly once"
        );
        assert!(
            recvs.next().is_none(),
            "{ctx} {side}: a receive completed that no message explains"
        );
    }
    assert_eq!(p.a.outstanding(), (0, 0), "{ctx}");
    assert_eq!(p.b.outstanding(), (0, 0), "{ctx}");
    if std::env::var_os("RC_VERBOSE").is_some() {
        eprintln!(
            "{ctx}: t={}ns links {:?} / {:?}\n  A {:?}\n  B {:?}",
            p.now,
            p.ab.stats,
            p.ba.stats,
            p.a.counters(),
            p.b.counters()
        );
    }
    let total = p.ab.stats.lost + p.ba.stats.lost;
    // Only a check when losing nothing is implausible: with 20 expected runs of losses (a burst is
    // one), e^-20.
    let sent = (p.ab.stats.sent + p.ba.stats.sent) as f64;
    if loss * sent / burst.max(1.0) >= 20.0 {
        assert!(total > 0, "{ctx}: the link was meant to lose packets");
    }
}

fn seeds(base: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("RC_SEED") {
        return vec![s.parse().expect("RC_SEED is a u64")];
    }
    let n: u64 = std::env::var("RC_SOAK_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    (0..n).map(|i| base + i).collect()
}

#[test]
fn exactly_once_in_order_over_one_percent_loss() {
    for seed in seeds(1_000) {
        run(seed, 0.01);
    }
}

#[test]
fn exactly_once_in_order_over_five_percent_loss() {
    for seed in seeds(5_000) {
        run(seed, 0.05);
    }
}

#[test]
fn exactly_once_in_order_over_a_perfect_link() {
    for seed in seeds(9_000).into_iter().take(4) {
        run(seed, 0.0);
    }
}

/// 8 MiB SEND, WRITE and READ at PMTU 4096 over a link that loses `loss` both ways.
fn big_messages(loss: f64, seed: u64) {
    const LEN: usize = 8 << 20;
    let mut s = Setup::new(4096, 2 * LEN);
    s.ab = LinkConfig::lossy(loss);
    s.ba = LinkConfig::lossy(loss);
    s.seed = seed;
    let (mut p, _, kb) = s.build();
    fill(&mut p.a, 0, LEN, seed);
    fill(&mut p.b, LEN, LEN, !seed);
    p.b.post_recv(&recv(1, 0, LEN as u32)).unwrap();
    p.a.post_send(&wr(1, SendOp::Send, 0, LEN as u32, None))
        .unwrap();
    p.a.post_send(&wr(2, SendOp::Write, 0, LEN as u32, at(&kb, LEN as u64)))
        .unwrap();
    p.a.post_send(&wr(
        3,
        SendOp::Read,
        LEN as u64,
        LEN as u32,
        at(&kb, LEN as u64),
    ))
    .unwrap();
    assert!(p.run_idle(3_600_000_000_000), "seed {seed}: did not settle");
    let ids: Vec<_> = p
        .a_done
        .iter()
        .map(|c| (c.wr_id, c.status, c.byte_len))
        .collect();
    let want: Vec<_> = (1..=3)
        .map(|i| (i, CompletionStatus::Success, LEN as u32))
        .collect();
    assert_eq!(ids, want, "seed {seed}");
    assert_eq!(p.b_done.len(), 1, "seed {seed}");
    let sent = crc32fast::hash(&pattern(seed, LEN));
    assert_eq!(
        crc32fast::hash(&bytes(&p.b, 0, LEN)),
        sent,
        "seed {seed}: SEND"
    );
    assert_eq!(
        crc32fast::hash(&bytes(&p.a, LEN, LEN)),
        sent,
        "seed {seed}: WRITE then READ back"
    );
    assert!(
        p.ab.stats.lost + p.ba.stats.lost > 0,
        "seed {seed}: nothing was lost"
    );
}

#[test]
#[ignore = "soak: ~1 min in a debug build; run with --ignored"]
fn eight_mib_messages_over_one_percent_loss() {
    big_messages(0.01, 77);
}

#[test]
#[ignore = "soak: 8 MiB messages over 5% loss (run with --ignored)"]
fn eight_mib_messages_over_five_percent_loss() {
    for seed in seeds(300) {
        big_messages(0.05, seed);
    }
}
