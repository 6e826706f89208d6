//! The receiving side of send_bw over RC: counts incoming SENDs and measures its own bandwidth (for UC
//! and UD, [`crate::bench::bw_receiver`] picks [`crate::bench::unreliable`] instead).

use super::{BwMeasurement, BwSpec, RecvState, check_target, payload_len};
use crate::bench::interval::{Hooks, Stopper, Ticker};
use crate::bench::qp_series::SeriesRecorder;
use crate::bench::{Result, Watchdog, Window, check, check_len, cpu::CpuSample, exact_len, tr};
use crate::params::RunMode;
use crate::transport::{Completion, CompletionOp, Endpoint};
use std::time::Instant;

/// The receiving side of send_bw: counts incoming SENDs and measures its own bandwidth, from its first
/// receive to its last (iteration mode; see the clock comment inside). In duration mode it runs until
/// `stop` says the sender is done. `hooks`: a run without end's samples of what arrives (duration
/// mode), and the stop that cuts a `-n` run short with what arrived so far (a signal, on either side).
pub(crate) fn receiver<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    recvs: &mut RecvState,
    stop: &mut dyn FnMut() -> bool,
    hooks: Hooks<'_>,
) -> Result<BwMeasurement> {
    let Hooks {
        intervals,
        stop: cut,
    } = hooks;
    let mut cut = Stopper::new(cut);
    let qps = ep.qp_count();
    recvs.fill(ep, &spec.layout, spec.rx_depth)?;
    let mut got = vec![0u64; qps];
    let mut comps = [Completion::EMPTY; 64];
    let want = |n: u64| move |got: &[u64]| got.iter().all(|&g| g >= n);
    let exact_len = exact_len(spec.mode, spec.size);
    let mut poll = |ep: &mut E, got: &mut [u64], recvs: &mut RecvState| -> Result<usize> {
        let n = ep.poll_cq(&mut comps).map_err(tr("polling completions"))?;
        for c in &comps[..n] {
            if let Some(qp) = take_recv(ep, spec, recvs, c, exact_len)? {
                got[qp] += 1;
            }
        }
        Ok(n)
    };
    // The sender finishing (its SENDs complete once the kernel has them) is no reason to stop while
    // its messages are still in flight; a sender that died or stalled trips the watchdog.
    let mut dog = Watchdog::new("the peer's SENDs");
    let warm = want(spec.warmup);
    while !warm(&got) {
        if poll(ep, &mut got, recvs)? > 0 {
            dog.progress();
        }
        dog.check(stop)?;
    }
    let base: Vec<u64> = got.clone();
    let win = Window::new(spec.mode);
    let mut last = win.start;
    // --qp-series: what each queue pair received since the measurement began, at each sample.
    let mut series = spec
        .qp_series
        .map(|ms| SeriesRecorder::new(ms, qps, spec.mode));
    let mut since = vec![0u64; qps];
    match spec.mode {
        RunMode::Iterations(n) => {
            let target = spec.warmup + n;
            // A receiver cannot see when the sender began, so its clock starts at an arrival: the last
            // warm-up message's (≈ win.start), or without warm-up the first measured one, as ib_send_bw's
            // server does (tposted[0] on its first receive completion). Starting when this side began to
            // wait would add the peer's start-up delay, which a perftest peer does not count.
            let mut first = (spec.warmup > 0).then_some(win.start);
            let measured = |got: &[u64], into: &mut [u64]| {
                for (d, g) in into.iter_mut().zip(got) {
                    *d = g.saturating_sub(spec.warmup);
                }
            };
            while !got.iter().all(|&g| g >= target) {
                if poll(ep, &mut got, recvs)? > 0 {
                    last = Instant::now();
                    let f = *first.get_or_insert(last);
                    dog.progress();
                    let at = last.saturating_duration_since(f).as_nanos() as u64;
                    if let Some(r) = series.as_mut()
                        && r.due(at)
                    {
                        measured(&got, &mut since);
                        r.sample(at, &since, spec.size);
                    }
                }
                dog.check(stop)?;
                if cut.stopped() {
                    break;
                }
            }
            measured(&got, &mut since);
            let elapsed_ns = last.duration_since(first.unwrap_or(last)).as_nanos() as u64;
            Ok(BwMeasurement {
                size: spec.size,
                // All n per queue pair, or what arrived before a stop cut the run short.
                messages: since.iter().sum::<u64>().min(n * qps as u64),
                elapsed_ns,
                best_ns_per_msg: None,
                cpu_util: None,
                lost: None,
                series: series.map(|r| r.finish(elapsed_ns, &since, spec.size)),
                per_qp: since,
            })
        }
        RunMode::Duration { .. } => {
            let mut start: Option<(Instant, u64, Option<CpuSample>)> = None;
            let mut end: Option<(Instant, u64, Option<CpuSample>)> = None;
            // Each queue pair's count when the window opened.
            let mut at_start = vec![0u64; qps];
            let mut ticker = intervals.map(|i| Ticker::new(i, win.start));
            loop {
                if poll(ep, &mut got, recvs)? > 0 {
                    dog.progress();
                }
                let now = Instant::now();
                let count = got.iter().sum::<u64>() - base.iter().sum::<u64>();
                if let Some(t) = ticker.as_mut() {
                    t.tick(now, count);
                }
                if start.is_none() && win.in_sample(now) {
                    start = Some((now, count, spec.cpu_util.then(CpuSample::read).flatten()));
                    at_start.copy_from_slice(&got);
                } else if start.is_some() && end.is_none() && !win.in_sample(now) {
                    end = Some((now, count, spec.cpu_util.then(CpuSample::read).flatten()));
                    in_window(&got, &at_start, &mut since);
                } else if let Some((s, ..)) = start
                    && end.is_none()
                    && let Some(r) = series.as_mut()
                {
                    let at = now.saturating_duration_since(s).as_nanos() as u64;
                    if r.due(at) {
                        in_window(&got, &at_start, &mut since);
                        r.sample(at, &since, spec.size);
                    }
                }
                if dog.check(stop)? {
                    break;
                }
            }
            let now = Instant::now();
            let total = got.iter().sum::<u64>() - base.iter().sum::<u64>();
            let (s, c0, cs) = start.unwrap_or((win.start, 0, None));
            let (e, c1, ce) = end.unwrap_or((now, total, None));
            if end.is_none() {
                // The window never closed (the sender stopped first): everything since it opened.
                let from = if start.is_some() { &at_start } else { &base };
                in_window(&got, from, &mut since);
            }
            let elapsed_ns = e.duration_since(s).as_nanos() as u64;
            Ok(BwMeasurement {
                size: spec.size,
                messages: c1 - c0,
                elapsed_ns,
                best_ns_per_msg: None,
                cpu_util: cs.zip(ce).and_then(|(a, b)| a.util_until(&b)),
                lost: None,
                series: series.map(|r| r.finish(elapsed_ns, &since, spec.size)),
                per_qp: since,
            })
        }
    }
}

/// Each queue pair's count `got` less its count `from` when the window opened, into `into`.
fn in_window(got: &[u64], from: &[u64], into: &mut [u64]) {
    for ((d, g), f) in into.iter_mut().zip(got).zip(from) {
        *d = g - f;
    }
}

/// Takes one completion of a send_bw receiver: checks it, and if it is a SEND's receive, checks its
/// length (`exact_len` where every SEND is of that size) and, under `--validate`, what landed, then
/// posts the receive again. Returns the queue pair the SEND arrived on, for the caller to count.
#[inline]
pub(crate) fn take_recv<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    recvs: &mut RecvState,
    c: &Completion,
    exact_len: Option<u64>,
) -> Result<Option<usize>> {
    check(ep, c)?;
    if c.op != CompletionOp::Recv {
        return Ok(None);
    }
    check_len(c, exact_len, spec.layout.recv_headroom)?;
    let qp = c.qp as usize;
    if spec.validate {
        let len = payload_len(c, &spec.layout);
        check_target(ep, spec, qp, len, "SEND received")?;
    }
    recvs.replace(ep, &spec.layout, qp)?;
    Ok(Some(qp))
}
