//! `--oob perftest`: the run driven by perftest's out-of-band dialect ([`crate::oob::perftest`]), so the
//! peer may be a real `ib_*` tool.
//!
//! The session decides the order of exchanges; this driver does what each [`Action`] asks on the data
//! path. Differences from roceperf's own dialect, all because a perftest peer does them this way: no
//! parameter check beyond what perftest exchanges (its report's size and iterations), no warm-up, no
//! results exchange except perftest's bandwidth report (a passive WRITE/READ server prints the client's
//! figures from it; a READ latency server prints none, as ib_read_lat's server), and the key records
//! advertise the target half of each buffer, so the peer's WRITEs land where our drivers look.

use super::{
    Described, Error, combine, conclude, explain_outcome, initial_receives, io_timeout, measure,
    run_info, setup_error, verbose,
};
use crate::bench::{self, Layout, bw, lat};
use crate::cli::{Options, OutputArg, RunMode};
use crate::oob::perftest::{
    self, Action, BwReport, KeyRecord, PerftestChannel, ScriptOptions, Session, SessionConfig,
    SysData, Timeouts,
};
use crate::params::{Metric, Role, TestKind, Verb};
use crate::report::{self, OutputSelect};
use crate::results::{Measured, RunInfo, SizeResult};
use crate::stats::BandwidthStats;
use crate::transport::{Completion, CompletionOp, CompletionStatus, RemoteAddr};
use std::time::Duration;

/// Runs the whole test against a perftest-dialect peer on an opened endpoint.
pub(crate) fn run<E: Described>(
    opts: &Options,
    pinned: &bench::affinity::Pinned,
    layout: Layout,
    mut ep: E,
) -> Result<(), Error> {
    let outcome = drive(opts, pinned, layout, &mut ep);
    explain_outcome(opts, &ep, outcome)
}

