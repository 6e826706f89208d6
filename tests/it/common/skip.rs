//! Skips that are never silent: a test that cannot run on this machine records why, in a file the test
//! script lists at the end of the run (`target/test-skips/<test>.txt`), and says so on the real stderr
//! (libtest's capture hides eprintln!). With `ROCEPERF_STRICT=1` (CI: root, every dependency installed)
//! a skip is a failure instead.
//!
//! ```ignore
//! if common::skip_unless(soft_support::is_root(), "needs root for network namespaces") {
//!     return;
//! }
//! ```

use std::io::Write;
use std::path::PathBuf;

/// Where skips are recorded: `target/test-skips/` (beside the integration tests' own tmp directory,
/// so `CARGO_TARGET_DIR` is honoured). scripts/test.sh empties it first and lists it last.
pub fn skips_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join("test-skips")
}

/// True when skips fail (`ROCEPERF_STRICT=1`).
pub fn strict() -> bool {
    std::env::var("ROCEPERF_STRICT").is_ok_and(|v| v == "1")
}

/// The running test's name: libtest names each test's thread after it (with one test thread it runs
/// on `main`; then `fallback`, the caller's module, stands in).
fn test_name(fallback: &str) -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => fallback.to_owned(),
    }
}

/// Records that the running test is skipped for `reason`: prints it, writes
/// `target/test-skips/<test>.txt`; under `ROCEPERF_STRICT=1` panics instead. The caller returns.
#[track_caller]
pub fn skip(reason: &str) {
    let caller = std::panic::Location::caller();
    let name = test_name(caller.file());
    if strict() {
        panic!("{name} cannot run here and ROCEPERF_STRICT=1 allows no skip: {reason}");
    }
    let dir = skips_dir();
    let file = dir.join(format!("{}.txt", name.replace(['/', ':'], "_")));
    let recorded = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&file, format!("{name}: {reason}\n")));
    // Straight to the process's stderr: libtest captures eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "SKIPPED {name}: {reason}");
    if let Err(e) = recorded {
        panic!(
            "{name} is skipped ({reason}) but the skip could not be recorded in {}: {e}",
            file.display()
        );
    }
}

/// When `can_run` is false, records the skip (see [`skip`]) and returns true: the caller returns.
/// `if common::skip_unless(have_tshark(), "needs tshark") { return; }`
#[track_caller]
pub fn skip_unless(can_run: bool, reason: &str) -> bool {
    if !can_run {
        skip(reason);
    }
    !can_run
}
