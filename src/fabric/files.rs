//! The files rank 0 writes: fabric.json (schema-versioned; every pair's full single-run result,
//! streamed from a spool so that rank 0 never holds n² results in memory), fabric.csv (one row per
//! pair test) and the per-matrix heatmaps.

use super::args::Leg;
use super::cell::{MatrixMetric, Status};
use super::driver::{Member, MemberState, Phase};
use super::rules::Rules;
use super::summary::{LegLabels, cell_state};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;

/// `schema` of fabric.json.
pub(crate) const SCHEMA: &str = "roceperf.fabric";
/// `schema_version` of fabric.json: changes only when a key is renamed, removed or changes meaning.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// The run's description for fabric.json.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub(crate) finished_at: String,
    /// `slurm`, `openmpi`, ...
    pub launcher: String,
    /// Pattern description.
    pub pattern: String,
    /// `--serial`.
    pub serial: bool,
    /// Rank 0's test flags.
    pub args: Vec<String>,
    /// Outlier rules.
    pub rules: Rules,
    /// Whether flagged pairs were retested.
    pub retest: bool,
    /// Whether SIGTERM/SIGINT cut the run short.
    pub interrupted: bool,
    /// Whether the binaries ran with `--validate` (an ok cell is then a validated one).
    pub validate: bool,
}

fn opt(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| json!((x * 1e6).round() / 1e6))
}

/// The fabric.json document without its `pairs` (which are streamed after it).
pub fn header(
    info: &RunInfo,
    members: &[Member],
    phases: &[Phase],
    labels: &LegLabels,
    gids: &BTreeMap<(usize, &'static str), String>,
    scheduled: &BTreeSet<(usize, usize)>,
) -> Value {
    let hosts: Vec<Value> = members
        .iter()
        .map(|m| {
            let (status, reason) = match &m.state {
                MemberState::Present => ("present", None),
                MemberState::Missing(w) => ("missing", Some(w.clone())),
                MemberState::Lost(w) => ("lost", Some(w.clone())),
            };
            let g: serde_json::Map<String, Value> = gids
                .range((m.rank, "")..)
                .take_while(|((r, _), _)| *r == m.rank)
                .map(|((_, leg), gid)| ((*leg).to_owned(), json!(gid)))
                .collect();
            json!({"rank": m.rank, "host": m.host, "address": m.addr, "device": m.device,
                   "status": status, "reason": reason, "gids": g})
        })
        .collect();
    let n = members.len();
    let mut matrices = Vec::new();
    let mut flagged_list = Vec::new();
    let mut bad_hosts = Vec::new();
    let (mut ok, mut failed, mut missing, mut not_run) = (0, 0, 0, 0);
    for p in phases {
        let label = labels.get(&p.leg).cloned().unwrap_or_default();
        for (_, c) in p.grid.iter() {
            match c.status {
                Status::Ok => ok += 1,
                Status::Failed => failed += 1,
                Status::Missing => missing += 1,
            }
        }
        not_run += scheduled
            .iter()
            .filter(|(c, s)| p.grid.get(*c, *s).is_none())
            .count();
        let size = p
            .grid
            .iter()
            .find(|(_, c)| c.status == Status::Ok)
            .map(|(_, c)| c.figures.size_bytes);
        let status: Vec<Vec<Value>> = (0..n)
            .map(|c| {
                (0..n)
                    .map(|s| json!(cell_state(&p.grid, scheduled, c, s)))
                    .collect()
            })
            .collect();
        for &metric in MatrixMetric::of(p.test) {
            let judged = metric == MatrixMetric::flagged(p.test);
            let values: Vec<Vec<Value>> = (0..n)
                .map(|c| {
                    (0..n)
                        .map(|s| opt(p.grid.get(c, s).and_then(|x| x.value(metric))))
                        .collect()
                })
                .collect();
            let mut m = json!({"leg": p.leg, "label": label, "test": p.test.name(), "metric": metric.name(),
                               "unit": metric.unit(), "size_bytes": size, "judged": judged,
                               "values": values, "status": status});
            if judged {
                let flagged: Vec<Vec<bool>> = (0..n)
                    .map(|c| (0..n).map(|s| p.flagged.contains(&(c, s))).collect())
                    .collect();
                m["flagged"] = json!(flagged);
                if let Some(l) = p.limit {
                    m["limit"] = json!({"reference": l.reference, "value": l.value, "rule": l.describe(&info.rules)});
                }
            }
            matrices.push(m);
        }
        let metric = MatrixMetric::flagged(p.test);
        for &(c, s) in &p.flagged {
            let retest = p.grid.retests.get(&(c, s));
            let rv = retest.and_then(|r| r.value(metric));
            flagged_list.push(json!({
                "leg": p.leg, "test": p.test.name(), "metric": metric.name(), "client": c, "server": s,
                "client_host": members[c].host, "server_host": members[s].host,
                "value": opt(p.grid.get(c, s).and_then(|x| x.value(metric))),
                "limit": p.limit.map(|l| l.value),
                "bad_pair": p.diagnosis.bad_pairs.contains(&(c, s)),
                "retest_value": opt(rv),
                "retest_error": retest.and_then(|r| r.error.as_deref()),
                "confirmed": rv.zip(p.limit).map(|(v, l)| l.breached(v)),
            }));
        }
        for h in &p.diagnosis.bad_hosts {
            bad_hosts.push(json!({"leg": p.leg, "test": p.test.name(), "rank": h.rank, "host": members[h.rank].host,
                                  "flagged_peers": h.flagged_peers, "measured_peers": h.measured_peers}));
        }
    }
    let legs: Vec<Value> = phases
        .iter()
        .map(|p| p.leg)
        .collect::<BTreeSet<Leg>>()
        .into_iter()
        .map(|l| json!({"leg": l, "label": labels.get(&l)}))
        .collect();
    let tests: Vec<&str> = phases
        .iter()
        .map(|p| p.test.name())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    json!({
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "roceperf", "version": env!("CARGO_PKG_VERSION")},
        "started_at": info.started_at,
        "finished_at": info.finished_at,
        "interrupted": info.interrupted,
        "launcher": info.launcher,
        "ranks": n,
        "tests": tests,
        "legs": legs,
        "pattern": info.pattern,
        "serial": info.serial,
        "args": info.args,
        "validate": info.validate,
        "rules": {"lat_factor": info.rules.lat_factor, "bw_fraction": info.rules.bw_fraction, "retest": info.retest},
        "hosts": hosts,
        "matrices": matrices,
        "summary": {"ok": ok, "failed": failed, "missing": missing, "not_run": not_run,
                    "flagged": flagged_list, "bad_hosts": bad_hosts},
    })
}

