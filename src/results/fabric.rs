//! A fabric run's document: `fabric.json` (schema `roceperf.fabric`), which `roce_fabric`'s rank 0
//! writes and `roce_gate` reads back, and the rows of `fabric.csv`.
//!
//! The document is typed here once, field for field in the order the file holds them. What rank 0 never
//! holds in memory stays out of it: the pair records (each pair's full single-run result) are streamed
//! into the file's `"pairs"` from a spool ([`write_json`]), and a reader skips them; the rows of
//! `fabric.csv` come from the run's cells through [`PairRows`], one at a time.

use crate::params::{Metric, TestKind};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::Path;

/// `schema` of fabric.json.
pub(crate) const FABRIC_SCHEMA: &str = "roceperf.fabric";
/// `schema_version` of fabric.json: changes only when a key is renamed, removed or changes meaning.
pub(crate) const FABRIC_SCHEMA_VERSION: u32 = 1;

/// Four significant digits (at most 6 decimals): `12.34`, `0.1812`, `0.0003456`: how a fabric's
/// figures are shown, in its matrices, its summary and its gate.
pub(crate) fn fmt_value(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let decimals = (3 - v.abs().log10().floor() as i32).clamp(0, 7) as usize;
    format!("{v:.decimals$}")
}

/// One transport leg of a fabric run: the user's flags as given, or one leg of `--compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Leg {
    /// The flags as the user gave them.
    #[serde(rename = "given")]
    AsGiven,
    /// `--roce v1` added.
    RoceV1,
    /// `--roce v2` added.
    RoceV2,
    /// `--transport tcp`, device flags removed.
    Tcp,
}

impl Leg {
    /// fabric.csv's `compare_leg`: `none` (no `--compare`: the flags as given), `roce_v1`, `roce_v2`,
    /// `tcp`.
    pub(crate) fn csv_word(self) -> &'static str {
        match self {
            Leg::AsGiven => "none",
            Leg::RoceV1 => "roce_v1",
            Leg::RoceV2 => "roce_v2",
            Leg::Tcp => "tcp",
        }
    }

    /// Short name for file names and JSON: `given`, `v1`, `v2`, `tcp`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Leg::AsGiven => "given",
            Leg::RoceV1 => "v1",
            Leg::RoceV2 => "v2",
            Leg::Tcp => "tcp",
        }
    }
}

/// A figure a matrix shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum MatrixMetric {
    /// Average bandwidth, Gb/s.
    #[serde(rename = "bw_avg_gbps")]
    BwAvg,
    /// Message rate, Mpps.
    #[serde(rename = "msg_rate_mpps")]
    MsgRate,
    /// Median one-way latency, µs.
    #[serde(rename = "lat_median_us")]
    LatMedian,
    /// 99th-percentile one-way latency, µs.
    #[serde(rename = "lat_p99_us")]
    LatP99,
}

impl MatrixMetric {
    /// The matrices of a test: bandwidth and message rate, or latency median and p99.
    pub(crate) fn of(test: TestKind) -> &'static [MatrixMetric] {
        match test.metric {
            Metric::Bandwidth => &[MatrixMetric::BwAvg, MatrixMetric::MsgRate],
            Metric::Latency => &[MatrixMetric::LatMedian, MatrixMetric::LatP99],
        }
    }

    /// The figure outliers are judged on: bandwidth, or the median latency.
    pub(crate) fn flagged(test: TestKind) -> MatrixMetric {
        match test.metric {
            Metric::Bandwidth => MatrixMetric::BwAvg,
            Metric::Latency => MatrixMetric::LatMedian,
        }
    }

    /// Name in file names, JSON and CSV: `bw_avg_gbps`, `lat_p99_us`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            MatrixMetric::BwAvg => "bw_avg_gbps",
            MatrixMetric::MsgRate => "msg_rate_mpps",
            MatrixMetric::LatMedian => "lat_median_us",
            MatrixMetric::LatP99 => "lat_p99_us",
        }
    }

    /// Title words: `bandwidth`, `median latency`.
    pub(crate) fn title(self) -> &'static str {
        match self {
            MatrixMetric::BwAvg => "bandwidth",
            MatrixMetric::MsgRate => "message rate",
            MatrixMetric::LatMedian => "median latency",
            MatrixMetric::LatP99 => "p99 latency",
        }
    }

    /// Unit: `Gb/s`, `Mpps`, `us`.
    pub(crate) fn unit(self) -> &'static str {
        match self {
            MatrixMetric::BwAvg => "Gb/s",
            MatrixMetric::MsgRate => "Mpps",
            MatrixMetric::LatMedian | MatrixMetric::LatP99 => "us",
        }
    }

    /// Whether a larger value is better (bandwidth) or worse (latency).
    pub(crate) fn higher_is_better(self) -> bool {
        matches!(self, MatrixMetric::BwAvg | MatrixMetric::MsgRate)
    }
}

