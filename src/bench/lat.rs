//! Latency: SEND and WRITE ping-pong, READ and atomic request/response, as perftest measures them.
//!
//! Each side stamps the time just before it posts iteration i; a sample is the time between two posts,
//! i.e. one full round trip including posting and polling, divided by [`TestKind::rtt_factor`] (2 for
//! SEND and WRITE, 1 for READ and atomics). `warmup` iterations run first and are not recorded. In
//! iteration mode each side runs warmup + n + 1 posts and records n samples; in duration mode it
//! records the samples that fall inside [margin, D − margin].
//!
//! [`TestKind::rtt_factor`]: crate::params::TestKind::rtt_factor

use super::atomic::{self, AtomicRun, Atomics};
use super::bw::RecvState;
use super::{
    Layout, Result, Watchdog, Window, check, check_len, cpu::CpuSample, exact_len, tr, validate,
};
use crate::params::RunMode;
use crate::params::{Role, Verb};
use crate::transport::{Completion, CompletionOp, Endpoint, RemoteAddr, SendOp, SendRequest};
use hdrhistogram::Histogram;
use std::time::Instant;

/// What one latency run measured.
#[derive(Debug, Clone)]
pub struct LatMeasurement {
    /// Message size.
    pub size: u64,
    /// One-way (or READ round-trip) latencies in nanoseconds.
    pub histogram: Histogram<u64>,
    /// `--cpu_util`: user share of CPU time during the window.
    pub cpu_util: Option<f64>,
    /// UC/UD between roceperf peers: iterations lost (see [`super::unreliable`]); `None` otherwise.
    pub lost: Option<u64>,
}

/// How to run one size.
#[derive(Debug, Clone, Copy)]
pub struct LatSpec {
    /// SEND, WRITE or READ.
    pub verb: Verb,
    /// Message size.
    pub size: u64,
    /// Iterations or duration.
    pub mode: RunMode,
    /// Iterations run before recording.
    pub warmup: u64,
    /// Round trip ÷ this = the reported latency.
    pub rtt_factor: u32,
    /// Measure CPU utilisation (duration mode).
    pub cpu_util: bool,
    /// Buffer layout.
    pub layout: Layout,
    /// `--validate`: a fresh pattern per iteration for SEND and WRITE, checked by the receiver; READ
    /// data checked against the responder's pattern (see [`super::validate`]); every atomic's original
    /// checked against its sequence (see [`super::atomic`]).
    pub validate: bool,
    /// `--latency_gap`: the initiator waits this long between iterations (busy, polling); the wait is
    /// left out of every sample, on both sides (the responder takes out the nominal gap).
    pub gap: std::time::Duration,
    /// UC/UD between roceperf peers: a lost message is counted after `loss_timeout` rather than
    /// waited for (see [`super::unreliable`]).
    pub unreliable: bool,
    /// How long the client waits for a reply before it counts the iteration lost (`-u`).
    pub loss_timeout: std::time::Duration,
    /// Atomic tests: the operations.
    pub atomic: Option<Atomics>,
    /// SEND and WRITE: a send is signaled every this many iterations, and on every iteration outside
    /// the sampled window (warm-up, the tail of a timed run, the last post); 1 signals every post, as
    /// perftest does. One operation is still in flight at a time: the next post waits for the peer's
    /// message, not for this one's completion. A soft queue pair asks its peer for an ACK only on a
    /// signaled send (as rxe does), so signaling every post would put a second packet, the ACK, on
    /// every hop of the ping-pong; a NIC acknowledges in hardware, off the host's path.
    pub signal_every: u32,
}

impl LatSpec {
    /// How many iterations each side runs: `warmup + n + 1` in iteration mode (module docs), no bound
    /// in duration mode.
    pub(super) fn posts(&self) -> u64 {
        match self.mode {
            RunMode::Iterations(n) => self.warmup + n + 1,
            RunMode::Duration { .. } => u64::MAX,
        }
    }
}

/// Counts completions while waiting; fails on an error completion.
struct Waiter {
    comps: [Completion; 16],
    recvs: u64,
    sends: u64,
    dog: Watchdog,
    /// In iterations mode, the length every received SEND must have (a perftest peer never says its -s).
    exact_len: Option<u64>,
    /// UD: the GRH in front of every received message, not counted in its length.
    headroom: u64,
}

