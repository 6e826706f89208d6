//! roceperf's own out-of-band dialect as a [`Dialect`].
//!
//! The parameter check, the connection details, a barrier before every size, the results exchange
//! after it, and a last barrier.

use super::Error;
use super::endpoints::Described;
use super::measure::{self, SizeRun, combine};
use super::notes::Warning;
use super::plan::Plan;
use super::report::print_waiting;
use super::session::{Action, CmConnect, Dialect, Link};
use crate::oob::{self, Channel, Step};
use crate::orchestrate::signals;
use crate::params::{Recovery, Role, TransportKind};
use crate::results::{SizeReport, SizeResult};
use std::net::{IpAddr, SocketAddr};

/// Where the peer's RoCE packets come from, for `-R`: the address its description names, else its
/// GID's (an IPv4-mapped or global one), else the out-of-band channel's.
fn data_ip(peer: &crate::transport::ConnInfo, oob_peer: IpAddr) -> IpAddr {
    peer.addr
        .as_deref()
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .map(|s| s.ip())
        .or_else(|| (!peer.gid.is_zero() && !peer.gid.is_link_local()).then(|| peer.gid.to_ip()))
        .unwrap_or(oob_peer)
}

/// Where the dialect is in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Swapping connection details.
    Connect,
    /// Size `i`: ready the buffers.
    Prepare(usize),
    /// Size `i`: post receives.
    Receives(usize),
    /// Size `i`: the barrier, then run.
    Barrier(usize),
    /// Size `i`: send this side's results (the client first).
    Results(usize),
    /// Size `i`: the peer's results.
    Collect(usize),
    /// Every size settled: the session writes the result files, so that a write that fails is told
    /// to the peer in place of the last barrier.
    Conclude,
    /// The last barrier: neither side closes its data connections before the other has its results.
    Close,
    /// Over.
    Done,
}

/// roceperf's dialect over an open [`Channel`].
pub(crate) struct Roceperf<'p> {
    plan: &'p Plan,
    chan: Channel,
    phase: Phase,
    mine: Option<SizeResult>,
    /// The loss recovery the peer asked for (go-back-N until its parameters say otherwise).
    peer_recovery: Recovery,
    /// This side's results went out before the peer's arrived (a server stopped by a signal).
    sent_early: bool,
    /// Bidirectional: this side's and the peer's results of the row just settled.
    parts: Option<(SizeResult, SizeResult)>,
    /// Latency tests: one SEND or WRITE in this many is signaled, agreed from both transports.
    signal_every: u32,
    /// The peer's report of the size running, read while this side still ran or served it (to learn
    /// whether a signal stopped the peer), or what reading it failed with; [`Phase::Collect`] takes it.
    early: Option<Result<SizeReport, oob::Error>>,
    /// The signal that stopped the peer early, once its report said so.
    peer_signal: Option<&'static str>,
    /// The signal this side had received when its part of the size ended: what its report says,
    /// decided once, so that both sides settle the size alike.
    cut: Option<&'static str>,
}

