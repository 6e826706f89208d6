//! Vocabulary shared by every layer above the wire: which test, which transport, which RoCE version.

use serde::{Deserialize, Serialize};

/// The first of `words` whose name is `s`, or an error naming the choices.
fn parse_word<T: Copy>(
    s: &str,
    words: &[T],
    name: impl Fn(&T) -> &'static str,
    what: &'static str,
    choices: &'static str,
) -> Result<T, ParseError> {
    words
        .iter()
        .find(|w| name(w) == s)
        .copied()
        .ok_or_else(|| ParseError {
            given: s.to_string(),
            what,
            choices,
        })
}

/// A vocabulary word: `Display` is its `name()`, and `FromStr` takes back any of its type's `ALL`,
/// naming `what` was expected and the `choices` (a `&'static str`) otherwise.
/// `word!(T in T::EVERY, ...)` parses against another list than `ALL`.
macro_rules! word {
    ($ty:ident, $what:literal, $choices:expr) => {
        word!($ty in $ty::ALL, $what, $choices);
    };
    ($ty:ident in $all:expr, $what:literal, $choices:expr) => {
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::params::ParseError;
            fn from_str(s: &str) -> Result<Self, $crate::params::ParseError> {
                $crate::params::parse_word(s, &$all, $ty::name, $what, $choices)
            }
        }
    };
}

/// A `--flag` value: every one of the type's `ALL`, each with its one-line help in `--help`, spelt
/// as its `name()` (or, `value_enum!(T by letter { ... })`, as another method's word).
macro_rules! value_enum {
    ($ty:ident { $($variant:ident => $help:literal,)+ }) => {
        value_enum!($ty by name { $($variant => $help,)+ });
    };
    ($ty:ident by $spelling:ident { $($variant:ident => $help:literal,)+ }) => {
        impl clap::ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &$ty::ALL
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                let help = match self {
                    $($ty::$variant => $help,)+
                };
                Some(clap::builder::PossibleValue::new(self.$spelling()).help(help))
            }
        }
    };
}

pub(crate) mod argv;
mod cc;
mod connection;
mod io_kind;
pub mod marks;
mod nic_counters;
mod rate;

pub use cc::{CcParamError, CcParamInfo, CcParams, CongestionControl};
pub(crate) use connection::UD_GRH_LEN;
pub use connection::{ConnType, DEFAULT_QKEY};
pub use io_kind::IoKind;
pub use marks::Marks;
pub use nic_counters::{CounterRequest, ETHTOOL_PREFIX, parse_request};
pub(crate) use rate::{RateLimit, RateLimitType, RateUnits, parse_gap, parse_rate};

/// A name that is not one of a vocabulary's words; the message lists the words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given:?} is not a {what}; use {choices}")]
pub struct ParseError {
    /// What was given.
    pub given: String,
    /// What it should have been, e.g. `transport`.
    pub what: &'static str,
    /// The accepted words, e.g. `verbs, soft or tcp`.
    pub choices: &'static str,
}

/// The RDMA verb a test exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// Two-sided SEND / RECV.
    Send,
    /// One-sided RDMA WRITE.
    Write,
    /// One-sided RDMA READ.
    Read,
    /// One-sided 8-byte atomic (FETCH_AND_ADD or CMP_AND_SWAP, see [`AtomicOp`]).
    Atomic,
}

impl Verb {
    /// SEND: every message consumes a receive the responder posted (two-sided), so a receiver
    /// keeps receives posted and counts its completions.
    pub(crate) fn consumes_receive(self) -> bool {
        self == Verb::Send
    }

    /// WRITE, READ and atomics: the initiator reaches the peer's memory by its key, and the peer's
    /// application posts nothing.
    pub(crate) fn is_one_sided(self) -> bool {
        !self.consumes_receive()
    }

    /// READ and atomics: the responder answers with data the requester reads back, so a latency
    /// sample is one whole round trip, the responder only serves, and perftest counts outstanding
    /// reads.
    pub(crate) fn reads_back(self) -> bool {
        matches!(self, Verb::Read | Verb::Atomic)
    }
}

/// Which 8-byte atomic an atomic test runs (perftest's `-A`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum AtomicOp {
    /// Adds a value to the remote word and returns what it held before.
    #[default]
    #[serde(rename = "FETCH_AND_ADD")]
    FetchAndAdd,
    /// Replaces the remote word by `swap` if it equals `compare`; returns what it held before.
    #[serde(rename = "CMP_AND_SWAP")]
    CmpAndSwap,
}

