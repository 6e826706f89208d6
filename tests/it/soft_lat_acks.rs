//! Issue 14: a soft latency test signals one SEND or WRITE in `signal_every`, so its peer acknowledges
//! in batches (one ACK a packet would put a second packet on every hop), and still ends with every
//! send acknowledged: nothing is left for a retransmission timer to resend after the run.

use std::time::{Duration, Instant};

use roceperf::bench::Layout;
use roceperf::bench::bw::RecvState;
use roceperf::bench::lat::{self, LatMeasurement, LatSpec};
use roceperf::params::{Role, RunMode, Verb};
use roceperf::transport::soft::endpoint::SoftEndpoint;
use roceperf::transport::{Completion, Endpoint};

use crate::soft_support::endpoints::{connect, free_port, udp_cfg};

fn spec(verb: Verb, mode: RunMode, signal_every: u32) -> LatSpec {
    LatSpec {
        verb,
        size: 2,
        mode,
        warmup: 5,
        rtt_factor: 2,
        cpu_util: false,
        layout: Layout::for_size(2),
        validate: true,
        gap: Duration::ZERO,
        unreliable: false,
        loss_timeout: Duration::from_millis(67),
        atomic: None,
        signal_every,
    }
}

/// One latency run between two soft endpoints on lo, the server on its own thread; both sides'
/// measurements and endpoints.
fn run(
    s: LatSpec,
    ips: (&str, &str),
) -> (LatMeasurement, LatMeasurement, SoftEndpoint, SoftEndpoint) {
    let port = free_port(ips.0);
    let mut server = SoftEndpoint::open(udp_cfg(ips.0, port)).unwrap();
    let mut client = SoftEndpoint::open(udp_cfg(ips.1, port)).unwrap();
    connect(&mut server, &mut client);
    let to_server = s.layout.remotes(&server.local_info())[0];
    let to_client = s.layout.remotes(&client.local_info())[0];
    lat::clear_marker(&mut server, &s.layout, s.size);
    lat::clear_marker(&mut client, &s.layout, s.size);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let told = done.clone();
    let t = std::thread::spawn(move || {
        let mut stop = || told.load(std::sync::atomic::Ordering::Acquire);
        let m = lat::run(
            &mut server,
            &s,
            Role::Server,
            to_client,
            &mut RecvState::default(),
            &mut stop,
        )
        .unwrap();
        (m, server)
    });
    let m = lat::run(
        &mut client,
        &s,
        Role::Client,
        to_server,
        &mut RecvState::default(),
        &mut || false,
    )
    .unwrap();
    done.store(true, std::sync::atomic::Ordering::Release);
    let (sm, server) = t.join().unwrap();
    (m, sm, client, server)
}

/// Asserts that `ep` holds no unacknowledged send: polled alone (its peer silent) for longer than
/// any retransmission timeout it could have armed (the fast ones double up to the 67 ms ACK
/// timeout), it never times out. Timeouts during the run itself are another matter: two busy
/// threads on a loaded machine deschedule each other.
fn assert_all_acknowledged(side: &str, ep: &mut SoftEndpoint) {
    let mut buf = [Completion::EMPTY; 16];
    // The last ACKs in flight arrive first.
    for _ in 0..100 {
        ep.poll_cq(&mut buf).unwrap();
    }
    let before = ep.counters();
    let until = Instant::now() + Duration::from_millis(150);
    while Instant::now() < until {
        ep.poll_cq(&mut buf).unwrap();
    }
    let after = ep.counters();
    assert_eq!(
        (after.timeouts, after.retransmitted_packets),
        (before.timeouts, before.retransmitted_packets),
        "the {side} resent after the run: a send was left unacknowledged: {after:?}"
    );
}

