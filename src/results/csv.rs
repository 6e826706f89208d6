//! The CSV writer: a run's rows, appended across runs, and a comparison's `compare.csv`.
//!
//! A run gets one row per message size, appended across runs under a single header; `compare.csv` has
//! one row per transport × test × size.
//!
//! The columns are stable and carry their units in their names. Bandwidth and latency rows share one
//! column set (cells that do not apply are empty), so a file that mixes tests still imports as one table.
//! Latency percentile columns are fixed (p90, p99, p99.9, p99.99) whatever `--percentiles` asked for,
//! computed from the histogram, so that rows from different runs line up; a percentile with fewer than
//! 10 samples beyond it (p99.9 of fewer than 10,000 samples) is an empty cell, as in compare.csv.

use super::files::{WriteError, append_under_header};
use super::{CompareRun, CompareSet, Figures, Measured, RunInfo, SizeResult, role_name};
use std::path::Path;

/// The column names, in order. Changing this list is a breaking change for users' spreadsheets.
pub(crate) const COLUMNS: &[&str] = &[
    "timestamp",
    "tool_version",
    "test",
    "transport",
    "roce",
    "role",
    "device",
    "peer",
    "bidirectional",
    "qps",
    "mtu_bytes",
    "tx_depth",
    "cq_mod",
    "inline_bytes",
    "cpu_core",
    "warmup_iterations",
    "duration_s",
    "size_bytes",
    "iterations",
    "bw_elapsed_ns",
    "bw_avg_gbps",
    "bw_avg_mibps",
    "bw_peak_gbps",
    "bw_peak_mibps",
    "msg_rate_mpps",
    "lat_samples",
    "lat_min_us",
    "lat_median_us",
    "lat_mean_us",
    "lat_stdev_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_p99_99_us",
    "lat_max_us",
    "cpu_util_pct",
    "impair",
    "recovery",
    "connection",
    "lost_messages",
    "atomic_type",
    "rate_limit",
    "rate_limit_units",
    "rate_achieved",
    "interval_start_s",
    "interval_end_s",
    "qp",
    "qp_bytes",
    "retransmitted_packets",
    "retransmitted_bytes",
    "ce_marked_packets",
    "cnps_sent",
    "cnps_handled",
    "rate_cuts",
    "interrupted",
    "lat_percentiles_us",
    "host",
    "kernel",
    "cpu_model",
    "cpus",
    "nic",
    "nic_driver",
    "nic_firmware",
    "commit",
    "command",
];

/// The columns after the counters: the percentiles `--percentiles` asked for, then the run's
/// provenance ([`super::Provenance`]).
const TAIL_COLUMNS: usize = 10;

/// The transport's counters the CSV carries (`test.counters` in JSON), in [`COLUMNS`] order from
/// `retransmitted_packets`: key paths into the run's total counters, and the keys of a queue
/// pair's (`per_qp`).
const COUNTER_COLUMNS: [(&[&str], &str); 6] = [
    (&["retransmitted_packets"], "retransmitted_packets"),
    (&["retransmitted_bytes"], "retransmitted_bytes"),
    (&["np_ecn_marked_roce_packets"], "ce_marked_packets"),
    (&["cc", "np_cnp_sent"], "cnps_sent"),
    (&["cc", "rp_cnp_handled"], "cnps_handled"),
    (&["cc", "rp_rate_cuts"], "rate_cuts"),
];

/// The percentiles behind `lat_p90_us` .. `lat_p99_99_us`.
const PERCENTILE_COLUMNS: [f64; 4] = [90.0, 99.0, 99.9, 99.99];

/// The header line as it appears in the file (without the line ending).
pub fn header_line() -> String {
    COLUMNS.join(",")
}

