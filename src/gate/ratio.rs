//! Relative gates within one result set: one transport's figure against another's at the same test
//! and message size, e.g. `--min-ratio soft-v2/tcp:bw=0.9`, `--max-ratio soft-v2/tcp:p50=1.0`.
//!
//! Both sides ran on the same machine in the same comparison, so a slow or busy machine slows both and
//! the ratio holds where an absolute threshold would flake. The syntax is `NUM/DEN:FIGURE=X`: NUM's
//! FIGURE divided by DEN's, held to X.

use super::rank::median;
use super::{CheckResult, Verdict, fmt_gbps, fmt_mpps, fmt_us};
use crate::params::{RoceVersion, TransportKind};
use crate::results::{Figures, ResultRow};
use crate::stats::withheld_because;
use std::fmt;

/// Which transport one side of a ratio names: `tcp`, `soft`, `soft-v2`, `verbs-v1`...
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Side {
    /// What moved the bytes.
    pub transport: TransportKind,
    /// The RoCE version it must have; None: any (`soft` alone).
    pub roce: Option<RoceVersion>,
    /// As typed.
    pub text: String,
}

impl Side {
    /// Whether `row` is a result of this side.
    pub(crate) fn matches(&self, row: &ResultRow) -> bool {
        row.transport == self.transport && self.roce.is_none_or(|v| row.roce == Some(v))
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The figure a ratio compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Figure {
    /// Average bandwidth (`bw`).
    Bandwidth,
    /// Message rate (`msg-rate`).
    MsgRate,
    /// Median latency (`p50`, `median`).
    Median,
    /// 99th-percentile latency (`p99`).
    P99,
    /// 99.9th-percentile latency (`p999`, `p99.9`).
    P999,
    /// True maximum latency (`max`).
    Max,
}

/// Figure names as typed, and what each means.
const FIGURES: [(&str, Figure); 8] = [
    ("bw", Figure::Bandwidth),
    ("msg-rate", Figure::MsgRate),
    ("p50", Figure::Median),
    ("median", Figure::Median),
    ("p99", Figure::P99),
    ("p999", Figure::P999),
    ("p99.9", Figure::P999),
    ("max", Figure::Max),
];

impl Figure {
    /// `bandwidth`, `median latency`, ...: how a report names it.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Figure::Bandwidth => "bandwidth",
            Figure::MsgRate => "message rate",
            Figure::Median => "median latency",
            Figure::P99 => "p99 latency",
            Figure::P999 => "p99.9 latency",
            Figure::Max => "max latency",
        }
    }

    /// The figure of one result; None when it is not of this kind (a bandwidth figure of a latency
    /// test) or is withheld (a percentile with fewer than 10 samples beyond it).
    pub(crate) fn of(self, f: &Figures) -> Option<f64> {
        match (self, f) {
            (Figure::Bandwidth, Figures::Bandwidth(b)) => Some(b.gbps),
            (Figure::MsgRate, Figures::Bandwidth(b)) => Some(b.mpps),
            (Figure::Median, Figures::Latency(l)) => Some(l.median_us),
            (Figure::P99, Figures::Latency(l)) => l.p99_us,
            (Figure::P999, Figures::Latency(l)) => l.p999_us,
            (Figure::Max, Figures::Latency(l)) => Some(l.max_us),
            _ => None,
        }
    }

    /// Whether a result is of this figure's kind (a latency figure of a latency test), held or not.
    fn applies(self, f: &Figures) -> bool {
        match f {
            Figures::Bandwidth(_) => matches!(self, Figure::Bandwidth | Figure::MsgRate),
            Figures::Latency(_) => !matches!(self, Figure::Bandwidth | Figure::MsgRate),
        }
    }

    /// The percentile a withheld figure is: 99 or 99.9; None for a figure never withheld.
    fn percentile(self) -> Option<f64> {
        match self {
            Figure::P99 => Some(99.0),
            Figure::P999 => Some(99.9),
            _ => None,
        }
    }

    /// The figure of a row: the median over its repetitions when it has them.
    pub(crate) fn of_row(self, row: &ResultRow) -> Option<f64> {
        if row.repeats.is_empty() {
            return self.of(&row.figures);
        }
        let values: Vec<f64> = row.repeats.iter().filter_map(|f| self.of(f)).collect();
        median(&values)
    }

