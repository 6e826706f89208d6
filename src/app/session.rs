//! The one session loop both out-of-band dialects drive.
//!
//! Connect, then for every size prepare, post receives, run, serve the peer until it arrives, print
//! the row; then conclude.
//!
//! A [`Dialect`] performs its exchanges with the peer and stops at each point where the data path must
//! act, as an [`Action`]; this loop does what the action asks. roceperf's dialect
//! ([`super::roceperf_oob`]) and perftest's ([`super::perftest_oob`]) differ only in that order and in
//! what they exchange.

use super::Error;
use super::endless::Outputs;
use super::endpoints::{Described, setup_error};
use super::measure::{self, SizeRun};
use super::notes::{self, Note, Warning};
use super::plan::Plan;
use super::report;
use crate::bench::interval::{IntervalSample, Intervals};
use crate::bench::{affinity::Pinned, bw};
use crate::orchestrate::signals;
use crate::params::{ConnType, Role};
use crate::report::progress::SweepProgress;
use crate::results::{BY_PEER, Interrupted, Measured, RunInfo, SizeResult};
use crate::transport::{ConnInfo, RemoteAddr};

/// What the data path must do next.
#[derive(Debug)]
pub(crate) enum Action {
    /// The peer is known: connect the endpoint to it and print the header.
    Connect(Box<Link>),
    /// Ready the buffers for `size` (validation pattern, WRITE latency's marker).
    Prepare {
        /// Message size.
        size: u64,
    },
    /// Top the receives up to the plan's initial receives (SEND tests), before the peer may send.
    PostReceives,
    /// Run this side's part of one size; then tell the dialect what it measured.
    Run(SizeRun),
    /// The peer is still busy: keep serving it until the dialect says it has arrived.
    AwaitPeer,
    /// A size is settled: print its row.
    Row(Box<SizeResult>),
    /// Every size is settled: print the footer and write the result files now, before the dialect's
    /// last exchange, so that a write that fails is told to the peer before either side exits. A
    /// dialect that cannot tell its peer (perftest's) never asks; the loop then concludes when it is
    /// finished.
    Conclude,
    /// The dialect is over.
    Finished,
}

/// What a dialect learned about the peer's data path, and what the header says about it.
#[derive(Debug)]
pub(crate) struct Link {
    /// The peer, as the endpoint connects to it.
    pub peer: ConnInfo,
    /// This side as the peer was told it (`None`: the endpoint's own description after connecting).
    pub local: Option<ConnInfo>,
    /// Where this side's requests address the peer, per queue pair.
    pub remotes: Vec<RemoteAddr>,
    /// The device named in the header when `-d` was not given.
    pub fallback_device: String,
    /// Warm-up iterations as run.
    pub warmup: u64,
    /// The dialect's notes for the header.
    pub notes: Vec<Note>,
    /// The `-v` line once the data path is connected.
    pub connected: String,
    /// `-R`: connect the queue pairs through the CM, not from `peer`'s description.
    pub cm: Option<CmConnect>,
}

/// How `-R` connects the queue pairs of a [`Link`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum CmConnect {
    /// Through the CM, now.
    Now {
        /// The server's address, on the client (the server listens).
        server: Option<std::net::IpAddr>,
        /// Pair each request with the queue pair whose peer QPN `peer` names (and check the CM's
        /// QPNs against it), rather than accept requests in the order they come.
        by_qpn: bool,
    },
    /// Already connected through the CM (perftest's `-R` connects before its key rounds).
    Done,
}

/// An out-of-band dialect as the session loop sees it.
pub(crate) trait Dialect {
    /// Performs exchanges with the peer up to the next thing the data path must do.
    fn next<E: Described>(&mut self, ep: &mut E) -> Result<Action, Error>;
    /// This side's result of the size just run (`None`: this side only served).
    fn measured(&mut self, size: u64, mine: Option<SizeResult>);
    /// Asked while a size runs: true once this side should stop (the peer is done, or the clock is).
    fn run_over(&mut self) -> bool;
    /// Asked during [`Action::AwaitPeer`]: true once the peer has arrived.
    fn peer_arrived(&mut self) -> Result<bool, Error>;
    /// What the data path is doing during [`Action::AwaitPeer`], for its errors.
    fn serving(&self) -> &'static str {
        bw::SERVING
    }
    /// Whether a sweep shows a progress bar (on a terminal).
    fn shows_progress(&self) -> bool;
    /// The error when the dialect finished without ever connecting.
    fn unconnected(&self) -> Error;
    /// Bidirectional: this side's and the peer's figures of the row just settled (`--report-both`).
    fn parts(&mut self) -> Option<(SizeResult, SizeResult)> {
        None
    }
    /// Asked while a size runs (at most every half millisecond) and when its row settles: the signal
    /// (`SIGINT`, `SIGTERM`) that stopped the peer early, once the peer has said so.
    fn peer_interrupted(&mut self) -> Option<&'static str> {
        None
    }
    /// Whether the dialect tells the peer that a signal stopped this side, so that both sides
    /// settle the size and conclude together (roceperf's); a dialect that cannot (perftest's) has
    /// the loop conclude on its own as soon as the data path stopped.
    fn tells_interruption(&self) -> bool {
        false
    }
}

