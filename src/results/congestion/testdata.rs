//! A congestion study for tests: two disciplines (ECN with DCQCN, lossy go-back-N) of two flows through
//! 2 Gb/s, and the idle victim; figures chosen by hand.

use super::*;
use crate::stats::new_latency_histogram;

/// A victim of `n` samples: `n - n/50` at 10 µs, the rest (2 %, so p99 lies in it) at `tail_us`.
pub(crate) fn victim(n: u64, tail_us: u64) -> Victim {
    let mut h = new_latency_histogram();
    let tail = n / 50;
    h.record_n(10_000, n - tail).unwrap();
    if tail > 0 {
        h.record_n(tail_us * 1000, tail).unwrap();
    }
    Victim::from_histogram(h)
}

fn flow(i: u32, gbps: f64, retx: Option<u64>, cnps: Option<u64>) -> Flow {
    Flow {
        flow: i,
        qpn: Some(0x11 + i),
        bytes: (gbps * 1e9 / 8.0 * 2.0) as u64,
        goodput_gbps: gbps,
        retransmitted_bytes: retx,
        ce_marked_packets: cnps.map(|c| c * 4),
        cnps_sent: cnps,
        cnps_handled: cnps,
        rate_cuts: cnps.map(|c| c / 2),
        rate_lowest_gbps: cnps.map(|_| 0.4),
    }
}

fn run(d: Discipline, flows: Vec<Flow>, totals: Totals, victim_p99_tail: u64) -> DisciplineRun {
    DisciplineRun {
        discipline: d,
        ran: Ran::of(d, vec!["roce_write_bw".into(), "--validate".into()]),
        outcome: Outcome {
            ok: true,
            error: None,
            client_exit: Some(0),
            server_exit: Some(0),
            victim_exit: Some(0),
            switch_exit: Some(0),
        },
        flows,
        totals,
        victim: Some(victim(2000, victim_p99_tail)),
        convergence: Convergence {
            time_s: Some(0.3),
            reason: None,
        },
        series: Some(Series {
            interval_ms: 100,
            t_ms: vec![100.0, 200.0],
            bytes: vec![vec![11_250_000, 22_500_000], vec![11_250_000, 22_500_000]],
            gbps: vec![vec![0.9, 0.9], vec![0.9, 0.9]],
        }),
        queue_samples: vec![(0.0, 0), (1000.0, 40_000)],
    }
}

/// The study.
pub(crate) fn doc() -> CongestionDoc {
    let ecn = run(
        Discipline::EcnDcqcn,
        vec![
            flow(0, 0.92, Some(0), Some(120)),
            flow(1, 0.90, Some(0), Some(118)),
        ],
        Totals {
            goodput_gbps: 1.82,
            goodput_fraction: Some(0.91),
            jain: Some(0.9999),
            jain_steady: Some(0.999),
            steady_from_s: Some(0.3),
            steady_basis: "converged".into(),
            offered_bytes: Some(460_000_000),
            drops: Some(0),
            headroom_drops: Some(0),
            marks: Some(950),
            ce_marked_packets: Some(952),
            cnps_sent: Some(238),
            cnps_handled: Some(238),
            rate_cuts: Some(118),
            retransmitted_bytes: Some(0),
            pause_frames_sent: Some(0),
            pause_frames_received: Some(0),
            paused_ms_switch: Some(0.0),
            paused_ms_senders: Some(0.0),
            max_queue_bytes: Some(120_000),
        },
        20,
    );
    let lossy = run(
        Discipline::LossyGbn,
        vec![
            flow(0, 1.2, Some(40_000_000), None),
            flow(1, 0.3, Some(60_000_000), None),
        ],
        Totals {
            goodput_gbps: 1.5,
            goodput_fraction: Some(0.75),
            jain: Some(0.735),
            jain_steady: Some(0.7),
            steady_from_s: Some(1.0),
            steady_basis: "second half (never converged)".into(),
            drops: Some(7000),
            retransmitted_bytes: Some(100_000_000),
            marks: Some(0),
            max_queue_bytes: Some(1_048_576),
            ..Totals::default()
        },
        900,
    );
    CongestionDoc {
        schema: CONGESTION_SCHEMA.into(),
        schema_version: CONGESTION_SCHEMA_VERSION,
        tool: Tool {
            name: "roce_compare".into(),
            version: "0.1.0".into(),
        },
        started_at: "2026-12-03T18:00:00Z".into(),
        finished_at: "2026-12-03T18:01:00Z".into(),
        provenance: None,
        setup: Setup {
            bottleneck_gbps: 2.0,
            thresholds: Thresholds {
                buffer_bytes: 1_048_576,
                kmin_bytes: 40_000,
                kmax_bytes: 160_000,
                pmax: 0.2,
                xoff_bytes: 300_000,
                xon_bytes: 200_000,
            },
            pfc_prio: 3,
            flows: 2,
            size_bytes: 65536,
            duration_s: 2,
            series_interval_ms: 100,
            victim_size_bytes: Some(64),
            mtu_bytes: 1500,
            host_cores: 2,
            placement: vec![Placement {
                role: "switch".into(),
                core: Some(0),
            }],
            convergence: ConvergenceRule {
                band: 0.1,
                window_ms: 200,
            },
        },
        idle_victim: Some(victim(2000, 12)),
        runs: vec![lossy, ecn],
        notes: vec!["senders and receiver share core 1".into()],
    }
}
