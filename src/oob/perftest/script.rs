//! The table: which blocks perftest exchanges, in which order, for each test, role and option set.
//!
//! Derived from perftest's `*_bw.c` / `*_lat.c` main functions (identical in 6.06 and 6.29 for RC without
//! -R/-z, WRITE_IMM or --data_validation) and checked against recorded traces. Every exchange is a
//! barrier; one key exchange more or less hangs the test or misreads the report, so the order here is
//! exactly perftest's. Local actions (connect, post receives, run) sit where perftest performs them,
//! because the peer acts on the barrier that follows them (e.g. a SEND client starts sending as soon as
//! the barrier after the server posted its receives completes).

use super::{PerftestError, Result};
use crate::params::{Metric, Role, TestKind};

/// Which barrier a single key exchange (on QP 0) is; only the name differs, the bytes are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Barrier {
    /// write_lat and read_lat: one exchange before the per-QP key round.
    BeforeKeys,
    /// After the QPs were moved to RTR/RTS ("an additional handshake is required after moving qp to RTR").
    AfterConnect,
    /// Right before a run: send tests post their receives first, bidirectional tests sync both senders.
    BeforeRun,
    /// After a run: the peer has finished its part too.
    AfterRun,
    /// `ctx_close_connection`: the last key exchange, followed by `"done"`.
    Close,
    /// `-R`: before the data queue pairs connect through the CM (`create_rdma_cm_connection`).
    BeforeCm,
    /// `-R`: after they did.
    AfterCm,
}

impl Barrier {
    /// Name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Barrier::BeforeKeys => "barrier before the key round",
            Barrier::AfterConnect => "post-RTR barrier",
            Barrier::BeforeRun => "barrier before the run",
            Barrier::AfterRun => "end-of-test barrier",
            Barrier::Close => "close barrier",
            Barrier::BeforeCm => "barrier before the CM connects the queue pairs",
            Barrier::AfterCm => "barrier after the CM connected the queue pairs",
        }
    }
}

/// One step of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// 16-byte version strings.
    Version,
    /// Page size (4-byte BE int).
    PageSize,
    /// Cache line size (4-byte BE int).
    CacheLine,
    /// 2-byte ASCII MTU enum.
    Mtu,
    /// First per-QP key round: one 108-byte record per QP, QP 0 first. Carries the addressing.
    Keys,
    /// Second per-QP key round (after connecting); perftest prints the peer's addresses from it.
    KeysAgain,
    /// One key exchange on QP 0 used as a barrier. `waits_for_run`: the peer reaches it only after a
    /// test run, so the data path must be kept alive while waiting.
    Barrier {
        /// Which barrier.
        which: Barrier,
        /// The peer may take a whole test run to get here.
        waits_for_run: bool,
    },
    /// Local: move the QPs to RTR/RTS with the peer's keys.
    Connect,
    /// Local: post the receives for the next run of `size` bytes (send tests; server or bidirectional).
    PostReceives {
        /// Message size of the coming run.
        size: u64,
    },
    /// Local: run the test at `size` bytes (this side's part: send, write, read, receive or ping-pong).
    Run {
        /// Message size.
        size: u64,
    },
    /// Five 8-byte report fields (40 bytes). `waits_for_run` as for barriers.
    Report {
        /// The peer may take a whole test run to get here.
        waits_for_run: bool,
    },
    /// Write `"done\0"`; the peer writes its own and neither side reads (we drain it politely).
    Done,
    /// No close handshake (write_lat): half-close, then wait for the peer to close the connection, keeping
    /// the data path alive, because its last operation may still need our acknowledgement.
    AwaitClose,
    /// Local, `-R`: connect the data queue pairs through the CM (the client asks, the server listens).
    CmConnect,
    /// Local, `-R`, at the end: disconnect the data queue pairs through the CM (DREQ / DREP), where
    /// perftest's `destroy_ctx` does; there is no `"done"` and no TCP close with `-R`.
    CmDisconnect,
}

