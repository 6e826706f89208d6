//! The kernel's softirq threads (`ksoftirqd/N`) under SCHED_FIFO for the length of a study, and
//! back to what they were afterwards.
//!
//! Between the study's namespaces the "cable" is the kernel: a frame a sender writes into its veth
//! waits in its core's backlog until the NET_RX softirq delivers it to the switch. Once that work is
//! heavy the kernel hands it to `ksoftirqd/N`, a normal thread that then competes with the
//! busy-polling endpoints for its core and gets it a time slice late: frames sat 1.0-1.5 ms in the
//! backlog (SO_TIMESTAMPNS against when the switch read them), and what a sender wrote before the
//! switch's pause even left then reached the switch after it, past PFC's headroom (46-174 headroom
//! drops in two of three CI-sized runs). A cable does not wait for a scheduler: under SCHED_FIFO the
//! softirq threads preempt the endpoints as soon as frames wait (docs/congestion.md, "How faithful
//! it is").

use std::path::Path;

/// One softirq thread raised, and the policy it goes back to.
#[derive(Debug)]
struct Raised {
    pid: libc::pid_t,
    name: String,
    policy: libc::c_int,
    priority: libc::c_int,
}

/// The softirq threads under SCHED_FIFO while this lives; each goes back to its own policy and
/// priority when it is dropped (a study that ends, fails or is interrupted). A SIGKILL leaves them
/// raised: `chrt -o -p 0 PID` puts one back.
#[derive(Debug)]
pub(crate) struct SoftirqFifo {
    raised: Vec<Raised>,
    priority: u8,
}

/// The softirq threads under `proc_root` (normally `/proc`): pid and name, in pid order.
pub(crate) fn ksoftirqd_threads(proc_root: &Path) -> Vec<(libc::pid_t, String)> {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut found: Vec<(libc::pid_t, String)> = dir
        .filter_map(|e| {
            let e = e.ok()?;
            let pid: libc::pid_t = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            let name = comm.trim_end();
            is_ksoftirqd(name).then(|| (pid, name.to_owned()))
        })
        .collect();
    found.sort();
    found
}

/// True for a softirq thread's name: `ksoftirqd/` and a core number.
fn is_ksoftirqd(comm: &str) -> bool {
    comm.strip_prefix("ksoftirqd/")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl SoftirqFifo {
    /// Raises every softirq thread to SCHED_FIFO at `priority`; Err says why not (none found, or
    /// the kernel refused one: those raised before it are put back).
    pub(crate) fn raise(priority: u8) -> Result<SoftirqFifo, String> {
        let threads = ksoftirqd_threads(Path::new("/proc"));
        if threads.is_empty() {
            return Err("no ksoftirqd thread found in /proc".into());
        }
        let mut guard = SoftirqFifo {
            raised: Vec::with_capacity(threads.len()),
            priority,
        };
        for (pid, name) in threads {
            // SAFETY: plain system calls on a pid; `param` is a live sched_param they read or fill.
            let (policy, old) = unsafe {
                let policy = libc::sched_getscheduler(pid);
                let mut param = libc::sched_param { sched_priority: 0 };
                if policy < 0 || libc::sched_getparam(pid, &mut param) != 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(format!("cannot read {name}'s scheduling policy: {e}"));
                }
                (policy, param.sched_priority)
            };
            if let Err(e) = set(pid, libc::SCHED_FIFO, i32::from(priority)) {
                return Err(format!(
                    "SCHED_FIFO {priority} refused for {name} (pid {pid}): {e}; it needs root \
                     (CAP_SYS_NICE), or --softirq-fifo 0 to leave the kernel's threads alone"
                ));
            }
            guard.raised.push(Raised {
                pid,
                name,
                policy,
                priority: old,
            });
        }
        Ok(guard)
    }

    /// The study's note: which threads ran how, and why.
    pub(crate) fn note(&self) -> String {
        let names: Vec<&str> = self.raised.iter().map(|r| r.name.as_str()).collect();
        format!(
            "the kernel's softirq threads ({}), which carry the frames between the namespaces, ran \
             under SCHED_FIFO {} during the study (--softirq-fifo) and went back afterwards: under \
             the normal scheduler the busy-polling endpoints held frames 1-1.5 ms in a core's \
             backlog, longer than PFC's headroom lasts",
            names.join(", "),
            self.priority
        )
    }
}

impl Drop for SoftirqFifo {
    fn drop(&mut self) {
        for r in self.raised.drain(..) {
            if let Err(e) = set(r.pid, r.policy, r.priority) {
                eprintln!(
                    "roce_compare: could not put {} (pid {}) back to its scheduling policy: {e}; \
                     `chrt -o -p 0 {}` does",
                    r.name, r.pid, r.pid
                );
            }
        }
    }
}

/// `sched_setscheduler(pid, policy, priority)`.
fn set(pid: libc::pid_t, policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: a plain system call; `param` is a live sched_param it reads.
    if unsafe { libc::sched_setscheduler(pid, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_softirq_threads_by_name_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        for (pid, comm) in [
            ("24", "ksoftirqd/1\n"),
            ("14", "ksoftirqd/0\n"),
            ("15", "ksoftirqd\n"),
            ("16", "ksoftirqd/x\n"),
            ("17", "rcu_preempt\n"),
            ("self", "ksoftirqd/9\n"),
        ] {
            let d = root.path().join(pid);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("comm"), comm).unwrap();
        }
        // A pid whose comm cannot be read (a process that ended meanwhile) is passed over.
        std::fs::create_dir(root.path().join("30")).unwrap();
        assert_eq!(
            ksoftirqd_threads(root.path()),
            [(14, "ksoftirqd/0".to_string()), (24, "ksoftirqd/1".into())]
        );
        assert!(ksoftirqd_threads(&root.path().join("missing")).is_empty());
    }

    #[test]
    fn this_kernel_has_a_softirq_thread_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(ksoftirqd_threads(Path::new("/proc")).len() >= cores);
    }
}
