//! `--oob perftest` against real perftest bytes: each trace in tests/data/perftest_oob/ is an exchange
//! between two real perftest 6.06 processes over rxe (see scripts/perftest-trace.sh). We play one side
//! from the trace (the peer) and run our session as the other, over a socket pair, in both roles.
//!
//! Our session is given the recorded side's own key records and report, so every message it writes must
//! equal the recorded one byte for byte, except the version (we announce 6.27) and the uninitialised
//! report a unidirectional perftest server sends (we send zeros). The peer side checks that we read and
//! write exactly its message sizes in its order, so a wrong barrier count fails here.

use crate::common::assert_contains;
use roceperf::oob::perftest::channel::{PerftestChannel, Timeouts};
use roceperf::oob::perftest::key::KeyRecord;
use roceperf::oob::perftest::msg::{BwReport, SysData};
use roceperf::oob::perftest::script::{ScriptOptions, Step};
use roceperf::oob::perftest::session::{Action, Session, SessionConfig};
use roceperf::oob::perftest::{PerftestError, msg};
use roceperf::params::{Role, TestKind, TransportKind};
use roceperf::transport::ConnInfo;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// One recorded message: true when the client wrote it.
#[derive(Debug, Clone)]
struct Msg {
    from_client: bool,
    bytes: Vec<u8>,
}

fn load(name: &str) -> Vec<Msg> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/perftest_oob")
        .join(format!("{name}.trace"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (dir, hex) = l.split_once(' ').expect("`dir hex` per line");
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            Msg {
                from_client: dir == "c2s",
                bytes,
            }
        })
        .collect()
}

fn test(name: &str) -> TestKind {
    TestKind::from_name(name).unwrap()
}

/// Plays the recorded `peer` side: writes its messages, reads ours (exactly the recorded size), then
/// closes. Returns what we wrote, message by message, or where it stopped.
fn play_peer(
    mut sock: UnixStream,
    trace: Vec<Msg>,
    peer_is_client: bool,
) -> Result<Vec<Vec<u8>>, String> {
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ours = Vec::new();
    for (i, m) in trace.iter().enumerate() {
        if m.from_client == peer_is_client {
            sock.write_all(&m.bytes)
                .map_err(|e| format!("message {i}: peer write: {e}"))?;
        } else {
            let mut b = vec![0u8; m.bytes.len()];
            sock.read_exact(&mut b)
                .map_err(|e| format!("message {i} ({} bytes): {e}", m.bytes.len()))?;
            ours.push(b);
        }
    }
    Ok(ours)
}

struct Outcome {
    result: Result<(), PerftestError>,
    written: Vec<Vec<u8>>,
    peer: Result<Vec<Vec<u8>>, String>,
    peer_report: Option<BwReport>,
    actions: Vec<Action>,
    peer_keys: Vec<KeyRecord>,
    peer_conn: Option<ConnInfo>,
}

