//! What rank 0 prints: a terminal heatmap per matrix and a summary that names the flagged pairs, the
//! bad hosts, the failed pairs and the lost ranks.

use super::args::Leg;
use super::cell::{Cell, Grid, MatrixMetric, Status, fmt_value};
use super::driver::{Member, MemberState, Phase, VICTIM_TEST};
use super::rules::Rules;
use super::schedule::Pair;
use super::verdict::{Sharing, Verdict};
use crate::results::fabric::PairState;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// How a pair of a matrix ended (or that it did not run); None where the schedule has no pair.
pub(crate) fn cell_state(
    grid: &Grid,
    scheduled: &BTreeSet<(usize, usize)>,
    c: usize,
    s: usize,
) -> Option<PairState> {
    match grid.get(c, s) {
        Some(cell) => Some(cell.status.into()),
        None if scheduled.contains(&(c, s)) => Some(PairState::NotRun),
        None => None,
    }
}

/// Whether every rank took part and every scheduled pair ran and succeeded.
pub(crate) fn all_ok(members: &[Member], phases: &[Phase]) -> bool {
    members.iter().all(|m| m.state == MemberState::Present)
        && phases
            .iter()
            .all(|p| p.grid.iter().all(|(_, c)| c.status == Status::Ok))
}

/// Labels per leg: `soft v2`, `tcp`, as the results name them.
pub(crate) type LegLabels = BTreeMap<Leg, String>;

/// `write_bw over soft v2`.
pub(crate) fn phase_title(p: &Phase, labels: &LegLabels) -> String {
    match labels.get(&p.leg) {
        Some(l) => format!("{} over {l}", p.test.name()),
        None => p.test.name().to_owned(),
    }
}

/// A matrix as text: numbers for up to 16 ranks, one shaded character per cell beyond.
pub(crate) fn heatmap_text(
    p: &Phase,
    metric: MatrixMetric,
    scheduled: &BTreeSet<(usize, usize)>,
    labels: &LegLabels,
    color: bool,
) -> String {
    let n = p.grid.n;
    let flagged: BTreeSet<(usize, usize)> = if metric == MatrixMetric::flagged(p.test) {
        p.flagged.iter().copied().collect()
    } else {
        BTreeSet::new()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — {} [{}], row = client rank, column = server rank",
        phase_title(p, labels),
        metric.title(),
        metric.unit()
    );
    let mark = |c: usize, s: usize, text: String| -> String {
        if color && flagged.contains(&(c, s)) {
            format!("\x1b[1;31m{text}\x1b[0m")
        } else {
            text
        }
    };
    let (lo, hi) = p
        .grid
        .iter()
        .filter_map(|(_, c)| c.value(metric))
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let wide = n <= 16;
    if wide {
        let _ = write!(out, "{:>6}", "");
        for s in 0..n {
            let _ = write!(out, " {s:>8}");
        }
        out.push('\n');
    }
    for c in 0..n {
        let _ = write!(out, "{c:>6}{}", if wide { "" } else { " " });
        for s in 0..n {
            let value = p.grid.get(c, s).and_then(|cell| cell.value(metric));
            let text = match (value, cell_state(&p.grid, scheduled, c, s)) {
                (Some(v), _) if wide => {
                    let star = if flagged.contains(&(c, s)) { "*" } else { " " };
                    format!("{}{star}", fmt_value(v))
                }
                (Some(v), _) => {
                    const SHADES: [char; 5] = ['░', '▒', '▓', '█', '█'];
                    let mut t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
                    if !metric.higher_is_better() {
                        t = 1.0 - t;
                    }
                    if flagged.contains(&(c, s)) {
                        "!".into()
                    } else {
                        SHADES[(t * 3.999) as usize].to_string()
                    }
                }
                (None, Some(PairState::Failed)) => "x".into(),
                (None, Some(PairState::Missing | PairState::NotRun)) => "-".into(),
                (None, _) => ".".into(),
            };
            if wide {
                let _ = write!(out, " {}", mark(c, s, format!("{text:>8}")));
            } else {
                out.push_str(&mark(c, s, text));
            }
        }
        out.push('\n');
    }
    let legend = if wide {
        "* flagged"
    } else {
        "░▒▓█ worse to better, ! flagged"
    };
    let _ = writeln!(
        out,
        "{legend}, x failed, - not run (rank missing or lost), . no pair"
    );
    out
}