impl Step {
    /// Name used in error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Version => "version exchange",
            Step::PageSize => "page-size exchange",
            Step::CacheLine => "cache-line exchange",
            Step::Mtu => "MTU exchange",
            Step::Keys => "first key round",
            Step::KeysAgain => "second key round",
            Step::Barrier { which, .. } => which.name(),
            Step::Connect => "connect",
            Step::PostReceives { .. } => "posting receives",
            Step::Run { .. } => "test run",
            Step::Report { .. } => "bandwidth report exchange",
            Step::Done => "final \"done\"",
            Step::AwaitClose => "wait for the peer to close",
            Step::CmConnect => "CM connection of the queue pairs",
            Step::CmDisconnect => "CM disconnection of the queue pairs",
        }
    }

    /// Sizes of the messages this step exchanges (each one way); empty for local steps.
    pub fn message_sizes(&self, num_qps: usize) -> Vec<usize> {
        use super::key::KEY_LEN_GID;
        use super::msg::*;
        match self {
            Step::Version => vec![VERSION_LEN],
            Step::PageSize | Step::CacheLine => vec![SYSDATA_LEN],
            Step::Mtu => vec![MTU_LEN],
            Step::Keys | Step::KeysAgain => vec![KEY_LEN_GID; num_qps],
            Step::Barrier { .. } => vec![KEY_LEN_GID],
            Step::Report { .. } => vec![REPORT_FIELD_LEN; REPORT_FIELDS],
            Step::Done => vec![DONE.len()],
            _ => vec![],
        }
    }
}

/// What the script depends on besides the test and the role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptOptions {
    /// Message size (`-s`); ignored with `all_sizes`.
    pub size: u64,
    /// `-a`: sizes 2, 4, ..., 2^23.
    pub all_sizes: bool,
    /// `-b`: bidirectional (BW tests only).
    pub bidirectional: bool,
    /// `-q`: queue pairs (BW tests only; latency tests allow 1).
    pub num_qps: usize,
    /// `-D`: duration mode (a bidirectional send_bw then skips its report).
    pub duration: bool,
    /// `-a` stops at this size: 8 MiB, or the MTU with `-c UD` (perftest's `size_max_pow`).
    pub sweep_max: u64,
    /// `-R`: the exchange rides a CM-connected queue pair and the data queue pairs connect through the CM.
    pub rdma_cm: bool,
}

impl ScriptOptions {
    /// One size, one QP, unidirectional, iteration mode.
    pub fn single(size: u64) -> ScriptOptions {
        ScriptOptions {
            size,
            all_sizes: false,
            bidirectional: false,
            num_qps: 1,
            duration: false,
            sweep_max: 1 << 23,
            rdma_cm: false,
        }
    }

    /// The sizes the runs use: `size`, or 2^1..2^23 with `-a` (perftest's loop; UD stops at the MTU).
    pub fn sizes(&self) -> Vec<u64> {
        if self.all_sizes {
            (1..24)
                .map(|i| 1u64 << i)
                .filter(|&s| s <= self.sweep_max)
                .collect()
        } else {
            vec![self.size]
        }
    }

    /// The largest message size of the script (what a buffer must hold).
    pub fn max_size(&self) -> u64 {
        self.sizes().into_iter().max().unwrap_or(self.size)
    }
}

