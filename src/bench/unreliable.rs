//! The drivers' UC and UD (`-c`) side: nothing is resent, so a lost message is counted, never waited for.
//!
//! What a lossy run reports, per test:
//!
//! - **send_bw, the receiver** (`-n` runs): it stops when every message of the size arrived, or when the
//!   peer says it is done and nothing more arrived for [`DRAIN_QUIET`]. Its row counts the messages
//!   it received (bandwidth is of those: goodput) and `lost` = (warm-up + `-n`) × queue pairs − received.
//!   In `-D` runs it counts what arrives in its window, as perftest, and no loss.
//! - **write_bw** over UC: RDMA WRITEs complete only at the writer, which measures as always; where
//!   the transport can see WRITEs land (soft), the written side counts the ones that never did
//!   (`app::session`).
//! - **send_lat, write_lat**: every message carries its iteration, modulo 256, in its last byte (as
//!   ib_write_lat's WRITEs do). The client waits for iteration *i*'s reply at most the loss timeout
//!   (`-u`: 4.096 µs × 2^N, 67 ms by default); then *i* is counted lost, no sample is taken for it and
//!   the next iteration starts. The server answers each message it gets with the reply of that
//!   iteration, counts the iterations it never saw, and ignores stale arrivals. Samples are round trips
//!   that really happened: one less per lost iteration (the interval spanning a loss is dropped).
//!   Between roceperf peers only: a perftest peer marks no iteration, so against it the plain RC loop
//!   runs (and, like perftest's own, waits for a lost message until the stall limit).

use super::bw::{BwMeasurement, BwSpec, RecvState, take_recv};
use super::interval::{Hooks, Stopper, Ticker};
use super::lat::{LatMeasurement, LatSpec, Recorder, marker};
use super::{
    Error, Result, STALL_LIMIT, StopCheck, Window, check, check_len, cpu::CpuSample, exact_len, tr,
    validate,
};
use crate::params::{Role, RunMode, Verb};
use crate::transport::{Completion, CompletionOp, Endpoint, RemoteAddr, SendOp, SendRequest};
use std::time::{Duration, Instant};

/// How long a receiver keeps draining after the peer said it is done: what is still in flight (in
/// the kernel's socket buffer, on the wire) arrives within microseconds, or milliseconds in a VM.
pub(crate) const DRAIN_QUIET: Duration = Duration::from_millis(300);

/// Tracks silence from the peer: a receiver that has heard nothing for [`STALL_LIMIT`] while the
/// peer is not done fails; once the peer is done, [`DRAIN_QUIET`] of silence ends the wait.
struct Quiet {
    pace: StopCheck,
    events: u64,
    seen: u64,
    since: Instant,
    peer_done: bool,
    waiting_for: &'static str,
}

impl Quiet {
    fn new(waiting_for: &'static str) -> Quiet {
        let pace = StopCheck::new();
        Quiet {
            since: pace.last,
            pace,
            events: 0,
            seen: 0,
            peer_done: false,
            waiting_for,
        }
    }

    /// When due, asks `stop`; true once the peer is done and quiet (`drain`) or done at all.
    fn over(&mut self, stop: &mut dyn FnMut() -> bool, drain: Duration) -> Result<bool> {
        let Some(now) = self.pace.due() else {
            return Ok(false);
        };
        if self.events != self.seen {
            self.seen = self.events;
            self.since = now;
        }
        self.peer_done = self.peer_done || stop();
        let quiet = now.duration_since(self.since);
        if self.peer_done {
            return Ok(quiet >= drain);
        }
        if quiet > STALL_LIMIT {
            return Err(Error::Stalled {
                waiting_for: self.waiting_for,
                secs: quiet.as_secs(),
                peer_done: false,
            });
        }
        Ok(false)
    }
}

