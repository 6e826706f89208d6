//! `roce_gate` on a fabric matrix (fabric.json, read by `crate::results` as a typed
//! [`FabricDoc`]): the lowest pair bandwidth, the highest pair median and p99 latency, no flagged pairs,
//! every scheduled pair run, and no pair worse than in a baseline matrix. Thresholds are typed as
//! everywhere else (`--min-bw 90Gb/s --max-p99 5us`, [`threshold`]).

use super::threshold::{self, Bandwidth, Latency, Percent};
use crate::results::fabric::{FABRIC_SCHEMA, FabricDoc, Matrix, MatrixMetric, fmt_value};
use crate::results::read::{self, DocKind, Document, ReadError, SchemaError};
use crate::stats::{samples_needed, thousands};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What to hold a matrix to.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FabricGate {
    /// Lowest acceptable bandwidth of any pair, e.g. 90Gb/s.
    #[arg(long, value_name = "RATE", value_parser = threshold::parse_bandwidth)]
    pub(crate) min_bw: Option<Bandwidth>,
    /// Highest acceptable median latency of any pair, e.g. 3us.
    #[arg(long = "max-p50", visible_alias = "max-median", value_name = "TIME", value_parser = threshold::parse_latency)]
    pub(crate) max_p50: Option<Latency>,
    /// Highest acceptable p99 latency of any pair, e.g. 5us.
    #[arg(long, value_name = "TIME", value_parser = threshold::parse_latency)]
    pub(crate) max_p99: Option<Latency>,
    /// Fail when the matrix flagged a pair (by the run's outlier rules) that its retest alone confirmed.
    #[arg(long)]
    pub(crate) no_flagged: bool,
    /// A fabric.json to compare with, pair by pair (matched by host names, or ranks).
    #[arg(long, value_name = "FILE")]
    pub(crate) baseline: Option<PathBuf>,
    /// How much worse than the baseline a pair may be.
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = threshold::parse_percent)]
    pub(crate) max_regression: Percent,
}

/// roce_gate's command line when its inputs are fabric matrices.
#[derive(Debug, clap::Parser)]
#[command(
    name = "roce_gate",
    version,
    about = "Check roce_fabric matrices (fabric.json) against thresholds and a baseline."
)]
struct Cli {
    /// fabric.json files.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    gate: FabricGate,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Check {
    /// What was checked: `min pair bandwidth`.
    pub(crate) name: String,
    /// Of what: `write_bw over soft v2`.
    pub(crate) subject: String,
    /// Whether it passed.
    pub(crate) pass: bool,
    /// The evidence: the worst pair and its value against the limit.
    pub(crate) detail: String,
}

/// `leg/test/metric`: what a matrix is matched by in a baseline.
fn key(m: &Matrix) -> String {
    format!("{}/{}/{}", m.leg.name(), m.test, m.metric.name())
}

fn hosts(doc: &FabricDoc) -> Vec<String> {
    doc.hosts.iter().map(|h| h.host.clone()).collect()
}

/// A file as the fabric gate reads it: a fabric matrix, or a document that is not one (an error for
/// an input, and for a baseline once an input is judged against it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Loaded {
    /// A fabric.json.
    Matrix(Box<FabricDoc>),
    /// Something else roceperf or anyone wrote.
    NotAMatrix,
}

