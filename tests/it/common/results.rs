//! Crafted result files' contents for the tests of the tools that read them (roce_compare --from,
//! roce_gate): a run's description, a bandwidth result of a chosen rate and a latency result of a
//! chosen median.

use roceperf::params::RoceVersion;
use roceperf::params::{Role, TestKind, TransportKind};
use roceperf::results::{Measured, RunInfo, SizeResult};
use roceperf::stats::{self, BandwidthStats, LatencyStats};

/// A run of `test` over `transport` on lo, from core 0 with no peer named: 1000 iterations, p99 asked
/// for, a fixed start time and version so that files made from it compare equal.
pub fn run_info(
    test: TestKind,
    transport: TransportKind,
    roce: Option<RoceVersion>,
    role: Role,
) -> RunInfo {
    RunInfo {
        device: "lo".into(),
        // lo's link, whatever the transport.
        link_type: "Ethernet".into(),
        cpu: Some(0),
        report_gbits: true,
        percentiles: vec![99.0],
        started_at: "2026-11-29T10:24:25Z".into(),
        version: "0.1.0".into(),
        ..RunInfo::new(test, role, transport, roce)
    }
}

/// A bandwidth result: 5000 messages of `size` bytes in the time that makes `gbps`.
pub fn bw_result(size: u64, gbps: f64) -> SizeResult {
    let messages = 5000u64;
    let elapsed = (size as f64 * 8.0 * messages as f64 / gbps).round() as u64;
    SizeResult {
        size,
        iterations: messages,
        measured: Measured::Bandwidth(BandwidthStats::compute(size, messages, elapsed, None)),
        cpu_util: None,
        lost: None,
    }
}

/// A 2-byte latency result whose every sample is `median_us`.
pub fn lat_result(median_us: f64) -> SizeResult {
    let mut h = stats::new_latency_histogram();
    h.record_n((median_us * 1000.0) as u64, 1000).unwrap();
    SizeResult {
        size: 2,
        iterations: 1000,
        measured: Measured::Latency {
            stats: LatencyStats::from_histogram(&h, &[99.0]),
            histogram: h,
        },
        cpu_util: None,
        lost: None,
    }
}