impl Waiter {
    fn poll<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        let n = ep
            .poll_cq(&mut self.comps)
            .map_err(tr("polling completions"))?;
        if n > 0 {
            self.dog.progress();
        }
        for c in &self.comps[..n] {
            check(ep, c)?;
            match c.op {
                CompletionOp::Recv | CompletionOp::RecvWithImm => {
                    check_len(c, self.exact_len, self.headroom)?;
                    self.recvs += 1
                }
                _ => self.sends += 1,
            }
        }
        Ok(())
    }

    /// True when `stop` says the peer is done; an error when the peer has been silent too long.
    fn stopped(&mut self, stop: &mut dyn FnMut() -> bool) -> Result<bool> {
        self.dog.check(stop)
    }
}

/// Records samples inside the window, after the warm-up.
pub(super) struct Recorder {
    hist: Histogram<u64>,
    win: Window,
    warmup: u64,
    rtt_factor: u64,
    prev: Option<Instant>,
    cpu_start: Option<CpuSample>,
    cpu_end: Option<CpuSample>,
    cpu: bool,
    in_sample: bool,
    /// The last stamp's interval (ns, less any gap), recorded by [`commit`](Self::commit) once the
    /// post it preceded is on its way: the histogram's bookkeeping stays off the measured path.
    pending: Option<u64>,
}

impl Recorder {
    /// A recorder for one size of `spec`, its window starting now.
    pub(super) fn new(spec: &LatSpec) -> Recorder {
        Recorder {
            hist: crate::stats::new_latency_histogram(),
            win: Window::new(spec.mode),
            warmup: spec.warmup,
            rtt_factor: u64::from(spec.rtt_factor.max(1)),
            prev: None,
            cpu_start: None,
            cpu_end: None,
            cpu: spec.cpu_util,
            in_sample: false,
            pending: None,
        }
    }

    /// The interval since the last stamp is not a round trip (a message was lost in it): the next
    /// stamp records nothing.
    pub(super) fn forget(&mut self) {
        self.prev = None;
    }

    /// Duration mode: whether the run's time is up.
    pub(super) fn over(&self, now: Instant) -> bool {
        self.win.over(now)
    }

    /// Called just before posting iteration `i`, at `now`: the previous iteration's round trip ends,
    /// less `gap_ns` spent waiting on purpose (`--latency_gap`).
    pub(super) fn stamp(&mut self, i: u64, now: Instant, gap_ns: u64) {
        let inside = self.win.in_sample(now);
        if inside != self.in_sample && self.cpu {
            if inside {
                self.cpu_start = CpuSample::read();
            } else {
                self.cpu_end = CpuSample::read();
            }
        }
        self.in_sample = inside;
        if let Some(p) = self.prev
            && i > self.warmup
            && inside
        {
            self.commit();
            // The round trip as measured; `commit` divides it (a division is tens of cycles).
            self.pending = Some((now.duration_since(p).as_nanos() as u64).saturating_sub(gap_ns));
        }
        self.prev = Some(now);
    }

    /// Records the last stamp's sample; call it after the post that followed the stamp has left.
    #[inline]
    pub(super) fn commit(&mut self) {
        if let Some(rtt) = self.pending.take() {
            self.hist.saturating_record((rtt / self.rtt_factor).max(1));
        }
    }

    pub(super) fn finish(mut self, size: u64) -> LatMeasurement {
        self.commit();
        if self.cpu && self.cpu_end.is_none() {
            self.cpu_end = CpuSample::read();
        }
        LatMeasurement {
            size,
            histogram: self.hist,
            cpu_util: self
                .cpu_start
                .zip(self.cpu_end)
                .and_then(|(a, b)| a.util_until(&b)),
            lost: None,
        }
    }
}

/// `--latency_gap` before iteration `i`: the initiator waits the gap out, calling `poll` meanwhile (a
/// soft endpoint acknowledges and retransmits there), and returns how long it waited; the responder
/// returns the nominal gap. Either side takes what it returns out of the round trip it stamps next.
pub(super) fn gap(
    spec: &LatSpec,
    i: u64,
    initiator: bool,
    poll: &mut dyn FnMut() -> Result<()>,
) -> Result<u64> {
    if i == 0 || spec.gap.is_zero() {
        return Ok(0);
    }
    if !initiator {
        return Ok(spec.gap.as_nanos() as u64);
    }
    let t0 = Instant::now();
    while t0.elapsed() < spec.gap {
        poll()?;
    }
    Ok(t0.elapsed().as_nanos() as u64)
}