impl AtomicOp {
    /// Both operations.
    pub const ALL: [AtomicOp; 2] = [AtomicOp::FetchAndAdd, AtomicOp::CmpAndSwap];

    /// perftest's spelling, as `-A` takes it and its title prints it: `FETCH_AND_ADD`, `CMP_AND_SWAP`.
    pub fn name(&self) -> &'static str {
        match self {
            AtomicOp::FetchAndAdd => "FETCH_AND_ADD",
            AtomicOp::CmpAndSwap => "CMP_AND_SWAP",
        }
    }
}

word!(
    AtomicOp,
    "atomic operation",
    "FETCH_AND_ADD or CMP_AND_SWAP"
);

// `-A FETCH_AND_ADD|CMP_AND_SWAP`.
value_enum!(AtomicOp {
    FetchAndAdd => "add 1 to the remote word, return its old value",
    CmpAndSwap => "swap the remote word if it holds the compare value, return its old value",
});

/// `--output`: the one figure printed instead of the report (perftest's spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum OutputSelect {
    /// Average bandwidth only.
    Bandwidth,
    /// Average latency only.
    Latency,
    /// Message rate only.
    #[value(name = "message_rate")]
    MessageRate,
}

/// Whether a test measures bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Streaming with many operations in flight: Gb/s, MiB/s, Mpps.
    Bandwidth,
    /// Ping-pong (SEND, WRITE) or request/response (READ): a latency histogram.
    Latency,
}

/// One of the six tests, e.g. `write_bw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TestKind {
    /// The verb.
    pub verb: Verb,
    /// Bandwidth or latency.
    pub metric: Metric,
}

impl TestKind {
    /// `send_bw`.
    pub const SEND_BW: TestKind = TestKind::new(Verb::Send, Metric::Bandwidth);
    /// `write_bw`.
    pub const WRITE_BW: TestKind = TestKind::new(Verb::Write, Metric::Bandwidth);
    /// `read_bw`.
    pub const READ_BW: TestKind = TestKind::new(Verb::Read, Metric::Bandwidth);
    /// `send_lat`.
    pub const SEND_LAT: TestKind = TestKind::new(Verb::Send, Metric::Latency);
    /// `write_lat`.
    pub const WRITE_LAT: TestKind = TestKind::new(Verb::Write, Metric::Latency);
    /// `read_lat`.
    pub const READ_LAT: TestKind = TestKind::new(Verb::Read, Metric::Latency);
    /// `atomic_bw`.
    pub const ATOMIC_BW: TestKind = TestKind::new(Verb::Atomic, Metric::Bandwidth);
    /// `atomic_lat`.
    pub const ATOMIC_LAT: TestKind = TestKind::new(Verb::Atomic, Metric::Latency);

    /// All six tests in the order the binaries are usually listed.
    pub const ALL: [TestKind; 6] = [
        TestKind::SEND_BW,
        TestKind::WRITE_BW,
        TestKind::READ_BW,
        TestKind::SEND_LAT,
        TestKind::WRITE_LAT,
        TestKind::READ_LAT,
    ];

    /// Every test there is a binary for: [`Self::ALL`], then the two atomic tests.
    pub const EVERY: [TestKind; 8] = {
        let [a, b, c, d, e, f] = TestKind::ALL;
        [a, b, c, d, e, f, TestKind::ATOMIC_BW, TestKind::ATOMIC_LAT]
    };

    /// Builds a test kind.
    pub const fn new(verb: Verb, metric: Metric) -> Self {
        TestKind { verb, metric }
    }

