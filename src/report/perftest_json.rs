//! perftest's `--out_json` document, as perftest 26.04 writes it: the same keys in the same order,
//! the same nesting and number formats, so a parser of perftest's JSON reads ours.
//!
//! The text is built the way perftest's `dprintf` calls build it (`write_test_info_to_file`,
//! `write_bw_report_to_file`, `write_report_lat_to_file`, `write_report_lat_duration_to_file` in
//! perftest_parameters.c), with the values the console row shows. Two departures, both to keep the
//! document valid JSON: `--output=bandwidth|message_rate` writes its one key without perftest's
//! trailing comma, and `--report-both` writes one document holding `results` (the sum, as before),
//! `results_local` and `results_remote` (the shape of perftest PR #322) instead of rewriting the file
//! three times. Strings are JSON-escaped and a non-finite number is written as 0. And a percentile
//! with fewer than 10 samples beyond it (`percentile_99.9` of a 1,000-iteration run, which perftest
//! fills with its largest sample) is `null`. One addition: the run's provenance, as the last key
//! (`roceperf_provenance`) on the last line before the closing brace.

use crate::params::OutputSelect;
use crate::params::{Metric, Role, TransportKind, Verb};
use crate::results::{Measured, RunInfo, SizeResult};
use crate::stats::{BandwidthStats, LatencyStats};
use std::fmt::Write;

/// What goes into one `--out_json` document.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PerftestJson<'a> {
    /// The run.
    pub info: &'a RunInfo,
    /// The row the console shows (bidirectional: the sum of both sides).
    pub result: &'a SizeResult,
    /// `--output`: one figure instead of the results.
    pub single: Option<OutputSelect>,
    /// `--report-both`: this side's and the peer's figures.
    pub both: Option<(&'a SizeResult, &'a SizeResult)>,
}

/// The key of the provenance roceperf adds after perftest's keys (results/README.md).
pub(crate) const PROVENANCE_KEY: &str = "roceperf_provenance";

/// A JSON string literal.
fn text(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// C's `%.Nf` for a figure that must stay a JSON number.
fn num(v: f64, decimals: usize) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    format!("{v:.decimals$}")
}

/// perftest's verb in test names (`testsStr`): `Send`, `RDMA_Write`, `RDMA_Read`, `Atomic`.
fn verb_name(v: Verb) -> &'static str {
    match v {
        Verb::Send => "Send",
        Verb::Write => "RDMA_Write",
        Verb::Read => "RDMA_Read",
        Verb::Atomic => "Atomic",
    }
}

/// `"test_info": {...}` and the comma after it, as `write_test_info_to_file` prints it.
fn test_info(out: &mut String, info: &RunInfo) {
    let bw = info.test.metric == Metric::Bandwidth;
    let kind = match (bw, info.bidirectional) {
        (true, true) => "Bidirectional_BW_",
        (true, false) => "BW_",
        (false, _) => "Latency_",
    };
    out.push_str("\"test_info\": {\n");
    // The atomic tests name their operation after the verb (`atomicTypesStr`): Atomic_FETCH_AND_ADD_BW_Test.
    let atomic = match info.atomic_type {
        Some(op) if info.test.verb == Verb::Atomic => format!("{}_", op.name()),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "\"test\": \"{}_{atomic}{kind}Test\",",
        verb_name(info.test.verb)
    );
    let transport_type = match info.transport {
        TransportKind::Tcp => "TCP",
        // The verbs transport type, "IB" for RoCE too, as the console prints it.
        TransportKind::Soft | TransportKind::Verbs => "IB",
    };
    let _ = writeln!(
        out,
        "\"Dual_port\": \"OFF\",\n\"Device\": {},",
        text(&info.device)
    );
    let _ = writeln!(
        out,
        "\"Number_of_qps\": {},\n\"Transport_type\": \"{transport_type}\",",
        info.qps
    );
    // `-c` (`connStr`); the TCP baseline has no queue pairs and is written as the RC it stands in for.
    let connection = info.connection.map_or("RC", |c| c.name());
    let _ = writeln!(
        out,
        "\"Connection_type\": \"{connection}\",\n\"Using_SRQ\": \"OFF\","
    );
    out.push_str("\"PCIe_relax_order\": \"OFF\",\n\"ibv_wr_API\": \"OFF\",\n");
    if info.role == Role::Client || info.bidirectional {
        let _ = writeln!(out, "\"TX_depth\": {},", info.tx_depth);
    }
    if let Some(rx) = info.rx_depth
        && info.test.verb.consumes_receive()
        && (info.role == Role::Server || info.bidirectional)
    {
        let _ = writeln!(out, "\"RX_depth\": {rx},");
    }
    if bw {
        let _ = writeln!(out, "\"CQ_Moderation\": {},", info.cq_mod);
    }
    // TCP has no path MTU: null, not a made-up number.
    let mtu = info.mtu.map_or("null".into(), |m| m.to_string());
    let _ = writeln!(out, "\"Mtu\": {mtu},");
    let _ = writeln!(out, "\"Link_type\": {},", text(&info.link_type));
    if let Some(gid) = info.gid_index {
        let _ = writeln!(out, "\"GID_index\": {gid},");
    }
    // perftest prints the outstanding reads for READ and atomic tests, the inline size otherwise.
    if info.test.verb.reads_back() {
        let _ = writeln!(out, "\"Outstand_reads\": {},", info.out_reads.unwrap_or(0));
    } else {
        let inline = info.inline_size.map_or("null".into(), |m| m.to_string());
        let _ = writeln!(out, "\"Max_inline_data\": {inline},");
    }
    let on = |b: bool| if b { "ON" } else { "OFF" };
    let _ = writeln!(out, "\"rdma_cm_QPs\": \"{}\",", on(info.rdma_cm));
    out.push_str("\"Use_ROCm_memory\": \"OFF\",\n\"Use_MUSA_memory\": \"OFF\",\n");
    // perftest's exchange_state: "rdma_cm" when its messages rode a CM-connected queue pair (`-R`
    // against a perftest peer); roceperf's own dialect keeps them on TCP even with -R.
    let exchange = if info.exchange_rdma_cm {
        "rdma_cm"
    } else {
        "Ethernet"
    };
    let _ = writeln!(out, "\"Data_ex_method\": \"{exchange}\"\n}},");
}