/// Runs our session in `role` against the recorded other side of `trace`.
fn run(
    trace: &[Msg],
    kind: TestKind,
    role: Role,
    opts: ScriptOptions,
    iters: u64,
    poll: bool,
) -> Outcome {
    let client = role == Role::Client;
    let own: Vec<&Msg> = trace.iter().filter(|m| m.from_client == client).collect();
    // The recorded side's own key record and (meaningful) report, fed to our session.
    let key = own
        .iter()
        .find(|m| m.bytes.len() == 108)
        .map(|m| KeyRecord::parse("trace", &m.bytes).unwrap());
    let keys: Vec<KeyRecord> = own
        .iter()
        .filter(|m| m.bytes.len() == 108)
        .take(opts.num_qps)
        .map(|m| KeyRecord::parse("trace", &m.bytes).unwrap())
        .collect();
    let report_fields: Vec<[u8; 8]> = own
        .iter()
        .filter(|m| m.bytes.len() == 8)
        .map(|m| m.bytes.clone().try_into().unwrap())
        .collect();
    let (a, b) = UnixStream::pair().unwrap();
    let peer_trace = trace.to_vec();
    let peer = std::thread::spawn(move || play_peer(b, peer_trace, !client));
    let chan = PerftestChannel::new(
        a,
        client,
        Timeouts {
            idle: Duration::from_secs(3),
            stall: Duration::from_millis(500),
            run: Some(Duration::from_secs(5)),
        },
    );
    let mut chan = chan;
    chan.record();
    let cfg = SessionConfig {
        test: kind,
        role,
        opts,
        iters,
        sys: SysData {
            page_size: 4096,
            cache_line: 64,
        },
        mtu: 1024,
    };
    let mut s = Session::new(chan, &cfg, None).unwrap();
    let mut actions = Vec::new();
    let mut report_idx = 0;
    let mut peer_keys = Vec::new();
    let mut peer_conn = None;
    let result = (|| -> Result<(), PerftestError> {
        loop {
            let a = s.next()?;
            actions.push(a);
            match a {
                Action::NeedLocalKeys { buffer_len } => {
                    assert!(buffer_len >= opts.max_size().max(4096));
                    let k = key.expect("trace has a key record");
                    let mut ks = keys.clone();
                    ks.resize(opts.num_qps, k);
                    s.set_local_keys(ks)?;
                }
                Action::Connect => {
                    let p = s.peer().unwrap();
                    peer_keys = p.keys.clone();
                    peer_conn = Some(p.conn_info(opts.max_size(), TransportKind::Soft));
                }
                Action::Run { .. } => {
                    // The report this side sent after its last run, where the trace has one.
                    if report_fields.len() >= report_idx + 5 {
                        let f: [[u8; 8]; 5] = report_fields[report_idx..report_idx + 5]
                            .try_into()
                            .unwrap();
                        s.set_report(BwReport::decode(&f));
                        if opts.bidirectional {
                            report_idx += 5;
                        }
                    }
                }
                Action::AwaitPeer => {
                    if poll {
                        while !s.poll_peer()? {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }
                Action::PostReceives { .. } => {}
                Action::CmConnect | Action::CmDisconnect => {
                    unreachable!("the recorded traces are TCP exchanges, without -R")
                }
                Action::Finished => return Ok(()),
            }
        }
    })();
    let written = s
        .channel()
        .recorded()
        .iter()
        .filter(|(w, _)| *w)
        .map(|(_, b)| b.clone())
        .collect();
    let peer_report = s.peer_report();
    drop(s);
    Outcome {
        result,
        written,
        peer: peer.join().unwrap(),
        peer_report,
        actions,
        peer_keys,
        peer_conn,
    }
}

/// Asserts the full pairing of our `role` against the trace and returns the outcome.
fn pairs(name: &str, kind: &str, role: Role, opts: ScriptOptions, iters: u64) -> Outcome {
    let trace = load(name);
    let kind = test(kind);
    let client = role == Role::Client;
    for poll in [false, true] {
        let out = run(&trace, kind, role, opts, iters, poll);
        if let Err(e) = &out.result {
            panic!(
                "{name} as {role:?}: {e}; peer: {:?}",
                out.peer.as_ref().map(|v| v.len())
            );
        }
        let seen = out
            .peer
            .as_ref()
            .unwrap_or_else(|e| panic!("{name} as {role:?}: peer side: {e}"));
        let own: Vec<&Msg> = trace.iter().filter(|m| m.from_client == client).collect();
        assert_eq!(seen.len(), own.len(), "{name} as {role:?}: message count");
        assert_eq!(
            &out.written, seen,
            "{name}: what the peer read is what we wrote"
        );
        let unidir_server_report = !client && !opts.bidirectional;
        for (i, (ours, theirs)) in seen.iter().zip(&own).enumerate() {
            assert_eq!(ours.len(), theirs.bytes.len(), "{name} message {i} size");
            if i == 0 {
                assert_eq!(ours.as_slice(), &msg::encode_version()[..], "version");
            } else if ours.len() == 8 && unidir_server_report {
                assert!(
                    ours.iter().all(|&b| b == 0),
                    "our meaningless report is zeros"
                );
            } else {
                assert_eq!(ours, &theirs.bytes, "{name} as {role:?}: message {i}");
            }
            if ours.len() == 108 {
                assert_eq!(
                    KeyRecord::parse("ours", ours).unwrap(),
                    KeyRecord::parse("recorded", &theirs.bytes).unwrap()
                );
            }
        }
        // The peer's keys as we parsed them are the ones it recorded.
        let peer_key = trace
            .iter()
            .find(|m| m.from_client != client && m.bytes.len() == 108)
            .unwrap();
        assert_eq!(
            out.peer_keys[0],
            KeyRecord::parse("recorded", &peer_key.bytes).unwrap()
        );
        // What our transport is given: the peer's QPs at the address its GID names, its buffer
        // length as perftest exposes it, the agreed MTU.
        let conn = out.peer_conn.as_ref().expect("connected");
        assert_eq!(conn.qps.len(), opts.num_qps);
        for (q, k) in conn.qps.iter().zip(&out.peer_keys) {
            assert_eq!(
                (q.qpn, q.psn, q.rkey, q.vaddr),
                (k.qpn, k.psn, k.rkey, k.vaddr)
            );
            assert_eq!(q.len, opts.max_size().max(4096));
        }
        let g = out.peer_keys[0].gid;
        assert_eq!(
            conn.addr.as_deref(),
            Some(format!("{}.{}.{}.{}:4791", g[12], g[13], g[14], g[15]).as_str())
        );
        assert_eq!((conn.mtu, conn.transport), (1024, TransportKind::Soft));
        if !poll {
            return out;
        }
    }
    unreachable!()
}

fn opts(size: u64) -> ScriptOptions {
    ScriptOptions::single(size)
}

fn runs(out: &Outcome) -> Vec<u64> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::Run { size } => Some(*size),
            _ => None,
        })
        .collect()
}

