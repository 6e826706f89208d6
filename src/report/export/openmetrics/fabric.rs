//! A fabric matrix as metric families: one sample per cell (its pair: client and server rank and
//! host), each pair's state and flag, the run's counts, bad hosts and ranks; and what a watching fabric
//! adds to what it serves (its rounds).

use super::text::{Exposition, Kind};
use super::{bytes_per_second, seconds};
use crate::results::fabric::{FabricDoc, HostState, Matrix, MatrixMetric, PairState};

/// Every matrix of `doc`, its pairs' states and flags, and its summary.
pub(crate) fn fabric_exposition(doc: &FabricDoc) -> Exposition {
    let mut e = Exposition::new();
    let mut phases = Vec::new();
    for m in &doc.matrices {
        // A (leg, test)'s figures share their pairs' states: said once, with its first figure.
        let first = !phases.contains(&(m.leg, m.test.as_str()));
        if first {
            phases.push((m.leg, m.test.as_str()));
        }
        matrix(&mut e, doc, m, first);
    }
    summary(&mut e, doc);
    e
}

/// What a watching fabric adds to the matrices it serves: the rounds completed, when the last one
/// ended (seconds since the Unix epoch; left out before the first), and the interval between rounds.
pub(crate) fn watch_exposition(rounds: u64, last_end_unix_s: Option<f64>, every_s: f64) -> String {
    let mut e = Exposition::new();
    e.sample(
        "roceperf_fabric_watch_rounds_total",
        "Rounds of the schedule this roce_fabric --watch completed.",
        Kind::Counter,
        &[],
        rounds as f64,
    );
    if let Some(t) = last_end_unix_s {
        e.sample(
            "roceperf_fabric_watch_last_round_end_timestamp_seconds",
            "When the last completed round ended, seconds since the Unix epoch.",
            Kind::Gauge,
            &[],
            t,
        );
    }
    e.sample(
        "roceperf_fabric_watch_interval_seconds",
        "--watch: the pause between the end of a round and the start of the next, seconds.",
        Kind::Gauge,
        &[],
        every_s,
    );
    e.text()
}

/// The host name of `rank`, `?` when unknown.
fn host(doc: &FabricDoc, rank: usize) -> &str {
    doc.hosts.get(rank).map_or("?", |h| h.host.as_str())
}

/// One matrix's cells, and, for the first figure of its (leg, test), each scheduled pair's state.
fn matrix(e: &mut Exposition, doc: &FabricDoc, m: &Matrix, first_of_phase: bool) {
    // `soft v2` or `tcp`: the transport, then the RoCE version.
    let mut words = m.label.split_whitespace();
    let (transport, roce) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let size = m.size_bytes.map(|s| s.to_string()).unwrap_or_default();
    let (family, help, percentile, value): (&'static str, &'static str, &str, fn(f64) -> f64) =
        match m.metric {
            MatrixMetric::BwAvg => (
                "roceperf_fabric_bandwidth_bytes_per_second",
                "A pair's average bandwidth, payload bytes per second (row: client rank, column: server rank).",
                "",
                bytes_per_second,
            ),
            MatrixMetric::MsgRate => (
                "roceperf_fabric_messages_per_second",
                "A pair's average message rate, messages per second.",
                "",
                |mpps| mpps * 1e6,
            ),
            MatrixMetric::LatMedian | MatrixMetric::LatP99 => (
                "roceperf_fabric_latency_seconds",
                "A pair's latency at a percentile, seconds (a withheld percentile is left out).",
                if m.metric == MatrixMetric::LatMedian {
                    "50"
                } else {
                    "99"
                },
                seconds,
            ),
        };
    // What every sample of this (leg, test) is labelled with, before its pair's labels.
    let phase = [
        ("leg", m.leg.name()),
        ("test", m.test.as_str()),
        ("transport", transport),
        ("roce", roce),
        ("size_bytes", size.as_str()),
    ];
    let n = m.status.len();
    for c in 0..n {
        for s in 0..n {
            let Some(state) = m.state(c, s) else { continue };
            let (client, server) = (c.to_string(), s.to_string());
            let mut labels = phase.to_vec();
            labels.extend([
                ("client", client.as_str()),
                ("server", server.as_str()),
                ("client_host", host(doc, c)),
                ("server_host", host(doc, s)),
            ]);
            if let Some(v) = m.value(c, s) {
                let mut l = labels.to_vec();
                l.push(("percentile", percentile));
                e.sample(family, help, Kind::Gauge, &l, value(v));
            }
            if first_of_phase {
                e.sample(
                    "roceperf_fabric_pair_ok",
                    "1 when both sides of the pair test exited 0 with a result, 0 when it failed, a rank was missing or the run ended first.",
                    Kind::Gauge,
                    &labels,
                    f64::from(u8::from(state == PairState::Ok)),
                );
            }
            if m.judged {
                e.sample(
                    "roceperf_fabric_pair_flagged",
                    "1 when the pair was flagged an outlier on the judged figure (ClusterKit's rules), else 0.",
                    Kind::Gauge,
                    &labels,
                    f64::from(u8::from(m.is_flagged(c, s))),
                );
            }
        }
    }
    if let (Some(share), MatrixMetric::BwAvg) = (&m.incast, m.metric) {
        let receiver = share.receiver.to_string();
        let mut labels = phase.to_vec();
        labels.extend([
            ("server", receiver.as_str()),
            ("server_host", host(doc, share.receiver)),
        ]);
        e.sample(
            "roceperf_fabric_incast_bandwidth_bytes_per_second",
            "--pattern incast: the senders' bandwidths into the receiver, summed, bytes per second.",
            Kind::Gauge,
            &labels,
            bytes_per_second(share.sum),
        );
        if let Some(j) = share.jain {
            e.sample(
                "roceperf_fabric_incast_jain_ratio",
                "--pattern incast: Jain's fairness index of the senders' bandwidths (1: equal shares, 1/N: one took all).",
                Kind::Gauge,
                &labels,
                j,
            );
        }
    }
}

/// The run's counts: pair tests by state, flagged pairs, bad hosts, ranks by state.
fn summary(e: &mut Exposition, doc: &FabricDoc) {
    let s = &doc.summary;
    for (state, n) in [
        ("ok", s.ok),
        ("failed", s.failed),
        ("missing", s.missing),
        ("not_run", s.not_run),
    ] {
        e.sample(
            "roceperf_fabric_pair_tests",
            "Pair tests of the run by how they ended.",
            Kind::Gauge,
            &[("status", state)],
            n as f64,
        );
    }
    e.sample(
        "roceperf_fabric_flagged_pairs",
        "Pairs flagged as outliers (retested or not; see roceperf_fabric_pair_flagged).",
        Kind::Gauge,
        &[],
        s.flagged.len() as f64,
    );
    for b in &s.bad_hosts {
        let rank = b.rank.to_string();
        e.sample(
            "roceperf_fabric_bad_host",
            "1 for a host flagged with at least three quarters of the peers it was measured with (a bad host).",
            Kind::Gauge,
            &[
                ("leg", b.leg.name()),
                ("test", b.test.as_str()),
                ("rank", rank.as_str()),
                ("host", b.host.as_str()),
            ],
            1.0,
        );
    }
    for (state, name) in [
        (HostState::Present, "present"),
        (HostState::Missing, "missing"),
        (HostState::Lost, "lost"),
    ] {
        let n = doc.hosts.iter().filter(|h| h.status == state).count();
        e.sample(
            "roceperf_fabric_ranks",
            "Ranks of the job by whether they took part.",
            Kind::Gauge,
            &[("status", name)],
            n as f64,
        );
    }
}
