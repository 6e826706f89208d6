//! `congestion.csv`: one row per flow of each discipline, then that discipline's total row. Units in the
//! column names; a figure not measured there is an empty cell, as in compare.csv.

use super::{CongestionDoc, DisciplineRun, Flow};

/// The columns of `congestion.csv`. Changing this list is a breaking change for users' spreadsheets
/// (`tests/data/golden/congestion.csv` holds it).
pub(crate) const COLUMNS: &[&str] = &[
    "started_at",
    "tool_version",
    "discipline",
    "row",
    "flow",
    "transport",
    "cc",
    "recovery",
    "validate",
    "ok",
    "bottleneck_gbps",
    "buffer_bytes",
    "flows",
    "size_bytes",
    "duration_s",
    "bytes",
    "goodput_gbps",
    "goodput_fraction",
    "jain",
    "jain_steady",
    "converge_s",
    "retransmitted_bytes",
    "ce_marked_packets",
    "cnps_sent",
    "cnps_handled",
    "rate_cuts",
    "drops",
    "headroom_drops",
    "marks",
    "pause_frames_sent",
    "pause_frames_received",
    "paused_ms_switch",
    "paused_ms_senders",
    "max_queue_bytes",
    "victim_p50_us",
    "victim_p99_us",
    "victim_p99_9_us",
    "victim_p99_vs_idle",
];

/// The header line (without its line end).
#[cfg(test)]
pub(crate) fn header_line() -> String {
    COLUMNS.join(",")
}

fn n(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn f(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(String::new, |v| format!("{v:.decimals$}"))
}

/// The cells every row of `run` starts with, up to `duration_s`.
fn lead(doc: &CongestionDoc, run: &DisciplineRun, row: &str, flow: String) -> Vec<String> {
    let s = &doc.setup;
    vec![
        doc.started_at.clone(),
        doc.tool.version.clone(),
        run.discipline.name().into(),
        row.into(),
        flow,
        run.ran.transport.name().into(),
        run.ran.cc.clone(),
        run.ran
            .recovery
            .map(|r| r.name().to_string())
            .unwrap_or_default(),
        run.ran.validate.to_string(),
        run.outcome.ok.to_string(),
        s.bottleneck_gbps.to_string(),
        s.thresholds.buffer_bytes.to_string(),
        s.flows.to_string(),
        s.size_bytes.to_string(),
        s.duration_s.to_string(),
    ]
}

fn flow_row(doc: &CongestionDoc, run: &DisciplineRun, fl: &Flow) -> Vec<String> {
    let mut r = lead(doc, run, "flow", fl.flow.to_string());
    r.extend([
        fl.bytes.to_string(),
        format!("{:.6}", fl.goodput_gbps),
        f(
            super::figures::goodput_fraction(fl.goodput_gbps, doc.setup.bottleneck_gbps),
            4,
        ),
        String::new(),
        String::new(),
        String::new(),
        n(fl.retransmitted_bytes),
        n(fl.ce_marked_packets),
        n(fl.cnps_sent),
        n(fl.cnps_handled),
        n(fl.rate_cuts),
    ]);
    // The switch's and the victim's columns belong to the total row.
    r.extend(std::iter::repeat_n(String::new(), COLUMNS.len() - r.len()));
    r
}

fn total_row(doc: &CongestionDoc, run: &DisciplineRun) -> Vec<String> {
    let t = &run.totals;
    let bytes: u64 = run.flows.iter().map(|f| f.bytes).sum();
    let v = run.victim.as_ref();
    let mut r = lead(doc, run, "total", String::new());
    r.extend([
        bytes.to_string(),
        format!("{:.6}", t.goodput_gbps),
        f(t.goodput_fraction, 4),
        f(t.jain, 4),
        f(t.jain_steady, 4),
        f(run.convergence.time_s, 3),
        n(t.retransmitted_bytes),
        n(t.ce_marked_packets),
        n(t.cnps_sent),
        n(t.cnps_handled),
        n(t.rate_cuts),
        n(t.drops),
        n(t.headroom_drops),
        n(t.marks),
        n(t.pause_frames_sent),
        n(t.pause_frames_received),
        f(t.paused_ms_switch, 3),
        f(t.paused_ms_senders, 3),
        n(t.max_queue_bytes),
        f(v.and_then(|v| v.p50_us), 3),
        f(v.and_then(|v| v.p99_us), 3),
        f(v.and_then(|v| v.p99_9_us), 3),
        f(doc.victim_p99_vs_idle(run), 3),
    ]);
    r
}

/// `congestion.csv`: the header, then per discipline its flows' rows and its total row.
pub(crate) fn congestion_csv(doc: &CongestionDoc) -> Result<String, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(COLUMNS)?;
    for run in &doc.runs {
        for fl in &run.flows {
            w.write_record(flow_row(doc, run, fl))?;
        }
        w.write_record(total_row(doc, run))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