    /// `92.41 Gb/s`, `1.234 µs`.
    fn show(self, v: f64) -> String {
        match self {
            Figure::Bandwidth => fmt_gbps(v),
            Figure::MsgRate => fmt_mpps(v),
            _ => fmt_us(v),
        }
    }
}

/// Whether a ratio is a floor or a ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// `--min-ratio`: at least X.
    Min,
    /// `--max-ratio`: at most X.
    Max,
}

impl Bound {
    fn flag(self) -> &'static str {
        match self {
            Bound::Min => "--min-ratio",
            Bound::Max => "--max-ratio",
        }
    }
}

/// One relative gate: NUM's figure ÷ DEN's figure, held to `limit`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ratio {
    /// The transport on top.
    pub(crate) num: Side,
    /// The transport it is measured against.
    pub(crate) den: Side,
    /// Which figure.
    pub figure: Figure,
    /// The limit, times DEN's figure.
    pub limit: f64,
    /// As typed.
    pub text: String,
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

const RATIO_HINT: &str = "write NUM/DEN:FIGURE=X, e.g. soft-v2/tcp:bw=0.9 or soft-v2/tcp:p50=1.2";

fn parse_side(text: &str, whole: &str) -> Result<Side, String> {
    let t = text.trim();
    let (transport, roce) = t.split_once('-').unwrap_or((t, ""));
    let transport = crate::results::parse_transport(transport).ok_or_else(|| {
        format!(
            "{t:?} in {whole:?} is not a transport; use tcp, soft, soft-v1, soft-v2, verbs, verbs-v1 or verbs-v2"
        )
    })?;
    let roce = match (transport, roce) {
        (_, "") => None,
        (TransportKind::Tcp, _) => {
            return Err(format!(
                "{t:?} in {whole:?}: tcp has no RoCE version; write tcp"
            ));
        }
        (_, "v1") => Some(RoceVersion::V1),
        (_, "v2") => Some(RoceVersion::V2),
        (_, other) => {
            return Err(format!(
                "{other:?} in {whole:?} is not a RoCE version; use v1 or v2 (soft-v2)"
            ));
        }
    };
    Ok(Side {
        transport,
        roce,
        text: t.to_owned(),
    })
}

/// Parses `NUM/DEN:FIGURE=X`, e.g. `soft-v2/tcp:bw=0.9`; X is a positive number, `x` after it is
/// allowed (`0.9x`).
pub(crate) fn parse_ratio(text: &str) -> Result<Ratio, String> {
    let whole = text.trim();
    let (pair_figure, limit) = whole
        .split_once('=')
        .ok_or_else(|| format!("{whole:?} has no =X limit; {RATIO_HINT}"))?;
    let (pair, figure) = pair_figure
        .split_once(':')
        .ok_or_else(|| format!("{whole:?} names no figure (:bw, :p50, ...); {RATIO_HINT}"))?;
    let (num, den) = pair
        .split_once('/')
        .ok_or_else(|| format!("{pair:?} in {whole:?} is not NUM/DEN; {RATIO_HINT}"))?;
    let (num, den) = (parse_side(num, whole)?, parse_side(den, whole)?);
    if num.transport == den.transport
        && (num.roce.is_none() || den.roce.is_none() || num.roce == den.roce)
    {
        return Err(format!(
            "{whole:?} compares {num} with itself; name two transports, e.g. soft-v2/tcp"
        ));
    }
    let figure = FIGURES
        .iter()
        .find(|(name, _)| *name == figure.trim())
        .map(|(_, f)| *f)
        .ok_or_else(|| {
            format!(
                "{:?} in {whole:?} is not a figure; use bw, msg-rate, p50 (median), p99, p999 or max",
                figure.trim()
            )
        })?;
    let number = limit.trim();
    let number = number.strip_suffix('x').unwrap_or(number).trim();
    let limit: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .ok_or_else(|| {
            format!(
                "{:?} in {whole:?} is not a ratio above zero; {RATIO_HINT}",
                limit.trim()
            )
        })?;
    Ok(Ratio {
        num,
        den,
        figure,
        limit,
        text: whole.to_owned(),
    })
}

/// `0.912x`.
fn times(v: f64) -> String {
    format!("{v:.3}x")
}