/// The body of one `"results"` object (between its braces), as perftest's report functions print it.
fn results_body(out: &mut String, info: &RunInfo, r: &SizeResult, single: Option<OutputSelect>) {
    let cpu = |out: &mut String| match r.cpu_util {
        Some(c) => {
            let _ = writeln!(out, ",\n\"CPU_util\": {}", num(c, 2));
        }
        None => out.push('\n'),
    };
    match &r.measured {
        Measured::Bandwidth(b) => bw_results(out, info, r, b, single, cpu),
        Measured::Latency { stats, histogram } => {
            let duration = info.duration_s.is_some();
            match single {
                Some(_) if duration => {
                    let _ = writeln!(out, "\"t_avg\": {}", num(stats.mean_us, 6));
                }
                Some(_) => {
                    let _ = writeln!(out, "\"avg_lat\": {}", num(stats.mean_us, 6));
                }
                None if duration => {
                    // Transactions per second: one per round trip (READ: per sample).
                    let rtt = stats.mean_us * f64::from(info.test.rtt_factor());
                    let tps = if rtt > 0.0 { 1e6 / rtt } else { 0.0 };
                    size_fields(out, r);
                    let _ = write!(
                        out,
                        "\"t_avg\": {},\n\"tps_average\": {}",
                        num(stats.mean_us, 2),
                        num(tps, 2)
                    );
                    cpu(out);
                }
                None => {
                    lat_results(out, r, stats, histogram);
                    cpu(out);
                }
            }
        }
    }
}

/// The fields a full record of one size starts with, bandwidth or latency.
fn size_fields(out: &mut String, r: &SizeResult) {
    let _ = write!(
        out,
        "\"MsgSize\": {},\n\"n_iterations\": {},\n",
        r.size, r.iterations
    );
}

fn bw_results(
    out: &mut String,
    info: &RunInfo,
    r: &SizeResult,
    b: &BandwidthStats,
    single: Option<OutputSelect>,
    cpu: impl Fn(&mut String),
) {
    let gbits = info.report_gbits;
    let (peak, avg) = if gbits {
        (b.peak_gbps, b.avg_gbps)
    } else {
        (b.peak_mibps, b.avg_mibps)
    };
    match single {
        Some(OutputSelect::MessageRate) => {
            let _ = writeln!(out, "\"msgRate_avg\": {}", num(b.msg_rate_mpps, 6));
        }
        Some(_) => {
            let _ = writeln!(out, "\"bw_avg\": {}", num(avg, 6));
        }
        None => {
            // perftest's REPORT_FMT_EXT_JSON: six decimals when a Gb/s figure is below 0.1.
            let d = if gbits && avg < 0.1 { 6 } else { 2 };
            size_fields(out, r);
            let _ = write!(
                out,
                "\"BW_peak\": {},\n\"BW_average\": {},\n\"MsgRate\": {}",
                num(peak.unwrap_or(0.0), d),
                num(avg, d),
                num(b.msg_rate_mpps, 6)
            );
            cpu(out);
        }
    }
}

fn lat_results(
    out: &mut String,
    r: &SizeResult,
    s: &LatencyStats,
    h: &hdrhistogram::Histogram<u64>,
) {
    // A withheld percentile (fewer than 10 samples beyond it) is null, not perftest's largest sample.
    let pct = |p: f64| s.at(h, p).map_or_else(|| "null".to_owned(), |v| num(v, 2));
    size_fields(out, r);
    let _ = write!(
        out,
        "\"t_min\": {},\n\"t_max\": {},\n\"t_typical\": {},\n\"t_avg\": {},\n\"t_stdev\": {},\n\"percentile_99\": {},\n\"percentile_99.9\": {}",
        num(s.min_us, 2),
        num(s.max_us, 2),
        num(s.median_us, 2),
        num(s.mean_us, 2),
        num(s.stdev_us, 2),
        pct(99.0),
        pct(99.9)
    );
}

/// The whole document, ending in a newline.
pub(crate) fn perftest_json(doc: &PerftestJson<'_>) -> String {
    let mut out = String::with_capacity(1024);
    out.push_str("{\n");
    test_info(&mut out, doc.info);
    let block = |out: &mut String, key: &str, r: &SizeResult| {
        let _ = writeln!(out, "\"{key}\": {{");
        results_body(out, doc.info, r, doc.single);
        out.push('}');
    };
    block(&mut out, "results", doc.result);
    if let Some((local, remote)) = doc.both {
        out.push_str(",\n");
        block(&mut out, "results_local", local);
        out.push_str(",\n");
        block(&mut out, "results_remote", remote);
    }
    // roceperf's one addition, last and on one line so that every line before it is perftest's:
    // where the result came from (a reader of perftest's keys passes over an extra one).
    if let Some(p) = &doc.info.provenance
        && let Ok(json) = serde_json::to_string(p)
    {
        let _ = write!(out, ",\n\"{PROVENANCE_KEY}\": {json}");
    }
    out.push_str("\n}\n");
    out
}

#[cfg(test)]
mod tests;