fn drive<E: Described>(
    opts: &Options,
    pinned: &bench::affinity::Pinned,
    layout: Layout,
    ep: &mut E,
) -> Result<(), Error> {
    let client = opts.role == Role::Client;
    let stream = match &opts.host {
        Some(host) if client => {
            perftest::connect(&format!("{host}:{}", opts.port), opts.connect_timeout)?
        }
        _ => {
            if opts.output.is_none() {
                print!(
                    "\n************************************\n* Waiting for client to connect... *\n************************************\n"
                );
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
            perftest::accept(&format!("0.0.0.0:{}", opts.port))?
        }
    };
    let timeouts = Timeouts {
        run: Some(io_timeout(opts) + Duration::from_secs(60)),
        ..Timeouts::default()
    };
    let chan = PerftestChannel::new(stream, client, timeouts);
    let script = ScriptOptions {
        size: opts.max_size(),
        all_sizes: opts.all_sizes,
        bidirectional: opts.bidirectional,
        num_qps: opts.qps as usize,
        duration: matches!(opts.mode, RunMode::Duration { .. }),
    };
    let mut local = ep.local_info();
    for q in &mut local.qps {
        // The peer addresses our target half: its WRITEs and SENDs land where our drivers look.
        q.vaddr += layout.half;
        q.len = layout.half;
    }
    let cfg = SessionConfig {
        test: opts.test,
        role: opts.role,
        opts: script,
        iters: opts.iterations(),
        sys: SysData::local(),
        mtu: local.mtu,
    };
    let mut session = Session::new(chan, &cfg, Some(KeyRecord::from_conn_info(&local)))?;
    let passive = !client
        && !opts.bidirectional
        && match opts.test.metric {
            Metric::Bandwidth => opts.test.verb != Verb::Send,
            Metric::Latency => opts.test.verb == Verb::Read,
        };
    let quiet = opts.output.is_some();
    let mut remotes: Vec<RemoteAddr> = Vec::new();
    let mut info: Option<RunInfo> = None;
    let mut recvs = bw::RecvState::default();
    let mut results: Vec<SizeResult> = Vec::new();
    // The last run's size and this side's own measurement, until the peer's report (if any) is in.
    let mut pending: Option<(u64, Option<SizeResult>)> = None;
    let mut comps = [Completion::EMPTY; 32];
    // perftest's latency loops post exactly -n times per side and time the gaps between posts; our
    // driver posts once more to close the last round trip, so it is given one iteration fewer (n posts,
    // n - 1 samples), or a perftest peer would wait for a message that never comes.
    let mut run_opts = match (opts.test.metric, opts.mode) {
        (Metric::Latency, RunMode::Iterations(n)) => Options {
            mode: RunMode::Iterations(n.saturating_sub(1).max(1)),
            ..opts.clone()
        },
        _ => opts.clone(),
    };
    if opts.test == TestKind::new(Verb::Write, Metric::Latency) {
        // In ib_write_lat the server makes the first WRITE and the client waits for it (send_lat is the
        // other way round, as ours); a client that wrote first would meet a server that does not look.
        run_opts.role = match opts.role {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
    }
    loop {
        let action = session.next()?;
        if matches!(action, Action::Run { .. } | Action::Finished)
            && let Some((size, mine)) = pending.take()
            && let Some(i) = &info
            && let Some(r) = settle(opts, size, mine, session.peer_report())
        {
            print_row(opts, i, &r, quiet);
            results.push(r);
        }
        match action {
            Action::NeedLocalKeys { .. } => {
                session.set_local_keys(KeyRecord::from_conn_info(&local))?;
            }
            Action::Connect => {
                let peer = session
                    .peer()
                    .expect("the session connects only after the key round");
                let version = peer.version.text.clone();
                let peer_info = peer.conn_info(opts.max_size(), opts.transport);
                ep.connect(&peer_info).map_err(|e| setup_error(opts, e))?;
                if opts.test == TestKind::new(Verb::Write, Metric::Latency) {
                    // Before any barrier: sizes only grow, so one clear per size up front suffices.
                    for &size in &opts.sizes {
                        lat::clear_marker(ep, &layout, size);
                    }
                }
                remotes = peer_info
                    .qps
                    .iter()
                    .map(|q| RemoteAddr {
                        addr: q.vaddr,
                        rkey: q.rkey,
                    })
                    .collect();
                verbose(opts, || format!("connected to perftest {version} peer"));
                let mut i = run_info(
                    opts,
                    opts.device.clone().unwrap_or_default(),
                    pinned,
                    &local,
                    &peer_info,
                );
                i.warmup = 0;
                i.notes.extend(ep.notes());
                i.notes.push(format!(
                    "out of band: perftest's dialect, peer announced version {version}; no warm-up, as perftest"
                ));
                if !quiet {
                    print!("{}", report::header_block(&i));
                    print!("{}", report::address_block(&i));
                    print!("{}", report::table_header(&i));
                }
                info = Some(i);
            }
            Action::PostReceives { .. } => recvs.fill(ep, &layout, initial_receives(opts))?,
            Action::Run { size } => {
                let mine = if passive {
                    None
                } else {
                    // perftest gives no "done" on its data path or out of band: in duration mode each
                    // side stops on its own clock (its SIGALRM), so a side that waits for the peer (a
                    // SEND receiver, a latency responder) stops when its -D is up.
                    let deadline = match run_opts.mode {
                        RunMode::Duration { secs, .. } => {
                            Some(std::time::Instant::now() + Duration::from_secs(secs))
                        }
                        RunMode::Iterations(_) => None,
                    };
                    measure(
                        &run_opts,
                        ep,
                        &mut || deadline.is_some_and(|d| std::time::Instant::now() >= d),
                        layout,
                        &remotes,
                        &mut recvs,
                        size,
                        0,
                    )?
                };
                if opts.test.metric == Metric::Bandwidth
                    && let Some(Measured::Bandwidth(b)) = mine.as_ref().map(|m| &m.measured)
                {
                    session.set_report(to_report(opts, b));
                }
                pending = Some((size, mine));
            }
            Action::AwaitPeer => {
                // Our responder must keep answering the peer's WRITEs and READs (and SENDs need receives).
                while !session.poll_peer()? {
                    let n = ep
                        .poll_cq(&mut comps)
                        .map_err(|source| bench::Error::Transport {
                            during: "serving the perftest peer",
                            source,
                        })?;
                    for c in &comps[..n] {
                        if c.status != CompletionStatus::Success {
                            return Err(bench::Error::Completion {
                                qp: c.qp,
                                wr_id: c.wr_id,
                                status: c.status,
                            }
                            .into());
                        }
                        if matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm) {
                            recvs.replace(ep, &layout, c.qp as usize)?;
                        }
                    }
                }
            }
            Action::Finished => {
                // A passive WRITE/READ server has no run step: its row is the client's report.
                if passive
                    && opts.test.metric == Metric::Bandwidth
                    && let (Some(t), Some(i)) = (session.peer_report(), &info)
                {
                    let r = from_report(opts, &t);
                    print_row(opts, i, &r, quiet);
                    results.push(r);
                }
                break;
            }
        }
    }
    let Some(info) = info else {
        return Err(Error::Perftest(perftest::PerftestError::Misuse(
            "the session ended before connecting".into(),
        )));
    };
    conclude(opts, ep, info, &results)
}

/// The row for one size: ours, the peer's report (a passive server), or both summed (`-b`).
fn settle(
    opts: &Options,
    size: u64,
    mine: Option<SizeResult>,
    theirs: Option<BwReport>,
) -> Option<SizeResult> {
    let theirs = theirs
        .filter(|t| t.size == size && opts.test.metric == Metric::Bandwidth)
        .map(|t| from_report(opts, &t));
    match (mine, theirs) {
        (Some(m), Some(t)) if opts.bidirectional => Some(combine(m, &t, false)),
        (Some(m), _) => Some(m),
        (None, t) => t,
    }
}

/// Our figures in perftest's report: MiB/s, or Gb/s with --report_gbits, as the peer prints them.
fn to_report(opts: &Options, b: &BandwidthStats) -> BwReport {
    let unit = |gbps: f64, mibps: f64| if opts.report_gbits { gbps } else { mibps };
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
fn from_report(opts: &Options, t: &BwReport) -> SizeResult {
    let gbps = if opts.report_gbits {
        t.bw_avg
    } else {
        t.bw_avg * 1_048_576.0 * 8.0 / 1e9
    };
    let bits = (t.size * t.iters) as f64 * 8.0;
    let elapsed_ns = if gbps > 0.0 { (bits / gbps) as u64 } else { 0 };
    let peak = (t.bw_peak > 0.0 && t.iters > 0).then(|| {
        let peak_gbps = if opts.report_gbits {
            t.bw_peak
        } else {
            t.bw_peak * 1_048_576.0 * 8.0 / 1e9
        };
        (t.size as f64 * 8.0) / peak_gbps
    });
    SizeResult {
        size: t.size,
        iterations: t.iters / u64::from(opts.qps.max(1)),
        measured: Measured::Bandwidth(BandwidthStats::compute(t.size, t.iters, elapsed_ns, peak)),
        cpu_util: None,
    }
}

fn print_row(opts: &Options, info: &RunInfo, r: &SizeResult, quiet: bool) {
    if quiet {
        let sel = match opts.output {
            Some(OutputArg::Bandwidth) => OutputSelect::Bandwidth,
            Some(OutputArg::MessageRate) => OutputSelect::MessageRate,
            _ => OutputSelect::Latency,
        };
        print!(
            "{}",
            report::console::single_value_in(sel, r, opts.report_gbits)
        );
    } else {
        print!("{}", report::table_row(info, r));
    }
}
