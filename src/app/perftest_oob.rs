//! `--oob perftest`: perftest's out-of-band dialect as a [`Dialect`], so the peer may be an `ib_*` tool.
//!
//! The exchanges are [`crate::oob::perftest`]'s: its session decides their order, and this adapter
//! turns each of its actions into the session loop's. Differences from roceperf's own dialect, all
//! because a perftest peer does them this way: no parameter check beyond what perftest exchanges (its
//! report's size and iterations), no warm-up, no results exchange except perftest's bandwidth report (a
//! passive WRITE/READ server prints the client's figures from it; a READ latency server prints none, as
//! ib_read_lat's server), and the key records advertise the target half of each buffer, so the peer's
//! WRITEs land where our drivers look.

use super::Error;
use super::comm_link;
use super::endpoints::{Described, setup_error};
use super::measure::{self, SizeRun, combine};
use super::notes::Note;
use super::plan::Plan;
use super::rdma_cm;
use super::report::print_waiting;
use super::session::{self, Action, CmConnect, Dialect, Link};
use crate::bench::affinity::Pinned;
use crate::oob::HostPort;
use crate::oob::perftest::{
    self, BwReport, KeyRecord, OobStream, PerftestChannel, PerftestError, ScriptOptions, Session,
    SessionConfig, SysData, Timeouts,
};
use crate::params::{ConnType, DEFAULT_QKEY, Metric, Role, RunMode, TestKind};
use crate::results::{Measured, SizeResult};
use crate::stats::BandwidthStats;
use crate::transport::cm::CmPeer;
use crate::transport::{ConnInfo, RemoteAddr};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Runs the whole test against a perftest-dialect peer on an opened endpoint.
pub(crate) fn run<E: Described>(plan: &Plan, pinned: &Pinned, mut ep: E) -> Result<(), Error> {
    if plan.rdma_cm {
        return run_rdma_cm(plan, pinned, ep);
    }
    let outcome = tcp_stream(plan)
        .and_then(|stream| Perftest::open(plan, &ep, channel(plan, stream)))
        .and_then(|mut dialect| session::drive(plan, pinned, &mut dialect, &mut ep));
    session::explain_outcome(plan, &ep, outcome)
}

/// `-R`: perftest's messages ride a queue pair the CM connects first (perftest's
/// `establish_connection` with `use_rdma_cm`), on the endpoint's extra, last queue pair.
fn run_rdma_cm<E: Described>(plan: &Plan, pinned: &Pinned, mut ep: E) -> Result<(), Error> {
    let comm = plan.qps as usize;
    let peer = match comm_connect(plan, &mut ep, comm) {
        Ok(p) => p,
        Err(e) => return session::explain_outcome(plan, &ep, Err(e)),
    };
    plan.output.verbose(|| {
        format!(
            "out-of-band queue pair connected through the CM to {} (QPN {:#x})",
            peer.ip, peer.qpn
        )
    });
    let (mut link, stream) = match comm_link::link(ep, comm) {
        Ok(l) => l,
        Err(e) => return Err(setup_error(plan, e)),
    };
    let outcome = Perftest::open(plan, &link, channel(plan, stream)).and_then(|mut dialect| {
        dialect.cm_server = Some(peer.ip);
        session::drive(plan, pinned, &mut dialect, &mut link)
    });
    session::explain_outcome(plan, &link, outcome)
}

/// Connects queue pair `comm` to the peer's message queue pair through the CM: the client to the
/// server's address and -p, the server by listening there (waiting as long as perftest's does).
fn comm_connect<E: Described>(plan: &Plan, ep: &mut E, comm: usize) -> Result<CmPeer, Error> {
    let (server, wait) = match (&plan.host, plan.role) {
        (Some(host), Role::Client) => (Some(resolve(plan, host)?), Some(plan.connect_timeout)),
        _ => {
            print_waiting(plan);
            (None, None)
        }
    };
    let peers = rdma_cm::connect(plan, ep, comm..comm + 1, server, None, wait, false)?;
    peers
        .into_iter()
        .next()
        .ok_or_else(|| Error::Perftest(PerftestError::Misuse("the CM connected nothing".into())))
}

