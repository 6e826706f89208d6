//! What a loss sweep shows and writes: per test and size, goodput against loss for every transport
//! and recovery (and latency percentiles for latency tests), what repairing the loss cost, `loss.csv`,
//! `loss.svg` (goodput vs loss) and, for latency tests, `p99.svg`. The sweep's `compare.json` and
//! `compare.csv` are those of any comparison (each run labelled `RoCE v2 sr @ 1%`), so `roce_gate`
//! judges a sweep as it judges any comparison.

use super::loss::rate_text;
use crate::params::Metric;
use crate::report::fmt_size;
use crate::report::loss_svg::{LossSeries, loss_svg};
use crate::results::{CompareRun, CompareSet, LossPoint, WriteError, write_atomic};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One (run, size) of the sweep, flattened.
struct Point<'a> {
    run: &'a CompareRun,
    loss: &'a LossPoint,
    size: u64,
    gbps: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    p999_us: Option<f64>,
}

fn points(set: &CompareSet) -> Vec<Point<'_>> {
    set.runs
        .iter()
        .filter_map(|run| Some((run, run.loss.as_ref()?)))
        .flat_map(|(run, loss)| {
            run.results.iter().map(move |r| {
                let f = r.figures();
                // A latency run that measured nothing (every sample lost to the loss) has no figures.
                let measured = !matches!(&r.measured, crate::results::Measured::Latency { stats, .. } if stats.samples == 0);
                let lat = f.latency().filter(|_| measured);
                Point {
                    run,
                    loss,
                    size: r.size,
                    gbps: f.bandwidth().map(|b| b.gbps),
                    p50_us: lat.map(|l| l.median_us),
                    p99_us: lat.map(|l| l.p99_us),
                    p999_us: lat.map(|l| l.p999_us),
                }
            })
        })
        .collect()
}

