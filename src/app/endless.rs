//! What a run writes, and what a run without end (`--run_infinitely`) writes while it goes on and when
//! it stops.
//!
//! A run's files come from one export manager that `report::export` builds from its output options
//! ([`exports`]). A run without end keeps it open ([`Outputs`]): each interval, a perftest row on the
//! console (as ib_write_bw's run_infinitely prints one per period), a CSV row appended whole (`--csv`,
//! `--results`), perftest's JSON rewritten whole with the interval (`--out_json`, as perftest rewrites
//! it) and a JSON line (`--json-stream`). Nothing a stop can cut in half: lines are single writes,
//! files are replaced by renaming.

use super::Error;
use super::measure;
use super::plan::Plan;
use crate::bench::interval::IntervalSample;
use crate::cli::OutputOptions;
use crate::report;
use crate::report::export::{Document, ExportManager, Written};
use crate::results::{Measured, RunInfo, SizeResult, WriteError};

/// A run's files, from its output options (`report::export` builds the manager from their flags).
pub(crate) fn exports(out: &OutputOptions) -> ExportManager {
    ExportManager::for_run(&out.files, &out.reporting_files, out.single)
}

/// The outputs of one run without end, from its first interval to its summary.
pub(crate) struct Outputs<'p> {
    plan: &'p Plan,
    info: RunInfo,
    exports: ExportManager,
    intervals: u64,
    /// The first write that failed; the run goes on, and the error ends it with exit 2 afterwards.
    failed: Option<WriteError>,
}

impl<'p> Outputs<'p> {
    /// Opens the run's outputs: `--json-stream` gets its first line, what the run is.
    pub(crate) fn open(plan: &'p Plan, info: &RunInfo) -> Result<Outputs<'p>, Error> {
        let mut exports = exports(&plan.output);
        exports.write(&Document::Start(info)).result()?;
        Ok(Outputs {
            plan,
            info: info.clone(),
            exports,
            intervals: 0,
            failed: None,
        })
    }

    /// One interval of `size`-byte messages ended; `at`: `sender` or `receiver`.
    pub(crate) fn interval(&mut self, size: u64, s: &IntervalSample, at: &str) {
        let plan = self.plan;
        let b = measure::bandwidth(plan, size, s.messages, s.elapsed_ns(), None, at);
        let r = SizeResult {
            size,
            iterations: s.messages,
            measured: Measured::Bandwidth(b),
            cpu_util: None,
            lost: None,
        };
        self.intervals += 1;
        let row = match plan.output.single {
            Some(sel) => report::console::single_value_in(sel, &r, plan.output.report_gbits),
            None => report::table_row(&self.info, &r),
        };
        report::emit(&row);
        let doc = Document::Interval {
            info: &self.info,
            result: &r,
            index: s.index,
            span: (s.start_ns as f64 / 1e9, s.end_ns as f64 / 1e9),
        };
        let failed = &mut self.failed;
        self.exports.write_each(&doc, |e| {
            failed.get_or_insert(e);
            true
        });
    }

    /// Interval lines written so far.
    pub(crate) fn intervals(&self) -> u64 {
        self.intervals
    }

    /// After the summary: the run's files, the stream's last line (the run's whole document); what was
    /// written, and the first error of the whole run.
    pub(crate) fn finish(mut self, doc: &Document<'_>) -> Written {
        let failed = &mut self.failed;
        let paths = self.exports.write_each(doc, |e| {
            failed.get_or_insert(e);
            true
        });
        Written {
            paths,
            error: self.failed,
        }
    }
}