/// How a scheduled pair of a matrix ended, or that it did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PairState {
    /// Both sides exited 0 and the client wrote its result.
    Ok,
    /// A side failed.
    Failed,
    /// A rank of the pair never joined or was lost earlier.
    Missing,
    /// Scheduled, but the run ended first.
    NotRun,
}

impl PairState {
    /// `ok`, `failed`, `missing`, `not_run`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PairState::Ok => "ok",
            PairState::Failed => "failed",
            PairState::Missing => "missing",
            PairState::NotRun => "not_run",
        }
    }
}

/// Whether a rank took part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HostState {
    /// Joined and answered.
    Present,
    /// Never joined.
    Missing,
    /// Joined, then died or stopped answering.
    Lost,
}

/// fabric.json without its `"pairs"`: the run, its hosts, its matrices and its summary. Reading is
/// lenient (a key that is absent takes its default), so that a hand-made or older matrix still reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct FabricDoc {
    /// [`FABRIC_SCHEMA`].
    pub schema: String,
    /// [`FABRIC_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The tool that wrote it.
    pub tool: Tool,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    /// Whether SIGTERM/SIGINT (or a lost rank under a launcher that kills) cut the run short.
    pub interrupted: bool,
    /// `slurm`, `openmpi`, ...
    pub launcher: String,
    /// Ranks in the job.
    pub ranks: usize,
    /// The tests, by name, sorted.
    pub tests: Vec<String>,
    /// The legs run, with the transport each ran over.
    pub legs: Vec<LegLabel>,
    /// The pattern as described (`all`, `ring`, `pairs from FILE`).
    pub pattern: String,
    /// `--serial`.
    pub serial: bool,
    /// Rank 0's test flags.
    pub args: Vec<String>,
    /// Whether the binaries ran with `--validate` (an ok cell is then a validated one).
    pub validate: bool,
    /// The outlier rules.
    pub rules: RulesDoc,
    /// Per rank: who and where it was.
    pub hosts: Vec<Host>,
    /// Hosts that held several ranks, or more busy pair sides than cores.
    pub shared_hosts: Vec<SharedHostDoc>,
    /// What makes the verdicts less than they seem (ranks sharing a host, oversubscribed cores).
    pub warnings: Vec<String>,
    /// Per leg, test and figure.
    pub matrices: Vec<Matrix>,
    /// `--victim`: per leg and incast test, the latency probe that ran during the incast.
    pub victims: Vec<VictimDoc>,
    /// Counts, flagged pairs and bad hosts.
    pub summary: Summary,
    /// Where rank 0 ran and what it ran ([`super::Provenance`], no NIC: each rank's runs name
    /// theirs); absent from files written before issue 34.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<super::Provenance>,
}

impl Default for FabricDoc {
    fn default() -> Self {
        FabricDoc {
            schema: FABRIC_SCHEMA.into(),
            schema_version: FABRIC_SCHEMA_VERSION,
            tool: Tool::default(),
            started_at: String::new(),
            finished_at: String::new(),
            interrupted: false,
            launcher: String::new(),
            ranks: 0,
            tests: Vec::new(),
            legs: Vec::new(),
            pattern: String::new(),
            serial: false,
            args: Vec::new(),
            validate: false,
            rules: RulesDoc::default(),
            hosts: Vec::new(),
            shared_hosts: Vec::new(),
            warnings: Vec::new(),
            matrices: Vec::new(),
            victims: Vec::new(),
            summary: Summary::default(),
            provenance: None,
        }
    }
}

