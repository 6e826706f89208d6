//! The one reader of roceperf's result files, JSON and CSV, with typed errors.
//!
//! It reads a run's `roceperf.result` JSON, a comparison's `roceperf.compare` JSON, a fabric run's
//! `roceperf.fabric` JSON, a congestion study's `roceperf.congestion` JSON, and the CSVs (a run's `--csv`, a comparison's `compare.csv`; the CSV
//! reader is `read/csv.rs`). What is wrong with a file comes back typed
//! ([`ReadError`], [`SchemaError`]), so that each tool can say it in its own words (`roce_gate` for a
//! CI log, `roce_compare` for its user) from one parse.

mod bounded;
mod csv;

pub(crate) use bounded::read_from;

pub(crate) use csv::parse_transport;

use super::congestion::{CONGESTION_SCHEMA, CONGESTION_SCHEMA_VERSION, CongestionDoc};
use super::fabric::{FABRIC_SCHEMA, FABRIC_SCHEMA_VERSION, FabricDoc};
use super::json::{COMPARE_SCHEMA, COMPARE_SCHEMA_VERSION, SCHEMA, SCHEMA_VERSION};
use super::{CompareRun, CompareSet, ResultRow, RunInfo, SizeResult, Skipped};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// A document roceperf wrote.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Document {
    /// A run's `roceperf.result`: its description and one result per message size.
    Run {
        /// The run description (`"test"`), boxed: it is most of the document's size.
        info: Box<RunInfo>,
        /// The results (`"results"`); may be empty.
        results: Vec<SizeResult>,
    },
    /// A comparison's `roceperf.compare`, boxed as the run is.
    Compare(Box<CompareSet>),
    /// A fabric run's `roceperf.fabric` (its pair records skipped), boxed as the run is.
    Fabric(Box<FabricDoc>),
    /// A congestion study's `roceperf.congestion`.
    Congestion(Box<CongestionDoc>),
}

/// Which kind of document a schema name announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocKind {
    /// `roceperf.result`.
    Run,
    /// `roceperf.compare`.
    Compare,
    /// `roceperf.fabric`.
    Fabric,
    /// `roceperf.congestion`.
    Congestion,
}

impl DocKind {
    /// `result` or `comparison`.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            DocKind::Run => "result",
            DocKind::Compare => "comparison",
            DocKind::Fabric => "fabric matrix",
            DocKind::Congestion => "congestion study",
        }
    }

    /// The schema version this build reads and writes.
    pub(crate) fn version(self) -> u32 {
        match self {
            DocKind::Run => SCHEMA_VERSION,
            DocKind::Compare => COMPARE_SCHEMA_VERSION,
            DocKind::Fabric => FABRIC_SCHEMA_VERSION,
            DocKind::Congestion => CONGESTION_SCHEMA_VERSION,
        }
    }
}

