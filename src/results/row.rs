//! Flat result rows: one per (run, message size), with its figures and where it came from.
//!
//! Every result file (a run's JSON or CSV, a comparison's JSON or CSV) can give them.

use super::{CompareSet, Figures, HostPath, RunInfo, SizeResult};
use crate::params::{RoceVersion, Role, TestKind, TransportKind};
use std::path::{Path, PathBuf};

/// One (run, message size) result: what was measured, where it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultRow {
    /// The file the row was read from (or the run's own output path).
    pub source: PathBuf,
    /// 1-based line in a CSV file, for annotations.
    pub line: Option<usize>,
    /// A comparison's transport label such as "RoCE v2 (soft)".
    pub label: Option<String>,
    /// Which of the six tests.
    pub test: TestKind,
    /// What moved the bytes.
    pub transport: TransportKind,
    /// RoCE encapsulation; None for TCP.
    pub roce: Option<RoceVersion>,
    /// Client or server, when the file says.
    pub role: Option<Role>,
    /// Message size in bytes.
    pub size: u64,
    /// The measured figures.
    pub figures: Figures,
    /// Every repetition's figures when the result was repeated (`roce_compare --repeat N`; `figures`
    /// is then the median repetition's); empty for a result measured once.
    pub repeats: Vec<Figures>,
    /// The host path a comparison's row took, when it says (two rows of one transport and RoCE
    /// version, on two paths, are told apart by it).
    pub path: Option<HostPath>,
}

/// The key a baseline is matched on.
pub(crate) type RowKey = (TestKind, TransportKind, Option<RoceVersion>, u64);

impl ResultRow {
    /// `(test, transport, roce, size)`: what a baseline row must share to be compared with this one.
    pub(crate) fn key(&self) -> RowKey {
        (self.test, self.transport, self.roce, self.size)
    }

    /// `write_bw soft v2 65536 B`: the row as a report names it, with its host path when that is not
    /// the transport's default (`write_lat soft v2 (AF_PACKET) 2 B`).
    pub(crate) fn subject(&self) -> String {
        let mut s = format!("{} {}", self.test, self.transport);
        if let Some(r) = self.roce {
            s.push(' ');
            s.push_str(r.name());
        }
        if let Some(p) = self
            .path
            .filter(|p| *p != HostPath::default_for(self.transport, self.roce))
        {
            s.push_str(&format!(" ({})", p.short()));
        }
        s.push_str(&format!(" {} B", self.size));
        s
    }

    /// Rows for a run's results, as a binary holds them after measuring (`source` is its JSON path, if any).
    pub(crate) fn from_run(
        info: &RunInfo,
        results: &[SizeResult],
        source: &Path,
    ) -> Vec<ResultRow> {
        results
            .iter()
            .map(|r| ResultRow {
                source: source.to_owned(),
                line: None,
                label: None,
                test: info.test,
                transport: info.transport,
                roce: info.roce,
                role: Some(info.role),
                size: r.size,
                figures: r.figures(),
                repeats: Vec::new(),
                path: None,
            })
            .collect()
    }

    /// Rows for every run of a comparison.
    pub(crate) fn from_compare(set: &CompareSet, source: &Path) -> Vec<ResultRow> {
        set.runs
            .iter()
            .flat_map(|run| {
                run.results.iter().map(|r| ResultRow {
                    source: source.to_owned(),
                    line: None,
                    label: Some(run.label.clone()),
                    test: run.test,
                    transport: run.transport,
                    roce: run.roce,
                    role: None,
                    size: r.size,
                    figures: r.figures(),
                    repeats: run.repeated_figures(r.size),
                    path: run.path,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::set;

    #[test]
    fn a_row_off_its_transports_default_path_says_which_it_took() {
        let mut set = set();
        set.runs[1].path = Some(HostPath::AfPacket);
        set.runs[0].path = Some(HostPath::AfPacket);
        let rows = ResultRow::from_compare(&set, Path::new("compare.json"));
        // RoCE v2 over AF_PACKET is not soft v2's default (its UDP socket): said; v1's is.
        assert_eq!(rows[1].subject(), "write_lat soft v2 (AF_PACKET) 2 B");
        assert_eq!(rows[0].subject(), "write_lat soft v1 2 B");
        assert_eq!(rows[2].subject(), "write_lat tcp 2 B");
        assert_eq!(rows[1].path, Some(HostPath::AfPacket));
    }
}
