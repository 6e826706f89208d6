//! The checks behind [`Options::from_args`](super::Options::from_args), one small function each.
//!
//! Which transport, which flags it takes, the soft backend, the test's flags, the run's shape.

use super::Error;
use super::args::{Args, OobArg};
use crate::params::CounterRequest;
use crate::params::{
    ATOMIC_SIZE, AtomicOp, IoKind, Metric, OutputSelect, RoceVersion, RunMode, TestKind,
    TransportKind, Verb, all_sizes,
};
use crate::transport::probe;
use std::fmt;

/// Default percentiles reported below the table.
pub(crate) const DEFAULT_PERCENTILES: [f64; 4] = [90.0, 99.0, 99.9, 99.99];

/// The transports this build can run; the others are a clear "not built yet" usage error.
pub(crate) const BUILT_TRANSPORTS: &[TransportKind] = &[
    TransportKind::Verbs,
    TransportKind::Soft,
    TransportKind::Tcp,
];

/// Why a run uses its transport (printed with the results).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportReason {
    /// `--transport NAME`.
    Chosen(TransportKind),
    /// `--transport auto`, and `-d` names an RDMA device.
    RdmaDevice(String),
    /// `--transport auto`, and `-d` names no RDMA device.
    NotRdmaDevice(String),
    /// `--transport auto` without `-d`.
    NoDevice,
}

impl TransportReason {
    /// True when `--transport auto` chose (rather than the user).
    pub fn is_auto(&self) -> bool {
        !matches!(self, TransportReason::Chosen(_))
    }
}

impl fmt::Display for TransportReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportReason::Chosen(kind) => write!(f, "chosen with --transport {kind}"),
            TransportReason::RdmaDevice(d) => write!(
                f,
                "--transport auto chose verbs because -d {d} is an RDMA device"
            ),
            TransportReason::NotRdmaDevice(d) => write!(
                f,
                "--transport auto chose soft because -d {d} is not an RDMA device"
            ),
            TransportReason::NoDevice => {
                f.write_str("--transport auto chose soft because no -d was given")
            }
        }
    }
}

/// The transport a run uses and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TransportChoice {
    /// The transport.
    pub kind: TransportKind,
    /// Why.
    pub reason: TransportReason,
}

/// The not-applicable error of the first row whose flag was given, from a table of
/// `given, "flag" => "why"` rows refused on `what` (built only then); nothing when none was.
macro_rules! refuse_first_given {
    ($what:expr; $($given:expr, $flag:literal => $why:literal;)+) => {
        $(if $given {
            return not_applicable($flag, $what, $why);
        })+
    };
}

fn not_applicable<T>(flag: &'static str, what: String, why: &'static str) -> Result<T, Error> {
    Err(Error::NotApplicable { flag, what, why })
}

/// `--transport`, with `auto` deciding by whether `-d` names an RDMA device.
pub(crate) fn resolve_transport(a: &Args) -> TransportChoice {
    let (kind, reason) = match (a.transport.kind(), &a.device) {
        (Some(kind), _) => (kind, TransportReason::Chosen(kind)),
        (None, Some(d)) if probe::is_rdma_device(d) => {
            (TransportKind::Verbs, TransportReason::RdmaDevice(d.clone()))
        }
        (None, Some(d)) => (
            TransportKind::Soft,
            TransportReason::NotRdmaDevice(d.clone()),
        ),
        (None, None) => (TransportKind::Soft, TransportReason::NoDevice),
    };
    TransportChoice { kind, reason }
}

/// The transport must be one this build has.
pub(crate) fn built(choice: &TransportChoice) -> Result<(), Error> {
    if BUILT_TRANSPORTS.contains(&choice.kind) {
        return Ok(());
    }
    let reason = if choice.reason.is_auto() {
        format!(" ({})", choice.reason)
    } else {
        String::new()
    };
    Err(Error::NotBuilt {
        transport: choice.kind,
        reason,
    })
}

