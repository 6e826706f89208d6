//! The command line as clap parses it: every flag, its spelling, its help and its value type.
//!
//! Spellings are perftest's where perftest has the flag; nothing here decides whether a combination
//! makes sense.

use super::values;
use crate::gate::{GateArgs, GateOutputArgs};
use crate::params::{Recovery, RoceVersion, TransportKind};
use crate::transport::ImpairConfig;
use clap::{Parser, ValueEnum};
use std::net::IpAddr;
use std::path::PathBuf;

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
(scripts/netns.sh up). --impair loss=1%,dup=1%,reorder=5% (or ROCEPERF_IMPAIR) impairs what soft sends, \
--recovery sr repairs losses by selective repeat.

Exit status: 0 ok, 1 the test failed (error completion, --validate mismatch, a gate missed), 2 usage or \
setup error.";

/// The raw command line, as clap parses it. Validation into [`Options`] happens in [`Options::from_args`].
///
/// [`Options`]: super::Options
/// [`Options::from_args`]: super::Options::from_args
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

    /// TCP port of the out-of-band channel, 1..65535 (SYMMETRIC).
    #[arg(short = 'p', long = "port", default_value_t = 18515, value_parser = values::parse_port)]
    pub port: u16,

    /// GID index 0..64 (verbs, soft only).
    #[arg(short = 'x', long = "gid-index", value_parser = clap::value_parser!(u8).range(0..=64))]
    pub gid_index: Option<u8>,

    /// Message size in bytes, with an optional K or M suffix (SYMMETRIC) [default: 65536 BW, 2 LAT].
    #[arg(short = 's', long = "size", value_parser = values::parse_size)]
    pub size: Option<u64>,

    /// Run every size from 2 B to 8 MiB (SYMMETRIC).
    #[arg(short = 'a', long = "all")]
    pub all: bool,

    /// Iterations per size, at least 5 (SYMMETRIC) [default: 5000 write_bw, 1000 others].
    #[arg(short = 'n', long = "iters", value_parser = values::parse_iters)]
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
    #[arg(short = 'm', long = "mtu", value_parser = values::parse_mtu)]
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

    /// Report bandwidth in Gb/s (10^9 bits) instead of MiB/s.
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
    pub roce: Option<RoceVersion>,

    /// Core the datapath thread is pinned to [default: the last core].
    #[arg(long)]
    pub cpu: Option<usize>,

    /// Iterations run before measuring and excluded from the results (SYMMETRIC) [default: 100].
    #[arg(long)]
    pub warmup: Option<u64>,

    /// Latency percentiles reported below the table, comma-separated [default: 90,99,99.9,99.99].
    #[arg(long, value_delimiter = ',', value_parser = values::parse_percentile)]
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

    /// Seconds a client keeps retrying a server that is not up yet, and either side gives the whole
    /// out-of-band handshake once connected.
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

    /// Send one UDP datagram (or AF_PACKET frame) per RoCE packet and receive without UDP_GRO,
    /// instead of GSO super-datagrams (super-frames with --io packet; soft RoCE v2 only). Slower;
    /// the packets on the wire are the same, but a capture taken on this host (lo, veth) then
    /// shows each packet rather than 64 KiB batches.
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

    /// Impair the soft transport's own packets, per RoCE packet and seeded, e.g.
    /// loss=0.5%,burst=8,dup=0.1%,reorder=1%,delay=50us,corrupt=0.01% (rx: before a key impairs what
    /// arrives instead of what leaves); ROCEPERF_IMPAIR is read when it is absent (soft only).
    #[arg(long, value_name = "SPEC", value_parser = values::parse_impair)]
    pub impair: Option<ImpairConfig>,

    /// Seed of the impairment (overrides seed= of --impair or ROCEPERF_IMPAIR) (soft only).
    #[arg(long = "impair-seed", value_name = "N")]
    pub impair_seed: Option<u64>,

    /// Loss recovery of the RC engine: gbn (go-back-N, what rxe and NICs speak) or sr (selective
    /// repeat; used only when the peer asks for it too, else gbn) [default: gbn] (soft only).
    #[arg(long, value_enum)]
    pub recovery: Option<Recovery>,

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

/// Which perftest versions pair with `--oob perftest` (see `oob::perftest` for why).
const PERFTEST_VERSIONS: &str = "pairs with perftest 5.70 and later (tested against 6.06, Debian bookworm; \
     6.28/6.29 skip their parameter negotiation because we announce 6.27); RC only, default TCP port 18515, \
     no -R/-z, no --data_validation";

fn oob_help() -> String {
    format!(
        "Out-of-band dialect: roceperf's own (parameter check, results exchange), or perftest's, to pair with a real ib_* peer (soft, verbs only); --oob perftest {PERFTEST_VERSIONS}"
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

impl TransportArg {
    /// The transport named, or `None` for `auto`.
    pub fn kind(self) -> Option<TransportKind> {
        match self {
            TransportArg::Auto => None,
            TransportArg::Verbs => Some(TransportKind::Verbs),
            TransportArg::Soft => Some(TransportKind::Soft),
            TransportArg::Tcp => Some(TransportKind::Tcp),
        }
    }
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