#[test]
fn write_bw_both_roles() {
    let c = pairs("write_bw_3000B_x5", "write_bw", Role::Client, opts(3000), 5);
    assert_eq!(runs(&c), vec![3000]);
    assert_eq!(
        c.peer_report, None,
        "a unidirectional server's report is ignored"
    );
    let s = pairs("write_bw_3000B_x5", "write_bw", Role::Server, opts(3000), 5);
    assert!(runs(&s).is_empty(), "the write_bw server does not run");
    let r = s.peer_report.expect("the server takes the client's report");
    assert_eq!((r.size, r.iters), (3000, 5));
    assert!(r.bw_avg > 0.0 && r.bw_avg.is_finite());
    let peer = c.peer_keys[0];
    assert_eq!(peer.out_reads, 1);
    assert_eq!(peer.gid[10..], [0xff, 0xff, 10, 0, 0, 2]);
}

#[test]
fn read_bw_both_roles() {
    let c = pairs("read_bw_3000B_x5", "read_bw", Role::Client, opts(3000), 5);
    assert_eq!(c.peer_keys[0].out_reads, 0x80, "rxe's max_qp_rd_atom");
    let s = pairs("read_bw_3000B_x5", "read_bw", Role::Server, opts(3000), 5);
    assert_eq!(s.peer_report.map(|r| r.size), Some(3000));
}

#[test]
fn send_bw_both_roles() {
    let c = pairs("send_bw_3000B_x5", "send_bw", Role::Client, opts(3000), 5);
    assert!(!c.actions.contains(&Action::PostReceives { size: 3000 }));
    let s = pairs("send_bw_3000B_x5", "send_bw", Role::Server, opts(3000), 5);
    // The server posts its receives before the barrier that releases the sender.
    let post = s
        .actions
        .iter()
        .position(|a| *a == Action::PostReceives { size: 3000 })
        .unwrap();
    let run = s
        .actions
        .iter()
        .position(|a| *a == Action::Run { size: 3000 })
        .unwrap();
    assert!(post < run);
    assert_eq!(s.peer_report, None, "send_bw swaps no reports");
}

#[test]
fn size_mismatch_is_named_by_the_server() {
    let trace = load("write_bw_3000B_x5");
    let out = run(&trace, test("write_bw"), Role::Server, opts(64), 5, true);
    match out.result {
        Err(PerftestError::ParameterMismatch {
            field,
            ours,
            theirs,
        }) => {
            assert_eq!((field, ours, theirs), ("-s", 64, 3000));
        }
        other => panic!("expected a -s mismatch, got {other:?}"),
    }
    let out = run(
        &trace,
        test("write_bw"),
        Role::Server,
        opts(3000),
        1000,
        true,
    );
    assert!(
        matches!(
            out.result,
            Err(PerftestError::ParameterMismatch {
                field: "-n x -q",
                ours: 1000,
                theirs: 5
            })
        ),
        "{:?}",
        out.result.err()
    );
}

