//! perftest's out-of-band dialect, so that roceperf pairs with a real `ib_*` peer (`--oob perftest`).
//!
//! perftest (linux-rdma) sets a test up over one TCP connection (port 18515) in strict lock-step: for every
//! exchange the client writes its block and then reads the peer's; the server reads first and then writes.
//! The blocks are a 16-byte version string, page size and cache line (4-byte big-endian ints), a 2-byte
//! ASCII MTU enum, 108-byte ASCII key records (one per queue pair, and the same record again as a
//! barrier), a 40-byte bandwidth report and a final `"done\0"`. Which of them come in which order depends
//! on the test, the role and the options; [`mod@script`] holds that order as a table, derived from perftest's
//! `send_bw.c`, `write_bw.c`, `read_bw.c`, `send_lat.c`, `write_lat.c` and `read_lat.c` and checked
//! against traces recorded between two real perftest 6.06 processes (`tests/data/perftest_oob/`).
//!
//! Layers, smallest first:
//! - [`msg`]: the fixed-size blocks (version, system data, MTU, report, done), parse and emit;
//! - [`key`]: the ASCII key record and its mapping to and from [`crate::transport::ConnInfo`];
//! - [`mod@script`]: the per-test, per-role sequence of steps (the table);
//! - [`channel`]: exact, timed reads and single writes over any [`OobStream`], errors named by step;
//! - [`session`]: walks the script over a channel and stops at each point where the data path must act.
//!
//! **Versions.** We announce [`msg::OUR_VERSION`] (`"6.27"`). perftest decides whether to run the
//! build-dependent parameter negotiation (a raw 312- or 320-byte struct holding `struct ibv_device_attr`,
//! added in 6.28) from the *peer's* version, and skips it when the peer is below 6.28; both sides make
//! that decision symmetrically, so announcing 6.27 means no negotiation happens with any perftest,
//! including one announcing 6.28 or later. We accept peers from 5.70 on (perftest's own minimum).
//! Known to pair: perftest 6.06 (Debian bookworm `perftest 4.5+0.17`; recorded traces) and, from its
//! source, every release up to 6.29 (upstream 26.04.17): their sequences for the six RC tests are the
//! same as 6.06's when the peer announces a version below 6.28. perftest up to 6.16 ends with
//! `"done\0"` and 6.17+ without; both are handled.
//!
//! **UC and UD** (`-c`) take the RC sequences unchanged: perftest's main functions do not branch on
//! the connection type except that with UD `-a` stops at the MTU (`ScriptOptions::sweep_max`). Nothing
//! about it is exchanged: both sides must be given the same `-c`; UD queue pairs use perftest's one
//! Q_Key 0x11111111 (`DEF_QKEY`, never sent), and their key records' RKey and VAddr go unused.
//!
//! **`-R`** (`ScriptOptions::rdma_cm`): the same blocks, but over a CM-connected queue pair (the
//! channel's stream is then the app's `CommStream`), the key records binary ([`binkey`]), two more
//! barriers around the CM connection of the data queue pairs, and no `"done"` (the CM disconnects).
//!
//! **Not covered**, each refused with a message rather than a hang: `-z` (rdma_cm channel with
//! perftest's own QP setup), InfiniBand without `-x` (59-byte keys), `--data_validation` (76/125-byte keys),
//! `--report-per-port` (four more report doubles), `--write_with_imm`, `--run_infinitely`, XRC/DC/SRD,
//! peers below 5.70. perftest 6.06 never sends its `-s` except in the BW report, so a size mismatch is
//! caught only where that report is meaningful (we are the server of write/read_bw, or `-b`); elsewhere
//! it shows on the data path (remote access or length errors) or not at all (a smaller read).

pub mod binkey;
pub mod channel;
pub mod key;
pub mod msg;
pub mod script;
pub mod session;

pub(crate) use channel::OobStream;
pub(crate) use channel::{PerftestChannel, Timeouts};
pub use channel::{accept, connect};
pub(crate) use key::KeyRecord;
pub(crate) use msg::{BwReport, SysData};
pub(crate) use script::ScriptOptions;
pub use script::script;
pub(crate) use session::{Action, Session, SessionConfig};

