//! Bandwidth: stream `-s`-byte operations with `-t` in flight per queue pair.
//!
//! One completion every `cq_mod`; bandwidth = bytes × messages ÷ (last completion − first post), as
//! perftest computes it.

use super::atomic::{self, AtomicRun, Atomics};
use super::interval::{Hooks, Stopper, Ticker};
use super::pace::{PaceSpec, PacedWindow, Pacer};
use super::qp_series::SeriesRecorder;
use super::{ClockTicker, Layout, Result, StopCheck, Window, check, cpu::CpuSample, tr, validate};
use crate::params::RunMode;
use crate::params::Verb;
use crate::stats::PEAK_MAX_MESSAGES;
use crate::stats::flows::QpSeries;
use crate::transport::{
    Completion, CompletionOp, Endpoint, RecvRequest, RemoteAddr, SendOp, SendRequest,
};
use std::time::Instant;

/// What one bandwidth run measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BwMeasurement {
    /// Message size.
    pub size: u64,
    /// Messages counted (all of them, or those completed inside the duration window).
    pub messages: u64,
    /// Nanoseconds from the first post (a SEND receiver: its first receive) to the last completion (or
    /// the window length).
    pub elapsed_ns: u64,
    /// perftest's peak, in ns per message, when measured.
    pub best_ns_per_msg: Option<f64>,
    /// `--cpu_util`: user share of CPU time during the window.
    pub cpu_util: Option<f64>,
    /// UC/UD receiver, `-n` runs: messages sent to this side that never arrived (see
    /// [`super::unreliable`]); `None` where nothing is counted.
    pub lost: Option<u64>,
    /// Of `messages`, those completed on each queue pair (index = queue pair); empty where this
    /// side counts only the total (a UC/UD receiver).
    pub per_qp: Vec<u64>,
    /// `--qp-series`: each queue pair's bytes over the measured interval.
    pub series: Option<QpSeries>,
}

/// How to run one size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BwSpec {
    /// SEND, WRITE or READ.
    pub verb: Verb,
    /// Message size.
    pub size: u64,
    /// Iterations per queue pair, or duration.
    pub mode: RunMode,
    /// Operations in flight per queue pair.
    pub tx_depth: u32,
    /// One signaled completion every this many operations.
    pub cq_mod: u32,
    /// Operations per queue pair run before measuring.
    pub warmup: u64,
    /// Receives kept posted per queue pair by a SEND receiver.
    pub rx_depth: u32,
    /// Measure perftest's peak (iteration mode, one queue pair, at most `stats::PEAK_MAX_MESSAGES`).
    pub peak: bool,
    /// Measure CPU utilisation (duration mode).
    pub cpu_util: bool,
    /// Buffer layout.
    pub layout: Layout,
    /// `--validate`: check every received SEND and every READ's data against the size's pattern, and
    /// every atomic's original against its sequence.
    pub validate: bool,
    /// `--rate_limit`: pace what this side posts (all queue pairs together).
    pub pace: Option<PaceSpec>,
    /// UC/UD (`-c`): messages may be lost; a receiver counts them instead of waiting for them.
    pub unreliable: bool,
    /// Atomic tests: the operations (which one, over which words, into which result slots).
    pub atomic: Option<Atomics>,
    /// `--qp-series MS`: sample each queue pair's completed bytes every MS milliseconds.
    pub qp_series: Option<u32>,
}

/// `--validate`: checks the target region of queue pair `q` (where SENDs and READ data land).
pub(crate) fn check_target<E: Endpoint>(
    ep: &E,
    spec: &BwSpec,
    q: usize,
    len: u64,
    what: &'static str,
) -> Result<()> {
    if len != spec.size {
        return Err(super::Error::ValidationLength {
            what,
            size: spec.size,
            len,
        });
    }
    let half = spec.layout.half as usize;
    validate::check(
        &ep.buffer(q)[half..half + spec.size as usize],
        spec.size,
        None,
        None,
        what,
    )
}

/// `--validate`, READ: checks READ `k`'s slot on queue pair `q`, then clears it, so that a later READ
/// which lands nothing there cannot pass on this one's bytes.
fn check_read_slot<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    s: &validate::ReadSlots,
    q: usize,
    k: u64,
) -> Result<()> {
    let (off, n) = (s.offset(k) as usize, spec.size as usize);
    let slot = &mut ep.buffer_mut(q)[off..off + n];
    validate::check(slot, spec.size, Some(k), None, "READ data")?;
    slot.fill(0);
    Ok(())
}

