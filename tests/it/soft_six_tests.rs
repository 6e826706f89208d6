//! All six binaries over `--transport soft`, server and client as separate processes: RoCE v2 over UDP on
//! lo (the client moves to the next free 127.0.0.x by itself), RoCE v1 and v2 over AF_PACKET across a veth
//! pair (root only), always with `--validate`; a server killed mid-run; junk sent to port 4791 mid-run.
//!
//! The pairs run one at a time: each busy-polls two cores, and CI machines have about two.

use crate::common;
use crate::soft_support;

use common::{Done, SIX, pair_on_lo, rows, spawn};
use soft_support::{NetnsPair, is_root};
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_PAIR_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Both sides exit 0 and print one result row of `size` bytes with positive figures, over soft.
fn assert_ran(test: &str, size: f64, s: &Done, c: &Done) {
    common::assert_both_ok(test, s, c);
    for (side, out) in [("client", &c.stdout), ("server", &s.stdout)] {
        let r = rows(out);
        assert_eq!(r.len(), 1, "{side} of {test} prints one row:\n{out}");
        assert_eq!(r[0][0], size, "{side} of {test}: #bytes");
        assert!(r[0][2..].iter().any(|v| *v > 0.0), "{side}: {out}");
        assert!(out.contains("Transport type : IB (soft)"), "{side}: {out}");
        assert!(out.contains("--validate"), "{side} notes say so: {out}");
    }
}

#[test]
fn six_tests_over_soft_v2_udp_on_lo_with_validate() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for test in SIX {
        let size = common::several_packets(test);
        let args = vec!["-d", "lo", "-s", size, "-n", "300", "--validate"];
        let (s, c) = pair_on_lo(test, args.clone(), args);
        assert_ran(test, size.parse().unwrap(), &s, &c);
        assert!(
            c.stdout.contains("RoCE v2/IPv4 (udp I/O) over UDP socket"),
            "{}",
            c.stdout
        );
    }
}

#[test]
fn a_sweep_with_several_qps_validates_every_size_and_reports_counters() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let json_arg = json.to_str().unwrap();
    let server = vec!["-d", "lo", "-a", "-n", "5", "-q", "2", "--validate"];
    let mut client = server.clone();
    client.extend(["-v", "--json", json_arg]);
    let (s, c) = pair_on_lo("write_bw", server, client);
    common::assert_both_ok(
        "a_sweep_with_several_qps_validates_every_size_and_reports_counters",
        &s,
        &c,
    );
    assert_eq!(rows(&c.stdout).len(), 23, "{}", c.stdout);
    assert!(
        c.stderr.contains("soft transport counters:") && c.stderr.contains("drops: bad-icrc 0"),
        "-v prints the counters: {}",
        c.stderr
    );
    let doc = common::json_file(&json);
    let k = &doc["test"]["counters"];
    assert!(k["tx_packets"].as_u64().unwrap() > 0, "{k}");
    assert_eq!(k["drops"]["bad_icrc"], 0, "{k}");
    assert!(k["naks_sent"].is_object(), "{k}");
}

/// A SEND receiver posts its receives before the per-size barrier, so a sender that starts the moment
/// the barrier falls never meets an empty receive queue: no RNR NAK in a whole sweep, even without warm-up.
#[test]
fn send_sweeps_meet_posted_receives_from_the_first_message() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for test in ["send_bw", "send_lat"] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("s.json");
        let mut server = vec!["-d", "lo", "-a", "-n", "20", "--warmup", "0"];
        let client = server.clone();
        server.extend(["--json", json.to_str().unwrap()]);
        let (s, c) = pair_on_lo(test, server, client);
        common::assert_both_ok(
            "send_sweeps_meet_posted_receives_from_the_first_message",
            &s,
            &c,
        );
        let doc = common::json_file(&json);
        let k = &doc["test"]["counters"];
        assert_eq!(k["naks_sent"]["rnr"], 0, "{test}: {k}");
        assert_eq!(k["naks_received"]["rnr"], 0, "{test}: {k}");
        // No retransmission for want of a receive: any there is must follow an ACK timeout (a core
        // starved by other work), never a NAK.
        let retransmitted = k["retransmitted_packets"].as_u64().unwrap();
        assert!(
            retransmitted == 0 || k["timeouts"].as_u64().unwrap() > 0,
            "{test}: {k}"
        );
        assert_eq!(k["naks_received"]["psn_sequence"], 0, "{test}: {k}");
    }
}

