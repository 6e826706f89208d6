//! Issue 18: failures reported truthfully and bounded. Each point through the binaries: the exit code
//! on both sides, a loose bound on the time, and the counters named.

use crate::common;
use crate::common::assert_contains;
use crate::soft_support::endpoints::send_only_v2;
use common::{Done, Proc, free_port, spawn, tcp_server};
use std::io::Write;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sends `sig` to a running binary.
fn signal(p: &Proc, sig: libc::c_int) {
    // SAFETY: kill(2) on a child process this test started and still owns.
    let rc = unsafe { libc::kill(p.pid() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill({sig}): {}", std::io::Error::last_os_error());
}

/// Starts a write_bw server bound to `binds[0]` (core 0) and, once it listens, a client bound to
/// `binds[1]` (core 1) that connects to it, both with `both` and a fresh `-p`. Returns them running.
fn start_pair(binds: [&str; 2], both: &[&str]) -> (Proc, Proc) {
    start_pair_with(binds, both, &[], || {})
}

/// [`start_pair`], the server with `server_only` arguments too, running `between` once the server
/// listens and before the client starts.
fn start_pair_with(
    [srv, cli]: [&str; 2],
    both: &[&str],
    server_only: &[&str],
    between: impl FnOnce(),
) -> (Proc, Proc) {
    let port = free_port().to_string();
    let mut s = vec!["--bind", srv, "--cpu", "0", "-p", &port];
    s.extend_from_slice(server_only);
    s.extend_from_slice(both);
    let server = spawn("write_bw", &s);
    assert!(server.wait_stdout("Waiting for client", 20), "server up");
    between();
    let mut c = vec!["--bind", cli, "--cpu", "1", "-p", &port];
    c.extend_from_slice(both);
    c.push("127.0.0.1");
    (server, spawn("write_bw", &c))
}

/// Once `p` has started the test (its table header) and run half a second more: the time then.
fn running(p: &Proc) -> Instant {
    assert!(p.wait_stdout("#bytes", 30), "the test started");
    std::thread::sleep(Duration::from_millis(500));
    Instant::now()
}

/// Point 1: the server is stopped for 3 s mid-run; the client's transport gives up (retry exceeded)
/// and exits 1; it tells the server its test failed, so the server, resumed, exits 1 too (not 2).
#[test]
fn a_failure_the_peer_reports_mid_run_is_exit_1_on_both_sides() {
    let both = ["-d", "lo", "-D", "10", "-s", "4096", "-u", "8"];
    let (server, client) = start_pair(["127.0.18.1", "127.0.18.2"], &both);
    let t0 = running(&client);
    signal(&server, libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(3));
    signal(&server, libc::SIGCONT);
    let c = client.wait(60, "client whose server was stopped");
    let s = server.wait(60, "server resumed");
    assert!(t0.elapsed() < Duration::from_secs(40), "{:?}", t0.elapsed());
    assert_eq!(c.code(), 1, "client: {}", c.stderr);
    assert_eq!(s.code(), 1, "server: {}", s.stderr);
    assert!(
        s.stderr.contains("stopped:"),
        "the server names the peer's failure: {}",
        s.stderr
    );
    for d in [&c, &s] {
        assert!(!d.stderr.contains("panicked"), "{}", d.stderr);
    }
}

/// Point 1, perftest's dialect: a perftest peer that fails says nothing, it just exits; a peer lost
/// after the test began is a failed test (1), not a setup error (2).
#[test]
fn a_perftest_peer_lost_mid_run_is_exit_1() {
    let both = ["-d", "lo", "--oob", "perftest", "-D", "10", "-s", "4096"];
    let (server, client) = start_pair(["127.0.18.8", "127.0.18.9"], &both);
    let t0 = running(&server);
    signal(&client, libc::SIGKILL);
    let s = server.wait(30, "server whose perftest-dialect client died");
    drop(client.kill());
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(s.code(), 1, "{}", s.stderr);
    s.assert_stderr("--oob perftest: perftest peer closed the connection");
}

/// Point 2: `-x N` is entry N of the table `-v` prints; an entry of the other version is refused.
#[test]
fn gid_index_selects_the_entry_v_prints() {
    let port = free_port().to_string();
    // The table as -v prints it (the server waits for a client; only its setup output matters).
    let probe = spawn(
        "write_bw",
        &["-d", "lo", "-v", "-p", &port, "--bind", "127.0.18.3"],
    );
    assert!(probe.wait_stdout("Waiting for client", 20));
    std::thread::sleep(Duration::from_millis(200));
    let out = probe.kill().stderr;
    let table: Vec<(usize, String)> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("GID["))
        .filter_map(|l| {
            let (i, rest) = l.split_once("] ")?;
            Some((i.parse().ok()?, rest.to_string()))
        })
        .collect();
    assert!(!table.is_empty(), "-v prints the GID table: {out}");
    let Some((x, entry)) = table
        .iter()
        .find(|(_, e)| e.starts_with("::1 (v2"))
        .cloned()
    else {
        eprintln!("skipped: lo has no ::1 here");
        return;
    };
    let v1 = table
        .iter()
        .find(|(_, e)| e.contains("(v1"))
        .map(|(i, _)| *i);
    // [::1]:4791 may be taken for a moment by another test: try a few times.
    let mut chosen = String::new();
    for _ in 0..10 {
        let port = free_port().to_string();
        let p = spawn(
            "write_bw",
            &["-d", "lo", "-v", "-x", &x.to_string(), "-p", &port],
        );
        let up = p.wait_stdout("Waiting for client", 10);
        std::thread::sleep(Duration::from_millis(200));
        let d = p.kill();
        if up {
            chosen = d.stderr;
            break;
        }
        d.assert_stderr("is taken");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        chosen.contains("UDP socket [::1]:4791") && chosen.contains("GID ::1"),
        "-x {x} is GID[{x}] {entry}: {chosen}"
    );
    if let Some(i) = v1 {
        let d = spawn("write_bw", &["-d", "lo", "-x", &i.to_string(), "-p", &port])
            .wait(20, "server with a v1 GID index");
        assert_eq!(d.code(), 2, "{}", d.stderr);
        assert!(
            d.stderr.contains(&format!("-x {i} is GID"))
                && d.stderr
                    .contains("which RoCE v2 cannot use; pick a RoCE v2 entry")
                && d.stderr.contains(&format!("{x}: ::1 (v2")),
            "{}",
            d.stderr
        );
    }
    let d = spawn("write_bw", &["-d", "lo", "-x", "60", "-p", &port]).wait(20, "-x 60");
    d.assert_usage_error(&format!("interface lo has {} GIDs", table.len()));
}

/// A TCP client that sends `bytes`, one every `pace`, then waits until the peer closes.
fn drip(port: u16, bytes: &[u8], pace: Duration) -> std::thread::JoinHandle<()> {
    let bytes = bytes.to_vec();
    std::thread::spawn(move || {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return;
        };
        for b in bytes {
            if s.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(pace);
        }
    })
}