/// `"tool"`: the program and version that wrote a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Tool {
    /// `roceperf`.
    pub name: String,
    /// Its version.
    pub version: String,
}

impl Default for Tool {
    /// This build.
    fn default() -> Self {
        Tool {
            name: "roceperf".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// One leg of the run and the transport its results named (`soft v2`, `tcp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LegLabel {
    /// The leg.
    pub leg: Leg,
    /// Its transport; None when no pair of it gave a result.
    #[serde(default)]
    pub label: Option<String>,
}

/// `"rules"`: the outlier rules the matrices were judged by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub(crate) struct RulesDoc {
    /// A latency above this many times the lowest is flagged.
    pub lat_factor: f64,
    /// A bandwidth below this fraction of the highest is flagged.
    pub bw_fraction: f64,
    /// Whether flagged pairs were retested alone.
    pub retest: bool,
}

/// One rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Host {
    /// Its rank.
    pub rank: usize,
    /// Its host name (`?` when it never joined).
    pub host: String,
    /// The address peers reached it at.
    pub address: String,
    /// Its `-d` device.
    pub device: Option<String>,
    /// Whether it took part.
    pub status: HostState,
    /// Why it did not, or stopped.
    pub reason: Option<String>,
    /// The GID it used, per leg name.
    pub gids: BTreeMap<String, String>,
    /// The cores it may run on, as it said; None when it did not.
    pub cores: Option<usize>,
}

/// A host that held several ranks of the run, or more busy-polling pair sides than cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub(crate) struct SharedHostDoc {
    /// Its host name.
    pub host: String,
    /// Its ranks.
    pub ranks: Vec<usize>,
    /// The cores its ranks may run on; None when unknown.
    pub cores: Option<usize>,
    /// The most pair sides (each busy-polling a core) that ran on it at once.
    pub busy_sides: usize,
    /// Whether `busy_sides` exceeded `cores` (no flag of a pair with a rank there is judged).
    pub oversubscribed: bool,
}

impl Default for Host {
    /// A host nothing is known of.
    fn default() -> Self {
        Host {
            rank: 0,
            host: "?".into(),
            address: String::new(),
            device: None,
            status: HostState::Present,
            reason: None,
            gids: BTreeMap::new(),
            cores: None,
        }
    }
}

/// The n × n values of one figure of one (leg, test): row = client rank, column = server rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Matrix {
    /// The leg.
    pub leg: Leg,
    /// Its transport (`soft v2`), empty when unknown.
    #[serde(default)]
    pub label: String,
    /// The test's name.
    pub test: String,
    /// The figure.
    pub metric: MatrixMetric,
    /// The figure's unit.
    #[serde(default)]
    pub unit: String,
    /// The message size the values are for (None when no pair gave one).
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Whether outliers were judged on this figure.
    #[serde(default)]
    pub judged: bool,
    /// The values, None where there is none; written to 6 decimals.
    #[serde(serialize_with = "micro_rows")]
    pub values: Vec<Vec<Option<f64>>>,
    /// How each pair ended, None where the schedule has no pair.
    #[serde(default)]
    pub status: Vec<Vec<Option<PairState>>>,
    /// The judged figure only: which pairs were flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flagged: Option<Vec<Vec<bool>>>,
    /// The judged figure only: the limit the pairs were held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<MatrixLimit>,
    /// `--pattern incast`, bandwidth and message rate: what the senders got of the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incast: Option<IncastShare>,
}