/// The server's address (`-R` names the peer by IP address; a name is looked up, IPv6 with --ipv6).
fn resolve(plan: &Plan, host: &str) -> Result<IpAddr, Error> {
    let found = (host, plan.port)
        .to_socket_addrs()
        .map_err(|source| {
            Error::Perftest(PerftestError::Io {
                step: format!("-R: looking up {host}"),
                source,
            })
        })?
        .map(|a| a.ip())
        .find(|ip| ip.is_ipv6() == plan.device.ipv6);
    found.ok_or_else(|| {
        Error::Perftest(PerftestError::Unsupported(format!(
            "-R: {host} has no {} address",
            if plan.device.ipv6 { "IPv6" } else { "IPv4" }
        )))
    })
}

/// The TCP connection of perftest's usual exchange: connected (client) or accepted (server).
fn tcp_stream(plan: &Plan) -> Result<TcpStream, Error> {
    Ok(match &plan.host {
        Some(host) if plan.role == Role::Client => {
            perftest::connect(HostPort::new(host, plan.port), plan.connect_timeout)?
        }
        _ => {
            print_waiting(plan);
            perftest::accept(SocketAddr::from((Ipv4Addr::UNSPECIFIED, plan.port)))?
        }
    })
}

/// perftest's channel over `stream`, with the plan's timeouts.
fn channel<S: OobStream>(plan: &Plan, stream: S) -> PerftestChannel<S> {
    let timeouts = Timeouts {
        run: Some(plan.io_timeout + Duration::from_secs(60)),
        ..Timeouts::default()
    };
    let mut chan = PerftestChannel::new(stream, plan.role == Role::Client, timeouts);
    chan.limit_setup(plan.handshake_timeout());
    chan
}

/// perftest's dialect over a connected stream.
struct Perftest<'p, S: OobStream> {
    plan: &'p Plan,
    session: Session<S>,
    /// `-R`: the server's address (the client connects the data queue pairs there).
    cm_server: Option<IpAddr>,
    /// `-R`: the peer's data queue pairs as the CM connected them.
    cm_peers: Vec<CmPeer>,
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
    /// Bidirectional: this side's and the peer's figures of the row just settled.
    parts: Option<(SizeResult, SizeResult)>,
}

