//! perftest-compatible command-line flags (clap derive) turned into validated options.
//!
//! Flags that mean the same thing as in perftest keep perftest's spelling (`-s 64K`, `-a`, `-n`, `-D`,
//! `--report_gbits`, ...). A flag that does not apply to the chosen test or transport is an error that
//! says so, never silently ignored.

use crate::gate::{GateArgs, GateOutputArgs};
use crate::params::{Metric, RoceVersion, Role, TestKind, TransportKind};
use clap::{Parser, ValueEnum};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The transports this build can run; the others are a clear "not built yet" usage error.
pub const BUILT_TRANSPORTS: &[TransportKind] = &[
    TransportKind::Verbs,
    TransportKind::Soft,
    TransportKind::Tcp,
];

/// The sizes `-a` sweeps: 2 B .. 8 MiB in powers of two, as perftest.
pub fn all_sizes() -> Vec<u64> {
    crate::params::all_sizes()
}

/// Default percentiles reported below the table.
pub const DEFAULT_PERCENTILES: [f64; 4] = [90.0, 99.0, 99.9, 99.99];

const AFTER_HELP: &str = "\
Examples:
  Soft RoCE v2 between two processes on this host (the second one moves to 127.0.0.2 by itself):
    server$ roce_write_bw -d lo
    client$ roce_write_bw -d lo 127.0.0.1
  An RDMA NIC:
    server$ roce_write_bw -d mlx5_0
    client$ roce_write_bw -d mlx5_0 192.0.2.10
  The TCP baseline:
    server$ roce_write_bw --transport tcp
    client$ roce_write_bw --transport tcp 127.0.0.1

Soft transport: -d names a network interface (lo, eth0, a veth). RoCE v2 over a UDP socket on port 4791 \
(--io udp, no privileges) or AF_PACKET (--io packet, RoCE v1 and v2, needs CAP_NET_RAW). Two endpoints on \
one host need distinct addresses: 127.0.0.x on lo is automatic, otherwise use two network namespaces \
(scripts/netns.sh up). ROCEPERF_IMPAIR=loss=1%,duplicate=1%,reorder=5% impairs what soft sends.

Exit status: 0 ok, 1 the test failed (error completion, --validate mismatch, a gate missed), 2 usage or \
setup error.";

/// The raw command line, as clap parses it. Validation into [`Options`] happens in [`Options::from_args`].
#[derive(Debug, Clone, Parser)]
#[command(
    version,
    about = "roceperf: RoCE and TCP performance test (perftest-compatible flags)",
    long_about = "roceperf: RoCE and TCP performance test.\n\nStarted without a host argument the program is the server; with one it is the client and connects to that server, exactly like perftest. Give both sides the same options.",
    after_help = AFTER_HELP
)]
pub struct Args {
    /// Server host name or address; given, this process is the client.
    pub host: Option<String>,

    /// RDMA device (mlx5_0, rxe0) or network interface (eth0) (verbs, soft only).
    #[arg(short = 'd', long = "ib-dev")]
    pub device: Option<String>,

    /// HCA port number, from 1 (verbs only).
    #[arg(short = 'i', long = "ib-port", value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: Option<u8>,

    /// TCP port of the out-of-band channel (SYMMETRIC).
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,

    /// GID index 0..64 (verbs, soft only).
    #[arg(short = 'x', long = "gid-index", value_parser = clap::value_parser!(u8).range(0..=64))]
    pub gid_index: Option<u8>,

    /// Message size in bytes, with an optional K or M suffix (SYMMETRIC) [default: 65536 BW, 2 LAT].
    #[arg(short = 's', long = "size", value_parser = parse_size)]
    pub size: Option<u64>,

    /// Run every size from 2 B to 8 MiB (SYMMETRIC).
    #[arg(short = 'a', long = "all")]
    pub all: bool,

    /// Iterations per size, at least 5 (SYMMETRIC) [default: 5000 write_bw, 1000 others].
    #[arg(short = 'n', long = "iters", value_parser = parse_iters)]
    pub iters: Option<u64>,

    /// Run for this many seconds instead of -n iterations (SYMMETRIC).
    #[arg(short = 'D', long = "duration", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration: Option<u64>,

    /// Seconds excluded at the start and end of a -D run [default: duration/4].
    #[arg(short = 'f', long = "margin")]
    pub margin: Option<u64>,

    /// Queue pairs (TCP: connections), 1..16384 (SYMMETRIC) (bandwidth tests only).
    #[arg(short = 'q', long = "qp", value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub qps: Option<u32>,

