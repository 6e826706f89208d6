//! The test drivers: bandwidth and latency loops, warm-up, iteration and duration modes, clock.
//!
//! The drivers are generic over [`Endpoint`](crate::transport::Endpoint), so the hot loops have no
//! dynamic dispatch and run unchanged on every transport. They run on the calling thread, which
//! [`affinity::pin`] has pinned to one core, and busy-poll. They know nothing of reports: they return raw
//! measurements (message counts, times, an HDR histogram) that the caller turns into statistics.
//!
//! Every queue pair's buffer is split in two halves of [`Layout::half`] bytes: the first half is the
//! local source (what this side sends, or what the peer READs), the second the target (where the peer's
//! WRITEs and SENDs land, and where READ responses go), so a side never mistakes its own data for the peer's.

pub(crate) mod affinity;
pub(crate) mod atomic;
pub mod bw;
pub(crate) mod cpu;
pub(crate) mod interval;
pub mod lat;
pub(crate) mod pace;
pub(crate) mod qp_series;
pub(crate) mod unreliable;
pub(crate) mod validate;

use crate::params::{Role, RunMode};
use crate::transport::{self, CompletionStatus, ConnInfo, Endpoint, RemoteAddr};
use std::time::Instant;

/// The receiving side of send_bw: over RC [`bw::receiver`], which waits for every SEND; over UC
/// and UD `unreliable::receiver`, which counts a lost one instead. The choice is made here, above
/// both, so that neither driver reaches the other.
pub(crate) fn bw_receiver<E: Endpoint>(
    ep: &mut E,
    spec: &bw::BwSpec,
    recvs: &mut bw::RecvState,
    stop: &mut dyn FnMut() -> bool,
    hooks: interval::Hooks<'_>,
) -> Result<bw::BwMeasurement> {
    if spec.unreliable {
        unreliable::receiver(ep, spec, recvs, stop, hooks)
    } else {
        bw::receiver(ep, spec, recvs, stop, hooks)
    }
}

/// One size of a latency test: [`lat::run`], or, for SEND and WRITE over UC and UD between roceperf
/// peers, `unreliable::latency`, which counts a lost iteration and goes on.
pub(crate) fn latency<E: Endpoint>(
    ep: &mut E,
    spec: &lat::LatSpec,
    role: Role,
    remote: RemoteAddr,
    recvs: &mut bw::RecvState,
    stop: &mut dyn FnMut() -> bool,
) -> Result<lat::LatMeasurement> {
    if spec.unreliable && !spec.verb.reads_back() {
        unreliable::latency(ep, spec, role, remote, recvs, stop)
    } else {
        lat::run(ep, spec, role, remote, recvs, stop)
    }
}

