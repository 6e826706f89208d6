//! roce_ref end to end on loopback: a UDP ping-pong between two processes and a TCP stream with
//! --local each print one JSON line whose figures are present and positive. No timing thresholds.

use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_roce_ref");

/// A port free for both UDP and TCP right now.
fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Waits for `child` at most `limit`, killing it (and failing the test) when it takes longer.
fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let give_up = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > give_up {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("roce_ref starts")
}

/// The one JSON line of a successful run.
fn json_of(out: &Output, what: &str) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{what} prints one line: {stdout}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{what}: {e}: {stdout}"))
}

fn positive(v: &serde_json::Value, key: &str) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"));
    assert!(x > 0.0, "{key} = {x} in {v}");
    x
}

/// Two cores this process may use, for --local's server and client (the same one on a 1-core box).
fn two_cores() -> (String, String) {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    let first = ids.first().map_or(0, |c| c.id);
    let second = ids.get(1).map_or(first, |c| c.id);
    (first.to_string(), second.to_string())
}

#[test]
fn udp_pingpong_between_two_processes_reports_one_way_latency() {
    let port = free_port().to_string();
    let common = [
        "udp-pingpong",
        "-s",
        "36",
        "-n",
        "300",
        "--warmup",
        "50",
        "-p",
        &port,
        "--json",
    ];
    let server = spawn(&common);
    let mut client_args = common.to_vec();
    client_args.push("127.0.0.1");
    let client = spawn(&client_args);
    let c = json_of(&finish(client, Duration::from_secs(60), "client"), "client");
    let s = json_of(&finish(server, Duration::from_secs(30), "server"), "server");

    assert_eq!(c["mode"], "udp-pingpong");
    assert_eq!(c["role"], "client");
    assert_eq!(c["size_bytes"], 36);
    assert_eq!(c["iterations"], 300);
    let median = positive(&c, "median_us");
    positive(&c, "min_us");
    let max = positive(&c, "max_us");
    assert!(median <= max, "{c}");
    // 300 round trips put fewer than 10 samples beyond p99: withheld, not the largest sample.
    assert!(c["p99_us"].is_null() && c["p99_9_us"].is_null(), "{c}");
    assert_eq!(s["role"], "server");
    assert_eq!(s["answered"], 350, "warm-up and measured round trips: {s}");
}

#[test]
fn tcp_stream_local_reports_what_the_receiver_measured() {
    let port = free_port().to_string();
    let (server_cpu, cpu) = two_cores();
    let args = [
        "tcp-stream",
        "--local",
        "-D",
        "0.5",
        "--warmup-ms",
        "100",
        "-p",
        &port,
        "--cpu",
        &cpu,
        "--server-cpu",
        &server_cpu,
        "--json",
    ];
    let out = finish(spawn(&args), Duration::from_secs(60), "tcp-stream --local");
    let v = json_of(&out, "tcp-stream --local");
    assert_eq!(v["mode"], "tcp-stream");
    assert_eq!(v["role"], "local");
    assert_eq!(v["size_bytes"], 65536);
    positive(&v, "gbps");
    positive(&v, "received_bytes");
    positive(&v, "measured_s");
    positive(&v, "sent_gbps");
}

#[test]
fn usage_errors_name_the_flag_and_exit_2() {
    let out = Command::new(BIN)
        .args(["packet-pingpong", "02:00:00:00:00:01"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-d/--dev"));
    let out = Command::new(BIN)
        .args(["udp-stream", "-s", "abc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--size"));
}

#[test]
fn a_client_with_other_options_is_told_which_and_both_exit_2() {
    let port = free_port().to_string();
    let server = spawn(&["udp-pingpong", "-s", "36", "-p", &port]);
    let client = spawn(&["udp-pingpong", "-s", "20", "-p", &port, "127.0.0.1"]);
    let c = finish(client, Duration::from_secs(30), "client");
    let s = finish(server, Duration::from_secs(30), "server");
    for (out, who) in [(&c, "client"), (&s, "server")] {
        assert_eq!(out.status.code(), Some(2), "{who}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("the server runs -s 36, the client -s 20"),
            "{who}: {err}"
        );
    }
}