#[test]
fn validate_holds_under_deliberate_loss_duplication_and_reordering() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for test in ["send_bw", "write_lat", "read_bw"] {
        let dir = tempfile::tempdir().unwrap();
        let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
        let args = ["-d", "lo", "-s", "9000", "-n", "200", "--validate"];
        let port = common::free_port().to_string();
        // One side: pinned to `core`, writing `json`, impairing what it sends with `seed`.
        let side = |core: &str, json: &std::path::Path, seed: u8, host: &[&str]| {
            let mut v = vec!["-p", &port, "--cpu", core, "--json", json.to_str().unwrap()];
            v.extend(args);
            v.extend(host);
            let impair = format!("loss=2%,duplicate=2%,reorder=5%,seed={seed}");
            common::spawn_env(test, &v, &[("ROCEPERF_IMPAIR", &impair)])
        };
        let sp = side("0", &sj, 3, &[]);
        assert!(sp.wait_stdout("Waiting for client", 20));
        let c = side("1", &cj, 4, &["127.0.0.1"]).wait(120, test);
        let s = sp.wait(30, test);
        common::assert_both_ok(test, &s, &c);
        // Both sides impaired what they sent, and the losses were repaired by retransmission.
        let mut retransmitted = 0;
        for j in [&sj, &cj] {
            let doc = common::json_file(j);
            let k = &doc["test"]["counters"];
            for what in ["dropped", "duplicated", "reordered"] {
                assert!(
                    k["impair"][what].as_u64().unwrap() > 0,
                    "{test} {what}: {k}"
                );
            }
            retransmitted += k["retransmitted_packets"].as_u64().unwrap();
        }
        assert!(retransmitted > 0, "{test}: losses but no retransmission");
    }
}

/// Kernel-side impairment on the veth pair (netem where the kernel has it, else netns.sh's iptables
/// fallback: random drop, and TEE copies): write, read and send complete with --validate, and the
/// counters show the repair (retransmissions for loss, duplicate requests for duplication).
#[test]
fn kernel_loss_and_duplication_on_a_veth_pair_are_repaired_with_validate() {
    if crate::common::skip_unless(is_root(), "network namespaces need root (CI runs as root)") {
        return;
    }
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    for (impair, counter) in [
        ("--loss", "retransmitted_packets"),
        ("--duplicate", "duplicate_requests"),
    ] {
        let pair = NetnsPair::up(&[impair, "2%"]);
        let mut repaired = 0;
        for test in ["write_bw", "read_bw", "send_bw"] {
            let dir = tempfile::tempdir().unwrap();
            let (sj, cj) = (dir.path().join("s.json"), dir.path().join("c.json"));
            let args = vec!["-d", "veth0", "-s", "65536", "-n", "1000", "--validate"];
            let mut sargs = args.clone();
            sargs.extend(["--json", sj.to_str().unwrap()]);
            let mut cargs = args;
            cargs.extend(["--json", cj.to_str().unwrap()]);
            let (s, c) = pair.run_pair(test, sargs, cargs);
            common::assert_both_ok(&format!("{impair} {test}"), &s, &c);
            for j in [&sj, &cj] {
                let doc = common::json_file(j);
                repaired += doc["test"]["counters"][counter].as_u64().unwrap();
            }
        }
        assert!(repaired > 0, "{impair} 2%: no {counter} counted");
    }
}

#[test]
fn six_tests_over_soft_v1_and_v2_packet_across_a_veth_pair() {
    if crate::common::skip_unless(
        is_root(),
        "AF_PACKET and network namespaces need root (CI runs as root)",
    ) {
        return;
    }
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let pair = NetnsPair::up(&[]);
    for roce in ["v1", "v2"] {
        for test in SIX {
            let size = common::several_packets(test);
            let args = vec![
                "-d",
                "veth0",
                "--roce",
                roce,
                "--io",
                "packet",
                "-s",
                size,
                "-n",
                "200",
                "--validate",
            ];
            let (s, c) = pair.run_pair(test, args.clone(), args);
            assert_ran(test, size.parse().unwrap(), &s, &c);
            assert!(
                c.stdout.contains("AF_PACKET")
                    && c.stdout.contains(&format!("RoCE version    : {roce}")),
                "{roce} {test}: {}",
                c.stdout
            );
        }
    }
}

/// Starts `test` on lo (server on core 0, client on core 1) with `run` (-D or -n) and -s 4096, and
/// returns (server, client) once the client's data path has been up for half a second.
fn running_pair(test: &str, run: [&str; 2]) -> (common::Proc, common::Proc) {
    let port = common::free_port().to_string();
    let args = [
        "-p",
        port.as_str(),
        "-d",
        "lo",
        run[0],
        run[1],
        "-s",
        "4096",
    ];
    let mut sargs = args.to_vec();
    sargs.extend(["--cpu", "0"]);
    let server = spawn(test, &sargs);
    assert!(server.wait_stdout("Waiting for client", 20));
    let mut cargs = args.to_vec();
    cargs.extend(["--cpu", "1", "127.0.0.1"]);
    let client = spawn(test, &cargs);
    // The client prints its header once the data path is connected.
    assert!(client.wait_stdout("#bytes", 30), "client never started");
    std::thread::sleep(Duration::from_millis(500));
    (server, client)
}

