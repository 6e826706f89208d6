//! A result file's bytes read within a bound: its first bytes are checked as they arrive (a device, a
//! binary file or the wrong text fails there, not after the whole of it is in memory), and a source that
//! is not a regular file (standard input, a device, a FIFO) is cut at [`STREAM_LIMIT`].

use super::ReadError;
use super::csv::parse_csv;
use std::io::{ErrorKind, Read};
use std::path::Path;

/// The most read from a source that is not a regular file: far more than any result file a run or a
/// comparison writes (a regular file's own size bounds it, so a large fabric matrix still reads).
pub(super) const STREAM_LIMIT: u64 = 256 << 20;

/// How much of the start is checked for bytes no result file holds.
const HEAD: usize = 4096;

/// The most a CSV header line may take before it must have ended.
const HEADER_LINE: usize = 64 << 10;

/// Reads `path` (`-`-style names are the caller's: see [`read_from`]).
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let regular = file.metadata().map_err(io)?.is_file();
    read_from(path, file, regular)
}

/// Reads `source`, named `path` in errors: its start checked as it arrives, and cut at
/// [`STREAM_LIMIT`] unless it is a `regular` file (whose size bounds it).
pub(crate) fn read_from(
    path: &Path,
    source: impl Read,
    regular: bool,
) -> Result<Vec<u8>, ReadError> {
    read_within(path, source, (!regular).then_some(STREAM_LIMIT))
}

/// Reads `source`, its start checked as it arrives, at most `limit` bytes when there is one.
fn read_within(
    path: &Path,
    mut source: impl Read,
    limit: Option<u64>,
) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut started = false;
    loop {
        let n = match source.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ReadError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        if let Some(limit) = limit
            && bytes.len() as u64 + n as u64 > limit
        {
            return Err(ReadError::Unbounded {
                path: path.to_owned(),
                limit,
            });
        }
        bytes.extend_from_slice(&chunk[..n]);
        if !started {
            started = starts_a_result(path, &bytes, false)?;
        }
    }
    if !started {
        starts_a_result(path, &bytes, true)?;
    }
    Ok(bytes)
}

/// Whether `bytes`, the start of `path`, can start a result file: an error at the first byte that
/// cannot; `Ok(false)` while too little has arrived to tell (and the input has not ended).
fn starts_a_result(path: &Path, bytes: &[u8], ended: bool) -> Result<bool, ReadError> {
    let bom = if bytes.starts_with("\u{feff}".as_bytes()) {
        3
    } else {
        0
    };
    let head = &bytes[..bytes.len().min(HEAD)];
    let not_a_result = |at: usize| ReadError::NotAResult {
        path: path.to_owned(),
        offset: at,
        byte: bytes[at],
    };
    // A result file is text: JSON or CSV, UTF-8, no control character but tab and line ends.
    if let Some(at) = head
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
    {
        return Err(not_a_result(at));
    }
    if let Err(e) = std::str::from_utf8(head)
        && (e.error_len().is_some() || (ended && head.len() == bytes.len()))
    {
        return Err(not_a_result(e.valid_up_to()));
    }
    let Some(first) = head[bom.min(head.len())..]
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| i + bom)
    else {
        // Only blanks so far: the readers behind say what an empty file is.
        return Ok(ended || head.len() == HEAD);
    };
    let json_named = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    match bytes[first] {
        b'{' | b'[' => Ok(true),
        _ if json_named => Err(not_a_result(first)),
        // A CSV: its header line is ours, or nothing after it matters.
        _ => match bytes[first..].iter().position(|&b| b == b'\n') {
            None if !ended && bytes.len() - first < HEADER_LINE => Ok(false),
            end => {
                let line = &bytes[first..end.map_or(bytes.len(), |e| first + e + 1)];
                parse_csv(path, line).map(|_| true)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str, bytes: &[u8], regular: bool) -> Result<Vec<u8>, ReadError> {
        read_from(Path::new(name), bytes, regular)
    }

    #[test]
    fn bytes_no_result_file_starts_with_fail_there() {
        let e = read("z", &[0u8; 1 << 20], true).unwrap_err().to_string();
        assert!(
            e.starts_with("z: byte 0 (0x00) cannot start a result file"),
            "{e}"
        );
        let e = read("r.json", b"  \xff{}", true).unwrap_err().to_string();
        assert!(e.contains("byte 2 (0xFF)"), "{e}");
        let e = read("r.json", b"\n  hello", true).unwrap_err().to_string();
        assert!(e.contains("byte 3 (0x68)"), "{e}");
        let e = read("-", b"y\ny\ny\n", false).unwrap_err().to_string();
        assert!(e.starts_with("- line 1:"), "{e}");
    }

    #[test]
    fn what_roceperf_writes_passes_whole() {
        let json = b"\xef\xbb\xbf{\"schema\": \"roceperf.result\", \"x\": \"\xc3\xa9\"}\n";
        assert_eq!(read("r.json", json, false).unwrap(), json);
        let csv = b"test,transport,roce,size_bytes,bw_avg_gbps\nwrite_bw,tcp,,65536,9.5\n";
        assert_eq!(read("r.csv", csv, false).unwrap(), csv);
        assert_eq!(read("e.json", b"", true).unwrap(), b"");
    }

    #[test]
    fn a_stream_is_cut_at_the_limit() {
        let endless = std::io::repeat(b' ');
        let e = read_within(Path::new("/dev/stdin"), endless, Some(1 << 20)).unwrap_err();
        assert!(matches!(e, ReadError::Unbounded { limit: 1048576, .. }));
        assert!(
            e.to_string()
                .starts_with("/dev/stdin is not a regular file and gave more than 1 MiB"),
            "{e}"
        );
        // A regular file's own size bounds it.
        let big = vec![b' '; (1 << 20) + 1];
        assert_eq!(
            read_within(Path::new("r.json"), &big[..], None)
                .unwrap()
                .len(),
            big.len()
        );
    }
}