/// The cells of one row; `interval`: the seconds from the run's start to the interval's start and
/// end, for an interval row of `--run_infinitely` (empty cells for a whole run).
pub(crate) fn row_in(info: &RunInfo, r: &SizeResult, interval: Option<(f64, f64)>) -> Vec<String> {
    let mut cells = figure_cells(info, r, interval);
    cells.extend(std::iter::repeat_n(
        String::new(),
        COLUMNS.len() - TAIL_COLUMNS - cells.len(),
    ));
    cells.extend(tail_cells(info, Some(r)));
    cells
}

/// The last columns: a latency row's asked percentiles as `p99.999=1.234` (space-separated; a
/// withheld one `p99.999=`, an empty value as in its own column), then the provenance, every cell
/// empty for a run described without one.
fn tail_cells(info: &RunInfo, r: Option<&SizeResult>) -> Vec<String> {
    let percentiles = match r.map(|r| &r.measured) {
        Some(Measured::Latency { stats, .. }) => stats
            .percentiles
            .iter()
            .filter(|p| info.percentiles.is_empty() || info.percentiles.contains(&p.pct))
            .map(|p| {
                let v = p.us.map(|v| format!("{v:.3}")).unwrap_or_default();
                format!("{}={v}", p.label())
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    let mut cells = vec![percentiles];
    match &info.provenance {
        Some(p) => {
            let nic = p.nic.as_ref();
            cells.extend([
                p.host.clone(),
                p.kernel.clone(),
                p.cpu_model.clone().unwrap_or_default(),
                p.cpus.to_string(),
                nic.map(|n| n.device.clone()).unwrap_or_default(),
                nic.and_then(|n| n.driver.clone()).unwrap_or_default(),
                nic.and_then(|n| n.firmware.clone()).unwrap_or_default(),
                p.commit.clone(),
                p.command.clone(),
            ]);
        }
        None => cells.extend(std::iter::repeat_n(String::new(), TAIL_COLUMNS - 1)),
    }
    cells
}

/// The rows of one size: its row, then with several queue pairs one row per queue pair (`qp` set:
/// its messages as `iterations`, its goodput as `bw_avg_gbps`, its bytes as `qp_bytes`). `last`:
/// the run's last size, whose rows carry the transport's counters, read when the run ended (the
/// totals on the size's row, each queue pair's on its own), and, in a run a signal cut short
/// during it, who was signalled (`interrupted`: `SIGINT`, `SIGTERM` or `peer`).
fn size_rows(info: &RunInfo, r: &SizeResult, last: bool) -> Vec<Vec<String>> {
    let cut = info
        .interrupted
        .as_ref()
        .filter(|i| last && i.partial && i.size_bytes == Some(r.size))
        .map(|i| i.by.clone())
        .unwrap_or_default();
    let mut rows = size_figure_rows(info, r, last);
    for row in &mut rows {
        // `interrupted` sits between the counters and the tail columns.
        row.insert(COLUMNS.len() - TAIL_COLUMNS - 1, cut.clone());
    }
    rows
}

/// [`size_rows`] without `interrupted`.
fn size_figure_rows(info: &RunInfo, r: &SizeResult, last: bool) -> Vec<Vec<String>> {
    let counters = info.counters.as_ref().filter(|_| last);
    let mut row = figure_cells(info, r, None);
    row.extend([String::new(), String::new()]);
    row.extend(COUNTER_COLUMNS.map(|(path, _)| {
        counters
            .and_then(|c| path.iter().try_fold(c, |v, k| v.get(k)))
            .and_then(serde_json::Value::as_u64)
            // A soft run without a CNP has no `cc` object: none sent, handled or cut.
            .or_else(|| (counters.is_some() && path[0] == "cc").then_some(0))
            .map(|v| v.to_string())
            .unwrap_or_default()
    }));
    row.extend(tail_cells(info, Some(r)));
    let mut rows = vec![row];
    let Measured::Bandwidth(b) = &r.measured else {
        return rows;
    };
    if b.qps.len() < 2 {
        return rows;
    }
    let per_qp = counters
        .and_then(|c| c.get("per_qp"))
        .and_then(|v| v.as_array());
    for q in &b.qps {
        let mut one = r.clone();
        one.iterations = q.messages;
        let mut stats =
            crate::stats::BandwidthStats::compute(r.size, q.messages, b.elapsed_ns, None);
        stats.pacing = None;
        one.measured = Measured::Bandwidth(stats);
        let mut cells = figure_cells(info, &one, None);
        cells.extend([q.qp.to_string(), q.bytes.to_string()]);
        let mine = per_qp.and_then(|l| l.get(q.qp as usize));
        cells.extend(COUNTER_COLUMNS.map(|(_, key)| {
            mine.and_then(|c| c.get(key))
                .and_then(serde_json::Value::as_u64)
                .map(|v| v.to_string())
                .unwrap_or_default()
        }));
        cells.extend(tail_cells(info, None));
        rows.push(cells);
    }
    rows
}

/// The cells of a row up to `interval_end_s`.
fn figure_cells(info: &RunInfo, r: &SizeResult, interval: Option<(f64, f64)>) -> Vec<String> {
    fn opt<T: ToString>(v: Option<T>) -> String {
        v.map(|v| v.to_string()).unwrap_or_default()
    }
    let f = |v: f64, decimals: usize| format!("{v:.decimals$}");
    let mut cells = vec![
        info.started_at.clone(),
        info.version.clone(),
        info.test.name().to_owned(),
        info.transport.name().to_owned(),
        opt(info.roce.map(|r| r.name())),
        role_name(info.role).to_owned(),
        info.device.clone(),
        opt(info.peer.as_deref()),
        info.bidirectional.to_string(),
        info.qps.to_string(),
        opt(info.mtu),
        info.tx_depth.to_string(),
        info.cq_mod.to_string(),
        opt(info.inline_size),
        opt(info.cpu),
        info.warmup.to_string(),
        opt(info.duration_s),
        r.size.to_string(),
        r.iterations.to_string(),
    ];
    match &r.measured {
        Measured::Bandwidth(b) => {
            cells.extend([
                b.elapsed_ns.to_string(),
                f(b.avg_gbps, 6),
                f(b.avg_mibps, 3),
                opt(b.peak_gbps.map(|v| f(v, 6))),
                opt(b.peak_mibps.map(|v| f(v, 3))),
                f(b.msg_rate_mpps, 6),
            ]);
            cells.extend(std::iter::repeat_n(String::new(), 10));
        }
        Measured::Latency { stats, histogram } => {
            cells.extend(std::iter::repeat_n(String::new(), 6));
            // Three decimals of a microsecond is the histogram's 1 ns resolution.
            let us = |v: f64| f(v, 3);
            cells.push(stats.samples.to_string());
            cells.extend([stats.min_us, stats.median_us, stats.mean_us, stats.stdev_us].map(us));
            // A withheld percentile (fewer than 10 samples beyond it) is an empty cell.
            cells.extend(PERCENTILE_COLUMNS.map(|p| opt(stats.at(histogram, p).map(us))));
            cells.push(us(stats.max_us));
        }
    }
    cells.push(opt(r.cpu_util.map(|v| f(v, 2))));
    cells.push(opt(info.impair.as_deref()));
    cells.push(opt(info.recovery.map(|r| r.name())));
    cells.push(opt(info.connection.map(|c| c.name())));
    cells.push(opt(r.lost));
    cells.push(opt(info.atomic_type.map(|a| a.name())));
    let pacing = match &r.measured {
        Measured::Bandwidth(b) => b.pacing.as_ref(),
        Measured::Latency { .. } => None,
    };
    cells.push(opt(pacing.map(|p| p.target)));
    cells.push(opt(pacing.map(|p| p.units.clone())));
    cells.push(opt(pacing.map(|p| f(p.achieved, 6))));
    cells.push(opt(interval.map(|(s, _)| f(s, 3))));
    cells.push(opt(interval.map(|(_, e)| f(e, 3))));
    debug_assert_eq!(
        cells.len(),
        COLUMNS.len() - 3 - COUNTER_COLUMNS.len() - TAIL_COLUMNS
    );
    cells
}

/// Appends one row per result to `path`, writing the header first when the file is new or empty.
///
/// An existing file must start with exactly our header; otherwise nothing is written and the error names
/// the file and both headers, so rows never end up under the wrong columns.
pub fn append_csv(path: &Path, info: &RunInfo, results: &[SizeResult]) -> Result<(), WriteError> {
    let rows = run_rows(info, results).map_err(|source| csv_error(path, source))?;
    append_under_header(path, &header_line(), &rows)
}

/// The rows of a run's results as CSV text (no header): one line per message size, each followed
/// by its queue pairs' lines when it has several ([`size_rows`]).
pub(crate) fn run_rows(info: &RunInfo, results: &[SizeResult]) -> Result<Vec<u8>, ::csv::Error> {
    let n = results.len();
    rows_text(
        results
            .iter()
            .enumerate()
            .flat_map(|(i, r)| size_rows(info, r, i + 1 == n)),
    )
}

/// The row of one `--run_infinitely` interval (`span`: seconds from the run's start) as CSV text.
pub(crate) fn interval_row(
    info: &RunInfo,
    r: &SizeResult,
    span: (f64, f64),
) -> Result<Vec<u8>, ::csv::Error> {
    rows_text(std::iter::once(row_in(info, r, Some(span))))
}

/// The error of a CSV text that could not be made for `path`.
pub(crate) fn csv_error(path: &Path, source: ::csv::Error) -> WriteError {
    WriteError::Csv {
        path: path.to_owned(),
        source,
    }
}

/// Rows as CSV text without a header, each line ending in `\n`.
fn rows_text(rows: impl Iterator<Item = Vec<String>>) -> Result<Vec<u8>, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .has_headers(false)
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    for cells in rows {
        w.write_record(cells)?;
    }
    w.into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))
}