/// What is wrong with a JSON document, in the order the reader checks.
#[derive(Debug)]
pub(crate) enum SchemaError {
    /// The document is not a JSON object.
    NotAnObject,
    /// `"schema"` is there but is not a string.
    SchemaNotAString(Value),
    /// There is no `"schema"` key.
    NoSchema,
    /// The schema is not one of roceperf's.
    UnknownSchema(String),
    /// `"schema_version"` is missing, not a whole number, or not the one this build reads.
    Version {
        /// The document's kind.
        kind: DocKind,
        /// The version found, when it is a whole number.
        found: Option<u64>,
    },
    /// A result document's `"test"` is missing or is not a run description.
    Test {
        /// Whether the key is there at all.
        present: bool,
        /// What serde said about reading it (as null when it is missing).
        source: serde_json::Error,
    },
    /// A result document's `"results"` is not an array, or one of its results cannot be read.
    Results {
        /// The result at fault; None when `"results"` is missing or not an array.
        index: Option<usize>,
        /// What serde said (about reading the whole list, when `index` is None).
        source: serde_json::Error,
    },
    /// A comparison document's body cannot be read.
    Comparison(serde_json::Error),
    /// A fabric document's body cannot be read.
    Fabric(serde_json::Error),
    /// A congestion document's body cannot be read.
    Congestion(serde_json::Error),
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::NotAnObject => {
                f.write_str("the document is not a JSON object with a \"schema\" key")
            }
            SchemaError::SchemaNotAString(v) => write!(f, "\"schema\" is {v}, not a string"),
            SchemaError::NoSchema => write!(
                f,
                "it has no \"schema\" key (expected {SCHEMA:?} or {COMPARE_SCHEMA:?})"
            ),
            SchemaError::UnknownSchema(s) => write!(
                f,
                "schema {s:?} is unknown (expected {SCHEMA:?} or {COMPARE_SCHEMA:?})"
            ),
            SchemaError::Version { kind, found: None } => write!(
                f,
                "{} \"schema_version\" is missing or not a number",
                kind.noun()
            ),
            SchemaError::Version {
                kind,
                found: Some(v),
            } => write!(
                f,
                "{} schema_version {v} is not supported (this build reads version {})",
                kind.noun(),
                kind.version()
            ),
            SchemaError::Test { present: false, .. } => f.write_str("it has no \"test\" object"),
            SchemaError::Test { source, .. } => write!(f, "\"test\": {source}"),
            SchemaError::Results { index: None, .. } => f.write_str("it has no \"results\" array"),
            SchemaError::Results {
                index: Some(i),
                source,
            } => write!(f, "results[{i}]: {source}"),
            SchemaError::Comparison(e) | SchemaError::Fabric(e) | SchemaError::Congestion(e) => {
                write!(f, "{e}")
            }
        }
    }
}

impl SchemaError {
    /// A `schema_version` this build does not read, as `tool` says it: the number, the version this
    /// `tool` reads, and which tool to use instead.
    pub(crate) fn version_text(kind: DocKind, found: Option<u64>, tool: &str) -> String {
        match found {
            Some(v) => format!(
                "{} schema_version {v} is not supported (this {tool} reads version {}); use the \
                 {tool} of the roceperf version that wrote it",
                kind.noun(),
                kind.version()
            ),
            None => "\"schema_version\" is missing or not a number".into(),
        }
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchemaError::Test { source, .. } | SchemaError::Results { source, .. } => Some(source),
            SchemaError::Comparison(e) | SchemaError::Fabric(e) | SchemaError::Congestion(e) => {
                Some(e)
            }
            _ => None,
        }
    }
}