/// Flags of the RoCE transports are errors on TCP; the soft transport's own flags are errors elsewhere.
pub(crate) fn transport_flags(transport: TransportKind, a: &Args) -> Result<(), Error> {
    if transport == TransportKind::Tcp {
        refuse_first_given!("--transport tcp".to_string();
            a.device.is_some(), "-d" => "the TCP baseline uses the kernel's routing to the host, not a device";
            a.ib_port.is_some(), "-i" => "the TCP baseline has no HCA port";
            a.gid_index.is_some(), "-x" => "the TCP baseline has no GID table";
            a.roce.is_some(), "--roce" => "the TCP baseline carries no RoCE packets";
            a.mtu.is_some(), "-m" => "TCP chooses its own segment size";
            a.inline_size.is_some(), "-I" => "TCP has no inline sends";
            a.qp_timeout.is_some(), "-u" => "TCP retransmits on its own timers";
            a.retry_count.is_some(), "--retry_count" => "TCP retransmits on its own timers";
            a.ipv6, "--ipv6" => "the TCP baseline follows the host address given";
            a.flow_label.is_some(), "--flow_label" => "the kernel labels TCP's IPv6 flows itself (net.ipv6.auto_flowlabels); --tclass and -S apply";
        );
    }
    if transport != TransportKind::Soft {
        refuse_first_given!(format!("--transport {transport}");
            a.io.is_some(), "--io" => "it picks the soft transport's I/O backend";
            a.bind.is_some(), "--bind" => "it picks the soft transport's local address";
            a.no_gso, "--no-gso" => "it tunes the soft transport's sockets";
        );
    }
    if transport == TransportKind::Verbs {
        refuse_first_given!(format!("--transport {transport}");
            a.events, "-e" => "roceperf busy-polls a verbs completion queue (it opens no completion channel); run --transport soft or tcp to sleep on events";
        );
    }
    Ok(())
}

