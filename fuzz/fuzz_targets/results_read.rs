//! Arbitrary bytes as a result file, through the readers `roce_gate` and `roce_compare --from` use:
//! the bounded read of a pipe (its first-bytes check), the rows by extension or by content (JSON or
//! CSV), and the whole JSON document. Never a panic; every error names the file; what the pipe's
//! reader accepts, the whole-file reader accepts with the same rows; the first-bytes check refuses
//! nothing the readers would take rows from.
//!
//! Input: `[name, bytes..]`: the low two bits of the first byte pick the name (`-`-style stdin with
//! no extension, `.json`, `.csv`, `.txt`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roceperf::results::read::{document_from_bytes, rows_from_bytes, rows_from_pipe};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let name = ["<stdin>", "run.json", "results.csv", "notes.txt"][usize::from(pick & 3)];
    let path = Path::new(name);
    let piped = rows_from_pipe(path, bytes);
    let whole = rows_from_bytes(path, bytes);
    for e in [&piped, &whole]
        .into_iter()
        .filter_map(|r| r.as_ref().err())
    {
        assert!(e.starts_with(name), "the error does not name the file: {e}");
    }
    match (&piped, &whole) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the pipe's reader and the file reader disagree"),
        (Ok(n), Err(e)) => panic!("the pipe's reader took {n} rows, the file reader said {e}"),
        (Err(e), Ok(n)) if *n > 0 => {
            panic!("the first-bytes check refused a file with {n} rows: {e}")
        }
        _ => {}
    }
    if let Err(e) = document_from_bytes(path, bytes) {
        assert!(e.starts_with(name), "the error does not name the file: {e}");
    }
});
