//! Output paths tried during set-up, before the peer is contacted (issue 33, defect 3): a run whose
//! `--json` directory is missing, whose `--results` is on a read-only filesystem or whose `--csv` has
//! other columns is refused with exit 2 before it runs, rather than losing its measurement at the end.
//!
//! A probe does what the write will do as far as it can without changing anything: it creates a
//! temporary file where a whole file will be renamed into place, opens for appending (and reads the
//! header of) a CSV that rows will be appended to, and removes whatever it made. It never truncates a
//! file, and a device or FIFO (written in place, as [`super::landing`] decides) is asked only whether
//! it may be written: opening a FIFO would wait for its reader.

use super::{Landing, WriteError, check_header, landing};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// How a file will be written, so that its probe tries the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Writes {
    /// Replaced whole, through a temporary file beside it.
    Whole,
    /// Rows appended under this header line (checked when the file has one).
    Rows(String),
    /// Lines of a stream that creates (or empties) the file when it opens.
    Lines,
}

/// An output flag whose path cannot take what the run would write there.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {source}")]
pub(crate) struct Unusable {
    /// The flag that named the path (`--json`, `--results`, ...).
    pub(crate) flag: &'static str,
    /// What the probe found, naming the path and what to do.
    pub(crate) source: WriteError,
}

/// Tries writing `path` as `writes` will; nothing is left changed. `-` (standard output) is not tried.
pub(crate) fn probe_file(path: &Path, writes: &Writes) -> Result<(), WriteError> {
    if super::is_stdout(path) {
        return Ok(());
    }
    let io = |action, source| WriteError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let at = match landing(path).map_err(|e| io("look up", e))? {
        Landing::InPlace(at) => return writable(&at).map_err(|e| io("write", e)),
        Landing::Replace(at) => at,
    };
    let exists = match std::fs::symlink_metadata(&at) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io("look up", e)),
    };
    match (writes, exists) {
        // A whole file is written as `<name>.partial` beside it and renamed: the directory must take a
        // new file (a read-only file is replaced all the same). A missing file to append to or stream
        // into is tried the same way, never made under its own name, which another process appending to
        // it meanwhile would then lose with the probe's removal.
        (Writes::Whole, _) | (_, false) => temporary_in(parent(&at)).map_err(|e| io("write", e)),
        (Writes::Rows(header), true) => {
            let mut file = OpenOptions::new()
                .read(true)
                .append(true)
                .open(&at)
                .map_err(|e| io("open", e))?;
            let empty = file.metadata().map_err(|e| io("read", e))?.len() == 0;
            if empty {
                Ok(())
            } else {
                check_header(&mut file, path, header)
            }
        }
        // Opened as the stream will be, without emptying it.
        (Writes::Lines, true) => OpenOptions::new()
            .write(true)
            .open(&at)
            .map(drop)
            .map_err(|e| io("open", e)),
    }
}

/// Tries making `dir` (and its missing parents) and a file in it, then removes what it made.
pub(crate) fn probe_dir(dir: &Path) -> Result<(), WriteError> {
    let io = |action, source| WriteError::Io {
        action,
        path: dir.to_owned(),
        source,
    };
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut up = Some(dir);
    while let Some(d) = up.filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::symlink_metadata(d) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(d.to_owned()),
            Err(e) => return Err(io("look up", e)),
        }
        up = d.parent();
    }
    let made = std::fs::create_dir_all(dir)
        .map_err(|e| io("create the results directory", e))
        .and_then(|()| temporary_in(dir).map_err(|e| io("write into", e)));
    // Deepest first; a directory something else filled meanwhile stays.
    for d in &missing {
        let _ = std::fs::remove_dir(d);
    }
    made
}

/// The directory a file at `at` is in (`.` for a bare name).
fn parent(at: &Path) -> &Path {
    match at.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates a file in `dir` under a name nothing else uses, and removes it. Made here rather than
/// with `tempfile`, whose error names its random file where the user's path is what to name.
fn temporary_in(dir: &Path) -> std::io::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..8 {
        let name = format!(".roceperf-probe-{}-{nanos}-{attempt}", std::process::id());
        let at = dir.join(name);
        match OpenOptions::new().write(true).create_new(true).open(&at) {
            Ok(_) => return std::fs::remove_file(&at),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::ErrorKind::AlreadyExists.into())
}

/// Whether this process may write `at` (a device, FIFO or socket, which is not opened: a FIFO's
/// open waits for a reader).
fn writable(at: &Path) -> std::io::Result<()> {
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid NUL-terminated path; access only reads it.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<std::ffi::OsString> {
        let mut n: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn a_usable_path_is_tried_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("runs.csv");
        std::fs::write(&csv, "a,b\n1,2\n").unwrap();
        let stream = dir.path().join("s.jsonl");
        std::fs::write(&stream, "kept\n").unwrap();
        let header = Writes::Rows("a,b".into());
        probe_file(&csv, &header).unwrap();
        probe_file(&dir.path().join("new.csv"), &header).unwrap();
        probe_file(&dir.path().join("r.json"), &Writes::Whole).unwrap();
        probe_file(&stream, &Writes::Lines).unwrap();
        probe_file(&dir.path().join("new.jsonl"), &Writes::Lines).unwrap();
        probe_dir(&dir.path().join("results/deep")).unwrap();
        assert_eq!(names(dir.path()), ["runs.csv", "s.jsonl"]);
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), "a,b\n1,2\n");
        assert_eq!(std::fs::read_to_string(&stream).unwrap(), "kept\n");
    }

    #[test]
    fn an_unusable_path_is_named_with_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/r.json");
        let err = probe_file(&missing, &Writes::Whole)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&missing.display().to_string())
                && err.contains("No such file")
                && !err.contains("probe"),
            "{err}"
        );
        let csv = dir.path().join("other.csv");
        std::fs::write(&csv, "x,y\n").unwrap();
        let err = probe_file(&csv, &Writes::Rows("a,b".into())).unwrap_err();
        assert!(matches!(err, WriteError::CsvHeaderMismatch { .. }), "{err}");
        let under_file = csv.join("results");
        let err = probe_dir(&under_file).unwrap_err().to_string();
        assert!(err.contains("Not a directory"), "{err}");
        assert_eq!(names(dir.path()), ["other.csv"]);
    }

    #[test]
    fn a_fifo_is_asked_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.fifo");
        super::super::mkfifo(&fifo);
        // Opening it for writing would wait for a reader forever.
        probe_file(&fifo, &Writes::Whole).unwrap();
        probe_file(&fifo, &Writes::Lines).unwrap();
    }
}
