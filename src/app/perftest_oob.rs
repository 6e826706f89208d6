//! `--oob perftest`: perftest's out-of-band dialect as a [`Dialect`], so the peer may be an `ib_*` tool.
//!
//! The exchanges are [`crate::oob::perftest`]'s: its session decides their order, and this adapter
//! turns each of its actions into the session loop's. Differences from roceperf's own dialect, all
//! because a perftest peer does them this way: no parameter check beyond what perftest exchanges (its
//! report's size and iterations), no warm-up, no results exchange except perftest's bandwidth report (a
//! passive WRITE/READ server prints the client's figures from it; a READ latency server prints none, as
//! ib_read_lat's server), and the key records advertise the target half of each buffer, so the peer's
//! WRITEs land where our drivers look.

use super::endpoints::Described;
use super::exit::Error;
use super::measure::{SizeRun, combine};
use super::notes::Note;
use super::plan::Plan;
use super::report::print_waiting;
use super::session::{self, Action, Dialect, Link};
use crate::bench::affinity::Pinned;
use crate::oob::HostPort;
use crate::oob::perftest::{
    self, BwReport, KeyRecord, PerftestError, ScriptOptions, Session, SessionConfig, SysData,
    Timeouts,
};
use crate::params::{Metric, Role, RunMode, TestKind, Verb};
use crate::results::{Measured, SizeResult};
use crate::stats::BandwidthStats;
use crate::transport::{ConnInfo, RemoteAddr};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Runs the whole test against a perftest-dialect peer on an opened endpoint.
pub(crate) fn run<E: Described>(plan: &Plan, pinned: &Pinned, mut ep: E) -> Result<(), Error> {
    let outcome = Perftest::open(plan, &ep)
        .and_then(|mut dialect| session::drive(plan, pinned, &mut dialect, &mut ep));
    session::explain_outcome(plan, &ep, outcome)
}

/// perftest's dialect over a connected stream.
struct Perftest<'p> {
    plan: &'p Plan,
    session: Session<TcpStream>,
    /// This side as the key records advertise it.
    local: ConnInfo,
    /// A WRITE/READ server (or READ latency server) that never runs: its peer does all the work.
    passive: bool,
    /// The drivers' part in each run (see [`Perftest::open`]).
    run_role: Role,
    run_mode: RunMode,
    /// Actions to hand out before asking the session again.
    queue: VecDeque<Action>,
    /// A session action waiting behind the row it settled.
    held: Option<perftest::Action>,
    /// The last run's size and this side's own measurement, until the peer's report (if any) is in.
    pending: Option<(u64, Option<SizeResult>)>,
    connected: bool,
    /// The first size has started: from here a peer that closes or falls silent failed the test.
    running: bool,
    /// Duration mode: when this side's run stops.
    deadline: Option<Instant>,
}