/// Errors of the perftest dialect; each names the step and says what to check.
#[derive(Debug, thiserror::Error)]
pub enum PerftestError {
    /// The peer closed the TCP connection where we expected a message.
    #[error(
        "perftest peer closed the connection during the {step} (after {got} of {want} bytes): it probably \
         rejected our parameters or failed; check that both sides run the same test with the same -s, -a, -b, -q and -x, and read the peer's error output"
    )]
    PeerClosed {
        /// The step we were in.
        step: String,
        /// Bytes of the message received before the close.
        got: usize,
        /// Size of the expected message.
        want: usize,
    },
    /// The peer sent nothing for too long.
    #[error(
        "perftest peer sent nothing for {secs} s during the {step}: is it still running, and is it the same test (ib_write_bw pairs with roce_write_bw, ...)?"
    )]
    Timeout {
        /// The step we were in.
        step: String,
        /// How long we waited.
        secs: u64,
    },
    /// The setup (everything before the data path connects) was not over by its deadline.
    #[error(
        "perftest peer did not complete the setup within {secs} s: during the {step} it sent {got} of {want} bytes; is it an ib_* tool running the same test? (--connect-timeout sets this limit)"
    )]
    SetupDeadline {
        /// The step we were in.
        step: String,
        /// Bytes of the awaited message received.
        got: usize,
        /// Size of that message.
        want: usize,
        /// The deadline, in seconds from the connection.
        secs: u64,
    },
    /// The peer sent part of a message and stopped: its message for this step has another size.
    #[error(
        "perftest peer sent {got} bytes where the {step} needs {want} and then stopped: it is at a different step, so it runs another test or other options (-a, -b, -q, -x, --report-per-port); run the same test with the same options on both sides"
    )]
    ShortMessage {
        /// The step we were in.
        step: String,
        /// Bytes received.
        got: usize,
        /// Size of the expected message.
        want: usize,
    },
    /// A message arrived but does not parse.
    #[error("perftest peer sent a malformed {step}: {field}: {detail} (received {shown})")]
    Malformed {
        /// The step we were in.
        step: String,
        /// Which field failed.
        field: &'static str,
        /// What was wrong.
        detail: String,
        /// The received bytes, escaped for printing.
        shown: String,
    },
    /// The peer announced a version perftest itself refuses to pair with.
    #[error(
        "perftest peer announces version {0}, older than 5.70, which perftest itself refuses; upgrade perftest on the peer"
    )]
    PeerTooOld(String),
    /// The first 16 bytes were not a perftest version string.
    #[error(
        "the peer did not start with a perftest version string (received {0}): is it really an ib_* tool? A roceperf peer needs --oob perftest too, or neither side"
    )]
    NotPerftest(String),
    /// The peer started with roceperf's own hello: it speaks the other dialect.
    #[error(
        "the peer speaks roceperf's own out-of-band dialect (its first bytes are roceperf's hello, not a perftest version string): give --oob perftest to both sides or to neither"
    )]
    RoceperfPeer,
    /// A roceperf peer in this dialect runs another `-n` or `-D` (said after its version's NUL).
    #[error("the peer is roceperf too, and this side runs {ours}, the peer {theirs}: {hint}")]
    RunLength {
        /// Ours, as its flag: `-n 1000`.
        ours: String,
        /// The peer's: `-D 2`.
        theirs: String,
        /// What to do.
        hint: &'static str,
    },
    /// The peer's report disagrees with our parameters.
    #[error(
        "the perftest peer ran {field} {theirs} but we ran {field} {ours}: give both sides the same {field}"
    )]
    ParameterMismatch {
        /// The flag that differs, e.g. `-s`.
        field: &'static str,
        /// Our value.
        ours: u64,
        /// The peer's value.
        theirs: u64,
    },
    /// One GID is IPv4-mapped and the other is not (perftest refuses this too).
    #[error(
        "GID families differ: ours is {ours}, the peer's is {theirs}; perftest refuses this too: pick an IPv4-mapped GID on both sides (-x) or IPv6 on both"
    )]
    GidFamilyMismatch {
        /// Our GID, printed.
        ours: String,
        /// The peer's GID, printed.
        theirs: String,
    },
    /// The options cannot be expressed in perftest's dialect.
    #[error("--oob perftest: {0}")]
    Unsupported(String),
    /// The session was driven out of order (a bug in the caller).
    #[error("perftest session misuse: {0}")]
    Misuse(String),
    /// Another OS error on the connection.
    #[error("perftest connection, {step}: {source}")]
    Io {
        /// The step we were in.
        step: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Result type of the perftest dialect.
pub(crate) type Result<T> = std::result::Result<T, PerftestError>;

/// Bytes escaped for an error message: printable ASCII as is, the rest as `\xNN`, at most 120 bytes.
pub(crate) fn show_bytes(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes.iter().take(120) {
        match b {
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(b as char),
            0 => s.push_str("\\0"),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > 120 {
        s.push_str("...");
    }
    s.push('"');
    s
}