/// compare.csv's columns, in order. Names carry their units; cells that do not apply are empty.
pub(crate) const COMPARE_COLUMNS: &[&str] = &[
    "started_at",
    "label",
    "test",
    "transport",
    "roce",
    "size_bytes",
    "iterations",
    "lat_samples",
    "lat_min_us",
    "lat_median_us",
    "lat_mean_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_max_us",
    "bw_avg_gbps",
    "bw_avg_mibps",
    "bw_peak_gbps",
    "msg_rate_mpps",
    "path",
    "floor_reference",
    "floor_us",
    "above_floor_us",
    "floor_gbps",
    "share_of_floor",
    "floor_note",
    "ceiling_gbps",
    "share_of_ceiling",
    "ratio_to_v1",
];

/// compare.csv's last column when a run of the comparison records the link it crossed (a comparison
/// read from files that do not say has none, and keeps [`COMPARE_COLUMNS`] only).
pub(crate) const COMPARE_LINK_COLUMN: &str = "link";

/// The rows of compare.csv for one run; with `link`, the link column last.
fn csv_rows(set: &CompareSet, run: &CompareRun, link: bool) -> Vec<Vec<String>> {
    let f3 = |v: f64| format!("{v:.3}");
    let f6 = |v: f64| format!("{v:.6}");
    run.results
        .iter()
        .map(|r| {
            let mut row = vec![
                set.started_at.clone(),
                run.label.clone(),
                run.test.name().to_owned(),
                run.transport.name().to_owned(),
                run.roce.map(|v| v.name().to_owned()).unwrap_or_default(),
                r.size.to_string(),
                r.iterations.to_string(),
            ];
            match (&r.measured, r.figures()) {
                (Measured::Latency { stats, .. }, Figures::Latency(l)) => {
                    row.push(stats.samples.to_string());
                    row.extend([stats.min_us, l.median_us, stats.mean_us].map(f3));
                    // Withheld percentiles are empty cells.
                    row.extend([l.p99_us, l.p999_us].map(|v| v.map(f3).unwrap_or_default()));
                    row.push(f3(l.max_us));
                    row.extend(std::iter::repeat_n(String::new(), 4));
                }
                (Measured::Bandwidth(b), Figures::Bandwidth(bf)) => {
                    row.extend(std::iter::repeat_n(String::new(), 7));
                    row.extend([
                        f6(bf.gbps),
                        f3(b.avg_mibps),
                        b.peak_gbps.map(f6).unwrap_or_default(),
                        f6(bf.mpps),
                    ]);
                }
                // Figures::of follows the measurement's kind, so the kinds always agree.
                _ => row.extend(std::iter::repeat_n(String::new(), 11)),
            }
            row.extend(beside_cells(set, run, r.size));
            debug_assert_eq!(row.len(), COMPARE_COLUMNS.len());
            if link {
                row.push(run.link.clone().unwrap_or_default());
            }
            row
        })
        .collect()
}

