//! Helpers for the soft-transport integration tests: network namespaces and waiting for packets.
#![allow(dead_code)]

pub mod endpoints;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// True when running as root (namespaces and AF_PACKET need it); tests that need it say so and return.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/netns.sh")
}

/// Two namespaces `<prefix>a` / `<prefix>b` joined by veth0, made by scripts/netns.sh and removed
/// on drop, even when the test panics. Each instance gets a unique prefix, so tests run in parallel.
pub struct NetnsPair {
    /// The ROCEPERF_NETNS_PREFIX used.
    pub prefix: String,
}

impl NetnsPair {
    /// Creates the pair with the extra `netns.sh up` arguments.
    pub fn up(args: &[&str]) -> NetnsPair {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "rt{}x{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let pair = NetnsPair { prefix };
        let out = Command::new("bash")
            .arg(script())
            .arg("up")
            .args(args)
            .env("ROCEPERF_NETNS_PREFIX", &pair.prefix)
            .output()
            .expect("run scripts/netns.sh");
        assert!(
            out.status.success(),
            "netns.sh up failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        pair
    }

    /// The namespace name of side `a` or `b`.
    pub fn ns(&self, side: char) -> String {
        format!("{}{side}", self.prefix)
    }

    /// Runs a server of `test` in side a's namespace and a client in side b's, which asks for the
    /// server at 10.77.0.1 ([`crate::common::pair_on`]); returns (server, client) once both exited.
    pub fn run_pair(
        &self,
        test: &str,
        server: Vec<&str>,
        client: Vec<&str>,
    ) -> (crate::common::Done, crate::common::Done) {
        let (a, b) = (self.ns('a'), self.ns('b'));
        let side = |ns, args| crate::common::Side { ns: Some(ns), args };
        crate::common::pair_on(test, side(&a, server), side(&b, client), "10.77.0.1")
    }

    /// Runs `f` on a thread that has entered side `side`'s network namespace; sockets it opens stay
    /// in that namespace after it returns them.
    pub fn in_ns<T: Send + 'static>(
        &self,
        side: char,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let path = format!("/run/netns/{}", self.ns(side));
        std::thread::spawn(move || {
            let ns = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: setns on this thread only, with a namespace fd we hold open.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("namespace thread panicked")
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("down")
            .env("ROCEPERF_NETNS_PREFIX", &self.prefix)
            .output();
    }
}

/// Capability numbers (include/uapi/linux/capability.h).
pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_NET_RAW: u32 = 13;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_BPF: u32 = 39;

/// Drops `caps` from the calling thread's effective set (capabilities are per thread, so the test's
/// other threads keep them).
pub fn drop_capabilities(caps: &[u32]) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data words, as the ABI requires.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        for &c in caps {
            d[(c / 32) as usize].effective &= !(1 << (c % 32));
        }
        assert_eq!(libc::syscall(libc::SYS_capset, &h, d.as_ptr()), 0);
    }
}

/// Pins the calling thread to core `core` (modulo the cores there are), as a measurement's two sides
/// would be in two roceperf processes.
pub fn pin(core: usize) {
    if let Some(id) =
        core_affinity::get_core_ids().and_then(|ids| ids.get(core % ids.len()).copied())
    {
        core_affinity::set_for_current(id);
    }
}

/// How long a measurement runs: the seconds in environment variable `var`, or `default_s`.
pub fn secs_from_env(var: &str, default_s: f64) -> Duration {
    let s = std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_s);
    Duration::from_secs_f64(s)
}

/// Polls `f` until it returns true or two seconds pass; returns the final result.
pub fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    f()
}
