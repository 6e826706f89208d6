//! Bandwidth: stream `-s`-byte operations with `-t` in flight per queue pair, one completion every
//! `cq_mod`; bandwidth = bytes × messages ÷ (last completion − first post), as perftest computes it.

use super::{
    Layout, Result, StopCheck, Watchdog, Window, check, check_len, cpu::CpuSample, tr, validate,
};
use crate::params::RunMode;
use crate::params::Verb;
use crate::transport::{
    Completion, CompletionOp, Endpoint, RecvRequest, RemoteAddr, SendOp, SendRequest,
};
use std::time::Instant;

/// perftest measures the peak only up to this many messages (its calculation is quadratic).
pub const PEAK_MAX_MESSAGES: u64 = 20_000;

/// What one bandwidth run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BwMeasurement {
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
}

/// How to run one size.
#[derive(Debug, Clone, Copy)]
pub struct BwSpec {
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
    /// Measure perftest's peak (iteration mode, one queue pair, at most [`PEAK_MAX_MESSAGES`]).
    pub peak: bool,
    /// Measure CPU utilisation (duration mode).
    pub cpu_util: bool,
    /// Buffer layout.
    pub layout: Layout,
    /// `--validate`: check every received SEND and every READ's data against the size's pattern.
    pub validate: bool,
}

/// `--validate`: checks the target region of queue pair `q` (where SENDs and READ data land).
fn check_target<E: Endpoint>(
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

/// Post and completion times for the peak, allocated before the run.
struct PeakRecorder {
    origin: Instant,
    posted: Vec<u64>,
    completed: Vec<u64>,
}

/// Streams operations at the peer and measures. The active side of every bandwidth test.
/// `duplex`: both sides SEND (bidirectional send_bw), so this side also reposts the receives the
/// peer's SENDs consume.
pub fn active<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    remotes: &[RemoteAddr],
    mut duplex: Option<&mut RecvState>,
) -> Result<BwMeasurement> {
    if let Some(r) = duplex.as_deref_mut() {
        r.fill(ep, &spec.layout, spec.rx_depth)?;
    }
    if spec.warmup > 0 {
        stream(
            ep,
            spec,
            remotes,
            RunMode::Iterations(spec.warmup),
            None,
            duplex.as_deref_mut(),
        )?;
    }
    let peak = match spec.mode {
        RunMode::Iterations(n) if spec.peak && ep.qp_count() == 1 && n <= PEAK_MAX_MESSAGES => {
            Some(PeakRecorder {
                origin: Instant::now(),
                posted: Vec::with_capacity(n as usize),
                completed: Vec::with_capacity(n as usize),
            })
        }
        _ => None,
    };
    stream(ep, spec, remotes, spec.mode, peak, duplex)
}