/// Why a result file cannot be read. Each variant names the file; [`SchemaError`] and CSV problems say
/// what is wrong inside it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The file cannot be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("{} is not valid JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// serde_json's error, with line and column.
        source: serde_json::Error,
    },
    /// The file is JSON but not a roceperf document this build understands.
    #[error("{}: {problem}", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: SchemaError,
    },
    /// A byte no result file starts with (a device, a binary file, text of another kind).
    #[error("{}: byte {offset} (0x{byte:02X}) cannot start a result file: it is not a result file (roceperf's JSON or CSV, which are text); give the file a run wrote with --json, --csv or --results", path.display())]
    NotAResult {
        /// The file.
        path: PathBuf,
        /// Where the byte is, from 0.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// A source that is not a regular file gave more than the limit without ending.
    #[error("{} is not a regular file and gave more than {} MiB without ending, more than any result file holds: give a result file, or a stream that ends", path.display(), limit >> 20)]
    Unbounded {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
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
}

/// Reads a JSON document roceperf wrote: its schema and version, then the run, the comparison or the
/// fabric matrix.
pub(crate) fn parse_json(doc: Value) -> Result<Document, SchemaError> {
    let Value::Object(obj) = &doc else {
        return Err(SchemaError::NotAnObject);
    };
    let kind = match obj.get("schema") {
        Some(Value::String(s)) if s == SCHEMA => DocKind::Run,
        Some(Value::String(s)) if s == COMPARE_SCHEMA => DocKind::Compare,
        Some(Value::String(s)) if s == FABRIC_SCHEMA => DocKind::Fabric,
        Some(Value::String(s)) if s == CONGESTION_SCHEMA => DocKind::Congestion,
        Some(Value::String(s)) => return Err(SchemaError::UnknownSchema(s.clone())),
        Some(other) => return Err(SchemaError::SchemaNotAString(other.clone())),
        None => return Err(SchemaError::NoSchema),
    };
    let found = obj.get("schema_version").and_then(Value::as_u64);
    if found != Some(u64::from(kind.version())) {
        return Err(SchemaError::Version { kind, found });
    }
    match kind {
        DocKind::Run => parse_run(obj),
        DocKind::Compare => parse_compare(doc).map(|s| Document::Compare(Box::new(s))),
        DocKind::Fabric => serde_json::from_value(doc)
            .map(|d| Document::Fabric(Box::new(d)))
            .map_err(SchemaError::Fabric),
        DocKind::Congestion => serde_json::from_value(doc)
            .map(|d| Document::Congestion(Box::new(d)))
            .map_err(SchemaError::Congestion),
    }
}

fn parse_run(obj: &serde_json::Map<String, Value>) -> Result<Document, SchemaError> {
    let test = obj.get("test");
    let info: RunInfo =
        serde_json::from_value(test.cloned().unwrap_or(Value::Null)).map_err(|source| {
            SchemaError::Test {
                present: test.is_some(),
                source,
            }
        })?;
    let results = match obj.get("results") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                serde_json::from_value::<SizeResult>(v.clone()).map_err(|source| {
                    SchemaError::Results {
                        index: Some(i),
                        source,
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            // Read as a list anyway, so that the error says what is there instead.
            let v = other.cloned().unwrap_or(Value::Null);
            serde_json::from_value::<Vec<SizeResult>>(v).map_err(|source| SchemaError::Results {
                index: None,
                source,
            })?
        }
    };
    Ok(Document::Run {
        info: Box::new(info),
        results,
    })
}

fn parse_compare(doc: Value) -> Result<CompareSet, SchemaError> {
    #[derive(Deserialize)]
    struct Doc {
        started_at: String,
        tool: Tool,
        runs: Vec<CompareRun>,
        #[serde(default)]
        skipped: Vec<Skipped>,
        #[serde(default)]
        notes: Vec<String>,
        #[serde(default)]
        wire: Option<super::WirePort>,
        #[serde(default)]
        provenance: Option<super::Provenance>,
    }
    #[derive(Deserialize)]
    struct Tool {
        version: String,
    }
    let d: Doc = serde_json::from_value(doc).map_err(SchemaError::Comparison)?;
    Ok(CompareSet {
        started_at: d.started_at,
        version: d.tool.version,
        runs: d.runs,
        skipped: d.skipped,
        notes: d.notes,
        wire: d.wire,
        provenance: d.provenance,
    })
}

/// The bytes of a file without a UTF-8 byte-order mark, which a spreadsheet may put in front.
fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes)
}

/// The whole of `path`, within a bound ([`bounded`]): what cannot start a result file fails at its
/// first bytes, and a source that is not a regular file is cut at [`STREAM_LIMIT`].
fn read_bytes(path: &Path) -> Result<Vec<u8>, ReadError> {
    bounded::read_file(path)
}

/// Parses the contents of a JSON result file; `path` names it in errors.
pub(crate) fn parse_json_bytes(path: &Path, bytes: &[u8]) -> Result<Document, ReadError> {
    let bytes = strip_bom(bytes);
    let schema_err = |problem| ReadError::Schema {
        path: path.to_owned(),
        problem,
    };
    if let Some(fabric) = fabric_from_bytes(bytes) {
        return fabric.map_err(schema_err);
    }
    let doc: Value = serde_json::from_slice(bytes).map_err(|source| ReadError::Json {
        path: path.to_owned(),
        source,
    })?;
    parse_json(doc).map_err(schema_err)
}

/// A fabric matrix of this build's version read straight from its bytes, its pair records (gigabytes
/// at scale) skipped rather than built into a tree first; None for anything else, which
/// [`parse_json`] reads and names.
fn fabric_from_bytes(bytes: &[u8]) -> Option<Result<Document, SchemaError>> {
    #[derive(Deserialize)]
    struct Head {
        schema: String,
        schema_version: u64,
    }
    let head: Head = serde_json::from_slice(bytes).ok()?;
    (head.schema == FABRIC_SCHEMA && head.schema_version == u64::from(FABRIC_SCHEMA_VERSION)).then(
        || {
            serde_json::from_slice(bytes)
                .map(|d| Document::Fabric(Box::new(d)))
                .map_err(SchemaError::Fabric)
        },
    )
}

