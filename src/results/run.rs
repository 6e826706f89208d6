//! The run description: which test, over what, with which parameters and queue pairs.
//!
//! The header block and the files show it, and both sides exchange it over the out-of-band channel.

use crate::params::{
    AtomicOp, ConnType, RateLimit, Recovery, RoceVersion, Role, TestKind, TransportKind,
};
use serde::{Deserialize, Serialize};

/// What a run marked its packets with: `--tclass`, `-S` and `--flow_label` as given, and what the
/// soft transport put on the wire for them (the kernel or the NIC decides that elsewhere).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunMarks {
    /// `--tclass` as given; absent when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tclass: Option<u8>,
    /// `-S` as given; absent when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sl: Option<u8>,
    /// `--flow_label`'s list (queue pair `i` took entry `i % len`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_labels: Vec<u32>,
    /// Soft: the TOS / traffic class byte data packets left with (RoCE v2: ECT(0) added unless
    /// `--tclass` set the ECN bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_tclass: Option<u8>,
    /// Soft: the TOS / traffic class byte CNPs leave with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnp_tclass: Option<u8>,
    /// Soft over AF_PACKET: the 802.1Q priority (PCP) of the tag on data frames; absent untagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_tag: Option<u8>,
    /// The socket's SO_PRIORITY (soft over UDP, tcp); absent when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub so_priority: Option<u8>,
}

/// One perftest "local address:" / "remote address:" line (+ GID line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressLine {
    /// Local identifier (0 on RoCE).
    pub lid: u16,
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
    /// Outstanding RDMA READs (READ tests).
    pub out_reads: Option<u32>,
    /// Remote key of the buffer (READ and WRITE tests).
    pub rkey: Option<u32>,
    /// Virtual address of the buffer (READ and WRITE tests).
    pub vaddr: Option<u64>,
    /// GID, printed in perftest's decimal-bytes format; IPv6 text in JSON.
    #[serde(with = "gid_text", default)]
    pub gid: Option<[u8; 16]>,
}

