//! The command line as clap parses it: every flag, its spelling, its help and its value type.
//!
//! Spellings are perftest's where perftest has the flag; nothing here decides whether a combination
//! makes sense.

use super::values;
use crate::gate::{GateArgs, GateOutputArgs};
use crate::params::CounterRequest;
use crate::params::{
    AtomicOp, CongestionControl, ConnType, DEFAULT_OOB_PORT, IoKind, OutputSelect, RateLimitType,
    RateUnits, Recovery, RoceVersion, TestKind, TransportKind,
};
use crate::report::export::{ReportingFiles, RunFiles};
use crate::transport::ImpairConfig;
use clap::{ArgGroup, CommandFactory, Parser, ValueEnum};
use std::net::IpAddr;

/// The examples of `--help`, `{bin}` standing for the binary's name.
const LONG_EXAMPLES: &str = "\
Examples (start the server first, then the client with the server's address):
  Soft RoCE v2 between two processes on this host (the second one moves to 127.0.0.2 by itself):
    server$ {bin} -d lo
    client$ {bin} -d lo 127.0.0.1
  An RDMA NIC:
    server$ {bin} -d mlx5_0
    client$ {bin} -d mlx5_0 192.0.2.10
  The TCP baseline:
    server$ {bin} --transport tcp
    client$ {bin} --transport tcp 127.0.0.1
  Every size from 2 B to 8 MiB, results as JSON and CSV under results/:
    client$ {bin} -d eth0 -a --results results 192.0.2.10

Soft transport: -d names a network interface (lo, eth0, a veth). RoCE v2 over a UDP socket on port \
4791 (--io udp, no privileges) or AF_PACKET (--io packet, RoCE v1 and v2, needs CAP_NET_RAW). Two \
endpoints on one host need distinct addresses: 127.0.0.x on lo is automatic; for AF_PACKET, run each \
side in its own network namespace joined by a veth pair (ip netns add, ip link add ... type veth), \
or let roce_compare --local make one. --impair loss=1%,dup=1%,reorder=5% (or ROCEPERF_IMPAIR) \
impairs what soft sends, --recovery sr repairs losses by selective repeat.

Exit status: 0 ok, 1 the test failed (error completion, --validate mismatch, a gate missed), 2 usage \
or setup error.";

/// The examples of `-h`: the one pair of commands most runs are.
const SHORT_EXAMPLES: &str = "\
Examples:
  server$ {bin} -d eth0                 client$ {bin} -d eth0 192.0.2.10
  server$ {bin} --transport tcp         client$ {bin} --transport tcp 192.0.2.10
--help lists every flag, grouped, with more examples. Exit: 0 ok, 1 test failed, 2 usage/setup.";

/// `--help`'s headings, in the order they are listed, and the flags under each (clap ids). The
/// gates keep their own headings (`gate::GateArgs`).
const HEADINGS: [(&str, &[&str]); 5] = [
    (
        "Test",
        &[
            "size",
            "all",
            "atomic_type",
            "iters",
            "duration",
            "margin",
            "qps",
            "tx_depth",
            "cq_mod",
            "connection",
            "bidirectional",
            "warmup",
            "validate",
            "latency_gap",
            "run_infinitely",
            "report_interval",
            "rate_limit",
            "rate_units",
            "rate_limit_type",
            "burst_size",
        ],
    ),
    (
        "Transport",
        &[
            "device",
            "transport",
            "roce",
            "cpu",
            "events",
            "ib_port",
            "gid_index",
            "mtu",
            "inline_size",
            "ipv6",
            "qp_timeout",
            "retry_count",
            "tclass",
            "sl",
            "flow_label",
            "rdma_cm",
            "port",
            "persist",
            "connect_timeout",
            "tcp_congestion",
        ],
    ),
    (
        "Soft transport",
        &[
            "io",
            "no_gso",
            "bind",
            "impair",
            "impair_seed",
            "recovery",
            "cc",
            "cc_param",
        ],
    ),
    (
        "Output",
        &[
            "json",
            "csv",
            "results",
            "percentiles",
            "verbose",
            "report_gbits",
            "output",
            "cpu_util",
            "report_counters",
            "report_both",
            "qp_series",
            "json_stream",
            "metrics",
        ],
    ),
    (
        "Perftest compatibility",
        &["oob", "out_json", "out_json_file", "cpu_freq"],
    ),
];

