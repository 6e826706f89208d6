//! Every file roceperf writes, through one pipeline in the shape of hyperfine's `export`: one
//! [`Exporter`] per format, one small file each, and an [`ExportManager`] that the binaries build from
//! their output options and that writes what its exporters make.
//!
//! What is exported is one [`Document`]: a single run (as it starts, at each interval of a run without
//! end, and whole), a comparison, a fabric matrix, or a congestion study. A format that applies to several documents (JSON,
//! CSV, SVG) is written once for all of them; a format that does not apply to a document makes no file
//! for it. The formats: [`CsvExporter`], [`JsonExporter`], [`PerftestJsonExporter`] (perftest's
//! `--out_json`), [`JsonStreamExporter`] (`--json-stream`), [`HdrLogExporter`], [`SvgExporter`] (a
//! comparison's plots, a fabric's heatmaps), [`LossExporter`] (a loss sweep's CSV and plots) and
//! [`OpenMetricsExporter`] (`--metrics`: Prometheus' text format).
//!
//! Exporters only make bytes; the manager writes them, each file in one of three ways (see [`Content`]),
//! all of them in `crate::results::files`: replaced whole through a temporary file, rows appended under
//! a checked CSV header, or lines of a stream kept open. Before a run is measured,
//! [`ExportManager::probe`] tries each place as its format will write it, naming the flag of one that
//! cannot be written.
//!
//! The flags that name a file of a format are declared here too, as clap `Args` the binaries flatten:
//! [`FormatFiles`] (every tool: the six tests, `roce_compare`, `roce_fabric`), [`RunFiles`] and
//! [`ReportingFiles`] (a single run's). Each tool's manager is built from them here
//! ([`ExportManager::for_run`], [`ExportManager::with_formats`]), so a new format with a flag of its
//! own is its file in `export/`, its `mod` line, and its flag and registration in [`FormatFiles`].

mod csv;
mod hdrlog;
mod json;
mod loss;
pub(crate) mod openmetrics;
mod perftest;
mod stream;
mod svg;

pub(crate) use csv::CsvExporter;
pub(crate) use hdrlog::HdrLogExporter;
pub(crate) use json::JsonExporter;
pub(crate) use loss::LossExporter;
pub(crate) use openmetrics::OpenMetricsExporter;
pub(crate) use perftest::PerftestJsonExporter;
pub(crate) use stream::JsonStreamExporter;
pub(crate) use svg::SvgExporter;

use crate::params::OutputSelect;
use crate::results::congestion::CongestionDoc;
use crate::results::fabric::FabricRun;
use crate::results::{
    CompareSet, LineStream, RunInfo, SizeResult, Unusable, WriteError, Writes, append_under_header,
    create_results_dir, probe_dir, probe_file, replace_with, write_atomic,
};
use std::io;
use std::path::{Path, PathBuf};

/// The files of the formats any document can be written in, one flag a format: the six tests,
/// `roce_compare` and `roce_fabric` all flatten this, so a flag declared here is a flag of each, and
/// each hands it whole to its manager ([`ExportManager::with_formats`], which registers every field).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct FormatFiles {
    /// Write the results as Prometheus metrics (text exposition format) to FILE, replaced whole: give
    /// it a .prom name in node_exporter's --collector.textfile.directory for Prometheus to scrape.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
}

/// Whether `cmd` takes the flags of [`FormatFiles`]: flattened whole (clap names its group after the
/// struct), every flag of it there. Each tool's tests ask, so that no tool is left without a format.
#[cfg(test)]
pub(crate) fn takes_format_files(cmd: &clap::Command) -> bool {
    use clap::Args;
    let own = FormatFiles::augment_args(clap::Command::new("formats"));
    cmd.get_groups().any(|g| g.get_id() == "FormatFiles")
        && own
            .get_arguments()
            .all(|a| cmd.get_arguments().any(|b| b.get_id() == a.get_id()))
}

/// perftest's `DEFAULT_JSON_FILE_NAME`, in the working directory.
pub(crate) const DEFAULT_OUT_JSON: &str = "perftest_out.json";

/// The files a single run writes, as its flags name them (flattened into `cli::Args`).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct RunFiles {
    /// Append one CSV row per message size to FILE (header written once).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write the parameters, per-size results and histograms as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write both CSV and JSON into DIR with timestamped names.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,

    /// The formats every tool writes.
    #[command(flatten)]
    pub formats: FormatFiles,
}