/// Post and completion times for the peak, allocated before the run.
struct PeakRecorder {
    origin: Instant,
    posted: Vec<u64>,
    completed: Vec<u64>,
}

/// Streams operations at the peer and measures. The active side of every bandwidth test.
/// `duplex`: both sides SEND (bidirectional send_bw), so this side also reposts the receives the
/// peer's SENDs consume. `hooks`: a run without end's interval samples, and the stop that ends it
/// ([`Hooks::none`] otherwise).
pub(crate) fn active<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    remotes: &[RemoteAddr],
    mut duplex: Option<&mut RecvState>,
    hooks: Hooks<'_>,
) -> Result<BwMeasurement> {
    if let Some(r) = duplex.as_deref_mut() {
        r.fill(ep, &spec.layout, spec.rx_depth)?;
    }
    // Atomics number their operations across the warm-up and the measurement.
    let mut atomics = spec.atomic.map(|seq| AtomicRun::new(seq, ep.qp_count()));
    if spec.warmup > 0 {
        stream(
            ep,
            spec,
            remotes,
            RunMode::Iterations(spec.warmup),
            None,
            duplex.as_deref_mut(),
            atomics.as_mut(),
            Hooks::none(),
        )?;
    }
    let peak = match spec.mode {
        RunMode::Iterations(n)
            if spec.peak && ep.qp_count() == 1 && n <= PEAK_MAX_MESSAGES as u64 =>
        {
            Some(PeakRecorder {
                origin: Instant::now(),
                posted: Vec::with_capacity(n as usize),
                completed: Vec::with_capacity(n as usize),
            })
        }
        _ => None,
    };
    let m = stream(
        ep,
        spec,
        remotes,
        spec.mode,
        peak,
        duplex,
        atomics.as_mut(),
        hooks,
    )?;
    if let Some(a) = atomics.as_mut()
        && spec.validate
    {
        // Outside the measurement: tells the responder how many operations to check its words for.
        a.tally(ep, remotes)?;
    }
    Ok(m)
}

