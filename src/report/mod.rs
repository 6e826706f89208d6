//! Rendering results: the perftest console report, a comparison's table, plots and logs, a progress bar,
//! and every file roceperf writes.
//!
//! The console report follows perftest's layout; a comparison gets a terminal table and histograms.
//! Files, of a run, a comparison or a fabric matrix alike, go through the [`export`] pipeline.
//!
//! Reports know nothing of transports (docs/ARCHITECTURE.md): everything they print comes from the results model
//! (`crate::results`): a [`RunInfo`](crate::results::RunInfo), which the binary fills from its options
//! and its transport, and [`SizeResult`](crate::results::SizeResult)s, which the drivers measure.

pub(crate) mod congestion;
pub(crate) mod console;
pub mod export;
pub(crate) mod hdrlog;
pub(crate) mod heatmap;
pub(crate) mod histogram_text;
pub(crate) mod loss_svg;
pub(crate) mod nic_counters;
pub(crate) mod perftest_json;
pub(crate) mod progress;
pub(crate) mod svg;
pub(crate) mod table;
pub(crate) mod term;
pub(crate) mod wrap;

pub use console::{address_block, extras, header_block, table_footer, table_header, table_row};

/// `2 B`, `64 KiB`, `1 MiB`, `1000 B`: powers of two in binary units, anything else in bytes.
pub(crate) fn fmt_size(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

/// Writes to stdout, ignoring a closed pipe (`| head`): the verdict is in the exit status and the files,
/// and a reader that has seen enough is no reason to panic.
pub(crate) fn emit(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(fmt_size(2), "2 B");
        assert_eq!(fmt_size(65536), "64 KiB");
        assert_eq!(fmt_size(1 << 20), "1 MiB");
        assert_eq!(fmt_size(1000), "1000 B");
        assert_eq!(fmt_size(3 << 10), "3 KiB");
    }
}