/// The receiving side of send_bw over UC/UD: counts what arrives and what does not (module docs).
pub(super) fn receiver<E: Endpoint>(
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
    let mut was_cut = false;
    let qps = ep.qp_count() as u64;
    recvs.fill(ep, &spec.layout, spec.rx_depth)?;
    let expected = match spec.mode {
        RunMode::Iterations(n) => Some((spec.warmup + n) * qps),
        RunMode::Duration { .. } => None,
    };
    let exact_len = exact_len(spec.mode, spec.size);
    let warm = spec.warmup * qps;
    let mut comps = [Completion::EMPTY; 64];
    let mut got = 0u64;
    let mut quiet = Quiet::new("the peer's SENDs");
    let win = Window::new(spec.mode);
    let mut ticker = intervals.map(|i| Ticker::new(i, win.start));
    // The clock starts where the RC receiver's does: after the warm-up, or at the first arrival.
    let mut first: Option<Instant> = None;
    let mut last = win.start;
    let mut window: [Option<(Instant, u64, Option<CpuSample>)>; 2] = [None, None];
    let drain = if expected.is_some() {
        DRAIN_QUIET
    } else {
        Duration::ZERO
    };
    loop {
        let n = ep.poll_cq(&mut comps).map_err(tr("polling completions"))?;
        let before = got;
        for c in &comps[..n] {
            if take_recv(ep, spec, recvs, c, exact_len)?.is_some() {
                got += 1;
            }
        }
        if got > before {
            quiet.events += 1;
            last = Instant::now();
            if got > warm && first.is_none() {
                first = Some(last);
            }
        }
        if spec.mode.is_duration() {
            let now = Instant::now();
            if let Some(t) = ticker.as_mut() {
                t.tick(now, got);
            }
            let inside = win.in_sample(now);
            let cpu = || spec.cpu_util.then(CpuSample::read).flatten();
            match window {
                [None, _] if inside => window[0] = Some((now, got, cpu())),
                [Some(_), None] if !inside => window[1] = Some((now, got, cpu())),
                _ => {}
            }
        }
        if expected.is_some_and(|e| got >= e) || quiet.over(stop, drain)? {
            break;
        }
        if expected.is_some() && cut.stopped() {
            was_cut = true;
            break;
        }
    }
    let m = match spec.mode {
        RunMode::Iterations(_) => BwMeasurement {
            size: spec.size,
            messages: got.saturating_sub(warm),
            elapsed_ns: first.map_or(0, |f| last.duration_since(f).as_nanos() as u64),
            best_ns_per_msg: None,
            cpu_util: None,
            // Cut short, how many the sender sent is not known here.
            lost: expected.filter(|_| !was_cut).map(|e| e.saturating_sub(got)),
            // Counted as one total (the warm-up is the peer's, across its queue pairs).
            per_qp: Vec::new(),
            series: None,
        },
        RunMode::Duration { .. } => {
            let now = Instant::now();
            let (s, c0, cs) = window[0].unwrap_or((win.start, 0, None));
            let (e, c1, ce) = window[1].unwrap_or((now, got, None));
            BwMeasurement {
                size: spec.size,
                messages: c1 - c0,
                elapsed_ns: e.duration_since(s).as_nanos() as u64,
                best_ns_per_msg: None,
                cpu_util: cs.zip(ce).and_then(|(a, b)| a.util_until(&b)),
                lost: None,
                per_qp: Vec::new(),
                series: None,
            }
        }
    };
    Ok(m)
}

/// Where a side looks for the peer's messages, and what they carry.
struct Inbox {
    /// SEND (receive completions) or WRITE (the marker byte).
    verb: Verb,
    /// Offset of the message's last byte, the marker.
    tail: usize,
    /// The marker byte last seen at `tail` (WRITE), so a change is a new message.
    last_marker: u8,
    /// Receive completions not handled yet.
    arrived: u64,
    /// Send completions still owed.
    sends_owed: u64,
    comps: [Completion; 16],
}

impl Inbox {
    /// Polls once, reposting a receive for every SEND that took one; returns the marker of a
    /// message that arrived, if one did.
    fn poll<E: Endpoint>(
        &mut self,
        ep: &mut E,
        spec: &LatSpec,
        exact: Option<u64>,
        recvs: &mut RecvState,
    ) -> Result<Option<u8>> {
        let n = ep
            .poll_cq(&mut self.comps)
            .map_err(tr("polling completions"))?;
        for k in 0..n {
            let c = self.comps[k];
            check(ep, &c)?;
            match c.op {
                CompletionOp::Recv | CompletionOp::RecvWithImm => {
                    check_len(&c, exact, spec.layout.recv_headroom)?;
                    self.arrived += 1;
                    recvs.replace(ep, &spec.layout, 0)?;
                }
                _ => self.sends_owed = self.sends_owed.saturating_sub(1),
            }
        }
        Ok(match self.verb {
            Verb::Send if self.arrived > 0 => {
                // Several SENDs in one poll land on the same bytes: the last one's marker is what is
                // there, and the earlier ones count as stale.
                self.arrived = 0;
                Some(ep.peek(0, self.tail))
            }
            Verb::Write => {
                let m = ep.peek(0, self.tail);
                (m != self.last_marker).then(|| {
                    self.last_marker = m;
                    m
                })
            }
            _ => None,
        })
    }
}

