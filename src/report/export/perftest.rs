//! perftest's `--out_json` document (`--out_json_file`): the last size of a run, or the last interval
//! of a run without end, replaced whole each time as perftest rewrites it.

use super::{Document, ExportFile, Exporter, Files, Place};
use crate::params::OutputSelect;
use crate::report::perftest_json::{PerftestJson, perftest_json};

/// perftest's JSON of one size; `single`: `--output`'s one figure.
pub(crate) struct PerftestJsonExporter {
    /// `--output`.
    pub(crate) single: Option<OutputSelect>,
}

impl Exporter for PerftestJsonExporter {
    fn export<'d>(&self, doc: &Document<'d>, place: &Place) -> Files<'d> {
        let (info, result, both) = match *doc {
            // perftest's file holds one size: the last, as its rewrites leave it.
            Document::Run {
                info,
                results: [.., last],
                both,
            } => (info, last, both),
            Document::Interval { info, result, .. } => (info, result, None),
            _ => return Ok(Vec::new()),
        };
        let text = perftest_json(&PerftestJson {
            info,
            result,
            single: self.single,
            both,
        });
        Ok(vec![ExportFile::whole(
            place.join("perftest_out.json"),
            text,
        )])
    }
}