    /// Operations in flight per queue pair, 1..15000 (bandwidth tests only) [default: 128].
    #[arg(short = 't', long = "tx-depth", value_parser = clap::value_parser!(u32).range(1..=15000))]
    pub tx_depth: Option<u32>,

    /// One signaled completion every N operations, 1..1024 (bandwidth tests only) [default: 100, 1 above 8 KiB].
    #[arg(short = 'Q', long = "cq-mod", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub cq_mod: Option<u32>,

    /// Path MTU 256..4096 (verbs, soft only).
    #[arg(short = 'm', long = "mtu", value_parser = parse_mtu)]
    pub mtu: Option<u32>,

    /// Maximum inline size 0..1024 (verbs; soft accepts it as a no-op and says so).
    #[arg(short = 'I', long = "inline_size", value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub inline_size: Option<u32>,

    /// Accepted for perftest compatibility: roceperf never reads the CPU frequency, so there is no warning to silence.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,

    /// Both sides send; each measures what it sends (SYMMETRIC) (bandwidth tests only).
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,

    /// Report bandwidth in Gb/s (10^9 bits) instead of MiB/s (SYMMETRIC).
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,

    /// Print only one number: average bandwidth, message rate, or average latency.
    #[arg(long = "output", value_enum)]
    pub output: Option<OutputArg>,

    /// Add a CPU_Util[%] column (duration mode only, as in perftest).
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,

    /// What moves the bytes: auto picks verbs for an RDMA device and soft for a network interface.
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,

    /// RoCE version (verbs, soft only).
    #[arg(long, value_enum)]
    pub roce: Option<RoceArg>,

    /// Core the datapath thread is pinned to [default: the last core].
    #[arg(long)]
    pub cpu: Option<usize>,

    /// Iterations run before measuring and excluded from the results (SYMMETRIC) [default: 100].
    #[arg(long)]
    pub warmup: Option<u64>,

    /// Latency percentiles reported below the table, comma-separated [default: 90,99,99.9,99.99].
    #[arg(long, value_delimiter = ',', value_parser = parse_percentile)]
    pub percentiles: Option<Vec<f64>>,

    /// Append one CSV row per message size to FILE (header written once).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write the parameters, per-size results and histograms as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write both CSV and JSON into DIR with timestamped names.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,

    /// Seconds a client keeps retrying a server that is not up yet.
    #[arg(long = "connect-timeout", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub connect_timeout: u64,

    /// More detail about each setup step, and the soft transport's counters at the end (repeat for more).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// I/O backend of the soft transport [default: udp for RoCE v2, packet for v1] (soft only).
    #[arg(long, value_enum)]
    pub io: Option<IoArg>,

    /// Use IPv6 addresses and GIDs for RoCE v2 (soft, verbs only).
    #[arg(long)]
    pub ipv6: bool,

    /// Send one UDP datagram per RoCE packet and receive without UDP_GRO, instead of UDP GSO
    /// super-datagrams (soft --io udp only). Slower; the packets on the wire are the same, but a
    /// capture taken on this host (lo, veth) then shows each packet rather than 64 KiB batches.
    #[arg(long = "no-gso")]
    pub no_gso: bool,

    /// Local address of the soft endpoint [default: the interface's first address; on lo the next free 127.0.0.x] (soft only).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,

    /// Local ACK timeout exponent: 4.096 µs × 2^N before a retransmission [default: 14, 67 ms] (verbs, soft only).
    #[arg(short = 'u', long = "qp-timeout", value_parser = clap::value_parser!(u8).range(1..=31))]
    pub qp_timeout: Option<u8>,

    /// Retransmissions without progress before a request fails with "retry counter exceeded" [default: 7] (verbs, soft only).
    #[arg(long = "retry_count", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub retry_count: Option<u8>,

    /// Check every byte received against the sender's pattern; a mismatch fails the test (SYMMETRIC).
    #[arg(long)]
    pub validate: bool,

    /// Out-of-band dialect: roceperf's own, or perftest's (to pair with a real ib_* peer).
    #[arg(long, value_enum, default_value_t = OobArg::Roceperf, help = oob_help())]
    pub oob: OobArg,

    /// Thresholds checked after the run.
    #[command(flatten)]
    pub gate: GateArgs,

    /// Where gate verdicts go.
    #[command(flatten)]
    pub gate_output: GateOutputArgs,
}