#[allow(clippy::too_many_arguments)]
fn stream<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    remotes: &[RemoteAddr],
    mode: RunMode,
    mut peak: Option<PeakRecorder>,
    mut duplex: Option<&mut RecvState>,
    mut atomics: Option<&mut AtomicRun>,
    hooks: Hooks<'_>,
) -> Result<BwMeasurement> {
    let qps = ep.qp_count();
    let cq_mod = u64::from(spec.cq_mod.max(1));
    // --validate, READ: every READ lands in a slot of its own, and no more are in flight than slots.
    let slots = (spec.validate && spec.verb == Verb::Read)
        .then(|| validate::ReadSlots::new(&spec.layout, spec.size, spec.tx_depth))
        .flatten();
    let depth = u64::from(spec.tx_depth.max(1)).min(slots.map_or(u64::MAX, |s| s.count));
    let duration = matches!(mode, RunMode::Duration { .. });
    let mut total = vec![
        match mode {
            RunMode::Iterations(n) => n,
            RunMode::Duration { .. } => u64::MAX,
        };
        qps
    ];
    let mut posted = vec![0u64; qps];
    let mut done = vec![0u64; qps];
    let (op, offset, remote_of) = match spec.verb {
        Verb::Send => (SendOp::Send, 0, false),
        Verb::Write => (SendOp::Write, 0, true),
        // READ responses land in the target half; SEND and WRITE go from the source half.
        Verb::Read => (SendOp::Read, spec.layout.half, true),
        // Each atomic is the sequence's (operands, word, result slot): see the post below.
        Verb::Atomic => (SendOp::FetchAdd(atomic::ADD), 0, true),
    };
    let mut comps = [Completion::EMPTY; 64];
    let win = Window::new(mode);
    let at = |ns: u64| win.start + std::time::Duration::from_nanos(ns);
    let since = |t: Instant| t.duration_since(win.start).as_nanos() as u64;
    let mut pacer = spec.pace.map(|p| Pacer::new(p, 0));
    let mut released = 0u64;
    let mut paced = PacedWindow::default();
    let Hooks { intervals, stop } = hooks;
    let mut ticker = intervals.map(|i| Ticker::new(i, win.start));
    let mut stopper = Stopper::new(stop);
    let mut first_post: Option<Instant> = None;
    let mut last_completion = Instant::now();
    let mut sample_start: Option<(Instant, Option<CpuSample>)> = None;
    let mut sample_end: Option<(Instant, Option<CpuSample>)> = None;
    let mut counted = 0u64;
    // Per queue pair: what `counted` counts (timed runs), for each one's share and series.
    let mut counted_qp = vec![0u64; qps];
    let mut series = spec.qp_series.map(|ms| SeriesRecorder::new(ms, qps, mode));
    let mut posting = true;
    let mut clock = ClockTicker::new();
    loop {
        let mut allowance = u64::MAX;
        // Paced, grants fall due to the nanosecond: the clock is read on every turn. Unpaced, the
        // window's edges need the time about every 20 us, not on every turn (a clock read is a tenth
        // of a turn here).
        let now = match (&pacer, duration) {
            (Some(_), _) => Some(Instant::now()),
            (None, true) => clock.tick(),
            (None, false) => None,
        };
        if let Some(p) = pacer.as_mut()
            && posting
            && let Some(now) = now
        {
            allowance = p.grant(since(now));
        }
        if duration && let Some(now) = now {
            let cpu = || spec.cpu_util.then(CpuSample::read).flatten();
            match pacer.as_ref() {
                // Paced, the window opens and closes on burst releases (see PacedWindow).
                Some(p) if p.released() != released => {
                    released = p.released();
                    let due = p.last_due();
                    match paced.release(due, since(now), win.in_sample(at(due))) {
                        Some(true) => sample_start = Some((at(due), cpu())),
                        Some(false) => sample_end = Some((at(due), cpu())),
                        None => {}
                    }
                }
                Some(_) => {}
                None if sample_start.is_none() && win.in_sample(now) => {
                    sample_start = Some((now, cpu()));
                }
                None if sample_start.is_some() && sample_end.is_none() && !win.in_sample(now) => {
                    sample_end = Some((now, cpu()));
                }
                None => {}
            }
            if let Some(t) = ticker.as_mut() {
                t.tick(now, counted);
            }
            if posting && (win.over(now) || stopper.stopped()) {
                posting = false;
                // Stopped (not timed out) inside the window: the run's measurement ends here.
                match pacer.as_ref() {
                    Some(p) if paced.stop(p.last_due()) => {
                        sample_end = Some((at(p.last_due()), cpu()));
                    }
                    None if sample_start.is_some() && sample_end.is_none() => {
                        sample_end = Some((now, cpu()));
                    }
                    _ => {}
                }
                // Finish on a signaled operation so every posted one is accounted for.
                for q in 0..qps {
                    total[q] = posted[q].div_ceil(cq_mod) * cq_mod;
                }
            }
        }
        if !duration && posting && stopper.stopped() {
            // Iterations, stopped (a signal on either side): what was posted is finished, up to a
            // signaled operation, and the measurement is what completed.
            posting = false;
            for q in 0..qps {
                total[q] = total[q].min(posted[q].div_ceil(cq_mod) * cq_mod);
            }
        }
        if !posting {
            // The window is closed: the few operations up to a signaled one go unpaced.
            allowance = u64::MAX;
        }
        for q in 0..qps {
            while allowance > 0 && posted[q] < total[q] && posted[q] - done[q] < depth {
                let idx = posted[q];
                let signaled = (idx + 1).is_multiple_of(cq_mod) || idx + 1 == total[q];
                // Paced, each burst ends on a signaled operation, so completions count whole bursts.
                let signaled = signaled || (allowance == 1 && pacer.is_some());
                let wr = match atomics.as_deref() {
                    Some(a) => SendRequest {
                        wr_id: idx,
                        ..a.seq.request(q, a.posted(q) + idx, remotes[q], signaled)
                    },
                    None => SendRequest {
                        wr_id: idx,
                        op,
                        offset: slots.map_or(offset, |s| s.offset(idx)),
                        len: spec.size as u32,
                        remote: remote_of.then(|| remotes[q]),
                        signaled,
                        inline: false,
                    },
                };
                // The clock is read only when needed: at 5 Mpps a read per post would cost ~10%.
                let t = (first_post.is_none() || peak.is_some()).then(Instant::now);
                match ep.post_send(q, &wr) {
                    Ok(()) => {}
                    Err(crate::transport::Error::QueueFull) => break,
                    Err(e) => return Err(tr("posting a request")(e)),
                }
                let t = t.unwrap_or(last_completion);
                first_post.get_or_insert(t);
                if let Some(p) = peak.as_mut() {
                    p.posted.push(t.duration_since(p.origin).as_nanos() as u64);
                }
                posted[q] += 1;
                if let Some(p) = pacer.as_mut() {
                    p.take(1);
                    allowance -= 1;
                    if posting {
                        paced.posted();
                    }
                }
            }
        }
        let n = ep.poll_cq(&mut comps).map_err(tr("polling completions"))?;
        if n > 0 {
            let t = Instant::now();
            for c in &comps[..n] {
                check(ep, c)?;
                let q = c.qp as usize;
                if matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm) {
                    if spec.validate {
                        let len = payload_len(c, &spec.layout);
                        check_target(ep, spec, q, len, "SEND received")?;
                    }
                    if let Some(r) = duplex.as_deref_mut() {
                        r.replace(ep, &spec.layout, q)?;
                    }
                    continue;
                }
                if spec.validate
                    && let Some(a) = atomics.as_deref_mut()
                {
                    // Every atomic completed up to this one, each original in its slot.
                    let base = a.posted(q);
                    for k in done[q]..=c.wr_id {
                        a.check(ep.buffer_mut(q), q, base + k)?;
                    }
                }
                match slots {
                    // Every READ completed up to this one, each in its slot, cleared once checked.
                    Some(s) => {
                        for k in done[q]..=c.wr_id {
                            check_read_slot(ep, spec, &s, q, k)?;
                        }
                    }
                    None if spec.validate && spec.verb == Verb::Read => {
                        check_target(ep, spec, q, spec.size, "READ data")?;
                    }
                    None => {}
                }
                let newly = c.wr_id + 1 - done[q];
                done[q] = c.wr_id + 1;
                if sample_start.is_some() && sample_end.is_none() {
                    counted += newly;
                    counted_qp[q] += newly;
                }
                if let Some(p) = peak.as_mut() {
                    p.completed
                        .push(t.duration_since(p.origin).as_nanos() as u64);
                }
            }
            last_completion = t;
            // --qp-series, at this clock read: iterations from the first post, a timed run
            // inside its window, from the window's start.
            if let Some(r) = series.as_mut() {
                let (origin, counts) = if duration {
                    let inside = sample_end.is_none().then_some(sample_start).flatten();
                    (inside.map(|(s, _)| s), &counted_qp)
                } else {
                    (first_post, &done)
                };
                if let Some(o) = origin
                    && r.due(t.saturating_duration_since(o).as_nanos() as u64)
                {
                    r.sample(
                        t.saturating_duration_since(o).as_nanos() as u64,
                        counts,
                        spec.size,
                    );
                }
            }
        }
        if (0..qps).all(|q| done[q] == total[q]) {
            break;
        }
    }
    if let Some(a) = atomics {
        for (q, &n) in posted.iter().enumerate() {
            a.add(q, n);
        }
    }
    let (messages, elapsed_ns, cpu_util, per_qp) = match mode {
        RunMode::Iterations(_) => {
            let mut first = first_post.unwrap_or(last_completion);
            let mut end = last_completion;
            // Paced, the rate is counted over whole periods of the schedule: from its start (the
            // first burst's due time) to the end of the last burst's period, which belongs to the run
            // because the sender was not allowed to post more before it ended.
            if let Some(p) = pacer.as_ref() {
                first = win.start;
                end = end.max(at(p.period_end()));
            }
            let per_qp = total.clone();
            (
                total.iter().sum(),
                end.duration_since(first).as_nanos() as u64,
                None,
                per_qp,
            )
        }
        RunMode::Duration { .. } => {
            let (s, cs) = sample_start.unwrap_or((win.start, None));
            let (e, ce) = sample_end.unwrap_or((last_completion, None));
            let util = cs.zip(ce).and_then(|(a, b)| a.util_until(&b));
            let elapsed = e.duration_since(s).as_nanos() as u64;
            // Paced, the row counts the window's posts (whole bursts); the shares count what
            // completed inside it, which may differ from that by the bursts in flight at its edges.
            match paced.elapsed_ns() {
                Some(paced_ns) => (paced.messages(), paced_ns, util, counted_qp),
                None => (counted, elapsed, util, counted_qp),
            }
        }
    };
    let best_ns_per_msg =
        peak.and_then(|p| crate::stats::perftest_peak(&p.posted, &p.completed, cq_mod));
    let series = series.map(|r| {
        let (origin, end) = if duration {
            let s = sample_start.map_or(win.start, |(s, _)| s);
            (s, sample_end.map_or(last_completion, |(e, _)| e))
        } else {
            (first_post.unwrap_or(last_completion), last_completion)
        };
        let end_ns = end.saturating_duration_since(origin).as_nanos() as u64;
        r.finish(end_ns, &per_qp, spec.size)
    });
    Ok(BwMeasurement {
        size: spec.size,
        messages,
        elapsed_ns,
        best_ns_per_msg,
        cpu_util,
        lost: None,
        per_qp,
        series,
    })
}

