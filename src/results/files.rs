//! Where result files go and how they are written whole.
//!
//! The names of a run's files in a `--results` directory, a comparison's directory, and writes through
//! a temporary file, so that a reader never sees half a file.

use super::RunInfo;
use super::run::role_name;
use super::time::{compact_timestamp, now_rfc3339};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

mod probe;
pub(crate) use probe::{Unusable, Writes, probe_dir, probe_file};

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
        "cannot append to {}: its header does not match roceperf's CSV columns{why} (expected {expected:?}, found {found:?}); \
         pass a new file to --csv, or move the old one aside",
        path.display()
    )]
    CsvHeaderMismatch {
        /// Why they differ, when it can tell: `, as an older roceperf wrote it (without ...)`.
        why: String,
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

impl WriteError {
    /// The file that could not be written.
    pub fn path(&self) -> &Path {
        match self {
            WriteError::Io { path, .. }
            | WriteError::CsvHeaderMismatch { path, .. }
            | WriteError::Csv { path, .. }
            | WriteError::Json { path, .. } => path,
        }
    }

    /// The error without the file's name, for a caller that names the file in its own words: the OS's
    /// error, or this one.
    pub fn into_io(self) -> std::io::Error {
        match self {
            WriteError::Io { source, .. } => source,
            WriteError::Csv { source, .. } => source.into(),
            WriteError::Json { source, .. } => source.into(),
            e @ WriteError::CsvHeaderMismatch { .. } => std::io::Error::other(e),
        }
    }
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

/// Whether `path` is `-`: standard output, as `roce_gate` reads `-` as standard input.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Where a file named `-` goes: the process's standard output as it was when [`claim_stdout`] moved
/// the console off it (or, unclaimed, standard output itself).
static STDOUT: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

fn stdout_file() -> std::io::Result<&'static std::fs::File> {
    if let Some(f) = STDOUT.get() {
        return Ok(f);
    }
    // SAFETY: dup of descriptor 1, which the process holds open; the new descriptor is owned here.
    let fd = unsafe { libc::dup(libc::STDOUT_FILENO) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by dup and nothing else owns it.
    let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Ok(STDOUT.get_or_init(|| file))
}

/// Keeps standard output for the file named `-` and sends the console there goes (`print!`) to
/// standard error from now on, so that `roce_write_lat ... --json - | roce_gate ... -` pipes a
/// document and nothing else. Called once, at set-up, before anything is printed.
pub(crate) fn claim_stdout() -> std::io::Result<()> {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    stdout_file()?;
    // SAFETY: dup2 of two descriptors the process holds open; descriptor 1 then names stderr's file,
    // and the saved duplicate keeps the original standard output.
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Writes `bytes` to `path` as a whole ([`replace_with`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    replace_with(path, |w| w.write_all(bytes))
}

/// Replaces `path` with what `write` writes, through a temporary file beside it that is then renamed
/// over it, so that a reader never sees half a file. Every file roceperf writes whole goes through
/// here (what is appended or streamed goes through [`append_under_header`] and [`LineStream`]).
///
/// `-` is standard output ([`claim_stdout`]), written in place.
///
/// Only a missing path or a regular file is replaced. A symbolic link is followed: the file it names is
/// replaced (through a temporary file beside that file) and the link kept. A device, FIFO or socket is
/// written in place, never renamed over, and its write errors are reported (`/dev/full`: no space).
pub(crate) fn replace_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let io = |action, source| WriteError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    if is_stdout(path) {
        return stdout_file()
            .and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                write(&mut w)?;
                w.flush()
            })
            .map_err(|e| io("write", e));
    }
    match landing(path).map_err(|e| io("look up", e))? {
        Landing::InPlace(at) => OpenOptions::new()
            .write(true)
            .open(&at)
            .and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                write(&mut w)?;
                w.flush()
            })
            .map_err(|e| io("write", e)),
        Landing::Replace(at) => {
            let mut tmp_name = at.file_name().unwrap_or_default().to_owned();
            tmp_name.push(".partial");
            let tmp = at.with_file_name(tmp_name);
            let written = std::fs::File::create(&tmp).and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                write(&mut w)?;
                w.flush()
            });
            let renamed = written.map_err(|e| io("write", e)).and_then(|()| {
                std::fs::rename(&tmp, &at).map_err(|e| io("rename a temporary file onto", e))
            });
            if renamed.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            renamed
        }
    }
}

/// Where a whole-file write lands.
#[derive(Debug, PartialEq, Eq)]
enum Landing {
    /// A new or regular file, replaced by renaming a finished temporary file over it.
    Replace(PathBuf),
    /// A device, FIFO or socket: written where it is, never replaced.
    InPlace(PathBuf),
}