impl<'p> Roceperf<'p> {
    /// Connects (client) or accepts (server) the out-of-band channel.
    pub(crate) fn open(plan: &'p Plan) -> Result<Roceperf<'p>, Error> {
        let chan = match (&plan.role, &plan.host) {
            (Role::Client, Some(host)) => Channel::connect(
                host,
                plan.port,
                plan.connect_timeout,
                plan.io_timeout,
                plan.handshake_timeout(),
                |server| {
                    Warning::Retrying {
                        server: server.to_string(),
                        secs: plan.connect_timeout.as_secs(),
                    }
                    .emit()
                },
                |serving, place| {
                    Warning::Queued {
                        server: format!("{host}:{}", plan.port),
                        serving: serving.to_string(),
                        place,
                    }
                    .emit()
                },
            )?,
            _ => match &plan.serving {
                Some((listener, _)) => {
                    print_waiting(plan);
                    Channel::accept_on(
                        listener,
                        plan.io_timeout,
                        plan.handshake_timeout(),
                        &signals::stop_requested,
                    )?
                }
                None => {
                    Channel::accept(plan.port, plan.io_timeout, plan.handshake_timeout(), || {
                        print_waiting(plan)
                    })?
                }
            },
        };
        plan.output
            .verbose(|| format!("out-of-band channel up with {}", chan.peer()));
        Ok(Roceperf {
            plan,
            chan,
            phase: Phase::Connect,
            mine: None,
            peer_recovery: Recovery::Gbn,
            sent_early: false,
            parts: None,
            signal_every: 1,
            early: None,
            peer_signal: None,
            cut: None,
        })
    }

    /// Swaps parameter sets with the peer; fails on both sides naming the first that differs.
    pub(crate) fn check_params(&mut self) -> Result<(), Error> {
        let theirs = self.chan.check_params(&self.plan.test_params())?;
        self.peer_recovery = theirs.recovery;
        Ok(())
    }

    /// This side's address on the channel (the TCP baseline binds its data sockets to it).
    pub(crate) fn local_ip(&self) -> IpAddr {
        self.chan.local_ip()
    }

    /// Runs `body`; on an error other than the channel's own, tells the peer why before returning it.
    pub(crate) fn guarded(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let outcome = body(self);
        if let Err(e) = &outcome
            && !matches!(e, Error::Oob(_))
        {
            self.chan.abort(&e.to_string(), e.failure());
        }
        outcome
    }

    /// The phase after size `i`: the next size, unless a signal stopped either side (the run ends
    /// with the sizes settled).
    fn after(&self, i: usize) -> Phase {
        let stopped =
            self.peer_signal.is_some() || (!self.plan.mode.is_endless() && self.cut.is_some());
        if i + 1 < self.plan.sizes.len() && !stopped {
            Phase::Prepare(i + 1)
        } else {
            Phase::Conclude
        }
    }

    fn peer_done(&self) -> bool {
        self.early.is_some() || self.chan.peer_has_data().unwrap_or(true)
    }

    /// This side's report of the size just run: its result, and the signal that cut it short.
    fn report(&self) -> SizeReport {
        SizeReport {
            result: self.mine.clone(),
            interrupted_by: self
                .cut
                .filter(|_| !self.plan.mode.is_endless())
                .map(str::to_string),
        }
    }

    /// Takes the peer's report in: the signal that stopped it, if one did.
    fn take_report(&mut self, r: SizeReport) -> SizeReport {
        if let Some(by) = r.interrupted_by.as_deref() {
            self.peer_signal = Some(if by == "SIGTERM" { "SIGTERM" } else { "SIGINT" });
        }
        r
    }
}

impl Dialect for Roceperf<'_> {
    fn next<E: Described>(&mut self, ep: &mut E) -> Result<Action, Error> {
        let plan = self.plan;
        match self.phase {
            Phase::Connect => {
                let mut peer: crate::transport::ConnInfo =
                    self.chan.exchange(Step::Conn, &ep.local_info())?;
                self.chan.end_handshake()?;
                ep.agree_recovery(self.peer_recovery);
                self.signal_every = measure::lat_signal_every(plan, Some(peer.transport));
                let notes = ep.adapt_to_peer(&peer);
                if peer.transport != plan.transport && plan.transport != TransportKind::Tcp {
                    // soft and verbs put the same packets on the wire; the label only says who made
                    // the description.
                    peer.transport = plan.transport;
                }
                self.phase = if plan.sizes.is_empty() {
                    Phase::Conclude
                } else {
                    Phase::Prepare(0)
                };
                let cm = plan.rdma_cm.then(|| CmConnect::Now {
                    server: (plan.role == Role::Client)
                        .then(|| data_ip(&peer, self.chan.peer().ip())),
                    by_qpn: true,
                });
                Ok(Action::Connect(Box::new(Link {
                    cm,
                    remotes: plan.layout.remotes(&peer),
                    local: None,
                    fallback_device: self.chan.local_ip().to_string(),
                    warmup: plan.warmup,
                    notes,
                    connected: match &peer.addr {
                        Some(addr) => format!("data connections up with {addr}"),
                        None => "data connections up".to_owned(),
                    },
                    peer,
                })))
            }
            Phase::Prepare(i) => {
                self.phase = Phase::Receives(i);
                Ok(Action::Prepare {
                    size: plan.sizes[i],
                })
            }
            Phase::Receives(i) => {
                // Before the barrier, so the drivers' own fill then finds the queues full.
                self.phase = Phase::Barrier(i);
                Ok(Action::PostReceives)
            }
            Phase::Barrier(i) => {
                self.chan.barrier(i as u64)?;
                self.phase = Phase::Results(i);
                Ok(Action::Run(SizeRun {
                    size: plan.sizes[i],
                    role: plan.role,
                    mode: plan.mode,
                    warmup: plan.warmup,
                    marked: true,
                    signal_every: self.signal_every,
                }))
            }
            Phase::Results(i) => {
                // The client sends first and keeps the data path running until the server answers; the
                // server keeps it running until the client's results arrive (a passive side must keep
                // serving the peer's WRITEs and READs until then).
                // A server whose run without end a signal stopped sends first: that is what stops
                // the client, which is still running.
                // So does a server a signal stopped early (any run): the client learns it from that.
                self.sent_early = plan.role == Role::Server && self.cut.is_some();
                if plan.role == Role::Client || self.sent_early {
                    self.chan.send(Step::Results, &self.report())?;
                }
                self.phase = Phase::Collect(i);
                Ok(Action::AwaitPeer)
            }
            Phase::Collect(i) => {
                let size = plan.sizes[i];
                let theirs = match self.early.take() {
                    Some(r) => r?,
                    None => self.chan.recv(Step::Results)?,
                };
                let theirs = self.take_report(theirs).result;
                if plan.role == Role::Server && !self.sent_early {
                    self.chan.send(Step::Results, &self.report())?;
                }
                if measure::checks_write_target(plan) {
                    measure::check_write_target(ep, plan.layout, size)?;
                }
                if measure::checks_atomic_target(plan) {
                    measure::check_atomic_target(plan, ep)?;
                }
                let shown = match (self.mine.take(), theirs) {
                    (Some(m), Some(t)) if plan.bidirectional => {
                        self.parts = Some((m.clone(), t.clone()));
                        // Duration mode counts messages: the two directions together, like the rates.
                        Some(combine(m, &t, plan.mode.is_duration()))
                    }
                    // UC/UD: the loss the receiving side counted belongs to the sender's row too.
                    (Some(m), t) => Some(SizeResult {
                        lost: m.lost.or(t.and_then(|t| t.lost)),
                        ..m
                    }),
                    (None, t) => t,
                };
                let Some(r) = shown else {
                    return Err(Error::Oob(oob::Error::Garbage {
                        peer: self.chan.peer().to_string(),
                        detail: format!("it sent no results for size {size}"),
                    }));
                };
                self.phase = self.after(i);
                Ok(Action::Row(Box::new(r)))
            }
            Phase::Conclude => {
                self.phase = Phase::Close;
                Ok(Action::Conclude)
            }
            Phase::Close => {
                self.chan.barrier(u64::MAX)?;
                self.phase = Phase::Done;
                Ok(Action::Finished)
            }
            Phase::Done => Ok(Action::Finished),
        }
    }