/// Runs the session on an open endpoint, then says on stderr what the transport knows of the outcome.
pub(crate) fn run<D: Dialect, E: Described>(
    plan: &Plan,
    pinned: &Pinned,
    dialect: &mut D,
    mut ep: E,
) -> Result<(), Error> {
    let outcome = drive(plan, pinned, dialect, &mut ep);
    explain_outcome(plan, &ep, outcome)
}

/// The loop: does what the dialect asks until it is finished, then concludes. A run that fails once
/// connected, before its files were written, still writes them with its error
/// ([`report::keep_failed`]); the error passes through.
pub(crate) fn drive<D: Dialect, E: Described>(
    plan: &Plan,
    pinned: &Pinned,
    dialect: &mut D,
    ep: &mut E,
) -> Result<(), Error> {
    let mut sweep = Sweep {
        info: None,
        results: Vec::with_capacity(plan.sizes.len()),
        endless: None,
        concluded: false,
        interrupted: None,
    };
    let outcome = steps(plan, pinned, dialect, ep, &mut sweep);
    if let Err(e) = &outcome
        && !sweep.concluded
        && let Some(info) = sweep.info.as_mut()
    {
        info.interrupted = sweep.interrupted.as_ref().map(|i| i.kept.clone());
        report::keep_failed(plan, ep, info, &sweep.results, sweep.endless.take(), e);
    }
    outcome
}

/// A `-n` / `-D` run that a signal stopped early: what its files say, and the signal this process
/// exits for (its own, or the peer's).
struct Interruption {
    /// What the files and the console say of it.
    kept: Interrupted,
    /// `SIGINT` or `SIGTERM`: this side's, or the peer's when `kept.by` is `peer`.
    signal: &'static str,
}

/// What the loop has of the run so far, kept for its files when it fails.
struct Sweep<'p> {
    /// The run's description, once connected.
    info: Option<RunInfo>,
    /// The sizes settled.
    results: Vec<SizeResult>,
    /// A run without end's outputs, until concluded.
    endless: Option<Outputs<'p>>,
    /// The files were written (or tried): a failure after that writes nothing again.
    concluded: bool,
    /// A signal stopped the run early, on this side or the peer's.
    interrupted: Option<Interruption>,
}