/// Errors while a test runs (exit code 1), or while choosing the core (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The transport failed while the test ran.
    #[error("{during}: {source}")]
    Transport {
        /// What the driver was doing.
        during: &'static str,
        /// The transport's error.
        #[source]
        source: transport::Error,
    },
    /// A work request completed with an error.
    #[error(
        "queue pair {qp}: work request {wr_id} failed: {}{}",
        status.describe(),
        before.as_ref().map(|b| format!("; before that, {b}")).unwrap_or_default()
    )]
    Completion {
        /// Queue pair index.
        qp: u32,
        /// Work request id.
        wr_id: u64,
        /// The error status.
        status: CompletionStatus,
        /// What the transport saw fail first that no completion names ([`Endpoint::failure`]).
        before: Option<String>,
    },
    /// A queue pair of this side failed where no completion says so (its responder refused a
    /// request); the transport names the request and the answer.
    #[error("{0}")]
    QpFailed(String),
    /// The requested core is not available.
    #[error(
        "--cpu {requested}: no such core available to this process (available: {available}); choose one of them"
    )]
    NoSuchCore {
        /// --cpu.
        requested: usize,
        /// The cores this process may run on.
        available: String,
    },
    /// `--validate` found a byte that is not the sender's pattern.
    #[error(
        "--validate: {what} of size {size}{}: byte at offset {offset} is {found:#04x}, the sender's pattern has {expected:#04x}",
        iteration.map(|i| format!(", iteration {i}")).unwrap_or_default()
    )]
    Validation {
        /// Which data was checked (SEND received, WRITE target, READ data).
        what: &'static str,
        /// Message size.
        size: u64,
        /// Iteration (warm-up included), where known.
        iteration: Option<u64>,
        /// Offset in the message.
        offset: u64,
        /// The pattern's byte.
        expected: u8,
        /// The byte found.
        found: u8,
    },
    /// `--validate` found a message of the wrong length.
    #[error("--validate: {what}: a message of {len} bytes arrived where {size} were sent")]
    ValidationLength {
        /// Which data was checked.
        what: &'static str,
        /// Message size sent.
        size: u64,
        /// Bytes received.
        len: u64,
    },
    /// `--validate`: an atomic returned an original value its sequence does not predict.
    #[error(
        "--validate: queue pair {qp}: {op} number {index} (word {word}) returned the original value {found:#018x} where the sequence says {expected:#018x}: an operation on that word ran twice, out of order or not at all"
    )]
    AtomicOriginal {
        /// Queue pair index.
        qp: u32,
        /// FETCH_AND_ADD or CMP_AND_SWAP.
        op: crate::params::AtomicOp,
        /// The operation's number on its queue pair (warm-up included).
        index: u64,
        /// The word it targeted.
        word: u64,
        /// The original the sequence predicts.
        expected: u64,
        /// The original returned (in the device's byte order, once known).
        found: u64,
    },
    /// `--validate`, at the responder: a word does not hold what the peer's operations leave.
    #[error(
        "--validate: queue pair {qp}: after the peer's {ops} operations word {word} holds {found:#018x} where the sequence says {expected:#018x}: an operation on it ran twice, out of order or not at all"
    )]
    AtomicTarget {
        /// Queue pair index.
        qp: u32,
        /// The word.
        word: u64,
        /// Operations the peer ran on this queue pair (its tally).
        ops: u64,
        /// What the word should hold.
        expected: u64,
        /// What it holds.
        found: u64,
    },
    /// `--validate`, at the responder: the peer's tally of its operations is not there.
    #[error(
        "--validate: queue pair {qp}: the tally word holds {found:#018x}, not the peer's count of its atomics; check that the peer runs the same test with --validate and finished its run"
    )]
    AtomicTally {
        /// Queue pair index.
        qp: u32,
        /// What the tally word holds.
        found: u64,
    },
    /// `--validate`, at the requester: the peer's tally word was not zero when the tally was set.
    #[error(
        "--validate: queue pair {qp}: the peer's tally word held {found:#018x} instead of 0 when this side counted its atomics into it; another requester may share the peer's memory"
    )]
    AtomicTallyTaken {
        /// Queue pair index.
        qp: u32,
        /// The original the tally returned.
        found: u64,
    },
    /// Pinning failed.
    #[error(
        "could not pin the datapath thread to core {0}; check the process's CPU affinity (taskset, cgroups)"
    )]
    Pin(usize),
    /// Nothing arrived from the peer for too long while this side waited for it.
    #[error(
        "nothing arrived from the peer for {} s while waiting for {waiting_for} ({}); check that it still runs, with the same test, -s and -n as this side",
        secs,
        if *peer_done { "it has finished or gone away" } else { "it neither sends nor closes the connection" }
    )]
    Stalled {
        /// What this side was waiting for.
        waiting_for: &'static str,
        /// How long nothing came.
        secs: u64,
        /// Whether the out-of-band channel said the peer is done (or closed it).
        peer_done: bool,
    },
    /// The peer's SENDs are not of this side's `-s`.
    #[error(
        "the peer sent a {len}-byte message where this side expects -s {size}; give both sides the same -s"
    )]
    PeerSize {
        /// This side's message size.
        size: u64,
        /// Bytes the peer's SEND carried.
        len: u64,
    },
}

impl Error {
    /// True for setup errors (exit code 2) rather than test failures (exit code 1). A peer that went
    /// away while the test ran (its connection dropped) failed the test: exit 1, as a retry error.
    pub(crate) fn is_setup(&self) -> bool {
        matches!(
            self,
            Error::NoSuchCore { .. } | Error::Pin(_) | Error::PeerSize { .. }
        )
    }
}

/// Result type of the drivers.
pub(crate) type Result<T> = std::result::Result<T, Error>;