fn oob_help() -> String {
    format!(
        "Out-of-band dialect: roceperf's own (parameter check, results exchange), or perftest's, to pair with a real ib_* peer (soft, verbs only); --oob perftest {}",
        crate::oob::perftest::HELP_VERSIONS
    )
}

/// `--oob` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OobArg {
    /// roceperf's JSON-lines dialect: both sides check every parameter and swap results.
    Roceperf,
    /// perftest's binary dialect, so a real ib_* server or client is the peer.
    Perftest,
}

/// `--io` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// A UDP socket on port 4791 (RoCE v2 only, unprivileged).
    Udp,
    /// AF_PACKET raw frames (RoCE v1 and v2, needs CAP_NET_RAW).
    Packet,
}

/// `--transport` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// verbs for an RDMA device, soft for a network interface.
    Auto,
    /// An RDMA NIC through libibverbs.
    Verbs,
    /// roceperf's userspace RoCE stack.
    Soft,
    /// The kernel TCP stack (the baseline).
    Tcp,
}

/// `--roce` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoceArg {
    /// RoCE v1 (Ethertype 0x8915).
    V1,
    /// RoCE v2 (UDP 4791).
    V2,
}

/// `--output` values (perftest's spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    /// Average bandwidth only.
    Bandwidth,
    /// Average latency only.
    Latency,
    /// Message rate only.
    #[value(name = "message_rate")]
    MessageRate,
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

/// Validation errors; the message names the flag and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A flag that does not apply to this test or transport was given.
    #[error("{flag} does not apply to {what}: {why}; drop it")]
    NotApplicable {
        /// The flag as typed.
        flag: &'static str,
        /// The test or transport it does not apply to.
        what: String,
        /// Why.
        why: &'static str,
    },
    /// Two flags that cannot be combined.
    #[error("{a} and {b} cannot be used together: {why}")]
    Conflict {
        /// First flag.
        a: &'static str,
        /// Second flag.
        b: &'static str,
        /// Why, and what to do.
        why: &'static str,
    },
    /// A value out of range or inconsistent with another.
    #[error("invalid value for {flag}: {why}")]
    Invalid {
        /// The flag.
        flag: &'static str,
        /// What is wrong and what is allowed.
        why: String,
    },
    /// The chosen transport exists in the design but not in this build yet.
    #[error(
        "--transport {transport} is not built yet in this roceperf{reason}; run the TCP baseline with --transport tcp"
    )]
    NotBuilt {
        /// The transport chosen.
        transport: TransportKind,
        /// Why auto chose it, when it did.
        reason: String,
    },
}

