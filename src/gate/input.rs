//! The results a gate checks, read from any of the files roceperf writes: a run's `roceperf.result` JSON,
//! a run's CSV (or `compare.csv`), or a comparison's `roceperf.compare` JSON.
//!
//! Every file becomes a flat list of [`ResultRow`]s: one per (run, message size) with just the figures a
//! gate compares. A file that cannot be read or understood gives an [`InputError`] that names the file and
//! what is wrong with it, so that `roce_gate` can exit 2 with a message a CI log reader can act on.

use crate::compare::{self, CompareSet};
use crate::params::{RoceVersion, Role, TestKind, TransportKind};
use crate::report::{Measured, RunInfo, SizeResult, json};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The figures of one result that gates look at.
#[derive(Debug, Clone, PartialEq)]
pub enum Figures {
    /// A bandwidth test.
    Bandwidth {
        /// Average bandwidth, Gb/s.
        gbps: f64,
        /// Average message rate, Mpps.
        mpps: f64,
    },
    /// A latency test (one-way µs).
    Latency {
        /// Median, µs.
        median_us: f64,
        /// 99th percentile, µs.
        p99_us: f64,
        /// 99.9th percentile, µs.
        p999_us: f64,
        /// True maximum, µs.
        max_us: f64,
    },
}

/// One (run, message size) result: what was measured, where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    /// The file the row was read from (or the run's own output path).
    pub source: PathBuf,
    /// 1-based line in a CSV file, for annotations.
    pub line: Option<usize>,
    /// A comparison's transport label such as "RoCE v2 (soft)".
    pub label: Option<String>,
    /// Which of the six tests.
    pub test: TestKind,
    /// What moved the bytes.
    pub transport: TransportKind,
    /// RoCE encapsulation; None for TCP.
    pub roce: Option<RoceVersion>,
    /// Client or server, when the file says.
    pub role: Option<Role>,
    /// Message size in bytes.
    pub size: u64,
    /// The measured figures.
    pub figures: Figures,
}

/// The key a baseline is matched on.
pub type RowKey = (TestKind, TransportKind, Option<RoceVersion>, u64);

impl ResultRow {
    /// `(test, transport, roce, size)`: what a baseline row must share to be compared with this one.
    pub fn key(&self) -> RowKey {
        (self.test, self.transport, self.roce, self.size)
    }

    /// `write_bw soft v2 65536 B`: the row as a report names it.
    pub fn subject(&self) -> String {
        let mut s = format!("{} {}", self.test, self.transport);
        if let Some(r) = self.roce {
            s.push(' ');
            s.push_str(r.name());
        }
        s.push_str(&format!(" {} B", self.size));
        s
    }

    /// Rows for a run's results, as a binary holds them after measuring (`source` is its JSON path, if any).
    pub fn from_run(info: &RunInfo, results: &[SizeResult], source: &Path) -> Vec<ResultRow> {
        results
            .iter()
            .map(|r| ResultRow {
                source: source.to_owned(),
                line: None,
                label: None,
                test: info.test,
                transport: info.transport,
                roce: info.roce,
                role: Some(info.role),
                size: r.size,
                figures: figures_of(r),
            })
            .collect()
    }

    /// Rows for every run of a comparison.
    pub fn from_compare(set: &CompareSet, source: &Path) -> Vec<ResultRow> {
        set.runs
            .iter()
            .flat_map(|run| {
                run.results.iter().map(|r| ResultRow {
                    source: source.to_owned(),
                    line: None,
                    label: Some(run.label.clone()),
                    test: run.test,
                    transport: run.transport,
                    roce: run.roce,
                    role: None,
                    size: r.size,
                    figures: figures_of(r),
                })
            })
            .collect()
    }
}

/// The gate figures of one size result (latency percentiles from the histogram, as in the comparison).
pub fn figures_of(r: &SizeResult) -> Figures {
    match &r.measured {
        Measured::Bandwidth(b) => Figures::Bandwidth {
            gbps: b.avg_gbps,
            mpps: b.msg_rate_mpps,
        },
        Measured::Latency { stats, histogram } => {
            let l = compare::LatencyFigures::of(stats, histogram);
            Figures::Latency {
                median_us: l.median_us,
                p99_us: l.p99_us,
                p999_us: l.p999_us,
                max_us: l.max_us,
            }
        }
    }
}