/// The flags `-h` shows (clap ids): what most runs set. `--help` shows every flag that applies.
const COMMON: &[&str] = &[
    "host",
    "device",
    "transport",
    "size",
    "iters",
    "duration",
    "qps",
    "tx_depth",
    "percentiles",
    "json",
    "results",
];

/// Flags only bandwidth tests take, hidden from the latency binaries.
const BANDWIDTH_ONLY: &[&str] = &[
    "qps",
    "tx_depth",
    "cq_mod",
    "bidirectional",
    "rate_limit",
    "rate_units",
    "rate_limit_type",
    "burst_size",
    "run_infinitely",
    "report_interval",
    "json_stream",
    "report_both",
    "qp_series",
    "report_gbits",
    "min_bw",
    "min_msg_rate",
];

/// Flags only latency tests take, hidden from the bandwidth binaries.
const LATENCY_ONLY: &[&str] = &[
    "percentiles",
    "latency_gap",
    "max_p50",
    "max_p99",
    "max_p999",
    "max_max",
];

/// What a test measures, for the first line of its help: `RDMA WRITE bandwidth`.
fn what_it_measures(test: TestKind) -> String {
    let verb = match test.verb {
        crate::params::Verb::Send => "SEND/RECV",
        crate::params::Verb::Write => "RDMA WRITE",
        crate::params::Verb::Read => "RDMA READ",
        crate::params::Verb::Atomic => "8-byte RDMA atomic",
    };
    let metric = match test.metric {
        crate::params::Metric::Bandwidth => "bandwidth and message rate",
        crate::params::Metric::Latency => "latency",
    };
    format!("{verb} {metric}")
}

/// Arg group of the flags naming this host's own resources (device, HCA port, GID index, core, local
/// address, verbosity): the two sides of a run may give them differently, and `roce_fabric` lets them
/// differ from rank to rank.
pub(crate) const PER_HOST: &str = "per_host";

/// Arg group of the flags that choose or tune the RoCE device, its queue pairs and the soft
/// transport's sockets: the TCP baseline refuses them (`--oob` past its default), so `roce_fabric
/// --compare` leaves them out of its TCP leg.
pub(crate) const ROCE_SETUP: &str = "roce_setup";

/// The raw command line, as clap parses it. Validation into [`Options`] happens in [`Options::from_args`].
///
/// [`Options`]: super::Options
/// [`Options::from_args`]: super::Options::from_args
#[derive(Debug, Clone, Parser)]
#[command(
    version,
    about = "roceperf: RoCE and TCP performance test (perftest-compatible flags)",
    group(ArgGroup::new(PER_HOST).multiple(true)),
    group(ArgGroup::new(ROCE_SETUP).multiple(true))
)]
pub(crate) struct Args {
    /// Server host name or address; given, this process is the client.
    pub host: Option<String>,

    /// RDMA device (mlx5_0, rxe0) or network interface (eth0) (verbs, soft only).
    #[arg(short = 'd', long = "ib-dev", group = PER_HOST, group = ROCE_SETUP)]
    pub device: Option<String>,

    /// HCA port number, from 1 (verbs only).
    #[arg(short = 'i', long = "ib-port", value_parser = clap::value_parser!(u8).range(1..), group = PER_HOST, group = ROCE_SETUP)]
    pub ib_port: Option<u8>,

