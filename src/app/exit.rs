//! Everything that can stop a run, and the exit status each variant maps to.
//!
//! 0 ok, 1 the test failed, 2 usage or setup error.

use crate::oob::Failure;
use crate::params::TransportKind;
use crate::{bench, cli, oob, transport};

/// The test ran and failed: an error completion, a `--validate` mismatch, a peer lost mid-test, a gate.
pub const TEST_FAILED: u8 = 1;
/// A usage or setup error: a bad flag, a parameter mismatch, no device, no server.
pub const USAGE: u8 = 2;

/// Everything that can stop a run, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
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
    Memory(#[from] super::resources::Shortfall),
    /// Writing --csv / --json / --results (exit 2).
    #[error("{0}")]
    Report(#[from] crate::results::WriteError),
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
    RdmaCm(#[from] super::rdma_cm::CmSetupError),
}

impl Error {
    /// Whether the test failed or its setup did; the peer is told the same in an abort.
    pub fn failure(&self) -> Failure {
        match self {
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
    pub fn exit_code(&self) -> u8 {
        match self.failure() {
            Failure::Test => TEST_FAILED,
            Failure::Setup => USAGE,
        }
    }
}

/// The six binaries' global allocator: the system's, except that an allocation the host refuses
/// ends the process with exit code 2 and a message (lower -q or -s), rather than an abort (134).
/// Allocations whose failure their caller handles ([`crate::transport::memory::handled`]) still
/// get a null pointer, so a queue pair's buffer is refused with an error naming it.
pub struct ExitOnOom;

// SAFETY: forwards every call unchanged to the system allocator; a failure it does not hand back
// ends the process instead of returning.
unsafe impl std::alloc::GlobalAlloc for ExitOnOom {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { std::alloc::System.alloc(layout) };
        refused(p, layout.size())
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        refused(p, layout.size())
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: ptr came from System with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: ptr came from System with this layout; same contract as ours.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        refused(p, new_size)
    }
}

/// `p`, unless it is null and nobody handles that: then the message and exit code 2. Writes with
/// one `write(2)` from a stack buffer, since nothing may be allocated here.
fn refused(p: *mut u8, bytes: usize) -> *mut u8 {
    if !p.is_null() || crate::transport::memory::failure_is_handled() {
        return p;
    }
    let mut msg = [0u8; 256];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        let k = b.len().min(msg.len() - n);
        msg[n..n + k].copy_from_slice(&b[..k]);
        n += k;
    };
    put(b"error: out of memory: the host refused ");
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = bytes;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[i..]);
    put(b" bytes; lower -q or the message size (-s/-a), or raise the memory this process may use (ulimit -v)\n");
    // SAFETY: writes `n` initialised bytes of a local buffer to stderr, then ends the process
    // without running anything that could allocate.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), n);
        libc::_exit(i32::from(USAGE))
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
        assert_eq!(closed(Step::Barrier).exit_code(), TEST_FAILED);
        assert_eq!(closed(Step::Results).exit_code(), TEST_FAILED);
        assert_eq!(closed(Step::Params).exit_code(), USAGE);
        assert_eq!(closed(Step::Hello).exit_code(), USAGE);
        assert_eq!(Error::GateFailed { failed: 1 }.exit_code(), TEST_FAILED);
        let aborted = |failure| {
            Error::Oob(oob::Error::PeerAborted {
                peer: "127.0.0.1:18515".into(),
                reason: "queue pair 0: work request 7 failed: retry exceeded".into(),
                failure,
            })
        };
        assert_eq!(aborted(Failure::Test).exit_code(), TEST_FAILED);
        assert_eq!(aborted(Failure::Setup).exit_code(), USAGE);
        let lost = oob::perftest::PerftestError::PeerClosed {
            step: "post-run barrier".into(),
            got: 0,
            want: 108,
        };
        assert_eq!(Error::PerftestMidTest(lost).exit_code(), TEST_FAILED);
        assert_eq!(Error::Bench(bench::Error::Pin(3)).exit_code(), USAGE);
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
            TEST_FAILED
        );
        let atomic = bench::Error::AtomicTarget {
            qp: 0,
            word: 3,
            ops: 1100,
            expected: 2,
            found: 1,
        };
        assert_eq!(Error::Bench(atomic).exit_code(), TEST_FAILED);
    }
}