/// Why an input file cannot be gated. Each message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be opened or read.
    #[error("cannot read {}: {source}; check the path (and that the run that writes it succeeded)", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("{} is not valid JSON: {source}; was the run interrupted while writing it?", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// serde_json's error, with line and column.
        source: serde_json::Error,
    },
    /// The file is JSON but not a roceperf document this version understands.
    #[error("{} is not a roceperf result this roce_gate reads: {what}", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The CSV file cannot be parsed or lacks our columns.
    #[error("{}{}: {what}", path.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Csv {
        /// The file.
        path: PathBuf,
        /// 1-based line, when one line is at fault.
        line: Option<usize>,
        /// What is wrong.
        what: String,
    },
    /// The file is well-formed but holds no result to check.
    #[error("{} holds no results; a gate over nothing would pass vacuously, so give a file from a finished run", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Reads `path` as a result JSON, a comparison JSON or a results CSV (by extension, else by content).
pub fn load(path: &Path) -> Result<Vec<ResultRow>, InputError> {
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &bytes)
}

/// Parses the contents of a result file; `path` picks the format by extension and names the file in
/// errors. Never panics, whatever the bytes.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<ResultRow>, InputError> {
    // A spreadsheet that saved the CSV may have put a UTF-8 byte-order mark in front.
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let looks_json = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{' || b == b'[');
    let rows = match ext.as_deref() {
        Some("json") => load_json(path, bytes)?,
        Some("csv") => load_csv(path, bytes)?,
        _ if looks_json => load_json(path, bytes)?,
        _ => load_csv(path, bytes)?,
    };
    if rows.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(rows)
}

/// Reads every file, returning all rows or every error (so one run of the gate names all bad inputs).
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<ResultRow>, Vec<InputError>> {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        match load(p) {
            Ok(r) => rows.extend(r),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(errors)
    }
}

fn load_json(path: &Path, bytes: &[u8]) -> Result<Vec<ResultRow>, InputError> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|source| InputError::Json {
        path: path.to_owned(),
        source,
    })?;
    let schema_err = |what: String| InputError::Schema {
        path: path.to_owned(),
        what,
    };
    let Some(obj) = doc.as_object() else {
        return Err(schema_err(
            "the document is not a JSON object with a \"schema\" key".into(),
        ));
    };
    let schema = match obj.get("schema") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(schema_err(format!("\"schema\" is {other}, not a string"))),
        None => {
            return Err(schema_err(format!(
                "it has no \"schema\" key (expected {:?} or {:?})",
                json::SCHEMA,
                compare::SCHEMA
            )));
        }
    };
    let (expected_version, what) = match schema {
        json::SCHEMA => (json::SCHEMA_VERSION, "result"),
        compare::SCHEMA => (compare::SCHEMA_VERSION, "comparison"),
        other => {
            return Err(schema_err(format!(
                "schema {other:?} is unknown (expected {:?} or {:?})",
                json::SCHEMA,
                compare::SCHEMA
            )));
        }
    };
    match obj.get("schema_version").and_then(Value::as_u64) {
        Some(v) if v == u64::from(expected_version) => {}
        Some(v) => {
            return Err(schema_err(format!(
                "{what} schema_version {v} is not supported (this roce_gate reads version \
                 {expected_version}); use the roce_gate of the roceperf version that wrote it"
            )));
        }
        None => {
            return Err(schema_err(
                "\"schema_version\" is missing or not a number".into(),
            ));
        }
    }
    if schema == compare::SCHEMA {
        let set = compare::from_json_value(doc).map_err(schema_err)?;
        return Ok(ResultRow::from_compare(&set, path));
    }
    let info: RunInfo = obj
        .get("test")
        .cloned()
        .ok_or_else(|| schema_err("it has no \"test\" object".into()))
        .and_then(|v| {
            serde_json::from_value(v).map_err(|e| schema_err(format!("\"test\": {e}")))
        })?;
    let results = obj
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| schema_err("it has no \"results\" array".into()))?;
    let results = results
        .iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value::<SizeResult>(v.clone())
                .map_err(|e| schema_err(format!("results[{i}]: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ResultRow::from_run(&info, &results, path))
}

/// Columns a CSV must have (besides the figures): present in both per-run CSVs and compare.csv.
const CSV_KEY_COLUMNS: [&str; 4] = ["test", "transport", "roce", "size_bytes"];

fn load_csv(path: &Path, bytes: &[u8]) -> Result<Vec<ResultRow>, InputError> {
    let err = |line: Option<usize>, what: String| InputError::Csv {
        path: path.to_owned(),
        line,
        what,
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
        let number = |i: usize| -> Result<Option<f64>, InputError> {
            opt_cell(figure_cols[i])
                .map(|s| {
                    s.parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| {
                            err(line, format!("{} {s:?} is not a number", COLUMN_NAMES[i]))
                        })
                })
                .transpose()
        };
        let [gbps, mpps, median, p99, p999, max] = [0, 1, 2, 3, 4, 5].map(number);
        let figures = match (gbps?, median?) {
            (Some(gbps), _) => Figures::Bandwidth {
                gbps,
                mpps: mpps?.unwrap_or(0.0),
            },
            (None, Some(median_us)) => {
                let need = |v: Result<Option<f64>, InputError>, name: &str| {
                    v?.ok_or_else(|| err(line, format!("latency row without {name}")))
                };
                Figures::Latency {
                    median_us,
                    p99_us: need(p99, "lat_p99_us")?,
                    p999_us: need(p999, "lat_p99_9_us")?,
                    max_us: need(max, "lat_max_us")?,
                }
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
        });
    }
    Ok(rows)
}

/// The figure columns in the order `load_csv` reads them.
const COLUMN_NAMES: [&str; 6] = [
    "bw_avg_gbps",
    "msg_rate_mpps",
    "lat_median_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_max_us",
];

/// `verbs`, `soft` or `tcp`.
pub fn parse_transport(name: &str) -> Option<TransportKind> {
    [
        TransportKind::Verbs,
        TransportKind::Soft,
        TransportKind::Tcp,
    ]
    .into_iter()
    .find(|t| t.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::testdata;
    use proptest::prelude::*;

    /// Built once: the proptests below damage copies of these hundreds of times.
    static FILES: std::sync::LazyLock<(Vec<u8>, Vec<u8>)> = std::sync::LazyLock::new(|| {
        let set = testdata::set();
        (
            serde_json::to_vec(&set.to_json()).unwrap(),
            crate::report::compare::compare_csv(&set)
                .unwrap()
                .into_bytes(),
        )
    });

    fn compare_json() -> Vec<u8> {
        FILES.0.clone()
    }

    fn compare_csv() -> Vec<u8> {
        FILES.1.clone()
    }

    #[test]
    fn comparison_files_give_one_row_per_transport_and_size() {
        for (name, bytes) in [("c.json", compare_json()), ("c.csv", compare_csv())] {
            let rows = parse(Path::new(name), &bytes).unwrap();
            assert_eq!(rows.len(), 12, "{name}");
            let tcp_lat = rows
                .iter()
                .find(|r| r.transport == TransportKind::Tcp && r.size == 2)
                .unwrap();
            let Figures::Latency {
                median_us, p999_us, ..
            } = tcp_lat.figures
            else {
                panic!("{name}: {tcp_lat:?}");
            };
            assert!(
                p999_us > median_us && median_us > 6.0,
                "{name}: {tcp_lat:?}"
            );
        }
        // JSON and CSV agree to the CSV's 3 decimals.
        let (j, c) = (
            parse(Path::new("c.json"), &compare_json()).unwrap(),
            parse(Path::new("c.csv"), &compare_csv()).unwrap(),
        );
        for (a, b) in j.iter().zip(&c) {
            assert_eq!(a.key(), b.key());
            match (&a.figures, &b.figures) {
                (Figures::Bandwidth { gbps: x, .. }, Figures::Bandwidth { gbps: y, .. }) => {
                    assert!((x - y).abs() < 1e-5)
                }
                (Figures::Latency { p99_us: x, .. }, Figures::Latency { p99_us: y, .. }) => {
                    assert!((x - y).abs() < 1e-3)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_byte_order_mark_is_ignored() {
        let mut bytes = "\u{feff}".as_bytes().to_vec();
        bytes.extend(compare_csv());
        assert_eq!(parse(Path::new("excel.csv"), &bytes).unwrap().len(), 12);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            for name in ["x.json", "x.csv", "x"] {
                let _ = parse(Path::new(name), &bytes);
            }
        }

        #[test]
        fn damaged_files_give_errors_not_panics(cut in 0usize..4000, flip in 0usize..4000, byte in any::<u8>()) {
            for (name, mut bytes) in [("c.json", compare_json()), ("c.csv", compare_csv())] {
                let n = bytes.len();
                bytes[flip % n] = byte;
                bytes.truncate(cut % (n + 1));
                let _ = parse(Path::new(name), &bytes);
            }
        }
    }
}
