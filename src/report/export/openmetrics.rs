//! OpenMetrics (`--metrics FILE`): a run's, a comparison's or a fabric matrix's figures in the
//! Prometheus text exposition format, replaced whole, for node_exporter's textfile collector (a `*.prom`
//! file in its `--collector.textfile.directory`) or any scraper.
//!
//! One gauge family per figure, in Prometheus' base units with the unit in the name (bytes per second,
//! messages per second, seconds): bandwidth, message rate, the latency percentiles that hold (a
//! withheld one is left out, never a number), and the transport's counts (retransmissions, drops,
//! NAKs, CE marks, CNPs, rate cuts), each labelled with its test, transport, RoCE version, role,
//! device, peer and message size; a fabric's cells with their pair (ranks and hosts).

mod fabric;
mod text;

use fabric::fabric_exposition;
pub(crate) use fabric::watch_exposition;

use super::{Document, ExportFile, Exporter, Files, Place};
use crate::results::{CompareRun, CompareSet, Measured, RunInfo, SizeResult};
use crate::stats::{LatencyStats, percentile_holds};
use serde_json::Value;
use text::{Exposition, Kind};

/// `--metrics`: the exposition of a finished run (and of each interval of a run without end), of a
/// comparison, or of a fabric matrix; none for the other documents.
pub(crate) struct OpenMetricsExporter;

impl Exporter for OpenMetricsExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let text = match *doc {
            Document::Start(_) | Document::Congestion(_) => return Ok(Vec::new()),
            Document::Run { info, results, .. } => run_exposition(info, results).text(),
            Document::Interval { info, result, .. } => {
                run_exposition(info, std::slice::from_ref(result)).text()
            }
            Document::Compare(set) => compare_exposition(set).text(),
            Document::Fabric(run) => fabric_text(&run.doc),
        };
        Ok(vec![ExportFile::whole(place.join("roceperf.prom"), text)])
    }
}

/// A fabric matrix's exposition, as `--metrics` writes it and a watching fabric serves it.
pub(crate) fn fabric_text(doc: &crate::results::fabric::FabricDoc) -> String {
    fabric_exposition(doc).text()
}

/// Bytes per second from Gb/s (10^9 bit/s).
pub(crate) fn bytes_per_second(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0
}

/// Seconds from microseconds.
pub(crate) fn seconds(us: f64) -> f64 {
    us / 1e6
}

/// A percentile's label value: `50`, `99`, `99.9` (percent, as `--percentiles` takes them).
fn percentile_label(pct: f64) -> String {
    format!("{pct}")
}

/// The figures of one message size, under `labels` plus its `size_bytes`.
fn size_figures(e: &mut Exposition, labels: &[(&str, &str)], r: &SizeResult) {
    let size = r.size.to_string();
    let mut l: Vec<(&str, &str)> = labels.to_vec();
    l.push(("size_bytes", &size));
    match &r.measured {
        Measured::Bandwidth(b) => {
            e.sample(
                "roceperf_bandwidth_bytes_per_second",
                "Average bandwidth, payload bytes per second (first post to last completion).",
                Kind::Gauge,
                &l,
                bytes_per_second(b.avg_gbps),
            );
            if let Some(peak) = b.peak_gbps {
                e.sample(
                    "roceperf_bandwidth_peak_bytes_per_second",
                    "perftest's peak bandwidth, payload bytes per second.",
                    Kind::Gauge,
                    &l,
                    bytes_per_second(peak),
                );
            }
            e.sample(
                "roceperf_messages_per_second",
                "Average message rate, messages per second.",
                Kind::Gauge,
                &l,
                b.msg_rate_mpps * 1e6,
            );
        }
        Measured::Latency { stats, .. } => latency_figures(e, &l, stats),
    }
    if let Some(lost) = r.lost {
        e.sample(
            "roceperf_lost_messages",
            "UC/UD: messages sent that never arrived, where this side could count them.",
            Kind::Gauge,
            &l,
            lost as f64,
        );
    }
    if let Some(cpu) = r.cpu_util {
        e.sample(
            "roceperf_cpu_utilization_ratio",
            "CPU utilisation of the datapath (--cpu_util), 0 to 1.",
            Kind::Gauge,
            &l,
            cpu / 100.0,
        );
    }
}

