//! `roce_gate` on a fabric matrix (fabric.json): the lowest pair bandwidth, the highest pair median and
//! p99 latency, no flagged pairs, every scheduled pair run, and no pair worse than in a baseline matrix.
//! Thresholds are typed as everywhere else (`--min-bw 90Gb/s --max-p99 5us`, gate::threshold).

use super::cell::fmt_value;
use super::files::SCHEMA;
use crate::gate::threshold::{self, Bandwidth, Latency, Percent};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What to hold a matrix to.
#[derive(Debug, Clone, clap::Args)]
pub struct FabricGate {
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
    pub baseline: Option<PathBuf>,
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
pub struct Check {
    /// What was checked: `min pair bandwidth`.
    pub name: String,
    /// Of what: `write_bw over soft v2`.
    pub(crate) subject: String,
    /// Whether it passed.
    pub pass: bool,
    /// The evidence: the worst pair and its value against the limit.
    pub detail: String,
}

/// Whether `path` is a fabric.json (its schema says so).
pub(crate) fn is_fabric(path: &Path) -> bool {
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = vec![0u8; 256];
    let n = std::io::Read::read(&mut f, &mut head).unwrap_or(0);
    String::from_utf8_lossy(&head[..n]).contains(&format!("\"{SCHEMA}\""))
}

struct Matrix<'a> {
    subject: String,
    key: String,
    m: &'a Value,
}

