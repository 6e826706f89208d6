//! `--persist`: a server that serves clients one after another until SIGINT or SIGTERM, as
//! `iperf3 -s` does (perftest's server, and ours without the flag, serves one run).
//!
//! The out-of-band port stays open for the server's whole life (`oob::Listener`): a client that
//! connects during another's run is told whom the server serves and waits its turn. Each run is a
//! whole run of [`super::run`], its files named apart (`Plan::serving_run`). A run that fails
//! (a client with parameters this server cannot serve, a client killed mid-run) is said on stderr
//! and the server goes on; what fails before any client came (the port, the device) ends it.

use super::notes::Warning;
use super::plan::Plan;
use super::{Error, run};
use crate::oob;
use crate::orchestrate::signals;
use std::sync::Arc;

/// Serves runs until a signal stops the server: exit 0 when it came while waiting for a client (or
/// between runs); a signal during a run interrupts that run as it would a server of one run.
pub(crate) fn serve(plan: &Plan) -> Result<(), Error> {
    // From the start: a signal while the server waits for a client ends it cleanly.
    signals::catch();
    let listener = Arc::new(oob::Listener::bind(plan.port, |client, serving, place| {
        Warning::QueuedClient {
            client: client.to_string(),
            serving: serving.to_string(),
            place,
        }
        .emit()
    })?);
    for k in 1.. {
        let before = listener.accepted();
        let outcome = run(&plan.serving_run(listener.clone(), k));
        let took_client = listener.accepted() > before;
        let failed = outcome.is_err();
        match outcome {
            Ok(()) => {}
            Err(Error::Oob(oob::Error::Stopped)) => {
                stopped(k - 1);
                return Ok(());
            }
            // This server was signalled mid-run: the run's files are written, and it ends.
            Err(e @ Error::Interrupted { peer: None, .. }) => return Err(e),
            // Nothing of a client: the port, the device, a path found unusable.
            Err(e) if !took_client => return Err(e),
            // The client's doing (it was signalled), not an error of this server.
            Err(e @ Error::Interrupted { .. }) => eprintln!("run {k}: {e}"),
            Err(e) => eprintln!("error: run {k}: {e}"),
        }
        if signals::stop_requested() {
            stopped(k);
            return Ok(());
        }
        if failed {
            eprintln!(
                "roceperf: --persist: still serving; the next client is run {}",
                k + 1
            );
        }
    }
    Ok(())
}

/// The server's last line: what stopped it, after how many runs.
fn stopped(runs: u64) {
    println!(
        " Stopped by {} after {runs} run(s); exiting",
        signals::received().unwrap_or("a signal")
    );
}
