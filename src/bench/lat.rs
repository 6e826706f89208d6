//! Latency: SEND and WRITE ping-pong, READ request/response, as perftest measures them.
//!
//! Each side stamps the time just before it posts iteration i; a sample is the time between two posts,
//! i.e. one full round trip including posting and polling, divided by [`TestKind::rtt_factor`] (2 for
//! SEND and WRITE, 1 for READ). `warmup` iterations run first and are not recorded. In iteration mode
//! each side runs warmup + n + 1 posts and records n samples; in duration mode it records the samples
//! that fall inside [margin, D − margin].
//!
//! [`TestKind::rtt_factor`]: crate::params::TestKind::rtt_factor

use super::bw::RecvState;
use super::{Layout, Result, Watchdog, Window, check, check_len, cpu::CpuSample, tr, validate};
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
    /// data checked against the responder's pattern (see [`super::validate`]).
    pub validate: bool,
}

/// Counts completions while waiting; fails on an error completion.
struct Waiter {
    comps: [Completion; 16],
    recvs: u64,
    sends: u64,
    dog: Watchdog,
    /// In iterations mode, the length every received SEND must have (a perftest peer never says its -s).
    exact_len: Option<u64>,
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
            check(c)?;
            match c.op {
                CompletionOp::Recv | CompletionOp::RecvWithImm => {
                    check_len(c, self.exact_len)?;
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
struct Recorder {
    hist: Histogram<u64>,
    win: Window,
    warmup: u64,
    rtt_factor: u64,
    prev: Option<Instant>,
    cpu_start: Option<CpuSample>,
    cpu_end: Option<CpuSample>,
    cpu: bool,
    in_sample: bool,
}

impl Recorder {
    /// Called just before posting iteration `i`: the previous iteration's round trip ends now.
    fn stamp(&mut self, i: u64) {
        let now = Instant::now();
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
            let ns = now.duration_since(p).as_nanos() as u64 / self.rtt_factor;
            self.hist.saturating_record(ns.max(1));
        }
        self.prev = Some(now);
    }

    fn finish(mut self, size: u64) -> LatMeasurement {
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
        }
    }
}

/// The value the last byte of a WRITE carries in iteration `i`: the count of WRITEs so far, modulo
/// 256, as ib_write_lat writes it (`(char)++scnt`), so that runs past 255 iterations still pair with
/// perftest. The first is 1, so a freshly cleared buffer never matches; the 0 of iteration 255 follows
/// a byte that holds 255, so it cannot match early either.
fn marker(i: u64) -> u8 {
    (i + 1) as u8
}

/// WRITE latency: clears the byte where the peer's WRITE of `size` bytes leaves its marker, so a stale
/// value is never mistaken for the first WRITE. Call it before the out-of-band barrier that starts the size.
pub fn clear_marker<E: Endpoint>(ep: &mut E, layout: &Layout, size: u64) {
    let tail = (layout.half + size - 1) as usize;
    ep.buffer_mut(0)[tail] = 0;
}

/// Runs one size of a latency test. `remote` addresses the peer's target half on queue pair 0. The client
/// stops after its iterations or duration; a server (and any side in duration mode) also stops when `stop`
/// says the peer is done. A READ server only serves: use [`super::bw::passive`] for it.
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
    let total = match spec.mode {
        RunMode::Iterations(n) => spec.warmup + n + 1,
        RunMode::Duration { .. } => u64::MAX,
    };
    let mut rec = Recorder {
        hist: crate::stats::new_latency_histogram(),
        win: Window::new(spec.mode),
        warmup: spec.warmup,
        rtt_factor: u64::from(spec.rtt_factor.max(1)),
        prev: None,
        cpu_start: None,
        cpu_end: None,
        cpu: spec.cpu_util,
        in_sample: false,
    };
    let mut w = Waiter {
        comps: [Completion::EMPTY; 16],
        recvs: 0,
        sends: 0,
        dog: Watchdog::new(match spec.verb {
            Verb::Send => "the peer's SEND or its completion",
            Verb::Write => "the peer's WRITE or its completion",
            Verb::Read => "a READ response",
        }),
        exact_len: matches!(spec.mode, RunMode::Iterations(_)).then_some(spec.size),
    };
    let (op, remote, offset) = match spec.verb {
        Verb::Send => (SendOp::Send, None, 0),
        Verb::Write => (SendOp::Write, Some(remote), 0),
        Verb::Read => (SendOp::Read, Some(remote), spec.layout.half),
    };
    if spec.verb == Verb::Send {
        recvs.fill(ep, &spec.layout, 1)?;
    }
    // The marker byte is cleared by the caller with [`clear_marker`] before the two sides synchronise:
    // clearing it here could wipe the peer's first WRITE when it arrives before this side gets here.
    let tail = half + size - 1;
    let initiator = role == Role::Client;
    let mut i = 0u64;
    let mut posted = 0u64;
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
                Verb::Read => {}
            }
        };
    }
    'run: while i < total {
        if !initiator {
            wait_for_peer!(i, 'run);
        }
        // The previous post must be complete before the next (one operation in flight, as perftest).
        while w.sends < posted {
            w.poll(ep)?;
            if w.stopped(stop)? {
                break 'run;
            }
        }
        if initiator && rec.win.over(Instant::now()) {
            rec.stamp(i);
            break;
        }
        rec.stamp(i);
        if spec.validate {
            match spec.verb {
                // A READ that completed without placing data must not pass on the previous one's bytes.
                Verb::Read => ep.buffer_mut(0)[half..half + size].fill(0),
                _ => validate::fill(
                    &mut ep.buffer_mut(0)[..size],
                    validate::seed(spec.size, Some(i)),
                ),
            }
        }
        if spec.verb == Verb::Write {
            ep.buffer_mut(0)[size - 1] = marker(i);
        }
        let wr = SendRequest {
            wr_id: i,
            op,
            offset,
            len: spec.size as u32,
            remote,
            signaled: true,
            inline: false,
        };
        ep.post_send(0, &wr).map_err(tr("posting a request"))?;
        posted += 1;
        match spec.verb {
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
    Ok(rec.finish(spec.size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::testing::pair;
    use crate::transport::tcp::TcpEndpoint;

    fn spec(verb: Verb, size: u64, n: u64) -> LatSpec {
        LatSpec {
            verb,
            size,
            mode: RunMode::Iterations(n),
            warmup: 5,
            rtt_factor: if verb == Verb::Read { 1 } else { 2 },
            cpu_util: false,
            layout: Layout::for_size(size),
            validate: false,
        }
    }

    /// One side's run with a fresh receive state, as the binaries start each test.
    fn side(
        ep: &mut TcpEndpoint,
        s: &LatSpec,
        role: Role,
        to: RemoteAddr,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<LatMeasurement> {
        run(ep, s, role, to, &mut RecvState::default(), stop)
    }

    fn both_sides(s: LatSpec) -> (LatMeasurement, LatMeasurement, TcpEndpoint) {
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 4);
        let to_server = s.layout.remotes(&server.local_info())[0];
        let to_client = s.layout.remotes(&client.local_info())[0];
        let t = std::thread::spawn(move || {
            let m = side(&mut server, &s, Role::Server, to_client, &mut || false).unwrap();
            (m, server)
        });
        let c = side(&mut client, &s, Role::Client, to_server, &mut || false).unwrap();
        let (sm, server) = t.join().unwrap();
        (c, sm, server)
    }

    #[test]
    fn write_lat_records_n_samples_on_both_sides() {
        let (c, s, server) = both_sides(spec(Verb::Write, 100, 300));
        assert_eq!(c.histogram.len(), 300);
        assert_eq!(s.histogram.len(), 300);
        assert!(c.histogram.min() > 0);
        let half = Layout::for_size(100).half as usize;
        assert_eq!(
            server.buffer(0)[half + 99],
            marker(5 + 300),
            "last WRITE's marker landed"
        );
    }

    #[test]
    fn write_markers_follow_perftest_past_255() {
        // ib_write_lat: the sender writes (char)++scnt, the receiver waits for (char)rcnt after rcnt++.
        let perftest: Vec<u8> = (1..=600u32).map(|n| n as u8).collect();
        let ours: Vec<u8> = (0..600u64).map(marker).collect();
        assert_eq!(ours, perftest);
        assert_ne!(
            marker(0),
            0,
            "a cleared buffer never matches the first WRITE"
        );
    }

    #[test]
    fn send_lat_records_n_samples_on_both_sides() {
        let (c, s, _) = both_sides(spec(Verb::Send, 2, 200));
        assert_eq!((c.histogram.len(), s.histogram.len()), (200, 200));
    }

    #[test]
    fn a_sweep_reuses_posted_receives_and_fresh_markers() {
        let s1 = spec(Verb::Write, 2, 50);
        let s2 = spec(Verb::Write, 4096, 50);
        let layout = Layout::for_size(4096);
        let (s1, s2) = (LatSpec { layout, ..s1 }, LatSpec { layout, ..s2 });
        let (mut server, mut client) = pair(1, layout.buffer_len(), 4);
        let to_server = layout.remotes(&server.local_info())[0];
        let to_client = layout.remotes(&client.local_info())[0];
        // The per-size barrier the out-of-band channel provides in the binaries: a size starts on both
        // sides only when both have finished the one before.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let b2 = barrier.clone();
        let t = std::thread::spawn(move || {
            let mut r = RecvState::default();
            for s in [s1, s2] {
                b2.wait();
                run(
                    &mut server,
                    &s,
                    Role::Server,
                    to_client,
                    &mut r,
                    &mut || false,
                )
                .unwrap();
            }
        });
        let mut r = RecvState::default();
        for s in [s1, s2] {
            barrier.wait();
            let m = run(
                &mut client,
                &s,
                Role::Client,
                to_server,
                &mut r,
                &mut || false,
            )
            .unwrap();
            assert_eq!(m.histogram.len(), 50);
        }
        t.join().unwrap();
    }

    #[test]
    fn read_lat_client_measures_against_a_passive_server() {
        let s = spec(Verb::Read, 64, 100);
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 4);
        let to_server = s.layout.remotes(&server.local_info())[0];
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d2 = done.clone();
        let t = std::thread::spawn(move || {
            crate::bench::bw::passive(
                &mut server,
                crate::bench::bw::SERVING,
                &mut || d2.load(std::sync::atomic::Ordering::Acquire),
                None,
            )
            .unwrap()
        });
        let m = side(&mut client, &s, Role::Client, to_server, &mut || false).unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        t.join().unwrap();
        assert_eq!(m.histogram.len(), 100);
    }

    #[test]
    fn duration_mode_server_stops_when_told() {
        let mut s = spec(Verb::Send, 2, 1);
        s.mode = RunMode::Duration { secs: 1, margin: 0 };
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 4);
        let to_server = s.layout.remotes(&server.local_info())[0];
        let to_client = s.layout.remotes(&client.local_info())[0];
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d2 = done.clone();
        let t = std::thread::spawn(move || {
            side(&mut server, &s, Role::Server, to_client, &mut || {
                d2.load(std::sync::atomic::Ordering::Acquire)
            })
            .unwrap()
        });
        let m = side(&mut client, &s, Role::Client, to_server, &mut || false).unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        let sm = t.join().unwrap();
        assert!(m.histogram.len() > 10 && sm.histogram.len() > 10);
    }

    #[test]
    fn validate_checks_every_iteration_and_catches_a_sender_without_the_pattern() {
        let mut s = spec(Verb::Write, 100, 20);
        s.validate = true;
        let (c, sm, _) = both_sides(s);
        assert_eq!((c.histogram.len(), sm.histogram.len()), (20, 20));
        // A server that validates against a client that does not fill the pattern fails at iteration 0.
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 4);
        let to_server = s.layout.remotes(&server.local_info())[0];
        let to_client = s.layout.remotes(&client.local_info())[0];
        let t = std::thread::spawn(move || {
            side(&mut server, &s, Role::Server, to_client, &mut || false)
        });
        let plain = LatSpec {
            validate: false,
            ..s
        };
        let mut r = RecvState::default();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                run(
                    &mut client,
                    &plain,
                    Role::Client,
                    to_server,
                    &mut r,
                    &mut || done.load(std::sync::atomic::Ordering::Acquire),
                )
            });
            let e = t.join().unwrap().unwrap_err();
            done.store(true, std::sync::atomic::Ordering::Release);
            assert!(
                e.to_string()
                    .contains("WRITE target of size 100, iteration 0"),
                "{e}"
            );
        });
    }
}
