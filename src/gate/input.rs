//! A gate's inputs: result rows read by `crate::results`, and unusable files said for a CI log.
//!
//! Any file roceperf writes can be gated: a run's `roceperf.result` JSON, a run's CSV or `compare.csv`,
//! a comparison's `roceperf.compare` JSON. An [`InputError`] names the file and what to do, so that
//! `roce_gate` can exit 2 with a message its reader can act on.

use crate::results::ResultRow;
use crate::results::read::{self, ReadError, SchemaError};
use std::path::{Path, PathBuf};

/// Why an input file cannot be gated. Each message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
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
    /// Bytes no result file starts with, or a stream cut at the limit.
    #[error("{0}")]
    NotAResult(ReadError),
    /// A baseline measured once: no spread to judge a change against.
    #[error("{} was measured once ({results} results are compared with a single run): one run has no spread, and its \
             noise often exceeds --max-regression {allowed}, so the gate would fail on unchanged \
             code; record the baseline from repetitions (roce_compare --repeat 5 --results DIR, then \
             keep DIR/<timestamp>/compare.json), or add --allow-single-run to gate against it anyway", path.display())]
    SingleRun {
        /// The baseline file.
        path: PathBuf,
        /// How many of the results compared have a single run there.
        results: usize,
        /// `--max-regression`.
        allowed: super::Percent,
    },
    /// The file is well-formed but holds no result to check.
    #[error("{} holds no results; a gate over nothing would pass vacuously, so give a file from a finished run", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// What is wrong with a document, as roce_gate says it: a version this build does not read sends the
/// user to the roce_gate that matches the file.
fn schema_text(problem: &SchemaError) -> String {
    match problem {
        SchemaError::Version { kind, found } => {
            SchemaError::version_text(*kind, *found, "roce_gate")
        }
        other => other.to_string(),
    }
}

impl From<ReadError> for InputError {
    fn from(e: ReadError) -> InputError {
        match e {
            ReadError::Read { path, source } => InputError::Read { path, source },
            ReadError::Json { path, source } => InputError::Json { path, source },
            ReadError::Schema { path, problem } => InputError::Schema {
                path,
                what: schema_text(&problem),
            },
            ReadError::Csv { path, line, what } => InputError::Csv { path, line, what },
            e @ (ReadError::NotAResult { .. } | ReadError::Unbounded { .. }) => {
                InputError::NotAResult(e)
            }
        }
    }
}

/// The name standard input goes by in messages and rows, when a file is given as `-`.
pub(crate) const STDIN_NAME: &str = "<stdin>";

/// Reads `path` as a result JSON, a comparison JSON or a results CSV (by extension, else by content);
/// `-` is standard input (JSON or CSV by content).
pub(crate) fn load(path: &Path) -> Result<Vec<ResultRow>, InputError> {
    if path == Path::new("-") {
        let name = Path::new(STDIN_NAME);
        let stdin = std::io::stdin();
        // A redirected regular file is bounded by its size; a pipe or a device by the reader's limit.
        let regular = std::os::fd::AsFd::as_fd(&stdin)
            .try_clone_to_owned()
            .ok()
            .and_then(|fd| std::fs::File::from(fd).metadata().ok())
            .is_some_and(|m| m.is_file());
        let bytes = read::read_from(name, stdin.lock(), regular)?;
        return parse(name, &bytes);
    }
    non_empty(path, read::read_rows(path)?)
}

/// Parses the contents of a result file; `path` picks the format by extension and names the file in
/// errors. Never panics, whatever the bytes.
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<ResultRow>, InputError> {
    non_empty(path, read::parse_rows(path, bytes)?)
}

/// A gate over nothing would pass vacuously: a file without rows is an error.
fn non_empty(path: &Path, rows: Vec<ResultRow>) -> Result<Vec<ResultRow>, InputError> {
    if rows.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(rows)
}

/// Reads every file, returning all rows or every error (so one run of the gate names all bad inputs).
pub(crate) fn load_all(paths: &[PathBuf]) -> Result<Vec<ResultRow>, Vec<InputError>> {
    crate::results::read::load_every(paths, |p| load(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_send_the_reader_to_the_matching_roce_gate() {
        let doc = json!({"schema": "roceperf.compare", "schema_version": 3});
        let bytes = serde_json::to_vec(&doc).unwrap();
        let err = parse(Path::new("c.json"), &bytes).unwrap_err().to_string();
        assert_eq!(
            err,
            "c.json is not a roceperf result this roce_gate reads: comparison schema_version 3 is not \
             supported (this roce_gate reads version 1); use the roce_gate of the roceperf version that \
             wrote it"
        );
        let doc = json!({"schema": "roceperf.result"});
        let err = parse(Path::new("r.json"), &serde_json::to_vec(&doc).unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .ends_with(": \"schema_version\" is missing or not a number")
        );
        assert_eq!(read::DocKind::Run.noun(), "result");
    }

    #[test]
    fn a_file_without_results_is_refused() {
        let csv = crate::results::csv::header_line();
        let err = parse(Path::new("e.csv"), csv.as_bytes()).unwrap_err();
        assert!(matches!(err, InputError::Empty { .. }), "{err}");
    }
}
