//! A perftest-dialect stub: speaks only the out-of-band protocol (no data path) with fake QP keys.
//!
//! - `our_sessions_pair_with_each_other` (always run): our client and server sessions of every test
//!   and option set pair with each other over loopback TCP, every step in lock-step.
//! - `lab_stub` (ignored; run by scripts/perftest-oob-lab.sh on the host, in the lab's network namespace):
//!   plays one side against a real `ib_*` in the rxe guest, to prove that the barrier sequences pair with
//!   real perftest. The real peer fails on the data path (nothing answers our fake QP), so only the steps
//!   up to the run are judged, except where perftest's side needs no data path at all.
//!   Environment: STUB_ROLE=client|server, STUB_TEST=write_bw|..., STUB_ADDR (connect to, or bind),
//!   STUB_GID_IP (our IPv4 for the GID), STUB_SIZE, STUB_ITERS, STUB_RUN_TIMEOUT_S.

use roceperf::oob::perftest::channel::{PerftestChannel, Timeouts};
use roceperf::oob::perftest::key::KeyRecord;
use roceperf::oob::perftest::msg::{BwReport, SysData};
use roceperf::oob::perftest::script::ScriptOptions;
use roceperf::oob::perftest::session::{Action, Session, SessionConfig};
use roceperf::params::{Metric, Role, TestKind, Verb};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::Duration;

/// What one stub run did.
#[derive(Debug)]
struct StubOutcome {
    /// Actions in order.
    actions: Vec<Action>,
    /// The error that ended it, if any.
    error: Option<String>,
    /// The peer's first key record.
    peer_key: Option<KeyRecord>,
}

fn fake_key(test: TestKind, ip: Ipv4Addr, role: Role) -> KeyRecord {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&ip.octets());
    KeyRecord {
        lid: 0,
        out_reads: if matches!(test.verb, Verb::Read | Verb::Atomic) {
            16
        } else {
            1
        },
        qpn: 0x000100 + if role == Role::Client { 1 } else { 2 },
        psn: 0x123456,
        rkey: 0x0000_1234,
        vaddr: 0x7f00_0010_0000,
        gid,
        srqn: 0,
    }
}

/// One stub run's parameters.
#[derive(Debug, Clone, Copy)]
struct Stub {
    test: TestKind,
    role: Role,
    opts: ScriptOptions,
    iters: u64,
    /// Our IPv4 address, for the GID.
    ip: Ipv4Addr,
    run_timeout: Duration,
    verbose: bool,
}

fn drive(stream: TcpStream, p: Stub) -> StubOutcome {
    let Stub {
        test,
        role,
        opts,
        iters,
        ip,
        run_timeout,
        verbose,
    } = p;
    stream.set_nodelay(true).unwrap();
    let chan = PerftestChannel::new(
        stream,
        role == Role::Client,
        Timeouts {
            idle: Duration::from_secs(30),
            stall: Duration::from_secs(2),
            run: Some(run_timeout),
        },
    );
    let cfg = SessionConfig {
        test,
        role,
        opts,
        iters,
        sys: SysData::local(),
        mtu: 1024,
    };
    let keys = vec![fake_key(test, ip, role); opts.num_qps];
    let mut session = Session::new(chan, &cfg, Some(keys)).unwrap();
    let mut out = StubOutcome {
        actions: Vec::new(),
        error: None,
        peer_key: None,
    };
    loop {
        match session.next() {
            Ok(a) => {
                if verbose {
                    println!("STUB {test} {role:?}: {a:?}");
                }
                out.actions.push(a);
                match a {
                    Action::Connect => {
                        let p = session.peer().unwrap();
                        out.peer_key = Some(p.keys[0]);
                        if verbose {
                            println!(
                                "STUB {test} {role:?}: peer version {} mtu {} page {} key {:?}",
                                p.version.text, p.mtu, p.sys.page_size, p.keys[0]
                            );
                        }
                    }
                    Action::Run { size } if test.metric == Metric::Bandwidth => {
                        // No data path: a report that says so (zero bandwidth) with the right size.
                        session.set_report(BwReport {
                            size,
                            iters: iters * opts.num_qps as u64,
                            ..BwReport::default()
                        });
                    }
                    Action::Finished => break,
                    _ => {}
                }
            }
            Err(e) => {
                out.error = Some(e.to_string());
                break;
            }
        }
    }
    if let Some(r) = session.peer_report().filter(|_| verbose) {
        println!("STUB {test} {role:?}: peer report {r:?}");
    }
    out
}

