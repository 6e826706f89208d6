//! What can go wrong on the out-of-band channel; every message names the peer, the step and what to do.

use std::fmt;
use std::time::Duration;

/// The steps of roceperf's dialect. Each message's kind on the wire is its step's name, and errors
/// name the step they happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// Socket options right after connecting.
    Setup,
    /// The 12-byte hello each way.
    Hello,
    /// The parameter check.
    Params,
    /// The connection details of the data path.
    Conn,
    /// A barrier (before each size, and after the last).
    Barrier,
    /// One size's results.
    Results,
    /// This side stopping, and why.
    Abort,
    /// A `--persist` server telling a client it waits for another's run.
    Queued,
    /// Waiting for the peer while the data path runs.
    Test,
}

impl Step {
    /// The name used on the wire (message kinds) and in error messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Setup => "setup",
            Step::Hello => "the hello",
            Step::Params => "params",
            Step::Conn => "conn",
            Step::Barrier => "barrier",
            Step::Results => "results",
            Step::Abort => "abort",
            Step::Queued => "queued",
            Step::Test => "the test",
        }
    }

    /// True for the steps that come after the test began (per-size barriers, results): a peer lost
    /// there failed the test rather than its setup.
    pub(crate) fn is_during_test(self) -> bool {
        matches!(self, Step::Barrier | Step::Results)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of failure stopped a side, as an abort tells the peer: both sides exit with the code it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Failure {
    /// A usage or setup error (exit code 2): no device, a parameter the transport refused.
    Setup,
    /// The test ran and failed (exit code 1): an error completion, a `--validate` mismatch.
    Test,
}

/// ` (after 3 of 12 bytes)` for a message cut short, empty otherwise.
pub(crate) fn cut_short(partial: &Option<(usize, usize)>) -> String {
    partial
        .map(|(got, len)| format!(" (after {got} of {len} bytes)"))
        .unwrap_or_default()
}

/// Out-of-band errors: setup errors (exit code 2), except a peer lost in a step of the running test
/// ([`Step::is_during_test`]), which failed the test (exit code 1).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The client gave up connecting to the server.
    #[error(
        "could not reach the server at {addr} within {secs} s ({reason}); start the server first (the same command without a host argument), or check the host, -p and --connect-timeout"
    )]
    Unreachable {
        /// Host and port tried.
        addr: String,
        /// --connect-timeout.
        secs: u64,
        /// The last error seen.
        reason: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve the server address {addr}: {reason}; check the host argument")]
    Resolve {
        /// What was given.
        addr: String,
        /// Resolver message.
        reason: String,
    },
    /// The server could not listen on its port.
    #[error(
        "cannot listen on port {port}: {source}; is another test running on it? choose another with -p"
    )]
    Listen {
        /// -p.
        port: u16,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A read or write on the channel failed.
    #[error("out-of-band connection with {peer} failed during {during}: {source}")]
    Io {
        /// The peer's address.
        peer: String,
        /// Which step.
        during: Step,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The peer closed the connection.
    #[error(
        "{peer} closed the out-of-band connection during {during}{}; the peer stopped or failed, see its output",
        cut_short(.partial)
    )]
    Closed {
        /// The peer's address.
        peer: String,
        /// Which step.
        during: Step,
        /// Bytes of the message received and expected, when it was cut short.
        partial: Option<(usize, usize)>,
    },
    /// The peer sent nothing for too long.
    #[error(
        "{peer} sent nothing for {timeout:?} during {during}; is the peer stuck or not a roceperf peer?"
    )]
    Timeout {
        /// The peer's address.
        peer: String,
        /// Which step.
        during: Step,
        /// How long we waited.
        timeout: Duration,
    },
    /// The handshake (hello, parameters, connection details) was not over by its deadline.
    #[error(
        "{peer} did not complete the out-of-band handshake within {secs} s: during {during} it sent {got} of {want} bytes; is the peer stuck, or not a roceperf peer? (--connect-timeout sets this limit)"
    )]
    Handshake {
        /// The peer's address.
        peer: String,
        /// Which step.
        during: Step,
        /// Bytes of the awaited message received.
        got: usize,
        /// Bytes of that message (its 4 length bytes while its length is not known yet).
        want: usize,
        /// The deadline, in seconds from the connection.
        secs: u64,
    },
    /// The peer does not speak our protocol.
    #[error(
        "{peer} is not a roceperf peer: {detail}; run a roceperf binary on the other side, or, if the peer is a perftest ib_* tool (it starts with a version string such as \"6.06\"), give this side --oob perftest"
    )]
    Garbage {
        /// The peer's address.
        peer: String,
        /// What was wrong.
        detail: String,
    },
    /// The peer speaks another version of our protocol.
    #[error(
        "{peer} speaks roceperf out-of-band protocol version {theirs}, this side {ours}; run the same roceperf version on both sides"
    )]
    Version {
        /// The peer's address.
        peer: String,
        /// Its version.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// The two sides were started with different test parameters.
    #[error("parameter mismatch: {0}")]
    Mismatch(super::Mismatch),
    /// A `--persist` server was stopped (SIGINT, SIGTERM) while it waited for a client.
    #[error("stopped while waiting for a client")]
    Stopped,
    /// The peer stopped and said why.
    #[error("the peer {peer} stopped: {reason}")]
    PeerAborted {
        /// The peer's address.
        peer: String,
        /// Its error message.
        reason: String,
        /// What the peer's failure was, which decides this side's exit code too.
        failure: Failure,
    },
}
