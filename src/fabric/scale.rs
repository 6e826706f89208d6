//! The arithmetic of a big run, checked rather than guessed: [`simulate`] drives rank 0's real
//! scheduler over n ranks that answer every job at once (counting rounds, messages and bytes, and
//! rank 0's memory), and [`measure_rendezvous`] times the real TCP rendezvous of n ranks in threads.

use super::args::Leg;
use super::cell::{Cell, Grid};
use super::coordinator::Coordinator;
use super::driver::{Driver, Member, MemberState, Output, Plan};
use super::job::{Job, PairRun, ToWorker};
use super::rules::Rules;
use super::schedule::{Pattern, Step};
use crate::orchestrate::control::{self, Hello, Outcome, Side, ToDriver};
use crate::params::TestKind;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

/// What a simulated run of n ranks took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleReport {
    /// Ranks.
    pub n: usize,
    /// Rounds of the schedule.
    pub rounds: usize,
    /// Steps (a round runs twice, once per direction).
    pub steps: usize,
    /// Most pairs running at once.
    pub max_concurrent: usize,
    /// Whether every step had disjoint pairs.
    pub disjoint: bool,
    /// Directed pair tests run.
    pub pair_tests: u64,
    /// Rank 0 → ranks messages (jobs, welcome, finish); pings come on top, one per rank every 5 s.
    pub messages_out: u64,
    /// Ranks → rank 0 messages (hellos, job outcomes).
    pub messages_in: u64,
    /// Bytes of the job messages rank 0 sends.
    pub bytes_out: u64,
    /// Bytes of the outcome messages with their result JSON (the size of one real result is assumed).
    pub bytes_in: u64,
    /// Rank 0's resident estimate: cells, members, running tests, per-rank connection buffers.
    pub rank0_bytes: u64,
    /// Of which: the cells (n² per leg and test).
    pub cell_bytes: u64,
    /// Bytes of the pair records spooled to disk (fabric.json's pairs), never held in memory.
    pub spool_bytes: u64,
}

/// Reader thread stack and buffers rank 0 keeps per rank.
pub(crate) const PER_CONNECTION: u64 = 64 * 1024 + 2 * 8 * 1024;

fn fake_result(gbps: f64) -> serde_json::Value {
    serde_json::json!({"schema": "roceperf.result", "results": [
        {"size_bytes": 65536, "iterations": 5000, "bandwidth": {"avg_gbps": gbps, "peak_gbps": gbps, "msg_rate_mpps": gbps / 0.524}}]})
}

/// Bytes of one message as a JSON line.
fn line_len<T: serde::Serialize>(msg: &T) -> u64 {
    serde_json::to_vec(msg).map_or(0, |v| v.len() as u64 + 1)
}

/// A rank's hello as a job of `n` ranks would send it.
fn sample_hello(n: usize) -> Hello {
    let params = [
        ("tests", "write_bw"),
        ("--pattern", "all"),
        ("--size", "1M"),
        ("--iters", "5000"),
        ("--port", "18515"),
    ];
    Hello {
        protocol: control::PROTOCOL.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        rank: n - 1,
        size: n,
        params: params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        host: format!("node{:04}", n - 1),
        addr: None,
        device: Some("mlx5_0".into()),
        pid: 4_000_000,
        cores: Some(64),
    }
}

/// (cells, everything) rank 0 holds for `n` ranks and `phases` (leg, test) matrices.
fn memory(n: usize, phases: usize, members_bytes: u64, running: usize) -> (u64, u64) {
    let cells = phases as u64 * (n * n) as u64 * std::mem::size_of::<Option<Cell>>() as u64;
    let running = (running * 2 * std::mem::size_of::<Outcome>() * 2) as u64;
    let total = cells
        + members_bytes
        + running
        + n as u64 * PER_CONNECTION
        + std::mem::size_of::<Grid>() as u64;
    (cells, total)
}

/// The all-pairs schedule of `n` ranks, with its rounds, whether every step's pairs are disjoint, and
/// the most pairs of one step.
fn schedule(n: usize) -> (Vec<Step>, usize, bool, usize) {
    let steps = Pattern::AllPairs.steps(n).expect("schedule");
    let rounds = steps.iter().map(|s| s.round).collect::<BTreeSet<_>>().len();
    let disjoint = steps.iter().all(|s| {
        let mut seen = BTreeSet::new();
        s.pairs
            .iter()
            .all(|p| seen.insert(p.client) && seen.insert(p.server))
    });
    let max_concurrent = steps.iter().map(|s| s.pairs.len()).max().unwrap_or(0);
    (steps, rounds, disjoint, max_concurrent)
}

