//! A comparison's files, written through hyperfine-style exporters and an export manager.
//!
//! Each format is an [`Exporter`] that turns a [`CompareSet`] into files; the [`ExportManager`] writes
//! what its exporters made into the comparison's directory (`results/<timestamp>/`), each file replaced
//! as a whole. The formats: `compare.csv` (one row per transport × test × size, units in the headers),
//! `compare.json` (schema `roceperf.compare`), one HdrHistogram interval log per latency run and size,
//! `latency.svg` and `bandwidth.svg`.

use super::{fmt_size, hdrlog, svg};
use crate::params::Metric;
use crate::results::time::parse_rfc3339;
use crate::results::{
    CompareRun, CompareSet, Measured, WriteError, create_results_dir, csv, json, write_atomic,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One file an exporter made: where it goes and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExportFile {
    /// Its path inside the comparison's directory.
    pub path: PathBuf,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// One format of a comparison's files.
pub(crate) trait Exporter {
    /// The files of this format for `set`, placed in `dir` (none when the set has nothing for it);
    /// errors name the file.
    fn export(&self, set: &CompareSet, dir: &Path) -> Result<Vec<ExportFile>, WriteError>;
}

/// The formats a comparison is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExportType {
    /// `compare.csv`.
    Csv,
    /// `compare.json`.
    Json,
    /// One `.hlog` per latency run and size.
    HdrLog,
    /// `latency.svg`: the first latency test at its smallest size, by percentile.
    LatencySvg,
    /// `bandwidth.svg`: every bandwidth run by message size.
    BandwidthSvg,
}

impl ExportType {
    /// Every format, in the order a comparison writes them.
    pub const ALL: [ExportType; 5] = [
        ExportType::Csv,
        ExportType::Json,
        ExportType::HdrLog,
        ExportType::LatencySvg,
        ExportType::BandwidthSvg,
    ];

    fn exporter(self) -> Box<dyn Exporter> {
        match self {
            ExportType::Csv => Box::new(CsvExporter),
            ExportType::Json => Box::new(JsonExporter),
            ExportType::HdrLog => Box::new(HdrLogExporter),
            ExportType::LatencySvg => Box::new(LatencySvgExporter),
            ExportType::BandwidthSvg => Box::new(BandwidthSvgExporter),
        }
    }
}

/// What [`ExportManager::write`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompareFiles {
    /// compare.csv.
    pub csv: PathBuf,
    /// compare.json.
    pub json: PathBuf,
    /// One .hlog per latency run and size.
    pub hdr_logs: Vec<PathBuf>,
    /// latency.svg, when there is a latency test.
    pub latency_svg: Option<PathBuf>,
    /// bandwidth.svg, when there is a bandwidth test.
    pub bandwidth_svg: Option<PathBuf>,
}

impl CompareFiles {
    /// Every file, in the order written.
    pub fn paths(&self) -> Vec<&Path> {
        let mut out = vec![self.csv.as_path(), self.json.as_path()];
        out.extend(self.hdr_logs.iter().map(PathBuf::as_path));
        out.extend(self.latency_svg.as_deref());
        out.extend(self.bandwidth_svg.as_deref());
        // A manager without the CSV or JSON exporter leaves those paths empty.
        out.retain(|p| !p.as_os_str().is_empty());
        out
    }
}

/// Writes a comparison in several formats.
pub(crate) struct ExportManager {
    exporters: Vec<(ExportType, Box<dyn Exporter>)>,
}

impl ExportManager {
    /// A manager for `types`, written in that order.
    pub fn new(types: &[ExportType]) -> ExportManager {
        ExportManager {
            exporters: types.iter().map(|&t| (t, t.exporter())).collect(),
        }
    }

    /// Every format a comparison has ([`ExportType::ALL`]).
    pub fn comparison() -> ExportManager {
        ExportManager::new(&ExportType::ALL)
    }

    /// Writes every exporter's files into `dir` (created if needed), one format after the other.
    pub fn write(&self, dir: &Path, set: &CompareSet) -> Result<CompareFiles, WriteError> {
        create_results_dir(dir)?;
        let mut written = CompareFiles::default();
        for (kind, exporter) in &self.exporters {
            for file in exporter.export(set, dir)? {
                write_atomic(&file.path, &file.bytes)?;
                match kind {
                    ExportType::Csv => written.csv = file.path,
                    ExportType::Json => written.json = file.path,
                    ExportType::HdrLog => written.hdr_logs.push(file.path),
                    ExportType::LatencySvg => written.latency_svg = Some(file.path),
                    ExportType::BandwidthSvg => written.bandwidth_svg = Some(file.path),
                }
            }
        }
        Ok(written)
    }
}