    /// TCP port of the out-of-band channel, 1..65535 (SYMMETRIC).
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_OOB_PORT, value_parser = values::parse_port)]
    pub port: u16,

    /// Server: stay up and serve clients one after another until SIGINT/SIGTERM, as `iperf3 -s`
    /// (without it a server serves one run, as perftest's). A client that comes while another is
    /// served waits for it, and is told so. Run N's files get `-runN` before their extension
    /// (--json s.json: s-run1.json, s-run2.json, ...; --results DIR: DIR/run1/, ...).
    /// Example: `roce_write_bw -d eth0 --persist --json bw.json`.
    #[arg(long = "persist")]
    pub persist: bool,

    /// GID index 0..64 (verbs, soft only).
    #[arg(short = 'x', long = "gid-index", value_parser = clap::value_parser!(u8).range(0..=64), group = PER_HOST, group = ROCE_SETUP)]
    pub gid_index: Option<u8>,

    /// Message size in bytes, with an optional K or M suffix (SYMMETRIC) [default: 65536 BW, 2 LAT].
    #[arg(short = 's', long = "size", value_parser = values::parse_size)]
    pub size: Option<u64>,

    /// Run every size from 2 B to 8 MiB (SYMMETRIC).
    #[arg(short = 'a', long = "all")]
    pub all: bool,

    /// The 8-byte atomic of roce_atomic_bw and roce_atomic_lat (SYMMETRIC) [default: FETCH_AND_ADD].
    #[arg(
        short = 'A',
        long = "atomic_type",
        value_enum,
        value_name = "TYPE",
        long_help = ATOMIC_TYPE_HELP
    )]
    pub atomic_type: Option<AtomicOp>,

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
    #[arg(short = 'm', long = "mtu", value_parser = values::parse_mtu, group = ROCE_SETUP)]
    pub mtu: Option<u32>,

    /// Connection type (SYMMETRIC) (verbs, soft only): RC for every test; UC for send and write tests
    /// (no ACKs, no retransmission: lost messages are counted, not repaired); UD for send tests, with
    /// -s at most one MTU [default: RC].
    #[arg(short = 'c', long = "connection", value_enum, value_name = "TYPE")]
    pub connection: Option<ConnType>,

    /// Maximum inline size 0..1024 (verbs; soft accepts it as a no-op and says so).
    #[arg(short = 'I', long = "inline_size", value_parser = clap::value_parser!(u32).range(0..=1024), group = ROCE_SETUP)]
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
    pub output: Option<OutputSelect>,

    /// Add a CPU_Util[%] column (duration mode only, as in perftest).
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,

    /// Sleep on CQ events (default poll): when a poll finds nothing to do, the side sleeps in
    /// poll(2) on its socket until a packet comes or its next timer is due (at most 1 ms, to check
    /// for the end of the test), instead of spinning on its core. It frees the core for other
    /// processes at the cost of a wake-up on every message (latency rises by the scheduler's
    /// wake-up time). Local to this side, as in perftest (soft, tcp only).
    #[arg(short = 'e', long = "events", group = PER_HOST)]
    pub events: bool,

    /// What moves the bytes: auto picks verbs for an RDMA device and soft for a network interface.
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,

    /// RoCE version (verbs, soft only).
    #[arg(long, value_enum, group = ROCE_SETUP)]
    pub roce: Option<RoceVersion>,

    /// Core the datapath thread is pinned to [default: the last core].
    #[arg(long, group = PER_HOST)]
    pub cpu: Option<usize>,

    /// Iterations run before measuring and excluded from the results, at most 2^32 (SYMMETRIC) [default: 100].
    #[arg(long, value_parser = values::parse_warmup)]
    pub warmup: Option<u64>,

    /// Latency percentiles reported below the table, comma-separated [default: 90,99,99.9,99.99]. One
    /// is printed only when 10 samples lie beyond it (p99 needs 1,000 samples, p99.9 10,000, p99.99
    /// 100,000), else shown as n/a with what it needs.
    #[arg(long, value_delimiter = ',', value_parser = values::parse_percentile)]
    pub percentiles: Option<Vec<f64>>,

    /// `--csv`, `--json`, `--results` and the formats every tool writes.
    #[command(flatten)]
    pub files: RunFiles,

    /// Seconds a client keeps retrying a server that is not up yet, and either side gives the whole
    /// out-of-band handshake once connected.
    #[arg(long = "connect-timeout", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub connect_timeout: u64,

    /// More detail about each setup step, and the soft transport's counters at the end (repeat for more).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, group = PER_HOST)]
    pub verbose: u8,

    /// I/O backend of the soft transport [default: udp for RoCE v2, packet for v1] (soft only).
    #[arg(long, value_enum, group = ROCE_SETUP)]
    pub io: Option<IoKind>,

    /// Use IPv6 addresses and GIDs for RoCE v2 (soft, verbs only).
    #[arg(long, group = ROCE_SETUP)]
    pub ipv6: bool,

    /// Send one UDP datagram (or AF_PACKET frame) per RoCE packet and receive without UDP_GRO,
    /// instead of GSO super-datagrams (super-frames with --io packet; soft RoCE v2 only). Slower;
    /// the packets on the wire are the same, but a capture taken on this host (lo, veth) then
    /// shows each packet rather than 64 KiB batches. With --io packet, RoCE v2 then moves exactly
    /// as RoCE v1 does (single frames, the same receive ring): `--roce v2 --io packet --no-gso`
    /// against `--roce v1` compares the two versions on one host path.
    #[arg(long = "no-gso", group = ROCE_SETUP)]
    pub no_gso: bool,

    /// Local address of the soft endpoint [default: the interface's first address; on lo the next free 127.0.0.x] (soft only).
    #[arg(long, value_name = "ADDR", group = PER_HOST, group = ROCE_SETUP)]
    pub bind: Option<IpAddr>,

    /// Local ACK timeout exponent: 4.096 µs × 2^N before a retransmission (UC/UD latency tests: before
    /// an iteration without a reply counts as lost) [default: 14, 67 ms] (verbs, soft only).
    #[arg(short = 'u', long = "qp-timeout", value_parser = clap::value_parser!(u8).range(1..=31), group = ROCE_SETUP)]
    pub qp_timeout: Option<u8>,

    /// Retransmissions without progress before a request fails with "retry counter exceeded" [default: 7] (verbs, soft only).
    #[arg(long = "retry_count", value_parser = clap::value_parser!(u8).range(0..=7), group = ROCE_SETUP)]
    pub retry_count: Option<u8>,

    /// Traffic class 0..255: the IPv4 TOS / IPv6 traffic class of RoCE v2 and TCP, the GRH traffic
    /// class of RoCE v1 (SYMMETRIC) [default: 0].
    #[arg(long = "tclass", value_name = "N", long_help = TCLASS_HELP)]
    pub tclass: Option<u8>,

    /// Service level 0..15: the address handle's SL (verbs), the 802.1Q priority sl & 7 of the frames
    /// soft writes (--io packet), SO_PRIORITY (soft over UDP, tcp) (SYMMETRIC) [default: 0].
    #[arg(short = 'S', long = "sl", value_name = "N", value_parser = clap::value_parser!(u8).range(0..=15), long_help = SL_HELP)]
    pub sl: Option<u8>,

    /// IPv6 / GRH flow labels 0..1048575, comma-separated, assigned to the queue pairs round-robin
    /// (verbs, soft only) [default: 0].
    #[arg(long = "flow_label", value_name = "FL0,FL1,...", value_delimiter = ',', value_parser = values::parse_flow_label, long_help = FLOW_LABEL_HELP, group = ROCE_SETUP)]
    pub flow_label: Option<Vec<u32>>,

    /// Check every byte received against the sender's pattern; a mismatch fails the test (SYMMETRIC).
    #[arg(long)]
    pub validate: bool,

    /// The NIC's counters to read before and after each size and print as deltas under its row, as
    /// perftest's -W (verbs only) [default: the congestion set].
    #[arg(
        short = 'W',
        long = "report-counters",
        value_name = "LIST",
        value_parser = crate::params::parse_request,
        long_help = REPORT_COUNTERS_HELP,
        group = PER_HOST,
        group = ROCE_SETUP
    )]
    pub report_counters: Option<CounterRequest>,

    /// Impair the soft transport's own packets, per RoCE packet and seeded, e.g.
    /// loss=0.5%,burst=8,dup=0.1%,reorder=1%,delay=50us,corrupt=0.01% (rx: before a key impairs what
    /// arrives instead of what leaves); ROCEPERF_IMPAIR is read when it is absent (soft only).
    #[arg(long, value_name = "SPEC", value_parser = values::parse_impair)]
    pub impair: Option<ImpairConfig>,

    /// Seed of the impairment (overrides seed= of --impair or ROCEPERF_IMPAIR) (soft only).
    #[arg(long = "impair-seed", value_name = "N")]
    pub impair_seed: Option<u64>,

    /// Loss recovery of the RC engine: gbn (go-back-N, what rxe and NICs speak), sr (selective
    /// repeat; used only when the peer asks for it too, else gbn) or gbn-rxe (go-back-N timed as rxe
    /// times it, even against roceperf: the baseline) [default: gbn] (soft only).
    #[arg(long, value_enum)]
    pub recovery: Option<Recovery>,

    /// Congestion control of the soft transport, checked against the peer: dcqcn (what a ConnectX
    /// runs out of the box: CE-marked packets are answered with CNPs, a CNP cuts the sender's rate,
    /// timers and bytes sent bring it back) or none [default: dcqcn] (soft only: on verbs the NIC's
    /// firmware does congestion control, set in /sys/kernel/debug/mlx5/<pci>/cc_params/; TCP has
    /// its own, net.ipv4.tcp_congestion_control).
    #[arg(long, value_enum)]
    pub cc: Option<CongestionControl>,

    /// TCP's congestion control on the data connections, by the kernel's name (TCP_CONGESTION per
    /// socket, iperf3's -C): e.g. cubic, reno, bbr; the namespace's default
    /// (net.ipv4.tcp_congestion_control) when absent. One outside tcp_allowed_congestion_control
    /// needs root (CAP_NET_ADMIN); one not loaded needs its module (modprobe tcp_NAME) (tcp only).
    #[arg(long = "tcp-congestion", value_name = "ALGO", value_parser = values::parse_tcp_congestion)]
    pub tcp_congestion: Option<String>,

    /// A DCQCN parameter by ConnectX's name, e.g. rp_ai_rate=10 or np_min_time_between_cnps=50
    /// (repeatable; docs/congestion.md lists them with units and defaults) (soft only).
    #[arg(long = "cc-param", value_name = "NAME=VALUE", value_parser = values::parse_cc_param)]
    pub cc_param: Vec<String>,

    /// Connect the queue pairs through the CM, as rdma_cm does: REQ / REP / RTU on QP1, the peer named
    /// by IP address and -p as the port (SYMMETRIC) (verbs, soft only; soft needs RoCE v2). With
    /// --oob perftest the out-of-band messages ride a CM-connected queue pair too, as ib_*_bw -R's do.
    /// -c UD: the server's QPN and Q_Key come from a SIDR_REQ / SIDR_REP exchange in rdma_cm's UDP
    /// port space (verbs: through librdmacm's); with --oob perftest the message queue pair stays RC,
    /// as ib_send_* -R -c UD's; -c UC is refused, as perftest refuses it.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,

    /// Out-of-band dialect: roceperf's own, or perftest's (to pair with a real ib_* peer).
    #[arg(long, value_enum, default_value_t = OobArg::Roceperf, help = oob_help(), group = ROCE_SETUP)]
    pub oob: OobArg,

    /// Pace what this side sends to at most RATE in --rate_units (bandwidth tests only).
    #[arg(long = "rate_limit", value_name = "RATE", value_parser = crate::params::parse_rate)]
    pub rate_limit: Option<f64>,

    /// Units of --rate_limit: M = MiB/s, g = Gb/s, p = messages/s, as perftest [default: g].
    #[arg(long = "rate_units", value_enum, value_name = "UNITS")]
    pub rate_units: Option<RateUnits>,

    /// Who paces: SW, roceperf's own pacer (the only one any transport here offers; perftest's
    /// default HW falls back to it on Ethernet) [default: SW].
    #[arg(long = "rate_limit_type", value_enum, value_name = "TYPE")]
    pub rate_limit_type: Option<RateLimitType>,

    /// Messages sent back to back each pacing period, with --rate_limit [default: -t].
    #[arg(long = "burst_size", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub burst_size: Option<u32>,

    /// Wait between latency iterations: microseconds as perftest (10), or 500ns, 10us, 1ms; left out
    /// of the samples (latency tests only) (SYMMETRIC).
    #[arg(long = "latency_gap", value_name = "GAP", value_parser = crate::params::parse_gap)]
    pub latency_gap: Option<std::time::Duration>,

    /// Run until SIGINT/SIGTERM (or the peer stops), a report line every --report-interval (or -D)
    /// seconds, then the summary of the whole run (bandwidth tests only) (SYMMETRIC).
    #[arg(long = "run_infinitely")]
    pub run_infinitely: bool,

    /// Seconds between the report lines of --run_infinitely, e.g. 1 or 0.5 [default: -D, else 1].
    #[arg(long = "report-interval", value_name = "SECS", value_parser = parse_interval)]
    pub report_interval: Option<std::time::Duration>,

    /// `--json-stream`, `--out_json` and `--out_json_file`.
    #[command(flatten)]
    pub reporting_files: ReportingFiles,

    /// With -b: this side's and the peer's figures separately too, on the console and in --out_json.
    #[arg(long = "report-both")]
    pub report_both: bool,

    /// Record each queue pair's completed bytes every MS milliseconds of the measured run, into the
    /// JSON result's `qp_series` (cumulative; bandwidth tests only; local: changes no traffic).
    #[arg(long = "qp-series", value_name = "MS", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub qp_series: Option<u32>,

    /// Thresholds checked after the run.
    #[command(flatten)]
    pub gate: GateArgs,

    /// Where gate verdicts go.
    #[command(flatten)]
    pub gate_output: GateOutputArgs,
}