/// A single run's files that belong with its reporting flags: a run without end's `--json-stream` and
/// perftest's `--out_json`. Declared apart from [`RunFiles`] because `--help` lists them there, after
/// `--report-interval`; `cli` checks that they fit the run.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct ReportingFiles {
    /// With --run_infinitely: JSON lines to FILE, one object per interval as it ends, then the summary.
    #[arg(long = "json-stream", value_name = "FILE")]
    pub json_stream: Option<PathBuf>,

    /// Also write the report as perftest's --out_json does, field for field (to --out_json_file).
    #[arg(long = "out_json")]
    pub out_json: bool,

    /// File for --out_json (implies it) [default: perftest_out.json].
    #[arg(long = "out_json_file", value_name = "FILE")]
    pub out_json_file: Option<PathBuf>,
}

impl ReportingFiles {
    /// Where perftest's JSON goes: `--out_json_file`, or [`DEFAULT_OUT_JSON`] with `--out_json` alone.
    pub(crate) fn out_json(&self) -> Option<PathBuf> {
        (self.out_json || self.out_json_file.is_some()).then(|| {
            self.out_json_file
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_OUT_JSON))
        })
    }
}

/// What is exported: one of the documents roceperf writes.
#[derive(Clone, Copy)]
pub(crate) enum Document<'a> {
    /// A run's description as it starts (a run without end's stream opens with it).
    Start(&'a RunInfo),
    /// One interval of a run without end: its result, its number, and its span in seconds from the
    /// run's start.
    Interval {
        /// The run.
        info: &'a RunInfo,
        /// What the interval measured.
        result: &'a SizeResult,
        /// Its number, from 0.
        index: u64,
        /// (start, end) in seconds from the run's start.
        span: (f64, f64),
    },
    /// A finished run: one result per message size.
    Run {
        /// The run.
        info: &'a RunInfo,
        /// Its results, in size order.
        results: &'a [SizeResult],
        /// `--report-both`: this side's and the peer's figures of the last size.
        both: Option<(&'a SizeResult, &'a SizeResult)>,
    },
    /// A comparison of transports (a loss sweep's included).
    Compare(&'a CompareSet),
    /// A fabric run's matrices.
    Fabric(&'a FabricRun<'a>),
    /// A congestion study (`roce_compare --congestion`).
    Congestion(&'a CongestionDoc),
}

/// Where a format's files go: the file the user named, or a directory in which each format names its
/// own (`compare.csv`, a run's timestamped names, one `.hlog` per latency run).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Place {
    /// This file.
    File(PathBuf),
    /// This directory (created when a file goes into it).
    Dir(PathBuf),
}

impl Place {
    /// The file named, or the one `name` gives inside the directory.
    pub(crate) fn file(&self, name: impl FnOnce(&Path) -> PathBuf) -> PathBuf {
        match self {
            Place::File(p) => p.clone(),
            Place::Dir(d) => name(d),
        }
    }

    /// `name` inside the directory (the file named, for a file).
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.file(|d| d.join(name))
    }
}

/// A closure that writes a whole file's bytes to the writer it is given.
pub(crate) type WriteBody<'d> = Box<dyn FnOnce(&mut dyn io::Write) -> io::Result<()> + 'd>;

/// What a file receives, and so how it is written.
pub(crate) enum Content<'d> {
    /// The whole file, replaced.
    Whole(Vec<u8>),
    /// The whole file, replaced, written by a closure that streams it (fabric.json's pair records are
    /// never all in memory).
    Streamed(WriteBody<'d>),
    /// CSV rows appended under `header`: written first into a new file, checked in an old one.
    Rows {
        /// The header line, without its line end.
        header: String,
        /// Whole lines.
        rows: Vec<u8>,
    },
    /// One line of a stream, which is created by its first line and stays open.
    Line(Vec<u8>),
}

/// One file an exporter made: where it goes and what it receives.
pub(crate) struct ExportFile<'d> {
    /// Its path.
    pub(crate) path: PathBuf,
    /// What it receives.
    pub(crate) content: Content<'d>,
}

impl<'d> ExportFile<'d> {
    /// A file replaced by `bytes`.
    pub(crate) fn whole(path: PathBuf, bytes: impl Into<Vec<u8>>) -> ExportFile<'d> {
        ExportFile {
            path,
            content: Content::Whole(bytes.into()),
        }
    }
}

/// What an exporter makes of a document: its files, or the error naming the file it could not make.
pub(crate) type Files<'d> = Result<Vec<ExportFile<'d>>, WriteError>;

