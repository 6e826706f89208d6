//! Where result files go and how they are written whole.
//!
//! The names of a run's files in a `--results` directory, a comparison's directory, and writes through
//! a temporary file, so that a reader never sees half a file.

use super::RunInfo;
use super::run::role_name;
use super::time::{compact_timestamp, now_rfc3339};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a results file could not be written. Every variant names the file and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Opening, reading, writing or renaming a file failed.
    #[error(
        "cannot {action} {}: {source}; check that the directory exists and is writable, or choose another path",
        path.display()
    )]
    Io {
        /// What was being done: "open", "write", ...
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The CSV file to append to has other columns than this version writes.
    #[error(
        "cannot append to {}: its header does not match roceperf's CSV columns (expected {expected:?}, found {found:?}); \
         pass a new file to --csv, or move the old one aside",
        path.display()
    )]
    CsvHeaderMismatch {
        /// The file.
        path: PathBuf,
        /// Our header line.
        expected: String,
        /// The file's first line.
        found: String,
    },
    /// The csv writer failed.
    #[error("cannot write CSV to {}: {source}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The csv crate's error.
        source: ::csv::Error,
    },
    /// JSON serialisation failed.
    #[error("cannot write JSON to {}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// serde_json's error.
        source: serde_json::Error,
    },
}

/// `(csv, json)` paths for a run in `dir`: `<dir>/<YYYYmmdd-HHMMSS>-<test>-<transport>[-<roce>]-<role>.{csv,json}`.
///
/// The timestamp is taken from `info.started_at` (UTC), so both files of a run share it and names sort by
/// time; the role keeps a client and a server writing into the same directory apart. The binary creates
/// `dir`.
pub fn results_paths(dir: &Path, info: &RunInfo) -> (PathBuf, PathBuf) {
    let stamp = compact_timestamp(&info.started_at)
        .unwrap_or_else(|| compact_timestamp(&now_rfc3339()).unwrap_or_default());
    let mut stem = format!("{stamp}-{}-{}", info.test.name(), info.transport.name());
    if let Some(roce) = info.roce {
        stem.push('-');
        stem.push_str(roce.name());
    }
    stem.push('-');
    stem.push_str(role_name(info.role));
    (
        dir.join(format!("{stem}.csv")),
        dir.join(format!("{stem}.json")),
    )
}

/// Creates the `--results` directory (and its parents) if needed; the error names it and what to do.
pub(crate) fn create_results_dir(dir: &Path) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::Io {
        action: "create the results directory",
        path: dir.to_owned(),
        source,
    })
}

/// Writes `bytes` to `path` through a temporary file, so that a reader never sees half a file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(".partial");
    let tmp = path.with_file_name(tmp_name);
    let io = |action, source| WriteError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| io("write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("rename a temporary file onto", e)
    })
}

/// `results/20261129-102425`: the directory of a comparison started at `started_at` (RFC 3339).
pub(crate) fn compare_dir(results: &Path, started_at: &str) -> PathBuf {
    let stamp = compact_timestamp(started_at)
        .or_else(|| compact_timestamp(&now_rfc3339()))
        .unwrap_or_default();
    results.join(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;

    #[test]
    fn results_paths_are_timestamped_and_named() {
        let (csv, json) = results_paths(Path::new("results"), &bw_info());
        assert_eq!(
            csv,
            Path::new("results/20261129-102425-write_bw-soft-v2-client.csv")
        );
        assert_eq!(
            json,
            Path::new("results/20261129-102425-write_bw-soft-v2-client.json")
        );
        let (csv, _) = results_paths(Path::new("/tmp/r"), &lat_info());
        assert_eq!(
            csv,
            Path::new("/tmp/r/20261129-102425-send_lat-tcp-server.csv")
        );
    }

    #[test]
    fn results_paths_survive_a_bad_timestamp() {
        let mut info = bw_info();
        info.started_at = "yesterday".into();
        let (csv, _) = results_paths(Path::new("d"), &info);
        let name = csv.file_name().unwrap().to_str().unwrap().to_owned();
        // Falls back to the current time: 8 digits, dash, 6 digits.
        assert_eq!(
            name.len(),
            "20261129-102425-write_bw-soft-v2-client.csv".len()
        );
        assert!(name[..8].chars().all(|c| c.is_ascii_digit()) && &name[8..9] == "-");
    }

    #[test]
    fn results_dir_is_created_or_named_in_the_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_results_dir(&dir).unwrap();
        assert!(dir.is_dir());
        create_results_dir(&dir).unwrap();
        let file = tmp.path().join("plain-file");
        std::fs::write(&file, "x").unwrap();
        let err = create_results_dir(&file.join("sub")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("plain-file/sub") && msg.contains("results directory"),
            "{msg}"
        );
    }

    #[test]
    fn comparison_directories_are_named_by_their_start() {
        let dir = compare_dir(Path::new("results"), "2026-11-29T10:24:25Z");
        assert_eq!(dir, Path::new("results/20261129-102425"));
    }

    #[test]
    fn atomic_writes_leave_no_partial_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
        let err = write_atomic(&tmp.path().join("no/such.json"), b"x").unwrap_err();
        assert!(err.to_string().contains("no/such.json"), "{err}");
    }
}