/// The cells after the figures: the host path, its floor, the wire's ceiling and the ratio to RoCE v1
/// on the same path (empty where they do not apply).
fn beside_cells(set: &CompareSet, run: &CompareRun, size: u64) -> [String; 10] {
    let f3 = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    let f4 = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    let floor = run.floor_at(size);
    let ceiling = run.ceiling_at(size);
    [
        run.path.map(|p| p.name().to_owned()).unwrap_or_default(),
        floor.and_then(|f| f.reference.clone()).unwrap_or_default(),
        f3(floor.and_then(|f| f.median_us)),
        f3(floor.and_then(|f| f.above_us)),
        f3(floor.and_then(|f| f.gbps)),
        f4(floor.and_then(|f| f.share)),
        floor.and_then(|f| f.note.clone()).unwrap_or_default(),
        f3(ceiling.map(|c| c.gbps)),
        f4(ceiling.map(|c| c.share)),
        f4(set.ratio_to_v1(run, size)),
    ]
}

/// compare.csv as text: the header, then every run's rows in order.
pub(crate) fn compare_csv(set: &CompareSet) -> Result<String, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let link = set.runs.iter().any(|r| r.link.is_some());
    let mut header = COMPARE_COLUMNS.to_vec();
    if link {
        header.push(COMPARE_LINK_COLUMN);
    }
    w.write_record(&header)?;
    for run in &set.runs {
        for row in csv_rows(set, run, link) {
            w.write_record(&row)?;
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;
    use std::collections::HashMap;

    fn read_rows(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
        rows_of(::csv::Reader::from_path(path).unwrap())
    }

    /// The header, and each row as a map from column name to cell.
    fn rows_of<R: std::io::Read>(
        mut rdr: ::csv::Reader<R>,
    ) -> (Vec<String>, Vec<HashMap<String, String>>) {
        let headers: Vec<String> = rdr.headers().unwrap().iter().map(str::to_owned).collect();
        let rows = rdr.deserialize().map(Result::unwrap).collect();
        (headers, rows)
    }

    #[test]
    fn columns_are_unique_and_rows_fit_them() {
        let mut seen = std::collections::HashSet::new();
        assert!(COLUMNS.iter().all(|c| seen.insert(*c)));
        assert_eq!(row_in(&bw_info(), &bw_result(), None).len(), COLUMNS.len());
        assert_eq!(
            row_in(&lat_info(), &lat_result(), None).len(),
            COLUMNS.len()
        );
    }

    #[test]
    fn appending_twice_keeps_one_header_and_mixes_bw_and_lat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.csv");
        append_csv(&path, &bw_info(), &[bw_result(), bw_result()]).unwrap();
        append_csv(&path, &lat_info(), &[lat_result()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("timestamp,").count(), 1, "{text}");
        assert_eq!(text.lines().count(), 4);
        let (headers, rows) = read_rows(&path);
        assert_eq!(headers, COLUMNS);
        assert_eq!(rows.len(), 3);
        let bw = &rows[0];
        assert_eq!(bw["test"], "write_bw");
        assert_eq!(bw["transport"], "soft");
        assert_eq!(bw["roce"], "v2");
        assert_eq!(bw["role"], "client");
        assert_eq!(bw["size_bytes"], "65536");
        assert_eq!(bw["iterations"], "5000");
        assert_eq!(bw["timestamp"], "2026-11-29T10:24:25Z");
        assert!((bw["bw_avg_mibps"].parse::<f64>().unwrap() - 11028.45).abs() < 1e-3);
        assert!((bw["bw_peak_mibps"].parse::<f64>().unwrap() - 11030.12).abs() < 1e-3);
        assert!((bw["bw_avg_gbps"].parse::<f64>().unwrap() - 92.514).abs() < 1e-3);
        assert_eq!(bw["lat_p99_us"], "");
        let lat = &rows[2];
        assert_eq!(lat["test"], "send_lat");
        assert_eq!(lat["roce"], "");
        assert_eq!(lat["bw_avg_gbps"], "");
        assert_eq!(lat["lat_samples"], "1000");
        assert_eq!(lat["cpu_util_pct"], "12.50");
        let p99: f64 = lat["lat_p99_us"].parse().unwrap();
        let p90: f64 = lat["lat_p90_us"].parse().unwrap();
        let max: f64 = lat["lat_max_us"].parse().unwrap();
        assert!(p90 <= p99 && p99 <= max && max > 3.0, "{p90} {p99} {max}");
    }

    #[test]
    fn several_queue_pairs_add_a_row_each_and_the_last_size_carries_the_counters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qps.csv");
        let mut info = bw_info();
        info.counters = Some(serde_json::json!({
            "retransmitted_packets": 5, "retransmitted_bytes": 20480,
            "np_ecn_marked_roce_packets": 9,
            "per_qp": [
                {"qp": 0, "retransmitted_packets": 5, "retransmitted_bytes": 20480,
                 "ce_marked_packets": 9, "cnps_sent": 0, "cnps_handled": 0, "rate_cuts": 0},
                {"qp": 1, "retransmitted_packets": 0, "retransmitted_bytes": 0,
                 "ce_marked_packets": null, "cnps_sent": null, "cnps_handled": null, "rate_cuts": null}
            ]
        }));
        let mut r = bw_result();
        if let Measured::Bandwidth(b) = &mut r.measured {
            b.qps = crate::stats::flows::QpShare::from_counts(65536, &[3000, 2000], b.elapsed_ns);
        }
        append_csv(&path, &info, &[r.clone(), r]).unwrap();
        let (headers, rows) = read_rows(&path);
        assert_eq!(headers, COLUMNS);
        assert_eq!(rows.len(), 6, "two sizes, each with its two queue pairs");
        let (first, last) = (&rows[0], &rows[3]);
        assert_eq!(
            (
                first["qp"].as_str(),
                first["retransmitted_packets"].as_str()
            ),
            ("", "")
        );
        assert_eq!(last["qp"], "");
        assert_eq!(last["retransmitted_packets"], "5");
        assert_eq!(last["ce_marked_packets"], "9");
        assert_eq!(last["cnps_sent"], "0", "no cc object: nothing sent");
        let (q0, q1) = (&rows[4], &rows[5]);
        assert_eq!(
            (q0["qp"].as_str(), q0["iterations"].as_str()),
            ("0", "3000")
        );
        assert_eq!(q0["qp_bytes"], (3000 * 65536).to_string());
        assert_eq!(q0["retransmitted_bytes"], "20480");
        assert_eq!(
            (q1["qp"].as_str(), q1["ce_marked_packets"].as_str()),
            ("1", "")
        );
        let total: f64 = last["bw_avg_gbps"].parse().unwrap();
        let shares: f64 = [q0, q1]
            .iter()
            .map(|q| q["bw_avg_gbps"].parse::<f64>().unwrap())
            .sum();
        // 5000 messages in the row, 3000 + 2000 in its queue pairs: the shares add up.
        assert!((total - shares).abs() < 1e-5, "{total} {shares}");
        assert_eq!(
            rows[1]["retransmitted_packets"], "",
            "only the last size's rows"
        );
    }

    #[test]
    fn fields_with_commas_are_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.csv");
        let mut info = bw_info();
        info.device = "weird,dev\"ice".into();
        append_csv(&path, &info, &[bw_result()]).unwrap();
        let (_, rows) = read_rows(&path);
        assert_eq!(rows[0]["device"], "weird,dev\"ice");
    }

    #[test]
    fn foreign_header_is_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.csv");
        std::fs::write(&path, "a,b,c\n1,2,3\n").unwrap();
        let err = append_csv(&path, &bw_info(), &[bw_result()]).unwrap_err();
        assert!(matches!(err, WriteError::CsvHeaderMismatch { .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("other.csv") && msg.contains("a,b,c") && msg.contains("--csv"),
            "{msg}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a,b,c\n1,2,3\n");
    }

    #[test]
    fn a_truncated_last_line_is_not_glued_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.csv");
        std::fs::write(&path, header_line()).unwrap();
        append_csv(&path, &bw_info(), &[bw_result()]).unwrap();
        let (_, rows) = read_rows(&path);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["size_bytes"], "65536");
    }

    #[test]
    fn unwritable_path_names_the_file() {
        let err = append_csv(Path::new("/nonexistent-dir/x.csv"), &bw_info(), &[]).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/x.csv"), "{err}");
    }

    #[test]
    fn csv_has_a_row_per_transport_and_size_with_units_in_headers() {
        let set = set();
        let text = compare_csv(&set).unwrap();
        let (headers, rows) = rows_of(::csv::Reader::from_reader(text.as_bytes()));
        assert_eq!(headers, COMPARE_COLUMNS);
        assert_eq!(rows.len(), 3 + 9);
        let v2_64k = rows
            .iter()
            .find(|r| r["label"] == "RoCE v2 (soft)" && r["size_bytes"] == "65536")
            .unwrap();
        assert_eq!(v2_64k["test"], "write_bw");
        assert_eq!(v2_64k["roce"], "v2");
        assert!((v2_64k["bw_avg_gbps"].parse::<f64>().unwrap() - 45.0).abs() < 1e-3);
        assert_eq!(v2_64k["ratio_to_v1"], "", "no path recorded: no ratio");
        assert_eq!(v2_64k["path"], "");
        assert_eq!(v2_64k["lat_median_us"], "");
        let tcp_lat = rows
            .iter()
            .find(|r| r["transport"] == "tcp" && r["test"] == "write_lat")
            .unwrap();
        assert_eq!(tcp_lat["roce"], "");
        assert_eq!(tcp_lat["lat_samples"], "10000");
        assert!(
            tcp_lat["lat_p99_9_us"].parse::<f64>().unwrap()
                > tcp_lat["lat_median_us"].parse().unwrap()
        );
    }

    #[test]
    fn a_link_column_ends_the_rows_when_runs_record_their_link() {
        let mut set = set();
        let plain = compare_csv(&set).unwrap();
        set.runs[0].link = Some("veth (netns a<->b, MTU 9000)".into());
        set.runs[1].link = Some("lo".into());
        let text = compare_csv(&set).unwrap();
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        assert_eq!(header, format!("{},link", COMPARE_COLUMNS.join(",")));
        let first = lines.next().unwrap();
        assert!(
            first.ends_with(",\"veth (netns a<->b, MTU 9000)\""),
            "{first}"
        );
        assert!(
            lines.last().unwrap().ends_with(','),
            "no link recorded: empty cell"
        );
        // Without links, the file is as before.
        assert!(plain.starts_with(&format!("{}\n", COMPARE_COLUMNS.join(","))));
    }
}