/// `--oob perftest` needs a RoCE transport and speaks no `--validate`.
pub(crate) fn oob(transport: TransportKind, a: &Args) -> Result<(), Error> {
    if a.oob != OobArg::Perftest {
        return Ok(());
    }
    if transport == TransportKind::Tcp {
        return not_applicable(
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
    Ok(())
}

/// `--persist` keeps a server up: a client's flag it is not, and perftest's dialect serves one run.
pub(crate) fn persist(a: &Args) -> Result<(), Error> {
    if !a.persist {
        return Ok(());
    }
    if let Some(host) = &a.host {
        return Err(Error::Invalid {
            flag: "--persist",
            why: format!(
                "it keeps a server up, and the host argument ({host}) makes this process a client; drop --persist here and give it to the server"
            ),
        });
    }
    if a.oob == OobArg::Perftest {
        return Err(Error::Conflict {
            a: "--persist",
            b: "--oob perftest",
            why: "a perftest client expects a server that serves one run; start the server once per client",
        });
    }
    Ok(())
}

/// `-R` connects RoCE queue pairs through the CM, which addresses the peer by IP address: no TCP
/// baseline, no RoCE v1.
pub(crate) fn rdma_cm(transport: TransportKind, a: &Args) -> Result<(), Error> {
    if !a.rdma_cm {
        return Ok(());
    }
    if transport == TransportKind::Tcp {
        return not_applicable(
            "-R",
            "--transport tcp".into(),
            "it connects RDMA queue pairs through the CM (rdma_cm) and the TCP baseline has none; use --transport soft or verbs",
        );
    }
    if a.roce == Some(RoceVersion::V1) {
        return Err(Error::Conflict {
            a: "-R",
            b: "--roce v1",
            why: "rdma_cm addresses the peer by IP address and RoCE v1 frames carry none; use --roce v2",
        });
    }
    Ok(())
}

/// The soft transport's backend (`None` for the other transports), after checking that the soft
/// flags given can work together.
pub(crate) fn soft_io(transport: TransportKind, a: &Args) -> Result<Option<IoKind>, Error> {
    if transport != TransportKind::Soft {
        return Ok(None);
    }
    if a.ib_port.is_some() {
        return not_applicable(
            "-i",
            "--transport soft".into(),
            "a network interface has no HCA port",
        );
    }
    if a.device.is_none() {
        return Err(Error::Missing {
            flag: "-d",
            what: format!(
                "the soft transport needs a network interface: -d lo for two processes on this host, -d eth0 (or a veth) across hosts; -d mlx5_0 (an RDMA device) for verbs, or --transport tcp for the TCP baseline{}",
                interface_list()
            ),
        });
    }
    let v1 = a.roce == Some(RoceVersion::V1);
    if v1 && a.io == Some(IoKind::Udp) {
        return Err(Error::Conflict {
            a: "--roce v1",
            b: "--io udp",
            why: "RoCE v1 (Ethertype 0x8915) cannot travel over a UDP socket; use --io packet (needs CAP_NET_RAW) or --roce v2",
        });
    }
    if v1 && a.ipv6 {
        return Err(Error::Conflict {
            a: "--roce v1",
            b: "--ipv6",
            why: "RoCE v1 carries no IP header; drop --ipv6 or use --roce v2",
        });
    }
    let default = if v1 { IoKind::Packet } else { IoKind::Udp };
    let io = a.io.unwrap_or(default);
    if a.no_gso && v1 {
        return not_applicable(
            "--no-gso",
            "--roce v1".into(),
            "RoCE v1 has no UDP to segment: its AF_PACKET frames always leave one by one",
        );
    }
    Ok(Some(io))
}

/// `; interfaces here: lo, eth0` for error messages (empty when they cannot be listed).
fn interface_list() -> String {
    let names = probe::interfaces();
    if names.is_empty() {
        String::new()
    } else {
        format!("; interfaces here: {}", names.join(", "))
    }
}

/// Flags that only bandwidth tests take, `--output` for the test's metric, and `-b` for READ.
pub(crate) fn test_flags(test: TestKind, a: &Args) -> Result<(), Error> {
    let bw = test.metric == Metric::Bandwidth;
    if !bw {
        refuse_first_given!(format!("{test} (a latency test)");
            a.tx_depth.is_some(), "-t" => "latency tests keep one operation in flight";
            a.cq_mod.is_some(), "-Q" => "latency tests signal every operation";
            a.bidirectional, "-b" => "a ping-pong is already both ways";
            a.qps.is_some_and(|q| q != 1), "-q" => "latency tests use one queue pair, as in perftest";
            a.report_gbits, "--report_gbits" => "latency tests report microseconds";
        );
    }
    match a.output {
        Some(OutputSelect::Latency) if bw => {
            return not_applicable(
                "--output=latency",
                format!("{test} (a bandwidth test)"),
                "it reports no latency",
            );
        }
        Some(OutputSelect::Bandwidth | OutputSelect::MessageRate) if !bw => {
            return not_applicable(
                "--output=bandwidth/message_rate",
                format!("{test} (a latency test)"),
                "it reports latency",
            );
        }
        _ => {}
    }
    if a.bidirectional && test.verb == Verb::Read {
        return not_applicable(
            "-b",
            test.to_string(),
            "bidirectional READ is not a perftest mode either",
        );
    }
    Ok(())
}

/// `-A` belongs to the atomic tests, which move 8 bytes and nothing else (no `-a`, `-s` only 8, no
/// `-I`, as perftest); returns the operation an atomic test runs.
pub(crate) fn atomic(test: TestKind, a: &Args) -> Result<Option<AtomicOp>, Error> {
    if !test.is_atomic() {
        if a.atomic_type.is_some() {
            return not_applicable(
                "-A",
                test.to_string(),
                "only roce_atomic_bw and roce_atomic_lat run atomics",
            );
        }
        return Ok(None);
    }
    if a.all {
        return not_applicable(
            "-a",
            test.to_string(),
            "an atomic moves exactly 8 bytes, so there are no sizes to sweep (perftest refuses -a too)",
        );
    }
    if let Some(size) = a.size.filter(|&s| s != ATOMIC_SIZE) {
        return Err(Error::Invalid {
            flag: "-s",
            why: format!(
                "{size} bytes: an atomic moves exactly {ATOMIC_SIZE} bytes (one 64-bit word); drop -s or give -s {ATOMIC_SIZE}"
            ),
        });
    }
    if a.inline_size.is_some() {
        return not_applicable(
            "-I",
            test.to_string(),
            "an atomic carries its operands in its header, no payload to inline (perftest refuses -I for atomics too)",
        );
    }
    Ok(Some(a.atomic_type.unwrap_or_default()))
}

/// Sizes and run length: one way to give each.
pub(crate) fn run_shape(a: &Args) -> Result<(), Error> {
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
    if a.cpu_util && a.duration.is_none() && !a.run_infinitely {
        return Err(Error::Invalid {
            flag: "--cpu_util",
            why: "CPU utilisation is measured in duration mode only (as in perftest); give -D too"
                .into(),
        });
    }
    Ok(())
}

/// `-n` iterations (perftest's default for the test), or `-D` seconds with `-f` margins (default D/4).
pub(crate) fn run_mode(test: TestKind, a: &Args) -> Result<RunMode, Error> {
    let Some(secs) = a.duration else {
        return Ok(RunMode::Iterations(
            a.iters.unwrap_or_else(|| test.default_iters()),
        ));
    };
    let margin = a.margin.unwrap_or(secs / 4);
    if secs <= 2 * margin {
        return Err(Error::Invalid {
            flag: "-D",
            why: format!(
                "the duration ({secs} s) must be greater than twice the margin ({margin} s, -f); lengthen -D or shorten -f"
            ),
        });
    }
    Ok(RunMode::Duration { secs, margin })
}

/// `-a`'s sweep, `-s`, or the test's default size.
pub(crate) fn sizes(test: TestKind, a: &Args) -> Vec<u64> {
    if a.all {
        all_sizes()
    } else {
        vec![a.size.unwrap_or_else(|| test.default_size())]
    }
}

/// Operations in flight per queue pair: `-t` (default 128) capped at the iterations, as perftest; 1 for
/// latency tests.
pub(crate) fn tx_depth(test: TestKind, a: &Args, mode: RunMode) -> u32 {
    if test.metric != Metric::Bandwidth {
        return 1;
    }
    let t = a.tx_depth.unwrap_or(128);
    match mode {
        RunMode::Iterations(n) => t.min(n.min(u64::from(u32::MAX)) as u32),
        RunMode::Duration { .. } => t,
    }
}

/// `-Q` cannot ask for fewer completions than there are operations in flight.
pub(crate) fn cq_mod(cq_mod: Option<u32>, tx_depth: u32) -> Result<(), Error> {
    match cq_mod {
        Some(q) if q > tx_depth => Err(Error::Invalid {
            flag: "-Q",
            why: format!(
                "one completion every {q} operations needs at least {q} in flight (-t is {tx_depth})"
            ),
        }),
        _ => Ok(()),
    }
}

/// `--percentiles` sorted and without repeats, or the defaults.
pub(crate) fn percentiles(given: Option<Vec<f64>>) -> Vec<f64> {
    let mut p = given.unwrap_or_else(|| DEFAULT_PERCENTILES.to_vec());
    p.sort_by(|x, y| x.total_cmp(y));
    p.dedup();
    p
}

/// `--results` must be a directory, or not exist yet.
pub(crate) fn results_dir(a: &Args) -> Result<(), Error> {
    match &a.files.results {
        Some(dir) if dir.exists() && !dir.is_dir() => Err(Error::Invalid {
            flag: "--results",
            why: format!("{} exists and is not a directory", dir.display()),
        }),
        _ => Ok(()),
    }
}

/// `--impair`, `--impair-seed` and `--recovery` belong to the soft transport (issue 15): its own
/// packets are impaired and its own RC engine repairs them; `--cc` and `--cc-param` too (issue 29):
/// on verbs the NIC's firmware runs congestion control, on TCP the kernel.
pub(crate) fn lossy_flags(transport: TransportKind, a: &Args) -> Result<(), Error> {
    if transport != TransportKind::Tcp {
        refuse_first_given!(format!("--transport {transport}");
            a.tcp_congestion.is_some(), "--tcp-congestion" => "it sets the kernel TCP's congestion control of --transport tcp's data connections; the soft transport's is --cc";
        );
    }
    if transport == TransportKind::Soft {
        return Ok(());
    }
    refuse_first_given!(format!("--transport {transport}");
        a.impair.is_some(), "--impair" => "it impairs the soft transport's own packets; impair any transport's link with iptables (-m statistic --mode random -j DROP) on the path, or compare under loss with roce_compare --loss-sweep";
        a.impair_seed.is_some(), "--impair-seed" => "it seeds the soft transport's impairment";
        a.recovery.is_some(), "--recovery" => "only the soft transport's RC engine has a choice of loss recovery (RDMA NICs and rxe go back N)";
    );
    if transport == TransportKind::Verbs {
        refuse_first_given!(format!("--transport {transport}");
            a.cc.is_some(), "--cc" => "the NIC's firmware does congestion control on verbs; roceperf does not configure it (ConnectX: /sys/kernel/debug/mlx5/<pci>/cc_params/ and the ROCE_CC_PRIO_MASK firmware setting)";
            !a.cc_param.is_empty(), "--cc-param" => "the NIC's firmware does congestion control on verbs; set a ConnectX's in /sys/kernel/debug/mlx5/<pci>/cc_params/<name>";
        );
    }
    refuse_first_given!(format!("--transport {transport}");
        a.cc.is_some(), "--cc" => "TCP runs the kernel's congestion control: choose it with --tcp-congestion NAME (e.g. cubic)";
        !a.cc_param.is_empty(), "--cc-param" => "DCQCN's parameters belong to the soft transport; TCP runs the kernel's congestion control";
    );
    Ok(())
}

/// `-W` reads an RDMA NIC's port counters: verbs only. On verbs, what to read (the default set when
/// `-W` is absent).
pub(crate) fn report_counters(
    transport: TransportKind,
    a: &Args,
) -> Result<Option<CounterRequest>, Error> {
    match (transport, &a.report_counters) {
        (TransportKind::Verbs, given) => Ok(Some(given.clone().unwrap_or_default())),
        (_, None) => Ok(None),
        (TransportKind::Soft, Some(_)) => not_applicable(
            "-W",
            "--transport soft".into(),
            "it reads an RDMA NIC's port counters from sysfs, and the soft transport has no NIC; it counts its own packets instead (-v, and counters in --json)",
        ),
        (TransportKind::Tcp, Some(_)) => not_applicable(
            "-W",
            "--transport tcp".into(),
            "it reads an RDMA NIC's port counters from sysfs; the kernel's TCP counters are nstat's (or roce_compare --loss-sweep's)",
        ),
    }
}
