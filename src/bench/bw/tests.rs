//! Unit tests of the bandwidth drivers over a connected pair of TCP endpoints.

use super::*;
use crate::bench::Error;
use crate::bench::testing::{Serving, pair};
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
        pace: None,
        unreliable: false,
        atomic: None,
        qp_series: None,
    }
}

/// An atomic_bw spec whose buffers hold the result slots, words and tally.
fn atomic_spec(op: crate::params::AtomicOp, mode: RunMode, validate: bool) -> BwSpec {
    let seq = Atomics::bandwidth(op, 16, validate);
    BwSpec {
        layout: Layout::for_size(seq.half_len()),
        validate,
        atomic: Some(seq),
        ..spec(Verb::Atomic, 8, mode)
    }
}

type Tcp = crate::transport::tcp::TcpEndpoint;

/// Runs `active` on the client while the server is passive; returns the measurement and the server.
fn run_passive(s: BwSpec) -> (BwMeasurement, Tcp) {
    let (m, server, _) = against_passive(&s, |_, _| {});
    (m.unwrap(), server)
}

/// Runs `active` on the client while the server is passive, once `prepare` has filled the buffers
/// (server's, client's); returns what `active` returned, the server and the client.
fn against_passive(
    s: &BwSpec,
    prepare: impl FnOnce(&mut Tcp, &mut Tcp),
) -> (Result<BwMeasurement>, Tcp, Tcp) {
    let (mut server, mut client) = pair(1, s.layout.buffer_len(), 64);
    prepare(&mut server, &mut client);
    let remotes = s.layout.remotes(&server.local_info());
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let t = std::thread::spawn(move || {
        let served = passive(
            &mut server,
            SERVING,
            &mut || d2.load(Ordering::Acquire),
            None,
        );
        (served, server)
    });
    let m = active(&mut client, s, &remotes, None, Hooks::none());
    // Let the server apply what is still in the socket before it stops.
    std::thread::sleep(std::time::Duration::from_millis(50));
    done.store(true, Ordering::Release);
    let (served, server) = t.join().unwrap();
    if m.is_ok() {
        served.unwrap();
    }
    (m, server, client)
}

#[test]
fn write_bw_counts_every_message_and_delivers_the_bytes() {
    let s = spec(Verb::Write, 1000, RunMode::Iterations(101));
    let (m, server, _) = against_passive(&s, |_, client| client.buffer_mut(0)[..1000].fill(0x3c));
    let m = m.unwrap();
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

/// Runs `s`'s receiver on `server` in a thread which, once it has measured, keeps serving until
/// `done` is set: over TCP a signaled SEND completes only once the peer has applied it.
fn spawn_receiver(
    mut server: Tcp,
    s: BwSpec,
    done: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<BwMeasurement>> {
    let done = done.clone();
    std::thread::spawn(move || {
        let mut st = RecvState::default();
        let r = receiver(&mut server, &s, &mut st, &mut || false, Hooks::none())?;
        passive(
            &mut server,
            SERVING,
            &mut || done.load(Ordering::Acquire),
            Some((&mut st, s.layout)),
        )
        .unwrap();
        Ok(r)
    })
}

/// send_bw over `qps` TCP queue pairs, the sender starting `late` after the receiver; returns the
/// sender's and the receiver's measurements.
fn send_pair(s: BwSpec, qps: usize, late: std::time::Duration) -> (BwMeasurement, BwMeasurement) {
    let (server, mut client) = pair(qps, s.layout.buffer_len(), 64);
    let remotes = s.layout.remotes(&server.local_info());
    let done = Arc::new(AtomicBool::new(false));
    let t = spawn_receiver(server, s, &done);
    std::thread::sleep(late);
    let m = active(&mut client, &s, &remotes, None, Hooks::none()).unwrap();
    done.store(true, Ordering::Release);
    (m, t.join().unwrap().unwrap())
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
        receiver(&mut server, &ours, &mut st, &mut || false, Hooks::none())
    });
    // The sender's last SENDs may never complete once the receiver has given up; its result is moot.
    let _ = std::thread::spawn(move || active(&mut client, &theirs, &remotes, None, Hooks::none()));
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
    let err = receiver(&mut server, &s, &mut st, &mut || true, Hooks::none()).unwrap_err();
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
        let (server, mut client) = pair(1, s.layout.buffer_len(), 64);
        validate::fill(&mut client.buffer_mut(0)[..300], validate::seed(300, None));
        if corrupt {
            client.buffer_mut(0)[123] ^= 0xff;
        }
        let remotes = s.layout.remotes(&server.local_info());
        let done = Arc::new(AtomicBool::new(false));
        let t = spawn_receiver(server, s, &done);
        let sent = active(&mut client, &s, &remotes, None, Hooks::none());
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
    let half = s.layout.half as usize;
    // The responder's region holds another size's pattern: every READ brings back wrong bytes.
    let (got, _, _) = against_passive(&s, |server, _| {
        validate::fill(
            &mut server.buffer_mut(0)[half..half + 700],
            validate::seed(701, None),
        )
    });
    let e = got.unwrap_err();
    assert!(e.to_string().contains("READ data of size 700"), "{e}");
}