    /// The short name used in file names and JSON: `write_bw`, `send_lat`, ...
    pub fn name(&self) -> &'static str {
        match (self.verb, self.metric) {
            (Verb::Send, Metric::Bandwidth) => "send_bw",
            (Verb::Write, Metric::Bandwidth) => "write_bw",
            (Verb::Read, Metric::Bandwidth) => "read_bw",
            (Verb::Send, Metric::Latency) => "send_lat",
            (Verb::Write, Metric::Latency) => "write_lat",
            (Verb::Read, Metric::Latency) => "read_lat",
            (Verb::Atomic, Metric::Bandwidth) => "atomic_bw",
            (Verb::Atomic, Metric::Latency) => "atomic_lat",
        }
    }

    /// Every test's name, listed as a sentence does (`send_bw, write_bw, ... atomic_bw or
    /// atomic_lat`), for the messages that name the choices.
    pub fn names() -> &'static str {
        static NAMES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| {
            let names = TestKind::EVERY.map(|t| t.name());
            let (last, rest) = names.split_last().expect("there are tests");
            format!("{} or {last}", rest.join(", "))
        })
    }

    /// Parses a short name such as `write_bw` or `atomic_lat`.
    pub fn from_name(name: &str) -> Option<Self> {
        TestKind::EVERY.into_iter().find(|t| t.name() == name)
    }

    /// Latency samples are round trips; SEND and WRITE report half of one, READ and atomics a whole
    /// one (as perftest).
    pub fn rtt_factor(&self) -> u32 {
        if self.verb.reads_back() { 1 } else { 2 }
    }

    /// perftest's default message size: 65536 for bandwidth tests, 2 for latency tests, 8 (the only
    /// size) for atomics.
    pub fn default_size(&self) -> u64 {
        match (self.verb, self.metric) {
            (Verb::Atomic, _) => ATOMIC_SIZE,
            (_, Metric::Bandwidth) => 65536,
            (_, Metric::Latency) => 2,
        }
    }

    /// True for `atomic_bw` and `atomic_lat`.
    pub(crate) fn is_atomic(&self) -> bool {
        self.verb == Verb::Atomic
    }

    /// perftest's default iteration count: 5000 for write_bw, 1000 otherwise.
    pub fn default_iters(&self) -> u64 {
        match (self.verb, self.metric) {
            (Verb::Write, Metric::Bandwidth) => 5000,
            _ => 1000,
        }
    }
}

// A test name parses against every test, atomics included, not just `ALL`'s six.
word!(TestKind in TestKind::EVERY, "test", TestKind::names());

/// Bytes every atomic moves: one 64-bit word (perftest fixes `-s` at 8 for its atomic tests).
pub(crate) const ATOMIC_SIZE: u64 = 8;

/// perftest's TCP port of the out-of-band channel, `-p`'s default.
pub(crate) const DEFAULT_OOB_PORT: u16 = 18515;

/// What moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// An RDMA NIC through libibverbs.
    Verbs,
    /// roceperf's own userspace RoCE stack over UDP sockets or AF_PACKET.
    Soft,
    /// The kernel TCP stack: the baseline.
    Tcp,
}

impl TransportKind {
    /// Every transport, in the order they are listed.
    pub const ALL: [TransportKind; 3] = [
        TransportKind::Verbs,
        TransportKind::Soft,
        TransportKind::Tcp,
    ];

    /// The name used on the command line and in reports.
    pub fn name(&self) -> &'static str {
        match self {
            TransportKind::Verbs => "verbs",
            TransportKind::Soft => "soft",
            TransportKind::Tcp => "tcp",
        }
    }
}

word!(TransportKind, "transport", "verbs, soft or tcp");

/// RoCE encapsulation: v1 (Ethertype 0x8915 + GRH) or v2 (IP + UDP 4791).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoceVersion {
    /// RoCE v1: Ethernet + GRH, link-local only.
    V1,
    /// RoCE v2: routable, IPv4 or IPv6 + UDP port 4791.
    V2,
}

impl RoceVersion {
    /// Both versions.
    pub const ALL: [RoceVersion; 2] = [RoceVersion::V1, RoceVersion::V2];

    /// `v1` or `v2`.
    pub fn name(&self) -> &'static str {
        match self {
            RoceVersion::V1 => "v1",
            RoceVersion::V2 => "v2",
        }
    }
}

word!(RoceVersion, "RoCE version", "v1 or v2");

// `--roce v1|v2`.
value_enum!(RoceVersion {
    V1 => "RoCE v1 (Ethertype 0x8915)",
    V2 => "RoCE v2 (UDP 4791)",
});

/// How a RoCE requester repairs lost packets: go-back-N (the IB spec's, what rxe and hardware speak)
/// or selective repeat (IRN-like: only what is missing is resent; roceperf's soft transport only, when
/// both sides negotiate it out of band).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Go-back-N: a NAK or a timeout resends everything from the first PSN missing.
    #[default]
    Gbn,
    /// Selective repeat: the responder keeps what arrives out of order and the requester resends
    /// only the PSNs it reports missing.
    Sr,
    /// Go-back-N with this side's requester timed exactly as against rxe or a NIC (a fixed window,
    /// a resend only after a NAK or the ACK timeout) even when the peer is roceperf: the baseline
    /// that roceperf's own go-back-N and selective repeat are measured against.
    #[serde(rename = "gbn-rxe")]
    GbnRxe,
}

impl Recovery {
    /// Every recovery.
    pub const ALL: [Recovery; 3] = [Recovery::Gbn, Recovery::Sr, Recovery::GbnRxe];

