//! One cell of a matrix: what one pair test gave (status, round, the figures the matrices show, the
//! error), read from the single-pair binary's result JSON and kept small, since rank 0 holds n² of them.

use crate::params::{Metric, TestKind};
use crate::results::fabric::PairState;
pub(crate) use crate::results::fabric::{MatrixMetric, fmt_value};
use serde_json::Value;

/// How a pair test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Both sides exited 0 and the client wrote its result.
    Ok,
    /// A side failed; the cell carries the error.
    Failed,
    /// Not run: a rank of the pair never joined or was lost earlier.
    Missing,
}

impl Status {
    /// `ok`, `failed`, `missing`.
    pub(crate) fn name(self) -> &'static str {
        PairState::from(self).name()
    }
}

impl From<Status> for PairState {
    fn from(s: Status) -> PairState {
        match s {
            Status::Ok => PairState::Ok,
            Status::Failed => PairState::Failed,
            Status::Missing => PairState::Missing,
        }
    }
}

/// The figures of one pair test, at one message size; NaN where a figure does not apply (f32 keeps a
/// cell small: the full-precision result is in fabric.json).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Figures {
    /// Message size the figures are for.
    pub size_bytes: u64,
    /// Average bandwidth, Gb/s.
    pub(crate) bw_gbps: f32,
    /// Peak bandwidth, Gb/s.
    pub(crate) bw_peak_gbps: f32,
    /// Message rate, Mpps.
    pub msg_rate_mpps: f32,
    /// Median latency, µs.
    pub lat_median_us: f32,
    /// p99 latency, µs.
    pub lat_p99_us: f32,
    /// Maximum latency, µs.
    pub(crate) lat_max_us: f32,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            size_bytes: 0,
            bw_gbps: f32::NAN,
            bw_peak_gbps: f32::NAN,
            msg_rate_mpps: f32::NAN,
            lat_median_us: f32::NAN,
            lat_p99_us: f32::NAN,
            lat_max_us: f32::NAN,
        }
    }
}

fn num(v: &Value, path: &[&str]) -> f32 {
    let mut cur = v;
    for key in path {
        match cur.get(key) {
            Some(next) => cur = next,
            None => return f32::NAN,
        }
    }
    cur.as_f64().map_or(f32::NAN, |x| x as f32)
}

impl Figures {
    /// The figures of a binary's result JSON (`results/README.md`): for a bandwidth test at its largest
    /// message size, for a latency test at its smallest (with `-a`, the sizes a fabric is judged by).
    pub(crate) fn from_result(result: &Value, test: TestKind) -> Option<Figures> {
        let rows = result.get("results")?.as_array()?;
        let row = match test.metric {
            Metric::Bandwidth => rows.iter().max_by_key(|r| r["size_bytes"].as_u64()),
            Metric::Latency => rows.iter().min_by_key(|r| r["size_bytes"].as_u64()),
        }?;
        let f = Figures {
            size_bytes: row.get("size_bytes")?.as_u64()?,
            bw_gbps: num(row, &["bandwidth", "avg_gbps"]),
            bw_peak_gbps: num(row, &["bandwidth", "peak_gbps"]),
            msg_rate_mpps: num(row, &["bandwidth", "msg_rate_mpps"]),
            lat_median_us: num(row, &["latency", "median_us"]),
            lat_p99_us: num(row, &["latency", "percentiles", "p99"]),
            lat_max_us: num(row, &["latency", "max_us"]),
        };
        f.get(MatrixMetric::flagged(test)).map(|_| f)
    }

    /// One figure, None when absent.
    pub(crate) fn get(&self, m: MatrixMetric) -> Option<f64> {
        let v = match m {
            MatrixMetric::BwAvg => self.bw_gbps,
            MatrixMetric::MsgRate => self.msg_rate_mpps,
            MatrixMetric::LatMedian => self.lat_median_us,
            MatrixMetric::LatP99 => self.lat_p99_us,
        };
        v.is_finite().then_some(f64::from(v))
    }
}

/// The GIDs a result names: the client's own (`test.local[0].gid`) and its server's (`test.remote[0].gid`).
pub(crate) fn gids(result: &Value) -> (Option<String>, Option<String>) {
    let gid = |side: &str| result["test"][side][0]["gid"].as_str().map(str::to_owned);
    (gid("local"), gid("remote"))
}

/// One cell: a pair test's outcome, kept compact (about 48 bytes).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    /// How it ended.
    pub status: Status,
    /// The round (of the schedule) it ran in.
    pub round: u32,
    /// Its figures (NaN when it did not run).
    pub figures: Figures,
    /// What went wrong, for failed and missing cells.
    pub error: Option<Box<str>>,
}

impl Cell {
    /// A pair that did not run, and why.
    pub(crate) fn missing(round: usize, why: String) -> Cell {
        Cell {
            status: Status::Missing,
            round: round as u32,
            figures: Figures::default(),
            error: Some(why.into_boxed_str()),
        }
    }

    /// The value a matrix shows for this cell, when it ran.
    pub(crate) fn value(&self, m: MatrixMetric) -> Option<f64> {
        (self.status == Status::Ok)
            .then(|| self.figures.get(m))
            .flatten()
    }
}

/// The n × n cells of one (leg, test): row = client rank, column = server rank; None where the schedule
/// has no pair (the diagonal, and pairs a ring or bisection skips).
#[derive(Debug, Clone)]
pub(crate) struct Grid {
    /// Ranks.
    pub n: usize,
    cells: Vec<Option<Cell>>,
    /// Results of flagged pairs retested alone, by (client, server).
    pub retests: std::collections::BTreeMap<(usize, usize), Cell>,
}

impl Grid {
    /// An empty grid for `n` ranks.
    pub(crate) fn new(n: usize) -> Grid {
        Grid {
            n,
            cells: vec![None; n * n],
            retests: Default::default(),
        }
    }

    /// The cell of (client, server).
    pub(crate) fn get(&self, client: usize, server: usize) -> Option<&Cell> {
        self.cells[client * self.n + server].as_ref()
    }

    /// Sets the cell of (client, server).
    pub(crate) fn set(&mut self, client: usize, server: usize, cell: Cell) {
        self.cells[client * self.n + server] = Some(cell);
    }

    /// Every filled cell with its (client, server).
    pub(crate) fn iter(&self) -> impl Iterator<Item = ((usize, usize), &Cell)> {
        let n = self.n;
        self.cells
            .iter()
            .enumerate()
            .filter_map(move |(i, c)| c.as_ref().map(|c| ((i / n, i % n), c)))
    }
}