/// Where writing `path` whole lands, with symbolic links followed (as the kernel does, at most 40).
fn landing(path: &Path) -> std::io::Result<Landing> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Landing::Replace(at)),
            Err(e) => return Err(e),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let to = std::fs::read_link(&at)?;
            // A relative link is relative to the directory that holds it.
            at = match at.parent() {
                Some(dir) if to.is_relative() => dir.join(to),
                _ => to,
            };
        } else if kind.is_file() {
            return Ok(Landing::Replace(at));
        } else if kind.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "it is a directory",
            ));
        } else {
            return Ok(Landing::InPlace(at));
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// Appends `rows` (CSV lines) to `path`, writing `header` first when the file is new or empty.
///
/// An existing file must start with exactly `header`; otherwise nothing is written and the error names
/// the file and both headers, so rows never end up under the wrong columns. The rows go out in one
/// write of whole lines: two processes appending to one file interleave rows, never cells. `-`
/// (standard output) gets the header and the rows.
pub(crate) fn append_under_header(
    path: &Path,
    header: &str,
    rows: &[u8],
) -> Result<(), WriteError> {
    let io = |action: &'static str| {
        move |source| WriteError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    if is_stdout(path) {
        let mut out = header.as_bytes().to_vec();
        out.push(b'\n');
        out.extend_from_slice(rows);
        return stdout_file()
            .and_then(|mut f| f.write_all(&out))
            .map_err(io("write"));
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io("open"))?;
    let len = file.metadata().map_err(io("read"))?.len();
    let mut out = Vec::with_capacity(header.len() + 2 + rows.len());
    if len == 0 {
        out.extend_from_slice(header.as_bytes());
        out.push(b'\n');
    } else {
        check_header(&mut file, path, header)?;
        // A file cut short mid-line (a crash) must not glue our first row onto its last one.
        file.seek(SeekFrom::End(-1)).map_err(io("read"))?;
        let mut last = [0u8; 1];
        file.read_exact(&mut last).map_err(io("read"))?;
        if last[0] != b'\n' {
            out.push(b'\n');
        }
    }
    out.extend_from_slice(rows);
    file.write_all(&out).map_err(io("write"))
}

/// Checks that the CSV `file` (at `path`, not empty) starts with exactly `header`: rows must never
/// end up under the wrong columns.
fn check_header(file: &mut std::fs::File, path: &Path, header: &str) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut first = String::new();
    BufReader::new(&*file).read_line(&mut first).map_err(io)?;
    let found = first.trim_end_matches(['\r', '\n']);
    if found != header {
        return Err(WriteError::CsvHeaderMismatch {
            why: header_difference(header, found),
            path: path.to_owned(),
            expected: header.to_owned(),
            found: found.to_owned(),
        });
    }
    Ok(())
}

/// Why a CSV's `found` header is not ours (`header`): an older roceperf's, which lacks the columns
/// added since (the message names them), or empty when it cannot tell.
fn header_difference(header: &str, found: &str) -> String {
    match header.strip_prefix(found) {
        Some(rest) if !found.is_empty() && rest.starts_with(',') => format!(
            ", as an older roceperf wrote it (without the columns added since: {})",
            rest[1..].replace(',', ", ")
        ),
        _ => String::new(),
    }
}

/// A file of JSON lines (`--json-stream`), created once and kept open until the run ends, each line
/// written whole and flushed, so that a reader following it (`tail -f`, a FIFO) sees whole lines.
#[derive(Debug)]
pub(crate) struct LineStream {
    path: PathBuf,
    file: std::fs::File,
}

impl LineStream {
    /// Creates (or empties) `path`; `-` is standard output.
    pub(crate) fn create(path: &Path) -> Result<LineStream, WriteError> {
        let file = if is_stdout(path) {
            stdout_file().and_then(std::fs::File::try_clone)
        } else {
            std::fs::File::create(path)
        };
        let file = file.map_err(|source| WriteError::Io {
            action: "create",
            path: path.to_owned(),
            source,
        })?;
        Ok(LineStream {
            path: path.to_owned(),
            file,
        })
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `line` (which ends in a newline) in one write, then flushes.
    pub(crate) fn line(&mut self, line: &[u8]) -> Result<(), WriteError> {
        self.file
            .write_all(line)
            .and_then(|()| self.file.flush())
            .map_err(|source| WriteError::Io {
                action: "write",
                path: self.path.clone(),
                source,
            })
    }
}

/// `results/20261129-102425`: the directory of a comparison started at `started_at` (RFC 3339).
pub(crate) fn compare_dir(results: &Path, started_at: &str) -> PathBuf {
    let stamp = compact_timestamp(started_at)
        .or_else(|| compact_timestamp(&now_rfc3339()))
        .unwrap_or_default();
    results.join(stamp)
}

/// Makes a FIFO at `path`, for the tests of what is written to one.
#[cfg(test)]
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;

    fn write_text(path: &Path, text: &str) -> Result<(), WriteError> {
        replace_with(path, |w| w.write_all(text.as_bytes()))
    }

    #[test]
    fn a_symlink_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        write_text(&link, "new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // A link to a file not there yet creates that file, beside which the temporary file was made.
        let dangling = dir.path().join("later.json");
        std::os::unix::fs::symlink(dir.path().join("sub/made.json"), &dangling).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        write_text(&dangling, "made").unwrap();
        assert!(
            std::fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sub/made.json")).unwrap(),
            "made"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 4, "no temporary file left: {names:?}");
    }

    #[test]
    fn a_fifo_is_written_in_place_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("results.fifo");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_text(&fifo, "{\"through\": \"the fifo\"}\n").unwrap();
        // Checked before the reader is joined: had the FIFO been replaced, the reader would wait forever.
        use std::os::unix::fs::FileTypeExt;
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
        assert_eq!(reader.join().unwrap(), "{\"through\": \"the fifo\"}\n");
        assert!(!dir.path().join("results.fifo.partial").exists());
    }

    #[test]
    fn a_directory_or_a_link_loop_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_text(dir.path(), "x").unwrap_err().to_string();
        assert!(
            err.contains(&dir.path().display().to_string()) && err.contains("directory"),
            "{err}"
        );
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        let err = write_text(&a, "x").unwrap_err().to_string();
        assert!(err.contains("symbolic links"), "{err}");
    }

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