/// The (test, size) pairs of the sweep, in order, and the series and rates present.
fn shape(pts: &[Point]) -> (Vec<(crate::params::TestKind, u64)>, Vec<String>, Vec<f64>) {
    let mut cases = Vec::new();
    let mut series = Vec::new();
    let mut rates: Vec<f64> = Vec::new();
    for p in pts {
        if !cases.contains(&(p.run.test, p.size)) {
            cases.push((p.run.test, p.size));
        }
        if !series.contains(&p.loss.series) {
            series.push(p.loss.series.clone());
        }
        if !rates.contains(&p.loss.rate) {
            rates.push(p.loss.rate);
        }
    }
    rates.sort_by(f64::total_cmp);
    (cases, series, rates)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The console report: per test and size, a goodput (or p99) matrix by loss rate and series, then
/// what the loss cost each run, then how the loss was made.
pub fn table(set: &CompareSet) -> String {
    let pts = points(set);
    let (cases, series, rates) = shape(&pts);
    let mut out = String::new();
    for (test, size) in cases {
        let lat = test.metric == Metric::Latency;
        let _ = writeln!(
            out,
            "\n {test} {} — {} by packet loss rate (each direction)",
            fmt_size(size),
            if lat {
                "one-way latency p50 / p99 (µs)"
            } else {
                "goodput (Gb/s, and vs the loss-free run)"
            }
        );
        let _ = write!(out, " {:<8}", "loss");
        for s in &series {
            let _ = write!(out, " {s:>22}");
        }
        out.push('\n');
        for &rate in &rates {
            let _ = write!(out, " {:<8}", rate_text(rate));
            for s in &series {
                let p = pts.iter().find(|p| {
                    p.run.test == test
                        && p.size == size
                        && &p.loss.series == s
                        && p.loss.rate == rate
                });
                let cell = match p {
                    None => "-".to_string(),
                    Some(p) if lat => format!("{} / {}", opt(p.p50_us, 1), opt(p.p99_us, 1)),
                    Some(p) => match (p.gbps, p.loss.relative) {
                        (Some(g), Some(r)) if rate > 0.0 => format!("{g:.3} ({:.1}%)", r * 100.0),
                        (Some(g), _) => format!("{g:.3}"),
                        _ => "-".into(),
                    },
                };
                let _ = write!(out, " {cell:>22}");
            }
            out.push('\n');
        }
        let w = series
            .iter()
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
            .max(6);
        let _ = writeln!(
            out,
            "\n {:<w$} {:<8} {:>13} {:>10} {:>9} {:>9}",
            "series", "loss", "retx B / B", "NAKs", "timeouts", "p99.9 µs"
        );
        for s in &series {
            for &rate in &rates {
                let Some(p) = pts.iter().find(|p| {
                    p.run.test == test
                        && p.size == size
                        && &p.loss.series == s
                        && p.loss.rate == rate
                }) else {
                    continue;
                };
                let _ = writeln!(
                    out,
                    " {:<w$} {:<8} {:>13} {:>10} {:>9} {:>9}",
                    s,
                    rate_text(rate),
                    opt(p.loss.retransmitted_per_byte(), 4),
                    p.loss.naks.map_or("-".into(), |n| n.to_string()),
                    p.loss.timeouts.map_or("-".into(), |n| n.to_string()),
                    opt(p.p999_us, 1),
                );
            }
        }
    }
    let mut vias: Vec<(String, String)> = Vec::new();
    for p in &pts {
        if p.loss.rate > 0.0 && !vias.iter().any(|v| v.0 == p.loss.series) {
            vias.push((p.loss.series.clone(), p.loss.via.clone()));
        }
    }
    if !vias.is_empty() {
        out.push_str("\n How the loss was made:\n");
        for (s, v) in vias {
            let _ = writeln!(out, "  {s}: {v}");
        }
        out.push_str(
            "  (TCP: NAKs are fast retransmissions, retransmitted bytes are segments × MSS.)\n",
        );
    }
    if !set.skipped.is_empty() {
        out.push_str("\n Not run:\n");
        for s in &set.skipped {
            let _ = writeln!(out, "  {}: {}", s.label, s.reason);
        }
    }
    out
}

/// The columns of `loss.csv`.
pub(crate) const LOSS_COLUMNS: &[&str] = &[
    "test",
    "size_bytes",
    "series",
    "transport",
    "roce",
    "recovery",
    "loss_pct",
    "burst",
    "via",
    "goodput_gbps",
    "relative_goodput",
    "delivered_bytes",
    "retransmitted_bytes",
    "retransmitted_per_delivered",
    "naks",
    "timeouts",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p99_9_us",
];

/// `loss.csv`: one row per run and size.
pub(crate) fn loss_csv(set: &CompareSet) -> Result<String, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(LOSS_COLUMNS)?;
    let f = |v: Option<f64>, d: usize| v.map_or_else(String::new, |v| format!("{v:.d$}"));
    let n = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    for p in points(set) {
        let l = p.loss;
        w.write_record([
            p.run.test.name().to_string(),
            p.size.to_string(),
            l.series.clone(),
            p.run.transport.name().to_string(),
            p.run.roce.map(|r| r.name().to_string()).unwrap_or_default(),
            l.recovery.map(|r| r.name().to_string()).unwrap_or_default(),
            format!("{}", l.rate * 100.0),
            l.burst.map(|b| b.to_string()).unwrap_or_default(),
            l.via.clone(),
            f(p.gbps, 6),
            f(l.relative, 4),
            l.delivered_bytes.to_string(),
            n(l.retransmitted_bytes),
            f(l.retransmitted_per_byte(), 6),
            n(l.naks),
            n(l.timeouts),
            f(p.p50_us, 3),
            f(p.p99_us, 3),
            f(p.p999_us, 3),
        ])?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes `loss.csv`, `loss.svg` (goodput vs loss, per bandwidth test and size) and `p99.svg`
/// (latency tests) into `dir`; returns the paths written.
pub(crate) fn write_files(dir: &Path, set: &CompareSet) -> Result<Vec<PathBuf>, WriteError> {
    crate::results::create_results_dir(dir)?;
    let mut written = Vec::new();
    let csv_path = dir.join("loss.csv");
    let text = loss_csv(set).map_err(|source| WriteError::Csv {
        path: csv_path.clone(),
        source,
    })?;
    write_atomic(&csv_path, text.as_bytes())?;
    written.push(csv_path);
    let pts = points(set);
    let (cases, series, _) = shape(&pts);
    for (plot, lat) in [("loss", false), ("p99", true)] {
        // The first case of the kind: one picture per file, as the other comparison plots.
        let Some(&(test, size)) = cases
            .iter()
            .find(|c| (c.0.metric == Metric::Latency) == lat)
        else {
            continue;
        };
        let curves: Vec<LossSeries> = series
            .iter()
            .map(|s| LossSeries {
                label: s,
                points: pts
                    .iter()
                    .filter(|p| p.run.test == test && p.size == size && &p.loss.series == s)
                    .filter_map(|p| Some((p.loss.rate, if lat { p.p99_us? } else { p.gbps? })))
                    .collect(),
            })
            .collect();
        let (title, y) = if lat {
            (
                format!("{test} {}: p99 latency vs loss", fmt_size(size)),
                "one-way latency p99 (µs, log scale)",
            )
        } else {
            (
                format!("{test} {}: goodput vs loss", fmt_size(size)),
                "goodput (Gb/s)",
            )
        };
        let path = dir.join(format!("{plot}.svg"));
        match loss_svg(&title, y, &curves, lat) {
            Ok(svg) => {
                write_atomic(&path, svg.as_bytes())?;
                written.push(path);
            }
            Err(what) => {
                return Err(WriteError::Io {
                    action: "draw",
                    path,
                    source: std::io::Error::other(what),
                });
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Recovery;
    use crate::results::testdata::{bw, bw_info};

    fn run(series: &str, rate: f64, gbps: f64, relative: Option<f64>) -> CompareRun {
        CompareRun {
            label: format!("{series} @ {}", rate_text(rate)),
            results: vec![bw(65536, gbps)],
            loss: Some(LossPoint {
                series: series.into(),
                rate,
                burst: None,
                recovery: Some(Recovery::Sr),
                via: "iptables statistic on arrival, both namespaces".into(),
                delivered_bytes: 1_000_000,
                retransmitted_bytes: Some(10_000),
                naks: Some(3),
                timeouts: Some(0),
                relative,
            }),
            ..CompareRun::from_run(&bw_info(), vec![])
        }
    }

    #[test]
    fn the_table_pivots_rates_against_series_and_the_csv_has_a_row_per_run() {
        let set = CompareSet {
            runs: vec![
                run("RoCE v2 gbn", 0.0, 10.0, Some(1.0)),
                run("RoCE v2 gbn", 0.01, 0.5, Some(0.05)),
                run("RoCE v2 sr", 0.0, 10.0, Some(1.0)),
                run("RoCE v2 sr", 0.01, 9.0, Some(0.9)),
            ],
            ..CompareSet::default()
        };
        let t = table(&set);
        assert!(
            t.contains("0.500 (5.0%)") && t.contains("9.000 (90.0%)"),
            "{t}"
        );
        assert!(t.contains("RoCE v2 sr: iptables statistic"), "{t}");
        let csv = loss_csv(&set).unwrap();
        assert_eq!(csv.lines().count(), 5);
        assert!(
            csv.lines()
                .nth(4)
                .unwrap()
                .contains(",RoCE v2 sr,soft,v2,sr,1,"),
            "{csv}"
        );
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &set).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["loss.csv", "loss.svg"]);
    }
}
