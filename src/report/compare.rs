//! The files of a comparison, under `results/<timestamp>/`: `compare.csv` (one row per transport × test ×
//! size, units in the headers), `compare.json` (schema `roceperf.compare`), one HdrHistogram interval log
//! per latency run, `latency.svg` and `bandwidth.svg`.

use super::{ReportError, hdrlog, svg};
use crate::compare::{CompareRun, CompareSet, bandwidth_figures, fmt_size, latency_figures};
use crate::params::Metric;
use crate::report::Measured;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// compare.csv's columns, in order. Names carry their units; cells that do not apply are empty.
pub const CSV_COLUMNS: &[&str] = &[
    "started_at",
    "label",
    "test",
    "transport",
    "roce",
    "size_bytes",
    "iterations",
    "lat_samples",
    "lat_min_us",
    "lat_median_us",
    "lat_mean_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_max_us",
    "bw_avg_gbps",
    "bw_avg_mibps",
    "bw_peak_gbps",
    "msg_rate_mpps",
    "ratio_to_tcp",
];

/// The rows of compare.csv for one run.
fn csv_rows(set: &CompareSet, run: &CompareRun) -> Vec<Vec<String>> {
    let f3 = |v: f64| format!("{v:.3}");
    let f6 = |v: f64| format!("{v:.6}");
    run.results
        .iter()
        .map(|r| {
            let mut row = vec![
                set.started_at.clone(),
                run.label.clone(),
                run.test.name().to_owned(),
                run.transport.name().to_owned(),
                run.roce.map(|v| v.name().to_owned()).unwrap_or_default(),
                r.size.to_string(),
                r.iterations.to_string(),
            ];
            match (&r.measured, latency_figures(r)) {
                (Measured::Latency { stats, .. }, Some(l)) => {
                    row.push(stats.samples.to_string());
                    row.extend(
                        [
                            stats.min_us,
                            l.median_us,
                            stats.mean_us,
                            l.p99_us,
                            l.p999_us,
                            l.max_us,
                        ]
                        .map(f3),
                    );
                }
                _ => row.extend(std::iter::repeat_n(String::new(), 7)),
            }
            match (&r.measured, bandwidth_figures(r)) {
                (Measured::Bandwidth(b), Some(bf)) => row.extend([
                    f6(bf.gbps),
                    f3(b.avg_mibps),
                    b.peak_gbps.map(f6).unwrap_or_default(),
                    f6(bf.mpps),
                ]),
                _ => row.extend(std::iter::repeat_n(String::new(), 4)),
            }
            row.push(
                set.ratio_to_tcp(run, r.size)
                    .map(|x| format!("{x:.4}"))
                    .unwrap_or_default(),
            );
            debug_assert_eq!(row.len(), CSV_COLUMNS.len());
            row
        })
        .collect()
}

/// compare.csv as text: the header, then every run's rows in order.
pub fn compare_csv(set: &CompareSet) -> Result<String, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(CSV_COLUMNS)?;
    for run in &set.runs {
        for row in csv_rows(set, run) {
            w.write_record(&row)?;
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes `bytes` to `path` through a temporary file, so that a reader never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(".partial");
    let tmp = path.with_file_name(tmp_name);
    let io = |action, source| ReportError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| io("write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("rename a temporary file onto", e)
    })
}

/// `results/20261129-102425`: the directory of a comparison started at `started_at` (RFC 3339).
pub fn compare_dir(results: &Path, started_at: &str) -> PathBuf {
    let stamp = super::compact_timestamp(started_at)
        .or_else(|| super::compact_timestamp(&super::now_rfc3339()))
        .unwrap_or_default();
    results.join(stamp)
}

