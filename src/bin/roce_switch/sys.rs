//! The switch's few system calls beyond its sockets: the clock, waiting with a precise timeout, the
//! stop signals, timer slack and SCHED_FIFO.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT and SIGTERM ask the loop to stop (and write the stats) instead of killing the process.
pub fn catch_stop_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(sig, handler);
        }
    }
}

/// Whether a stop signal arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// CLOCK_MONOTONIC, ns.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The CPU time this process has used, user and system, seconds (`getrusage`): the system part
/// includes the kernel's delivery of each frame the switch sends, which runs in its `sendmmsg`.
pub fn cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is a valid out-parameter.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live rusage; RUSAGE_SELF always exists.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// `CLOCK_REALTIME` in ns: the clock of the kernel's receive stamps.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `clock` in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a live timespec; both clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Timer slack 1 ns: a sleep ends when asked, not up to 50 µs later (the default slack).
pub fn precise_timers() -> Result<()> {
    // SAFETY: prctl with an integer argument.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(Error::setup(
            "PR_SET_TIMERSLACK",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Runs the switch under SCHED_FIFO at `prio`: it sleeps most of the time, so it cannot starve the
/// endpoints, and it preempts them when a departure is due.
pub fn sched_fifo(prio: i32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: param is a valid sched_param for this process.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(Error::Usage(format!(
            "--fifo {prio}: SCHED_FIFO refused ({e}); it needs root (CAP_SYS_NICE) and a priority in 1..=99"
        )));
    }
    Ok(())
}

/// Waits until one of `fds` is readable or `timeout_ns` passes (None: until a signal or data).
pub fn wait(fds: &mut [libc::pollfd], timeout_ns: Option<u64>) -> io::Result<()> {
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: fds is a live slice of pollfds; tsp is null or points at a live timespec.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