/// Writes fabric.json: the header, then `"pairs"` copied line by line from the spool.
pub fn write_json(path: &Path, header: &Value, spool: &Path) -> io::Result<()> {
    let mut w = BufWriter::new(std::fs::File::create(path)?);
    let text = serde_json::to_string_pretty(header).map_err(io::Error::other)?;
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
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()
}

/// CSV columns, units in the names as in the single-pair CSV.
pub(crate) const CSV_HEADER: &[&str] = &[
    "leg",
    "transport",
    "test",
    "round",
    "attempt",
    "client",
    "server",
    "client_host",
    "server_host",
    "status",
    "flagged",
    "size_bytes",
    "bw_avg_gbps",
    "bw_peak_gbps",
    "msg_rate_mpps",
    "lat_median_us",
    "lat_p99_us",
    "lat_max_us",
    "error",
];

/// Writes fabric.csv: one row per pair test, retests as rows of attempt 2.
pub(crate) fn write_csv(
    path: &Path,
    members: &[Member],
    phases: &[Phase],
    labels: &LegLabels,
) -> io::Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record(CSV_HEADER)?;
    let f = |v: f32| {
        if v.is_finite() {
            format!("{v}")
        } else {
            String::new()
        }
    };
    for p in phases {
        let label = labels.get(&p.leg).cloned().unwrap_or_default();
        let retests = p.grid.retests.iter().map(|(&k, c)| (k, c, 2u8));
        for ((c, s), cell, attempt) in p.grid.iter().map(|(k, c)| (k, c, 1u8)).chain(retests) {
            let flagged = attempt == 1 && p.flagged.contains(&(c, s));
            let fig = &cell.figures;
            w.write_record([
                p.leg.name().to_owned(),
                label.clone(),
                p.test.name().to_owned(),
                cell.round.to_string(),
                attempt.to_string(),
                c.to_string(),
                s.to_string(),
                members[c].host.clone(),
                members[s].host.clone(),
                cell.status.name().to_owned(),
                flagged.to_string(),
                if fig.size_bytes > 0 {
                    fig.size_bytes.to_string()
                } else {
                    String::new()
                },
                f(fig.bw_gbps),
                f(fig.bw_peak_gbps),
                f(fig.msg_rate_mpps),
                f(fig.lat_median_us),
                f(fig.lat_p99_us),
                f(fig.lat_max_us),
                cell.error.as_deref().unwrap_or("").to_owned(),
            ])?;
        }
    }
    w.flush()
}
