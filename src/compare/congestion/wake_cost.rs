//! What one short timed sleep costs this machine: `roce_switch` sleeps until each departure and
//! wakes for each frame, so its share of a core is about this cost times its wake-ups. On bare
//! metal it is a few microseconds; in a nested virtual machine every timer armed and every timer
//! interrupt is a VM exit, and it can be several times more (docs/congestion.md, "What the switch
//! costs").

use std::time::Instant;

/// The sleep measured: about one departure gap at the study's default link (a 4 KB frame at 1 Gb/s
/// lasts 33 µs on the wire).
pub(crate) const SLEEP_NS: u64 = 30_000;
/// How many sleeps are measured (about 0.1 s).
pub(crate) const SLEEPS: u32 = 2_000;

/// One measurement: per sleep, the CPU it took and how long it lasted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WakeCost {
    /// The sleep asked for, ns.
    pub(crate) asked_ns: u64,
    /// CPU time per sleep, user and system, ns.
    pub(crate) cpu_ns: f64,
    /// Wall time per sleep, ns.
    pub(crate) wall_ns: f64,
}

impl WakeCost {
    /// Measures `n` sleeps of `asked_ns` in `ppoll(2)` with 1 ns of timer slack, as the switch
    /// sleeps, on a thread of its own (the slack is per thread); `None` if the thread failed.
    pub(crate) fn measure(asked_ns: u64, n: u32) -> Option<WakeCost> {
        std::thread::spawn(move || {
            // SAFETY: prctl with an integer argument, for this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            let ts = libc::timespec {
                tv_sec: (asked_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (asked_ns % 1_000_000_000) as libc::c_long,
            };
            let (cpu0, t0) = (thread_cpu_ns(), Instant::now());
            for _ in 0..n {
                // SAFETY: no descriptors; ts is a live timespec. An interruption only ends one early.
                unsafe { libc::ppoll(std::ptr::null_mut(), 0, &ts, std::ptr::null()) };
            }
            let wall = t0.elapsed().as_nanos() as f64;
            let cpu = thread_cpu_ns().saturating_sub(cpu0) as f64;
            WakeCost {
                asked_ns,
                cpu_ns: cpu / f64::from(n.max(1)),
                wall_ns: wall / f64::from(n.max(1)),
            }
        })
        .join()
        .ok()
    }

    /// The study's note.
    pub(crate) fn note(&self) -> String {
        format!(
            "a {:.0} µs timed sleep, as the switch takes between departures, cost {:.1} µs of CPU \
             and lasted {:.1} µs on this machine ({SLEEPS} measured): the switch wakes for every \
             departure and every frame, so its share of a core (the notes per discipline) is \
             mostly this cost",
            self.asked_ns as f64 / 1e3,
            self.cpu_ns / 1e3,
            self.wall_ns / 1e3,
        )
    }
}

/// This thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a live timespec; the clock exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_lasts_at_least_what_was_asked_and_costs_less_cpu_than_it_lasts() {
        let c = WakeCost::measure(SLEEP_NS, 200).unwrap();
        assert!(c.wall_ns >= SLEEP_NS as f64, "{c:?}");
        assert!(c.cpu_ns > 0.0 && c.cpu_ns <= c.wall_ns, "{c:?}");
        let n = c.note();
        assert!(
            n.starts_with("a 30 µs timed sleep, as the switch takes"),
            "{n}"
        );
        assert!(
            n.contains(&format!("cost {:.1} µs of CPU", c.cpu_ns / 1e3)),
            "{n}"
        );
    }
}