fn stream<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    remotes: &[RemoteAddr],
    mode: RunMode,
    mut peak: Option<PeakRecorder>,
    mut duplex: Option<&mut RecvState>,
) -> Result<BwMeasurement> {
    let qps = ep.qp_count();
    let cq_mod = u64::from(spec.cq_mod.max(1));
    let depth = u64::from(spec.tx_depth.max(1));
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
    let op = match spec.verb {
        Verb::Send => SendOp::Send,
        Verb::Write => SendOp::Write,
        Verb::Read => SendOp::Read,
    };
    let (offset, remote_of) = match spec.verb {
        // READ responses land in the target half; SEND and WRITE go from the source half.
        Verb::Read => (spec.layout.half, true),
        Verb::Write => (0, true),
        Verb::Send => (0, false),
    };
    let mut comps = [Completion::EMPTY; 64];
    let win = Window::new(mode);
    let mut first_post: Option<Instant> = None;
    let mut last_completion = Instant::now();
    let mut sample_start: Option<(Instant, Option<CpuSample>)> = None;
    let mut sample_end: Option<(Instant, Option<CpuSample>)> = None;
    let mut counted = 0u64;
    let mut posting = true;
    loop {
        if duration {
            let now = Instant::now();
            if sample_start.is_none() && win.in_sample(now) {
                sample_start = Some((now, spec.cpu_util.then(CpuSample::read).flatten()));
            } else if sample_start.is_some() && sample_end.is_none() && !win.in_sample(now) {
                sample_end = Some((now, spec.cpu_util.then(CpuSample::read).flatten()));
            }
            if posting && win.over(now) {
                posting = false;
                // Finish on a signaled operation so every posted one is accounted for.
                for q in 0..qps {
                    total[q] = posted[q].div_ceil(cq_mod) * cq_mod;
                }
            }
        }
        for q in 0..qps {
            while posted[q] < total[q] && posted[q] - done[q] < depth {
                let idx = posted[q];
                let wr = SendRequest {
                    wr_id: idx,
                    op,
                    offset,
                    len: spec.size as u32,
                    remote: remote_of.then(|| remotes[q]),
                    signaled: (idx + 1).is_multiple_of(cq_mod) || idx + 1 == total[q],
                    inline: false,
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
            }
        }
        let n = ep.poll_cq(&mut comps).map_err(tr("polling completions"))?;
        if n > 0 {
            let t = Instant::now();
            for c in &comps[..n] {
                check(c)?;
                let q = c.qp as usize;
                if matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm) {
                    if spec.validate {
                        check_target(ep, spec, q, u64::from(c.byte_len), "SEND received")?;
                    }
                    if let Some(r) = duplex.as_deref_mut() {
                        r.replace(ep, &spec.layout, q)?;
                    }
                    continue;
                }
                if spec.validate && spec.verb == Verb::Read {
                    check_target(ep, spec, q, spec.size, "READ data")?;
                }
                let newly = c.wr_id + 1 - done[q];
                done[q] = c.wr_id + 1;
                if sample_start.is_some() && sample_end.is_none() {
                    counted += newly;
                }
                if let Some(p) = peak.as_mut() {
                    p.completed
                        .push(t.duration_since(p.origin).as_nanos() as u64);
                }
            }
            last_completion = t;
        }
        if (0..qps).all(|q| done[q] == total[q]) {
            break;
        }
    }
    let (messages, elapsed_ns, cpu_util) = match mode {
        RunMode::Iterations(_) => {
            let first = first_post.unwrap_or(last_completion);
            (
                total.iter().sum(),
                last_completion.duration_since(first).as_nanos() as u64,
                None,
            )
        }
        RunMode::Duration { .. } => {
            let (s, cs) = sample_start.unwrap_or((win.start, None));
            let (e, ce) = sample_end.unwrap_or((last_completion, None));
            let util = cs.zip(ce).and_then(|(a, b)| a.util_until(&b));
            (counted, e.duration_since(s).as_nanos() as u64, util)
        }
    };
    let best_ns_per_msg =
        peak.and_then(|p| crate::stats::perftest_peak(&p.posted, &p.completed, cq_mod));
    Ok(BwMeasurement {
        size: spec.size,
        messages,
        elapsed_ns,
        best_ns_per_msg,
        cpu_util,
    })
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
        let wr = RecvRequest {
            wr_id: q as u64,
            offset: layout.half,
            len: layout.half.min(u64::from(u32::MAX)) as u32,
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

/// The receiving side of send_bw: counts incoming SENDs and measures its own bandwidth, from its first
/// receive to its last (iteration mode; see the clock comment inside). In duration mode it runs until
/// `stop` says the sender is done.
pub fn receiver<E: Endpoint>(
    ep: &mut E,
    spec: &BwSpec,
    recvs: &mut RecvState,
    stop: &mut dyn FnMut() -> bool,
) -> Result<BwMeasurement> {
    let qps = ep.qp_count();
    recvs.fill(ep, &spec.layout, spec.rx_depth)?;
    let mut got = vec![0u64; qps];
    let mut comps = [Completion::EMPTY; 64];
    let want = |n: u64| move |got: &[u64]| got.iter().all(|&g| g >= n);
    // In iterations mode every SEND is of this size; in duration mode the last ones of the previous
    // size may still arrive.
    let exact_len = matches!(spec.mode, RunMode::Iterations(_)).then_some(spec.size);
    let mut poll = |ep: &mut E, got: &mut [u64], recvs: &mut RecvState| -> Result<usize> {
        let n = ep.poll_cq(&mut comps).map_err(tr("polling completions"))?;
        for c in &comps[..n] {
            check(c)?;
            if c.op == CompletionOp::Recv {
                check_len(c, exact_len)?;
                if spec.validate {
                    check_target(
                        ep,
                        spec,
                        c.qp as usize,
                        u64::from(c.byte_len),
                        "SEND received",
                    )?;
                }
                got[c.qp as usize] += 1;
                recvs.replace(ep, &spec.layout, c.qp as usize)?;
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
    match spec.mode {
        RunMode::Iterations(n) => {
            let target = spec.warmup + n;
            // A receiver cannot see when the sender began, so its clock starts at an arrival: the last
            // warm-up message's (≈ win.start), or without warm-up the first measured one, as ib_send_bw's
            // server does (tposted[0] on its first receive completion). Starting when this side began to
            // wait would add the peer's start-up delay, which a perftest peer does not count.
            let mut first = (spec.warmup > 0).then_some(win.start);
            while !got.iter().all(|&g| g >= target) {
                if poll(ep, &mut got, recvs)? > 0 {
                    last = Instant::now();
                    first.get_or_insert(last);
                    dog.progress();
                }
                dog.check(stop)?;
            }
            Ok(BwMeasurement {
                size: spec.size,
                messages: n * qps as u64,
                elapsed_ns: last.duration_since(first.unwrap_or(last)).as_nanos() as u64,
                best_ns_per_msg: None,
                cpu_util: None,
            })
        }
        RunMode::Duration { .. } => {
            let mut start: Option<(Instant, u64, Option<CpuSample>)> = None;
            let mut end: Option<(Instant, u64, Option<CpuSample>)> = None;
            loop {
                if poll(ep, &mut got, recvs)? > 0 {
                    dog.progress();
                }
                let now = Instant::now();
                let count = got.iter().sum::<u64>() - base.iter().sum::<u64>();
                if start.is_none() && win.in_sample(now) {
                    start = Some((now, count, spec.cpu_util.then(CpuSample::read).flatten()));
                } else if start.is_some() && end.is_none() && !win.in_sample(now) {
                    end = Some((now, count, spec.cpu_util.then(CpuSample::read).flatten()));
                }
                if dog.check(stop)? {
                    break;
                }
            }
            let now = Instant::now();
            let total = got.iter().sum::<u64>() - base.iter().sum::<u64>();
            let (s, c0, cs) = start.unwrap_or((win.start, 0, None));
            let (e, c1, ce) = end.unwrap_or((now, total, None));
            Ok(BwMeasurement {
                size: spec.size,
                messages: c1 - c0,
                elapsed_ns: e.duration_since(s).as_nanos() as u64,
                best_ns_per_msg: None,
                cpu_util: cs.zip(ce).and_then(|(a, b)| a.util_until(&b)),
            })
        }
    }
}

/// What [`passive`] is doing, for its errors, when the caller has nothing more specific to say.
pub const SERVING: &str = "serving the peer";

/// The passive side of WRITE and READ tests: keep the transport running (it applies WRITEs and answers
/// READs) until `stop` says the peer is done. With `recvs`, SENDs that still arrive get fresh receives.
/// `during` names the wait in a transport error (e.g. [`SERVING`]).
pub fn passive<E: Endpoint>(
    ep: &mut E,
    during: &'static str,
    stop: &mut dyn FnMut() -> bool,
    mut recvs: Option<(&mut RecvState, Layout)>,
) -> Result<()> {
    let mut comps = [Completion::EMPTY; 64];
    let mut sc = StopCheck::new();
    loop {
        let n = match ep.poll_cq(&mut comps) {
            Ok(n) => n,
            // A peer that has finished (and said so out of band) may close its data connection first.
            Err(_) if stop() => return Ok(()),
            Err(e) => return Err(tr(during)(e)),
        };
        for c in &comps[..n] {
            check(c)?;
            if let Some((r, layout)) = recvs.as_mut()
                && matches!(c.op, CompletionOp::Recv | CompletionOp::RecvWithImm)
            {
                r.replace(ep, layout, c.qp as usize)?;
            }
        }
        if sc.check(stop) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Error;
    use crate::bench::testing::pair;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn spec(verb: Verb, size: u64, mode: RunMode) -> BwSpec {
        BwSpec {
            verb,
            size,
            mode,
            tx_depth: 16,
            cq_mod: 4,
            warmup: 3,
            rx_depth: 32,
            peak: true,
            cpu_util: false,
            layout: Layout::for_size(size),
            validate: false,
        }
    }

    /// Runs `active` on the client while the server is passive; returns the measurement and the server.
    fn run_passive(s: BwSpec) -> (BwMeasurement, crate::transport::tcp::TcpEndpoint) {
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 64);
        let remotes = s.layout.remotes(&server.local_info());
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let t = std::thread::spawn(move || {
            passive(
                &mut server,
                SERVING,
                &mut || d2.load(Ordering::Acquire),
                None,
            )
            .unwrap();
            server
        });
        let m = active(&mut client, &s, &remotes, None).unwrap();
        // Let the server apply what is still in the socket before it stops.
        std::thread::sleep(std::time::Duration::from_millis(50));
        done.store(true, Ordering::Release);
        (m, t.join().unwrap())
    }

    #[test]
    fn write_bw_counts_every_message_and_delivers_the_bytes() {
        let s = spec(Verb::Write, 1000, RunMode::Iterations(101));
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 64);
        client.buffer_mut(0)[..1000].fill(0x3c);
        let remotes = s.layout.remotes(&server.local_info());
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let t = std::thread::spawn(move || {
            passive(
                &mut server,
                SERVING,
                &mut || d2.load(Ordering::Acquire),
                None,
            )
            .unwrap();
            server
        });
        let m = active(&mut client, &s, &remotes, None).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        done.store(true, Ordering::Release);
        let server = t.join().unwrap();
        assert_eq!((m.size, m.messages), (1000, 101));
        assert!(m.elapsed_ns > 0);
        let half = s.layout.half as usize;
        assert!(
            server.buffer(0)[half..half + 1000]
                .iter()
                .all(|&b| b == 0x3c)
        );
        assert!(server.buffer(0)[half + 1000..].iter().all(|&b| b == 0));
    }

    #[test]
    fn read_bw_reads_the_peer_source_half() {
        let s = spec(Verb::Read, 5000, RunMode::Iterations(20));
        let (m, _) = run_passive(s);
        assert_eq!(m.messages, 20);
    }

    #[test]
    fn duration_mode_counts_inside_the_window_and_drains() {
        let s = spec(Verb::Write, 64, RunMode::Duration { secs: 1, margin: 0 });
        let (m, _) = run_passive(s);
        assert!(m.messages > 0);
        assert!(
            m.elapsed_ns >= 900_000_000,
            "window ≈ 1 s, got {} ns",
            m.elapsed_ns
        );
    }

    /// send_bw over `qps` TCP queue pairs, the sender starting `late` after the receiver; returns the
    /// sender's and the receiver's measurements.
    fn send_pair(
        s: BwSpec,
        qps: usize,
        late: std::time::Duration,
    ) -> (BwMeasurement, BwMeasurement) {
        let (mut server, mut client) = pair(qps, s.layout.buffer_len(), 64);
        let remotes = s.layout.remotes(&server.local_info());
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let rs = s;
        let t = std::thread::spawn(move || {
            let mut st = RecvState::default();
            let r = receiver(&mut server, &rs, &mut st, &mut || false).unwrap();
            // Keep serving until the sender is done: its last SENDs complete on our acknowledgement.
            passive(
                &mut server,
                SERVING,
                &mut || d2.load(Ordering::Acquire),
                Some((&mut st, rs.layout)),
            )
            .unwrap();
            r
        });
        std::thread::sleep(late);
        let m = active(&mut client, &s, &remotes, None).unwrap();
        done.store(true, Ordering::Release);
        (m, t.join().unwrap())
    }

    #[test]
    fn send_bw_receiver_counts_what_the_sender_sent() {
        let s = spec(Verb::Send, 300, RunMode::Iterations(50));
        let (m, r) = send_pair(s, 2, std::time::Duration::ZERO);
        assert_eq!(
            (m.messages, r.messages, r.size),
            (100, 100, 300),
            "2 QPs × 50"
        );
    }

    #[test]
    fn send_bw_receiver_names_a_sender_with_another_size() {
        // What a perftest sender with another -s looks like: nothing in its dialect says the size.
        let theirs = spec(Verb::Send, 200, RunMode::Iterations(20));
        let ours = spec(Verb::Send, 300, RunMode::Iterations(20));
        let (mut server, mut client) = pair(1, ours.layout.buffer_len(), 64);
        let remotes = theirs.layout.remotes(&server.local_info());
        let t = std::thread::spawn(move || {
            let mut st = RecvState::default();
            receiver(&mut server, &ours, &mut st, &mut || false)
        });
        // The sender's last SENDs may never complete once the receiver has given up; its result is moot.
        let _ = std::thread::spawn(move || active(&mut client, &theirs, &remotes, None));
        let err = t.join().unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                Error::PeerSize {
                    size: 300,
                    len: 200
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("same -s"), "{err}");
    }

    #[test]
    fn a_silent_sender_trips_the_receivers_watchdog_soon_after_the_peer_is_done() {
        let s = spec(Verb::Send, 100, RunMode::Iterations(10));
        let (mut server, _client) = pair(1, s.layout.buffer_len(), 64);
        let t0 = std::time::Instant::now();
        let mut st = RecvState::default();
        // The out-of-band channel says the peer is done, yet nothing ever arrives.
        let err = receiver(&mut server, &s, &mut st, &mut || true).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Stalled {
                    peer_done: true,
                    ..
                }
            ),
            "{err}"
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn send_bw_receiver_without_warmup_starts_its_clock_at_the_first_arrival() {
        // perftest's receiver starts timing at its first receive completion, so the time it spends
        // waiting for a sender that starts late must not count (the interop comparison depends on it).
        let mut s = spec(Verb::Send, 300, RunMode::Iterations(20));
        s.warmup = 0;
        let late_start = std::time::Duration::from_secs(1);
        let (m, r) = send_pair(s, 1, late_start);
        assert_eq!((m.messages, r.messages), (20, 20));
        assert!(
            r.elapsed_ns < late_start.as_nanos() as u64,
            "the receiver counted its wait for the sender: {} ns",
            r.elapsed_ns
        );
    }

    #[test]
    fn recv_state_never_posts_beyond_the_depth() {
        let layout = Layout::for_size(64);
        let (mut server, _client) = pair(1, layout.buffer_len(), 8);
        let mut st = RecvState::default();
        st.fill(&mut server, &layout, 8).unwrap();
        st.fill(&mut server, &layout, 8).unwrap(); // a second size: nothing more to post
        assert_eq!(st.posted, vec![8]);
    }

    #[test]
    fn validate_accepts_the_pattern_and_names_a_corrupted_byte() {
        let mut s = spec(Verb::Send, 300, RunMode::Iterations(20));
        s.validate = true;
        for corrupt in [false, true] {
            let (mut server, mut client) = pair(1, s.layout.buffer_len(), 64);
            validate::fill(&mut client.buffer_mut(0)[..300], validate::seed(300, None));
            if corrupt {
                client.buffer_mut(0)[123] ^= 0xff;
            }
            let remotes = s.layout.remotes(&server.local_info());
            // Over TCP a signaled SEND completes only once the peer has applied it, so the receiver
            // keeps polling until the sender is done.
            let done = Arc::new(AtomicBool::new(false));
            let sender_done = done.clone();
            let t = std::thread::spawn(move || {
                let mut st = RecvState::default();
                let r = receiver(&mut server, &s, &mut st, &mut || false);
                if r.is_ok() {
                    passive(
                        &mut server,
                        SERVING,
                        &mut || sender_done.load(Ordering::Acquire),
                        Some((&mut st, s.layout)),
                    )
                    .unwrap();
                }
                r
            });
            let sent = active(&mut client, &s, &remotes, None);
            assert_eq!(sent.is_ok(), !corrupt, "{:?}", sent.err());
            done.store(true, Ordering::Release);
            match (corrupt, t.join().unwrap()) {
                (false, r) => assert_eq!(r.unwrap().messages, 20),
                (true, Err(e)) => {
                    let text = e.to_string();
                    assert!(
                        matches!(
                            e,
                            super::super::Error::Validation {
                                offset: 123,
                                size: 300,
                                ..
                            }
                        ),
                        "{text}"
                    );
                    assert!(text.contains("SEND received"), "{text}");
                }
                (true, Ok(_)) => panic!("a corrupted payload passed --validate"),
            }
        }
    }

    #[test]
    fn validate_checks_read_data_against_the_responder_pattern() {
        let mut s = spec(Verb::Read, 700, RunMode::Iterations(10));
        s.validate = true;
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 64);
        let half = s.layout.half as usize;
        // The responder's region holds another size's pattern: every READ brings back wrong bytes.
        validate::fill(
            &mut server.buffer_mut(0)[half..half + 700],
            validate::seed(701, None),
        );
        let remotes = s.layout.remotes(&server.local_info());
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let t = std::thread::spawn(move || {
            let _ = passive(
                &mut server,
                SERVING,
                &mut || d2.load(Ordering::Acquire),
                None,
            );
        });
        let e = active(&mut client, &s, &remotes, None).unwrap_err();
        done.store(true, Ordering::Release);
        t.join().unwrap();
        assert!(e.to_string().contains("READ data of size 700"), "{e}");
    }
}