/// Everything the header block and the files need, built by the binary from its options and transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Which test.
    pub test: TestKind,
    /// Atomic tests: the `-A` operation; absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atomic_type: Option<AtomicOp>,
    /// Client or server.
    pub role: Role,
    /// What moved the bytes.
    pub transport: TransportKind,
    /// RoCE encapsulation; None for TCP.
    pub roce: Option<RoceVersion>,
    /// "lo", "mlx5_0", "127.0.0.1" ...
    pub device: String,
    /// Server host as given to the client.
    pub peer: Option<String>,
    /// Number of queue pairs (-q).
    pub qps: u32,
    /// Send queue depth (-t).
    pub tx_depth: u32,
    /// Receive queue depth (-r), SEND tests.
    pub rx_depth: Option<u32>,
    /// Completions are signaled every cq_mod messages (-Q).
    pub cq_mod: u32,
    /// Path MTU in bytes; `None` for TCP, whose segments the kernel sizes.
    pub mtu: Option<u32>,
    /// "Ethernet" / "IB" / "TCP".
    pub link_type: String,
    /// GID table index used (-x).
    pub gid_index: Option<u32>,
    /// Max inline data in bytes (-I); `None` for TCP, which posts no work requests.
    pub inline_size: Option<u32>,
    /// Outstanding reads (-o), READ tests.
    pub out_reads: Option<u32>,
    /// Core the datapath thread is pinned to.
    pub cpu: Option<usize>,
    /// Our queue pairs.
    pub local: Vec<AddressLine>,
    /// The peer's queue pairs.
    pub remote: Vec<AddressLine>,
    /// Console bandwidth in Gb/s (--report_gbits) instead of MiB/s.
    pub report_gbits: bool,
    /// Latency percentiles to report, e.g. [90, 99, 99.9, 99.99].
    pub percentiles: Vec<f64>,
    /// -n (per size) or 0 in duration mode.
    pub iterations: u64,
    /// -D seconds, duration mode.
    pub duration_s: Option<u64>,
    /// Margin at both ends of a duration run, seconds.
    pub margin_s: Option<u64>,
    /// Warm-up iterations run before measuring (excluded from the statistics).
    pub warmup: u64,
    /// Both directions at once (-b).
    pub bidirectional: bool,
    /// RFC 3339 UTC, e.g. "2026-11-29T10:24:25Z" (see [`now_rfc3339`](super::now_rfc3339)).
    pub started_at: String,
    /// "why" lines: transport chosen because..., core chosen because...
    pub notes: Vec<String>,
    /// env!("CARGO_PKG_VERSION").
    pub version: String,
    /// Transport counters at the end of the run (soft: packets, retransmissions, NAKs, drops), when the
    /// transport keeps any; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<serde_json::Value>,
    /// Verbs: the NIC's counters over each size (`-W`, or the default congestion set); absent for the
    /// other transports and where the driver exposes none of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_counters: Option<super::nic::NicCounters>,
    /// The deliberate impairment of a soft run, as its spec (`loss=1%,burst=8,seed=7`: what
    /// `--impair` or `ROCEPERF_IMPAIR` gave, seed included); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impair: Option<String>,
    /// The loss recovery the RC engine of a soft run used (`gbn` or `sr`); absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// The queue pairs' connection type (`-c`: `RC`, `UC`, `UD`) of a RoCE run; absent for TCP (and in
    /// files written before `-c` existed, which were RC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnType>,
    /// `-R`: the queue pairs were connected through the CM (rdma_cm); absent when they were not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rdma_cm: bool,
    /// `-e/--events`: this side slept on events when idle instead of busy polling; absent when it
    /// polled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub events: bool,
    /// `-R --oob perftest`: the setup messages rode a CM-connected queue pair too (perftest's "Data
    /// ex. method : rdma_cm"); the console's business only, not kept in the files.
    #[serde(skip)]
    pub exchange_rdma_cm: bool,
    /// `--rate_limit`: this side's pacing target; absent when not paced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// `--latency_gap` in nanoseconds; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_gap_ns: Option<u64>,
    /// `--run_infinitely`: how the run without end went; absent for other runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_infinitely: Option<EndlessRun>,
    /// Why the run stopped before its end, when it failed after connecting (the results are the sizes
    /// that completed, the counters the transport's then); absent for a run that finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// A `-n` / `-D` run that SIGINT or SIGTERM stopped early, on this side or the peer's: by whom,
    /// and what of the size then running the results keep; absent for a run that ran to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<super::Interrupted>,
    /// `--tclass`, `-S`, `--flow_label` and what they made of the packets; absent when the run
    /// marked nothing (no flag given, and not the soft transport, which marks RoCE v2 ECN-capable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<RunMarks>,
    /// Where the result came from (host, kernel, CPU, NIC, build, command line); absent from a run
    /// described by hand and from files written before issue 34.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<super::Provenance>,
}

impl RunInfo {
    /// The link type perftest's header prints for a run over `transport`: RoCE runs over
    /// Ethernet, the baseline over TCP.
    pub fn link_type_of(transport: TransportKind) -> &'static str {
        match transport {
            TransportKind::Tcp => "TCP",
            _ => "Ethernet",
        }
    }

    /// A run of `test` over `transport` (RoCE `roce`) as `role`, started now by this version, with
    /// perftest's defaults where it has any (one queue pair, a send queue of 128, a completion every
    /// 100 messages, a 4096-byte MTU, 1000 iterations) and none of what only a run learns (device,
    /// peer, core, queue pairs, percentiles, counters). The binaries describe their runs from their
    /// options; this is for runs described by hand, as tests and crafted result files do.
    pub fn new(
        test: TestKind,
        role: Role,
        transport: TransportKind,
        roce: Option<RoceVersion>,
    ) -> RunInfo {
        RunInfo {
            test,
            atomic_type: None,
            role,
            transport,
            roce,
            device: String::new(),
            peer: None,
            qps: 1,
            tx_depth: 128,
            rx_depth: None,
            cq_mod: 100,
            mtu: (transport != TransportKind::Tcp).then_some(4096),
            link_type: RunInfo::link_type_of(transport).into(),
            gid_index: None,
            inline_size: (transport != TransportKind::Tcp).then_some(0),
            out_reads: None,
            cpu: None,
            local: vec![],
            remote: vec![],
            report_gbits: false,
            percentiles: vec![],
            iterations: 1000,
            duration_s: None,
            margin_s: None,
            warmup: 0,
            bidirectional: false,
            started_at: super::now_rfc3339(),
            notes: vec![],
            version: env!("CARGO_PKG_VERSION").into(),
            counters: None,
            nic_counters: None,
            impair: None,
            recovery: None,
            connection: None,
            rdma_cm: false,
            exchange_rdma_cm: false,
            rate_limit: None,
            latency_gap_ns: None,
            events: false,
            run_infinitely: None,
            error: None,
            interrupted: None,
            marks: None,
            provenance: None,
        }
    }
}

