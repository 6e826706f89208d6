//! Looks into a running server: its memory through `/proc/<pid>/mem`, and the moment it answers a
//! request, through ptrace. A server whose queue pair refused a request ends its run within tens of
//! milliseconds and frees the region; stopped at the system call that sends its answer, it has
//! decided (and done whatever it did to the region) and freed nothing yet.

use std::fs::File;
use std::io::Error as IoError;
use std::mem::{size_of, zeroed};
use std::os::unix::fs::FileExt;

/// `len` bytes of process `pid`'s memory at `addr`.
pub(super) fn read_mem(pid: u32, addr: u64, len: usize) -> Vec<u8> {
    let mem = File::open(format!("/proc/{pid}/mem")).expect("open /proc/<pid>/mem (needs root)");
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, addr)
        .unwrap_or_else(|e| panic!("read {len} bytes at {addr:#x} of process {pid}: {e}"));
    buf
}

/// Where in process `pid` a region of `len` bytes lies that starts with `first` and ends with
/// `last`: the soft transport's VAddr is the IB address a peer names, not a host address, so
/// the test writes these two markers through the wire and looks for them in every writable
/// mapping. Panics unless exactly one place holds both.
pub(super) fn find_region(pid: u32, first: &[u8], last: &[u8], len: usize) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mem = File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut found = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        if !perms.starts_with("rw") {
            continue;
        }
        let (lo, hi) = range.split_once('-').unwrap();
        let lo = u64::from_str_radix(lo, 16).unwrap();
        let hi = u64::from_str_radix(hi, 16).unwrap();
        let mut bytes = vec![0u8; (hi - lo) as usize];
        // [vvar] and the like cannot be read: skip them.
        if mem.read_exact_at(&mut bytes, lo).is_err() {
            continue;
        }
        for at in bytes
            .windows(first.len())
            .enumerate()
            .filter(|(_, w)| *w == first)
            .map(|(i, _)| i)
        {
            let end = at + len;
            if end <= bytes.len() && bytes[end - last.len()..end] == *last {
                found.push(lo + at as u64);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "the region of {len} bytes marked at both ends, in process {pid}: found at {found:x?}"
    );
    found[0]
}

/// A process stopped under ptrace by this thread (the tracer is a thread: every request below
/// must come from the thread that seized it).
pub(super) struct Traced {
    pid: libc::pid_t,
}

fn ptrace(req: libc::c_uint, pid: libc::pid_t, addr: usize, data: usize) -> libc::c_long {
    // SAFETY: the requests used here take integers, or (GET_SYSCALL_INFO) a buffer of `addr`
    // bytes at `data` that the caller owns.
    let rc = unsafe { libc::ptrace(req, pid, addr, data) };
    assert!(rc >= 0, "ptrace({req:#x}): {}", IoError::last_os_error());
    rc
}

/// The next stop of `pid`, or how it ended (it is reaped then: the caller must not wait for it).
fn wait_stop(pid: libc::pid_t) -> Result<libc::c_int, String> {
    let mut status = 0;
    // SAFETY: waitpid with a pointer to a local.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    assert_eq!(rc, pid, "waitpid: {}", IoError::last_os_error());
    if libc::WIFSTOPPED(status) {
        Ok(status)
    } else if libc::WIFEXITED(status) {
        Err(format!("exited with code {}", libc::WEXITSTATUS(status)))
    } else {
        Err(format!("was killed by signal {}", libc::WTERMSIG(status)))
    }
}

impl Traced {
    /// Seizes process `pid` and stops it.
    pub(super) fn seize(pid: u32) -> Traced {
        let pid = pid as libc::pid_t;
        ptrace(
            libc::PTRACE_SEIZE,
            pid,
            0,
            libc::PTRACE_O_TRACESYSGOOD as usize,
        );
        ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0);
        if let Err(end) = wait_stop(pid) {
            panic!("process {pid} {end} before it could be traced");
        }
        Traced { pid }
    }

    /// Lets it run until it has received a datagram (a receive returned data) and then enters a
    /// system call that sends: the answer to what it received. It stays stopped there. `Err` says
    /// how it ended instead (a crash); it is reaped then.
    pub(super) fn until_it_answers(&self) -> Result<(), String> {
        let recv = [libc::SYS_recvfrom, libc::SYS_recvmsg, libc::SYS_recvmmsg];
        let send = [libc::SYS_sendto, libc::SYS_sendmsg, libc::SYS_sendmmsg];
        let mut received = false;
        let mut entered = -1;
        let mut signal = 0;
        loop {
            ptrace(libc::PTRACE_SYSCALL, self.pid, 0, signal);
            let status = wait_stop(self.pid)?;
            signal = 0;
            let sig = libc::WSTOPSIG(status);
            if sig != libc::SIGTRAP | 0x80 {
                // A signal for the process (not a system-call stop): deliver it as it was.
                if status >> 16 == 0 && sig != libc::SIGTRAP {
                    signal = sig as usize;
                }
                continue;
            }
            // SAFETY: an all-zero ptrace_syscall_info is valid.
            let mut info: libc::ptrace_syscall_info = unsafe { zeroed() };
            ptrace(
                libc::PTRACE_GET_SYSCALL_INFO,
                self.pid,
                size_of::<libc::ptrace_syscall_info>(),
                &mut info as *mut _ as usize,
            );
            // SAFETY: the union member read is the one `op` says the kernel filled.
            unsafe {
                match info.op {
                    libc::PTRACE_SYSCALL_INFO_ENTRY => {
                        entered = info.u.entry.nr as libc::c_long;
                        if received && send.contains(&entered) {
                            return Ok(());
                        }
                    }
                    // The exit does not say which call returned: the entry before it does.
                    libc::PTRACE_SYSCALL_INFO_EXIT
                        if recv.contains(&entered)
                            && info.u.exit.is_error == 0
                            && info.u.exit.sval > 0 =>
                    {
                        received = true;
                    }
                    _ => {}
                }
            }
        }
    }

    /// Lets it go on untraced.
    pub(super) fn detach(self) {
        ptrace(libc::PTRACE_DETACH, self.pid, 0, 0);
    }
}
