//! `roce_gate` on a congestion study (congestion.json, read by `crate::results` as a typed
//! [`CongestionDoc`]): per discipline, total goodput against the bottleneck, steady-state fairness,
//! no drop where the discipline promises none, the victim's p99 against the idle bottleneck's; and
//! for every run, that it ended well and (RoCE) checked every byte. Defaults are issue 30's targets
//! (ECN with DCQCN: ≥ 90 % of the bottleneck, Jain ≥ 0.95 in steady state, no drop, victim p99 ≤ 3×
//! idle; PFC: no drop); a flag given replaces its defaults. The verdicts are a [`GateReport`], so the
//! table, JUnit and GitHub annotations are the other gates'.

use super::{CheckResult, GateOutputArgs, GateReport, Verdict};
use crate::params::TransportKind;
use crate::results::congestion::{CONGESTION_SCHEMA, CongestionDoc, Discipline, DisciplineRun};
use crate::results::read::{self, Document};
use crate::stats::{samples_needed, thousands};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A figure's limit for one discipline: `ecn-dcqcn=0.9`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Target {
    /// The discipline it applies to.
    pub(crate) discipline: Discipline,
    /// The limit.
    pub(crate) value: f64,
}

/// `DISCIPLINE=VALUE`, the value a number, `90%` a fraction, `3x` a ratio.
fn parse_target(s: &str) -> Result<Target, String> {
    let (d, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not DISCIPLINE=VALUE, e.g. ecn-dcqcn=0.9"))?;
    let discipline = Discipline::parse(d)?;
    let v = v.trim();
    let value = if let Some(p) = v.strip_suffix('%') {
        p.trim().parse::<f64>().map(|p| p / 100.0)
    } else {
        v.trim_end_matches('x').parse::<f64>()
    }
    .ok()
    .filter(|x| x.is_finite() && *x >= 0.0)
    .ok_or_else(|| format!("{v:?} is not a number (0.9, 90% or 3x) in {s:?}"))?;
    Ok(Target { discipline, value })
}

/// What to hold a congestion study to.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Targets of a congestion study (exit 1 when a run misses one)")]
pub(crate) struct CongestionGate {
    /// Lowest total goodput as a share of the bottleneck's rate, per discipline:
    /// DISCIPLINE=SHARE (0.9 or 90%), comma-separated [default: ecn-dcqcn=0.9].
    #[arg(long, value_name = "DISC=SHARE", value_delimiter = ',', value_parser = parse_target)]
    pub(crate) min_goodput: Vec<Target>,
    /// Lowest Jain's fairness index over the flows in steady state (after they converged; the second
    /// half of the run when they never did) [default: ecn-dcqcn=0.95].
    #[arg(long, value_name = "DISC=INDEX", value_delimiter = ',', value_parser = parse_target)]
    pub(crate) min_jain: Vec<Target>,
    /// Highest victim p99 as a multiple of its p99 on the idle bottleneck [default: ecn-dcqcn=3x].
    #[arg(long, value_name = "DISC=RATIO", value_delimiter = ',', value_parser = parse_target)]
    pub(crate) max_victim_p99: Vec<Target>,
    /// Disciplines under which the switch must drop nothing, comma-separated [default:
    /// ecn-dcqcn,pfc,pfc-dcqcn].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = Discipline::parse)]
    pub(crate) no_drop: Vec<Discipline>,
    /// Hold the study only to the targets given here, none of the defaults (every run must still
    /// end well and, over RoCE, be validated).
    #[arg(long)]
    pub(crate) no_defaults: bool,
}

/// One kind of target: its flag, its defaults, and the targets it holds this time, each with whether
/// the user named it (a default on a discipline the study did not run is skipped; a named one fails).
fn targets(given: &[Target], defaults: &[Target], no_defaults: bool) -> Vec<(Target, bool)> {
    if !given.is_empty() {
        given.iter().map(|t| (*t, true)).collect()
    } else if no_defaults {
        Vec::new()
    } else {
        defaults.iter().map(|t| (*t, false)).collect()
    }
}

/// issue 30's targets.
const DEFAULT_GOODPUT: [Target; 1] = [Target {
    discipline: Discipline::EcnDcqcn,
    value: 0.9,
}];
const DEFAULT_JAIN: [Target; 1] = [Target {
    discipline: Discipline::EcnDcqcn,
    value: 0.95,
}];
const DEFAULT_VICTIM: [Target; 1] = [Target {
    discipline: Discipline::EcnDcqcn,
    value: 3.0,
}];
const DEFAULT_NO_DROP: [Discipline; 3] =
    [Discipline::EcnDcqcn, Discipline::Pfc, Discipline::PfcDcqcn];

/// A check's verdict, measured text and message from a figure that may be missing.
struct Judged {
    verdict: Verdict,
    measured: String,
    message: String,
}

fn judged(pass: bool, measured: String, miss: impl FnOnce() -> String) -> Judged {
    Judged {
        verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        message: if pass { String::new() } else { miss() },
        measured,
    }
}

fn missing(why: String) -> Judged {
    Judged {
        verdict: Verdict::Fail,
        measured: "n/a".into(),
        message: why,
    }
}

/// Judges one congestion study.
pub(crate) fn judge(doc: &CongestionDoc, g: &CongestionGate, source: &Path) -> GateReport {
    let mut checks = Vec::new();
    let mut push = |subject: String, what: &str, flag: &'static str, limit: String, j: Judged| {
        checks.push(CheckResult {
            subject,
            what: what.into(),
            flag,
            limit,
            measured: j.measured,
            verdict: j.verdict,
            message: j.message,
            source: Some(source.to_owned()),
            line: None,
        })
    };
    for run in &doc.runs {
        let d = run.discipline.name();
        let o = &run.outcome;
        push(
            d.into(),
            "run ended well",
            "(always)",
            "every process exit 0".into(),
            judged(
                o.ok,
                if o.ok { "ok".into() } else { "failed".into() },
                || {
                    format!(
                        "{d}: {}",
                        o.error.as_deref().unwrap_or("a process did not exit 0")
                    )
                },
            ),
        );
        if run.ran.transport != TransportKind::Tcp {
            push(
                d.into(),
                "validated",
                "(always)",
                "--validate".into(),
                judged(
                    run.ran.validate,
                    if run.ran.validate { "yes" } else { "no" }.into(),
                    || format!("{d}: the run did not check its bytes (--validate); rerun with it"),
                ),
            );
        }
    }
    let absent = |t: &Target, named: bool| -> Option<Judged> {
        (doc.run(t.discipline).is_none()).then(|| Judged {
            verdict: if named { Verdict::Fail } else { Verdict::Skip },
            measured: "not run".into(),
            message: format!(
                "{} is not in the study (run it with --disciplines {})",
                t.discipline, t.discipline
            ),
        })
    };
    for (t, named) in targets(&g.min_goodput, &DEFAULT_GOODPUT, g.no_defaults) {
        let limit = format!(
            ">= {:.0}% of {} Gb/s",
            t.value * 100.0,
            doc.setup.bottleneck_gbps
        );
        let j = absent(&t, named).unwrap_or_else(|| {
            let run = doc.run(t.discipline).expect("present");
            match run.totals.goodput_fraction {
                None => missing(format!("{}: no goodput was measured", t.discipline)),
                Some(f) => judged(
                    f >= t.value,
                    format!("{:.1}% ({:.3} Gb/s)", f * 100.0, run.totals.goodput_gbps),
                    || {
                        format!(
                            "{}: the flows delivered {:.1}% of the bottleneck, under {:.0}%",
                            t.discipline,
                            f * 100.0,
                            t.value * 100.0
                        )
                    },
                ),
            }
        });
        push(
            t.discipline.name().into(),
            "goodput of the bottleneck",
            "--min-goodput",
            limit,
            j,
        );
    }
    for (t, named) in targets(&g.min_jain, &DEFAULT_JAIN, g.no_defaults) {
        let j = absent(&t, named).unwrap_or_else(|| {
            let run = doc.run(t.discipline).expect("present");
            match run.totals.jain_steady {
                None => missing(format!(
                    "{}: no steady-state fairness ({})",
                    t.discipline, run.totals.steady_basis
                )),
                Some(x) => judged(
                    x >= t.value,
                    format!("{x:.3} ({})", run.totals.steady_basis),
                    || {
                        format!(
                            "{}: Jain's index in steady state {x:.3} < {}",
                            t.discipline, t.value
                        )
                    },
                ),
            }
        });
        push(
            t.discipline.name().into(),
            "Jain's index, steady state",
            "--min-jain",
            format!(">= {}", t.value),
            j,
        );
    }
    for (t, named) in targets(&g.max_victim_p99, &DEFAULT_VICTIM, g.no_defaults) {
        let j = absent(&t, named).unwrap_or_else(|| {
            victim_check(doc, doc.run(t.discipline).expect("present"), t.value, named)
        });
        push(
            t.discipline.name().into(),
            "victim p99 ÷ idle p99",
            "--max-victim-p99",
            format!("<= {}x", t.value),
            j,
        );
    }
    let no_drop: Vec<(Discipline, bool)> = if !g.no_drop.is_empty() {
        g.no_drop.iter().map(|d| (*d, true)).collect()
    } else if g.no_defaults {
        Vec::new()
    } else {
        DEFAULT_NO_DROP.iter().map(|d| (*d, false)).collect()
    };
    for (d, named) in no_drop {
        let t = Target {
            discipline: d,
            value: 0.0,
        };
        let j = absent(&t, named).unwrap_or_else(|| {
            let tot = &doc.run(d).expect("present").totals;
            match tot.drops {
                None => missing(format!("{d}: the switch's drops were not recorded")),
                Some(n) => {
                    let all = n + tot.headroom_drops.unwrap_or(0);
                    judged(all == 0, thousands(all), || {
                        format!(
                            "{d}: the switch dropped {} packets ({} in PFC headroom)",
                            thousands(all),
                            thousands(tot.headroom_drops.unwrap_or(0))
                        )
                    })
                }
            }
        });
        push(d.name().into(), "switch drops", "--no-drop", "0".into(), j);
    }
    GateReport {
        checks,
        warnings: Vec::new(),
    }
}