/// Judges one fabric.json (and its baseline).
pub(crate) fn judge(
    doc: &FabricDoc,
    baseline: Option<&Loaded>,
    g: &FabricGate,
) -> Result<Vec<Check>, String> {
    let names = hosts(doc);
    let pair = |c: usize, s: usize| {
        format!(
            "{c} -> {s} ({} -> {})",
            names.get(c).map_or("?", String::as_str),
            names.get(s).map_or("?", String::as_str)
        )
    };
    let mut checks = Vec::new();
    let mut limit_check = |name: &str, metric: MatrixMetric, limit: f64, text: &str, min: bool| {
        let mut held = false;
        for mx in doc.matrices.iter().filter(|mx| mx.metric == metric) {
            held = true;
            let cs: Vec<(usize, usize, f64)> = mx.cells().collect();
            let worst = if min {
                cs.iter().copied().min_by(|a, b| a.2.total_cmp(&b.2))
            } else {
                cs.iter().copied().max_by(|a, b| a.2.total_cmp(&b.2))
            };
            let unit = &mx.unit;
            let (pass, detail) = match worst {
                // A latency run's p99 is withheld below 1,000 samples: every pair's, at one -n.
                None if metric == MatrixMetric::LatP99 => (
                    false,
                    format!(
                        "no pair has a value: a pair's p99 is withheld, not enough samples (it \
                         needs {} samples, 10 beyond it); run the latency test with -n {} or more",
                        thousands(samples_needed(99.0)),
                        samples_needed(99.0)
                    ),
                ),
                None => (false, "no pair has a value".to_owned()),
                Some((c, s, v)) => {
                    let bad = cs
                        .iter()
                        .filter(|x| if min { x.2 < limit } else { x.2 > limit })
                        .count();
                    let cmp = if min { ">=" } else { "<=" };
                    (
                        bad == 0,
                        format!(
                            "worst {} {} {unit}, limit {cmp} {text}; {bad} of {} pairs miss it",
                            pair(c, s),
                            fmt_value(v),
                            cs.len()
                        ),
                    )
                }
            };
            checks.push(Check {
                name: name.to_owned(),
                subject: mx.title(),
                pass,
                detail,
            });
        }
        if !held {
            checks.push(Check {
                name: name.to_owned(),
                subject: "(no matrix)".into(),
                pass: false,
                detail: format!(
                    "the matrix has no {} values to hold to {text}",
                    metric.name()
                ),
            });
        }
    };
    if let Some(b) = &g.min_bw {
        limit_check(
            "min pair bandwidth",
            MatrixMetric::BwAvg,
            b.gbps,
            &b.text,
            true,
        );
    }
    if let Some(l) = &g.max_p50 {
        limit_check(
            "max pair median latency",
            MatrixMetric::LatMedian,
            l.us,
            &l.text,
            false,
        );
    }
    if let Some(l) = &g.max_p99 {
        limit_check(
            "max pair p99 latency",
            MatrixMetric::LatP99,
            l.us,
            &l.text,
            false,
        );
    }
    if g.no_flagged {
        checks.push(no_flagged(doc, &pair));
    }
    let s = &doc.summary;
    checks.push(Check {
        name: "every pair ran".into(),
        subject: "every matrix".into(),
        pass: s.failed + s.missing + s.not_run == 0 && !doc.interrupted,
        detail: format!(
            "{} ok, {} failed, {} not run",
            s.ok,
            s.failed,
            s.missing + s.not_run
        ),
    });
    match baseline {
        None => {}
        Some(Loaded::NotAMatrix) => return Err("the baseline is not a roce_fabric matrix".into()),
        Some(Loaded::Matrix(base)) => {
            checks.extend(against_baseline(doc, base, g.max_regression.0)?)
        }
    }
    Ok(checks)
}

/// `--no-flagged`: fails on the flags that are findings. A flag its retest alone did not confirm is
/// load-dependent (`load_only`), and one whose verdict roce_fabric held back (a bad host whose peers
/// share its host: no independent witnesses) or did not give (`unjudged`: oversubscribed cores) is
/// no finding either: those are counted in the detail, and pass.
fn no_flagged(doc: &FabricDoc, pair: &dyn Fn(usize, usize) -> String) -> Check {
    let flagged = &doc.summary.flagged;
    let count = |verdict: &str| flagged.iter().filter(|f| f.verdict == verdict).count();
    let list: Vec<String> = flagged
        .iter()
        .filter(|f| f.confirmed != Some(false))
        .filter(|f| !matches!(f.verdict.as_str(), "held_back" | "unjudged" | "load_only"))
        .map(|f| format!("{} {}", f.test, pair(f.client, f.server)))
        .collect();
    let mut detail = if list.is_empty() {
        "none flagged".to_string()
    } else {
        format!("{} flagged: {}", list.len(), list.join(", "))
    };
    let (held, unjudged) = (count("held_back"), count("unjudged"));
    if held > 0 {
        let _ = write!(detail, "; held back: {held}, ranks share a host");
    }
    if unjudged > 0 {
        let _ = write!(detail, "; unjudged: {unjudged}, cores oversubscribed");
    }
    Check {
        name: "no flagged pairs".into(),
        subject: "every matrix".into(),
        pass: list.is_empty(),
        detail,
    }
}

