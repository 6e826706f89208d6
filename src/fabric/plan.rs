//! What rank 0 runs and what it reports: the plan (legs, tests, schedule, rules, timeouts), the ranks
//! as rank 0 knows them, the record of each pair test, and the results of each (leg, test).

use super::args::Leg;
use super::cell::{Cell, Grid, Status};
use super::job::ToWorker;
use super::rules::{Diagnosis, Limit, Rules};
use super::schedule::{Pair, Step};
use crate::params::TestKind;
use serde::Serialize;
use std::time::Duration;

/// What rank 0 knows of a rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Member {
    /// Its rank.
    pub rank: usize,
    /// Its host name (`?` when it never joined).
    pub host: String,
    /// The address peers reach it at.
    pub addr: String,
    /// Its `-d` device.
    pub device: Option<String>,
    /// The cores it may run on, as it said in its hello.
    pub cores: Option<usize>,
    /// Present, never joined, or lost.
    pub state: MemberState,
}

/// Whether a rank takes part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub(crate) enum MemberState {
    /// Joined and answering.
    Present,
    /// Never joined (the reason says how long rank 0 waited).
    Missing(String),
    /// Joined, then died or stopped answering.
    Lost(String),
}

impl Member {
    /// `rank 2 (host cn07, 10.0.0.7)`.
    pub(crate) fn name(&self) -> String {
        if self.host == "?" {
            format!("rank {} (host unknown)", self.rank)
        } else if self.addr == "?" {
            format!("rank {} (expected on {})", self.rank, self.host)
        } else {
            format!("rank {} ({}, {})", self.rank, self.host, self.addr)
        }
    }
}

/// A pair whose sides get `ROCEPERF_IMPAIR` (`ROCEPERF_FABRIC_IMPAIR`, to rehearse the outlier rules),
/// or every test of one rank when `b` is None.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Impair {
    /// One rank of the pair.
    pub a: usize,
    /// The other (None: every pair of `a`).
    pub b: Option<usize>,
    /// The `ROCEPERF_IMPAIR` value.
    pub(crate) spec: String,
}

/// Parses `ROCEPERF_FABRIC_IMPAIR`: `0-1:loss=5%;3:loss=1%` (pair 0–1 both ways; every test of rank 3).
pub(crate) fn parse_impair(text: &str) -> Result<Vec<Impair>, String> {
    let mut out = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || format!("ROCEPERF_FABRIC_IMPAIR entry {entry:?}: use A-B:SPEC or A:SPEC");
        let (ranks, spec) = entry.split_once(':').ok_or_else(bad)?;
        let (a, b) = match ranks.split_once('-') {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                Some(b.trim().parse().map_err(|_| bad())?),
            ),
            None => (ranks.trim().parse().map_err(|_| bad())?, None),
        };
        out.push(Impair {
            a,
            b,
            spec: spec.to_owned(),
        });
    }
    Ok(out)
}

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Ranks in the job.
    pub n: usize,
    /// Transport legs, in order.
    pub legs: Vec<Leg>,
    /// Tests, in order.
    pub tests: Vec<TestKind>,
    /// The schedule.
    pub steps: Vec<Step>,
    /// One pair at a time.
    pub serial: bool,
    /// Retest flagged pairs alone.
    pub retest: bool,
    /// Outlier rules.
    pub rules: Rules,
    /// Pair port = this + the server's rank.
    pub(crate) base_port: u16,
    /// Longest a side may run, per test (same order as `tests`).
    pub timeouts: Vec<Duration>,
    /// Extra time past a job's timeout before its rank counts as lost.
    pub(crate) grace: Duration,
    /// Impaired pairs.
    pub impair: Vec<Impair>,
    /// `--victim`: a latency pair ([`VICTIM_TEST`]) run during each incast step.
    pub(crate) victim: Option<Pair>,
}

/// What a victim pair runs: a latency probe that shares the incast's ports.
pub(crate) const VICTIM_TEST: TestKind = TestKind::WRITE_LAT;

/// One pair test's full outcome, as it goes into fabric.json.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairRecord {
    /// Transport leg.
    pub(crate) leg: Leg,
    /// Test name.
    pub test: &'static str,
    /// Round of the schedule.
    pub round: usize,
    /// 1, or 2 for the retest of a flagged pair.
    pub attempt: u8,
    /// Whether it ran with no other pair at the same time (`--serial` or a retest).
    pub alone: bool,
    /// Client rank (row).
    pub client: usize,
    /// Server rank (column).
    pub server: usize,
    /// Client host.
    pub(crate) client_host: String,
    /// Server host.
    pub(crate) server_host: String,
    /// Out-of-band port.
    pub port: u16,
    /// ok, failed, missing.
    pub status: Status,
    /// What went wrong.
    pub error: Option<String>,
    /// Exit code of the client binary.
    pub(crate) client_exit: Option<i32>,
    /// Exit code of the server binary.
    pub(crate) server_exit: Option<i32>,
    /// Wall time of the client binary, ms.
    pub(crate) elapsed_ms: u64,
    /// The client's full single-run result (results/README.md).
    pub result: Option<serde_json::Value>,
    /// Whether it is the `--victim` latency pair of an incast step.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) victim: bool,
}

/// What the driver asks of the coordinator.
#[derive(Debug, Clone)]
pub(crate) enum Output {
    /// Send a message to a rank.
    Send(usize, ToWorker),
    /// A pair test ended (or was skipped): write it out.
    Record(Box<PairRecord>),
    /// A rank was lost (say so now): the message names it.
    Lost(String),
}

/// The results of one (leg, test).
#[derive(Debug, Clone)]
pub(crate) struct Phase {
    /// Transport leg.
    pub(crate) leg: Leg,
    /// Test.
    pub test: TestKind,
    /// Its cells.
    pub(crate) grid: Grid,
    /// The outlier limit (None when no pair gave a value).
    pub limit: Option<Limit>,
    /// Flagged pairs, (client, server).
    pub flagged: Vec<(usize, usize)>,
    /// Flagged pairs that stayed bad when retested alone (all flagged pairs without retests).
    pub(crate) confirmed: Vec<(usize, usize)>,
    /// Bad hosts and bad pairs, among the confirmed pairs.
    pub(crate) diagnosis: Diagnosis,
    /// `--victim`: its pair and how its latency probe during the incast ended.
    pub(crate) victim: Option<(Pair, Cell)>,
}