/// Validated options: everything the run needs, with defaults filled in.
#[derive(Debug, Clone)]
pub struct Options {
    /// The test this binary runs.
    pub test: TestKind,
    /// Server (no host) or client.
    pub role: Role,
    /// The server's host, on the client.
    pub host: Option<String>,
    /// Out-of-band TCP port.
    pub port: u16,
    /// The transport.
    pub transport: TransportKind,
    /// Why this transport (printed with the results).
    pub transport_reason: String,
    /// `-d`.
    pub device: Option<String>,
    /// `--roce`.
    pub roce: Option<RoceVersion>,
    /// `-m`.
    pub mtu: Option<u32>,
    /// Message sizes to run, in order.
    pub sizes: Vec<u64>,
    /// `-a` was given.
    pub all_sizes: bool,
    /// Iterations or duration.
    pub mode: RunMode,
    /// Queue pairs.
    pub qps: u32,
    /// Operations in flight per queue pair (1 for latency tests).
    pub tx_depth: u32,
    /// `-Q` when given; otherwise chosen per size by [`Options::cq_mod_for`].
    pub cq_mod: Option<u32>,
    /// `-b`.
    pub bidirectional: bool,
    /// `--report_gbits`.
    pub report_gbits: bool,
    /// `--output`.
    pub output: Option<OutputArg>,
    /// `--cpu_util`.
    pub cpu_util: bool,
    /// `--cpu`.
    pub cpu: Option<usize>,
    /// Warm-up iterations.
    pub warmup: u64,
    /// Percentiles to report.
    pub percentiles: Vec<f64>,
    /// `--csv`.
    pub csv: Option<PathBuf>,
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--results`.
    pub results: Option<PathBuf>,
    /// `--connect-timeout`.
    pub connect_timeout: Duration,
    /// `-v` count.
    pub verbose: u8,
    /// `-i`.
    pub ib_port: Option<u8>,
    /// `-x`.
    pub gid_index: Option<u8>,
    /// `-I`.
    pub inline_size: Option<u32>,
    /// `--io` (soft), with its default filled in for the soft transport.
    pub io: Option<IoArg>,
    /// `--ipv6`.
    pub ipv6: bool,
    /// `--no-gso`.
    pub no_gso: bool,
    /// `--bind`.
    pub bind: Option<IpAddr>,
    /// `--validate`.
    pub validate: bool,
    /// `--oob`.
    pub oob: OobArg,
    /// `-u`.
    pub qp_timeout: Option<u8>,
    /// `--retry_count`.
    pub retry_count: Option<u8>,
    /// Gate thresholds.
    pub gate: GateArgs,
    /// Gate reports.
    pub gate_output: GateOutputArgs,
}

/// Parses `-s` values: decimal or 0x hex, with an optional K or M suffix (×1024, ×1024²).
pub fn parse_size(s: &str) -> Result<u64, String> {
    crate::params::parse_size(s)
}

fn parse_int(s: &str) -> Option<u64> {
    crate::params::parse_int(s)
}

fn parse_iters(s: &str) -> Result<u64, String> {
    match parse_int(s.trim()) {
        Some(v) if (5..=1u64 << 32).contains(&v) => Ok(v),
        Some(_) => Err(format!(
            "'{s}' is out of range; iterations are 5 .. 4294967296"
        )),
        None => Err(format!("'{s}' is not a number of iterations")),
    }
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(v) if [256, 512, 1024, 2048, 4096].contains(&v) => Ok(v),
        _ => Err(format!(
            "'{s}' is not an MTU; use 256, 512, 1024, 2048 or 4096"
        )),
    }
}

fn parse_percentile(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a percentile; use numbers in (0, 100], e.g. 50,99,99.9"
        )),
    }
}

/// `; interfaces here: lo, eth0` for error messages (empty when they cannot be listed).
fn interface_list() -> String {
    match crate::transport::soft::netdev::NetDev::list() {
        Ok(l) if !l.is_empty() => format!(
            "; interfaces here: {}",
            l.iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => String::new(),
    }
}

/// Reason why auto mode picks a transport for a device, or the transport itself when explicit.
fn resolve_transport(args: &Args) -> (TransportKind, String) {
    match args.transport {
        TransportArg::Tcp => (TransportKind::Tcp, "chosen with --transport tcp".into()),
        TransportArg::Verbs => (TransportKind::Verbs, "chosen with --transport verbs".into()),
        TransportArg::Soft => (TransportKind::Soft, "chosen with --transport soft".into()),
        TransportArg::Auto => match &args.device {
            Some(d)
                if std::path::Path::new("/sys/class/infiniband")
                    .join(d)
                    .exists() =>
            {
                (
                    TransportKind::Verbs,
                    format!("--transport auto chose verbs because -d {d} is an RDMA device"),
                )
            }
            Some(d) => (
                TransportKind::Soft,
                format!("--transport auto chose soft because -d {d} is not an RDMA device"),
            ),
            None => (
                TransportKind::Soft,
                "--transport auto chose soft because no -d was given".into(),
            ),
        },
    }
}

impl Options {
    /// Parses the process command line for `test`; clap errors (and --help/--version) exit as clap does (2/0).
    pub fn parse(test: TestKind) -> Result<Options, Error> {
        Options::from_args(test, Args::parse())
    }

    /// Parses an explicit argument list (the first item is the program name).
    pub fn try_parse_from<I, T>(
        test: TestKind,
        args: I,
    ) -> Result<Result<Options, Error>, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Ok(Options::from_args(test, Args::try_parse_from(args)?))
    }

    /// Checks the combination of flags and fills in defaults.
    pub fn from_args(test: TestKind, a: Args) -> Result<Options, Error> {
        let (transport, transport_reason) = resolve_transport(&a);
        let bw = test.metric == Metric::Bandwidth;
        let na = |flag: &'static str, what: String, why: &'static str| {
            Err(Error::NotApplicable { flag, what, why })
        };
        if !BUILT_TRANSPORTS.contains(&transport) {
            let reason = if a.transport == TransportArg::Auto {
                format!(" ({transport_reason})")
            } else {
                String::new()
            };
            return Err(Error::NotBuilt { transport, reason });
        }
        if transport == TransportKind::Tcp {
            let tcp = || "--transport tcp".to_string();
            if a.device.is_some() {
                return na(
                    "-d",
                    tcp(),
                    "the TCP baseline uses the kernel's routing to the host, not a device",
                );
            }
            if a.ib_port.is_some() {
                return na("-i", tcp(), "the TCP baseline has no HCA port");
            }
            if a.gid_index.is_some() {
                return na("-x", tcp(), "the TCP baseline has no GID table");
            }
            if a.roce.is_some() {
                return na("--roce", tcp(), "the TCP baseline carries no RoCE packets");
            }
            if a.mtu.is_some() {
                return na("-m", tcp(), "TCP chooses its own segment size");
            }
            if a.inline_size.is_some() {
                return na("-I", tcp(), "TCP has no inline sends");
            }
            if a.qp_timeout.is_some() {
                return na("-u", tcp(), "TCP retransmits on its own timers");
            }
            if a.retry_count.is_some() {
                return na("--retry_count", tcp(), "TCP retransmits on its own timers");
            }
            if a.ipv6 {
                return na(
                    "--ipv6",
                    tcp(),
                    "the TCP baseline follows the host address given",
                );
            }
        }
        if transport != TransportKind::Soft {
            let what = || format!("--transport {transport}");
            if a.io.is_some() {
                return na("--io", what(), "it picks the soft transport's I/O backend");
            }
            if a.bind.is_some() {
                return na(
                    "--bind",
                    what(),
                    "it picks the soft transport's local address",
                );
            }
            if a.no_gso {
                return na(
                    "--no-gso",
                    what(),
                    "it tunes the soft transport's UDP socket",
                );
            }
        }
        if a.oob == OobArg::Perftest {
            if transport == TransportKind::Tcp {
                return na(
                    "--oob perftest",
                    "--transport tcp".into(),
                    "perftest has no TCP baseline to pair with",
                );
            }
            if a.validate {
                return Err(Error::Conflict {
                    a: "--oob perftest",
                    b: "--validate",
                    why: "a perftest peer neither writes nor checks roceperf's pattern (perftest's own --data_validation is not spoken either)",
                });
            }
        }
        let roce = a.roce.map(|r| match r {
            RoceArg::V1 => RoceVersion::V1,
            RoceArg::V2 => RoceVersion::V2,
        });
        let io = if transport == TransportKind::Soft {
            if a.ib_port.is_some() {
                return na(
                    "-i",
                    "--transport soft".into(),
                    "a network interface has no HCA port",
                );
            }
            if a.device.is_none() {
                return Err(Error::Invalid {
                    flag: "-d",
                    why: format!(
                        "the soft transport needs a network interface: -d lo for two processes on this host, -d eth0 (or a veth) across hosts{}",
                        interface_list()
                    ),
                });
            }
            if roce == Some(RoceVersion::V1) && a.io == Some(IoArg::Udp) {
                return Err(Error::Conflict {
                    a: "--roce v1",
                    b: "--io udp",
                    why: "RoCE v1 (Ethertype 0x8915) cannot travel over a UDP socket; use --io packet (needs CAP_NET_RAW) or --roce v2",
                });
            }
            if roce == Some(RoceVersion::V1) && a.ipv6 {
                return Err(Error::Conflict {
                    a: "--roce v1",
                    b: "--ipv6",
                    why: "RoCE v1 carries no IP header; drop --ipv6 or use --roce v2",
                });
            }
            let io = a.io.unwrap_or(match roce {
                Some(RoceVersion::V1) => IoArg::Packet,
                _ => IoArg::Udp,
            });
            if a.no_gso && io == IoArg::Packet {
                return na(
                    "--no-gso",
                    "--io packet".into(),
                    "AF_PACKET always sends and receives single frames",
                );
            }
            Some(io)
        } else {
            None
        };
        if !bw {
            let lat = || format!("{test} (a latency test)");
            if a.tx_depth.is_some() {
                return na("-t", lat(), "latency tests keep one operation in flight");
            }
            if a.cq_mod.is_some() {
                return na("-Q", lat(), "latency tests signal every operation");
            }
            if a.bidirectional {
                return na("-b", lat(), "a ping-pong is already both ways");
            }
            if a.qps.is_some_and(|q| q != 1) {
                return na(
                    "-q",
                    lat(),
                    "latency tests use one queue pair, as in perftest",
                );
            }
            if a.report_gbits {
                return na("--report_gbits", lat(), "latency tests report microseconds");
            }
        }
        match a.output {
            Some(OutputArg::Latency) if bw => {
                return na(
                    "--output=latency",
                    format!("{test} (a bandwidth test)"),
                    "it reports no latency",
                );
            }
            Some(OutputArg::Bandwidth | OutputArg::MessageRate) if !bw => {
                return na(
                    "--output=bandwidth/message_rate",
                    format!("{test} (a latency test)"),
                    "it reports latency",
                );
            }
            _ => {}
        }
        if a.bidirectional
            && test.verb != crate::params::Verb::Write
            && test.verb != crate::params::Verb::Send
        {
            return na(
                "-b",
                test.to_string(),
                "bidirectional READ is not a perftest mode either",
            );
        }
        if a.all && a.size.is_some() {
            return Err(Error::Conflict {
                a: "-a",
                b: "-s",
                why: "both set the message size; -a runs every size from 2 B to 8 MiB, -s one size",
            });
        }
        if a.duration.is_some() && a.iters.is_some() {
            return Err(Error::Conflict {
                a: "-D",
                b: "-n",
                why: "a run is counted either in seconds or in iterations; choose one",
            });
        }
        if a.duration.is_some() && a.all {
            return Err(Error::Conflict {
                a: "-D",
                b: "-a",
                why: "a timed run measures one size; use -s, or -a with -n",
            });
        }
        if a.margin.is_some() && a.duration.is_none() {
            return Err(Error::Invalid {
                flag: "-f",
                why: "the margin only applies to a -D run; give -D too".into(),
            });
        }
        if a.cpu_util && a.duration.is_none() {
            return Err(Error::Invalid {
                flag: "--cpu_util",
                why: "CPU utilisation is measured in duration mode only (as in perftest); give -D too".into(),
            });
        }
        let mode = match a.duration {
            Some(secs) => {
                let margin = a.margin.unwrap_or(secs / 4);
                if secs <= 2 * margin {
                    return Err(Error::Invalid {
                        flag: "-D",
                        why: format!(
                            "the duration ({secs} s) must be greater than twice the margin ({margin} s, -f); lengthen -D or shorten -f"
                        ),
                    });
                }
                RunMode::Duration { secs, margin }
            }
            None => RunMode::Iterations(a.iters.unwrap_or_else(|| test.default_iters())),
        };
        let sizes = if a.all {
            all_sizes()
        } else {
            vec![a.size.unwrap_or_else(|| test.default_size())]
        };
        let tx_depth = if bw {
            let t = a.tx_depth.unwrap_or(128);
            // perftest caps the depth at the iteration count.
            match mode {
                RunMode::Iterations(n) => t.min(n.min(u64::from(u32::MAX)) as u32),
                RunMode::Duration { .. } => t,
            }
        } else {
            1
        };
        if let Some(q) = a.cq_mod
            && q > tx_depth
        {
            return Err(Error::Invalid {
                flag: "-Q",
                why: format!(
                    "one completion every {q} operations needs at least {q} in flight (-t is {tx_depth})"
                ),
            });
        }
        let mut percentiles = a
            .percentiles
            .unwrap_or_else(|| DEFAULT_PERCENTILES.to_vec());
        percentiles.sort_by(|x, y| x.total_cmp(y));
        percentiles.dedup();
        if let Some(dir) = &a.results
            && dir.exists()
            && !dir.is_dir()
        {
            return Err(Error::Invalid {
                flag: "--results",
                why: format!("{} exists and is not a directory", dir.display()),
            });
        }
        Ok(Options {
            test,
            role: if a.host.is_some() {
                Role::Client
            } else {
                Role::Server
            },
            host: a.host,
            port: a.port,
            transport,
            transport_reason,
            device: a.device,
            roce: match transport {
                // Soft always runs some RoCE version; saying which lets the peers compare it.
                TransportKind::Soft => Some(roce.unwrap_or(RoceVersion::V2)),
                _ => roce,
            },
            mtu: a.mtu,
            sizes,
            all_sizes: a.all,
            mode,
            qps: a.qps.unwrap_or(1),
            tx_depth,
            cq_mod: a.cq_mod,
            bidirectional: a.bidirectional,
            report_gbits: a.report_gbits,
            output: a.output,
            cpu_util: a.cpu_util,
            cpu: a.cpu,
            warmup: a.warmup.unwrap_or(100),
            percentiles,
            csv: a.csv,
            json: a.json,
            results: a.results,
            connect_timeout: Duration::from_secs(a.connect_timeout),
            verbose: a.verbose,
            ib_port: a.ib_port,
            gid_index: a.gid_index,
            inline_size: a.inline_size,
            io,
            ipv6: a.ipv6,
            no_gso: a.no_gso,
            bind: a.bind,
            validate: a.validate,
            oob: a.oob,
            qp_timeout: a.qp_timeout,
            retry_count: a.retry_count,
            gate: a.gate,
            gate_output: a.gate_output,
        })
    }

    /// Completions are signaled every this many operations at `size`: -Q, or perftest's rule
    /// (100, but 1 above 8 KiB), never more than the operations in flight.
    pub fn cq_mod_for(&self, size: u64) -> u32 {
        let q = self.cq_mod.unwrap_or(if size > 8192 { 1 } else { 100 });
        q.min(self.tx_depth).max(1)
    }

    /// Iterations per size in iteration mode, 0 in duration mode (as reports expect).
    pub fn iterations(&self) -> u64 {
        match self.mode {
            RunMode::Iterations(n) => n,
            RunMode::Duration { .. } => 0,
        }
    }

    /// The largest message size of the run.
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Verb;

    const WBW: TestKind = TestKind::new(Verb::Write, Metric::Bandwidth);
    const SLAT: TestKind = TestKind::new(Verb::Send, Metric::Latency);

    fn parse(test: TestKind, args: &[&str]) -> Result<Options, Error> {
        let mut v = vec!["roce_test", "--transport", "tcp"];
        v.extend_from_slice(args);
        Options::try_parse_from(test, v).expect("clap accepts the syntax")
    }

    fn clap_err(args: &[&str]) -> clap::Error {
        let mut v = vec!["roce_test"];
        v.extend_from_slice(args);
        Options::try_parse_from(WBW, v).expect_err("clap rejects")
    }

    #[test]
    fn sizes_take_k_and_m_suffixes_and_hex() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert_eq!(parse_size("0x100"), Ok(256));
        assert_eq!(parse_size("2"), Ok(2));
        assert!(parse_size("0").unwrap_err().contains("out of range"));
        assert!(parse_size("4096M").unwrap_err().contains("out of range"));
        assert!(parse_size("big").unwrap_err().contains("not a size"));
    }

    #[test]
    fn defaults_follow_perftest() {
        let o = parse(WBW, &[]).unwrap();
        assert_eq!(
            (o.role, o.port, o.sizes.clone(), o.mode),
            (Role::Server, 18515, vec![65536], RunMode::Iterations(5000))
        );
        assert_eq!(
            (o.tx_depth, o.cq_mod_for(65536), o.cq_mod_for(64)),
            (128, 1, 100)
        );
        let l = parse(SLAT, &["10.0.0.1"]).unwrap();
        assert_eq!(
            (l.role, l.sizes.clone(), l.tx_depth, l.host.as_deref()),
            (Role::Client, vec![2], 1, Some("10.0.0.1"))
        );
        assert_eq!(l.percentiles, DEFAULT_PERCENTILES.to_vec());
    }

    #[test]
    fn all_sweeps_two_bytes_to_eight_mib() {
        let o = parse(WBW, &["-a", "-n", "5"]).unwrap();
        assert_eq!(o.sizes.first(), Some(&2));
        assert_eq!(o.sizes.last(), Some(&(8 << 20)));
        assert_eq!(o.sizes.len(), 23);
        assert_eq!(o.tx_depth, 5, "depth capped at iterations");
    }

    #[test]
    fn duration_applies_the_margin_rule() {
        assert_eq!(
            parse(WBW, &["-D", "5"]).unwrap().mode,
            RunMode::Duration { secs: 5, margin: 1 }
        );
        assert_eq!(
            parse(WBW, &["-D", "1"]).unwrap().mode,
            RunMode::Duration { secs: 1, margin: 0 }
        );
        let e = parse(WBW, &["-D", "4", "-f", "2"]).unwrap_err();
        assert!(
            e.to_string().contains("greater than twice the margin"),
            "{e}"
        );
        assert!(matches!(
            parse(WBW, &["-D", "4", "-n", "10"]),
            Err(Error::Conflict {
                a: "-D",
                b: "-n",
                ..
            })
        ));
        assert!(matches!(
            parse(WBW, &["-f", "1"]),
            Err(Error::Invalid { flag: "-f", .. })
        ));
    }

    #[test]
    fn flags_that_do_not_apply_are_errors_naming_them() {
        for (flag, args) in [
            ("-x", vec!["-x", "3"]),
            ("-d", vec!["-d", "eth0"]),
            ("--roce", vec!["--roce", "v2"]),
            ("-m", vec!["-m", "1024"]),
            ("-I", vec!["-I", "64"]),
            ("-i", vec!["-i", "1"]),
        ] {
            let e = parse(WBW, &args).unwrap_err();
            assert!(
                matches!(e, Error::NotApplicable { flag: f, .. } if f == flag),
                "{flag}: {e}"
            );
            assert!(e.to_string().contains("--transport tcp"), "{e}");
        }
        let e = parse(SLAT, &["-t", "16"]).unwrap_err();
        assert!(
            e.to_string().starts_with("-t does not apply to send_lat"),
            "{e}"
        );
        assert!(parse(SLAT, &["--output", "bandwidth"]).is_err());
        assert!(parse(WBW, &["--output", "latency"]).is_err());
        assert!(parse(WBW, &["--cpu_util"]).is_err());
    }

    fn parse_raw(test: TestKind, args: &[&str]) -> Result<Options, Error> {
        let mut v = vec!["roce_test"];
        v.extend_from_slice(args);
        Options::try_parse_from(test, v).expect("clap accepts the syntax")
    }

    #[test]
    fn soft_defaults_to_v2_over_udp_and_v1_over_packet() {
        let o = parse_raw(WBW, &["-d", "lo"]).unwrap();
        assert_eq!(o.transport, TransportKind::Soft);
        assert_eq!((o.roce, o.io), (Some(RoceVersion::V2), Some(IoArg::Udp)));
        assert!(o.transport_reason.contains("-d lo is not an RDMA device"));
        let o = parse_raw(WBW, &["-d", "lo", "--roce", "v1"]).unwrap();
        assert_eq!((o.roce, o.io), (Some(RoceVersion::V1), Some(IoArg::Packet)));
        let o = parse_raw(SLAT, &["--transport", "soft", "-d", "lo", "-I", "64"]).unwrap();
        assert_eq!(o.inline_size, Some(64), "-I is accepted on soft (a no-op)");
    }

    #[test]
    fn soft_flag_combinations_that_cannot_work_are_named() {
        let e = parse_raw(WBW, &["-d", "lo", "--roce", "v1", "--io", "udp"]).unwrap_err();
        assert!(e.to_string().contains("--io packet"), "{e}");
        let e = parse_raw(WBW, &["--transport", "soft"]).unwrap_err();
        assert!(
            matches!(e, Error::Invalid { flag: "-d", .. }) && e.to_string().contains("-d lo"),
            "{e}"
        );
        let e = parse_raw(WBW, &["-d", "lo", "-i", "1"]).unwrap_err();
        assert!(matches!(e, Error::NotApplicable { flag: "-i", .. }), "{e}");
        let e = parse(WBW, &["--io", "udp"]).unwrap_err();
        assert!(
            matches!(e, Error::NotApplicable { flag: "--io", .. }),
            "{e}"
        );
        let e = parse(WBW, &["--bind", "127.0.0.1"]).unwrap_err();
        assert!(
            matches!(e, Error::NotApplicable { flag: "--bind", .. }),
            "{e}"
        );
        let e = parse(WBW, &["--no-gso"]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NotApplicable {
                    flag: "--no-gso",
                    ..
                }
            ),
            "{e}"
        );
        let e = parse_raw(WBW, &["-d", "lo", "--roce", "v1", "--no-gso"]).unwrap_err();
        assert!(e.to_string().contains("AF_PACKET"), "{e}");
        let o = parse_raw(WBW, &["-d", "lo", "--no-gso"]).unwrap();
        assert!(o.no_gso && o.io == Some(IoArg::Udp));
    }

    #[test]
    fn verbs_is_chosen_explicitly_and_keeps_verbs_flags() {
        let o = parse_raw(
            WBW,
            &[
                "--transport",
                "verbs",
                "-d",
                "mlx5_0",
                "-I",
                "128",
                "-x",
                "3",
            ],
        )
        .unwrap();
        assert_eq!(o.transport, TransportKind::Verbs);
        assert_eq!((o.inline_size, o.gid_index), (Some(128), Some(3)));
        assert_eq!(o.io, None);
    }

    #[test]
    fn clap_rejects_bad_values_and_repeats() {
        for args in [
            vec!["-s", "0"],
            vec!["-n", "4"],
            vec!["-p", "70000"],
            vec!["-t", "0"],
            vec!["-s", "1", "-s", "2"],
            vec!["--transport", "carrier-pigeon"],
            vec!["--percentiles", "99,101"],
            vec!["a", "b"],
        ] {
            let e = clap_err(&args);
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn percentiles_are_sorted_and_deduplicated() {
        let o = parse(SLAT, &["--percentiles", "99.9,50,99,50"]).unwrap();
        assert_eq!(o.percentiles, vec![50.0, 99.0, 99.9]);
    }
}