impl<'p> Perftest<'p> {
    /// Connects (client) or accepts (server) and starts the session with our key records.
    fn open<E: Described>(plan: &'p Plan, ep: &E) -> Result<Perftest<'p>, Error> {
        let client = plan.role == Role::Client;
        let o = &plan.oob;
        let stream = match &o.host {
            Some(host) if client => {
                perftest::connect(HostPort::new(host, o.port), o.connect_timeout)?
            }
            _ => {
                print_waiting(plan);
                perftest::accept(SocketAddr::from((Ipv4Addr::UNSPECIFIED, o.port)))?
            }
        };
        let timeouts = Timeouts {
            run: Some(o.io_timeout + Duration::from_secs(60)),
            ..Timeouts::default()
        };
        let mut chan = perftest::PerftestChannel::new(stream, client, timeouts);
        chan.limit_setup(o.handshake_timeout);
        let script = ScriptOptions {
            size: plan.max_size(),
            all_sizes: plan.all_sizes,
            bidirectional: plan.bidirectional,
            num_qps: plan.qps as usize,
            duration: plan.mode.is_duration(),
        };
        let mut local = ep.local_info();
        for q in &mut local.qps {
            // The peer addresses our target half: its WRITEs and SENDs land where our drivers look.
            q.vaddr += plan.layout.half;
            q.len = plan.layout.half;
        }
        let cfg = SessionConfig {
            test: plan.test,
            role: plan.role,
            opts: script,
            iters: plan.mode.iterations(),
            sys: SysData::local(),
            mtu: local.mtu,
        };
        let session = Session::new(chan, &cfg, Some(KeyRecord::from_conn_info(&local)))?;
        let passive = !client
            && !plan.bidirectional
            && match plan.test.metric {
                Metric::Bandwidth => plan.test.verb != Verb::Send,
                Metric::Latency => matches!(plan.test.verb, Verb::Read | Verb::Atomic),
            };
        // perftest's latency loops post exactly -n times per side and time the gaps between posts; our
        // driver posts once more to close the last round trip, so it is given one iteration fewer (n
        // posts, n - 1 samples), or a perftest peer would wait for a message that never comes.
        let run_mode = match (plan.test.metric, plan.mode) {
            (Metric::Latency, RunMode::Iterations(n)) => {
                RunMode::Iterations(n.saturating_sub(1).max(1))
            }
            (_, mode) => mode,
        };
        // In ib_write_lat the server makes the first WRITE and the client waits for it (send_lat is the
        // other way round, as ours); a client that wrote first would meet a server that does not look.
        let run_role = match (
            plan.test == TestKind::new(Verb::Write, Metric::Latency),
            plan.role,
        ) {
            (true, Role::Client) => Role::Server,
            (true, Role::Server) => Role::Client,
            (false, role) => role,
        };
        Ok(Perftest {
            plan,
            session,
            local,
            passive,
            run_role,
            run_mode,
            queue: VecDeque::new(),
            held: None,
            pending: None,
            connected: false,
            running: false,
            deadline: None,
        })
    }

    /// The session's `Connect`: the peer from its key records; then every size's buffers readied
    /// before any barrier (sizes only grow, so one preparation per size up front suffices).
    fn connect(&mut self) -> Result<Action, Error> {
        let plan = self.plan;
        let peer = self.session.peer().ok_or_else(|| {
            PerftestError::Misuse("the session connects only after the key round".into())
        })?;
        let version = peer.version.text.clone();
        let peer = peer.conn_info(plan.max_size(), plan.transport);
        self.queue
            .extend(plan.sizes.iter().map(|&size| Action::Prepare { size }));
        self.connected = true;
        Ok(Action::Connect(Box::new(Link {
            remotes: peer
                .qps
                .iter()
                .map(|q| RemoteAddr {
                    addr: q.vaddr,
                    rkey: q.rkey,
                })
                .collect(),
            local: Some(self.local.clone()),
            fallback_device: String::new(),
            warmup: 0,
            notes: vec![Note::PerftestPeer {
                version: version.clone(),
            }],
            connected: format!("connected to perftest {version} peer"),
            peer,
        })))
    }

    /// A session error as the exit code sees it: a peer that closed or fell silent after the test
    /// began failed the test (perftest tells its peer nothing when it fails; it just exits).
    fn session_error(&self, e: PerftestError) -> Error {
        let lost = matches!(
            e,
            PerftestError::PeerClosed { .. }
                | PerftestError::Timeout { .. }
                | PerftestError::ShortMessage { .. }
                | PerftestError::Io { .. }
        );
        if self.running && lost {
            Error::PerftestMidTest(e)
        } else {
            Error::Perftest(e)
        }
    }

    /// The row for one size: ours, the peer's report (a passive server), or both summed (`-b`).
    fn settle(&self, size: u64, mine: Option<SizeResult>) -> Option<SizeResult> {
        let plan = self.plan;
        let theirs = self
            .session
            .peer_report()
            .filter(|t| t.size == size && plan.test.metric == Metric::Bandwidth)
            .map(|t| from_report(plan, &t));
        match (mine, theirs) {
            (Some(m), Some(t)) if plan.bidirectional => Some(combine(m, &t, false)),
            (Some(m), _) => Some(m),
            (None, t) => t,
        }
    }
}

impl Dialect for Perftest<'_> {
    fn next<E: Described>(&mut self, _ep: &mut E) -> Result<Action, Error> {
        if let Some(a) = self.queue.pop_front() {
            return Ok(a);
        }
        loop {
            let action = match self.held.take() {
                Some(a) => a,
                None => self.session.next().map_err(|e| self.session_error(e))?,
            };
            if matches!(
                action,
                perftest::Action::Run { .. } | perftest::Action::Finished
            ) && let Some((size, mine)) = self.pending.take()
                && self.connected
                && let Some(r) = self.settle(size, mine)
            {
                self.held = Some(action);
                return Ok(Action::Row(r));
            }
            match action {
                perftest::Action::NeedLocalKeys { .. } => {
                    let keys = KeyRecord::from_conn_info(&self.local);
                    self.session.set_local_keys(keys)?;
                }
                perftest::Action::Connect => return self.connect(),
                perftest::Action::PostReceives { .. } => return Ok(Action::PostReceives),
                perftest::Action::Run { size } if self.passive => {
                    // Nothing to run on this side (perftest's scripts give a passive side no run).
                    self.running = true;
                    self.pending = Some((size, None));
                }
                perftest::Action::Run { size } => {
                    self.running = true;
                    // perftest gives no "done" on its data path or out of band: in duration mode each
                    // side stops on its own clock (its SIGALRM), so a side that waits for the peer (a
                    // SEND receiver, a latency responder) stops when its -D is up.
                    self.deadline = self
                        .run_mode
                        .duration_secs()
                        .map(|secs| Instant::now() + Duration::from_secs(secs));
                    return Ok(Action::Run(SizeRun {
                        size,
                        role: self.run_role,
                        mode: self.run_mode,
                        warmup: 0,
                    }));
                }
                perftest::Action::AwaitPeer => {
                    // The session waits like this only for a peer that is running a size.
                    self.running |= self.connected;
                    return Ok(Action::AwaitPeer);
                }
                perftest::Action::Finished => {
                    // A passive WRITE/READ server has no run step: its row is the client's report.
                    if self.passive
                        && self.plan.test.metric == Metric::Bandwidth
                        && self.connected
                        && let Some(t) = self.session.peer_report()
                    {
                        self.queue.push_back(Action::Finished);
                        return Ok(Action::Row(from_report(self.plan, &t)));
                    }
                    return Ok(Action::Finished);
                }
            }
        }
    }