/// Builds the step sequence perftest follows for `test` in `role`. Errors on option sets perftest
/// refuses or this module does not speak (bidirectional latency, several QPs in a latency test).
pub fn script(test: TestKind, role: Role, opt: &ScriptOptions) -> Result<Vec<Step>> {
    if opt.num_qps == 0 {
        return Err(PerftestError::Unsupported("-q must be at least 1".into()));
    }
    if test.metric == Metric::Latency {
        if opt.num_qps != 1 {
            return Err(PerftestError::Unsupported(
                "perftest latency tests take one QP only (-q 1)".into(),
            ));
        }
        if opt.bidirectional {
            return Err(PerftestError::Unsupported(
                "perftest latency tests have no -b".into(),
            ));
        }
    }
    let client = role == Role::Client;
    let bidir = opt.bidirectional;
    let sizes = opt.sizes();
    let barrier = |which, waits_for_run| Step::Barrier {
        which,
        waits_for_run,
    };
    let mut s = vec![Step::Version, Step::PageSize, Step::CacheLine, Step::Mtu];
    // The keys, the QP connection and the keys again, with the barriers each test puts among them.
    let (keys, connect, again) = (Step::Keys, Step::Connect, Step::KeysAgain);
    let after_connect = barrier(Barrier::AfterConnect, false);
    let receives = test.verb.consumes_receive();
    s.extend(match test.metric {
        // send_bw.c / send_lat.c: the barrier comes before the keys again.
        _ if receives => vec![keys, connect, after_connect, again],
        Metric::Bandwidth => vec![keys, connect, again, after_connect],
        // write_lat.c / read_lat.c: an extra barrier first.
        Metric::Latency => {
            let before_keys = barrier(Barrier::BeforeKeys, false);
            vec![before_keys, keys, connect, again, after_connect]
        }
    });
    match test.metric {
        Metric::Bandwidth if !receives => {
            // write_bw.c / read_bw.c / atomic_bw.c (the same exchanges; atomic_bw has no -a)
            if !bidir {
                // Only the client runs; the server sits in the end-of-test barrier meanwhile, then both
                // swap reports (the server's is meaningless), close, and write "done". With -a there are
                // no per-size barriers: the report carries the last size.
                if client {
                    s.extend(sizes.iter().map(|&size| Step::Run { size }));
                }
                s.extend([
                    barrier(Barrier::AfterRun, true),
                    Step::Report {
                        waits_for_run: false,
                    },
                    barrier(Barrier::Close, false),
                    Step::Done,
                ]);
            } else if opt.all_sizes {
                for &size in &sizes {
                    s.extend([
                        barrier(Barrier::BeforeRun, false),
                        Step::Run { size },
                        barrier(Barrier::AfterRun, true),
                        Step::Report {
                            waits_for_run: false,
                        },
                    ]);
                }
                s.extend([barrier(Barrier::Close, false), Step::Done]);
            } else {
                s.extend([
                    barrier(Barrier::BeforeRun, false),
                    Step::Run { size: opt.size },
                    Step::Report {
                        waits_for_run: true,
                    },
                    barrier(Barrier::Close, false),
                    Step::Done,
                ]);
            }
        }
        Metric::Bandwidth => {
            // send_bw.c: receivers post before the barrier that releases the sender.
            let receiver = !client || bidir;
            let report = bidir && !opt.duration;
            for &size in &sizes {
                if receiver {
                    s.push(Step::PostReceives { size });
                }
                s.extend([barrier(Barrier::BeforeRun, false), Step::Run { size }]);
                if report {
                    s.push(Step::Report {
                        waits_for_run: true,
                    });
                }
                if opt.all_sizes {
                    s.push(barrier(Barrier::AfterRun, !report));
                }
            }
            s.extend([
                barrier(Barrier::Close, !(report || opt.all_sizes)),
                Step::Done,
            ]);
        }
        Metric::Latency if receives => {
            // send_lat.c: both sides ping-pong; receives are posted before each size's barrier.
            for &size in &sizes {
                s.extend([
                    Step::PostReceives { size },
                    barrier(Barrier::BeforeRun, false),
                    Step::Run { size },
                ]);
            }
            s.extend([barrier(Barrier::Close, true), Step::Done]);
        }
        Metric::Latency if !test.verb.reads_back() => {
            // write_lat.c: no close handshake and no "done" at the end.
            s.extend(sizes.iter().map(|&size| Step::Run { size }));
            s.push(Step::AwaitClose);
        }
        Metric::Latency => {
            // read_lat.c and atomic_lat.c: only the client reads (or runs atomics); the server goes
            // straight to the close handshake.
            if client {
                s.extend(sizes.iter().map(|&size| Step::Run { size }));
            }
            s.extend([barrier(Barrier::Close, true), Step::Done]);
        }
    }
    if opt.rdma_cm {
        with_rdma_cm(&mut s);
    }
    mark_waits_after_runs(&mut s);
    Ok(s)
}

