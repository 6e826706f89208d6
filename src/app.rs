//! What every `roce_*` binary does: options, plan, transport, session, report, exit code.
//!
//! The options are resolved once into a `Plan`; then the datapath is pinned, the transport opened,
//! and the session run in the chosen out-of-band dialect.
//!
//! The test binaries (the six, and the two atomic ones) are one line each:
//! `roceperf::app::main(TestKind::WRITE_BW)`.
//! Exit codes: 0 ok, 1 the test failed while running, 2 usage or setup error (`Error::exit_code`).
//!
//! Rooms, in the order a run passes them: `plan` (options resolved once), `endpoints` (opening the
//! transport), `roceperf_oob` / `perftest_oob` (the two dialects), `session` (the one loop both drive),
//! `measure` (one size on the data path), `report` (what is printed and written), [`exit`] (exit
//! codes), `notes` (typed header notes and warnings), `resources` (the memory a run needs,
//! checked up front), `rdma_cm` (`-R`: queue pairs connected through the CM), `nic` (verbs: the
//! NIC's counters around each size, `-W`), `persist` (`--persist`: a server that serves one client
//! after another).
//!
//! What the rooms share lives here, so that none of them reaches another for it: the `Error`
//! every room returns.

mod comm_link;
mod endless;
mod endpoints;
pub mod exit;
mod measure;
mod nic;
mod notes;
mod perftest_oob;
mod persist;
mod plan;
mod rdma_cm;
mod report;
mod resources;
mod roceperf_oob;
mod session;

use plan::Plan;

use crate::cli::{OobArg, Options};
use crate::oob::Failure;
use crate::params::{TestKind, TransportKind};
use crate::{bench, cli, oob, transport};
use endpoints::Described;
use roceperf_oob::Roceperf;
use std::process::ExitCode;