/// The summary: per matrix the rule and its outliers (bad hosts, bad pairs, with retests), then the
/// failed pairs and the lost ranks.
pub(crate) fn summary_text(
    members: &[Member],
    phases: &[Phase],
    rules: &Rules,
    labels: &LegLabels,
    scheduled: &BTreeSet<(usize, usize)>,
    sharing: &Sharing,
) -> String {
    let mut out = String::new();
    let present = members
        .iter()
        .filter(|m| m.state == MemberState::Present)
        .count();
    let _ = writeln!(
        out,
        "Summary: {present} of {} ranks took part",
        members.len()
    );
    for w in sharing.warnings() {
        // Continuation lines indented under the first (wrap indents them by two more).
        let text = crate::report::table::wrap(&format!("warning: {w}"), 96);
        for line in text.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let name = |r: usize| members[r].name();
    for p in phases {
        let title = phase_title(p, labels);
        let (mut ok, mut failed, mut missing) = (0, 0, 0);
        for (_, c) in p.grid.iter() {
            match c.status {
                Status::Ok => ok += 1,
                Status::Failed => failed += 1,
                Status::Missing => missing += 1,
            }
        }
        let not_run = scheduled
            .iter()
            .filter(|(c, s)| p.grid.get(*c, *s).is_none())
            .count();
        let _ = write!(out, "  {title}: {ok} pairs ok");
        if failed > 0 {
            let _ = write!(out, ", {failed} failed");
        }
        if missing + not_run > 0 {
            let _ = write!(out, ", {} not run", missing + not_run);
        }
        out.push('\n');
        let Some(limit) = p.limit else { continue };
        let _ = writeln!(out, "    outlier rule: {}", limit.describe(rules));
        if p.flagged.is_empty() {
            let _ = writeln!(out, "    no outliers");
        }
        for h in &p.diagnosis.bad_hosts {
            let (kind, why) = match sharing.held_back(h.rank) {
                Some(why) => ("held back", format!("; no bad-host verdict: {why}")),
                None => ("bad host", String::new()),
            };
            let _ = writeln!(
                out,
                "    {kind}: {} is slow with {} of its {} peers{why}",
                name(h.rank),
                h.flagged_peers,
                h.measured_peers
            );
        }
        for &(c, s) in &p.flagged {
            let v = p
                .grid
                .get(c, s)
                .and_then(|x| x.value(limit.metric))
                .unwrap_or(f64::NAN);
            let retest = p.grid.retests.get(&(c, s));
            let again = match retest {
                Some(r) => match r.value(limit.metric) {
                    Some(rv) => format!(
                        "; alone: {} {}{}",
                        fmt_value(rv),
                        limit.metric.unit(),
                        if limit.breached(rv) {
                            " (confirmed)"
                        } else {
                            ""
                        }
                    ),
                    None => format!("; alone: {}", r.error.as_deref().unwrap_or("no result")),
                },
                None => String::new(),
            };
            let kind = Verdict::of(p, sharing, c, s).describe();
            let _ = writeln!(
                out,
                "    {kind}: {c} -> {s} ({} -> {}): {} {}{again}",
                members[c].host,
                members[s].host,
                fmt_value(v),
                limit.metric.unit()
            );
        }
        for ((c, s), cell) in p.grid.iter().filter(|(_, c)| c.status == Status::Failed) {
            let _ = writeln!(
                out,
                "    failed: {c} -> {s}: {}",
                cell.error.as_deref().unwrap_or("?")
            );
        }
    }
    for m in members {
        match &m.state {
            MemberState::Present => {}
            MemberState::Missing(why) => {
                let _ = writeln!(out, "  missing: {} never joined: {why}", m.name());
            }
            MemberState::Lost(why) => {
                let _ = writeln!(out, "  lost: {}: {why}", m.name());
            }
        }
    }
    out
}

/// The victim's line: `victim, write_bw over tcp: write_lat 3 -> 0 (the receiver) during the incast:
/// median 12.3 us, p99 45.6 us, max 78.9 us`.
fn victim_line(p: &Phase, labels: &LegLabels, v: &Pair, cell: &Cell, receiver: usize) -> String {
    let fig = &cell.figures;
    let us = |x: f32| {
        if x.is_finite() {
            format!("{} us", fmt_value(f64::from(x)))
        } else {
            "withheld (fewer than 10 samples beyond it)".to_owned()
        }
    };
    let what = match (&cell.status, cell.error.as_deref()) {
        (Status::Ok, _) => format!(
            "median {}, p99 {}, max {}",
            us(fig.lat_median_us),
            us(fig.lat_p99_us),
            us(fig.lat_max_us)
        ),
        (_, e) => format!("failed: {}", e.unwrap_or("?")),
    };
    let place = if v.server == receiver {
        " (the receiver)"
    } else {
        ""
    };
    format!(
        "  victim, {}: {} {} -> {}{place} during the incast: {what}\n",
        phase_title(p, labels),
        VICTIM_TEST.name(),
        v.client,
        v.server
    )
}

/// An incast's lines: per bandwidth matrix, each sender's share of the receiver, their sum and
/// Jain's index (`write_bw: 1 -> 0 4.1, 2 -> 0 3.9 Gb/s; sum 8.0 Gb/s, Jain's index 0.999`).
pub(crate) fn incast_text(
    phases: &[Phase],
    labels: &LegLabels,
    receiver: usize,
    senders: &[usize],
) -> String {
    let mut out = String::new();
    for p in phases {
        if let Some((v, cell)) = &p.victim {
            out.push_str(&victim_line(p, labels, v, cell, receiver));
        }
        let metric = MatrixMetric::BwAvg;
        if !MatrixMetric::of(p.test).contains(&metric) {
            continue;
        }
        let values: Vec<Vec<Option<f64>>> = (0..p.grid.n)
            .map(|c| {
                (0..p.grid.n)
                    .map(|s| p.grid.get(c, s).and_then(|x| x.value(metric)))
                    .collect()
            })
            .collect();
        let share = crate::results::fabric::IncastShare::of(&values, receiver, senders);
        let each: Vec<String> = senders
            .iter()
            .map(|&c| match values[c][receiver] {
                Some(v) => format!("{c} -> {receiver} {}", fmt_value(v)),
                None => format!("{c} -> {receiver} none"),
            })
            .collect();
        let jain = share
            .jain
            .map_or("no index (no sender measured)".to_owned(), |j| {
                format!("Jain's index {j:.3}")
            });
        let _ = writeln!(
            out,
            "  incast, {}: {} {}; sum {} {} from {} of {} senders, {jain}",
            phase_title(p, labels),
            each.join(", "),
            metric.unit(),
            fmt_value(share.sum),
            metric.unit(),
            share.measured,
            senders.len()
        );
    }
    out
}