fn tr(during: &'static str) -> impl FnOnce(transport::Error) -> Error {
    move |source| Error::Transport { during, source }
}

/// How every queue pair's buffer is split between source and target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of each half; the target half starts here.
    pub half: u64,
    /// `--validate`, READ bandwidth requester: bytes after the two halves where each READ lands in
    /// a slot of its own ([`validate::ReadSlots`]); 0 otherwise.
    pub read_slots: u64,
    /// UD: the GRH verbs writes in front of every received message ([`crate::params::UD_GRH_LEN`]),
    /// so receives start this many bytes before the target half and completions count it; 0 otherwise.
    pub recv_headroom: u64,
}

impl Layout {
    /// Halves large enough for `max_size`, rounded up to a cache line and at least a page (as perftest).
    pub fn for_size(max_size: u64) -> Layout {
        Layout {
            half: max_size.max(4096).div_ceil(64) * 64,
            read_slots: 0,
            recv_headroom: 0,
        }
    }

    /// With `headroom` bytes in front of every received message (UD's GRH): the source half grows by
    /// a cache line, so the header never lands on bytes this side sends.
    pub(crate) fn with_recv_headroom(self, headroom: u64) -> Layout {
        if headroom == 0 {
            return self;
        }
        Layout {
            half: self.half + headroom.div_ceil(64) * 64,
            recv_headroom: headroom,
            ..self
        }
    }

    /// With room for `depth` READ slots of the largest message, at most
    /// [`validate::READ_SLOTS_BUDGET`] bytes (but always one slot).
    pub(crate) fn with_read_slots(self, depth: u32) -> Layout {
        let want = u64::from(depth.max(1)).saturating_mul(self.half);
        Layout {
            read_slots: want.min(validate::READ_SLOTS_BUDGET.max(self.half)),
            ..self
        }
    }

    /// Bytes each queue pair's buffer needs.
    pub fn buffer_len(&self) -> usize {
        (2 * self.half + self.read_slots) as usize
    }

    /// Where this side's requests address the peer: the target half of each of its buffers.
    pub fn remotes(&self, peer: &ConnInfo) -> Vec<RemoteAddr> {
        peer.qps
            .iter()
            .map(|q| RemoteAddr {
                addr: q.vaddr + self.half,
                rkey: q.rkey,
            })
            .collect()
    }
}

/// The measurement window of a run: iterations, or a time span minus the margins.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    start: Instant,
    mode: RunMode,
}

impl Window {
    pub(crate) fn new(mode: RunMode) -> Window {
        Window {
            start: Instant::now(),
            mode,
        }
    }

    /// Duration mode: whether `now` is inside [margin, secs - margin].
    fn in_sample(&self, now: Instant) -> bool {
        match self.mode {
            RunMode::Iterations(_) => true,
            RunMode::Duration { secs, margin } => {
                let t = now.duration_since(self.start).as_secs_f64();
                t >= margin as f64 && t < (secs - margin) as f64
            }
        }
    }

    /// Duration mode: whether the run's time is up.
    fn over(&self, now: Instant) -> bool {
        match self.mode {
            RunMode::Iterations(_) => false,
            RunMode::Duration { secs, .. } => now.duration_since(self.start).as_secs() >= secs,
        }
    }
}

/// How often a waiting loop asks whether the peer is done (the question may be a system call).
const STOP_CHECK_EVERY: std::time::Duration = std::time::Duration::from_micros(500);

/// How long a side waiting for the peer's messages tolerates silence. Generous: a live peer, even a
/// TCG guest, sends within milliseconds; only a stuck one (or one running another -s or test, which
/// perftest's dialect cannot tell us) stays silent this long.
const STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Silence tolerated once the out-of-band channel said the peer is done or gone: its last messages
/// are in flight for microseconds (milliseconds in a VM), never seconds.
const PEER_DONE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Watches a side that waits for the peer's messages: asks `stop` at the [`StopCheck`] rate, and fails
/// with [`Error::Stalled`] when nothing arrived for [`STALL_LIMIT`] ([`PEER_DONE_GRACE`] once `stop`
/// said the peer is done). Counting progress costs an increment, not a clock read.
pub(crate) struct Watchdog {
    pace: StopCheck,
    events: u64,
    seen: u64,
    quiet_since: Instant,
    peer_done: bool,
    waiting_for: &'static str,
    limit: std::time::Duration,
}