impl<'p, S: OobStream> Perftest<'p, S> {
    /// Starts the session over a connected channel with our key records.
    fn open<E: Described>(
        plan: &'p Plan,
        ep: &E,
        chan: PerftestChannel<S>,
    ) -> Result<Perftest<'p, S>, Error> {
        let client = plan.role == Role::Client;
        let script = ScriptOptions {
            size: plan.max_size(),
            all_sizes: plan.all_sizes,
            bidirectional: plan.bidirectional,
            num_qps: plan.qps as usize,
            duration: plan.mode.is_duration(),
            // UD: perftest's -a stops at the MTU; the plan's sweep was fitted to ours.
            sweep_max: if plan.connection == ConnType::Ud {
                plan.max_size()
            } else {
                1 << 23
            },
            rdma_cm: plan.rdma_cm,
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
        let mut session = Session::new(chan, &cfg, Some(KeyRecord::from_conn_info(&local)))?;
        session.announce_run(plan.test_params().run_length());
        let passive = !client
            && !plan.bidirectional
            && match plan.test.metric {
                Metric::Bandwidth => plan.test.verb.is_one_sided(),
                Metric::Latency => plan.test.verb.reads_back(),
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
        let run_role = match (plan.test == TestKind::WRITE_LAT, plan.role) {
            (true, Role::Client) => Role::Server,
            (true, Role::Server) => Role::Client,
            (false, role) => role,
        };
        Ok(Perftest {
            plan,
            session,
            cm_server: None,
            cm_peers: Vec::new(),
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
            parts: None,
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
        let mut peer = peer.conn_info(plan.max_size(), plan.transport);
        // perftest exchanges neither: its queue pairs are of the -c both sides were given, and every UD
        // queue pair of it uses the one Q_Key 0x11111111 (with -R, rdma_cm's UDP port space's).
        peer.connection = plan.connection;
        let qkey = if plan.rdma_cm {
            crate::transport::cm::RDMA_UDP_QKEY
        } else {
            DEFAULT_QKEY
        };
        peer.qkey = (plan.connection == ConnType::Ud).then_some(qkey);
        let mut notes = vec![Note::PerftestPeer {
            version: version.clone(),
        }];
        if plan.rdma_cm {
            rdma_cm::adopt(plan, &mut peer, &self.cm_peers, &mut notes);
        }
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
            notes,
            connected: format!("connected to perftest {version} peer"),
            cm: plan.rdma_cm.then_some(CmConnect::Done),
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
    fn settle(&mut self, size: u64, mine: Option<SizeResult>) -> Option<SizeResult> {
        let plan = self.plan;
        let theirs = self
            .session
            .peer_report()
            .filter(|t| t.size == size && plan.test.metric == Metric::Bandwidth)
            .map(|t| from_report(plan, &t));
        match (mine, theirs) {
            (Some(m), Some(t)) if plan.bidirectional => {
                self.parts = Some((m.clone(), t.clone()));
                Some(combine(m, &t, false))
            }
            (Some(m), _) => Some(m),
            (None, t) => t,
        }
    }
}

impl<S: OobStream> Dialect for Perftest<'_, S> {
    fn next<E: Described>(&mut self, ep: &mut E) -> Result<Action, Error> {
        if let Some(a) = self.queue.pop_front() {
            return Ok(a);
        }
        loop {
            let action = match self.held.take() {
                Some(a) => a,
                // -R: the channel moves the endpoint itself while it waits for the peer.
                None => {
                    let session = &mut self.session;
                    let next = ep.lend(|| session.next());
                    next.map_err(|e| self.session_error(e))?
                }
            };
            if matches!(
                action,
                perftest::Action::Run { .. } | perftest::Action::Finished
            ) && let Some((size, mine)) = self.pending.take()
                && self.connected
                && let Some(r) = self.settle(size, mine)
            {
                self.held = Some(action);
                return Ok(Action::Row(Box::new(r)));
            }
            match action {
                perftest::Action::NeedLocalKeys { .. } => {
                    let keys = KeyRecord::from_conn_info(&self.local);
                    self.session.set_local_keys(keys)?;
                }
                perftest::Action::Connect => return self.connect(),
                perftest::Action::CmConnect => {
                    let plan = self.plan;
                    let server = self.cm_server.filter(|_| plan.role == Role::Client);
                    let wait = Some(plan.connect_timeout);
                    // perftest's UD requester tells its QPN in a first datagram where its server
                    // needs it (latency tests and -b).
                    let hello = plan.connection == ConnType::Ud
                        && (plan.test.metric == Metric::Latency || plan.bidirectional);
                    let qps = 0..plan.qps as usize;
                    self.cm_peers = rdma_cm::connect(plan, ep, qps, server, None, wait, hello)?;
                }
                perftest::Action::CmDisconnect => {
                    rdma_cm::disconnect(self.plan, ep, 0..self.plan.qps as usize);
                }
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
                        marked: false,
                        // perftest's loop is its own: ours signals every post against it.
                        signal_every: measure::lat_signal_every(self.plan, None),
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
                        return Ok(Action::Row(Box::new(from_report(self.plan, &t))));
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

    fn parts(&mut self) -> Option<(SizeResult, SizeResult)> {
        self.parts.take()
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
        lost: None,
    }
}
