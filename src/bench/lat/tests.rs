//! Unit tests of the latency drivers over a connected pair of TCP endpoints.

use super::*;
use crate::bench::testing::{Serving, pair};
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
        gap: std::time::Duration::ZERO,
        unreliable: false,
        loss_timeout: std::time::Duration::from_millis(67),
        atomic: None,
        signal_every: 1,
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
    let (server, mut client) = pair(1, s.layout.buffer_len(), 4);
    let to_server = s.layout.remotes(&server.local_info())[0];
    let serving = Serving::start(server);
    let m = side(&mut client, &s, Role::Client, to_server, &mut || false).unwrap();
    serving.stop();
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
    let t =
        std::thread::spawn(move || side(&mut server, &s, Role::Server, to_client, &mut || false));
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

#[test]
fn the_latency_gap_spaces_iterations_and_stays_out_of_the_samples() {
    let gap = std::time::Duration::from_millis(20);
    let s = LatSpec {
        gap,
        ..spec(Verb::Send, 2, 10)
    };
    let t0 = Instant::now();
    let (c, srv, _) = both_sides(s);
    // 5 warm-up and 10 measured iterations, a gap before each but the first: at least 14 gaps.
    assert!(t0.elapsed() >= gap * 14, "{:?}", t0.elapsed());
    // Had the gap been counted, every sample would be at least half of it (10 ms).
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!(
        ms(c.histogram.min()) < 5.0,
        "client {} ms",
        ms(c.histogram.min())
    );
    assert!(
        ms(srv.histogram.min()) < 5.0,
        "server {} ms",
        ms(srv.histogram.min())
    );
    assert_eq!((c.histogram.len(), srv.histogram.len()), (10, 10));
}

#[test]
fn atomic_lat_checks_every_original_and_tallies_for_the_server() {
    for op in crate::params::AtomicOp::ALL {
        let seq = Atomics::latency(op);
        let s = LatSpec {
            rtt_factor: 1,
            layout: Layout::for_size(seq.half_len()),
            validate: true,
            atomic: Some(seq),
            ..spec(Verb::Atomic, 8, 100)
        };
        let half = s.layout.half as usize;
        let (mut server, mut client) = pair(1, s.layout.buffer_len(), 4);
        seq.prepare(server.buffer_mut(0), half, 0);
        seq.prepare(client.buffer_mut(0), half, 0);
        let to_server = s.layout.remotes(&server.local_info())[0];
        let serving = Serving::start(server);
        let m = side(&mut client, &s, Role::Client, to_server, &mut || false).unwrap();
        let server = serving.stop();
        assert_eq!(m.histogram.len(), 100, "{op}");
        seq.check_target(server.buffer(0), half, 0).unwrap();
        // warm-up 5 + 100 + 1 posts, all on word 0.
        let word = u64::from_ne_bytes(server.buffer(0)[half..half + 8].try_into().unwrap());
        assert_eq!(word, seq.final_value(0, 0, 106), "{op}");
    }
}