/// The victim of an incast: a latency probe between two ranks while the senders sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub(crate) struct VictimDoc {
    /// The leg.
    pub leg: Option<Leg>,
    /// The incast's test (the senders').
    pub test: String,
    /// What the victim ran: `write_lat`.
    pub probe: String,
    /// Its client rank.
    pub client: usize,
    /// Its server rank.
    pub server: usize,
    /// Its client's host.
    pub client_host: String,
    /// Its server's host.
    pub server_host: String,
    /// Whether its server is the incast's receiver (it then queues behind the senders' traffic).
    pub shares_receiver: bool,
    /// `ok`, `failed`, `missing`.
    pub status: String,
    /// The probe's message size.
    pub size_bytes: Option<u64>,
    /// Its median one-way latency, µs.
    #[serde(serialize_with = "micro")]
    pub lat_median_us: Option<f64>,
    /// Its p99 one-way latency, µs (None when withheld: fewer than 10 samples beyond it).
    #[serde(serialize_with = "micro")]
    pub lat_p99_us: Option<f64>,
    /// Its maximum one-way latency, µs.
    #[serde(serialize_with = "micro")]
    pub lat_max_us: Option<f64>,
    /// What went wrong.
    pub error: Option<String>,
}

/// One incast row's place in fabric.csv: a sender's share of the receiver, or the victim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct IncastCells {
    /// `sender` or `victim`.
    pub(crate) role: &'static str,
    /// A sender's share of the senders' sum, %.
    pub(crate) share_pct: Option<f64>,
    /// The senders' sum, Gb/s.
    pub(crate) sum_gbps: Option<f64>,
    /// Jain's index of the senders' bandwidths.
    pub(crate) jain: Option<f64>,
}

/// An incast's senders against its receiver, in one matrix's figure: their sum and how evenly they
/// shared it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IncastShare {
    /// The receiver's rank.
    pub receiver: usize,
    /// The senders' ranks.
    pub senders: Vec<usize>,
    /// How many senders gave a value (the sum and the index are over these).
    pub measured: usize,
    /// The senders' values summed, in the matrix's unit.
    pub sum: f64,
    /// Jain's fairness index of the senders' values (1: equal shares, 1/N: one took all).
    pub jain: Option<f64>,
}

impl IncastShare {
    /// The share of `receiver` among `senders` in `values` (row = client, column = server).
    pub(crate) fn of(
        values: &[Vec<Option<f64>>],
        receiver: usize,
        senders: &[usize],
    ) -> IncastShare {
        let got: Vec<f64> = senders
            .iter()
            .filter_map(|&c| values.get(c)?.get(receiver).copied().flatten())
            .collect();
        IncastShare {
            receiver,
            senders: senders.to_vec(),
            measured: got.len(),
            sum: got.iter().sum(),
            jain: crate::stats::jain_index(&got),
        }
    }
}

impl Matrix {
    /// `write_bw over soft v2`, or the test alone when its transport is unknown.
    pub(crate) fn title(&self) -> String {
        if self.label.is_empty() {
            self.test.clone()
        } else {
            format!("{} over {}", self.test, self.label)
        }
    }

    /// The value of (client, server), when it has one.
    pub(crate) fn value(&self, client: usize, server: usize) -> Option<f64> {
        *self.values.get(client)?.get(server)?
    }

    /// How (client, server) ended, None where the schedule has no pair.
    pub(crate) fn state(&self, client: usize, server: usize) -> Option<PairState> {
        *self.status.get(client)?.get(server)?
    }

    /// Whether (client, server) was flagged.
    pub(crate) fn is_flagged(&self, client: usize, server: usize) -> bool {
        self.flagged
            .as_ref()
            .and_then(|f| f.get(client)?.get(server).copied())
            .unwrap_or(false)
    }

    /// Every (client, server, value) that has a value, row by row.
    pub(crate) fn cells(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        self.values.iter().enumerate().flat_map(|(c, row)| {
            row.iter()
                .enumerate()
                .filter_map(move |(s, v)| v.map(|v| (c, s, v)))
        })
    }
}

/// A judged matrix's limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MatrixLimit {
    /// The matrix's best value (highest bandwidth, lowest latency).
    pub reference: f64,
    /// The value a pair must not be worse than.
    pub value: f64,
    /// The rule in words.
    pub rule: String,
}

/// `"summary"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub(crate) struct Summary {
    /// Pair tests that ran and succeeded.
    pub ok: u64,
    /// Pair tests that failed.
    pub failed: u64,
    /// Pair tests a missing or lost rank kept from running.
    pub missing: u64,
    /// Scheduled pair tests the run ended before.
    pub not_run: u64,
    /// The flagged pairs.
    pub flagged: Vec<Flag>,
    /// The bad hosts.
    pub bad_hosts: Vec<BadHostDoc>,
    /// Hosts the rule would call bad, held back because their rank shares its host or its cores.
    pub held_back: Vec<BadHostDoc>,
}

