//! SIGINT and SIGTERM for the whole tree: the first one asks whatever runs to stop cleanly (a run
//! without end prints its summary, a comparison reports what ran, rank 0 writes its matrix), a second
//! one ends the process as the signal normally would.
//!
//! One flag, set by one handler, read by everyone who must stop: the run loops and the child runner
//! ([`super::child`]), which kills a running child when it is set.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first stop signal received, 0 before any.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if RECEIVED.swap(sig, Ordering::SeqCst) != 0 {
        // SAFETY: signal() and raise() are async-signal-safe; the default action then ends the process.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// From now on SIGINT and SIGTERM ask the process to stop instead of killing it.
pub(crate) fn catch() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic (and on a repeat restores the default action).
        unsafe {
            libc::signal(sig, handler);
        }
    }
}

/// The signal that asked the process to stop, if one has: `SIGINT` or `SIGTERM`.
pub(crate) fn received() -> Option<&'static str> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => Some("a signal"),
    }
}

/// Whether SIGINT or SIGTERM asked the process to stop.
pub(crate) fn stop_requested() -> bool {
    received().is_some()
}