/// `--tclass`'s long help: what it sets on each transport and what its ECN bits do.
const TCLASS_HELP: &str = "\
Traffic class 0..255 (SYMMETRIC) [default: 0]: the upper six bits are the DSCP a switch classifies by \
(RoCE's usual lossless class is DSCP 26: --tclass 104), the lower two the ECN field. \
verbs: the GRH traffic class of the address handle (RoCE v2: the IP TOS / traffic class). \
soft, RoCE v2: the IPv4 TOS or IPv6 traffic class of every packet (IP_TOS / IPV6_TCLASS on the UDP \
socket, the header bytes on AF_PACKET). Data leaves ECN-capable, ECT(0), so a switch (or iptables -j ECN \
on one host) can mark it CE instead of dropping it and the receiver counts it \
(np_ecn_marked_roce_packets); ECN bits given here are kept as given: --tclass 1 sends ECT(1), \
--tclass 3 sends CE on every packet. CNPs leave with their own class, DSCP 48 and ECT(0) (TOS 0xC2), \
as ConnectX sends them. \
soft, RoCE v1: the GRH traffic class, as given (a GRH has no ECN field: no ECT is added, as ConnectX \
marks no v1 traffic). \
tcp: IP_TOS / IPV6_TCLASS on the data sockets; the kernel keeps TCP's own ECN bits, so only the DSCP \
applies.";