#[test]
fn test_type_mismatch_errors_instead_of_hanging() {
    // Our write_bw against a real send_bw peer, and the reverse, in both roles: the sequences diverge
    // and our side must stop with an error that names a step (the timeouts here are seconds).
    let cases = [
        ("send_bw_3000B_x5", "write_bw"),
        ("write_bw_3000B_x5", "send_bw"),
        ("read_bw_3000B_x5", "send_bw"),
    ];
    for (trace_name, ours) in cases {
        let trace = load(trace_name);
        for role in [Role::Client, Role::Server] {
            let t0 = std::time::Instant::now();
            let out = run(
                &trace,
                test(ours),
                role,
                opts(3000),
                5,
                role == Role::Server,
            );
            let e = out
                .result
                .err()
                .unwrap_or_else(|| panic!("{ours} vs {trace_name} as {role:?} must fail"));
            let text = e.to_string();
            assert!(
                text.contains("barrier")
                    || text.contains("report")
                    || text.contains("round")
                    || text.contains("done"),
                "{ours} vs {trace_name} as {role:?}: {text}"
            );
            eprintln!("{ours} vs {trace_name} as {role:?}: {text}");
            assert!(t0.elapsed() < Duration::from_secs(30));
        }
    }
}

/// In both roles, the script of `kind` with `o` exchanges exactly the message sizes that trace `name`
/// shows in that role's direction; returns the two scripts (client's, then server's).
fn assert_script_sizes_match_trace(name: &str, kind: &str, o: &ScriptOptions) -> Vec<Vec<Step>> {
    let trace = load(name);
    [Role::Client, Role::Server]
        .into_iter()
        .map(|role| {
            let steps = roceperf::oob::perftest::script(test(kind), role, o).unwrap();
            let sizes = roceperf::oob::perftest::script::message_sizes(&steps, o.num_qps);
            let dir: Vec<usize> = trace
                .iter()
                .filter(|m| m.from_client == (role == Role::Client))
                .map(|m| m.bytes.len())
                .collect();
            assert_eq!(sizes, dir, "{name} {role:?}");
            steps
        })
        .collect()
}

#[test]
fn script_step_names_cover_the_trace() {
    // Each trace direction is exactly the script's message sizes (no extra or missing exchange).
    for (name, kind) in [
        ("write_bw_3000B_x5", "write_bw"),
        ("read_bw_3000B_x5", "read_bw"),
        ("send_bw_3000B_x5", "send_bw"),
    ] {
        for steps in assert_script_sizes_match_trace(name, kind, &opts(3000)) {
            assert!(steps.contains(&Step::Connect));
        }
    }
}

/// Traces recorded in the lab VM by scripts/perftest-trace.sh (perftest 6.06 over rxe), with the options
/// they were recorded with.
fn lab_traces() -> Vec<(&'static str, &'static str, ScriptOptions, u64)> {
    let all = ScriptOptions {
        all_sizes: true,
        ..opts(2)
    };
    let bidir = ScriptOptions {
        bidirectional: true,
        ..opts(64)
    };
    let two_qps = ScriptOptions {
        num_qps: 2,
        ..opts(64)
    };
    vec![
        ("send_lat_64B_x5", "send_lat", opts(64), 5),
        ("write_lat_64B_x5", "write_lat", opts(64), 5),
        ("read_lat_64B_x5", "read_lat", opts(64), 5),
        ("send_lat_all_x5", "send_lat", all, 5),
        ("write_lat_all_x5", "write_lat", all, 5),
        ("read_lat_all_x5", "read_lat", all, 5),
        ("write_bw_all_x5", "write_bw", all, 5),
        ("read_bw_all_x5", "read_bw", all, 5),
        ("send_bw_all_x5", "send_bw", all, 5),
        ("write_bw_bidir_64B_x5", "write_bw", bidir, 5),
        ("read_bw_bidir_64B_x5", "read_bw", bidir, 5),
        ("send_bw_bidir_64B_x5", "send_bw", bidir, 5),
        ("write_bw_2qp_64B_x5", "write_bw", two_qps, 5),
    ]
}

