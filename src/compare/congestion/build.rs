//! A discipline's run of the study's document from what its processes wrote: the bulk client's and
//! server's result JSON (each flow's share and series, its per-queue-pair counters, the pause frames
//! the senders received), the victim's latency histogram and the switch's stats. Pure: the files
//! are read by `super::run`.
//!
//! The result JSON is read by its keys (`results[0].qps`, `results[0].qp_series`,
//! `test.counters.per_qp`, `test.counters.pfc`, TCP's `test.counters.congestion_control`), so that a run without one of them (an older binary,
//! a run that failed) still makes a document whose missing figures are null.

use super::plan::{CONVERGE_BAND, PRIO, Study};
use crate::params::TransportKind;
use crate::results::congestion::figures::{
    convergence, goodput_fraction, interval_rates, jain_index, steady_jain,
};
use crate::results::congestion::{
    Convergence, Discipline, DisciplineRun, Flow, Outcome, Ran, Series, Totals, Victim,
};
use serde_json::Value;

/// What the switch counted over a run (from `roce_switch --stats`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SwitchCounts {
    /// Bytes offered to the egress port.
    pub(crate) offered_bytes: u64,
    /// Packets dropped with the buffer full.
    pub(crate) dropped_packets: u64,
    /// Lossless packets dropped although paused upstream.
    pub(crate) headroom_drops: u64,
    /// Packets marked CE.
    pub(crate) marked_packets: u64,
    /// The queue's peak, bytes.
    pub(crate) max_queue_bytes: u64,
    /// PFC pause frames sent upstream.
    pub(crate) pause_frames_sent: u64,
    /// Time the upstream was held paused, ns.
    pub(crate) paused_ns: u64,
    /// [µs, bytes] of the queue over time.
    pub(crate) queue_samples: Vec<[u64; 2]>,
}

/// Everything one discipline's run left.
#[derive(Debug, Clone, Default)]
pub(crate) struct Left<'a> {
    /// The bulk client's result JSON.
    pub(crate) client: Option<&'a Value>,
    /// The bulk server's.
    pub(crate) server: Option<&'a Value>,
    /// The victim's latency histogram (ns).
    pub(crate) victim: Option<hdrhistogram::Histogram<u64>>,
    /// The switch's counts.
    pub(crate) switch: Option<SwitchCounts>,
}

/// `v` at `path` (object keys, or array indices as numbers).
fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) => v.get(i),
        Err(_) => v.get(*k),
    })
}

fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// The sum of `key` over `items`; None when no item has it (the transport does not count it).
fn sum(items: &[Value], key: &str) -> Option<u64> {
    items
        .iter()
        .filter_map(|i| u64_at(i, key))
        .fold(None, |acc, x| Some(acc.unwrap_or(0) + x))
}

/// `test.counters.per_qp` of a result, in queue-pair order.
fn per_qp(doc: Option<&Value>) -> Vec<Value> {
    doc.and_then(|d| at(d, &["test", "counters", "per_qp"]))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The item of `items` whose `qp` is `q`.
fn of_qp(items: &[Value], q: u32) -> Option<&Value> {
    items.iter().find(|i| u64_at(i, "qp") == Some(u64::from(q)))
}

/// Each flow: its share of the client's result, its counters from both sides.
fn flows(client: Option<&Value>, server: Option<&Value>) -> Vec<Flow> {
    let (c, s) = (per_qp(client), per_qp(server));
    let shares = client
        .and_then(|d| at(d, &["results", "0", "qps"]))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    shares
        .iter()
        .filter_map(|share| {
            let q = u32::try_from(u64_at(share, "qp")?).ok()?;
            let (cq, sq) = (of_qp(&c, q), of_qp(&s, q));
            let cu = |k: &str| cq.and_then(|v| u64_at(v, k));
            Some(Flow {
                flow: q,
                qpn: cu("qpn").and_then(|n| u32::try_from(n).ok()),
                bytes: u64_at(share, "bytes").unwrap_or(0),
                goodput_gbps: share
                    .get("goodput_gbps")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0),
                retransmitted_bytes: cu("retransmitted_bytes"),
                ce_marked_packets: sq.and_then(|v| u64_at(v, "ce_marked_packets")),
                cnps_sent: sq.and_then(|v| u64_at(v, "cnps_sent")),
                cnps_handled: cu("cnps_handled"),
                rate_cuts: cu("rate_cuts"),
                rate_lowest_gbps: cq
                    .and_then(|v| v.get("rate_lowest_gbps"))
                    .and_then(Value::as_f64),
            })
        })
        .collect()
}