/// `-S`'s long help: what a service level becomes on each transport.
const SL_HELP: &str = "\
Service level 0..15 (SYMMETRIC) [default: 0]. \
verbs: the address handle's SL, which the NIC maps to an 802.1Q priority (on ConnectX, priority = SL & 7). \
soft over AF_PACKET (--io packet): a non-zero -S puts an 802.1Q priority tag (TPID 0x8100, PCP sl & 7, \
VLAN 0) on every frame; -S 0 or no -S sends untagged frames, as before. CNPs carry priority 6 (np_cnp_prio). \
soft over UDP and tcp: SO_PRIORITY sl on the socket: the kernel's frames carry a tag only when they \
leave through a VLAN device whose egress map maps that priority (ip link ... egress-qos-map), and a \
qdisc may classify by it.";

/// `--flow_label`'s long help.
const FLOW_LABEL_HELP: &str = "\
IPv6 / GRH flow labels 0..1048575, comma-separated; queue pair i takes label i mod n, as perftest \
assigns them (verbs, soft only) [default: 0]. \
verbs: the address handle's GRH flow label (RoCE v2: rxe and ConnectX derive the UDP source port \
from it). soft over AF_PACKET (--io packet): RoCE v1's GRH flow label and RoCE v2/IPv6's, and \
RoCE v2's UDP source port follows it as rxe's does (IPv4 has no flow label: only the port). soft \
over UDP: not applied, and the header says so: the socket's kernel writes the IPv6 header with its \
own label (net.ipv6.auto_flowlabels) and the source port is the socket's. tcp: refused.";