#[test]
fn our_sessions_pair_with_each_other() {
    let mut cases = Vec::new();
    for test in TestKind::EVERY {
        cases.push((test, ScriptOptions::single(64)));
        cases.push((
            test,
            ScriptOptions {
                all_sizes: true,
                ..ScriptOptions::single(2)
            },
        ));
        if test.metric == Metric::Bandwidth {
            cases.push((
                test,
                ScriptOptions {
                    bidirectional: true,
                    num_qps: 3,
                    ..ScriptOptions::single(4096)
                },
            ));
        }
    }
    for (test, opts) in cases {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ip = Ipv4Addr::LOCALHOST;
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            drive(
                s,
                Stub {
                    test,
                    role: Role::Server,
                    opts,
                    iters: 100,
                    ip,
                    run_timeout: Duration::from_secs(5),
                    verbose: false,
                },
            )
        });
        let c = TcpStream::connect(addr).unwrap();
        let client = drive(
            c,
            Stub {
                test,
                role: Role::Client,
                opts,
                iters: 100,
                ip,
                run_timeout: Duration::from_secs(5),
                verbose: false,
            },
        );
        let server = server.join().unwrap();
        for (role, o) in [("client", &client), ("server", &server)] {
            assert_eq!(o.error, None, "{test} {opts:?} {role}");
            assert_eq!(o.actions.last(), Some(&Action::Finished), "{test} {role}");
            assert_eq!(o.peer_key.unwrap().gid[12..], [127, 0, 0, 1]);
        }
        assert_eq!(server.peer_key.unwrap().qpn, 0x101);
        assert_eq!(client.peer_key.unwrap().qpn, 0x102);
    }
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[test]
#[ignore = "lab only: run by scripts/perftest-oob-lab.sh against real perftest in the rxe guest"]
fn lab_stub() {
    let role = match env("STUB_ROLE", "client").as_str() {
        "server" => Role::Server,
        _ => Role::Client,
    };
    let test = TestKind::from_name(&env("STUB_TEST", "write_bw")).expect("STUB_TEST");
    let addr = env("STUB_ADDR", "10.9.0.2:18515");
    let ip: Ipv4Addr = env("STUB_GID_IP", "10.9.0.1").parse().unwrap();
    let size: u64 = env("STUB_SIZE", &test.default_size().to_string())
        .parse()
        .unwrap();
    let iters: u64 = env("STUB_ITERS", &test.default_iters().to_string())
        .parse()
        .unwrap();
    let run_timeout = Duration::from_secs(env("STUB_RUN_TIMEOUT_S", "20").parse().unwrap());
    let stream = match role {
        Role::Server => {
            println!("STUB {test} server: listening on {addr}");
            roceperf::oob::perftest::accept(&addr).unwrap()
        }
        // perftest's server may not listen yet: retry for two minutes.
        Role::Client => roceperf::oob::perftest::connect(&addr, Duration::from_secs(120)).unwrap(),
    };
    let out = drive(
        stream,
        Stub {
            test,
            role,
            opts: ScriptOptions::single(size),
            iters,
            ip,
            run_timeout,
            verbose: true,
        },
    );
    let reached_run = out
        .actions
        .iter()
        .any(|a| matches!(a, Action::Run { .. } | Action::AwaitPeer));
    let finished = out.actions.last() == Some(&Action::Finished);
    println!(
        "STUB RESULT {test} {role:?}: setup_and_barriers_to_run={} finished={} error={}",
        if reached_run { "ok" } else { "FAILED" },
        finished,
        out.error.as_deref().unwrap_or("none")
    );
    assert!(reached_run, "{test} {role:?}: did not reach the run");
}