/// [`drive`]'s loop, its state in `sweep`.
fn steps<'p, D: Dialect, E: Described>(
    plan: &'p Plan,
    pinned: &Pinned,
    dialect: &mut D,
    ep: &mut E,
    sweep: &mut Sweep<'p>,
) -> Result<(), Error> {
    let out = &plan.output;
    let progress = if dialect.shows_progress() && plan.sizes.len() > 1 {
        SweepProgress::new(plan.sizes.len() as u64)
    } else {
        SweepProgress::hidden(1)
    };
    let mut recvs = bw::RecvState::default();
    let mut remotes: Vec<RemoteAddr> = Vec::new();
    let mut parts: Option<(SizeResult, SizeResult)> = None;
    let mut landed = LandedWrites::new(plan);
    let mut nic = super::nic::Window::new(plan);
    loop {
        match dialect.next(ep)? {
            Action::Connect(link) => {
                let mut link = *link;
                // From here the first SIGINT/SIGTERM stops the run cleanly, with what it measured
                // (a run without end: its summary); before, nothing is measured and it ends the
                // process as usual.
                signals::catch();
                check_datagram_mtu(plan, &link.peer)?;
                match link.cm {
                    Some(CmConnect::Now { server, by_qpn }) => {
                        connect_through_cm(plan, ep, &mut link, server, by_qpn)?;
                        if server.is_none() && plan.connection == ConnType::Ud {
                            super::rdma_cm::answer_repeats(plan, ep, &mut || {
                                dialect.peer_arrived()
                            })?;
                        }
                    }
                    Some(CmConnect::Done) => {}
                    None => ep.connect(&link.peer).map_err(|e| setup_error(plan, e))?,
                }
                landed.start(ep, link.warmup);
                out.verbose(|| link.connected.clone());
                let local = link.local.unwrap_or_else(|| ep.local_info());
                let mut i =
                    report::run_info(plan, link.fallback_device, pinned, &local, &link.peer);
                i.warmup = link.warmup;
                (i.impair, i.recovery) = ep.lossy();
                if let Some(m) = ep.wire_marks() {
                    i.marks = Some(m);
                }
                i.notes.extend(notes::lines(&ep.notes()));
                i.notes.extend(notes::lines(&link.notes));
                i.nic_counters = nic.describe();
                if let Some(text) = report::provenance_text(&i) {
                    out.verbose(|| text);
                }
                nic.start();
                if !out.quiet() {
                    report::print_header(&i);
                }
                if plan.mode.is_endless() {
                    sweep.endless = Some(Outputs::open(plan, &i)?);
                }
                remotes = link.remotes;
                sweep.info = Some(i);
            }
            Action::Prepare { size } => {
                landed.sizes += 1;
                progress.start_size(size);
                measure::prepare(plan, ep, size);
            }
            Action::PostReceives => {
                recvs.fill(ep, &plan.layout, plan.depths.initial_receives)?;
            }
            Action::Run(run) => {
                let tells = dialect.tells_interruption();
                // Both closures ask the dialect: `stop` whether this side should stop (a signal,
                // the peer done or stopped), `cut` whether a signal stopped either side (a
                // receiver that counts `-n` messages stops on it, not on the peer being done).
                let asked = std::cell::RefCell::new(&mut *dialect);
                let mut stop = || signals::stop_requested() || asked.borrow_mut().run_over();
                let mut cut =
                    || signals::stop_requested() || asked.borrow_mut().peer_interrupted().is_some();
                let mine = match sweep.endless.as_mut() {
                    Some(o) => {
                        let receiving = !plan.bidirectional
                            && plan.role == Role::Server
                            && plan.test.verb.consumes_receive();
                        let at = if receiving { "receiver" } else { "sender" };
                        let mut sink = |s: &IntervalSample| o.interval(run.size, s, at);
                        let hooks = plan.output.report_interval.map(|every| Intervals {
                            every,
                            sink: &mut sink,
                        });
                        let stops = measure::Stops {
                            stop: &mut stop,
                            cut: &mut cut,
                        };
                        measure::measure(plan, ep, &run, stops, &remotes, &mut recvs, hooks)?
                    }
                    None => {
                        let stops = measure::Stops {
                            stop: &mut stop,
                            cut: &mut cut,
                        };
                        measure::measure(plan, ep, &run, stops, &remotes, &mut recvs, None)?
                    }
                };
                nic.end();
                if !plan.mode.is_endless()
                    && let Some(signal) = signals::received()
                {
                    sweep.interrupted.get_or_insert(Interruption {
                        kept: Interrupted {
                            by: signal.to_string(),
                            size_bytes: Some(run.size),
                            partial: false,
                        },
                        signal,
                    });
                    if !tells {
                        // The peer cannot be told (perftest's dialect): this side's part of the
                        // size is its row, and the run ends here.
                        if let Some(r) = mine {
                            settle_cut(plan, sweep, &progress, r);
                        }
                        break;
                    }
                }
                dialect.measured(run.size, mine);
            }
            Action::AwaitPeer => {
                // SENDs still in flight need receives (TCP would otherwise hold them, and their sender
                // with them), and a responder must keep answering the peer's WRITEs and READs.
                let mut failed = None;
                let serving = dialect.serving();
                // A dialect that cannot tell the peer of a signal stops serving on it.
                let alone = !dialect.tells_interruption() && !plan.mode.is_endless();
                let mut arrived = || {
                    (alone && signals::stop_requested())
                        || match dialect.peer_arrived() {
                            Ok(a) => a,
                            Err(e) => {
                                failed = Some(e);
                                true
                            }
                        }
                };
                bw::passive(ep, serving, &mut arrived, Some((&mut recvs, plan.layout)))?;
                if let Some(e) = failed {
                    return Err(e);
                }
                if alone && let Some(signal) = signals::received() {
                    sweep.interrupted.get_or_insert(Interruption {
                        kept: Interrupted {
                            by: signal.to_string(),
                            size_bytes: None,
                            partial: false,
                        },
                        signal,
                    });
                    break;
                }
            }
            Action::Row(r) => {
                let mut r = *r;
                if sweep.interrupted.is_none()
                    && let Some(signal) = dialect.peer_interrupted()
                {
                    sweep.interrupted = Some(Interruption {
                        kept: Interrupted {
                            by: BY_PEER.to_string(),
                            size_bytes: Some(r.size),
                            partial: false,
                        },
                        signal,
                    });
                }
                let cut = sweep
                    .interrupted
                    .as_mut()
                    .filter(|i| i.kept.size_bytes == Some(r.size));
                if let Some(i) = cut {
                    if !cut_short(plan, &mut r) {
                        // Nothing of the size completed (a timed run stopped inside its first
                        // margin): no row; the interruption says so.
                        continue;
                    }
                    i.kept.partial = true;
                }
                landed.count_lost(ep, &mut r);
                progress.finish_size();
                parts = dialect.parts();
                let counters = nic.settle(r.size);
                if let Some(i) = sweep.info.as_mut() {
                    if sweep.endless.is_some() && !out.quiet() {
                        // Below the interval lines, the whole run's.
                        progress.print(crate::report::console::RESULT_LINE);
                    }
                    progress.print(&report::row(plan, i, &r));
                    if let (true, Some(line)) = (
                        out.verbosity > 0 && !out.quiet(),
                        crate::report::console::qp_shares(&r),
                    ) {
                        progress.print(&line);
                    }
                    if let (true, Some((mine, theirs))) = (out.report_both, &parts)
                        && !out.quiet()
                    {
                        progress.print(&crate::report::console::report_both(i, mine, theirs));
                    }
                    if let (Some(c), Some(n)) = (counters, i.nic_counters.as_mut()) {
                        if !out.quiet() {
                            let netdev = n.netdev.as_deref();
                            progress.print(&crate::report::nic_counters::nic_counters(&c, netdev));
                        }
                        n.sizes.push(c);
                    }
                    sweep.results.push(r);
                }
            }
            Action::Conclude => {
                progress.finish();
                if let Some(info) = sweep.info.as_mut() {
                    sweep.concluded = true;
                    info.interrupted = sweep.interrupted.as_ref().map(|i| i.kept.clone());
                    conclude(plan, ep, info, &sweep.results, &parts, sweep.endless.take())?;
                }
            }
            Action::Finished => break,
        }
    }
    progress.finish();
    let Some(info) = sweep.info.as_mut() else {
        return Err(dialect.unconnected());
    };
    info.interrupted = sweep.interrupted.as_ref().map(|i| i.kept.clone());
    if !sweep.concluded {
        sweep.concluded = true;
        conclude(plan, ep, info, &sweep.results, &parts, sweep.endless.take())?;
    }
    match &sweep.interrupted {
        Some(i) => Err(Error::Interrupted {
            signal: i.signal,
            peer: (i.kept.by == BY_PEER).then(|| info.peer.clone().unwrap_or_default()),
            kept: i.kept.clone(),
        }),
        None => report::gate(plan, info, &sweep.results),
    }
}