impl Watchdog {
    pub(crate) fn new(waiting_for: &'static str) -> Watchdog {
        Watchdog::with_limit(waiting_for, STALL_LIMIT)
    }

    fn with_limit(waiting_for: &'static str, limit: std::time::Duration) -> Watchdog {
        let pace = StopCheck::new();
        let now = pace.last;
        Watchdog {
            pace,
            events: 0,
            seen: 0,
            quiet_since: now,
            peer_done: false,
            waiting_for,
            limit,
        }
    }

    /// Something arrived from the peer.
    #[inline]
    pub(crate) fn progress(&mut self) {
        self.events += 1;
    }

    /// When due, asks `stop` and checks the silence; returns what `stop` said (false when not due).
    pub(crate) fn check(&mut self, stop: &mut dyn FnMut() -> bool) -> Result<bool> {
        let Some(now) = self.pace.due() else {
            return Ok(false);
        };
        if self.events != self.seen {
            self.seen = self.events;
            self.quiet_since = now;
        }
        let done = stop();
        self.peer_done |= done;
        let limit = if self.peer_done {
            PEER_DONE_GRACE.min(self.limit)
        } else {
            self.limit
        };
        let quiet = now.duration_since(self.quiet_since);
        if quiet > limit {
            return Err(Error::Stalled {
                waiting_for: self.waiting_for,
                secs: quiet.as_secs(),
                peer_done: self.peer_done,
            });
        }
        Ok(done)
    }
}

/// How often, at most, a waiting loop reads the clock to see whether a check is due.
const CLOCK_READ_EVERY: std::time::Duration = std::time::Duration::from_micros(20);

/// Most calls between two clock reads, however fast the loop spins.
const MAX_CALLS_PER_CLOCK_READ: u32 = 256;

/// A clock read every `stride` calls, a stride that adapts so that reads come about
/// [`CLOCK_READ_EVERY`] apart: a busy-polling loop turns in a few hundred nanoseconds, and a clock
/// read per turn would be a tenth of it; a loop that sleeps reads it every turn.
pub(crate) struct ClockTicker {
    last_read: Instant,
    calls: u32,
    stride: u32,
}

impl ClockTicker {
    pub(crate) fn new() -> ClockTicker {
        ClockTicker {
            last_read: Instant::now(),
            calls: 0,
            stride: 1,
        }
    }

    /// The time on every `stride`-th call; `None` on the others.
    #[inline]
    pub(crate) fn tick(&mut self) -> Option<Instant> {
        self.calls += 1;
        if self.calls < self.stride {
            return None;
        }
        self.calls = 0;
        let now = Instant::now();
        let since = now.duration_since(self.last_read);
        self.last_read = now;
        if since < CLOCK_READ_EVERY / 2 {
            self.stride = (self.stride * 2).min(MAX_CALLS_PER_CLOCK_READ);
        } else if since > CLOCK_READ_EVERY * 2 {
            self.stride = (self.stride / 2).max(1);
        }
        Some(now)
    }
}

/// Rate-limits a `stop` callback to one call per [`STOP_CHECK_EVERY`], whatever the loop's speed,
/// reading the clock only as a [`ClockTicker`] does.
pub(crate) struct StopCheck {
    last: Instant,
    ticker: ClockTicker,
}

impl StopCheck {
    pub(crate) fn new() -> StopCheck {
        let ticker = ClockTicker::new();
        StopCheck {
            last: ticker.last_read,
            ticker,
        }
    }

    /// Calls `stop` when it is due; false otherwise.
    pub(crate) fn check(&mut self, stop: &mut dyn FnMut() -> bool) -> bool {
        self.due().is_some_and(|_| stop())
    }

    /// The time, when a check is due (and counts as made); `None` otherwise.
    #[inline]
    fn due(&mut self) -> Option<Instant> {
        let now = self.ticker.tick()?;
        if now.duration_since(self.last) < STOP_CHECK_EVERY {
            return None;
        }
        self.last = now;
        Some(now)
    }
}