/// One flagged pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Flag {
    /// Its leg.
    pub leg: Leg,
    /// Its test's name.
    #[serde(default = "unknown")]
    pub test: String,
    /// The figure judged.
    pub metric: MatrixMetric,
    /// Client rank.
    #[serde(default)]
    pub client: usize,
    /// Server rank.
    #[serde(default)]
    pub server: usize,
    /// Client host.
    #[serde(default)]
    pub client_host: String,
    /// Server host.
    #[serde(default)]
    pub server_host: String,
    /// Its value (6 decimals).
    #[serde(default, serialize_with = "micro")]
    pub value: Option<f64>,
    /// The limit it breached.
    #[serde(default)]
    pub limit: Option<f64>,
    /// Whether no bad host explains it.
    #[serde(default)]
    pub bad_pair: bool,
    /// Its value retested alone (6 decimals).
    #[serde(default, serialize_with = "micro")]
    pub retest_value: Option<f64>,
    /// Why the retest gave no value.
    #[serde(default)]
    pub retest_error: Option<String>,
    /// Whether the retest breached the limit again; None without a retest value.
    #[serde(default)]
    pub confirmed: Option<bool>,
    /// fabric.csv's verdict: `bad_pair`, `bad_host`, `load_only`, `held_back`, `unjudged`.
    #[serde(default)]
    pub verdict: String,
    /// Why the flag is held back or not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

fn unknown() -> String {
    "?".into()
}

/// One bad host of a (leg, test).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BadHostDoc {
    /// Its leg.
    pub leg: Leg,
    /// The test's name.
    pub test: String,
    /// Its rank.
    pub rank: usize,
    /// Its host name.
    pub host: String,
    /// Peers with which at least one direction was flagged.
    pub flagged_peers: usize,
    /// Peers it has a measured cell with.
    pub measured_peers: usize,
    /// Why the verdict is held back (`summary.held_back` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A figure as the document holds it: rounded to 6 decimals.
fn round_micro(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn micro<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    v.map(round_micro).serialize(s)
}

fn micro_rows<S: Serializer>(rows: &[Vec<Option<f64>>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(
        rows.iter()
            .map(|row| row.iter().map(|v| v.map(round_micro)).collect::<Vec<_>>()),
    )
}

/// Writes fabric.json to `w`: `doc`, then `"pairs"`, one pair record a line copied from the JSON lines
/// of `spool` (a missing spool is no pairs), so that no more than one record is in memory at a time.
pub(crate) fn write_json(w: &mut dyn Write, doc: &FabricDoc, spool: &Path) -> io::Result<()> {
    let text = serde_json::to_string_pretty(doc).map_err(io::Error::other)?;
    let body = text
        .trim_end()
        .strip_suffix('}')
        .unwrap_or(&text)
        .trim_end();
    w.write_all(body.as_bytes())?;
    w.write_all(b",\n  \"pairs\": [")?;
    let mut first = true;
    if let Ok(f) = std::fs::File::open(spool) {
        for line in io::BufReader::new(f).lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            w.write_all(if first { b"\n    " } else { b",\n    " })?;
            w.write_all(line.as_bytes())?;
            first = false;
        }
    }
    w.write_all(b"\n  ]\n}\n")
}