/// Issue 18: with READ slots every READ is checked, the unsignaled ones too, each in its own slot.
#[test]
fn validate_checks_every_read_in_a_slot_of_its_own() {
    let mut s = spec(Verb::Read, 700, RunMode::Iterations(40));
    s.validate = true;
    s.layout = s.layout.with_read_slots(s.tx_depth);
    let slots = validate::ReadSlots::new(&s.layout, 700, s.tx_depth).unwrap();
    assert_eq!((slots.start, slots.stride, slots.count), (8192, 704, 16));
    assert_eq!(slots.offset(17), 8192 + 704);
    for (good, seed) in [
        (true, validate::seed(700, None)),
        (false, validate::seed(701, None)),
    ] {
        let half = s.layout.half as usize;
        let (got, _, client) = against_passive(&s, |server, _| {
            validate::fill(&mut server.buffer_mut(0)[half..half + 700], seed)
        });
        if good {
            got.unwrap();
            // Every slot was checked and cleared.
            let end = (slots.start + slots.count * slots.stride) as usize;
            assert!(
                client.buffer(0)[slots.start as usize..end]
                    .iter()
                    .all(|&b| b == 0)
            );
        } else {
            // The first READ is unsignaled (one completion every 4): it is checked all the same.
            let e = got.unwrap_err().to_string();
            assert!(
                e.contains("READ data of size 700") && e.contains("iteration 0"),
                "{e}"
            );
        }
    }
}

#[test]
fn a_paced_run_posts_no_faster_than_its_schedule() {
    let mut s = spec(Verb::Write, 1000, RunMode::Iterations(60));
    s.warmup = 0;
    s.pace = Some(crate::bench::pace::PaceSpec {
        msgs_per_sec: 1000.0,
        burst: 5,
    });
    let t0 = Instant::now();
    let (m, _) = run_passive(s);
    // 12 bursts 5 ms apart: the last is released 55 ms after the first, and its period ends at 60 ms.
    assert!(t0.elapsed() >= std::time::Duration::from_millis(55));
    assert!(m.elapsed_ns >= 60_000_000, "{}", m.elapsed_ns);
    assert_eq!(m.messages, 60);
}

