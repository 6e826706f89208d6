//! Setup failures end with a clear error and exit code 2, never a hang or a panic.

use crate::common;
use common::{Done, free_port, pair_plus, pair_with, tcp_client, tcp_server};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// Both sides stopped with exit 2 (no panic), naming the size that differs.
fn both_stop_naming_the_size(s: &Done, c: &Done) {
    common::assert_both_refused(s, c, &["parameter mismatch: size"]);
    for (side, d) in [("server", s), ("client", c)] {
        assert!(!d.stderr.contains("panicked"), "{side}: {}", d.stderr);
    }
}

#[test]
fn mismatched_size_stops_both_sides_naming_size() {
    let (s, c) = pair_with(
        "write_bw",
        &["-s", "65536", "-n", "10"],
        &["-s", "1024", "-n", "10"],
    );
    both_stop_naming_the_size(&s, &c);
    s.assert_stderr("this side 65536, peer 1024");
    c.assert_stderr("this side 1024, peer 65536");
}

#[test]
fn different_tests_on_the_two_sides_name_test() {
    let port = free_port().to_string();
    let server = tcp_server("write_bw", &port, &[]);
    let c = tcp_client("read_bw", &port, &["--cpu", "1"]).wait(30, "client");
    let s = server.wait(30, "server");
    assert_eq!((c.code(), s.code()), (2, 2));
    c.assert_stderr("parameter mismatch: test: this side read_bw, peer write_bw");
}

#[test]
fn client_without_server_retries_then_gives_up_clearly() {
    let port = free_port().to_string();
    let t0 = std::time::Instant::now();
    let c = tcp_client("send_lat", &port, &["--connect-timeout", "2"])
        .wait(30, "client without server");
    assert!(
        t0.elapsed() >= Duration::from_millis(1500),
        "it retried for the timeout"
    );
    c.assert_usage_error("retrying");
    c.assert_stderr(&format!("could not reach the server at 127.0.0.1:{port}"));
}

#[test]
fn random_bytes_on_the_port_stop_the_server_clearly() {
    let port = free_port();
    let ps = port.to_string();
    let server = tcp_server("write_bw", &ps, &[]);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // Fixed "random" bytes so a failure can be reproduced.
    let junk: Vec<u8> = (0u32..256)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    s.write_all(&junk).unwrap();
    drop(s);
    let d = server.wait(30, "server fed garbage");
    d.assert_usage_error("is not a roceperf peer");
    assert!(!d.stderr.contains("panicked"), "{}", d.stderr);
}

#[test]
fn a_peer_that_connects_and_says_nothing_then_leaves_is_an_error() {
    let port = free_port();
    let ps = port.to_string();
    let server = tcp_server("send_lat", &ps, &[]);
    drop(TcpStream::connect(("127.0.0.1", port)).unwrap());
    let d = server.wait(30, "server after an empty connection");
    d.assert_usage_error("closed the out-of-band connection");
}

#[test]
fn a_server_that_dies_mid_test_fails_the_client_with_exit_1() {
    let port = free_port().to_string();
    let server = tcp_server("write_lat", &port, &["-D", "20"]);
    let client = tcp_client("write_lat", &port, &["--cpu", "1", "-D", "20"]);
    assert!(client.wait_stdout("#bytes", 20), "the test started");
    std::thread::sleep(Duration::from_millis(300));
    server.kill();
    let c = client.wait(30, "client whose server died");
    assert_eq!(
        c.code(),
        1,
        "a peer that vanished mid-test fails the test: {}",
        c.stderr
    );
    c.assert_stderr("closed");
    assert!(!c.stderr.contains("panicked"), "{}", c.stderr);
}

/// Only what changes the traffic must match across the peers: how each side shows or stores its figures
/// (units, single value, percentiles, files, -v, its core) is its own business.
#[test]
fn display_and_output_options_are_local_to_each_side() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("client.json");
    let local = ["--report_gbits", "--percentiles", "50,99", "-v"];
    let (s, c) = pair_plus(
        "write_bw",
        &["-D", "2"],
        &[&local[..], &["--json", json.to_str().unwrap()]].concat(),
    );
    assert_eq!((s.code(), c.code()), (0, 0), "{}\n{}", s.stderr, c.stderr);
    assert!(c.stdout.contains("BW average[Gb/sec]"), "{}", c.stdout);
    assert!(s.stdout.contains("BW average[MiB/sec]"), "{}", s.stdout);
    assert!(json.exists(), "the client wrote its JSON");
    let (s, c) = pair_with(
        "send_lat",
        &["-n", "100", "--output", "latency"],
        &["-n", "100"],
    );
    assert_eq!((s.code(), c.code()), (0, 0), "{}\n{}", s.stderr, c.stderr);
}

/// ... while a parameter that changes the traffic still stops both sides, naming it.
#[test]
fn a_traffic_parameter_still_must_match_alongside_local_options() {
    let (s, c) = pair_with(
        "write_bw",
        &["-D", "2", "-s", "4096"],
        &["-D", "2", "-s", "1024", "--report_gbits"],
    );
    both_stop_naming_the_size(&s, &c);
    for (side, d) in [("server", &s), ("client", &c)] {
        assert!(!d.stderr.contains("report_gbits"), "{side}: {}", d.stderr);
    }
}

#[test]
fn iterations_against_a_duration_name_both_run_lengths() {
    // Issue 33, defect 8: a -D peer used to show as "iterations: this side 1000, peer 0".
    let (s, c) = pair_with("write_bw", &["-n", "1000"], &["-D", "2"]);
    common::assert_both_refused(&s, &c, &["parameter mismatch: run length"]);
    s.assert_stderr("this side runs -n 1000, the peer -D 2");
    c.assert_stderr("this side runs -D 2, the peer -n 1000");
    let (s, c) = pair_with("write_bw", &["-D", "4"], &["-D", "3"]);
    common::assert_both_refused(&s, &c, &["give both sides the same -D"]);
    s.assert_stderr("this side runs -D 4, the peer -D 3");
    c.assert_stderr("this side runs -D 3, the peer -D 4");
}

#[test]
fn the_connection_type_and_mtu_are_named_before_the_sizes_they_set() {
    // Issue 33, defect 9: under UD the default size follows the MTU, so -c UD against -c RC (no -s)
    // used to be said as "size: this side 4096, peer 65536".
    let (s, c) = common::pair_on_lo(
        "send_bw",
        vec!["-d", "lo", "-c", "UD", "-n", "20"],
        vec!["-d", "lo", "-n", "20"],
    );
    common::assert_both_refused(&s, &c, &["parameter mismatch: connection type"]);
    s.assert_stderr("this side UD, peer RC — give both sides the same -c");
    let (s, c) = common::pair_on_lo(
        "send_bw",
        vec!["-d", "lo", "-c", "UD", "-m", "1024", "-n", "20"],
        vec!["-d", "lo", "-c", "UD", "-m", "2048", "-n", "20"],
    );
    common::assert_both_refused(&s, &c, &["parameter mismatch: mtu"]);
    c.assert_stderr("this side 2048, peer 1024 — give both sides the same -m");
}