/// The same figures from the schedule and the protocol alone, without running the scheduler: what
/// [`simulate`] checks at a size a test can afford, for sizes it cannot (`retests` flagged pairs).
pub fn estimate(n: usize, retests: u64, result_bytes: u64) -> ScaleReport {
    let (steps, rounds, disjoint, max_concurrent) = schedule(n);
    let pair_tests = steps.iter().map(|s| s.pairs.len() as u64).sum::<u64>() + retests;
    let job = Job {
        id: 2 * pair_tests,
        run: PairRun {
            test: "write_bw".into(),
            leg: Leg::AsGiven,
        },
        side: Side::Client,
        port: Some(18515 + n as u16),
        peer: n - 1,
        server_addr: Some("10.0.255.255".into()),
        impair: None,
        timeout_ms: 60_000,
    };
    let done = |client: bool| {
        let outcome = Outcome {
            exit_code: Some(0),
            error: None,
            result: None,
            elapsed_ms: 1000,
        };
        line_len(&ToDriver::Done {
            job: 2 * pair_tests,
            outcome,
        }) + if client { result_bytes } else { 0 }
    };
    let members_bytes = n as u64 * (std::mem::size_of::<Member>() + 8 + 12 + 8) as u64;
    let (cell_bytes, rank0_bytes) = memory(n, 1, members_bytes, n / 2);
    let record = PairRecordSize::line(n) + result_bytes;
    ScaleReport {
        n,
        rounds,
        steps: steps.len(),
        max_concurrent,
        disjoint,
        pair_tests,
        messages_out: 2 * pair_tests + 2 * n as u64,
        messages_in: 2 * pair_tests + n as u64,
        bytes_out: 2 * pair_tests * line_len(&ToWorker::Job(job)),
        bytes_in: n as u64 * line_len(&ToDriver::Hello(sample_hello(n)))
            + pair_tests * (done(true) + done(false)),
        rank0_bytes,
        cell_bytes,
        spool_bytes: pair_tests * record,
    }
}

/// The size of a pair record line without its result.
struct PairRecordSize;

impl PairRecordSize {
    fn line(n: usize) -> u64 {
        let rec = super::driver::PairRecord {
            leg: Leg::AsGiven,
            test: "write_bw",
            round: n - 2,
            attempt: 1,
            alone: false,
            client: n - 1,
            server: n - 2,
            client_host: format!("node{:04}", n - 1),
            server_host: format!("node{:04}", n - 2),
            port: 18515 + n as u16,
            status: super::cell::Status::Ok,
            error: None,
            client_exit: Some(0),
            server_exit: Some(0),
            elapsed_ms: 1000,
            result: None,
            victim: false,
        };
        line_len(&rec)
    }
}