/// How many iterations after `expected` the marker `m` names (0: `expected` itself), or `None`
/// for a stale one (an iteration already handled, or out of a 128-iteration reach).
fn ahead(expected: u64, m: u8) -> Option<u64> {
    let d = m.wrapping_sub(marker(expected));
    (d < 128).then_some(u64::from(d))
}

/// One size of send_lat or write_lat over UC/UD between roceperf peers (module docs).
pub(super) fn latency<E: Endpoint>(
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
    let exact = exact_len(spec.mode, spec.size);
    let mut rec = Recorder::new(spec);
    let (op, to) = match spec.verb {
        Verb::Write => (SendOp::Write, Some(remote)),
        _ => (SendOp::Send, None),
    };
    if spec.verb.consumes_receive() {
        recvs.fill(ep, &spec.layout, 1)?;
    }
    let mut inbox = Inbox {
        verb: spec.verb,
        tail: half + size - 1,
        last_marker: 0,
        arrived: 0,
        sends_owed: 0,
        comps: [Completion::EMPTY; 16],
    };
    let mut quiet = Quiet::new(match spec.verb {
        Verb::Write => "the peer's WRITE",
        _ => "the peer's SEND",
    });
    let mut lost = 0u64;
    // The next iteration this side expects from the peer (server), or sends (client).
    let mut i = 0u64;
    'run: while i < total {
        if role == Role::Server {
            // Wait for any message of iteration i or later.
            let j = loop {
                let got = inbox.poll(ep, spec, exact, recvs)?;
                if let Some(d) = got.and_then(|m| ahead(i, m)) {
                    quiet.events += 1;
                    break i + d;
                }
                if quiet.over(stop, Duration::ZERO)? {
                    break 'run;
                }
            };
            if j > i {
                lost += j - i;
                rec.forget();
            }
            check_arrival(ep, spec, half, j)?;
            i = j;
        }
        while inbox.sends_owed > 0 {
            inbox.poll(ep, spec, exact, recvs)?;
            if quiet.over(stop, Duration::ZERO)? {
                break 'run;
            }
        }
        let gap_ns = super::lat::gap(spec, i, role == Role::Client, &mut || {
            inbox.poll(ep, spec, exact, recvs).map(drop)
        })?;
        let now = Instant::now();
        if role == Role::Client && rec.over(now) {
            rec.stamp(i, now, gap_ns);
            break;
        }
        rec.stamp(i, now, gap_ns);
        if spec.validate {
            validate::fill(
                &mut ep.buffer_mut(0)[..size],
                validate::seed(spec.size, Some(i)),
            );
        }
        ep.buffer_mut(0)[size - 1] = marker(i);
        let wr = SendRequest {
            wr_id: i,
            op,
            offset: 0,
            len: spec.size as u32,
            remote: to,
            signaled: true,
            inline: false,
        };
        ep.post_send(0, &wr).map_err(tr("posting a request"))?;
        inbox.sends_owed += 1;
        if role == Role::Client {
            // Wait for iteration i's reply, at most the loss timeout; stale replies are skipped.
            let deadline = now + spec.loss_timeout;
            loop {
                let got = inbox.poll(ep, spec, exact, recvs)?;
                if got.is_some_and(|m| m == marker(i)) {
                    quiet.events += 1;
                    check_arrival(ep, spec, half, i)?;
                    break;
                }
                if quiet.over(stop, Duration::ZERO)? {
                    break 'run;
                }
                if Instant::now() >= deadline {
                    lost += 1;
                    rec.forget();
                    break;
                }
            }
        }
        i += 1;
    }
    // A server whose last messages were lost: the iterations it never saw (-n runs).
    if role == Role::Server && exact.is_some() {
        lost += total.saturating_sub(i);
    }
    while inbox.sends_owed > 0 {
        inbox.poll(ep, spec, exact, recvs)?;
    }
    let mut m = rec.finish(spec.size);
    m.lost = Some(lost);
    Ok(m)
}

/// `--validate`: the message of iteration `j` that just arrived, all but its marker byte.
fn check_arrival<E: Endpoint>(ep: &E, spec: &LatSpec, half: usize, j: u64) -> Result<()> {
    if !spec.validate {
        return Ok(());
    }
    let size = spec.size as usize;
    let what = match spec.verb {
        Verb::Write => "WRITE target",
        _ => "SEND received",
    };
    validate::check(
        &ep.buffer(0)[half..half + size - 1],
        spec.size,
        Some(j),
        Some(j),
        what,
    )
}