/// Waits for `p`, which must give up with exit 2 at its `secs` deadline counted from `t0`: not
/// before it, nor long after. Returns what it left.
fn given_up_at(p: Proc, what: &str, t0: Instant, secs: u64) -> Done {
    let d = p.wait(30, what);
    let took = t0.elapsed();
    assert_eq!(d.code(), 2, "{}", d.stderr);
    assert!(
        took >= Duration::from_millis(secs * 1000 - 500) && took < Duration::from_secs(10),
        "{took:?}"
    );
    d
}

/// Point 3: a peer that drips its hello one byte a second meets one deadline (--connect-timeout),
/// and the error says how much of the hello came.
#[test]
fn a_dripping_peer_is_cut_off_at_the_handshake_deadline_naming_what_it_sent() {
    let port = free_port();
    let server = tcp_server("write_bw", &port.to_string(), &["--connect-timeout", "3"]);
    let t0 = Instant::now();
    let dripper = drip(port, b"roceperf\0\x03\0\0", Duration::from_secs(1));
    let d = given_up_at(server, "server fed one byte a second", t0, 3);
    d.assert_stderr(
        "did not complete the out-of-band handshake within 3 s: during the hello it sent",
    );
    d.assert_stderr("of 12 bytes");
    dripper.join().unwrap();
}