    /// `gbn`, `sr` or `gbn-rxe`.
    pub fn name(&self) -> &'static str {
        match self {
            Recovery::Gbn => "gbn",
            Recovery::Sr => "sr",
            Recovery::GbnRxe => "gbn-rxe",
        }
    }

    /// The recovery two sides agree on: selective repeat only when both ask for it; otherwise
    /// go-back-N, timed as rxe times it when this side asked for that (the requester's timing is
    /// its own affair: the wire is go-back-N's either way).
    pub fn agree(self, peer: Recovery) -> Recovery {
        match (self, peer) {
            (Recovery::Sr, Recovery::Sr) => Recovery::Sr,
            (Recovery::GbnRxe, _) => Recovery::GbnRxe,
            _ => Recovery::Gbn,
        }
    }

    /// What this side tells its peer out of band: `gbn-rxe` is go-back-N on the wire, so a peer
    /// that predates it hears `gbn`.
    pub fn asked(self) -> Recovery {
        match self {
            Recovery::GbnRxe => Recovery::Gbn,
            r => r,
        }
    }
}

word!(Recovery, "recovery", "gbn, sr or gbn-rxe");

// `--recovery gbn|sr|gbn-rxe`.
value_enum!(Recovery {
    Gbn => "go-back-N, as rxe and RDMA NICs speak it (between roceperf peers: a probe after the measured round trip, a window sized to the path)",
    Sr => "selective repeat (soft transport, both sides)",
    GbnRxe => "go-back-N timed as rxe times it even against roceperf: a fixed window, resends after a NAK or the ACK timeout",
});

/// Which end of the test this process is: perftest's rule is that the side with a host argument is the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Listens for the out-of-band connection.
    Server,
    /// Connects to the server named on the command line.
    Client,
}

/// Whether a run is counted in iterations or in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// `-n`: this many measured iterations per size.
    Iterations(u64),
    /// `-D`: run this long; measure only between `margin` and `secs - margin`.
    Duration {
        /// Total seconds.
        secs: u64,
        /// Seconds excluded at each end.
        margin: u64,
    },
}

/// `-D` seconds of a run without end (`--run_infinitely`): longer than any process lives, so the
/// drivers' duration loops never see it end; [`RunMode::duration_secs`] reports none.
const ENDLESS_SECS: u64 = u64::MAX / 4;

impl RunMode {
    /// `--run_infinitely`: a duration-mode run that only a stop ends, measured from its first second.
    pub(crate) const fn endless() -> RunMode {
        RunMode::Duration {
            secs: ENDLESS_SECS,
            margin: 0,
        }
    }

    /// True for a run without end.
    pub(crate) fn is_endless(&self) -> bool {
        *self == RunMode::endless()
    }

    /// Iterations per size in iteration mode, 0 in duration mode (as reports expect).
    pub fn iterations(&self) -> u64 {
        match *self {
            RunMode::Iterations(n) => n,
            RunMode::Duration { .. } => 0,
        }
    }

    /// `-D` seconds, in duration mode (none for a run without end).
    pub(crate) fn duration_secs(&self) -> Option<u64> {
        match *self {
            _ if self.is_endless() => None,
            RunMode::Duration { secs, .. } => Some(secs),
            RunMode::Iterations(_) => None,
        }
    }

    /// `-f` margin seconds, in duration mode (none for a run without end).
    pub(crate) fn margin_secs(&self) -> Option<u64> {
        match *self {
            _ if self.is_endless() => None,
            RunMode::Duration { margin, .. } => Some(margin),
            RunMode::Iterations(_) => None,
        }
    }

    /// True in duration mode.
    pub(crate) fn is_duration(&self) -> bool {
        matches!(self, RunMode::Duration { .. })
    }
}

/// The sizes `-a` sweeps: 2 B .. 8 MiB in powers of two, as perftest.
pub(crate) fn all_sizes() -> Vec<u64> {
    (1..=23).map(|e| 1u64 << e).collect()
}

/// A percentile for `--percentiles`, in (0, 100]: `99.9`. The error says what to type.
pub(crate) fn parse_percentile(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v < 100.0 => Ok(v),
        // No sample ever lies beyond p100, so it could never be printed; the maximum is, as max.
        Ok(100.0) => Err(format!(
            "'{s}': p100 is the maximum, which every latency line prints as max; use numbers in \
             (0, 100), e.g. 50,99,99.9"
        )),
        _ => Err(format!(
            "'{s}' is not a percentile; use numbers in (0, 100), e.g. 50,99,99.9"
        )),
    }
}