#[test]
fn lab_traces_match_the_table() {
    for (name, kind, o, _) in lab_traces() {
        assert_script_sizes_match_trace(name, kind, &o);
    }
}

#[test]
fn lab_traces_pair_in_both_roles() {
    for (name, kind, o, iters) in lab_traces() {
        for role in [Role::Client, Role::Server] {
            let out = pairs(name, kind, role, o, iters);
            let expect_runs = match (kind, role) {
                ("write_bw" | "read_bw", Role::Server) if !o.bidirectional => vec![],
                ("read_lat", Role::Server) => vec![],
                _ => o.sizes(),
            };
            assert_eq!(runs(&out), expect_runs, "{name} {role:?}");
            let meaningful_report = kind.ends_with("_bw")
                && (o.bidirectional || (role == Role::Server && kind != "send_bw"));
            match out.peer_report {
                Some(r) => {
                    assert!(meaningful_report, "{name} {role:?}: unexpected report");
                    assert_eq!(r.size, o.max_size(), "{name} {role:?}");
                    assert_eq!(r.iters, iters * o.num_qps as u64, "{name} {role:?}");
                }
                None => assert!(!meaningful_report, "{name} {role:?}: report missing"),
            }
        }
    }
}

#[test]
fn sweep_against_single_size_peer_fails_clearly() {
    // Our write_bw -a server against a real client that ran -s 3000: the report names the difference.
    let trace = load("write_bw_3000B_x5");
    let all = ScriptOptions {
        all_sizes: true,
        ..opts(2)
    };
    let out = run(&trace, test("write_bw"), Role::Server, all, 5, true);
    assert!(
        matches!(
            out.result,
            Err(PerftestError::ParameterMismatch {
                field: "-a/-s",
                ours: 8388608,
                theirs: 3000
            })
        ),
        "{:?}",
        out.result.err()
    );
    // Our send_lat -a client against a single-size send_lat server: it closes after one run.
    let trace = load("send_lat_64B_x5");
    let out = run(&trace, test("send_lat"), Role::Client, all, 5, true);
    let e = out.result.expect_err("must fail").to_string();
    assert_contains(&e, "barrier");
}

#[test]
fn peers_from_6_17_close_without_done() {
    // perftest 6.17+ (commit dbf395e) closes after the close barrier without writing "done": the same
    // traces without the peer's "done" must still finish cleanly, in both roles.
    for (name, kind) in [
        ("write_bw_3000B_x5", "write_bw"),
        ("send_bw_3000B_x5", "send_bw"),
        ("read_lat_64B_x5", "read_lat"),
    ] {
        let full = load(name);
        for role in [Role::Client, Role::Server] {
            let peer_is_client = role == Role::Server;
            let trace: Vec<Msg> = full
                .iter()
                .filter(|m| !(m.from_client == peer_is_client && m.bytes == msg::DONE))
                .cloned()
                .collect();
            let size = if kind.ends_with("_lat") { 64 } else { 3000 };
            let out = run(&trace, test(kind), role, opts(size), 5, true);
            assert!(
                out.result.is_ok(),
                "{name} {role:?}: {:?}",
                out.result.err()
            );
            assert_eq!(out.actions.last(), Some(&Action::Finished));
            assert_eq!(
                out.written.last().map(|b| b.as_slice()),
                Some(&msg::DONE[..])
            );
        }
    }
}

#[test]
fn real_perftest_servers_that_paired_with_our_stub_replay() {
    // Captured on the lab bridge by scripts/perftest-oob-lab.sh: our stub client against real perftest
    // 6.06 servers that need no data path from us, so the exchange ran to the end (perftest rc=0).
    for (name, kind) in [
        ("stub_client_vs_ib_write_bw_server", "write_bw"),
        ("stub_client_vs_ib_read_bw_server", "read_bw"),
        ("stub_client_vs_ib_read_lat_server", "read_lat"),
    ] {
        let out = pairs(name, kind, Role::Client, opts(64), 5);
        assert_eq!(
            out.peer_keys[0].gid[12..],
            [10, 9, 0, 2],
            "{name}: the guest's GID"
        );
        assert_eq!(runs(&out), vec![64]);
    }
}
