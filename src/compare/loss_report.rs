//! What a loss sweep shows: per test and size, goodput against loss for every transport and recovery
//! (and latency percentiles for latency tests), what repairing the loss cost, and how the loss was
//! made. Its files (`loss.csv`, `loss.svg`, `p99.svg`) are the export pipeline's
//! (`report::export::LossExporter`); its `compare.json` and `compare.csv` are those of any comparison
//! (each run labelled `RoCE v2 sr @ 1%`), so `roce_gate` judges a sweep as it judges any comparison.

use crate::params::Metric;
use crate::report::fmt_size;
use crate::results::CompareSet;
use crate::results::loss::{rate_text, sweep_points, sweep_shape};
use std::fmt::Write as _;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The console report: per test and size, a goodput (or p99) matrix by loss rate and series, then
/// what the loss cost each run, then how the loss was made.
pub(crate) fn table(set: &CompareSet) -> String {
    let pts = sweep_points(set);
    let (cases, series, rates) = sweep_shape(&pts);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Recovery;
    use crate::report::export::{Document, ExportManager};
    use crate::results::loss::loss_csv;
    use crate::results::testdata::{bw, bw_info};
    use crate::results::{CompareRun, LossPoint};

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
        let files = ExportManager::loss_sweep(dir.path())
            .write(&Document::Compare(&set))
            .result()
            .unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["loss.csv", "loss.svg"]);
    }
}