/// What `roce_atomic_bw --help` and `roce_atomic_lat --help` say before the flags.
const ATOMIC_ABOUT: &str = "\
perftest's ib_atomic_bw and ib_atomic_lat, with their flags. Each operation is a FETCH_AND_ADD or a CMP_AND_SWAP (-A) on a 64-bit word of the server's memory: the \
client's NIC sends the request, the server's NIC reads the word, changes it and answers with its old \
value. So every atomic is a round trip that the responder executes, one at a time per word and in \
order per queue pair; what they measure is how many of those a NIC turns around, which is what locks, \
counters and sequencers built on RDMA cost.

roce_atomic_lat runs one atomic at a time and reports the whole round trip (not halved, as for READ). \
roce_atomic_bw keeps -t atomics in flight per queue pair, over 64 words a cache line apart as perftest \
does; its figure is MsgRate[Mpps], atomics per second (the BW columns are that rate times 8 bytes, as \
perftest prints them). The responder's NIC caps the atomics it has in flight at its outstanding-reads \
depth (\"Outstand reads\" in the header).

--validate checks every old value returned against the sequence each queue pair runs, and the server \
checks every word after the run. Started without a host argument the program is the server; with one \
it is the client, exactly like perftest. Give both sides the same options.";

/// The command line of one binary, `roce_<test>`: its help names its test, `-h` shows its common
/// flags and `--help` every flag that applies to it under [`HEADINGS`], with examples; the atomic
/// tests explain atomics and show `-A` (and hide `-a` and `-I`, which they refuse); the others hide
/// `-A`. The one definition man pages and completions are generated from too.
pub(crate) fn command_for(test: TestKind) -> clap::Command {
    let bin = format!("roce_{test}");
    let about = format!(
        "{bin}: {} between two hosts (server: no address; client: the server's)",
        what_it_measures(test)
    );
    let long_about = if test.is_atomic() {
        format!("{about}\n\n{ATOMIC_ABOUT}")
    } else {
        format!(
            "{about}, over RoCE (an RDMA NIC, or roceperf's own soft RoCE on any interface) or \
             TCP.\n\nperftest's ib_{test}, with its flags. Started without a host argument the \
             program is the server; with one it is the client and connects to that server, exactly \
             like perftest. Give both sides the same options (those marked SYMMETRIC must match)."
        )
    };
    let not_here: &[&str] = match test.metric {
        crate::params::Metric::Bandwidth => LATENCY_ONLY,
        crate::params::Metric::Latency => BANDWIDTH_ONLY,
    };
    let cmd = Args::command()
        .name(bin.clone())
        .bin_name(bin.clone())
        .about(about)
        .long_about(long_about)
        .after_help(SHORT_EXAMPLES.replace("{bin}", &bin))
        .after_long_help(LONG_EXAMPLES.replace("{bin}", &bin))
        .mut_args(|a| {
            let id = a.get_id().as_str().to_owned();
            let heading = HEADINGS
                .iter()
                .find(|(_, ids)| ids.contains(&id.as_str()))
                .map(|(h, _)| *h);
            let a = match heading {
                Some(h) => a.help_heading(h),
                None => a,
            };
            a.hide(not_here.contains(&id.as_str()))
        });
    let cmd = crate::params::argv::short_help_shows(cmd, COMMON);
    if test.is_atomic() {
        cmd.mut_arg("size", |a| {
            a.help("Message size: atomics move exactly 8 bytes, so only 8 is accepted (SYMMETRIC)")
        })
        .mut_arg("iters", |a| {
            a.help("Atomics per queue pair, at least 5 (SYMMETRIC) [default: 1000]")
        })
        .mut_arg("all", |a| a.hide(true))
        .mut_arg("inline_size", |a| a.hide(true))
    } else {
        cmd.mut_arg("atomic_type", |a| a.hide(true))
    }
}

