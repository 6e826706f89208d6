//! JSON: a run's `roceperf.result` (`--json`, `--results`), a comparison's `compare.json`, a fabric's
//! `fabric.json` (its pair records streamed from the spool), a congestion study's `congestion.json`. Pretty-printed, replaced whole.

use super::{Content, Document, ExportFile, Exporter, Files, Place};
use crate::results::json::pretty;
use crate::results::{WriteError, fabric, results_paths, to_json};

/// The roceperf JSON document of each document.
pub(crate) struct JsonExporter;

impl Exporter for JsonExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let file = match *doc {
            // A run without end writes its document once, at its end.
            Document::Start(_) | Document::Interval { .. } => return Ok(Vec::new()),
            Document::Run { info, results, .. } => {
                let path = place.file(|d| results_paths(d, info).1);
                let bytes = pretty(&path, &to_json(info, results))?;
                ExportFile::whole(path, bytes)
            }
            Document::Compare(set) => {
                let path = place.join("compare.json");
                let bytes = pretty(&path, &set.to_json())?;
                ExportFile::whole(path, bytes)
            }
            Document::Congestion(study) => {
                let path = place.join("congestion.json");
                let value = serde_json::to_value(study).map_err(|source| WriteError::Json {
                    path: path.clone(),
                    source,
                })?;
                ExportFile::whole(path.clone(), pretty(&path, &value)?)
            }
            Document::Fabric(run) => ExportFile {
                path: place.join("fabric.json"),
                content: Content::Streamed(Box::new(move |w| {
                    fabric::write_json(w, &run.doc, run.spool)
                })),
            },
        };
        Ok(vec![file])
    }
}