/// The client's `qp_series`, per flow.
fn series(client: Option<&Value>) -> Option<Series> {
    let s = client.and_then(|d| at(d, &["results", "0", "qp_series"]))?;
    let t_ms: Vec<f64> = s
        .get("t_ms")?
        .as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let rows: Vec<Vec<u64>> = s
        .get("bytes")?
        .as_array()?
        .iter()
        .map(|r| {
            r.as_array()
                .map(|r| r.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default()
        })
        .collect();
    let flows = rows.iter().map(Vec::len).max().unwrap_or(0);
    if rows.len() != t_ms.len() || rows.iter().any(|r| r.len() != flows) {
        return None;
    }
    // The file has a row per sample; the document a row per flow.
    let bytes: Vec<Vec<u64>> = (0..flows)
        .map(|f| rows.iter().map(|r| r[f]).collect())
        .collect();
    let gbps = bytes.iter().map(|b| interval_rates(&t_ms, b)).collect();
    Some(Series {
        interval_ms: u64_at(s, "interval_ms").unwrap_or(0),
        t_ms,
        bytes,
        gbps,
    })
}

/// `rx_prio{PRIO}_pause` and its duration (µs) from a result's `test.counters.pfc`.
fn pauses_received(client: Option<&Value>) -> (Option<u64>, Option<u64>) {
    let Some(pfc) = client.and_then(|d| at(d, &["test", "counters", "pfc"])) else {
        return (None, None);
    };
    (
        Some(u64_at(pfc, &format!("rx_prio{PRIO}_pause")).unwrap_or(0)),
        Some(u64_at(pfc, &format!("rx_prio{PRIO}_pause_duration")).unwrap_or(0)),
    )
}

/// One discipline's run of the document.
pub(crate) fn discipline_run(
    study: &Study,
    d: Discipline,
    client_args: Vec<String>,
    outcome: Outcome,
    left: Left<'_>,
) -> DisciplineRun {
    let flows = flows(left.client, left.server);
    let series = series(left.client);
    let goodput: f64 = if flows.is_empty() {
        left.client
            .and_then(|c| at(c, &["results", "0", "bandwidth", "avg_gbps"]))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    } else {
        flows.iter().map(|f| f.goodput_gbps).sum()
    };
    let window = study.converge_window_ms as f64;
    let converged = match &series {
        Some(s) => convergence(&s.t_ms, &s.bytes, window, CONVERGE_BAND),
        None => Convergence {
            time_s: None,
            reason: Some("the client wrote no per-flow series".into()),
        },
    };
    let (jain_steady, steady_from_s, steady_basis) = match &series {
        Some(s) => steady_jain(&s.t_ms, &s.bytes, &converged),
        None => (None, None, "no series".into()),
    };
    let (c, s) = (per_qp(left.client), per_qp(left.server));
    let (pauses, paused_us) = pauses_received(left.client);
    let sw = left.switch.as_ref();
    let rates: Vec<f64> = flows.iter().map(|f| f.goodput_gbps).collect();
    let totals = Totals {
        goodput_gbps: goodput,
        goodput_fraction: goodput_fraction(goodput, study.bottleneck_gbps),
        jain: jain_index(&rates),
        jain_steady,
        steady_from_s,
        steady_basis,
        offered_bytes: sw.map(|s| s.offered_bytes),
        drops: sw.map(|s| s.dropped_packets),
        headroom_drops: sw.map(|s| s.headroom_drops),
        marks: sw.map(|s| s.marked_packets),
        ce_marked_packets: sum(&s, "ce_marked_packets"),
        cnps_sent: sum(&s, "cnps_sent"),
        cnps_handled: sum(&c, "cnps_handled"),
        rate_cuts: sum(&c, "rate_cuts"),
        retransmitted_bytes: sum(&c, "retransmitted_bytes"),
        pause_frames_sent: sw.map(|s| s.pause_frames_sent),
        pause_frames_received: pauses,
        paused_ms_switch: sw.map(|s| s.paused_ns as f64 / 1e6),
        paused_ms_senders: paused_us.map(|us| us as f64 / 1e3),
        max_queue_bytes: sw.map(|s| s.max_queue_bytes),
    };
    let mut ran = Ran::of(d, client_args);
    if d.transport() == TransportKind::Tcp {
        // What the kernel ran, read back from the client's connections, not what was asked.
        ran.cc = match left
            .client
            .and_then(|c| at(c, &["test", "counters", "congestion_control"]))
            .and_then(Value::as_str)
        {
            Some(name) => name.into(),
            None => format!("{} (asked; not read back)", d.cc()),
        };
    }
    DisciplineRun {
        discipline: d,
        ran,
        outcome,
        flows,
        totals,
        victim: left.victim.map(Victim::from_histogram),
        convergence: converged,
        series,
        queue_samples: sw
            .map(|s| {
                s.queue_samples
                    .iter()
                    .map(|&[t, b]| (t as f64, b))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn study() -> Study {
        let a = <super::super::plan::CongestionArgs as clap::FromArgMatches>::from_arg_matches(
            &<super::super::plan::CongestionArgs as clap::Args>::augment_args(clap::Command::new(
                "t",
            ))
            .get_matches_from([
                "t",
                "--congestion",
                "--flows",
                "2",
                "--bottleneck",
                "2",
            ]),
        )
        .unwrap();
        let mut s = Study::new(&a, None, Some(2)).unwrap();
        s.converge_window_ms = 20;
        s
    }

    /// Two flows, each 1.25 MB per 10 ms (1 Gb/s), flow 1 from 20 ms on, to 60 ms.
    fn client() -> Value {
        json!({
            "schema": "roceperf.result",
            "test": {"counters": {
                "per_qp": [
                    {"qp": 0, "qpn": 17, "retransmitted_bytes": 4096, "cnps_handled": 30,
                     "rate_cuts": 12, "rate_lowest_gbps": 0.4, "ce_marked_packets": null},
                    {"qp": 1, "qpn": 18, "retransmitted_bytes": 0, "cnps_handled": 20,
                     "rate_cuts": 8, "rate_lowest_gbps": 0.5}
                ],
                "pfc": {"rx_pause_malformed": 0, "rx_prio3_pause": 7, "rx_prio3_pause_duration": 2500}
            }},
            "results": [{
                "size": 65536,
                "bandwidth": {"avg_gbps": 1.9},
                "qps": [
                    {"qp": 0, "bytes": 6_250_000, "messages": 95, "goodput_gbps": 1.0},
                    {"qp": 1, "bytes": 3_750_000, "messages": 57, "goodput_gbps": 0.6}
                ],
                "qp_series": {
                    "interval_ms": 10,
                    "t_ms": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
                    "bytes": [[1_250_000, 0], [2_500_000, 0], [3_750_000, 1_250_000],
                              [5_000_000, 2_500_000], [6_250_000, 3_750_000],
                              [7_500_000, 5_000_000]]
                }
            }]
        })
    }

    fn server() -> Value {
        json!({"test": {"counters": {"per_qp": [
            {"qp": 0, "ce_marked_packets": 300, "cnps_sent": 31},
            {"qp": 1, "ce_marked_packets": 200, "cnps_sent": 21}
        ]}}})
    }

    fn ok() -> Outcome {
        Outcome {
            ok: true,
            error: None,
            client_exit: Some(0),
            server_exit: Some(0),
            victim_exit: None,
            switch_exit: Some(0),
        }
    }

    #[test]
    fn a_run_is_built_from_both_sides_and_the_switch() {
        let (c, s) = (client(), server());
        let sw = SwitchCounts {
            offered_bytes: 11_000_000,
            marked_packets: 480,
            max_queue_bytes: 90_000,
            pause_frames_sent: 9,
            paused_ns: 3_000_000,
            queue_samples: vec![[0, 0], [100, 40_000]],
            ..SwitchCounts::default()
        };
        let left = Left {
            client: Some(&c),
            server: Some(&s),
            victim: None,
            switch: Some(sw),
        };
        let args = vec!["roce_write_bw".into(), "--validate".into()];
        let run = discipline_run(&study(), Discipline::PfcDcqcn, args, ok(), left);
        let f1 = &run.flows[1];
        assert_eq!(
            (
                f1.flow,
                f1.qpn,
                f1.bytes,
                f1.ce_marked_packets,
                f1.cnps_sent,
                f1.cnps_handled
            ),
            (1, Some(18), 3_750_000, Some(200), Some(21), Some(20))
        );
        let t = &run.totals;
        assert!((t.goodput_gbps - 1.6).abs() < 1e-9);
        assert!((t.goodput_fraction.unwrap() - 0.8).abs() < 1e-9);
        // (1.0 + 0.6)^2 / (2 * (1.0 + 0.36)) = 2.56 / 2.72.
        assert!((t.jain.unwrap() - 2.56 / 2.72).abs() < 1e-9);
        assert_eq!(
            (
                t.ce_marked_packets,
                t.cnps_sent,
                t.cnps_handled,
                t.rate_cuts
            ),
            (Some(500), Some(52), Some(50), Some(20))
        );
        assert_eq!(t.retransmitted_bytes, Some(4096));
        assert_eq!(
            (t.marks, t.drops, t.pause_frames_sent),
            (Some(480), Some(0), Some(9))
        );
        assert_eq!(t.pause_frames_received, Some(7));
        assert_eq!(
            (t.paused_ms_switch, t.paused_ms_senders),
            (Some(3.0), Some(2.5))
        );
        // The series, per flow: flow 1 catches up from 30 ms; with 20 ms windows the window ending
        // at 40 ms is the first of the fair run to the end.
        let sr = run.series.as_ref().unwrap();
        assert_eq!(
            sr.bytes[1],
            [0, 0, 1_250_000, 2_500_000, 3_750_000, 5_000_000]
        );
        assert_eq!(sr.gbps[0], [1.0; 6]);
        assert_eq!(run.convergence.time_s, Some(0.04));
        assert_eq!(
            (t.jain_steady, t.steady_basis.as_str()),
            (Some(1.0), "converged")
        );
        assert!(run.ran.validate);
        assert_eq!(run.queue_samples, [(0.0, 0), (100.0, 40_000)]);
    }

    #[test]
    fn what_a_failed_or_tcp_run_did_not_write_is_null() {
        let mut c = client();
        c["test"]["counters"] = json!({"congestion_control": "cubic", "per_qp": [
            {"qp": 0, "qpn": null, "retransmitted_bytes": 9000, "cnps_handled": null},
            {"qp": 1, "qpn": null, "retransmitted_bytes": 1000, "cnps_handled": null}
        ]});
        let left = Left {
            client: Some(&c),
            ..Left::default()
        };
        let run = discipline_run(&study(), Discipline::TcpCubic, vec![], ok(), left);
        let t = &run.totals;
        assert_eq!((t.cnps_handled, t.cnps_sent, t.drops), (None, None, None));
        assert_eq!(t.retransmitted_bytes, Some(10_000));
        assert_eq!((t.pause_frames_received, t.paused_ms_senders), (None, None));
        assert_eq!(run.flows[0].qpn, None);
        assert!(!run.ran.validate);
        assert_eq!(
            run.ran.cc, "cubic",
            "read back from the client's connections"
        );
        let mut bbr = c.clone();
        bbr["test"]["counters"]["congestion_control"] = json!("bbr");
        let left = Left {
            client: Some(&bbr),
            ..Left::default()
        };
        let run = discipline_run(&study(), Discipline::TcpCubic, vec![], ok(), left);
        assert_eq!(run.ran.cc, "bbr", "what ran, not what was asked");
        let run = discipline_run(
            &study(),
            Discipline::TcpCubic,
            vec![],
            ok(),
            Left::default(),
        );
        assert_eq!(run.ran.cc, "cubic (asked; not read back)");
        let failed = discipline_run(
            &study(),
            Discipline::Pfc,
            vec![],
            Outcome {
                ok: false,
                error: Some("client exited 1".into()),
                ..ok()
            },
            Left::default(),
        );
        assert!(failed.flows.is_empty() && failed.series.is_none());
        assert_eq!(failed.totals.goodput_gbps, 0.0);
        assert_eq!(
            failed.convergence.reason.as_deref(),
            Some("the client wrote no per-flow series")
        );
    }
}