/// The value the last byte of a WRITE carries in iteration `i`: the count of WRITEs so far, modulo
/// 256, as ib_write_lat writes it (`(char)++scnt`), so that runs past 255 iterations still pair with
/// perftest. The first is 1, so a freshly cleared buffer never matches; the 0 of iteration 255 follows
/// a byte that holds 255, so it cannot match early either.
pub(super) fn marker(i: u64) -> u8 {
    (i + 1) as u8
}

/// WRITE latency: clears the byte where the peer's WRITE of `size` bytes leaves its marker, so a stale
/// value is never mistaken for the first WRITE. Call it before the out-of-band barrier that starts the size.
pub fn clear_marker<E: Endpoint>(ep: &mut E, layout: &Layout, size: u64) {
    let tail = (layout.half + size - 1) as usize;
    ep.buffer_mut(0)[tail] = 0;
}

/// Runs one size of a latency test, waiting for every message (RC, or a peer that marks no iteration;
/// [`super::latency`] hands UC/UD between roceperf peers to [`super::unreliable`]). `remote` addresses
/// the peer's target half on queue pair 0. The client stops after its iterations or duration; a server
/// (and any side in duration mode) also stops when `stop` says the peer is done. A READ server only serves: use [`super::bw::passive`] for it.
pub fn run<E: Endpoint>(
    ep: &mut E,
    spec: &LatSpec,
    role: Role,
    remote: RemoteAddr,
    recvs: &mut RecvState,
    stop: &mut dyn FnMut() -> bool,
) -> Result<LatMeasurement> {
    let size = spec.size as usize;
    let half = spec.layout.half as usize;
    let total = spec.posts();
    let mut rec = Recorder::new(spec);
    let mut w = Waiter {
        comps: [Completion::EMPTY; 16],
        recvs: 0,
        sends: 0,
        dog: Watchdog::new(match spec.verb {
            Verb::Send => "the peer's SEND or its completion",
            Verb::Write => "the peer's WRITE or its completion",
            Verb::Read => "a READ response",
            Verb::Atomic => "an atomic's response",
        }),
        exact_len: exact_len(spec.mode, spec.size),
        headroom: spec.layout.recv_headroom,
    };
    let target = remote;
    let (op, remote, offset) = match spec.verb {
        Verb::Send => (SendOp::Send, None, 0),
        Verb::Write => (SendOp::Write, Some(remote), 0),
        Verb::Read => (SendOp::Read, Some(remote), spec.layout.half),
        // Each atomic is the sequence's (operands, result slot): see the post below.
        Verb::Atomic => (SendOp::FetchAdd(atomic::ADD), Some(remote), 0),
    };
    let mut atomics = spec.atomic.map(|seq| AtomicRun::new(seq, 1));
    if spec.verb.consumes_receive() {
        recvs.fill(ep, &spec.layout, 1)?;
    }
    // The marker byte is cleared by the caller with [`clear_marker`] before the two sides synchronise:
    // clearing it here could wipe the peer's first WRITE when it arrives before this side gets here.
    let tail = half + size - 1;
    let initiator = role == Role::Client;
    let mut i = 0u64;
    // Signaled sends posted; each one's completion also retires the unsignaled ones before it.
    let mut posted = 0u64;
    // READ and atomics wait for each completion (it carries the data), so only SEND and WRITE defer theirs.
    let every = if spec.verb.reads_back() {
        1
    } else {
        u64::from(spec.signal_every.max(1))
    };
    // `i % every`, kept by counting: a division per iteration would sit on the measured path.
    let mut phase = 0u64;
    // The responder's (server's) wait for iteration i's message, or the client's wait for the reply.
    // On `stop` it leaves the loop labelled `$run`.
    macro_rules! wait_for_peer {
        ($i:expr, $run:lifetime) => {
            match spec.verb {
                Verb::Write => {
                    let m = marker($i);
                    while ep.peek(0, tail) != m {
                        w.poll(ep)?;
                        if w.stopped(stop)? {
                            break $run;
                        }
                    }
                    if spec.validate {
                        validate::check(
                            &ep.buffer(0)[half..tail],
                            spec.size,
                            Some($i),
                            Some($i),
                            "WRITE target",
                        )?;
                    }
                }
                Verb::Send => {
                    while w.recvs == 0 {
                        w.poll(ep)?;
                        if w.stopped(stop)? {
                            break $run;
                        }
                    }
                    w.recvs -= 1;
                    if spec.validate {
                        validate::check(
                            &ep.buffer(0)[half..half + size],
                            spec.size,
                            Some($i),
                            Some($i),
                            "SEND received",
                        )?;
                    }
                    recvs.replace(ep, &spec.layout, 0)?;
                }
                Verb::Read | Verb::Atomic => {}
            }
        };
    }
    'run: while i < total {
        if !initiator {
            wait_for_peer!(i, 'run);
        }
        // The signaled posts so far must be complete before the next (one operation in flight, as
        // perftest, when every post is signaled); each completion retires every unsignaled send
        // before it too, so at most 2 × `every` sends are ever unacknowledged.
        // Iteration i is signaled by schedule (both sides keep the same one).
        let due = phase == every - 1;
        if due {
            while w.sends < posted {
                w.poll(ep)?;
                if w.stopped(stop)? {
                    break 'run;
                }
            }
        }
        let gap_ns = gap(spec, i, initiator, &mut || w.poll(ep))?;
        let now = Instant::now();
        // A timed run ends after a multiple of `every` iterations, so that both sides' last posts
        // are signaled (the responder's last is its answer to the initiator's); the few after the
        // window are not recorded.
        if initiator && rec.win.over(now) && phase == 0 {
            rec.stamp(i, now, gap_ns);
            break;
        }
        rec.stamp(i, now, gap_ns);
        // Signaled every `every` posts, around the sampled window and on the last post of a run.
        let signaled = due || i + 1 == total || i <= spec.warmup || !rec.in_sample;
        if spec.validate {
            match spec.verb {
                // A READ that completed without placing data must not pass on the previous one's bytes.
                Verb::Read => ep.buffer_mut(0)[half..half + size].fill(0),
                // The atomic's result slot was cleared when the previous original was checked.
                Verb::Atomic => {}
                _ => validate::fill(
                    &mut ep.buffer_mut(0)[..size],
                    validate::seed(spec.size, Some(i)),
                ),
            }
        }
        if spec.verb == Verb::Write {
            ep.buffer_mut(0)[size - 1] = marker(i);
        }
        let wr = match &atomics {
            Some(a) => a.seq.request(0, i, target, true),
            None => SendRequest {
                wr_id: i,
                op,
                offset,
                len: spec.size as u32,
                remote,
                signaled,
                inline: false,
            },
        };
        ep.post_send(0, &wr).map_err(tr("posting a request"))?;
        posted += u64::from(signaled);
        // The poll sends what was just posted (a soft endpoint transmits at its next poll); only
        // then is the sample put into the histogram, outside the round trip being measured.
        w.poll(ep)?;
        rec.commit();
        match spec.verb {
            Verb::Atomic => {
                while w.sends < posted {
                    w.poll(ep)?;
                }
                if let Some(a) = atomics.as_mut() {
                    a.add(0, 1);
                    if spec.validate {
                        a.check(ep.buffer_mut(0), 0, i)?;
                    }
                }
            }
            Verb::Read => {
                while w.sends < posted {
                    w.poll(ep)?;
                }
                if spec.validate {
                    validate::check(
                        &ep.buffer(0)[half..half + size],
                        spec.size,
                        Some(i),
                        None,
                        "READ data",
                    )?;
                }
            }
            _ if initiator => wait_for_peer!(i, 'run),
            _ => {}
        }
        i += 1;
        phase = if due { 0 } else { phase + 1 };
    }
    // Reap the last send completion so that none is left to be counted in the next size. The peer
    // keeps polling until this side's results arrive, so the completion comes (or the connection
    // fails); `stop` does not end this wait.
    while w.sends < posted {
        w.poll(ep)?;
    }
    // One more poll hands the transport the chance to acknowledge the peer's last message now rather
    // than whenever this side polls next.
    w.poll(ep)?;
    if let Some(a) = atomics.as_mut()
        && spec.validate
    {
        // Outside the measurement: tells the responder how many operations to check its word for.
        a.tally(ep, &[target])?;
    }
    Ok(rec.finish(spec.size))
}

#[cfg(test)]
mod tests;