#[test]
fn an_endless_run_reports_intervals_and_stops_when_asked() {
    use crate::bench::interval::{Hooks, IntervalSample, Intervals};
    use std::cell::RefCell;
    let s = spec(Verb::Write, 1000, RunMode::endless());
    let (server, mut client) = pair(1, s.layout.buffer_len(), 64);
    let remotes = s.layout.remotes(&server.local_info());
    let serving = Serving::start(server);
    let samples = RefCell::new(Vec::<IntervalSample>::new());
    let mut sink = |x: &IntervalSample| samples.borrow_mut().push(*x);
    let mut stop = || samples.borrow().len() >= 3;
    let hooks = Hooks {
        intervals: Some(Intervals {
            every: std::time::Duration::from_millis(40),
            sink: &mut sink,
        }),
        stop: Some(&mut stop),
    };
    let m = active(&mut client, &s, &remotes, None, hooks).unwrap();
    serving.stop();
    let got = samples.into_inner();
    assert_eq!(got.len(), 3, "stopped after the third interval");
    assert_eq!(got.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(got.windows(2).all(|w| w[0].end_ns == w[1].start_ns));
    // The summary covers the whole run: every interval's messages, and those since the last one.
    let sum: u64 = got.iter().map(|x| x.messages).sum();
    assert!(m.messages >= sum && sum > 0, "{} vs {sum}", m.messages);
    assert!(
        m.elapsed_ns + 1_000_000 >= got[2].end_ns,
        "{} {}",
        m.elapsed_ns,
        got[2].end_ns
    );
}

#[test]
fn atomic_bw_checks_every_original_and_the_server_every_word() {
    for op in crate::params::AtomicOp::ALL {
        for mode in [
            RunMode::Iterations(203),
            RunMode::Duration { secs: 1, margin: 0 },
        ] {
            let s = atomic_spec(op, mode, true);
            let seq = s.atomic.unwrap();
            let half = s.layout.half as usize;
            let (mut server, mut client) = pair(2, s.layout.buffer_len(), 64);
            for q in 0..2 {
                seq.prepare(server.buffer_mut(q), half, q);
                seq.prepare(client.buffer_mut(q), half, q);
            }
            let remotes = s.layout.remotes(&server.local_info());
            let serving = Serving::start(server);
            let m = active(&mut client, &s, &remotes, None, Hooks::none()).unwrap();
            let mut server = serving.stop();
            assert!(m.messages > 0, "{op} {mode:?}");
            for q in 0..2 {
                seq.check_target(server.buffer(q), half, q)
                    .unwrap_or_else(|e| panic!("{op} {mode:?}: {e}"));
            }
            // A word the peer's operations did not leave so fails the check.
            server.buffer_mut(1)[half + 64] ^= 0x40;
            assert!(matches!(
                seq.check_target(server.buffer(1), half, 1),
                Err(Error::AtomicTarget { qp: 1, word: 1, .. })
            ));
        }
    }
}

#[test]
fn atomic_bw_without_validate_runs_the_same_operations() {
    let s = atomic_spec(
        crate::params::AtomicOp::CmpAndSwap,
        RunMode::Iterations(100),
        false,
    );
    let (m, _) = run_passive(s);
    assert_eq!((m.size, m.messages), (8, 100));
}

/// Each queue pair's share and series add up to the row's (TCP connections as queue pairs).
fn assert_shares_add_up(m: &BwMeasurement, qps: usize) {
    assert_eq!(m.per_qp.len(), qps);
    assert_eq!(m.per_qp.iter().sum::<u64>(), m.messages);
    let s = m.series.as_ref().expect("--qp-series asked");
    assert_eq!(s.interval_ms, 1);
    let last = s.bytes.last().unwrap();
    let shares: Vec<u64> = m.per_qp.iter().map(|&n| n * m.size).collect();
    assert_eq!(last, &shares, "the last sample is each queue pair's bytes");
    assert!(s.bytes.iter().all(|row| row.len() == qps));
    assert!(s.t_ms.windows(2).all(|w| w[0] < w[1]), "{:?}", s.t_ms);
}

/// `active` over `qps` TCP queue pairs against a passive server; its measurement.
fn active_on_qps(s: &BwSpec, qps: usize) -> BwMeasurement {
    let (mut server, mut client) = pair(qps, s.layout.buffer_len(), 64);
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
        .unwrap()
    });
    let m = active(&mut client, s, &remotes, None, Hooks::none()).unwrap();
    done.store(true, Ordering::Release);
    t.join().unwrap();
    m
}

#[test]
fn write_bw_counts_each_queue_pairs_share_and_series() {
    let s = BwSpec {
        qp_series: Some(1),
        ..spec(Verb::Write, 4096, RunMode::Iterations(400))
    };
    let m = active_on_qps(&s, 3);
    assert_eq!(m.per_qp, vec![400, 400, 400]);
    assert_shares_add_up(&m, 3);
}

#[test]
fn a_timed_run_counts_each_queue_pairs_share_inside_its_window() {
    let s = BwSpec {
        qp_series: Some(1),
        ..spec(Verb::Write, 1024, RunMode::Duration { secs: 1, margin: 0 })
    };
    let m = active_on_qps(&s, 2);
    assert!(m.per_qp.iter().all(|&n| n > 0), "{:?}", m.per_qp);
    assert_shares_add_up(&m, 2);
    // Sampled every millisecond of a one-second window: many samples, none past its end.
    let series = m.series.unwrap();
    assert!(series.t_ms.len() > 10, "{}", series.t_ms.len());
    assert!(*series.t_ms.last().unwrap() <= m.elapsed_ns as f64 / 1e6 + 1e-9);
}

#[test]
fn the_send_bw_receiver_counts_each_queue_pairs_share_where_they_arrive() {
    let s = BwSpec {
        qp_series: Some(1),
        ..spec(Verb::Send, 300, RunMode::Iterations(200))
    };
    let (m, r) = send_pair(s, 2, std::time::Duration::ZERO);
    assert_eq!(m.per_qp, vec![200, 200]);
    assert_eq!(r.per_qp, vec![200, 200]);
    assert_shares_add_up(&r, 2);
}