/// Checks that a received SEND is of this side's size, when `size` says one is expected (iterations
/// mode): a perftest peer never says its -s, so this is where a mismatch shows.
/// `headroom`: the bytes a UD receive holds in front of the message (its GRH), not counted.
fn check_len(c: &transport::Completion, size: Option<u64>, headroom: u64) -> Result<()> {
    let len = u64::from(c.byte_len).saturating_sub(headroom);
    match size {
        Some(size) if len != size => Err(Error::PeerSize { size, len }),
        _ => Ok(()),
    }
}

/// The size every received SEND has, for [`check_len`]: the run's size in iterations mode; none in
/// duration mode, where the last ones of the previous size may still arrive.
fn exact_len(mode: RunMode, size: u64) -> Option<u64> {
    matches!(mode, RunMode::Iterations(_)).then_some(size)
}

/// Checks a completion's status; a failure says what `ep` saw fail before it, if anything.
fn check<E: Endpoint + ?Sized>(ep: &E, c: &transport::Completion) -> Result<()> {
    if c.status == CompletionStatus::Success {
        Ok(())
    } else {
        Err(Error::Completion {
            qp: c.qp,
            wr_id: c.wr_id,
            status: c.status,
            before: ep.failure(),
        })
    }
}

#[cfg(test)]
mod watchdog_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn silence_past_the_limit_is_an_error_and_progress_resets_it() {
        let mut dog = Watchdog::with_limit("a test message", Duration::from_millis(200));
        let t0 = Instant::now();
        let mut last_progress = t0;
        // Progress every few milliseconds keeps it quiet well past the limit.
        while t0.elapsed() < Duration::from_millis(500) {
            last_progress = Instant::now();
            dog.progress();
            assert!(!dog.check(&mut || false).unwrap());
            std::thread::sleep(Duration::from_millis(2));
        }
        let err = loop {
            match dog.check(&mut || false) {
                Ok(_) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => break e,
            }
        };
        // The silence is counted from a check after the last progress, however late the scheduler
        // ran this thread, so it cannot end before the limit has passed since that progress.
        assert!(last_progress.elapsed() >= Duration::from_millis(200));
        assert!(
            matches!(
                err,
                Error::Stalled {
                    peer_done: false,
                    waiting_for: "a test message",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("same test, -s and -n"), "{err}");
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A connected pair of TCP endpoints for driver tests.
    use crate::params::Role;
    use crate::transport::Endpoint;
    use crate::transport::tcp::{TcpConfig, TcpEndpoint};
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    pub(crate) fn pair(qps: usize, buf_len: usize, depth: usize) -> (TcpEndpoint, TcpEndpoint) {
        let cfg = |role| TcpConfig {
            role,
            qps,
            buf_len,
            sq_depth: depth,
            rq_depth: depth,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            connect_timeout: Duration::from_secs(5),
            socket_buffer: None,
            tclass: None,
            priority: None,
            congestion: None,
            spin_polls: crate::transport::tcp::DEFAULT_SPIN_POLLS,
        };
        let mut s = TcpEndpoint::new(cfg(Role::Server)).unwrap();
        let mut c = TcpEndpoint::new(cfg(Role::Client)).unwrap();
        let (si, ci) = (s.local_info(), c.local_info());
        let t = std::thread::spawn(move || {
            s.connect(&ci).unwrap();
            s
        });
        c.connect(&si).unwrap();
        (t.join().unwrap(), c)
    }

    /// `server` answering passively on its own thread until [`Serving::stop`].
    pub(crate) struct Serving {
        done: Arc<AtomicBool>,
        thread: std::thread::JoinHandle<TcpEndpoint>,
    }

    impl Serving {
        /// Starts serving `server` as a passive side does (READs, atomics, ACKs).
        pub(crate) fn start(mut server: TcpEndpoint) -> Serving {
            let done = Arc::new(AtomicBool::new(false));
            let until = done.clone();
            let thread = std::thread::spawn(move || {
                crate::bench::bw::passive(
                    &mut server,
                    crate::bench::bw::SERVING,
                    &mut || until.load(Ordering::Acquire),
                    None,
                )
                .unwrap();
                server
            });
            Serving { done, thread }
        }

        /// Stops serving and gives the endpoint back.
        pub(crate) fn stop(self) -> TcpEndpoint {
            self.done.store(true, Ordering::Release);
            self.thread.join().unwrap()
        }
    }
}