/// One format.
pub(crate) trait Exporter {
    /// The files of this format for `doc` at `place` (none when the format does not apply to it).
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d>;

    /// How this format writes a file the user named ([`Place::File`]), for its probe at set-up.
    fn writes(&self) -> Writes {
        Writes::Whole
    }
}

/// What [`ExportManager::write`] did: the files written, in order, and the error it stopped at.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// The files written.
    pub(crate) paths: Vec<PathBuf>,
    /// The first error; nothing after it was written.
    pub(crate) error: Option<WriteError>,
}

impl Written {
    /// The files written, or the error.
    pub(crate) fn result(self) -> Result<Vec<PathBuf>, WriteError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.paths),
        }
    }
}

/// One format of a manager: its exporter, its place, and the flag that named the place.
struct Target {
    exporter: Box<dyn Exporter>,
    place: Place,
    flag: Option<&'static str>,
}

/// Writes documents in several formats, each to its place, in the order they were added.
#[derive(Default)]
pub(crate) struct ExportManager {
    exporters: Vec<Target>,
    /// The streams opened so far, by path.
    streams: Vec<LineStream>,
}

impl ExportManager {
    /// A manager without formats.
    pub(crate) fn new() -> ExportManager {
        ExportManager::default()
    }

    /// Adds a format, written to `place`.
    pub(crate) fn with(self, exporter: impl Exporter + 'static, place: Place) -> ExportManager {
        self.with_flag(exporter, place, None)
    }

    /// Adds a format, written to `place`, which `flag` named (said when [`ExportManager::probe`]
    /// finds it unusable).
    fn with_flag(
        mut self,
        exporter: impl Exporter + 'static,
        place: Place,
        flag: Option<&'static str>,
    ) -> ExportManager {
        self.exporters.push(Target {
            exporter: Box::new(exporter),
            place,
            flag,
        });
        self
    }

    /// Adds a format written to `file`, when `flag` gave one.
    pub(crate) fn with_file(
        self,
        exporter: impl Exporter + 'static,
        file: &Option<PathBuf>,
        flag: &'static str,
    ) -> ExportManager {
        match file {
            Some(p) => self.with_flag(exporter, Place::File(p.clone()), Some(flag)),
            None => self,
        }
    }

    /// Tries every place as its format will write it (a file beside a whole file, a CSV's header, a
    /// directory made and written into), leaving nothing changed: run at set-up, before the peer is
    /// contacted, so that a path that cannot be written stops the run before it is measured.
    pub(crate) fn probe(&self) -> Result<(), Unusable> {
        for t in &self.exporters {
            let probed = match &t.place {
                Place::File(p) => probe_file(p, &t.exporter.writes()),
                Place::Dir(d) => probe_dir(d),
            };
            probed.map_err(|source| Unusable {
                flag: t.flag.unwrap_or("output"),
                source,
            })?;
        }
        Ok(())
    }