/// The victim's p99 under `run` ÷ its p99 on the idle bottleneck, held to `limit`. A study run
/// without a victim skips the default target and fails one the user named.
fn victim_check(doc: &CongestionDoc, run: &DisciplineRun, limit: f64, named: bool) -> Judged {
    let d = run.discipline;
    if doc.setup.victim_size_bytes.is_none() {
        return Judged {
            verdict: if named { Verdict::Fail } else { Verdict::Skip },
            measured: "no victim".into(),
            message: format!("{d}: the study ran without a victim (--no-victim)"),
        };
    }
    let (Some(loaded), Some(idle)) = (run.victim.as_ref(), doc.idle_victim.as_ref()) else {
        return missing(format!(
            "{d}: the victim wrote no latency (see the run's error)"
        ));
    };
    let withheld = |which: &str, samples: u64| {
        missing(format!(
            "{d}: the victim's p99 {which} is withheld: it needs {} samples (10 beyond it), it has {}; \
             run longer (-D)",
            thousands(samples_needed(99.0)),
            thousands(samples)
        ))
    };
    let Some(l) = loaded.p99_us else {
        return withheld("under load", loaded.samples);
    };
    let Some(i) = idle.p99_us.filter(|i| *i > 0.0) else {
        return withheld("on the idle bottleneck", idle.samples);
    };
    let r = l / i;
    judged(r <= limit, format!("{r:.2}x ({l:.1} / {i:.1} µs)"), || {
        format!("{d}: the victim's p99 rose to {r:.2}x its idle p99, over {limit}x")
    })
}

