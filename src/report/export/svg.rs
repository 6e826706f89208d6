//! SVG: a comparison's `latency.svg` (the first latency test at its smallest size, by percentile) and
//! `bandwidth.svg` (every bandwidth run by message size); a fabric's heatmap per matrix,
//! `heatmap-[LEG-]TEST-FIGURE.svg`; a congestion study's `rate-DISCIPLINE.svg` and `victim.svg`.

use super::{Document, ExportFile, Exporter, Files, Place};
use crate::params::Metric;
use crate::report::{congestion, fmt_size, heatmap, svg};
use crate::results::congestion::CongestionDoc;
use crate::results::fabric::Leg;
use crate::results::{CompareRun, CompareSet, Measured, WriteError};
use std::path::Path;

/// The pictures of each document.
pub(crate) struct SvgExporter;

impl Exporter for SvgExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        match *doc {
            Document::Compare(set) => {
                let mut files = Vec::new();
                if let Some((title, series)) = latency_plot(set) {
                    let path = place.join("latency.svg");
                    let refs: Vec<svg::LatencySeries> = series
                        .iter()
                        .map(|(label, h)| svg::LatencySeries {
                            label: label.as_str(),
                            histogram: h,
                        })
                        .collect();
                    let text = svg::latency_svg(&title, &refs).map_err(|e| draw_err(&path, e))?;
                    files.push(ExportFile::whole(path, text));
                }
                let series = bandwidth_plot(set);
                if !series.is_empty() {
                    let path = place.join("bandwidth.svg");
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
                    files.push(ExportFile::whole(path, text));
                }
                Ok(files)
            }
            Document::Fabric(run) => Ok(run
                .doc
                .matrices
                .iter()
                .map(|m| {
                    let leg = if m.leg == Leg::AsGiven {
                        String::new()
                    } else {
                        format!("{}-", m.leg.name())
                    };
                    let name = format!("heatmap-{leg}{}-{}.svg", m.test, m.metric.name());
                    ExportFile::whole(
                        place.join(&name),
                        heatmap::heatmap_svg(m, run.doc.ranks, &run.doc.hosts),
                    )
                })
                .collect()),
            Document::Congestion(study) => congestion_plots(study, place),
            Document::Start(_) | Document::Interval { .. } | Document::Run { .. } => Ok(Vec::new()),
        }
    }
}

/// A congestion study's plots: `rate-DISCIPLINE.svg` (goodput per flow over time) for each run with a
/// series, and `victim.svg` (the victim's latency by percentile per discipline, the idle bottleneck
/// as the reference) when a victim holds a percentile.
fn congestion_plots<'d>(study: &CongestionDoc, place: &Place) -> Files<'d> {
    let mut files = Vec::new();
    for run in study.runs.iter().filter(|r| r.series.is_some()) {
        let path = place.join(&format!("rate-{}.svg", run.discipline));
        let text = congestion::rate_svg(study, run).map_err(|e| draw_err(&path, e))?;
        files.push(ExportFile::whole(path, text));
    }
    let idle = study
        .idle_victim
        .iter()
        .map(|v| ("idle bottleneck (reference)".to_string(), &v.histogram));
    let loaded = study.runs.iter().filter_map(|r| {
        Some((
            r.discipline.name().to_string(),
            &r.victim.as_ref()?.histogram,
        ))
    });
    let series: Vec<(String, &hdrhistogram::Histogram<u64>)> = idle
        .chain(loaded)
        .filter(|(_, h)| svg::held_end(h.len()).is_some())
        .collect();
    if let (Some(size), false) = (study.setup.victim_size_bytes, series.is_empty()) {
        let path = place.join("victim.svg");
        let refs: Vec<svg::LatencySeries> = series
            .iter()
            .map(|(label, h)| svg::LatencySeries {
                label,
                histogram: h,
            })
            .collect();
        let title = format!(
            "victim write_lat {} through the bottleneck: one-way latency by percentile",
            fmt_size(size)
        );
        let text = svg::latency_svg(&title, &refs).map_err(|e| draw_err(&path, e))?;
        files.push(ExportFile::whole(path, text));
    }
    Ok(files)
}

/// The error of a plot that could not be drawn, naming its file.
fn draw_err(path: &Path, what: String) -> WriteError {
    WriteError::Io {
        action: "draw",
        path: path.to_owned(),
        source: std::io::Error::other(what),
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

/// The first latency test at its smallest size, one series per transport that holds a percentile;
/// None when none does (no latency.svg then).
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
            // A run whose samples do not hold even the median has no curve to draw.
            Measured::Latency { histogram, .. } if svg::held_end(histogram.len()).is_some() => {
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

    #[test]
    fn a_run_that_holds_no_percentile_is_left_out_of_the_latency_plot() {
        let mut set = set();
        set.runs[0].results = vec![crate::results::testdata::lat(2, 1800, 19)];
        let (_, lat) = latency_plot(&set).unwrap();
        let labels: Vec<&str> = lat.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["RoCE v2 (soft)", "TCP"]);
        for run in &mut set.runs {
            run.results = vec![crate::results::testdata::lat(2, 1800, 10)];
        }
        assert!(latency_plot(&set).is_none(), "no latency.svg");
    }
}
