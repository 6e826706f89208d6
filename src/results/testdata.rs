//! Runs, results and comparisons shared by the unit tests of results, report, compare and gate.
//!
//! A write_bw client and a send_lat server like the perftest reference runs, and a synthetic
//! comparison of three transports (write_lat at 2 B, write_bw at 4 KiB .. 64 KiB).

use super::*;
use crate::params::{Metric, RoceVersion, Role, TestKind, TransportKind, Verb};
use crate::stats::{self, BandwidthStats, LatencyStats};

/// A write_bw client over soft RoCE v2, like the perftest reference run.
pub(crate) fn bw_info() -> RunInfo {
    RunInfo {
        device: "lo".into(),
        peer: Some("127.0.0.1".into()),
        gid_index: Some(3),
        cpu: Some(1),
        local: vec![AddressLine {
            lid: 0,
            qpn: 0x108,
            psn: 0x63ad7d,
            out_reads: None,
            rkey: Some(0x17eedf),
            vaddr: Some(0x7f760c947000),
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 5]),
        }],
        remote: vec![AddressLine {
            lid: 0,
            qpn: 0x76,
            psn: 0xf3810c,
            out_reads: None,
            rkey: Some(0x201600),
            vaddr: Some(0x7fbb4c981000),
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 4]),
        }],
        percentiles: vec![90.0, 99.0, 99.9, 99.99],
        iterations: 5000,
        started_at: "2026-11-29T10:24:25Z".into(),
        notes: vec!["transport soft: -d lo is a network interface, not an RDMA device".into()],
        version: "0.1.0".into(),
        ..RunInfo::new(
            TestKind::new(Verb::Write, Metric::Bandwidth),
            Role::Client,
            TransportKind::Soft,
            Some(RoceVersion::V2),
        )
    }
}

/// A send_lat server over TCP.
pub(crate) fn lat_info() -> RunInfo {
    RunInfo {
        test: TestKind::new(Verb::Send, Metric::Latency),
        atomic_type: None,
        role: Role::Server,
        transport: TransportKind::Tcp,
        roce: None,
        link_type: "TCP".into(),
        rx_depth: Some(512),
        tx_depth: 1,
        cq_mod: 1,
        gid_index: None,
        peer: None,
        iterations: 1000,
        local: vec![],
        remote: vec![],
        ..bw_info()
    }
}

/// The ib_write_bw reference row: 65536 B x 5000, 11030.12 peak / 11028.45 average MiB/s.
pub(crate) fn bw_result() -> SizeResult {
    let mib = 1_048_576.0;
    let elapsed = (5000.0 * 65536.0 / (11028.45 * mib) * 1e9_f64).round() as u64;
    let best = 65536.0 * 1e9 / (11030.12 * mib);
    SizeResult {
        size: 65536,
        iterations: 5000,
        measured: Measured::Bandwidth(BandwidthStats::compute(65536, 5000, elapsed, Some(best))),
        cpu_util: None,
        lost: None,
    }
}

/// A latency result for 2-byte messages: 1000 samples from 950 ns to 3120 ns.
pub(crate) fn lat_result() -> SizeResult {
    let mut h = stats::new_latency_histogram();
    for i in 0..1000u64 {
        h.record(950 + (i * i) % 2171).unwrap();
    }
    SizeResult {
        size: 2,
        iterations: 1000,
        measured: Measured::Latency {
            stats: LatencyStats::from_histogram(&h, &[90.0, 99.0, 99.9, 99.99]),
            histogram: h,
        },
        cpu_util: Some(12.5),
        lost: None,
    }
}

/// A latency result whose samples are spread around `base_ns` with a tail.
pub(crate) fn lat(size: u64, base_ns: u64, samples: u64) -> SizeResult {
    let mut h = stats::new_latency_histogram();
    for i in 0..samples {
        // Deterministic spread: mostly within 40 % of base, every 100th sample 5x, one 20x.
        let jitter = (i * 7919) % 1000;
        let mut v = base_ns + base_ns * jitter * 4 / 10_000;
        if i % 100 == 99 {
            v *= 5;
        }
        if i == samples / 2 {
            v = base_ns * 20;
        }
        h.record(v).unwrap();
    }
    SizeResult {
        size,
        iterations: samples,
        measured: Measured::Latency {
            stats: LatencyStats::from_histogram(&h, &[90.0, 99.0, 99.9, 99.99]),
            histogram: h,
        },
        cpu_util: None,
        lost: None,
    }
}

/// A bandwidth result of `gbps` at `size`.
pub(crate) fn bw(size: u64, gbps: f64) -> SizeResult {
    let messages = 10_000;
    let elapsed = (size as f64 * 8.0 * messages as f64 / gbps).round() as u64;
    SizeResult {
        size,
        iterations: messages,
        measured: Measured::Bandwidth(BandwidthStats::compute(size, messages, elapsed, None)),
        cpu_util: None,
        lost: None,
    }
}

/// RoCE v1 (soft), RoCE v2 (soft) and TCP; write_lat at 2 B and write_bw at 4 KiB .. 64 KiB.
pub(crate) fn set() -> CompareSet {
    let wlat = TestKind::new(Verb::Write, Metric::Latency);
    let wbw = TestKind::new(Verb::Write, Metric::Bandwidth);
    let transports = [
        (TransportKind::Soft, Some(RoceVersion::V1), 1800, 1.0),
        (TransportKind::Soft, Some(RoceVersion::V2), 2000, 0.9),
        (TransportKind::Tcp, None, 6000, 0.5),
    ];
    let mut runs = Vec::new();
    for (t, r, base, _) in transports {
        runs.push(CompareRun {
            label: default_label(t, r),
            transport: t,
            roce: r,
            test: wlat,
            results: vec![lat(2, base, 10_000)],
            notes: vec![],
            link: None,
            repetitions: vec![],
            loss: None,
            path: None,
            floors: vec![],
            ceilings: vec![],
        });
    }
    for (t, r, _, factor) in transports {
        runs.push(CompareRun {
            label: default_label(t, r),
            transport: t,
            roce: r,
            test: wbw,
            results: [4096u64, 16384, 65536]
                .iter()
                .enumerate()
                .map(|(i, &s)| bw(s, factor * (20.0 + 15.0 * i as f64)))
                .collect(),
            notes: vec![],
            link: None,
            repetitions: vec![],
            loss: None,
            path: None,
            floors: vec![],
            ceilings: vec![],
        });
    }
    CompareSet {
        started_at: "2026-11-29T10:24:25Z".into(),
        version: "0.1.0".into(),
        runs,
        skipped: vec![],
        notes: vec![],
        wire: None,
        provenance: None,
    }
}

/// True when two histograms hold the same counts at the same values.
pub(crate) fn same_histogram(
    a: &hdrhistogram::Histogram<u64>,
    b: &hdrhistogram::Histogram<u64>,
) -> bool {
    a.len() == b.len()
        && a.iter_recorded().zip(b.iter_recorded()).all(|(x, y)| {
            x.value_iterated_to() == y.value_iterated_to()
                && x.count_at_value() == y.count_at_value()
        })
}