/// Kills the `killed` side ("server" or "client") of `running_pair(test, run)` and waits for the
/// other to end: with exit 1 (a work completion error while running, README, exit codes: not a
/// setup error or a panic's 101) and a message naming each of `causes`. Returns how long after the
/// kill it ended, and its stderr.
fn survivor_of_a_kill(
    test: &str,
    run: [&str; 2],
    killed: &str,
    causes: &[&str],
) -> (Duration, String) {
    let (server, client) = running_pair(test, run);
    let killed_at = Instant::now();
    let (survivor, name) = match killed {
        "server" => {
            server.kill();
            (client, "client")
        }
        "client" => {
            client.kill();
            (server, "server")
        }
        other => panic!("no side {other}"),
    };
    let what = format!("{name} after its {killed} was killed");
    let d = survivor.wait(30, &what);
    d.assert_ended(1, causes, &what);
    (killed_at.elapsed(), d.stderr)
}

#[test]
fn a_server_killed_mid_run_ends_the_client_with_a_retry_error() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let (took, stderr) = survivor_of_a_kill(
        "write_bw",
        ["-D", "60"],
        "server",
        &["retry counter exceeded"],
    );
    eprintln!("client ended {took:?} after the kill: {}", stderr.trim());
}

/// The other way round: a send_bw receiver whose sender is killed mid-run gets no retry timer (it
/// sends nothing), so its watchdog must end it, with exit 1 and a message naming the silence.
#[test]
fn a_sender_killed_mid_run_ends_the_send_bw_receiver_with_a_clear_error() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let (took, _) = survivor_of_a_kill(
        "send_bw",
        ["-n", "100000000"],
        "client",
        &["nothing arrived from the peer", "finished or gone away"],
    );
    assert!(took < Duration::from_secs(8), "{took:?}");
}

#[test]
fn junk_sent_to_port_4791_mid_run_is_dropped_counted_and_the_run_completes() {
    let _one = common::one_at_a_time(&ONE_PAIR_AT_A_TIME);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let port = common::free_port().to_string();
    let (srv_ip, cli_ip, junk_ip) = ("127.0.0.250", "127.0.0.251", "127.0.0.252");
    let server = spawn(
        "write_bw",
        &[
            "-p",
            &port,
            "--cpu",
            "0",
            "-d",
            "lo",
            "--bind",
            srv_ip,
            "-D",
            "3",
            "-s",
            "1024",
            "--validate",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert!(server.wait_stdout("Waiting for client", 20));
    let client = spawn(
        "write_bw",
        &[
            "-p",
            &port,
            "--cpu",
            "1",
            "-d",
            "lo",
            "--bind",
            cli_ip,
            "-D",
            "3",
            "-s",
            "1024",
            "--validate",
            "127.0.0.1",
        ],
    );
    assert!(client.wait_stdout("#bytes", 30), "client never started");
    let junk = std::net::UdpSocket::bind((junk_ip, 0)).unwrap();
    let jport = junk.local_addr().unwrap().port();
    let to = (srv_ip, 4791);
    // A well-formed RC SEND_ONLY to a QPN nobody has (0xeeeeee), with a correct ICRC, and the same
    // with a bad ICRC.
    let (pkt, bad) = soft_support::endpoints::stray_send_only(junk_ip, jport, srv_ip, 4791);
    for _ in 0..3 {
        junk.send_to(&pkt, to).unwrap(); // unknown QPN
        junk.send_to(&bad, to).unwrap(); // bad ICRC
        junk.send_to(b"hi", to).unwrap(); // too short: malformed
        junk.send_to(&[0u8; 9000], to).unwrap(); // cut by the receive slot: malformed
        std::thread::sleep(Duration::from_millis(100));
    }
    let d = common::drops_once_both_ok(server, client, &json);
    assert_eq!(d["unknown_qpn"], 3, "{d}");
    assert!(d["bad_icrc"].as_u64().unwrap() >= 3, "{d}");
    assert!(d["malformed"].as_u64().unwrap() >= 6, "{d}");
}

#[test]
fn packet_io_without_cap_net_raw_says_what_to_do() {
    if crate::common::skip_unless(is_root(), "needs root to drop to another user") {
        return;
    }
    // A copy in a directory anyone may enter: the checkout (CI's, or under a 0700 home) may not be.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("roce_write_bw");
    std::fs::copy(common::bin("write_bw"), &bin).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let port = common::free_port().to_string();
    let run = || {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["-d", "lo", "--roce", "v1", "-p", &port])
            .output()
    };
    // A process forked by another test thread while the copy was open for writing keeps it busy until
    // that child execs: retry that transient refusal.
    let mut out = run();
    for _ in 0..20 {
        match &out {
            Ok(o) if String::from_utf8_lossy(&o.stderr).contains("Text file busy") => {
                std::thread::sleep(Duration::from_millis(50));
                out = run();
            }
            _ => break,
        }
    }
    let Ok(out) = out else {
        crate::common::skip("setpriv (util-linux) is missing");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if crate::common::skip_unless(
        !err.starts_with("setpriv:"),
        &format!("user nobody cannot run the binary here: {err}"),
    ) {
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("CAP_NET_RAW") && err.contains("--io udp"),
        "{err}"
    );
}