    fn measured(&mut self, _size: u64, mine: Option<SizeResult>) {
        self.mine = mine;
        self.cut = signals::received();
    }

    fn run_over(&mut self) -> bool {
        self.peer_done()
    }

    fn peer_arrived(&mut self) -> Result<bool, Error> {
        Ok(self.peer_done())
    }

    fn shows_progress(&self) -> bool {
        true
    }

    fn unconnected(&self) -> Error {
        Error::Oob(oob::Error::Garbage {
            peer: self.chan.peer().to_string(),
            detail: "the session ended before connecting".into(),
        })
    }

    fn parts(&mut self) -> Option<(SizeResult, SizeResult)> {
        self.parts.take()
    }

    fn peer_interrupted(&mut self) -> Option<&'static str> {
        // While a size runs or is served, the peer sends nothing but its report of it, and that
        // only once it has stopped: read it as soon as it is there (it was sent in one write).
        if self.peer_signal.is_none()
            && self.early.is_none()
            && matches!(self.phase, Phase::Results(_) | Phase::Collect(_))
            && !self.plan.mode.is_endless()
            && self.chan.peer_has_data().unwrap_or(false)
        {
            let r = self.chan.recv(Step::Results).map(|r| self.take_report(r));
            self.early = Some(r);
        }
        self.peer_signal
    }

    fn tells_interruption(&self) -> bool {
        true
    }
}