    fn measured(&mut self, size: u64, mine: Option<SizeResult>) {
        if self.plan.test.metric == Metric::Bandwidth
            && let Some(Measured::Bandwidth(b)) = mine.as_ref().map(|m| &m.measured)
        {
            self.session.set_report(to_report(self.plan, b));
        }
        self.pending = Some((size, mine));
    }

    fn run_over(&mut self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    fn peer_arrived(&mut self) -> Result<bool, Error> {
        self.session.poll_peer().map_err(|e| self.session_error(e))
    }

    fn serving(&self) -> &'static str {
        "serving the perftest peer"
    }

    fn shows_progress(&self) -> bool {
        false
    }

    fn unconnected(&self) -> Error {
        Error::Perftest(PerftestError::Misuse(
            "the session ended before connecting".into(),
        ))
    }
}

/// Our figures in perftest's report: MiB/s, or Gb/s with --report_gbits, as the peer prints them.
fn to_report(plan: &Plan, b: &BandwidthStats) -> BwReport {
    let unit = |gbps: f64, mibps: f64| {
        if plan.output.report_gbits {
            gbps
        } else {
            mibps
        }
    };
    BwReport {
        size: b.msg_size,
        iters: b.messages,
        bw_peak: unit(
            b.peak_gbps.unwrap_or(b.avg_gbps),
            b.peak_mibps.unwrap_or(b.avg_mibps),
        ),
        bw_avg: unit(b.avg_gbps, b.avg_mibps),
        msg_rate: b.msg_rate_mpps,
    }
}

/// The peer's report as a result row (it carries rates, not times: the time is derived from the average).
fn from_report(plan: &Plan, t: &BwReport) -> SizeResult {
    let gbits = plan.output.report_gbits;
    let gbps = if gbits {
        t.bw_avg
    } else {
        t.bw_avg * 1_048_576.0 * 8.0 / 1e9
    };
    let bits = (t.size * t.iters) as f64 * 8.0;
    let elapsed_ns = if gbps > 0.0 { (bits / gbps) as u64 } else { 0 };
    let peak = (t.bw_peak > 0.0 && t.iters > 0).then(|| {
        let peak_gbps = if gbits {
            t.bw_peak
        } else {
            t.bw_peak * 1_048_576.0 * 8.0 / 1e9
        };
        (t.size as f64 * 8.0) / peak_gbps
    });
    SizeResult {
        size: t.size,
        iterations: t.iters / u64::from(plan.qps.max(1)),
        measured: Measured::Bandwidth(BandwidthStats::compute(t.size, t.iters, elapsed_ns, peak)),
        cpu_util: None,
    }
}