/// Every check `ratio` makes over `rows`: one per result of NUM with a DEN counterpart at the same test
/// and size (of the same host path when there is one, then from the same file, then the same side),
/// a failure for a result of either side without a counterpart, and a failure when neither side has
/// a result of the figure, so that the gate never passes vacuously.
pub(crate) fn checks(rows: &[ResultRow], ratio: &Ratio, bound: Bound, out: &mut Vec<CheckResult>) {
    let flag = bound.flag();
    let fig = ratio.figure;
    let has = |side: &Side| -> Vec<&ResultRow> {
        rows.iter()
            .filter(|r| side.matches(r) && fig.applies(&r.figures))
            .collect()
    };
    let (nums, dens) = (has(&ratio.num), has(&ratio.den));
    let sign = match bound {
        Bound::Min => ">=",
        Bound::Max => "<=",
    };
    let limit = format!("{sign} {} {}", times(ratio.limit), ratio.den);
    let what = format!("{} / {}", fig.what(), ratio.den);
    let fail = |subject: String, message: String, source: Option<&ResultRow>| CheckResult {
        subject,
        what: what.clone(),
        flag,
        limit: limit.clone(),
        measured: "-".into(),
        verdict: Verdict::Fail,
        message,
        source: source.map(|r| r.source.clone()),
        line: source.and_then(|r| r.line),
    };
    if nums.is_empty() && dens.is_empty() {
        out.push(fail(
            format!("(no {} result)", fig.what()),
            format!(
                "{flag} {ratio} found no {} result of {} or {}; gate a comparison that ran both \
                 (roce_compare), or drop {flag}",
                fig.what(),
                ratio.num,
                ratio.den
            ),
            None,
        ));
        return;
    }
    let same_place = |a: &ResultRow, b: &ResultRow| a.test == b.test && a.size == b.size;
    for n in &nums {
        let den = dens
            .iter()
            .filter(|d| same_place(n, d))
            .min_by_key(|d| (d.path != n.path, d.source != n.source, d.role != n.role));
        let Some(d) = den else {
            out.push(fail(
                n.subject(),
                format!(
                    "{}: no {} result at this test and size to compare with ({flag} {ratio})",
                    n.subject(),
                    ratio.den
                ),
                Some(n),
            ));
            continue;
        };
        let (a, b) = (fig.of_row(n), fig.of_row(d));
        let (Some(a), Some(b)) = (a, b) else {
            // Only a percentile is ever missing from a result of its kind: it was withheld.
            let short = if a.is_none() { n } else { d };
            let why = match (fig.percentile(), short.figures.latency()) {
                (Some(pct), Some(l)) => withheld_because(l.samples, pct),
                _ => format!("{} is missing", fig.what()),
            };
            out.push(fail(
                n.subject(),
                format!(
                    "{}: {} of {} is withheld, not enough samples: {why}; run more iterations \
                     (roce_compare -n) or drop {flag} {ratio}",
                    n.subject(),
                    fig.what(),
                    short.subject()
                ),
                Some(n),
            ));
            continue;
        };
        let r = a / b;
        let measured = format!("{} ({} / {})", times(r), fig.show(a), fig.show(b));
        if !(b > 0.0 && r.is_finite()) {
            out.push(CheckResult {
                measured,
                ..fail(
                    n.subject(),
                    format!(
                        "{}: {}'s {} is {b}, nothing to divide by",
                        n.subject(),
                        ratio.den,
                        fig.what()
                    ),
                    Some(n),
                )
            });
            continue;
        }
        // Inclusive, and immune to float noise.
        let tolerance = 1e-9 * ratio.limit;
        let ok = match bound {
            Bound::Min => r >= ratio.limit - tolerance,
            Bound::Max => r <= ratio.limit + tolerance,
        };
        let message = if ok {
            String::new()
        } else {
            format!(
                "{} {} is {} {}'s ({} against {}), {} {flag} {ratio}",
                n.subject(),
                fig.what(),
                times(r),
                ratio.den,
                fig.show(a),
                fig.show(b),
                if bound == Bound::Min {
                    "below"
                } else {
                    "above"
                }
            )
        };
        out.push(CheckResult {
            subject: n.subject(),
            what: what.clone(),
            flag,
            limit: limit.clone(),
            measured,
            verdict: if ok { Verdict::Pass } else { Verdict::Fail },
            message,
            source: Some(n.source.clone()),
            line: n.line,
        });
    }
    for d in &dens {
        if !nums.iter().any(|n| same_place(n, d)) {
            out.push(fail(
                d.subject(),
                format!(
                    "{}: no {} result at this test and size to compare ({flag} {ratio}); did its run fail?",
                    d.subject(),
                    ratio.num
                ),
                Some(d),
            ));
        }
    }
}

#[cfg(test)]
mod tests;
