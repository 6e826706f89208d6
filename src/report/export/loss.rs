//! A loss sweep's own files: `loss.csv` (one row per run and size), `loss.svg` (goodput against loss,
//! the first bandwidth test and size) and `p99.svg` (p99 latency against loss, the first latency test
//! and size), for a comparison whose runs carry loss points (`ExportManager::loss_sweep`).

use super::{Document, ExportFile, Exporter, Files, Place};
use crate::params::Metric;
use crate::report::fmt_size;
use crate::report::loss_svg::{LossSeries, loss_svg};
use crate::results::WriteError;
use crate::results::csv::csv_error;
use crate::results::loss::{loss_csv, sweep_points, sweep_shape};

/// loss.csv and the sweep's plots.
pub(crate) struct LossExporter;

impl Exporter for LossExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let Document::Compare(set) = *doc else {
            return Ok(Vec::new());
        };
        let pts = sweep_points(set);
        // loss.csv even without a point: a sweep whose every run failed still says so with its header.
        let csv_path = place.join("loss.csv");
        let text = loss_csv(set).map_err(|e| csv_error(&csv_path, e))?;
        let mut files = vec![ExportFile::whole(csv_path, text)];
        let (cases, series, _) = sweep_shape(&pts);
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
            let path = place.join(&format!("{plot}.svg"));
            let svg = loss_svg(&title, y, &curves, lat).map_err(|what| WriteError::Io {
                action: "draw",
                path: path.clone(),
                source: std::io::Error::other(what),
            })?;
            files.push(ExportFile::whole(path, svg));
        }
        Ok(files)
    }
}