    /// The flags whose file is `-` (standard output), in the order they were added.
    pub(crate) fn stdout_flags(&self) -> Vec<&'static str> {
        self.exporters
            .iter()
            .filter(|t| matches!(&t.place, Place::File(p) if crate::results::is_stdout(p)))
            .map(|t| t.flag.unwrap_or("output"))
            .collect()
    }

    /// Adds every format [`FormatFiles`] names a file for: the one place a format's flag becomes
    /// its exporter (a field left out here does not compile).
    pub(crate) fn with_formats(self, files: &FormatFiles) -> ExportManager {
        let FormatFiles { metrics } = files;
        self.with_file(OpenMetricsExporter, metrics, "--metrics")
    }

    /// A single run's files: `--csv` (rows appended), `--json`, `--results` (both, timestamped),
    /// perftest's `--out_json` (with `--output`'s one figure: `single`), `--json-stream` (a run
    /// without end) and every format of [`FormatFiles`], in that order.
    pub(crate) fn for_run(
        files: &RunFiles,
        reporting: &ReportingFiles,
        single: Option<OutputSelect>,
    ) -> ExportManager {
        let mut m = ExportManager::new()
            .with_file(CsvExporter, &files.csv, "--csv")
            .with_file(JsonExporter, &files.json, "--json");
        if let Some(dir) = &files.results {
            let results = Some("--results");
            m = m
                .with_flag(CsvExporter, Place::Dir(dir.clone()), results)
                .with_flag(JsonExporter, Place::Dir(dir.clone()), results);
        }
        let out_json = match reporting.out_json_file {
            Some(_) => "--out_json_file",
            None => "--out_json",
        };
        m.with_file(
            PerftestJsonExporter { single },
            &reporting.out_json(),
            out_json,
        )
        .with_file(JsonStreamExporter, &reporting.json_stream, "--json-stream")
        .with_formats(&files.formats)
    }

    /// A comparison's files in `dir`: compare.csv, compare.json, the HdrHistogram logs, the plots.
    pub(crate) fn comparison(dir: &Path) -> ExportManager {
        let place = || Place::Dir(dir.to_owned());
        ExportManager::new()
            .with(CsvExporter, place())
            .with(JsonExporter, place())
            .with(HdrLogExporter, place())
            .with(SvgExporter, place())
    }

    /// A loss sweep's own files in `dir`: loss.csv and its plots (its comparison's files come from
    /// [`ExportManager::comparison`]).
    pub(crate) fn loss_sweep(dir: &Path) -> ExportManager {
        ExportManager::new().with(LossExporter, Place::Dir(dir.to_owned()))
    }

    /// A fabric run's tables in `dir`: fabric.json and fabric.csv (a snapshot when a rank is lost).
    pub(crate) fn fabric_tables(dir: &Path) -> ExportManager {
        let place = || Place::Dir(dir.to_owned());
        ExportManager::new()
            .with(JsonExporter, place())
            .with(CsvExporter, place())
    }

    /// A fabric run's files in `dir`: its tables and a heatmap per matrix.
    pub(crate) fn fabric(dir: &Path) -> ExportManager {
        ExportManager::fabric_tables(dir).with(SvgExporter, Place::Dir(dir.to_owned()))
    }

    /// A congestion study's files in `dir`: congestion.json, congestion.csv, a rate plot per
    /// discipline and the victim's latency plot.
    pub(crate) fn congestion(dir: &Path) -> ExportManager {
        let place = || Place::Dir(dir.to_owned());
        ExportManager::new()
            .with(JsonExporter, place())
            .with(CsvExporter, place())
            .with(SvgExporter, place())
    }

    /// Writes `doc` in every format, stopping at the first error.
    pub(crate) fn write(&mut self, doc: &Document<'_>) -> Written {
        let mut written = Written::default();
        let mut first = None;
        written.paths = self.write_each(doc, |e| {
            first.get_or_insert(e);
            false
        });
        written.error = first;
        written
    }

    /// Writes `doc` in every format, going on past a file that cannot be written: `failed` is told
    /// of each, and says whether to go on. The files written.
    pub(crate) fn write_each(
        &mut self,
        doc: &Document<'_>,
        mut failed: impl FnMut(WriteError) -> bool,
    ) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for Target {
            exporter, place, ..
        } in &self.exporters
        {
            let written = exporter.export(doc, place).and_then(|files| {
                if let (Place::Dir(dir), false) = (place, files.is_empty()) {
                    create_results_dir(dir)?;
                }
                Ok(files)
            });
            let files = match written {
                Ok(files) => files,
                Err(e) => match failed(e) {
                    true => continue,
                    false => return paths,
                },
            };
            for file in files {
                let path = file.path.clone();
                match write_file(&mut self.streams, file) {
                    Ok(()) => paths.push(path),
                    Err(e) => {
                        if !failed(e) {
                            return paths;
                        }
                    }
                }
            }
        }
        paths
    }
}

/// Writes one file the way its content asks: every write of the pipeline goes through here.
fn write_file(streams: &mut Vec<LineStream>, file: ExportFile<'_>) -> Result<(), WriteError> {
    let path = &file.path;
    match file.content {
        Content::Whole(bytes) => write_atomic(path, &bytes),
        Content::Streamed(write) => replace_with(path, write),
        Content::Rows { header, rows } => append_under_header(path, &header, &rows),
        Content::Line(line) => {
            let stream = match streams.iter().position(|s| s.path() == path) {
                Some(i) => &mut streams[i],
                None => {
                    streams.push(LineStream::create(path)?);
                    streams.last_mut().expect("just pushed")
                }
            };
            stream.line(&line)
        }
    }
}

/// Writes every file of a comparison into `dir` (created if needed); the files written, in order.
pub fn write_compare_files(dir: &Path, set: &CompareSet) -> Result<Vec<PathBuf>, WriteError> {
    ExportManager::comparison(dir)
        .write(&Document::Compare(set))
        .result()
}

#[cfg(test)]
mod tests;
