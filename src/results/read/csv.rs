//! The CSV reader: a run's `--csv` rows or a comparison's `compare.csv`, as [`ResultRow`]s.
//!
//! Columns are found by name, so that either file (and a spreadsheet's re-save of it) reads the same.

use super::ReadError;
use crate::params::{RoceVersion, Role, TestKind, TransportKind};
use crate::results::{BandwidthFigures, Figures, LatencyFigures, ResultRow};
use crate::stats::percentile_holds;
use std::path::Path;

/// Columns a CSV must have (besides the figures): present in both per-run CSVs and compare.csv.
const CSV_KEY_COLUMNS: [&str; 4] = ["test", "transport", "roce", "size_bytes"];

/// Reads the rows of a roceperf CSV (a run's `--csv` or `compare.csv`); `path` names the file in errors.
pub(super) fn parse_csv(path: &Path, bytes: &[u8]) -> Result<Vec<ResultRow>, ReadError> {
    let err = |line: Option<usize>, what: String| ReadError::Csv {
        path: path.to_owned(),
        line,
        what,
    };
    // The csv crate numbers the lines of a CRLF file one short (a spreadsheet's re-save is CRLF), so
    // errors would name the line above the one at fault: read such a file with LF line ends.
    let lf: Vec<u8>;
    let bytes = if bytes.windows(2).any(|w| w == b"\r\n") {
        lf = bytes
            .iter()
            .enumerate()
            .filter(|&(i, &b)| !(b == b'\r' && bytes.get(i + 1) == Some(&b'\n')))
            .map(|(_, &b)| b)
            .collect();
        &lf[..]
    } else {
        bytes
    };
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes);
    let headers = rdr
        .headers()
        .map_err(|e| err(Some(1), format!("cannot read the header line: {e}")))?
        .clone();
    let col = |name: &str| headers.iter().position(|h| h.trim() == name);
    let mut key_cols = [0usize; 4];
    for (slot, name) in key_cols.iter_mut().zip(CSV_KEY_COLUMNS) {
        *slot = col(name).ok_or_else(|| {
            err(
                Some(1),
                format!(
                    "no {name:?} column; expected a CSV written by roceperf (--csv or compare.csv), \
                     whose header starts with e.g. \"timestamp,tool_version,test,transport,roce\""
                ),
            )
        })?;
    }
    let [c_test, c_transport, c_roce, c_size] = key_cols;
    let c_role = col("role");
    let c_label = col("label");
    let c_path = col("path");
    let c_samples = col("lat_samples");
    // A queue pair's row (`qp` set) details the size's row above it, which carries the figures.
    let c_qp = col("qp");
    let figure_cols = COLUMN_NAMES.map(col);
    if figure_cols.iter().all(Option::is_none) {
        return Err(err(
            Some(1),
            "no figure columns (bw_avg_gbps, lat_median_us, ...): nothing to check".into(),
        ));
    }
    let mut rows = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize);
            err(line, format!("malformed CSV: {e}"))
        })?;
        let line = rec.position().map(|p| p.line() as usize);
        let cell = |c: usize| rec.get(c).unwrap_or("").trim();
        let opt_cell = |c: Option<usize>| c.map(cell).filter(|s| !s.is_empty());
        if opt_cell(c_qp).is_some() {
            continue;
        }
        let test = TestKind::from_name(cell(c_test)).ok_or_else(|| {
            err(
                line,
                format!(
                    "test {:?} is not one of send_bw, write_bw, read_bw, send_lat, write_lat, read_lat",
                    cell(c_test)
                ),
            )
        })?;
        let transport = parse_transport(cell(c_transport)).ok_or_else(|| {
            err(
                line,
                format!(
                    "transport {:?} is not verbs, soft or tcp",
                    cell(c_transport)
                ),
            )
        })?;
        let roce = match cell(c_roce) {
            "" => None,
            "v1" => Some(RoceVersion::V1),
            "v2" => Some(RoceVersion::V2),
            other => return Err(err(line, format!("roce {other:?} is not v1, v2 or empty"))),
        };
        let size: u64 = cell(c_size).parse().map_err(|_| {
            err(
                line,
                format!("size_bytes {:?} is not a whole number", cell(c_size)),
            )
        })?;
        let number = |i: usize| -> Result<Option<f64>, ReadError> {
            opt_cell(figure_cols[i])
                .map(|s| match s.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                    // No figure roceperf writes (bandwidth, rate, latency) can be below zero.
                    Ok(v) if v < 0.0 => Err(err(
                        line,
                        format!(
                            "{} {s:?} is negative; bandwidths, rates and latencies are never below zero",
                            COLUMN_NAMES[i]
                        ),
                    )),
                    _ => Err(err(line, format!("{} {s:?} is not a number", COLUMN_NAMES[i]))),
                })
                .transpose()
        };
        let [gbps, mpps, median, p99, p999, max] = [0, 1, 2, 3, 4, 5].map(number);
        let figures = match (gbps?, median?) {
            (Some(gbps), _) => Figures::Bandwidth(BandwidthFigures {
                gbps,
                mpps: mpps?.unwrap_or(0.0),
            }),
            (None, Some(median_us)) => {
                let need = |v: Result<Option<f64>, ReadError>, name: &str| {
                    v?.ok_or_else(|| err(line, format!("latency row without {name}")))
                };
                let samples = opt_cell(c_samples)
                    .ok_or_else(|| err(line, "latency row without lat_samples".into()))?;
                let samples: u64 = samples.parse().map_err(|_| {
                    err(
                        line,
                        format!("lat_samples {samples:?} is not a whole number"),
                    )
                })?;
                // An empty percentile cell is a withheld percentile (fewer than 10 samples beyond
                // it), and so is a number where the samples do not hold it.
                let held = |v: Option<f64>, pct: f64| v.filter(|_| percentile_holds(samples, pct));
                Figures::Latency(LatencyFigures {
                    samples,
                    median_us,
                    p99_us: held(p99?, 99.0),
                    p999_us: held(p999?, 99.9),
                    max_us: need(max, "lat_max_us")?,
                })
            }
            (None, None) => {
                return Err(err(
                    line,
                    "row has neither bw_avg_gbps nor lat_median_us".into(),
                ));
            }
        };
        rows.push(ResultRow {
            source: path.to_owned(),
            line,
            label: opt_cell(c_label).map(str::to_owned),
            test,
            transport,
            roce,
            role: match opt_cell(c_role) {
                Some("client") => Some(Role::Client),
                Some("server") => Some(Role::Server),
                _ => None,
            },
            size,
            figures,
            repeats: Vec::new(),
            path: opt_cell(c_path)
                .and_then(|p| serde_json::from_value(serde_json::Value::from(p)).ok()),
        });
    }
    Ok(rows)
}

/// The figure columns in the order [`parse_csv`] reads them.
const COLUMN_NAMES: [&str; 6] = [
    "bw_avg_gbps",
    "msg_rate_mpps",
    "lat_median_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_max_us",
];

/// `verbs`, `soft` or `tcp`.
pub(crate) fn parse_transport(name: &str) -> Option<TransportKind> {
    [
        TransportKind::Verbs,
        TransportKind::Soft,
        TransportKind::Tcp,
    ]
    .into_iter()
    .find(|t| t.name() == name)
}