/// A latency summary: the percentiles that hold (the median among them), min, mean, max, samples.
fn latency_figures(e: &mut Exposition, labels: &[(&str, &str)], stats: &LatencyStats) {
    const HELP: &str = "Latency at a percentile, seconds (one-way for SEND and WRITE, the round trip for READ and atomics); a percentile with fewer than 10 samples beyond it is left out.";
    let mut held: Vec<(f64, f64)> = Vec::new();
    if percentile_holds(stats.samples, 50.0) {
        held.push((50.0, stats.median_us));
    }
    for p in &stats.percentiles {
        if let (Some(us), false) = (p.us, held.iter().any(|(pct, _)| *pct == p.pct)) {
            held.push((p.pct, us));
        }
    }
    for (pct, us) in held {
        let label = percentile_label(pct);
        let mut l = labels.to_vec();
        l.push(("percentile", &label));
        e.sample(
            "roceperf_latency_seconds",
            HELP,
            Kind::Gauge,
            &l,
            seconds(us),
        );
    }
    if stats.samples > 0 {
        let figures: [(&'static str, &'static str, f64); 3] = [
            (
                "roceperf_latency_min_seconds",
                "Smallest latency sample, seconds.",
                stats.min_us,
            ),
            (
                "roceperf_latency_mean_seconds",
                "Mean latency, seconds.",
                stats.mean_us,
            ),
            (
                "roceperf_latency_max_seconds",
                "Largest latency sample (the true maximum), seconds.",
                stats.max_us,
            ),
        ];
        for (name, help, us) in figures {
            e.sample(name, help, Kind::Gauge, labels, seconds(us));
        }
    }
    e.sample(
        "roceperf_latency_samples",
        "Latency samples the figures rest on.",
        Kind::Gauge,
        labels,
        stats.samples as f64,
    );
}

/// A run's exposition: every size's figures, then the transport's counts over the run.
pub(crate) fn run_exposition(info: &RunInfo, results: &[SizeResult]) -> Exposition {
    let role = match info.role {
        crate::params::Role::Client => "client",
        crate::params::Role::Server => "server",
    };
    let labels: Vec<(&str, &str)> = vec![
        ("test", info.test.name()),
        ("transport", info.transport.name()),
        ("roce", info.roce.map_or("", |r| r.name())),
        ("role", role),
        ("device", &info.device),
        ("peer", info.peer.as_deref().unwrap_or("")),
    ];
    let mut e = Exposition::new();
    for r in results {
        size_figures(&mut e, &labels, r);
    }
    if let Some(c) = &info.counters {
        counters(&mut e, &labels, c);
    }
    e
}

/// A count of `v` at `key`, when it is one.
fn count(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_u64).map(|n| n as f64)
}

/// The transport's counters (`test.counters`: soft's, or TCP's from TCP_INFO), totals and per queue
/// pair; a count the transport does not keep is left out.
fn counters(e: &mut Exposition, labels: &[(&str, &str)], c: &Value) {
    let totals: [(&'static str, &'static str, &str); 4] = [
        (
            "roceperf_retransmitted_packets",
            "Request packets (TCP: segments) sent again over the run.",
            "retransmitted_packets",
        ),
        (
            "roceperf_retransmitted_bytes",
            "Payload bytes sent again over the run.",
            "retransmitted_bytes",
        ),
        (
            "roceperf_retransmission_timeouts",
            "Retransmission timer expiries over the run (soft).",
            "timeouts",
        ),
        (
            "roceperf_ce_marked_packets",
            "RoCE v2 packets received Congestion Experienced over the run (soft).",
            "np_ecn_marked_roce_packets",
        ),
    ];
    for (name, help, key) in totals {
        if let Some(v) = count(c, key) {
            e.sample(name, help, Kind::Gauge, labels, v);
        }
    }
    let by: [(&'static str, &'static str, &str, &str); 3] = [
        (
            "roceperf_dropped_packets",
            "Packets received and dropped over the run, by reason (soft).",
            "drops",
            "reason",
        ),
        (
            "roceperf_naks_sent",
            "NAKs sent over the run, by kind (soft).",
            "naks_sent",
            "kind",
        ),
        (
            "roceperf_naks_received",
            "NAKs received over the run, by kind (soft).",
            "naks_received",
            "kind",
        ),
    ];
    for (name, help, key, label) in by {
        let Some(map) = c.get(key).and_then(Value::as_object) else {
            continue;
        };
        for (k, v) in map {
            if let Some(v) = v.as_u64() {
                let mut l = labels.to_vec();
                l.push((label, k));
                e.sample(name, help, Kind::Gauge, &l, v as f64);
            }
        }
    }
    // Soft keeps congestion control's counts; `cc` is absent until a CNP was sent or handled.
    if c.get("drops").is_some() {
        let cc = c.get("cc").cloned().unwrap_or(Value::Null);
        let figures: [(&'static str, &'static str, &str); 3] = [
            (
                "roceperf_cnps_sent",
                "CNPs sent as notification point over the run (soft).",
                "np_cnp_sent",
            ),
            (
                "roceperf_cnps_handled",
                "CNPs handled as reaction point over the run (soft).",
                "rp_cnp_handled",
            ),
            (
                "roceperf_rate_cuts",
                "CNPs that cut a queue pair's rate over the run (soft).",
                "rp_rate_cuts",
            ),
        ];
        for (name, help, key) in figures {
            e.sample(
                name,
                help,
                Kind::Gauge,
                labels,
                count(&cc, key).unwrap_or(0.0),
            );
        }
    }
    per_qp(e, labels, c);
}

