//! Rank 0's scheduler, sans-IO: it walks the plan (legs × tests × steps, then the retests), turns each
//! pair into two jobs, collects both sides' outcomes into cells, and handles lost ranks and timeouts.
//! It never touches a socket or a clock: the coordinator feeds it messages and the time, and sends what
//! it asks, so a 1,024-rank run can be simulated in a test.

pub(crate) use super::plan::{Member, MemberState, PairRecord, Phase, parse_impair};
pub(crate) use super::plan::{Output, Plan, VICTIM_TEST};

use super::args::Leg;
use super::cell::{Cell, Figures, Grid, MatrixMetric, Status};
use super::job::{Job, PairRun, ToWorker};
use super::rules::{self, Diagnosis};
use super::schedule::Pair;
use crate::orchestrate::control::{Outcome, Side};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Main { step: usize, next: usize },
    Retest { next: usize },
}

#[derive(Debug)]
struct Running {
    pair: Pair,
    round: usize,
    attempt: u8,
    alone: bool,
    client_job: u64,
    server_job: u64,
    client: Option<Outcome>,
    server: Option<Outcome>,
    deadline: Duration,
    /// The `--victim` latency pair of an incast step.
    victim: bool,
}

/// The scheduler.
pub(crate) struct Driver {
    plan: Plan,
    members: Vec<Member>,
    phases: Vec<Phase>,
    phase: usize,
    stage: Stage,
    /// Running pair tests by client job id (the server's is the next one).
    running: HashMap<u64, Running>,
    next_job: u64,
    out: VecDeque<Output>,
    done: u64,
    total: u64,
    /// A step gives some rank several pairs (an incast's receiver): each pair's port follows its
    /// client's rank, not its server's, so the receiver's servers listen apart.
    port_by_client: bool,
}

impl Driver {
    /// A driver for `plan` over `members` (one per rank, in rank order).
    pub(crate) fn new(plan: Plan, members: Vec<Member>) -> Driver {
        let mut phases = Vec::new();
        for &leg in &plan.legs {
            for &test in &plan.tests {
                phases.push(Phase {
                    leg,
                    test,
                    grid: Grid::new(plan.n),
                    limit: None,
                    flagged: Vec::new(),
                    confirmed: Vec::new(),
                    diagnosis: Diagnosis::default(),
                    victim: None,
                });
            }
        }
        let per_phase: usize = plan.steps.iter().map(|s| s.pairs.len()).sum();
        let port_by_client = plan.steps.iter().any(|s| {
            let mut servers: Vec<usize> = s.pairs.iter().map(|p| p.server).collect();
            servers.sort_unstable();
            servers.windows(2).any(|w| w[0] == w[1])
        });
        let total = (per_phase * phases.len()) as u64;
        Driver {
            plan,
            members,
            phases,
            phase: 0,
            stage: Stage::Main { step: 0, next: 0 },
            running: HashMap::new(),
            next_job: 1,
            out: VecDeque::new(),
            done: 0,
            total,
            port_by_client,
        }
    }

    /// Starts the run.
    pub(crate) fn start(&mut self, now: Duration) {
        self.advance(now);
    }

    /// The next thing to do, if any.
    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// Whether every pair ran (or was skipped).
    pub(crate) fn is_finished(&self) -> bool {
        self.phase >= self.phases.len() && self.running.is_empty()
    }