/// One row of fabric.csv: one pair test (a retest and an incast's victim are rows of their own).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PairRow<'a> {
    /// The leg.
    pub(crate) leg: Leg,
    /// Its transport (`soft v2`), empty when unknown.
    pub(crate) label: &'a str,
    /// The test.
    pub(crate) test: TestKind,
    /// The round of the schedule.
    pub(crate) round: u32,
    /// `matrix` (the schedule's run), `retest` (a flagged pair alone) or `victim` (an incast's probe).
    pub(crate) run: &'static str,
    /// Client rank.
    pub(crate) client: usize,
    /// Server rank.
    pub(crate) server: usize,
    /// Client host.
    pub(crate) client_host: &'a str,
    /// Server host.
    pub(crate) server_host: &'a str,
    /// `ok`, `failed`, `missing`.
    pub(crate) status: &'static str,
    /// Whether the judged figure is within the matrix's limit; None without a value or a limit.
    pub(crate) within_limit: Option<bool>,
    /// The matrix run's verdict (`ok`, `bad_pair`, `bad_host`, `load_only`, `held_back`,
    /// `unjudged`), or the retest's (`confirmed`, `cleared`); empty when the matrix is not judged.
    pub(crate) verdict: &'static str,
    /// The message size of the figures, 0 when it did not run.
    pub(crate) size_bytes: u64,
    /// Figures, NaN where one does not apply: average and peak bandwidth (Gb/s), message rate (Mpps),
    /// median, p99 and maximum latency (µs).
    pub(crate) figures: [f32; 6],
    /// `--pattern incast`: the row's part in it (None for a pair outside an incast).
    pub(crate) incast: Option<IncastCells>,
    /// What went wrong.
    pub(crate) error: Option<&'a str>,
}

/// The pair tests of a fabric run, row by row, in the order fabric.csv lists them.
pub(crate) trait PairRows {
    /// Every row, in order.
    fn rows(&self) -> Box<dyn Iterator<Item = PairRow<'_>> + '_>;
}

/// fabric.csv's columns, units in the names as in the single-pair CSV (`tests/data/golden/fabric.csv`).
pub(crate) const CSV_COLUMNS: &[&str] = &[
    "compare_leg",
    "transport",
    "test",
    "round",
    "run",
    "client",
    "server",
    "client_host",
    "server_host",
    "status",
    "within_limit",
    "verdict",
    "size_bytes",
    "bw_avg_gbps",
    "bw_peak_gbps",
    "msg_rate_mpps",
    "lat_median_us",
    "lat_p99_us",
    "lat_max_us",
    "incast_role",
    "incast_share_pct",
    "incast_sum_gbps",
    "incast_jain",
    "error",
];

/// Writes fabric.csv to `w`: the header, then one row per pair test.
pub(crate) fn write_csv(w: &mut dyn Write, pairs: &dyn PairRows) -> Result<(), ::csv::Error> {
    let mut w = ::csv::Writer::from_writer(w);
    w.write_record(CSV_COLUMNS)?;
    // f32 as it prints: the cells keep f32, the full precision is in fabric.json.
    let f = |v: f32| {
        if v.is_finite() {
            format!("{v}")
        } else {
            String::new()
        }
    };
    for r in pairs.rows() {
        let mut record = vec![
            r.leg.csv_word().to_owned(),
            r.label.to_owned(),
            r.test.name().to_owned(),
            r.round.to_string(),
            r.run.to_owned(),
            r.client.to_string(),
            r.server.to_string(),
            r.client_host.to_owned(),
            r.server_host.to_owned(),
            r.status.to_owned(),
            r.within_limit.map(|b| b.to_string()).unwrap_or_default(),
            r.verdict.to_owned(),
            if r.size_bytes > 0 {
                r.size_bytes.to_string()
            } else {
                String::new()
            },
        ];
        record.extend(r.figures.map(f));
        let g = |v: Option<f64>| v.map(|v| format!("{}", round_micro(v))).unwrap_or_default();
        let i = r.incast;
        record.push(i.map(|i| i.role).unwrap_or("").to_owned());
        record.push(g(i.and_then(|i| i.share_pct)));
        record.push(g(i.and_then(|i| i.sum_gbps)));
        record.push(g(i.and_then(|i| i.jain)));
        record.push(r.error.unwrap_or("").to_owned());
        w.write_record(&record)?;
    }
    w.flush()?;
    Ok(())
}

/// A fabric run's outputs: its document, the pair tests behind it (fabric.csv) and the spool of pair
/// records (fabric.json's `"pairs"`).
pub(crate) struct FabricRun<'a> {
    /// The document.
    pub(crate) doc: FabricDoc,
    /// The pair tests.
    pub(crate) pairs: &'a dyn PairRows,
    /// The JSON lines of the pair records.
    pub(crate) spool: &'a Path,
}

#[cfg(test)]
mod tests;