/// perftest's `-R` order (`create_rdma_cm_connection`, `ctx_close_connection`, `destroy_ctx`): after
/// the MTU exchange a barrier, the CM connection of the data queue pairs, another barrier; at the end
/// no `"done"` (nor a TCP close to wait for) but the CM's disconnection.
fn with_rdma_cm(s: &mut Vec<Step>) {
    let after_mtu = s.iter().position(|&x| x == Step::Mtu).map_or(0, |i| i + 1);
    let barrier = |which| Step::Barrier {
        which,
        waits_for_run: false,
    };
    s.splice(
        after_mtu..after_mtu,
        [
            barrier(Barrier::BeforeCm),
            Step::CmConnect,
            barrier(Barrier::AfterCm),
        ],
    );
    for step in s.iter_mut() {
        if matches!(step, Step::Done | Step::AwaitClose) {
            *step = Step::CmDisconnect;
        }
    }
}

/// Any exchange that directly follows a run (posting receives aside) waits for the peer's run too (e.g.
/// send_lat -a: the next size's barrier comes right after this size's ping-pong), and the peer's last
/// operation may still need our acknowledgement meanwhile.
fn mark_waits_after_runs(steps: &mut [Step]) {
    let mut after_run = false;
    for step in steps.iter_mut() {
        match step {
            Step::Run { .. } => after_run = true,
            Step::PostReceives { .. } => {}
            Step::Barrier { waits_for_run, .. } | Step::Report { waits_for_run } => {
                *waits_for_run |= after_run;
                after_run = false;
            }
            _ => after_run = false,
        }
    }
}