/// Point 3: a server that accepts and says nothing is given up on at the deadline, not after 40 s,
/// and the client says that nothing of the hello came.
#[test]
fn a_silent_server_is_given_up_on_at_the_handshake_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let t0 = Instant::now();
    let c = common::tcp_client("send_lat", &port, &["--connect-timeout", "2"]);
    let (_held, _) = listener.accept().unwrap();
    let c = given_up_at(c, "client of a silent server", t0, 2);
    c.assert_stderr("during the hello it sent 0 of 12 bytes");
}

/// Point 3, perftest's dialect: the same deadline over its whole setup.
#[test]
fn a_dripping_perftest_peer_meets_the_setup_deadline() {
    let port = free_port();
    let server = spawn(
        "write_bw",
        &[
            "-d",
            "lo",
            "--bind",
            "127.0.18.4",
            "--oob",
            "perftest",
            "--connect-timeout",
            "3",
            "-p",
            &port.to_string(),
        ],
    );
    assert!(server.wait_stdout("Waiting for client", 20));
    let t0 = Instant::now();
    let dripper = drip(
        port,
        b"6.06\0\0\0\0\0\0\0\0\0\0\0\0",
        Duration::from_secs(1),
    );
    let d = given_up_at(
        server,
        "perftest-dialect server fed one byte a second",
        t0,
        3,
    );
    assert!(
        d.stderr.contains("did not complete the setup within 3 s")
            && d.stderr.contains("of 16 bytes"),
        "{}",
        d.stderr
    );
    dripper.join().unwrap();
}

