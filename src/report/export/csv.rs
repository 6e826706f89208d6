//! CSV: a run's rows appended under one header (`--csv`, `--results`), one row per interval of a run
//! without end, a comparison's `compare.csv`, a fabric's `fabric.csv`, a congestion study's
//! `congestion.csv`.

use super::{Content, Document, ExportFile, Exporter, Files, Place};
use crate::results::congestion::csv::congestion_csv;
use crate::results::csv::{compare_csv, csv_error, header_line, interval_row, run_rows};
use crate::results::{Writes, fabric, results_paths};

/// CSV, in the columns `crate::results::csv` defines for each document.
pub(crate) struct CsvExporter;

impl Exporter for CsvExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let file = match *doc {
            Document::Start(_) => return Ok(Vec::new()),
            Document::Run { info, results, .. } => {
                let path = place.file(|d| results_paths(d, info).0);
                let rows = run_rows(info, results).map_err(|e| csv_error(&path, e))?;
                rows_under_header(path, rows)
            }
            Document::Interval {
                info, result, span, ..
            } => {
                let path = place.file(|d| results_paths(d, info).0);
                let rows = interval_row(info, result, span).map_err(|e| csv_error(&path, e))?;
                rows_under_header(path, rows)
            }
            Document::Compare(set) => {
                let path = place.join("compare.csv");
                let text = compare_csv(set).map_err(|e| csv_error(&path, e))?;
                ExportFile::whole(path, text)
            }
            Document::Congestion(study) => {
                let path = place.join("congestion.csv");
                let text = congestion_csv(study).map_err(|e| csv_error(&path, e))?;
                ExportFile::whole(path, text)
            }
            Document::Fabric(run) => ExportFile {
                path: place.join("fabric.csv"),
                content: Content::Streamed(Box::new(move |w| {
                    fabric::write_csv(w, run.pairs).map_err(std::io::Error::from)
                })),
            },
        };
        Ok(vec![file])
    }

    fn writes(&self) -> Writes {
        // A file the user names takes a run's rows (a comparison's and a fabric's go in directories).
        Writes::Rows(header_line())
    }
}

/// A run's rows, appended under the run CSV's header.
fn rows_under_header<'d>(path: std::path::PathBuf, rows: Vec<u8>) -> ExportFile<'d> {
    ExportFile {
        path,
        content: Content::Rows {
            header: header_line(),
            rows,
        },
    }
}