/// Reads a JSON result file: a run's, a comparison's or a fabric matrix.
pub(crate) fn read_json(path: &Path) -> Result<Document, ReadError> {
    parse_json_bytes(path, &read_bytes(path)?)
}

impl Document {
    /// The document as flat rows, each naming `source` as its file; a fabric matrix has none (its
    /// judge reads the matrices), and to a reader of rows its schema is not one of theirs.
    pub(crate) fn rows(&self, source: &Path) -> Result<Vec<ResultRow>, SchemaError> {
        match self {
            Document::Run { info, results } => Ok(ResultRow::from_run(info, results, source)),
            Document::Compare(set) => Ok(ResultRow::from_compare(set, source)),
            Document::Fabric(_) => Err(SchemaError::UnknownSchema(FABRIC_SCHEMA.into())),
            Document::Congestion(_) => Err(SchemaError::UnknownSchema(CONGESTION_SCHEMA.into())),
        }
    }
}

/// What `load` gives for every one of `files`, all together, or every error it met (so one run names
/// all the bad inputs, not just the first).
pub(crate) fn load_every<P, T, E, I>(
    files: &[P],
    mut load: impl FnMut(&P) -> Result<I, E>,
) -> Result<Vec<T>, Vec<E>>
where
    I: IntoIterator<Item = T>,
{
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match load(file) {
            Ok(items) => loaded.extend(items),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

/// Reads `path` as rows: a result JSON, a comparison JSON or a results CSV (by extension, else by
/// content). The rows may be empty.
pub(crate) fn read_rows(path: &Path) -> Result<Vec<ResultRow>, ReadError> {
    parse_rows(path, &read_bytes(path)?)
}

/// Parses the contents of a result file as rows; `path` picks the format by extension and names the
/// file in errors. Never panics, whatever the bytes.
pub(crate) fn parse_rows(path: &Path, bytes: &[u8]) -> Result<Vec<ResultRow>, ReadError> {
    let bytes = strip_bom(bytes);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let looks_json = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{' || b == b'[');
    let json = match ext.as_deref() {
        Some("json") => true,
        Some("csv") => false,
        _ => looks_json,
    };
    if json {
        parse_json_bytes(path, bytes)?
            .rows(path)
            .map_err(|problem| ReadError::Schema {
                path: path.to_owned(),
                problem,
            })
    } else {
        csv::parse_csv(path, bytes)
    }
}

/// What `roce_gate -` reads from `bytes` arriving on a pipe named `name`: the bounded read (the first
/// bytes checked as they arrive), then rows by the name's extension or the content. The number of
/// rows, or the error as the tools print it (the entry `fuzz/fuzz_targets/results_read.rs` drives).
pub fn rows_from_pipe(name: &Path, bytes: &[u8]) -> Result<usize, String> {
    let read = read_from(name, bytes, false).map_err(|e| e.to_string())?;
    assert_eq!(read, bytes, "the bounded read changed the bytes");
    parse_rows(name, &read)
        .map(|rows| rows.len())
        .map_err(|e| e.to_string())
}

/// What a reader of rows makes of a file `name` holding `bytes`, read whole without the first-bytes
/// check; for the fuzzer to compare with [`rows_from_pipe`].
pub fn rows_from_bytes(name: &Path, bytes: &[u8]) -> Result<usize, String> {
    parse_rows(name, bytes)
        .map(|rows| rows.len())
        .map_err(|e| e.to_string())
}

/// What `roce_compare --from` and `roce_gate --fabric` make of a JSON file `name` holding `bytes`:
/// the document's kind and its rows' count (a fabric matrix has none), or the error as printed.
pub fn document_from_bytes(name: &Path, bytes: &[u8]) -> Result<(&'static str, usize), String> {
    let doc = parse_json_bytes(name, bytes).map_err(|e| e.to_string())?;
    let kind = match &doc {
        Document::Run { .. } => DocKind::Run,
        Document::Compare(_) => DocKind::Compare,
        Document::Fabric(_) => DocKind::Fabric,
        Document::Congestion(_) => DocKind::Congestion,
    };
    Ok((kind.noun(), doc.rows(name).map_or(0, |r| r.len())))
}

#[cfg(test)]
mod tests;