/// Points 4 and 7: datagrams from another address carrying the server's QPN (printed on its console)
/// are dropped and counted as `wrong_source`; zero-length datagrams are counted as `empty`. The run
/// completes on both sides.
#[test]
fn packets_not_from_the_peer_and_empty_datagrams_are_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let (srv, cli, forger) = ("127.0.18.5", "127.0.18.6", "127.0.0.9");
    let junk = UdpSocket::bind((forger, 0)).unwrap();
    let jport = junk.local_addr().unwrap().port();
    let (server, client) = start_pair_with(
        [srv, cli],
        &["-d", "lo", "-D", "4", "-s", "1024"],
        &["--json", json.to_str().unwrap()],
        || {
            for _ in 0..3 {
                junk.send_to(&[], (srv, 4791)).unwrap();
            }
        },
    );
    assert!(client.wait_stdout("#bytes", 30), "the test started");
    let out = server.stdout_now();
    let qpn = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("local address: LID 0000 QPN 0x"))
        .and_then(|l| u32::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .unwrap_or_else(|| panic!("the server prints its QPN: {out}"));
    let mut sent = 0u64;
    for i in 0..50u32 {
        let pkt = send_only_v2((forger, jport), (srv, 4791), qpn, i * 7919, *b"bad!");
        junk.send_to(&pkt, (srv, 4791)).unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let d = common::drops_once_both_ok(server, client, &json);
    assert_eq!(d["empty"], 3, "{d}");
    let wrong = d["wrong_source"].as_u64().unwrap();
    assert!(wrong >= 1 && wrong <= sent, "{wrong} of {sent}: {d}");
    assert_eq!(d["unknown_qpn"], 0, "{d}");
}

/// Point 5: buffers that cannot fit are refused up front, quickly, naming the flags and the amount,
/// on a server and on a client (before it connects anywhere).
#[test]
fn buffers_that_cannot_fit_are_refused_up_front_naming_q_and_s() {
    for host in [None, Some("127.0.0.1")] {
        let port = free_port().to_string();
        let mut args = vec!["--transport", "tcp", "-q", "16384", "-s", "8M", "-p", &port];
        args.extend(host);
        let t0 = Instant::now();
        let d = spawn("write_bw", &args).wait(20, "a run of 256 GiB");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(d.code(), 2, "{}", d.stderr);
        assert!(
            d.stderr.contains(
                "-q 16384 with -s 8388608 needs 256 GiB of buffers (16384 queue pairs × 16 MiB"
            ),
            "{}",
            d.stderr
        );
        assert!(!d.stderr.contains("panicked"), "{}", d.stderr);
    }
}

/// Point 5: under an address-space limit the buffers fit by the numbers but not next to the rest of
/// the process: the allocation that fails is exit 2 with a message, never SIGABRT (134).
#[test]
fn an_allocation_the_host_refuses_is_exit_2_not_an_abort() {
    // 60 queue pairs × 16 MiB = 960 MiB; the limits put the failure before, inside or after the
    // buffers. Each run is exit 2 with a message naming ulimit -v, or it fits and waits for a client.
    let mut refused = 0;
    for limit_mib in [961u64, 970, 990] {
        let port = free_port().to_string();
        let cmd = format!(
            "ulimit -v {}; exec {} -d lo --bind 127.0.18.7 -q 60 -s 8M -p {port}",
            limit_mib * 1024,
            common::bin("write_bw")
        );
        let mut child = Command::new("sh")
            .args(["-c", &cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        let Some(st) = status else {
            continue; // it fit and waited for a client
        };
        assert_eq!(
            st.code(),
            Some(2),
            "ulimit -v {limit_mib} MiB: {st:?} {err}"
        );
        assert_contains(&err, "ulimit -v");
        refused += 1;
    }
    assert!(refused >= 1, "at least the tightest limit is refused");
}

/// Point 6: -p 0 would listen on a port the client cannot know: a usage error naming -p.
#[test]
fn port_zero_is_a_usage_error_naming_p() {
    for host in [None, Some("127.0.0.1")] {
        let mut args = vec!["--transport", "tcp", "-p", "0"];
        args.extend(host);
        let d = spawn("write_bw", &args).wait(10, "-p 0");
        d.assert_usage_error("--port");
        d.assert_stderr("-p 0 would listen on a port");
    }
}

/// Point 8: read_bw --validate checks every READ (each in a slot of its own), and every header says
/// exactly what its test checks.
#[test]
fn validate_says_what_it_checks_and_read_bw_checks_every_read() {
    for (test, says) in [
        ("read_bw", "every READ lands in a slot of its own"),
        ("write_bw", "not each WRITE as it landed"),
        ("send_bw", "in the one target region all receives share"),
        (
            "write_lat",
            "every message's payload is checked against a pattern of its own",
        ),
    ] {
        let (s, c) = common::pair(test, &["-s", "65536", "-n", "200", "--validate"]);
        common::assert_both_ok(test, &s, &c);
        for (side, d) in [("server", &s), ("client", &c)] {
            assert!(d.stdout.contains(says), "{test} {side}: {}", d.stdout);
        }
    }
}

/// Point 9: roce_gate refuses a negative latency in a CSV (exit 2, naming file, line and column) and
/// reads `-` as standard input.
#[test]
fn roce_gate_refuses_negative_latencies_and_reads_standard_input() {
    use roceperf::params::{Metric, Role, TestKind, TransportKind, Verb};
    use roceperf::results;
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("lat.csv");
    let r = common::results::lat_result(1.5);
    let test = TestKind::new(Verb::Write, Metric::Latency);
    let info = common::results::run_info(test, TransportKind::Tcp, None, Role::Client);
    results::append_csv(&good, &info, &[r]).unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let col = lines[0]
        .split(',')
        .position(|h| h == "lat_median_us")
        .unwrap();
    let mut cells: Vec<String> = lines[1].split(',').map(str::to_string).collect();
    cells[col] = "-1.5".into();
    lines[1] = cells.join(",");
    let bad = dir.path().join("neg.csv");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let gate = |args: &[&str], stdin: Option<&str>| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_roce_gate"))
            .args(args)
            .env_remove("GITHUB_ACTIONS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    };
    let o = gate(&["--max-p99", "1s", bad.to_str().unwrap()], None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_contains(
        &err,
        &format!(
            "{} line 2: lat_median_us \"-1.5\" is negative",
            bad.display()
        ),
    );
    let o = gate(&["--max-p99", "1s", "-"], Some(&text));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = gate(
        &["--max-p99", "1s", "-"],
        Some(&std::fs::read_to_string(&bad).unwrap()),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_contains(&err, "<stdin> line 2: lat_median_us");
}

#[test]
fn a_timed_run_that_overran_its_duration_says_so() {
    // Issue 33: a client stopped (SIGSTOP) for 6 s during -D 4 measured a window of about 8 s and said
    // nothing. The run still ends 0 (its figures are what they are) but stderr names the overrun.
    let port = free_port().to_string();
    let args = ["-D", "4"];
    let server = tcp_server("write_bw", &port, &args);
    let client = spawn(
        "write_bw",
        &[
            "--transport",
            "tcp",
            "-p",
            &port,
            "-D",
            "4",
            "--cpu",
            "1",
            "127.0.0.1",
        ],
    );
    assert!(client.wait_stdout("#bytes", 20), "the client never started");
    std::thread::sleep(Duration::from_millis(1500));
    signal(&client, libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(6));
    signal(&client, libc::SIGCONT);
    let c = client.wait(60, "client");
    let s = server.wait(30, "server");
    common::assert_both_ok("a client stopped for 6 s during -D 4", &s, &c);
    c.assert_stderr("this -D 4 run took");
    c.assert_stderr("more than the 1 s margin (-f)");
    c.assert_stderr("stopped or starved");
}

/// Issue 33, defect 5: a run that fails mid-sweep still writes its `--json`: the sizes that completed,
/// the transport's counters at that point and the error (its message, the part that failed, the
/// exit code); the exit code stays 1.
#[test]
fn a_run_that_fails_mid_sweep_still_writes_its_json_with_the_error_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let port = free_port().to_string();
    let both = ["-d", "lo", "-a", "-n", "1000", "-p", &port];
    let mut s = vec!["--bind", "127.0.18.10", "--cpu", "0"];
    s.extend_from_slice(&both);
    let server = spawn("write_bw", &s);
    assert!(server.wait_stdout("Waiting for client", 20), "server up");
    let mut c = vec!["--bind", "127.0.18.11", "--cpu", "1"];
    c.extend_from_slice(&["--json", json.to_str().unwrap()]);
    c.extend_from_slice(&both);
    c.push("127.0.0.1");
    let client = spawn("write_bw", &c);
    let t0 = Instant::now();
    while common::rows(&client.stdout_now()).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no first row");
        std::thread::sleep(Duration::from_millis(5));
    }
    signal(&server, libc::SIGKILL);
    drop(server.kill());
    let c = client.wait(60, "client whose server was killed after its first size");
    assert_eq!(c.code(), 1, "{}", c.stderr);
    let doc = crate::common::schema::assert_valid_file("result", &json);
    let t = &doc["test"];
    let printed = c
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("no error line: {}", c.stderr));
    assert!(
        t["error"]["message"].as_str().unwrap().starts_with(printed),
        "{}",
        t["error"]
    );
    assert_eq!(t["error"]["failed"], "test", "{}", t["error"]);
    assert_eq!(t["error"]["exit_code"], 1, "{}", t["error"]);
    assert!(t["counters"]["tx_packets"].as_u64().unwrap() > 0, "{t}");
    let sizes = doc["results"].as_array().unwrap();
    assert!(
        !sizes.is_empty() && sizes.len() < 23,
        "the sizes that completed, not all 23: {}",
        sizes.len()
    );
    assert_eq!(sizes[0]["size_bytes"], 2);
}
