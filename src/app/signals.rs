//! SIGINT and SIGTERM during a run without end: the first one stops the run cleanly (final summary,
//! files written whole, exit 0), a second one ends the process as the signal normally would.

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

/// From now on SIGINT and SIGTERM ask the run to stop instead of killing the process.
pub(crate) fn catch() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic (and on a repeat restores the default action).
        unsafe {
            libc::signal(sig, handler);
        }
    }
}

/// The signal that asked the run to stop, if one has: `SIGINT` or `SIGTERM`.
pub(crate) fn received() -> Option<&'static str> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => Some("a signal"),
    }
}