fn matrices(doc: &Value) -> Vec<Matrix<'_>> {
    doc["matrices"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    let label = m["label"].as_str().unwrap_or("");
                    let test = m["test"].as_str().unwrap_or("?");
                    let subject = if label.is_empty() {
                        test.to_owned()
                    } else {
                        format!("{test} over {label}")
                    };
                    let key = format!(
                        "{}/{test}/{}",
                        m["leg"].as_str().unwrap_or(""),
                        m["metric"].as_str().unwrap_or("")
                    );
                    Matrix { subject, key, m }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn cells(m: &Value) -> Vec<(usize, usize, f64)> {
    let mut out = Vec::new();
    for (c, row) in m["values"].as_array().into_iter().flatten().enumerate() {
        for (s, v) in row.as_array().into_iter().flatten().enumerate() {
            if let Some(v) = v.as_f64() {
                out.push((c, s, v));
            }
        }
    }
    out
}

fn hosts(doc: &Value) -> Vec<String> {
    doc["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| h["host"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Judges one fabric.json (and its baseline).
pub fn judge(doc: &Value, baseline: Option<&Value>, g: &FabricGate) -> Result<Vec<Check>, String> {
    if doc["schema"].as_str() != Some(SCHEMA) {
        return Err("not a roce_fabric matrix (schema is not roceperf.fabric)".into());
    }
    let names = hosts(doc);
    let pair = |c: usize, s: usize| {
        format!(
            "{c} -> {s} ({} -> {})",
            names.get(c).map_or("?", String::as_str),
            names.get(s).map_or("?", String::as_str)
        )
    };
    let mut checks = Vec::new();
    let mut limit_check = |name: &str, metric: &str, limit: f64, text: &str, min: bool| {
        let mut held = false;
        for mx in matrices(doc).iter().filter(|mx| mx.m["metric"] == metric) {
            held = true;
            let cs = cells(mx.m);
            let worst = if min {
                cs.iter().copied().min_by(|a, b| a.2.total_cmp(&b.2))
            } else {
                cs.iter().copied().max_by(|a, b| a.2.total_cmp(&b.2))
            };
            let unit = mx.m["unit"].as_str().unwrap_or("");
            let (pass, detail) = match worst {
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
                subject: mx.subject.clone(),
                pass,
                detail,
            });
        }
        if !held {
            checks.push(Check {
                name: name.to_owned(),
                subject: "(no matrix)".into(),
                pass: false,
                detail: format!("the matrix has no {metric} values to hold to {text}"),
            });
        }
    };
    if let Some(b) = &g.min_bw {
        limit_check("min pair bandwidth", "bw_avg_gbps", b.gbps, &b.text, true);
    }
    if let Some(l) = &g.max_p50 {
        limit_check(
            "max pair median latency",
            "lat_median_us",
            l.us,
            &l.text,
            false,
        );
    }
    if let Some(l) = &g.max_p99 {
        limit_check("max pair p99 latency", "lat_p99_us", l.us, &l.text, false);
    }
    if g.no_flagged {
        // A flag its retest alone did not confirm is load-dependent, not a bad pair: it does not fail.
        let mut flagged = doc["summary"]["flagged"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        flagged.retain(|f| f["confirmed"] != false);
        let list: Vec<String> = flagged
            .iter()
            .map(|f| {
                let (c, s) = (
                    f["client"].as_u64().unwrap_or(0) as usize,
                    f["server"].as_u64().unwrap_or(0) as usize,
                );
                format!("{} {}", f["test"].as_str().unwrap_or("?"), pair(c, s))
            })
            .collect();
        checks.push(Check {
            name: "no flagged pairs".into(),
            subject: "every matrix".into(),
            pass: list.is_empty(),
            detail: if list.is_empty() {
                "none flagged".into()
            } else {
                format!("{} flagged: {}", list.len(), list.join(", "))
            },
        });
    }
    let s = &doc["summary"];
    let (failed, missing, not_run) = (
        s["failed"].as_u64().unwrap_or(0),
        s["missing"].as_u64().unwrap_or(0),
        s["not_run"].as_u64().unwrap_or(0),
    );
    checks.push(Check {
        name: "every pair ran".into(),
        subject: "every matrix".into(),
        pass: failed + missing + not_run == 0 && doc["interrupted"] != true,
        detail: format!(
            "{} ok, {failed} failed, {} not run",
            s["ok"].as_u64().unwrap_or(0),
            missing + not_run
        ),
    });
    if let Some(base) = baseline {
        checks.extend(against_baseline(doc, base, g.max_regression.0)?);
    }
    Ok(checks)
}

fn against_baseline(doc: &Value, base: &Value, pct: f64) -> Result<Vec<Check>, String> {
    if base["schema"].as_str() != Some(SCHEMA) {
        return Err("the baseline is not a roce_fabric matrix".into());
    }
    let (now_hosts, base_hosts) = (hosts(doc), hosts(base));
    let unique =
        |h: &[String]| h.iter().collect::<std::collections::BTreeSet<_>>().len() == h.len();
    let by_host = unique(&now_hosts) && unique(&base_hosts) && now_hosts != base_hosts;
    let key = |hosts: &[String], c: usize, s: usize| {
        if by_host {
            format!("{} -> {}", hosts[c], hosts[s])
        } else {
            format!("{c} -> {s}")
        }
    };
    let base_m: BTreeMap<String, &Value> =
        matrices(base).into_iter().map(|m| (m.key, m.m)).collect();
    let mut checks = Vec::new();
    for mx in matrices(doc) {
        let Some(bm) = base_m.get(&mx.key) else {
            continue;
        };
        let higher = mx.m["metric"]
            .as_str()
            .is_some_and(|m| m.starts_with("bw") || m.starts_with("msg"));
        let old: BTreeMap<String, f64> = cells(bm)
            .into_iter()
            .map(|(c, s, v)| (key(&base_hosts, c, s), v))
            .collect();
        let mut worse = Vec::new();
        let mut compared = 0;
        for (c, s, v) in cells(mx.m) {
            let k = key(&now_hosts, c, s);
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
            name: format!("baseline {}", mx.m["metric"].as_str().unwrap_or("")),
            subject: mx.subject.clone(),
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
pub fn table(file: &Path, checks: &[Check]) -> String {
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

/// roce_gate's hook: when an input file is a fabric.json, judge the matrices here and give the exit
/// code (0 pass, 1 fail, 2 bad input); None lets roce_gate handle ordinary results.
pub fn main_if_fabric() -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    if !args
        .iter()
        .skip(1)
        .any(|a| !a.starts_with('-') && is_fabric(Path::new(a)))
    {
        return None;
    }
    let cli = <Cli as clap::Parser>::parse_from(&args);
    let load = |p: &Path| -> Result<Value, String> {
        let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: not valid JSON: {e}", p.display()))
    };
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
            Ok(d) => d,
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
