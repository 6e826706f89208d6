//! What a run without end (`--run_infinitely`) writes while it goes on and when it stops.
//!
//! Each interval: a perftest row on the console (as ib_write_bw's run_infinitely prints one per
//! period), a CSV row appended whole (`--csv`, `--results`), a JSON line (`--json-stream`), and
//! perftest's JSON rewritten whole with the interval (`--out_json`, as perftest rewrites it). Nothing a
//! stop can cut in half: lines are single writes, files are replaced by renaming.

use super::Error;
use super::measure;
use super::plan::Plan;
use crate::bench::interval::IntervalSample;
use crate::report;
use crate::results::{self, Measured, RunInfo, SizeResult, WriteError};
use serde_json::{Value, json};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The `schema` of the first line of a `--json-stream` file.
pub(crate) const STREAM_SCHEMA: &str = "roceperf.stream";
/// Bumped whenever a line's key is renamed or removed or changes meaning.
pub(crate) const STREAM_SCHEMA_VERSION: u32 = 1;

/// A `--json-stream` file: one JSON object a line, each written whole and flushed.
struct JsonLines {
    path: PathBuf,
    file: File,
}

impl JsonLines {
    fn create(path: &Path) -> Result<JsonLines, WriteError> {
        let file = File::create(path).map_err(|source| WriteError::Io {
            action: "create",
            path: path.to_owned(),
            source,
        })?;
        Ok(JsonLines {
            path: path.to_owned(),
            file,
        })
    }

    fn line(&mut self, v: &Value) -> Result<(), WriteError> {
        let mut text = serde_json::to_vec(v).map_err(|source| WriteError::Json {
            path: self.path.clone(),
            source,
        })?;
        text.push(b'\n');
        self.file
            .write_all(&text)
            .and_then(|()| self.file.flush())
            .map_err(|source| WriteError::Io {
                action: "write",
                path: self.path.clone(),
                source,
            })
    }
}

/// The outputs of one run without end, from its first interval to its summary.
pub(crate) struct Outputs<'p> {
    plan: &'p Plan,
    info: RunInfo,
    stream: Option<JsonLines>,
    intervals: u64,
    /// The first write that failed; the run goes on, and the error ends it with exit 2 afterwards.
    failed: Option<WriteError>,
}

impl<'p> Outputs<'p> {
    /// Opens `--json-stream` and writes its first line: what the run is.
    pub(crate) fn open(plan: &'p Plan, info: &RunInfo) -> Result<Outputs<'p>, Error> {
        let mut stream = match &plan.output.json_stream {
            Some(p) => Some(JsonLines::create(p)?),
            None => None,
        };
        if let Some(s) = stream.as_mut() {
            s.line(&json!({
                "event": "start",
                "schema": STREAM_SCHEMA,
                "schema_version": STREAM_SCHEMA_VERSION,
                "tool": {"name": "roceperf", "version": info.version},
                "test": info,
            }))?;
        }
        Ok(Outputs {
            plan,
            info: info.clone(),
            stream,
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
        let span = (s.start_ns as f64 / 1e9, s.end_ns as f64 / 1e9);
        if let Err(e) = self.write(&r, s.index, span) {
            self.failed.get_or_insert(e);
        }
    }

    fn write(&mut self, r: &SizeResult, index: u64, span: (f64, f64)) -> Result<(), WriteError> {
        let out = &self.plan.output;
        if let Some(p) = &out.csv {
            results::append_csv_interval(p, &self.info, r, span)?;
        }
        if let Some(dir) = &out.results {
            results::create_results_dir(dir)?;
            let (csv, _) = results::results_paths(dir, &self.info);
            results::append_csv_interval(&csv, &self.info, r, span)?;
        }
        if let Some(s) = self.stream.as_mut() {
            // The result object exactly as a run's document holds it (units included).
            let mut doc = results::to_json(&self.info, std::slice::from_ref(r));
            let result = doc["results"][0].take();
            s.line(&json!({
                "event": "interval",
                "index": index,
                "start_s": span.0,
                "end_s": span.1,
                "result": result,
            }))?;
        }
        write_out_json(self.plan, &self.info, r, None)
    }

    /// Interval lines written so far.
    pub(crate) fn intervals(&self) -> u64 {
        self.intervals
    }

    /// After the summary: the stream's last line (the run's whole document), and the first error.
    pub(crate) fn finish(mut self, info: &RunInfo, results: &[SizeResult]) -> Result<(), Error> {
        if let Some(s) = self.stream.as_mut() {
            let end = json!({"event": "end", "document": results::to_json(info, results)});
            if let Err(e) = s.line(&end) {
                self.failed.get_or_insert(e);
            }
        }
        match self.failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

/// `--out_json`: perftest's document for `r` (with `both`, `--report-both`'s two sides), replaced whole.
pub(crate) fn write_out_json(
    plan: &Plan,
    info: &RunInfo,
    r: &SizeResult,
    both: Option<(&SizeResult, &SizeResult)>,
) -> Result<(), WriteError> {
    let Some(path) = &plan.output.out_json else {
        return Ok(());
    };
    let doc = report::perftest_json::PerftestJson {
        info,
        result: r,
        single: plan.output.single,
        both,
    };
    results::write_atomic(path, report::perftest_json::perftest_json(&doc).as_bytes())
}