/// `write_lat-roce-v2-soft-2B.hlog`: a file name from a test, a label and a size.
pub fn hlog_name(run: &CompareRun, size: u64) -> String {
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

/// What [`write_compare_files`] wrote.
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

/// Writes every file of the comparison into `dir` (created if needed).
pub fn write_compare_files(dir: &Path, set: &CompareSet) -> Result<CompareFiles, ReportError> {
    super::create_results_dir(dir)?;
    let csv = dir.join("compare.csv");
    let text = compare_csv(set).map_err(|source| ReportError::Csv {
        path: csv.clone(),
        source,
    })?;
    write_atomic(&csv, text.as_bytes())?;

    let json = dir.join("compare.json");
    let mut text =
        serde_json::to_vec_pretty(&set.to_json()).map_err(|source| ReportError::Json {
            path: json.clone(),
            source,
        })?;
    text.push(b'\n');
    write_atomic(&json, &text)?;

    let start = parse_rfc3339(&set.started_at).unwrap_or_else(SystemTime::now);
    let mut hdr_logs = Vec::new();
    for run in &set.runs {
        for r in &run.results {
            if let Measured::Latency { histogram, .. } = &r.measured {
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
                hdrlog::write_interval_log(
                    &path,
                    histogram,
                    &run.label,
                    &comment,
                    start,
                    Duration::from_nanos(busy_ns as u64),
                )?;
                hdr_logs.push(path);
            }
        }
    }

    let draw_err = |path: &Path, what: String| ReportError::Io {
        action: "draw",
        path: path.to_owned(),
        source: std::io::Error::other(what),
    };
    let latency_svg = match latency_plot(set) {
        Some((title, series)) => {
            let path = dir.join("latency.svg");
            let refs: Vec<svg::LatencySeries> = series
                .iter()
                .map(|(label, h)| svg::LatencySeries {
                    label,
                    histogram: h,
                })
                .collect();
            let text = svg::latency_svg(&title, &refs).map_err(|e| draw_err(&path, e))?;
            write_atomic(&path, text.as_bytes())?;
            Some(path)
        }
        None => None,
    };
    let bw_series = bandwidth_plot(set);
    let bandwidth_svg = if bw_series.is_empty() {
        None
    } else {
        let path = dir.join("bandwidth.svg");
        let tests: Vec<String> = set
            .tests()
            .into_iter()
            .filter(|t| t.metric == Metric::Bandwidth)
            .map(|t| t.to_string())
            .collect();
        let title = format!("{}: bandwidth by message size", tests.join(", "));
        let refs: Vec<svg::BandwidthSeries> = bw_series
            .iter()
            .map(|(label, points)| svg::BandwidthSeries {
                label,
                points: points.clone(),
            })
            .collect();
        let text = svg::bandwidth_svg(&title, &refs).map_err(|e| draw_err(&path, e))?;
        write_atomic(&path, text.as_bytes())?;
        Some(path)
    };
    Ok(CompareFiles {
        csv,
        json,
        hdr_logs,
        latency_svg,
        bandwidth_svg,
    })
}

/// A latency plot: its title and one (label, histogram) per transport.
type LatencyPlot<'a> = (String, Vec<(&'a str, &'a hdrhistogram::Histogram<u64>)>);

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
    let series: Vec<(&str, &hdrhistogram::Histogram<u64>)> = runs
        .iter()
        .filter_map(|run| match &run.at(size)?.measured {
            Measured::Latency { histogram, .. } if !histogram.is_empty() => {
                Some((run.label.as_str(), histogram))
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
            let points = run
                .results
                .iter()
                .filter_map(|r| Some((r.size, bandwidth_figures(r)?.gbps)))
                .collect();
            (label, points)
        })
        .filter(|(_, p): &(String, Vec<(u64, f64)>)| !p.is_empty())
        .collect()
}

/// `2026-11-29T10:24:25Z` -> that instant; None when the text is not RFC 3339 UTC with seconds.
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from civil (Howard Hinnant), the inverse of report::civil_from_days.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs)
        .ok()
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::testdata::set;
    use std::collections::HashMap;

    #[test]
    fn rfc3339_parses_back() {
        for secs in [0u64, 951_782_400, 1_795_947_865, 4_102_444_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_rfc3339(&super::super::rfc3339(t)), Some(t));
        }
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn csv_has_a_row_per_transport_and_size_with_units_in_headers() {
        let set = set();
        let text = compare_csv(&set).unwrap();
        let mut rdr = ::csv::Reader::from_reader(text.as_bytes());
        let headers: Vec<String> = rdr.headers().unwrap().iter().map(str::to_owned).collect();
        assert_eq!(headers, CSV_COLUMNS);
        let rows: Vec<HashMap<String, String>> = rdr
            .records()
            .map(|r| {
                headers
                    .iter()
                    .cloned()
                    .zip(r.unwrap().iter().map(str::to_owned))
                    .collect()
            })
            .collect();
        assert_eq!(rows.len(), 3 + 9);
        let v2_64k = rows
            .iter()
            .find(|r| r["label"] == "RoCE v2 (soft)" && r["size_bytes"] == "65536")
            .unwrap();
        assert_eq!(v2_64k["test"], "write_bw");
        assert_eq!(v2_64k["roce"], "v2");
        assert!((v2_64k["bw_avg_gbps"].parse::<f64>().unwrap() - 45.0).abs() < 1e-3);
        assert_eq!(v2_64k["ratio_to_tcp"], "1.8000");
        assert_eq!(v2_64k["lat_median_us"], "");
        let tcp_lat = rows
            .iter()
            .find(|r| r["transport"] == "tcp" && r["test"] == "write_lat")
            .unwrap();
        assert_eq!(tcp_lat["roce"], "");
        assert_eq!(tcp_lat["lat_samples"], "10000");
        assert!(
            tcp_lat["lat_p99_9_us"].parse::<f64>().unwrap()
                > tcp_lat["lat_median_us"].parse().unwrap()
        );
    }

    #[test]
    fn every_file_is_written_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let set = set();
        let dir = compare_dir(tmp.path(), &set.started_at);
        assert!(dir.ends_with("20261129-102425"));
        let files = write_compare_files(&dir, &set).unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&files.json).unwrap()).unwrap();
        assert_eq!(crate::compare::from_json_value(doc).unwrap(), set);
        assert_eq!(files.hdr_logs.len(), 3);
        assert!(
            files.hdr_logs[1].ends_with("write_lat-roce-v2-soft-2B.hlog"),
            "{:?}",
            files.hdr_logs
        );
        let svg = std::fs::read_to_string(files.latency_svg.unwrap()).unwrap();
        roxmltree::Document::parse(&svg).unwrap();
        assert!(svg.contains("write_lat, 2 B"));
        let svg = std::fs::read_to_string(files.bandwidth_svg.unwrap()).unwrap();
        assert!(svg.contains("RoCE v1 (soft)") && svg.contains("64 KiB"));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
        assert_eq!(names.len(), 2 + 3 + 2, "{names:?}");
    }
}