/// How a run failed, as its files keep it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// The error as the binary printed it.
    pub message: String,
    /// What failed: the test while it ran, or its set-up.
    pub failed: FailedPart,
    /// The binary's exit code: 1 for a failed test, 2 for a set-up error.
    pub exit_code: u8,
    /// The transport's account of the first failed completion, when it knows more than the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The part of a run that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailedPart {
    /// The test ran and failed (exit code 1).
    Test,
    /// Its set-up failed: a parameter, a resource, the peer lost before the test began (exit code 2).
    Setup,
}

/// A run without end (`--run_infinitely`): its intervals and what stopped it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndlessRun {
    /// Seconds between report lines (`--report-interval`, or `-D`).
    pub report_interval_s: f64,
    /// Interval lines reported.
    pub intervals: u64,
    /// `SIGINT` or `SIGTERM` (this side was signalled), `peer` (the peer stopped first); absent
    /// while the run goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
}

/// `client` or `server`.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Client => "client",
        Role::Server => "server",
    }
}

/// Serde form of a GID: IPv6 text (`::ffff:10.0.0.5`), readable in JSON files and exact on the wire.
mod gid_text {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::net::Ipv6Addr;

    pub(super) fn serialize<S: Serializer>(
        gid: &Option<[u8; 16]>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        gid.map(|g| Ipv6Addr::from(g).to_string()).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<[u8; 16]>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| {
                text.parse::<Ipv6Addr>().map(|a| a.octets()).map_err(|_| {
                    D::Error::custom(format!("GID {text:?} is not an IPv6-style address"))
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;

    #[test]
    fn the_link_type_is_tcps_for_the_baseline_and_ethernet_for_roce() {
        use crate::params::{Metric, Verb};
        let test = TestKind::new(Verb::Write, Metric::Latency);
        for (transport, want) in [
            (TransportKind::Tcp, "TCP"),
            (TransportKind::Soft, "Ethernet"),
            (TransportKind::Verbs, "Ethernet"),
        ] {
            assert_eq!(RunInfo::link_type_of(transport), want, "{transport}");
            let info = RunInfo::new(test, Role::Client, transport, None);
            assert_eq!(info.link_type, want, "{transport}");
        }
    }

    #[test]
    fn run_info_round_trips_through_json() {
        for info in [bw_info(), lat_info()] {
            let text = serde_json::to_string(&info).unwrap();
            let back: RunInfo = serde_json::from_str(&text).unwrap();
            assert_eq!(back, info);
        }
        let v = serde_json::to_value(bw_info()).unwrap();
        assert_eq!(v["local"][0]["gid"], "::ffff:10.0.0.5");
        assert_eq!(v["test"]["verb"], "write");
        assert_eq!(v["role"], "client");
    }

    #[test]
    fn bad_gid_text_is_named() {
        let mut v = serde_json::to_value(bw_info()).unwrap();
        v["local"][0]["gid"] = "not-a-gid".into();
        let err = serde_json::from_value::<RunInfo>(v).unwrap_err();
        assert!(err.to_string().contains("not-a-gid"), "{err}");
    }
}
