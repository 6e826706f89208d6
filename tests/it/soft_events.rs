//! `-e/--events`: a soft endpoint that finds nothing to do sleeps in poll(2) instead of spinning. It
//! still moves every byte (in process and between the binaries, whose header and JSON say which mode
//! ran), and a side waiting for a peer that sends nothing uses little of its core.

use crate::common;
use crate::soft_support;

use common::pair_writing_files;
use roceperf::transport::Endpoint;
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use soft_support::endpoints::{connect, exchange, free_port, udp_cfg};
use std::time::{Duration, Instant};

/// This thread's CPU time (user + system) so far, and how many times it gave up the CPU by itself
/// (slept: voluntary context switches).
fn thread_usage() -> (Duration, i64) {
    // SAFETY: all-zero is a valid rusage, which getrusage fills in.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a live rusage; RUSAGE_THREAD is this thread.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    let t = |v: libc::timeval| Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
    (t(u.ru_utime) + t(u.ru_stime), u.ru_nvcsw)
}

/// What waiting on `ep` for `wall` with nothing arriving cost this thread.
struct Waited {
    cpu: Duration,
    wall: Duration,
    sleeps: i64,
}

/// Polls `ep` for `wall` with nothing arriving.
fn wait_on(ep: &mut SoftEndpoint, wall: Duration) -> Waited {
    let mut out = [roceperf::transport::Completion::EMPTY; 16];
    let ((c0, s0), t0) = (thread_usage(), Instant::now());
    while t0.elapsed() < wall {
        assert_eq!(ep.poll_cq(&mut out).unwrap(), 0, "nothing was posted");
    }
    let (c1, s1) = thread_usage();
    Waited {
        cpu: c1 - c0,
        wall: t0.elapsed(),
        sleeps: s1 - s0,
    }
}

#[test]
fn an_event_driven_endpoint_moves_every_byte_and_sleeps_while_it_waits() {
    let port = free_port("127.0.5.1");
    let open = |ip: &str, events: bool| {
        SoftEndpoint::open(SoftConfig {
            events,
            ..udp_cfg(ip, port)
        })
        .unwrap()
    };
    let (mut a, mut b) = (open("127.0.5.1", true), open("127.0.5.2", true));
    connect(&mut a, &mut b);
    // WRITE, SEND with immediate and READ, every byte checked at the other end.
    exchange(&mut a, &mut b);
    // The peer sends nothing now: a sleeps in poll(2), waking at least every millisecond (a
    // loaded machine only lowers the CPU time it gets).
    let w = wait_on(&mut a, Duration::from_millis(400));
    assert!(
        w.cpu < w.wall / 4,
        "-e: {:?} of CPU over {:?} of waiting; a sleeping side uses little of its core",
        w.cpu,
        w.wall
    );
    assert!(
        w.sleeps >= 50,
        "-e: it slept {} times in {:?}",
        w.sleeps,
        w.wall
    );
    // The same wait busy-polling never gives up the CPU by itself (what the scheduler takes from
    // it on a loaded machine are involuntary switches): the sleeps above are -e's.
    let (mut c, mut d) = (open("127.0.5.3", false), open("127.0.5.4", false));
    connect(&mut c, &mut d);
    let w = wait_on(&mut c, Duration::from_millis(200));
    assert!(w.sleeps < 10, "busy polling slept {} times", w.sleeps);
}

#[test]
fn the_binaries_run_with_events_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    for test in ["write_lat", "send_bw"] {
        let args = ["-d", "lo", "-s", "3000", "-n", "200", "--validate", "-e"];
        let (s, c) = pair_writing_files(dir.path(), test, test, &args);
        for (side, done) in [("server", &s), ("client", &c)] {
            assert!(
                done.stdout
                    .contains(" Completions     : events (-e: sleeps in poll(2) when idle)"),
                "{test} {side}: {}",
                done.stdout
            );
        }
        let doc = common::json_file(&dir.path().join(format!("{test}client.json")));
        assert_eq!(doc["test"]["events"], true, "{test}: {doc}");
        let r = &doc["results"][0];
        assert_eq!(r["size_bytes"], 3000, "{test}: {r}");
    }
    // Without -e the header says the side polled, and the JSON has no `events`.
    let (_, c) = pair_writing_files(
        dir.path(),
        "poll",
        "write_lat",
        &["-d", "lo", "-s", "64", "-n", "100"],
    );
    assert!(
        c.stdout.contains(" Completions     : busy polling"),
        "{}",
        c.stdout
    );
    let doc = common::json_file(&dir.path().join("pollclient.json"));
    assert!(doc["test"].get("events").is_none(), "{doc}");
}