/// `test.counters.per_qp`: each queue pair's counts, labelled with its index.
fn per_qp(e: &mut Exposition, labels: &[(&str, &str)], c: &Value) {
    let Some(qps) = c.get("per_qp").and_then(Value::as_array) else {
        return;
    };
    let figures: [(&'static str, &'static str, &str); 6] = [
        (
            "roceperf_qp_retransmitted_packets",
            "One queue pair's (TCP: connection's) request packets sent again over the run.",
            "retransmitted_packets",
        ),
        (
            "roceperf_qp_retransmitted_bytes",
            "One queue pair's payload bytes sent again over the run.",
            "retransmitted_bytes",
        ),
        (
            "roceperf_qp_ce_marked_packets",
            "One queue pair's packets received CE-marked over the run (soft).",
            "ce_marked_packets",
        ),
        (
            "roceperf_qp_cnps_sent",
            "One queue pair's CNPs sent over the run (soft).",
            "cnps_sent",
        ),
        (
            "roceperf_qp_cnps_handled",
            "One queue pair's CNPs handled over the run (soft).",
            "cnps_handled",
        ),
        (
            "roceperf_qp_rate_cuts",
            "One queue pair's rate cuts over the run (soft).",
            "rate_cuts",
        ),
    ];
    for qp in qps {
        let Some(index) = qp.get("qp").and_then(Value::as_u64) else {
            continue;
        };
        let index = index.to_string();
        let mut l = labels.to_vec();
        l.push(("qp", &index));
        for (name, help, key) in figures {
            if let Some(v) = count(qp, key) {
                e.sample(name, help, Kind::Gauge, &l, v);
            }
        }
    }
}

/// A comparison's exposition: each row's figures per size, labelled with its transport's label and
/// link, and the floor of its host path measured in the same run beside it.
pub(crate) fn compare_exposition(set: &CompareSet) -> Exposition {
    let mut e = Exposition::new();
    for run in &set.runs {
        compare_run(&mut e, run);
    }
    e
}

fn compare_run(e: &mut Exposition, run: &CompareRun) {
    let labels: Vec<(&str, &str)> = vec![
        ("test", run.test.name()),
        ("transport", run.transport.name()),
        ("roce", run.roce.map_or("", |r| r.name())),
        ("label", &run.label),
        ("link", run.link.as_deref().unwrap_or("")),
    ];
    for r in &run.results {
        size_figures(e, &labels, r);
    }
    for f in &run.floors {
        let size = f.size.to_string();
        let mut l = labels.clone();
        l.push(("size_bytes", &size));
        if let Some(us) = f.median_us {
            e.sample(
                "roceperf_floor_latency_seconds",
                "The median of the row's host path floor (roce_ref, measured in the same comparison), seconds in the row's terms.",
                Kind::Gauge,
                &l,
                seconds(us),
            );
        }
        if let Some(gbps) = f.gbps {
            e.sample(
                "roceperf_floor_bandwidth_bytes_per_second",
                "The payload rate the row's host path floor carries in the row's packets, bytes per second.",
                Kind::Gauge,
                &l,
                bytes_per_second(gbps),
            );
        }
    }
}

#[cfg(test)]
mod tests;