/// Writes every file of the comparison into `dir` (created if needed).
pub fn write_compare_files(dir: &Path, set: &CompareSet) -> Result<CompareFiles, WriteError> {
    ExportManager::comparison().write(dir, set)
}

/// `compare.csv`.
pub(crate) struct CsvExporter;

impl Exporter for CsvExporter {
    fn export(&self, set: &CompareSet, dir: &Path) -> Result<Vec<ExportFile>, WriteError> {
        let path = dir.join("compare.csv");
        let text = csv::compare_csv(set).map_err(|source| WriteError::Csv {
            path: path.clone(),
            source,
        })?;
        Ok(vec![ExportFile {
            path,
            bytes: text.into_bytes(),
        }])
    }
}

/// `compare.json`.
pub(crate) struct JsonExporter;

impl Exporter for JsonExporter {
    fn export(&self, set: &CompareSet, dir: &Path) -> Result<Vec<ExportFile>, WriteError> {
        let path = dir.join("compare.json");
        let bytes = json::pretty(&path, &set.to_json())?;
        Ok(vec![ExportFile { path, bytes }])
    }
}

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
    fn export(&self, set: &CompareSet, dir: &Path) -> Result<Vec<ExportFile>, WriteError> {
        let start = parse_rfc3339(&set.started_at).unwrap_or_else(SystemTime::now);
        let mut files = Vec::new();
        for run in &set.runs {
            for r in &run.results {
                let Measured::Latency { histogram, .. } = &r.measured else {
                    continue;
                };
                let path = dir.join(hlog_name(run, r.size));
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
                files.push(ExportFile { path, bytes });
            }
        }
        Ok(files)
    }
}

/// The error of a plot that could not be drawn, naming its file.
fn draw_err(path: &Path, what: String) -> WriteError {
    WriteError::Io {
        action: "draw",
        path: path.to_owned(),
        source: std::io::Error::other(what),
    }
}

/// `latency.svg`: the first latency test at its smallest size, one curve per transport.
pub(crate) struct LatencySvgExporter;

impl Exporter for LatencySvgExporter {
    fn export(&self, set: &CompareSet, dir: &Path) -> Result<Vec<ExportFile>, WriteError> {
        let Some((title, series)) = latency_plot(set) else {
            return Ok(Vec::new());
        };
        let path = dir.join("latency.svg");
        let refs: Vec<svg::LatencySeries> = series
            .iter()
            .map(|(label, h)| svg::LatencySeries {
                label: label.as_str(),
                histogram: h,
            })
            .collect();
        let text = svg::latency_svg(&title, &refs).map_err(|e| draw_err(&path, e))?;
        Ok(vec![ExportFile {
            path,
            bytes: text.into_bytes(),
        }])
    }
}

/// `bandwidth.svg`: every bandwidth run by message size.
pub(crate) struct BandwidthSvgExporter;

impl Exporter for BandwidthSvgExporter {
    fn export(&self, set: &CompareSet, dir: &Path) -> Result<Vec<ExportFile>, WriteError> {
        let series = bandwidth_plot(set);
        if series.is_empty() {
            return Ok(Vec::new());
        }
        let path = dir.join("bandwidth.svg");
        let tests: Vec<String> = set
            .tests()
            .into_iter()
            .filter(|t| t.metric == Metric::Bandwidth)
            .map(|t| t.to_string())
            .collect();
        let title = format!("{}: bandwidth by message size", tests.join(", "));
        let refs: Vec<svg::BandwidthSeries> = series
            .iter()
            .map(|(label, points)| svg::BandwidthSeries {
                label,
                points: points.clone(),
            })
            .collect();
        let text = svg::bandwidth_svg(&title, &refs).map_err(|e| draw_err(&path, e))?;
        Ok(vec![ExportFile {
            path,
            bytes: text.into_bytes(),
        }])
    }
}