/// The message bytes of a receive completion: its length without the GRH a UD receive starts with.
#[inline]
pub(crate) fn payload_len(c: &Completion, layout: &Layout) -> u64 {
    u64::from(c.byte_len).saturating_sub(layout.recv_headroom)
}

/// Receives posted per queue pair, kept across sizes so a sweep never over-posts.
#[derive(Debug, Clone, Default)]
pub struct RecvState {
    posted: Vec<u32>,
}

impl RecvState {
    /// Tops every queue pair up to `depth` receives covering the whole target half (any size fits).
    pub fn fill<E: Endpoint>(&mut self, ep: &mut E, layout: &Layout, depth: u32) -> Result<()> {
        self.posted.resize(ep.qp_count(), 0);
        for q in 0..ep.qp_count() {
            while self.posted[q] < depth {
                self.post(ep, layout, q)?;
            }
        }
        Ok(())
    }

    fn post<E: Endpoint>(&mut self, ep: &mut E, layout: &Layout, q: usize) -> Result<()> {
        // UD: the GRH lands in the headroom just before the target half, the message on it.
        let h = layout.recv_headroom;
        let wr = RecvRequest {
            wr_id: q as u64,
            offset: layout.half - h,
            len: (layout.half + h).min(u64::from(u32::MAX)) as u32,
        };
        ep.post_recv(q, &wr).map_err(tr("posting a receive"))?;
        self.posted[q] += 1;
        Ok(())
    }