/// Everything that can stop a run, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The command line does not make a run (exit 2).
    #[error("{0}\n\nFor more information, try '--help'.")]
    Usage(#[from] cli::Error),
    /// Out-of-band setup, parameter check or result exchange (exit 2), or the peer lost in a step of
    /// the running test or reporting that its test failed (exit 1).
    #[error("{0}")]
    Oob(#[from] oob::Error),
    /// The test itself (exit 1), or choosing the core (exit 2).
    #[error("{0}")]
    Bench(#[from] bench::Error),
    /// Creating or connecting the transport (exit 2).
    #[error("setting up the {transport} transport: {source}")]
    Setup {
        /// Which transport.
        transport: TransportKind,
        /// Its error.
        #[source]
        source: transport::Error,
    },
    /// The run's buffers do not fit this host (exit 2).
    #[error("{0}")]
    Memory(#[from] resources::Shortfall),
    /// Writing --csv / --json / --results (exit 2).
    #[error("{0}")]
    Report(#[from] crate::results::WriteError),
    /// An output flag names a path the run could not write, found at set-up (exit 2).
    #[error("{0}")]
    Output(#[from] crate::results::Unusable),
    /// A gate threshold or baseline comparison failed (exit 1); the table above says which.
    #[error("{failed} gate check(s) failed (see the table above)")]
    GateFailed {
        /// Number of failed checks.
        failed: usize,
    },
    /// perftest's out-of-band dialect failed in its setup (exit 2).
    #[error("--oob perftest: {0}")]
    Perftest(#[from] oob::perftest::PerftestError),
    /// perftest's out-of-band dialect lost the peer after the test began (exit 1): a perftest peer
    /// that fails simply closes the connection.
    #[error("--oob perftest: {0}")]
    PerftestMidTest(oob::perftest::PerftestError),
    /// A gate could not be evaluated: unreadable baseline, unwritable JUnit file (exit 2).
    #[error("gate: {0}")]
    GateInput(String),
    /// `-R`: the CM could not connect the queue pairs (exit 2).
    #[error("{0}")]
    RdmaCm(#[from] rdma_cm::CmSetupError),
    /// `-W` names a counter the NIC's port does not have, or it cannot be read (exit 2).
    #[error("{0}")]
    NicCounters(#[from] transport::verbs::counters::CounterError),
    /// SIGINT or SIGTERM stopped a `-n` / `-D` run early, on this side or the peer's; both sides
    /// printed and wrote what completed (exit 128 + the signal's number: 130, 143).
    #[error(
        "{}{}; the results above and in the files stop there, marked interrupted",
        match peer {
            Some(p) => format!("peer interrupted: {} was stopped by {signal}", if p.is_empty() { "the client" } else { p.as_str() }),
            None => format!("interrupted by {signal}"),
        },
        match (kept.size_bytes, kept.partial) {
            (Some(s), true) => format!(" during size {s}: its row holds what completed before the stop"),
            (Some(s), false) => format!(" during size {s}, before any of it was measured"),
            (None, _) => String::new(),
        }
    )]
    Interrupted {
        /// `SIGINT` or `SIGTERM`: this side's, or the peer's.
        signal: &'static str,
        /// The peer's address when the peer was signalled (empty on a server: the client).
        peer: Option<String>,
        /// What the files say of it.
        kept: crate::results::Interrupted,
    },
}

impl Error {
    /// Whether the test failed or its setup did; the peer is told the same in an abort.
    pub(crate) fn failure(&self) -> Failure {
        match self {
            // Not told in an abort: both sides know, and exit with the signal's code.
            Error::Interrupted { .. } => Failure::Test,
            Error::Bench(e) if !e.is_setup() => Failure::Test,
            Error::GateFailed { .. } | Error::PerftestMidTest(_) => Failure::Test,
            // The peer vanished after the test began (per-size barriers, results): the test failed.
            Error::Oob(oob::Error::Closed { during, .. }) if during.is_during_test() => {
                Failure::Test
            }
            // The peer failed and said how: this side exits as the peer does.
            Error::Oob(oob::Error::PeerAborted { failure, .. }) => *failure,
            _ => Failure::Setup,
        }
    }

    /// The process exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        if let Error::Interrupted { signal, .. } = self {
            return exit::interrupted(signal);
        }
        match self.failure() {
            Failure::Test => exit::TEST_FAILED,
            Failure::Setup => exit::USAGE,
        }
    }
}

/// Entry point of the test binaries: options, plan, run, exit code.
pub fn main(test: TestKind) -> ExitCode {
    let outcome = Options::parse(test).map_err(Error::from).and_then(|opts| {
        let plan = Plan::new(opts);
        match plan.persist {
            true => persist::serve(&plan),
            false => run(&plan),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        // Not an error: what the user asked for, said as such.
        Err(e @ Error::Interrupted { .. }) => {
            eprintln!("{e}");
            ExitCode::from(e.exit_code())
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs one test as the plan says, printing the report; the error says what failed.
///
/// Every output path is tried first ([`report::probe_outputs`]). RoCE endpoints (soft, verbs) are opened before the out-of-band channel, so a missing device or library
/// is reported at once rather than after a peer has connected; the TCP baseline binds its data sockets to
/// the channel's local address, so it is created after the parameter check.
pub(crate) fn run(plan: &Plan) -> Result<(), Error> {
    resources::check(plan)?;
    // Before the peer is contacted (a server before it listens): a measurement is never lost to a
    // path found unusable at the end.
    report::probe_outputs(plan)?;
    let pinned = bench::affinity::pin(plan.cpu, plan.role)?;
    plan.output
        .verbose(|| format!("datapath pinned to {}", pinned.reason));
    match plan.transport {
        TransportKind::Soft => {
            let ep = endpoints::open_soft(plan)?;
            plan.output.verbose(|| ep.describe());
            run_roce(&fitted(plan, &ep)?, &pinned, ep)
        }
        TransportKind::Verbs => {
            let ep = endpoints::open_verbs(plan)?;
            let mut plan = fitted(plan, &ep)?;
            plan.nic = nic::open(&plan, &ep.setup().device, ep.setup().port)?;
            run_roce(&plan, &pinned, ep)
        }
        TransportKind::Tcp => {
            let mut oob = Roceperf::open(plan)?;
            oob.guarded(|oob| {
                oob.check_params()?;
                let ep = endpoints::open_tcp(plan, oob.local_ip())?;
                session::run(plan, &pinned, oob, ep)
            })
        }
    }
}

/// The plan against what the opened endpoint offers: UD sizes fit its MTU.
fn fitted<E: Described>(plan: &Plan, ep: &E) -> Result<Plan, Error> {
    match ep.mtu_offered() {
        Some(mtu) => {
            let dev = plan.device.device.as_deref().unwrap_or("the device");
            Ok(plan.fit_datagrams(mtu, &format!("what -d {dev} offers"))?)
        }
        None => Ok(plan.clone()),
    }
}

/// An opened RoCE endpoint, in the dialect the plan names.
fn run_roce<E: Described>(
    plan: &Plan,
    pinned: &bench::affinity::Pinned,
    ep: E,
) -> Result<(), Error> {
    match plan.oob {
        OobArg::Perftest => perftest_oob::run(plan, pinned, ep),
        OobArg::Roceperf => {
            let mut oob = Roceperf::open(plan)?;
            oob.guarded(|oob| {
                oob.check_params()?;
                plan.output
                    .verbose(|| "parameters agree with the peer".into());
                session::run(plan, pinned, oob, ep)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oob::Step;

    fn closed(during: Step) -> Error {
        Error::Oob(oob::Error::Closed {
            peer: "127.0.0.1:18515".into(),
            during,
            partial: None,
        })
    }

    #[test]
    fn a_peer_lost_or_failed_mid_test_fails_the_test_and_one_lost_in_setup_is_a_setup_error() {
        assert_eq!(closed(Step::Barrier).exit_code(), exit::TEST_FAILED);
        assert_eq!(closed(Step::Results).exit_code(), exit::TEST_FAILED);
        assert_eq!(closed(Step::Params).exit_code(), exit::USAGE);
        assert_eq!(closed(Step::Hello).exit_code(), exit::USAGE);
        assert_eq!(
            Error::GateFailed { failed: 1 }.exit_code(),
            exit::TEST_FAILED
        );
        let aborted = |failure| {
            Error::Oob(oob::Error::PeerAborted {
                peer: "127.0.0.1:18515".into(),
                reason: "queue pair 0: work request 7 failed: retry exceeded".into(),
                failure,
            })
        };
        assert_eq!(aborted(Failure::Test).exit_code(), exit::TEST_FAILED);
        assert_eq!(aborted(Failure::Setup).exit_code(), exit::USAGE);
        let lost = oob::perftest::PerftestError::PeerClosed {
            step: "post-run barrier".into(),
            got: 0,
            want: 108,
        };
        assert_eq!(Error::PerftestMidTest(lost).exit_code(), exit::TEST_FAILED);
        assert_eq!(Error::Bench(bench::Error::Pin(3)).exit_code(), exit::USAGE);
        assert_eq!(
            Error::Bench(bench::Error::Validation {
                what: "SEND received",
                size: 2,
                iteration: None,
                offset: 0,
                expected: 1,
                found: 0,
            })
            .exit_code(),
            exit::TEST_FAILED
        );
        let atomic = bench::Error::AtomicTarget {
            qp: 0,
            word: 3,
            ops: 1100,
            expected: 2,
            found: 1,
        };
        assert_eq!(Error::Bench(atomic).exit_code(), exit::TEST_FAILED);
    }
}