/// The one-way message sizes of a whole script, in order (what a trace of either direction shows).
pub fn message_sizes(steps: &[Step], num_qps: usize) -> Vec<usize> {
    steps
        .iter()
        .flat_map(|s| s.message_sizes(num_qps))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TestKind {
        TestKind::from_name(name).unwrap()
    }

    #[test]
    fn write_bw_client_matches_reference_section_3_2() {
        let s = script(t("write_bw"), Role::Client, &ScriptOptions::single(65536)).unwrap();
        let sizes = message_sizes(&s, 1);
        // version, 2 x sysdata, MTU, 2 key rounds, post-RTR, end, 5 report fields, close, done
        assert_eq!(
            sizes,
            vec![16, 4, 4, 2, 108, 108, 108, 108, 8, 8, 8, 8, 8, 108, 5]
        );
        assert!(s.contains(&Step::Run { size: 65536 }));
    }

    #[test]
    fn both_roles_exchange_the_same_sizes() {
        for test in TestKind::EVERY {
            for all_sizes in [false, true] {
                for (bidirectional, rdma_cm) in [(false, false), (true, false), (false, true)] {
                    if bidirectional && test.metric == Metric::Latency {
                        continue;
                    }
                    let opt = ScriptOptions {
                        size: 64,
                        all_sizes,
                        bidirectional,
                        num_qps: 1,
                        duration: false,
                        sweep_max: 1 << 23,
                        rdma_cm,
                    };
                    let c = script(test, Role::Client, &opt).unwrap();
                    let sv = script(test, Role::Server, &opt).unwrap();
                    assert_eq!(
                        message_sizes(&c, 1),
                        message_sizes(&sv, 1),
                        "{test} -a={all_sizes} -b={bidirectional} -R={rdma_cm}"
                    );
                    let locals = |s: &[Step], x: Step| s.iter().filter(|&&y| y == x).count();
                    for side in [&c, &sv] {
                        let cm = usize::from(rdma_cm);
                        assert_eq!(locals(side, Step::CmConnect), cm, "{test}");
                        assert_eq!(locals(side, Step::CmDisconnect), cm, "{test}");
                        if rdma_cm {
                            assert_eq!(locals(side, Step::Done), 0, "no \"done\" with -R: {test}");
                            assert_eq!(locals(side, Step::AwaitClose), 0, "{test}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn atomic_tests_exchange_what_read_tests_do() {
        // atomic_bw.c and atomic_lat.c follow read_bw.c and read_lat.c exchange for exchange.
        for (atomic, read) in [("atomic_bw", "read_bw"), ("atomic_lat", "read_lat")] {
            for role in [Role::Client, Role::Server] {
                let opt = ScriptOptions::single(8);
                assert_eq!(
                    script(t(atomic), role, &opt).unwrap(),
                    script(t(read), role, &opt).unwrap(),
                    "{atomic} {role:?}"
                );
            }
        }
        let bidir = ScriptOptions {
            bidirectional: true,
            ..ScriptOptions::single(8)
        };
        assert_eq!(
            script(t("atomic_bw"), Role::Client, &bidir).unwrap(),
            script(t("write_bw"), Role::Client, &bidir).unwrap()
        );
    }

    #[test]
    fn per_qp_rounds_scale_with_q() {
        let opt = ScriptOptions {
            num_qps: 3,
            ..ScriptOptions::single(64)
        };
        let s = script(t("write_bw"), Role::Server, &opt).unwrap();
        let keys = message_sizes(&s, 3).iter().filter(|&&n| n == 108).count();
        assert_eq!(keys, 3 + 3 + 1 + 1 + 1);
    }

    #[test]
    fn refused_options() {
        let opt = ScriptOptions {
            num_qps: 2,
            ..ScriptOptions::single(2)
        };
        assert!(script(t("send_lat"), Role::Client, &opt).is_err());
        let opt = ScriptOptions {
            bidirectional: true,
            ..ScriptOptions::single(2)
        };
        assert!(script(t("read_lat"), Role::Client, &opt).is_err());
    }

    #[test]
    fn every_exchange_right_after_a_run_waits_for_the_peer() {
        for test in TestKind::EVERY {
            for role in [Role::Client, Role::Server] {
                let opt = ScriptOptions {
                    all_sizes: true,
                    ..ScriptOptions::single(2)
                };
                let s = script(test, role, &opt).unwrap();
                for w in s.windows(2) {
                    if let [Step::Run { .. }, next] = w {
                        assert!(
                            matches!(
                                next,
                                Step::Run { .. }
                                    | Step::PostReceives { .. }
                                    | Step::AwaitClose
                                    | Step::Barrier {
                                        waits_for_run: true,
                                        ..
                                    }
                                    | Step::Report {
                                        waits_for_run: true
                                    }
                            ),
                            "{test} {role:?}: {next:?} after a run"
                        );
                    }
                }
            }
        }
        // send_lat -a: the barrier before the second size waits (the peer is finishing the first).
        let s = script(
            TestKind::from_name("send_lat").unwrap(),
            Role::Client,
            &ScriptOptions {
                all_sizes: true,
                ..ScriptOptions::single(2)
            },
        )
        .unwrap();
        let befores: Vec<bool> = s
            .iter()
            .filter_map(|x| match x {
                Step::Barrier {
                    which: Barrier::BeforeRun,
                    waits_for_run,
                } => Some(*waits_for_run),
                _ => None,
            })
            .collect();
        assert_eq!(befores.len(), 23);
        assert!(!befores[0] && befores[1..].iter().all(|&w| w));
    }

    #[test]
    fn a_ud_sweep_stops_at_the_mtu() {
        let opt = ScriptOptions {
            all_sizes: true,
            sweep_max: 1024,
            ..ScriptOptions::single(2)
        };
        assert_eq!(opt.sizes(), [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
        let s = script(t("send_bw"), Role::Server, &opt).unwrap();
        assert_eq!(
            s.iter().filter(|x| matches!(x, Step::Run { .. })).count(),
            10
        );
    }

    #[test]
    fn sweep_sizes() {
        let opt = ScriptOptions {
            all_sizes: true,
            ..ScriptOptions::single(2)
        };
        let sizes = opt.sizes();
        assert_eq!(sizes.len(), 23);
        assert_eq!((sizes[0], sizes[22]), (2, 8 << 20));
        let s = script(t("send_lat"), Role::Server, &opt).unwrap();
        let runs = s.iter().filter(|x| matches!(x, Step::Run { .. })).count();
        assert_eq!(runs, 23);
    }
}