/// The row of a size a signal cut short, made honest: `-n` counts the messages that completed
/// (per queue pair, as `-n` does), and UC/UD's lost messages are not counted (how many the sender
/// sent is not known). False when nothing of the size completed, so it has no row.
fn cut_short(plan: &Plan, r: &mut SizeResult) -> bool {
    r.lost = None;
    match &r.measured {
        Measured::Bandwidth(b) => {
            if matches!(plan.mode, crate::params::RunMode::Iterations(_)) {
                r.iterations = b.messages / u64::from(plan.qps.max(1));
            }
            b.messages > 0
        }
        Measured::Latency { stats, .. } => stats.samples > 0,
    }
}

/// perftest's dialect, cut short by a signal: this side's part of the size is its row.
fn settle_cut(plan: &Plan, sweep: &mut Sweep<'_>, progress: &SweepProgress, mut r: SizeResult) {
    let Some(i) = sweep.interrupted.as_mut() else {
        return;
    };
    if !cut_short(plan, &mut r) {
        return;
    }
    i.kept.partial = true;
    if let Some(info) = sweep.info.as_ref() {
        progress.print(&report::row(plan, info, &r));
        sweep.results.push(r);
    }
}

/// The run's footer and files ([`report::conclude`]), once every size is settled.
fn conclude<E: Described>(
    plan: &Plan,
    ep: &E,
    info: &mut RunInfo,
    results: &[SizeResult],
    parts: &Option<(SizeResult, SizeResult)>,
    endless: Option<Outputs>,
) -> Result<(), Error> {
    if let (Some(run), Some(o)) = (info.run_infinitely.as_mut(), &endless) {
        run.intervals = o.intervals();
        run.stopped_by = Some(signals::received().unwrap_or("peer").to_string());
    }
    let both = parts.as_ref().map(|(m, t)| (m, t));
    report::conclude(plan, ep, info, results, both, endless)
}

