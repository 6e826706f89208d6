//! HdrHistogram interval logs: one `.hlog` per latency run and size of a comparison.

use super::{Document, ExportFile, Exporter, Files, Place};
use crate::report::{fmt_size, hdrlog};
use crate::results::time::parse_rfc3339;
use crate::results::{CompareRun, Measured, WriteError};
use std::time::{Duration, SystemTime};

/// One HdrHistogram interval log per latency run and size.
pub(crate) struct HdrLogExporter;

/// `write_lat-roce-v2-soft-2B.hlog`: a file name from a test, a label and a size.
pub(crate) fn hlog_name(run: &CompareRun, size: u64) -> String {
    let mut slug = String::new();
    for c in run.label.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    format!("{}-{}-{size}B.hlog", run.test, slug.trim_matches('-'))
}

impl Exporter for HdrLogExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let Document::Compare(set) = *doc else {
            return Ok(Vec::new());
        };
        let start = parse_rfc3339(&set.started_at).unwrap_or_else(SystemTime::now);
        let mut files = Vec::new();
        for run in &set.runs {
            for r in &run.results {
                let Measured::Latency { histogram, .. } = &r.measured else {
                    continue;
                };
                let path = place.join(&hlog_name(run, r.size));
                // The log wants an interval length; the time spent in the measured round trips is the
                // closest we know (warm-up and setup excluded).
                let busy_ns =
                    histogram.mean() * histogram.len() as f64 * f64::from(run.test.rtt_factor());
                let comment = format!(
                    "roceperf {} {} {} {}",
                    set.version,
                    run.test,
                    run.label,
                    fmt_size(r.size)
                );
                let bytes = hdrlog::interval_log(
                    histogram,
                    &run.label,
                    &comment,
                    start,
                    Duration::from_nanos(busy_ns as u64),
                )
                .map_err(|e| WriteError::Io {
                    action: "encode the HdrHistogram log for",
                    path: path.clone(),
                    source: std::io::Error::other(e),
                })?;
                files.push(ExportFile::whole(path, bytes));
            }
        }
        Ok(files)
    }
}