/// Runs rank 0's scheduler for `n` ranks over `write_bw`, every job answered at once, rank `slow`'s
/// pairs at 60 % of the others' bandwidth, `result_bytes` standing for one real result JSON.
pub fn simulate(n: usize, slow: Option<usize>, result_bytes: u64) -> ScaleReport {
    let (steps, rounds, disjoint, max_concurrent) = schedule(n);
    let plan = Plan {
        n,
        legs: vec![Leg::AsGiven],
        tests: vec![TestKind::from_name("write_bw").expect("test")],
        steps: steps.clone(),
        serial: false,
        retest: true,
        rules: Rules::default(),
        base_port: 18515,
        timeouts: vec![Duration::from_secs(60)],
        grace: Duration::from_secs(15),
        impair: Vec::new(),
        victim: None,
    };
    let members: Vec<Member> = (0..n)
        .map(|rank| Member {
            rank,
            host: format!("node{rank:04}"),
            addr: format!("10.0.{}.{}", rank / 256, rank % 256),
            device: Some("mlx5_0".into()),
            cores: Some(64),
            state: MemberState::Present,
        })
        .collect();
    let members_bytes: u64 = members
        .iter()
        .map(|m| (std::mem::size_of::<Member>() + m.host.len() + m.addr.len() + 8) as u64)
        .sum();
    let mut d = Driver::new(plan, members);
    let hello_bytes = line_len(&ToDriver::Hello(sample_hello(n)));
    let (mut out_msgs, mut in_msgs, mut out_bytes, mut in_bytes) =
        (2 * n as u64, n as u64, 0u64, n as u64 * hello_bytes);
    let mut spool = 0u64;
    let mut pair_tests = 0u64;
    let mut max_running = 0usize;
    let (fast, slower) = (fake_result(100.0), fake_result(60.0));
    d.start(Duration::ZERO);
    let mut jobs: Vec<(usize, u64, bool)> = Vec::new();
    loop {
        while let Some(o) = d.poll_output() {
            match o {
                Output::Send(rank, ToWorker::Job(job)) => {
                    out_msgs += 1;
                    out_bytes += serde_json::to_vec(&ToWorker::Job(job.clone()))
                        .map_or(0, |v| v.len() as u64 + 1);
                    let is_slow = slow.is_some_and(|s| s == rank || s == job.peer);
                    jobs.push((rank, job.id, is_slow && job.side == Side::Client));
                }
                Output::Send(..) => out_msgs += 1,
                Output::Record(rec) => {
                    pair_tests += 1;
                    let mut rec = *rec;
                    rec.result = None;
                    spool += line_len(&rec) + result_bytes;
                }
                Output::Lost(..) => {}
            }
        }
        if d.is_finished() {
            break;
        }
        max_running = max_running.max(jobs.len() / 2);
        for (rank, id, is_slow) in std::mem::take(&mut jobs) {
            in_msgs += 1;
            let client = id % 2 == 1;
            let outcome = Outcome {
                exit_code: Some(0),
                error: None,
                result: client.then(|| {
                    if is_slow {
                        slower.clone()
                    } else {
                        fast.clone()
                    }
                }),
                elapsed_ms: 1000,
            };
            let mut bare = outcome.clone();
            bare.result = None;
            in_bytes += line_len(&ToDriver::Done {
                job: id,
                outcome: bare,
            }) + if client { result_bytes } else { 0 };
            d.on_done(Duration::ZERO, rank, id, outcome);
        }
    }
    let (_, phases) = d.finish();
    let (cell_bytes, rank0_bytes) = memory(n, phases.len(), members_bytes, max_running);
    ScaleReport {
        n,
        rounds,
        steps: steps.len(),
        max_concurrent,
        disjoint: disjoint && max_running <= n / 2,
        pair_tests,
        messages_out: out_msgs,
        messages_in: in_msgs,
        bytes_out: out_bytes,
        bytes_in: in_bytes,
        rank0_bytes,
        cell_bytes,
        spool_bytes: spool,
    }
}

/// Times the real rendezvous of `n` ranks in threads on loopback: rank 0 listening, every rank
/// connecting and saying hello, rank 0 checking them and answering Welcome and Finish (no tests).
pub fn measure_rendezvous(n: usize) -> std::io::Result<Duration> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    let hello = |rank: usize| Hello {
        protocol: control::PROTOCOL.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        rank,
        size: n,
        params: BTreeMap::from([("tests".to_owned(), String::new())]),
        host: "localhost".into(),
        addr: Some(super::job::loopback_addr(
            super::args::DEFAULT_LOOPBACK_BASE,
            rank,
        )),
        device: Some("lo".into()),
        pid: std::process::id(),
        cores: Some(2),
    };
    let start = Instant::now();
    let coord = Coordinator::new(listener, n, hello(0), Duration::from_secs(30));
    let ranks: Vec<_> = (0..n)
        .map(|rank| {
            let h = hello(rank);
            std::thread::spawn(move || -> std::io::Result<u8> {
                let s = super::connect("127.0.0.1", port, Duration::from_secs(30))
                    .map_err(std::io::Error::other)?;
                let mut w = std::io::BufWriter::new(s.try_clone()?);
                control::send(&mut w, &ToDriver::Hello(h))?;
                let mut r = std::io::BufReader::new(s);
                loop {
                    match control::recv::<ToWorker, _>(&mut r)? {
                        Some(ToWorker::Finish { code }) => return Ok(code),
                        Some(_) => {}
                        None => return Err(std::io::Error::other("closed")),
                    }
                }
            })
        })
        .collect();
    let plan = Plan {
        n,
        legs: vec![],
        tests: vec![],
        steps: vec![],
        serial: false,
        retest: false,
        rules: Rules::default(),
        base_port: 18515,
        timeouts: vec![],
        grace: Duration::from_secs(1),
        impair: vec![],
        victim: None,
    };
    let finished = coord.run(plan, &mut ()).map_err(std::io::Error::other)?;
    for t in ranks {
        t.join()
            .map_err(|_| std::io::Error::other("rank thread panicked"))??;
    }
    let all = finished
        .driver
        .members()
        .iter()
        .all(|m| m.state == MemberState::Present);
    if !all {
        return Err(std::io::Error::other("not every rank joined"));
    }
    Ok(start.elapsed())
}