#[test]
fn write_and_send_lat_ask_for_one_ack_in_sixteen_and_leave_nothing_unacknowledged() {
    for (verb, ips) in [
        (Verb::Write, ("127.0.14.1", "127.0.14.2")),
        (Verb::Send, ("127.0.14.3", "127.0.14.4")),
    ] {
        let n = 200;
        let (c, s, mut client, mut server) = run(spec(verb, RunMode::Iterations(n), 16), ips);
        assert_eq!(c.histogram.len(), n, "{verb:?}: client samples");
        assert_eq!(s.histogram.len(), n, "{verb:?}: server samples");
        let (cc, sc) = (client.counters(), server.counters());
        // warmup + n + 1 posts a side: the warm-up's, one in 16 and the last are signaled; a
        // resent duplicate (a descheduled peer) is acknowledged again.
        let posts = 5 + n + 1;
        let most = 6 + posts / 16 + 1;
        for (side, k) in [("client", cc), ("server", sc)] {
            assert!(
                k.acks_sent >= posts / 16 && k.acks_sent <= most + k.duplicate_requests,
                "{verb:?}: the {side} sent {} ACKs for {posts} messages (want {}..={most} + duplicates): {k:?}",
                k.acks_sent,
                posts / 16
            );
        }
        assert_all_acknowledged("client", &mut client);
        assert_all_acknowledged("server", &mut server);
    }
}

#[test]
fn a_timed_run_without_margin_still_ends_on_signaled_sends() {
    // margin 0: the window covers the whole run, so only the run's end can make its last posts
    // signaled (the initiator stops after a multiple of 16 iterations).
    let mode = RunMode::Duration { secs: 1, margin: 0 };
    let (c, s, mut client, mut server) =
        run(spec(Verb::Write, mode, 16), ("127.0.14.5", "127.0.14.6"));
    assert!(
        c.histogram.len() > 100,
        "client samples {}",
        c.histogram.len()
    );
    assert!(
        s.histogram.len() > 100,
        "server samples {}",
        s.histogram.len()
    );
    assert_all_acknowledged("client", &mut client);
    assert_all_acknowledged("server", &mut server);
}

#[test]
fn signaling_every_post_acknowledges_every_message_as_perftest_does() {
    let n = 100;
    let (_, _, client, server) = run(
        spec(Verb::Write, RunMode::Iterations(n), 1),
        ("127.0.14.7", "127.0.14.8"),
    );
    let posts = 5 + n + 1;
    for (side, k) in [("client", client.counters()), ("server", server.counters())] {
        assert!(
            k.acks_sent >= posts,
            "the {side} sent {} ACKs for {posts} messages: {k:?}",
            k.acks_sent
        );
    }
}

#[test]
fn the_binaries_ask_for_one_ack_in_sixteen_between_soft_peers_and_validate_every_message() {
    for test in ["write_lat", "send_lat"] {
        let dir = tempfile::tempdir().unwrap();
        let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
        let args = |json: &std::path::Path| {
            vec![
                "-d".to_string(),
                "lo".into(),
                "-n".into(),
                "3000".into(),
                "--validate".into(),
                "--json".into(),
                json.to_str().unwrap().into(),
            ]
        };
        let (sa, ca) = (args(&sj), args(&cj));
        let (s, c) = crate::common::pair_on_lo(
            test,
            sa.iter().map(String::as_str).collect(),
            ca.iter().map(String::as_str).collect(),
        );
        crate::common::assert_both_ok(test, &s, &c);
        for (side, path) in [("server", &sj), ("client", &cj)] {
            let doc = crate::common::json_file(path);
            assert_eq!(
                doc["results"][0]["iterations"], 3000,
                "{test} {side}: {doc}"
            );
            let k = &doc["test"]["counters"];
            let (acks, dups) = (
                k["acks_sent"].as_u64().unwrap(),
                k["duplicate_requests"].as_u64().unwrap(),
            );
            // The warm-up's, one in 16 of the 3001 others: a few hundred, not one per message.
            assert!(
                acks - dups.min(acks) < 3000 / 4,
                "{test}: the {side} sent {acks} ACKs ({dups} for duplicates) for 3000 messages: {k}"
            );
        }
    }
}
