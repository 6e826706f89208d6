//! `--json-stream`: a run without end as JSON lines (schema `roceperf.stream`): what the run is, one
//! line per interval as it ends, then the run's whole document.

use super::{Content, Document, ExportFile, Exporter, Files, Place};
use crate::results::json::one_line;
use crate::results::{Writes, to_json};
use serde_json::json;

/// The `schema` of the first line of a `--json-stream` file.
pub(crate) const STREAM_SCHEMA: &str = "roceperf.stream";
/// Bumped whenever a line's key is renamed or removed or changes meaning.
pub(crate) const STREAM_SCHEMA_VERSION: u32 = 1;

/// One JSON object a line.
pub(crate) struct JsonStreamExporter;

impl Exporter for JsonStreamExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let line = match *doc {
            Document::Start(info) => json!({
                "event": "start",
                "schema": STREAM_SCHEMA,
                "schema_version": STREAM_SCHEMA_VERSION,
                "tool": {"name": "roceperf", "version": info.version},
                "test": info,
            }),
            Document::Interval {
                info,
                result,
                index,
                span,
            } => {
                // The result object exactly as a run's document holds it (units included).
                let mut doc = to_json(info, std::slice::from_ref(result));
                let result = doc["results"][0].take();
                json!({
                    "event": "interval",
                    "index": index,
                    "start_s": span.0,
                    "end_s": span.1,
                    "result": result,
                })
            }
            Document::Run { info, results, .. } => {
                json!({"event": "end", "document": to_json(info, results)})
            }
            Document::Compare(_) | Document::Fabric(_) | Document::Congestion(_) => {
                return Ok(Vec::new());
            }
        };
        let path = place.join("stream.jsonl");
        Ok(vec![ExportFile {
            content: Content::Line(one_line(&path, &line)?),
            path,
        }])
    }

    fn writes(&self) -> Writes {
        Writes::Lines
    }
}