/// Parses a message size: bytes, decimal or `0x` hex, optionally with a K or M suffix (`64K`, `1M`),
/// 1 .. 2^31-1 bytes. The error says what to type.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K') | Some('k') => (&t[..t.len() - 1], 1024u64),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let v = parse_int(num).ok_or_else(|| {
        format!("'{s}' is not a size; use bytes, optionally with K or M, e.g. 65536, 64K, 1M")
    })?;
    let v = v
        .checked_mul(mult)
        .filter(|v| (1..=u64::from(u32::MAX / 2)).contains(v))
        .ok_or_else(|| {
            format!(
                "'{s}' is out of range; sizes are 1 .. {} bytes",
                u32::MAX / 2
            )
        })?;
    Ok(v)
}

/// A whole number in decimal or `0x` hex, as perftest's flags accept.
pub(crate) fn parse_int(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_and_name_the_choices() {
        assert_eq!("tcp".parse(), Ok(TransportKind::Tcp));
        assert_eq!("v1".parse(), Ok(RoceVersion::V1));
        assert_eq!(
            "read_lat".parse(),
            Ok(TestKind::new(Verb::Read, Metric::Latency))
        );
        assert_eq!(
            "carrier".parse::<TransportKind>().unwrap_err().to_string(),
            "\"carrier\" is not a transport; use verbs, soft or tcp"
        );
        assert!("v3".parse::<RoceVersion>().is_err());
    }

    #[test]
    fn all_sizes_sweeps_two_bytes_to_eight_mib() {
        let s = all_sizes();
        assert_eq!((s.len(), s[0], s[22]), (23, 2, 8 << 20));
    }

    #[test]
    fn names_round_trip() {
        for t in TestKind::EVERY {
            assert_eq!(TestKind::from_name(t.name()), Some(t));
            assert_eq!(t.name().parse(), Ok(t));
        }
        assert_eq!(TestKind::from_name("atomic"), None);
        assert_eq!("CMP_AND_SWAP".parse(), Ok(AtomicOp::CmpAndSwap));
        assert!("cas".parse::<AtomicOp>().is_err());
        assert_eq!(AtomicOp::default(), AtomicOp::FetchAndAdd);
    }

    #[test]
    fn an_endless_run_is_a_duration_run_with_no_length_to_report() {
        let e = RunMode::endless();
        assert!(e.is_duration() && e.is_endless());
        assert_eq!(
            (e.duration_secs(), e.margin_secs(), e.iterations()),
            (None, None, 0)
        );
        let d = RunMode::Duration { secs: 5, margin: 1 };
        assert!(!d.is_endless());
        assert_eq!(d.duration_secs(), Some(5));
    }

    #[test]
    fn verbs_say_what_they_ask_of_the_peer() {
        let of = |p: fn(Verb) -> bool| [Verb::Send, Verb::Write, Verb::Read, Verb::Atomic].map(p);
        assert_eq!(of(Verb::consumes_receive), [true, false, false, false]);
        assert_eq!(of(Verb::is_one_sided), [false, true, true, true]);
        assert_eq!(of(Verb::reads_back), [false, false, true, true]);
        let factors = TestKind::EVERY.map(|t| (t.name(), t.rtt_factor()));
        assert_eq!(
            factors,
            [
                ("send_bw", 2),
                ("write_bw", 2),
                ("read_bw", 1),
                ("send_lat", 2),
                ("write_lat", 2),
                ("read_lat", 1),
                ("atomic_bw", 1),
                ("atomic_lat", 1)
            ]
        );
    }

    #[test]
    fn an_unknown_test_name_is_told_every_test() {
        assert_eq!(
            "write".parse::<TestKind>().unwrap_err().to_string(),
            "\"write\" is not a test; use send_bw, write_bw, read_bw, send_lat, write_lat, read_lat, atomic_bw or atomic_lat"
        );
    }

    #[test]
    fn perftest_defaults() {
        let wbw = TestKind::new(Verb::Write, Metric::Bandwidth);
        assert_eq!((wbw.default_size(), wbw.default_iters()), (65536, 5000));
        let slat = TestKind::new(Verb::Send, Metric::Latency);
        assert_eq!((slat.default_size(), slat.default_iters()), (2, 1000));
        assert_eq!(TestKind::new(Verb::Read, Metric::Latency).rtt_factor(), 1);
        let alat = TestKind::new(Verb::Atomic, Metric::Latency);
        assert_eq!((alat.default_size(), alat.default_iters()), (8, 1000));
        assert_eq!(alat.rtt_factor(), 1);
        let abw = TestKind::new(Verb::Atomic, Metric::Bandwidth);
        assert_eq!((abw.default_size(), abw.default_iters()), (8, 1000));
    }
}