fn against_baseline(doc: &FabricDoc, base: &FabricDoc, pct: f64) -> Result<Vec<Check>, String> {
    let (now_hosts, base_hosts) = (hosts(doc), hosts(base));
    let unique =
        |h: &[String]| h.iter().collect::<std::collections::BTreeSet<_>>().len() == h.len();
    let by_host = unique(&now_hosts) && unique(&base_hosts) && now_hosts != base_hosts;
    let pair_key = |hosts: &[String], c: usize, s: usize| {
        if by_host {
            format!("{} -> {}", hosts[c], hosts[s])
        } else {
            format!("{c} -> {s}")
        }
    };
    let base_m: BTreeMap<String, &Matrix> = base.matrices.iter().map(|m| (key(m), m)).collect();
    let mut checks = Vec::new();
    for mx in &doc.matrices {
        let Some(bm) = base_m.get(&key(mx)) else {
            continue;
        };
        let higher = mx.metric.higher_is_better();
        let old: BTreeMap<String, f64> = bm
            .cells()
            .map(|(c, s, v)| (pair_key(&base_hosts, c, s), v))
            .collect();
        let mut worse = Vec::new();
        let mut compared = 0;
        for (c, s, v) in mx.cells() {
            let k = pair_key(&now_hosts, c, s);
            let Some(&o) = old.get(&k) else { continue };
            compared += 1;
            let change = if higher {
                (o - v) / o * 100.0
            } else {
                (v - o) / o * 100.0
            };
            if change > pct {
                worse.push(format!(
                    "{k}: {} -> {} ({change:+.1}% worse)",
                    fmt_value(o),
                    fmt_value(v)
                ));
            }
        }
        checks.push(Check {
            name: format!("baseline {}", mx.metric.name()),
            subject: mx.title(),
            pass: compared > 0 && worse.is_empty(),
            detail: if compared == 0 {
                "no pair in common with the baseline".into()
            } else if worse.is_empty() {
                format!("{compared} pairs within {pct}% of the baseline")
            } else {
                format!(
                    "{} of {compared} pairs more than {pct}% worse: {}",
                    worse.len(),
                    worse.join("; ")
                )
            },
        });
    }
    if checks.is_empty() {
        return Err("the baseline shares no matrix (leg, test, metric) with the input".into());
    }
    Ok(checks)
}

/// The checks as a table.
pub(crate) fn table(file: &Path, checks: &[Check]) -> String {
    let mut out = format!("roce_gate: {}\n", file.display());
    for c in checks {
        let _ = writeln!(
            out,
            "  {:<4} {:<26} {:<28} {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.subject,
            c.detail
        );
    }
    let failed = checks.iter().filter(|c| !c.pass).count();
    let _ = writeln!(
        out,
        "{} checks: {} passed, {failed} failed",
        checks.len(),
        checks.len() - failed
    );
    out
}

/// Reads `p`; the error names the file and what is wrong with it.
fn load(p: &Path) -> Result<Loaded, String> {
    match read::read_json(p) {
        Ok(Document::Fabric(doc)) => Ok(Loaded::Matrix(doc)),
        Ok(_) => Ok(Loaded::NotAMatrix),
        Err(ReadError::Read { source, .. }) => Err(format!("{}: {source}", p.display())),
        Err(ReadError::Json { source, .. }) => {
            Err(format!("{}: not valid JSON: {source}", p.display()))
        }
        Err(ReadError::Schema {
            problem:
                problem @ (SchemaError::Version {
                    kind: DocKind::Fabric,
                    ..
                }
                | SchemaError::Fabric(_)),
            ..
        }) => Err(format!("{}: {problem}", p.display())),
        Err(_) => Ok(Loaded::NotAMatrix),
    }
}

/// roce_gate's command line for fabric matrices.
pub(crate) fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// roce_gate's hook: when an input file is a fabric.json, judge the matrices here and give the exit
/// code (0 pass, 1 fail, 2 bad input); None lets roce_gate handle ordinary results.
pub(crate) fn main_if_fabric() -> Option<ExitCode> {
    let cli: Cli = super::args_for(FABRIC_SCHEMA)?;
    let bad = |m: String| {
        eprintln!("roce_gate: error: {m}");
        Some(ExitCode::from(2))
    };
    let baseline = match cli.gate.baseline.as_deref().map(load).transpose() {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    let mut failed = false;
    for f in &cli.files {
        let doc = match load(f) {
            Ok(Loaded::Matrix(d)) => d,
            Ok(Loaded::NotAMatrix) => {
                return bad(format!(
                    "{}: not a roce_fabric matrix (schema is not {FABRIC_SCHEMA})",
                    f.display()
                ));
            }
            Err(e) => return bad(e),
        };
        let checks = match judge(&doc, baseline.as_ref(), &cli.gate) {
            Ok(c) => c,
            Err(e) => return bad(format!("{}: {e}", f.display())),
        };
        failed |= checks.iter().any(|c| !c.pass);
        print!("{}", table(f, &checks));
    }
    Some(ExitCode::from(u8::from(failed)))
}

#[cfg(test)]
mod tests;