/// A latency plot: its title and one (label, histogram) per transport.
type LatencyPlot<'a> = (String, Vec<(String, &'a hdrhistogram::Histogram<u64>)>);

/// A plot's legend text for `run`: its label, and the link it crossed when recorded.
fn legend(label: String, run: &CompareRun) -> String {
    match &run.link {
        Some(link) => format!("{label} over {link}"),
        None => label,
    }
}

/// The first latency test at its smallest size, one series per transport.
fn latency_plot(set: &CompareSet) -> Option<LatencyPlot<'_>> {
    let test = set
        .tests()
        .into_iter()
        .find(|t| t.metric == Metric::Latency)?;
    let runs: Vec<&CompareRun> = set.runs.iter().filter(|r| r.test == test).collect();
    let size = runs
        .iter()
        .flat_map(|r| r.results.iter().map(|x| x.size))
        .min()?;
    let series: Vec<(String, &hdrhistogram::Histogram<u64>)> = runs
        .iter()
        .filter_map(|run| match &run.at(size)?.measured {
            Measured::Latency { histogram, .. } if !histogram.is_empty() => {
                Some((legend(run.label.clone(), run), histogram))
            }
            _ => None,
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    Some((
        format!("{test}, {}: one-way latency by percentile", fmt_size(size)),
        series,
    ))
}

/// One (label, [(size, Gb/s)]) per bandwidth run; labels get the test name when there are several.
fn bandwidth_plot(set: &CompareSet) -> Vec<(String, Vec<(u64, f64)>)> {
    let bw_tests = set
        .tests()
        .into_iter()
        .filter(|t| t.metric == Metric::Bandwidth)
        .count();
    set.runs
        .iter()
        .filter(|r| r.test.metric == Metric::Bandwidth)
        .map(|run| {
            let label = if bw_tests > 1 {
                format!("{} {}", run.test, run.label)
            } else {
                run.label.clone()
            };
            let label = legend(label, run);
            let points = run
                .results
                .iter()
                .filter_map(|r| Some((r.size, r.figures().bandwidth()?.gbps)))
                .collect();
            (label, points)
        })
        .filter(|(_, p): &(String, Vec<(u64, f64)>)| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::set;

    #[test]
    fn every_file_is_written_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let set = set();
        let dir = crate::results::compare_dir(tmp.path(), &set.started_at);
        assert!(dir.ends_with("20261129-102425"));
        let files = write_compare_files(&dir, &set).unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&files.json).unwrap()).unwrap();
        assert_eq!(
            crate::results::read::parse_json(doc).unwrap(),
            crate::results::Document::Compare(set.clone())
        );
        assert_eq!(files.hdr_logs.len(), 3);
        assert!(
            files.hdr_logs[1].ends_with("write_lat-roce-v2-soft-2B.hlog"),
            "{:?}",
            files.hdr_logs
        );
        let svg = std::fs::read_to_string(files.latency_svg.as_ref().unwrap()).unwrap();
        roxmltree::Document::parse(&svg).unwrap();
        assert!(svg.contains("write_lat, 2 B"));
        let svg = std::fs::read_to_string(files.bandwidth_svg.as_ref().unwrap()).unwrap();
        assert!(svg.contains("RoCE v1 (soft)") && svg.contains("64 KiB"));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
        assert_eq!(names.len(), 2 + 3 + 2, "{names:?}");
        assert_eq!(files.paths().len(), names.len());
    }

    #[test]
    fn a_manager_writes_only_its_formats() {
        let tmp = tempfile::tempdir().unwrap();
        let files = ExportManager::new(&[ExportType::Json])
            .write(tmp.path(), &set())
            .unwrap();
        assert!(files.json.ends_with("compare.json"));
        assert_eq!(files.paths(), [files.json.as_path()], "{files:?}");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn plot_legends_name_the_link_each_run_crossed() {
        let mut set = set();
        set.runs[1].link = Some("lo".into());
        set.runs[4].link = Some("veth (netns a<->b, MTU 9000)".into());
        let (_, lat) = latency_plot(&set).unwrap();
        let labels: Vec<&str> = lat.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["RoCE v1 (soft)", "RoCE v2 (soft) over lo", "TCP"]);
        let bw = bandwidth_plot(&set);
        assert_eq!(bw[1].0, "RoCE v2 (soft) over veth (netns a<->b, MTU 9000)");
    }
}