/// UD: every message of the run must fit the path MTU, the smaller of the two sides' offers; the peer's
/// may be smaller than ours (`Plan::fit_datagrams` already fitted ours).
fn check_datagram_mtu(plan: &Plan, peer: &ConnInfo) -> Result<(), Error> {
    let mtu = u64::from(peer.mtu);
    if plan.connection == ConnType::Ud && plan.max_size() > mtu {
        return Err(Error::Usage(crate::cli::Error::Invalid {
            flag: "-s",
            why: crate::cli::ud_too_big(plan.max_size(), mtu, "the peer's offer"),
        }));
    }
    Ok(())
}

/// UC write_bw, the written side: RDMA WRITEs complete only at the writer, but where the transport
/// sees them land (soft counts whole messages), the WRITEs of a row that never did are counted lost.
struct LandedWrites {
    /// `-n`, where this side counts; `None` where not.
    iterations: Option<u64>,
    qps: u64,
    /// The transport's count when the last row was settled.
    base: Option<u64>,
    /// Sizes prepared since then (perftest's -a prints one row for all of them).
    sizes: u64,
    warmup: u64,
}

impl LandedWrites {
    fn new(plan: &Plan) -> LandedWrites {
        use crate::params::{Metric, Role, RunMode, Verb};
        let written_side = plan.test.verb == Verb::Write
            && plan.test.metric == Metric::Bandwidth
            && plan.connection.is_unreliable()
            && plan.role == Role::Server
            && !plan.bidirectional;
        let iterations = match plan.mode {
            RunMode::Iterations(n) if written_side => Some(n),
            _ => None,
        };
        LandedWrites {
            iterations,
            qps: u64::from(plan.qps),
            base: None,
            sizes: 0,
            warmup: 0,
        }
    }

    /// Connected: counting starts here; `warmup` iterations per queue pair precede each size.
    fn start<E: Described>(&mut self, ep: &E, warmup: u64) {
        if self.iterations.is_some() {
            self.base = ep.messages_received();
            self.warmup = warmup;
        }
    }

    /// Sets the row's lost WRITEs, when this side counts them and the row has none yet.
    fn count_lost<E: Described>(&mut self, ep: &E, r: &mut SizeResult) {
        let (Some(n), Some(base), Some(now)) = (self.iterations, self.base, ep.messages_received())
        else {
            return;
        };
        let sent = self.sizes * (n + self.warmup) * self.qps;
        if r.lost.is_none() {
            r.lost = Some(sent.saturating_sub(now - base));
        }
        self.base = Some(now);
        self.sizes = 0;
    }
}

/// `-R`: connects the link's queue pairs through the CM; the peer's QPNs, PSNs and MTU become what
/// the CM agreed, and the header says so.
fn connect_through_cm<E: Described>(
    plan: &Plan,
    ep: &mut E,
    link: &mut Link,
    server: Option<std::net::IpAddr>,
    by_qpn: bool,
) -> Result<(), Error> {
    let qpns: Vec<u32> = link.peer.qps.iter().map(|q| q.qpn).collect();
    let expect = by_qpn.then_some(&qpns[..]);
    let wait = Some(plan.connect_timeout);
    let peers = super::rdma_cm::connect(plan, ep, 0..qpns.len(), server, expect, wait, false)?;
    super::rdma_cm::adopt(plan, &mut link.peer, &peers, &mut link.notes);
    Ok(())
}

/// After a run in either dialect: the transport's account of a failed completion, and with -v its
/// counters, on stderr; the outcome passes through.
pub(crate) fn explain_outcome<E: Described>(
    plan: &Plan,
    ep: &E,
    outcome: Result<(), Error>,
) -> Result<(), Error> {
    if let Err(Error::Bench(_)) = &outcome
        && let Some(d) = ep.failure_detail()
    {
        Warning::FailureDetail(d).emit();
    }
    if plan.output.verbosity > 0
        && let Some((text, _)) = ep.counters()
    {
        Warning::Counters {
            transport: plan.transport,
            text,
        }
        .emit();
    }
    outcome
}
