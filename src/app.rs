//! What every `roce_*` binary does: options, plan, transport, session, report, exit code.
//!
//! The options are resolved once into a [`Plan`]; then the datapath is pinned, the transport opened,
//! and the session run in the chosen out-of-band dialect.
//!
//! The test binaries (the six, and the two atomic ones) are one line each:
//! `roceperf::app::main(TestKind::new(verb, metric))`.
//! Exit codes: 0 ok, 1 the test failed while running, 2 usage or setup error ([`Error::exit_code`]).
//!
//! Rooms, in the order a run passes them: [`plan`] (options resolved once), `endpoints` (opening the
//! transport), `roceperf_oob` / `perftest_oob` (the two dialects), `session` (the one loop both drive),
//! `measure` (one size on the data path), `report` (what is printed and written), [`exit`] (errors and
//! exit codes), `notes` (typed header notes and warnings), [`resources`] (the memory a run needs,
//! checked up front), [`rdma_cm`] (`-R`: queue pairs connected through the CM).

mod comm_link;
mod endless;
mod endpoints;
pub mod exit;
mod measure;
mod notes;
mod perftest_oob;
pub mod plan;
pub mod rdma_cm;
mod report;
pub mod resources;
mod roceperf_oob;
mod session;

pub use exit::Error;
pub use plan::Plan;

use crate::bench;
use crate::cli::{OobArg, Options};
use crate::params::{TestKind, TransportKind};
use endpoints::Described;
use roceperf_oob::Roceperf;
use std::process::ExitCode;

/// Entry point of the test binaries: options, plan, run, exit code.
pub fn main(test: TestKind) -> ExitCode {
    let outcome = Options::parse(test)
        .map_err(Error::from)
        .and_then(|opts| run(&Plan::new(opts)));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs one test as the plan says, printing the report; the error says what failed.
///
/// RoCE endpoints (soft, verbs) are opened before the out-of-band channel, so a missing device or library
/// is reported at once rather than after a peer has connected; the TCP baseline binds its data sockets to
/// the channel's local address, so it is created after the parameter check.
pub fn run(plan: &Plan) -> Result<(), Error> {
    resources::check(plan)?;
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
            run_roce(&fitted(plan, &ep)?, &pinned, ep)
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
    match plan.oob.dialect {
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