/// `-A`'s long help: what each atomic does and what the tests measure.
const ATOMIC_TYPE_HELP: &str = "\
The 8-byte atomic that roce_atomic_bw and roce_atomic_lat run (SYMMETRIC) [default: FETCH_AND_ADD]. \
FETCH_AND_ADD adds 1 to a word of the peer's memory; CMP_AND_SWAP replaces the word if it holds the \
compare value. Either way the peer's NIC (the soft stack's responder, or the TCP baseline's poll loop) \
runs the read-modify-write and sends back the word's old value, so every operation is a round trip \
that the responder executes in order, with no CPU of the peer involved on RDMA hardware.";

/// `-W`'s long help: what it reads, when, and the default set.
const REPORT_COUNTERS_HELP: &str = "\
The NIC's counters to read before and after each size, printed as deltas under its row \
(name=delta, one a line, as perftest's -W) and written to --json (nic_counters) (verbs only). \
LIST is comma-separated: paths under /sys/class/infiniband/<dev>/ports/<port>/, e.g. \
counters/port_xmit_data,hw_counters/out_of_buffer (port_xmit_data and port_rcv_data count 4-byte \
words: the bytes are printed beside them); ethtool/NAME for a statistic of the port's network \
interface (what ethtool -S lists, e.g. ethtool/rx_prio3_pause); default for the default set; none \
for no counters. A name the port does not have is refused before the run, with those it has. \
Without -W, verbs runs read the congestion set where the driver has it: hw_counters/ np_cnp_sent, \
np_ecn_marked_roce_packets, rp_cnp_handled, rp_cnp_ignored, out_of_sequence, packet_seq_err, \
local_ack_timeout_err, rnr_nak_retry_err, implied_nak_seq_err, duplicate_request, out_of_buffer \
(mlx5), sent_pkts, rcvd_pkts, out_of_seq_request, rcvd_seq_err, retry_exceeded_err, \
retry_rnr_exceeded_err, rcvd_rnr_err, send_rnr_err, completer_retry_err (rxe), and the netdev's \
PFC pause counters (rx_prio<N>_pause, tx_prio<N>_pause, rx_prio<N>_pause_duration). Each side \
reads its own NIC. The soft transport counts its own packets instead: -v and --json's counters.";

/// Which perftest versions pair with `--oob perftest` (see `oob::perftest` for why).
const PERFTEST_VERSIONS: &str = "pairs with perftest 5.70 and later (tested against 6.06, Debian bookworm; \
     6.28/6.29 skip their parameter negotiation because we announce 6.27); -c RC, UC or UD (UD uses perftest's fixed Q_Key 0x11111111), default TCP port 18515, \
     -R as ib_*_bw -R (messages on a CM-connected queue pair), no -z, no --data_validation";

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

/// `--transport` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TransportArg {
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
    pub(crate) fn kind(self) -> Option<TransportKind> {
        match self {
            TransportArg::Auto => None,
            TransportArg::Verbs => Some(TransportKind::Verbs),
            TransportArg::Soft => Some(TransportKind::Soft),
            TransportArg::Tcp => Some(TransportKind::Tcp),
        }
    }
}

/// `--report-interval SECS`: 0.01 .. 86400 seconds.
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.01..=86_400.0).contains(&v) => Ok(std::time::Duration::from_secs_f64(v)),
        _ => Err(format!(
            "'{s}' is not an interval; give seconds from 0.01 to 86400, e.g. 1 or 0.5"
        )),
    }
}