/// roce_gate's command line when its inputs are congestion studies.
#[derive(Debug, clap::Parser)]
#[command(
    name = "roce_gate",
    version,
    about = "Check roce_compare --congestion studies (congestion.json) against per-discipline targets."
)]
struct Cli {
    /// congestion.json files.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    gate: CongestionGate,
    #[command(flatten)]
    output: GateOutputArgs,
}

/// roce_gate's command line for congestion studies.
pub(crate) fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// roce_gate's hook: when an input file is a congestion.json, judge it here and give the exit code
/// (0 pass, 1 fail, 2 bad input); None lets roce_gate go on.
pub(crate) fn main_if_congestion() -> Option<ExitCode> {
    let cli: Cli = super::args_for(CONGESTION_SCHEMA)?;
    Some(run(&cli.files, &cli.gate, &cli.output))
}

/// Judges every file; prints the table (and annotations), writes JUnit; the exit code.
fn run(files: &[PathBuf], gate: &CongestionGate, output: &GateOutputArgs) -> ExitCode {
    let bad = |m: String| {
        eprintln!("roce_gate: error: {m}");
        ExitCode::from(2)
    };
    let mut report = GateReport::default();
    for f in files {
        match read::read_json(f) {
            Ok(Document::Congestion(doc)) => report.checks.extend(judge(&doc, gate, f).checks),
            Ok(_) => {
                return bad(format!(
                    "{}: not a congestion study (schema is not {CONGESTION_SCHEMA}); gate \
                     congestion studies apart from other results",
                    f.display()
                ));
            }
            Err(e) => return bad(e.to_string()),
        }
    }
    crate::report::emit(&report.table());
    if output.github_enabled() {
        crate::report::emit(&report.github_annotations());
    }
    if let Some(path) = &output.junit
        && let Err(e) = report.write_junit(path)
    {
        return bad(format!(
            "cannot write the JUnit report {}: {e}; check that its directory exists and is writable",
            path.display()
        ));
    }
    ExitCode::from(report.exit_code() as u8)
}

#[cfg(test)]
mod tests;