    /// When [`Driver::on_tick`] must be called next, at the latest.
    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        self.running.values().map(|r| r.deadline).min()
    }

    /// (pair tests done, pair tests in the plan, what runs now), for a progress bar. Retests are not in
    /// the total.
    pub(crate) fn progress(&self) -> (u64, u64, String) {
        let label = match self.phases.get(self.phase) {
            None => "done".to_owned(),
            Some(p) => {
                let leg = if p.leg == Leg::AsGiven {
                    String::new()
                } else {
                    format!("{} ", p.leg.name())
                };
                match self.stage {
                    Stage::Main { step, .. } => {
                        let round = self
                            .plan
                            .steps
                            .get(step)
                            .or(self.plan.steps.last())
                            .map_or(0, |s| s.round);
                        format!("{leg}{} round {}", p.test.name(), round + 1)
                    }
                    Stage::Retest { .. } => format!("{leg}{} retests", p.test.name()),
                }
            }
        };
        (self.done.min(self.total), self.total, label)
    }

    /// The members as they stand.
    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    /// The phases' results so far.
    pub(crate) fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// A rank reported the end of a job.
    pub(crate) fn on_done(&mut self, now: Duration, rank: usize, job: u64, outcome: Outcome) {
        // Client jobs are odd, their server's the next even id.
        let key = if job % 2 == 1 { job } else { job - 1 };
        let Some(r) = self.running.get_mut(&key) else {
            return; // a cancelled job's late answer
        };
        if r.client_job == job && r.pair.client == rank {
            r.client = Some(outcome);
        } else if r.server_job == job && r.pair.server == rank {
            r.server = Some(outcome);
        } else {
            return;
        }
        if r.client.is_some() && r.server.is_some() {
            let r = self.running.remove(&key).expect("running");
            self.complete(r);
        }
        self.advance(now);
    }

    /// A rank's connection closed or it stopped answering.
    pub(crate) fn on_lost(&mut self, now: Duration, rank: usize, reason: &str) {
        if self.members[rank].state != MemberState::Present {
            return;
        }
        let during = self.progress().2;
        let reason = format!("{reason} (during {during})");
        self.members[rank].state = MemberState::Lost(reason.clone());
        self.out.push_back(Output::Lost(format!(
            "{} was lost: {reason}",
            self.members[rank].name()
        )));
        let mut keys: Vec<u64> = self
            .running
            .iter()
            .filter(|(_, r)| r.pair.client == rank || r.pair.server == rank)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        let name = self.members[rank].name();
        for key in keys {
            let mut r = self.running.remove(&key).expect("running");
            let gone = Outcome::failed(format!("{name} was lost"));
            let (mine, other, other_rank, other_job) = if r.pair.client == rank {
                (&mut r.client, &mut r.server, r.pair.server, r.server_job)
            } else {
                (&mut r.server, &mut r.client, r.pair.client, r.client_job)
            };
            mine.get_or_insert(gone);
            if other.is_none() {
                self.out.push_back(Output::Send(
                    other_rank,
                    ToWorker::Cancel { job: other_job },
                ));
                *other = Some(Outcome::failed(format!(
                    "cancelled: its peer {name} was lost"
                )));
            }
            self.complete(r);
        }
        self.advance(now);
    }

    /// Time passed: a job past its deadline means its rank stopped answering.
    pub(crate) fn on_tick(&mut self, now: Duration) {
        let late: Vec<usize> = self
            .running
            .values()
            .filter(|r| r.deadline <= now)
            .flat_map(|r| {
                let c = r.client.is_none().then_some(r.pair.client);
                let s = r.server.is_none().then_some(r.pair.server);
                c.into_iter().chain(s)
            })
            .collect();
        for rank in late {
            let secs = self.plan.grace.as_secs();
            self.on_lost(
                now,
                rank,
                &format!("no answer {secs} s past a job's timeout (host down or hung)"),
            );
        }
    }

    /// The next round of a watching run (`--watch`): the same plan over the members as they stand (a
    /// rank lost stays lost), its job ids after this round's, so that a late answer of this round is
    /// never taken for one of the next.
    pub(crate) fn next_round(&self) -> Driver {
        let mut next = Driver::new(self.plan.clone(), self.members.clone());
        next.next_job = self.next_job;
        next
    }

    /// Ends the run: the members and the phases' results.
    pub(crate) fn finish(self) -> (Vec<Member>, Vec<Phase>) {
        (self.members, self.phases)
    }

    fn absent(&self, rank: usize) -> Option<String> {
        let m = &self.members[rank];
        match &m.state {
            MemberState::Present => None,
            MemberState::Missing(why) => Some(format!("{} never joined: {why}", m.name())),
            MemberState::Lost(why) => Some(format!("{} was lost: {why}", m.name())),
        }
    }

    fn advance(&mut self, now: Duration) {
        while self.running.is_empty() && self.phase < self.phases.len() {
            let steps = &self.plan.steps;
            match self.stage {
                Stage::Main { step, next } if step < steps.len() => {
                    let s = &steps[step];
                    let (pairs, stage) = if self.plan.serial {
                        let stage = if next + 1 < s.pairs.len() {
                            Stage::Main {
                                step,
                                next: next + 1,
                            }
                        } else {
                            Stage::Main {
                                step: step + 1,
                                next: 0,
                            }
                        };
                        (vec![s.pairs[next]], stage)
                    } else {
                        (
                            s.pairs.clone(),
                            Stage::Main {
                                step: step + 1,
                                next: 0,
                            },
                        )
                    };
                    let (round, alone) = (s.round, self.plan.serial || pairs.len() == 1);
                    self.stage = stage;
                    for p in pairs {
                        self.dispatch(now, p, round, 1, alone);
                    }
                    // The victim probes the incast's ports while its senders run (never with
                    // --serial: args refuses it).
                    if let Some(v) = self.plan.victim {
                        self.dispatch_test(now, v, round, 1, false, true);
                    }
                }
                Stage::Main { .. } => {
                    self.judge();
                    let retest = self.plan.retest && !self.phases[self.phase].flagged.is_empty();
                    if retest {
                        self.stage = Stage::Retest { next: 0 };
                    } else {
                        self.next_phase();
                    }
                }
                Stage::Retest { next } => {
                    let flagged = &self.phases[self.phase].flagged;
                    if next < flagged.len() {
                        let (c, s) = flagged[next];
                        let round = self.phases[self.phase]
                            .grid
                            .get(c, s)
                            .map_or(0, |c| c.round as usize);
                        self.stage = Stage::Retest { next: next + 1 };
                        self.dispatch(
                            now,
                            Pair {
                                client: c,
                                server: s,
                            },
                            round,
                            2,
                            true,
                        );
                    } else {
                        self.next_phase();
                    }
                }
            }
        }
    }

    fn next_phase(&mut self) {
        let p = &mut self.phases[self.phase];
        let metric = MatrixMetric::flagged(p.test);
        // A retest that fails or stays over the limit confirms the flag; one that passes alone says the
        // pair only suffers under the load of a whole round.
        p.confirmed = p
            .flagged
            .iter()
            .copied()
            .filter(|k| match (p.grid.retests.get(k), p.limit) {
                (None, _) => true,
                (Some(r), Some(l)) => r.value(metric).is_none_or(|v| l.breached(v)),
                (Some(_), None) => true,
            })
            .collect();
        p.diagnosis = rules::diagnose(&p.grid, metric, &p.confirmed);
        self.phase += 1;
        self.stage = Stage::Main { step: 0, next: 0 };
    }

    fn judge(&mut self) {
        let p = &mut self.phases[self.phase];
        let metric = MatrixMetric::flagged(p.test);
        // Senders that share a receiver split it: an unequal share is what an incast measures, not a
        // bad link, so no outlier rule judges them.
        p.limit = (!self.port_by_client)
            .then(|| self.plan.rules.limit(&p.grid, metric))
            .flatten();
        p.flagged = p
            .limit
            .map(|l| rules::flagged(&p.grid, &l))
            .unwrap_or_default();
        // Until the retests say otherwise (or when there are none), every flag stands.
        p.confirmed = p.flagged.clone();
        p.diagnosis = rules::diagnose(&p.grid, metric, &p.confirmed);
    }

    fn impair_for(&self, pair: Pair, me: usize) -> Option<String> {
        self.plan
            .impair
            .iter()
            .find(|i| match i.b {
                Some(b) => {
                    (i.a, b) == (pair.client, pair.server) || (b, i.a) == (pair.client, pair.server)
                }
                None => i.a == me,
            })
            .map(|i| i.spec.clone())
    }

    fn dispatch(&mut self, now: Duration, pair: Pair, round: usize, attempt: u8, alone: bool) {
        self.dispatch_test(now, pair, round, attempt, alone, false);
    }

    /// Dispatches a pair of the phase's test, or the victim's latency probe.
    fn dispatch_test(
        &mut self,
        now: Duration,
        pair: Pair,
        round: usize,
        attempt: u8,
        alone: bool,
        victim: bool,
    ) {
        let (leg, phase_test) = (self.phases[self.phase].leg, self.phases[self.phase].test);
        let test = if victim { VICTIM_TEST } else { phase_test };
        let why = self
            .absent(pair.client)
            .or_else(|| self.absent(pair.server));
        if let Some(why) = why {
            let cell = Cell::missing(round, why.clone());
            self.store(pair, attempt, cell, victim);
            let mut rec = self.record(
                pair,
                round,
                attempt,
                alone,
                Status::Missing,
                Some(why),
                None,
                None,
                None,
            );
            mark_victim(&mut rec, victim);
            self.out.push_back(Output::Record(Box::new(rec)));
            return;
        }
        let test_idx = self
            .plan
            .tests
            .iter()
            .position(|t| *t == phase_test)
            .unwrap_or(0);
        let timeout = self
            .plan
            .timeouts
            .get(test_idx)
            .copied()
            .unwrap_or(Duration::from_secs(120));
        let port = self.port(pair);
        let (client_job, server_job) = (self.next_job, self.next_job + 1);
        self.next_job += 2;
        for (side, job_id, me, peer) in [
            (Side::Server, server_job, pair.server, pair.client),
            (Side::Client, client_job, pair.client, pair.server),
        ] {
            let job = Job {
                id: job_id,
                run: PairRun {
                    test: test.name().to_owned(),
                    leg,
                },
                side,
                port: Some(port),
                peer,
                server_addr: (side == Side::Client).then(|| self.members[pair.server].addr.clone()),
                impair: self.impair_for(pair, me),
                timeout_ms: timeout.as_millis() as u64,
            };
            self.out.push_back(Output::Send(me, ToWorker::Job(job)));
        }
        self.running.insert(
            client_job,
            Running {
                pair,
                round,
                attempt,
                alone,
                client_job,
                server_job,
                client: None,
                server: None,
                deadline: now + timeout + self.plan.grace,
                victim,
            },
        );
    }

    /// The pair's out-of-band port: the base port plus its server's rank, or its client's when a
    /// step gives a server several pairs.
    fn port(&self, pair: Pair) -> u16 {
        let rank = if self.port_by_client {
            pair.client
        } else {
            pair.server
        };
        self.plan.base_port.saturating_add(rank as u16)
    }

    fn store(&mut self, pair: Pair, attempt: u8, cell: Cell, victim: bool) {
        if victim {
            self.phases[self.phase].victim = Some((pair, cell));
            return;
        }
        let grid = &mut self.phases[self.phase].grid;
        if attempt == 1 {
            grid.set(pair.client, pair.server, cell);
            self.done += 1;
        } else {
            grid.retests.insert((pair.client, pair.server), cell);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        pair: Pair,
        round: usize,
        attempt: u8,
        alone: bool,
        status: Status,
        error: Option<String>,
        client: Option<&Outcome>,
        server: Option<&Outcome>,
        result: Option<serde_json::Value>,
    ) -> PairRecord {
        let p = &self.phases[self.phase];
        PairRecord {
            leg: p.leg,
            test: p.test.name(),
            round,
            attempt,
            alone,
            client: pair.client,
            server: pair.server,
            client_host: self.members[pair.client].host.clone(),
            server_host: self.members[pair.server].host.clone(),
            port: self.port(pair),
            status,
            error,
            client_exit: client.and_then(|o| o.exit_code),
            server_exit: server.and_then(|o| o.exit_code),
            elapsed_ms: client.map_or(0, |o| o.elapsed_ms),
            result,
            victim: false,
        }
    }

    fn complete(&mut self, mut r: Running) {
        let test = if r.victim {
            VICTIM_TEST
        } else {
            self.phases[self.phase].test
        };
        let (client, server) = (
            r.client.take().unwrap_or_else(no_answer),
            r.server.take().unwrap_or_else(no_answer),
        );
        let figures = client
            .result
            .as_ref()
            .and_then(|v| Figures::from_result(v, test));
        let mut errors = Vec::new();
        for (side, rank, o) in [
            ("server", r.pair.server, &server),
            ("client", r.pair.client, &client),
        ] {
            if o.exit_code != Some(0) {
                let what = o
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("exit code {:?}", o.exit_code));
                errors.push(format!("{side} rank {rank}: {what}"));
            }
        }
        if errors.is_empty() && figures.is_none() {
            errors.push(format!(
                "client rank {}: no result in its JSON",
                r.pair.client
            ));
        }
        let (status, error) = if errors.is_empty() {
            (Status::Ok, None)
        } else {
            (Status::Failed, Some(errors.join("; ")))
        };
        let cell = Cell {
            status,
            round: r.round as u32,
            figures: figures.unwrap_or_default(),
            error: error.clone().map(String::into_boxed_str),
        };
        self.store(r.pair, r.attempt, cell, r.victim);
        let mut client = client;
        let result = client.result.take();
        let mut rec = self.record(
            r.pair,
            r.round,
            r.attempt,
            r.alone,
            status,
            error,
            Some(&client),
            Some(&server),
            result,
        );
        mark_victim(&mut rec, r.victim);
        self.out.push_back(Output::Record(Box::new(rec)));
    }
}

/// Names a victim's record by its own test.
fn mark_victim(rec: &mut PairRecord, victim: bool) {
    if victim {
        rec.test = VICTIM_TEST.name();
        rec.victim = true;
    }
}

fn no_answer() -> Outcome {
    Outcome::failed("no answer".into())
}

#[cfg(test)]
mod tests;