    /// A receive of queue pair `q` was consumed; post another in its place.
    pub fn replace<E: Endpoint>(&mut self, ep: &mut E, layout: &Layout, q: usize) -> Result<()> {
        if self.posted.len() <= q {
            self.posted.resize(q + 1, 0);
        }
        self.posted[q] = self.posted[q].saturating_sub(1);
        self.post(ep, layout, q)
    }
}

/// Stop checks (every 0.5 ms) between two questions to the transport whether a queue pair failed.
const FAILURE_CHECK_EVERY: u32 = 64;

/// What [`passive`] is doing, for its errors, when the caller has nothing more specific to say.
pub(crate) const SERVING: &str = "serving the peer";

/// The passive side of WRITE and READ tests: keep the transport running (it applies WRITEs and answers
/// READs) until `stop` says the peer is done. With `recvs`, SENDs that still arrive get fresh receives.
/// `during` names the wait in a transport error (e.g. [`SERVING`]); a queue pair that failed where
/// no completion says so ([`Endpoint::failure`]) ends it with that failure named.
pub(crate) fn passive<E: Endpoint>(
    ep: &mut E,
    during: &'static str,
    stop: &mut dyn FnMut() -> bool,
    mut recvs: Option<(&mut RecvState, Layout)>,
) -> Result<()> {
    let mut comps = [Completion::EMPTY; 64];
    let mut sc = StopCheck::new();
    let mut checks = 0u32;
    loop {
        let n = match ep.poll_cq(&mut comps) {
            Ok(n) => n,
            // A peer that has finished (and said so out of band) may close its data connection first.
            Err(_) if stop() => return Ok(()),
            Err(e) => return Err(tr(during)(e)),
        };
        for c in &comps[..n] {
            check(ep, c)?;
            if let Some((r, layout)) = recvs.as_mut()
                && matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm)
            {
                r.replace(ep, layout, c.qp as usize)?;
            }
        }
        if sc.due().is_some() {
            // A queue pair whose responder refused a request is in ERROR: the peer's requests
            // now go unanswered, and only this side knows which request it was and why. Asking
            // looks at every queue pair, so it is asked every 32 ms, not at every stop check.
            checks = checks.wrapping_add(1);
            if checks.is_multiple_of(FAILURE_CHECK_EVERY)
                && let Some(failure) = ep.failure()
            {
                return Err(super::Error::QpFailed(failure));
            }
            if stop() {
                return Ok(());
            }
        }
    }
}

mod receive;
pub(crate) use receive::{receiver, take_recv};

#[cfg(test)]
mod tests;
