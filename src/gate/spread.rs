//! A baseline comparison that accounts for run-to-run spread, when both sides hold repetitions.
//!
//! Each side's repetitions (`roce_compare --repeat N`) measure how much the figure moves between runs
//! of unchanged code on that machine. A change fails only when it is both worse than
//! `--max-regression` (medians of the repetitions) and beyond that spread: the one-sided Mann-Whitney
//! U test ([`super::rank`]) puts the current repetitions below the baseline's (above, for latency) at
//! p <= `--alpha`. docs/ci-gate.md says why this test.

use super::rank::{mann_whitney_less, median, repetitions_for, smallest_p};
use super::{CheckResult, Percent, Verdict};
use crate::results::{Figures, ResultRow};

/// Repetitions a side needs before its spread is used (fewer: the plain percentage rule).
pub(crate) const MIN_REPEATS: usize = 2;

/// One figure compared with the baseline.
pub(super) struct Compared {
    /// `bandwidth vs baseline`.
    pub what: &'static str,
    /// The figure of one repetition.
    pub value: fn(&Figures) -> Option<f64>,
    /// Bandwidth: higher is better; latency: lower.
    pub(crate) higher_better: bool,
    /// `92.41 Gb/s`.
    pub fmt: fn(f64) -> String,
}

/// Whether both rows hold enough repetitions to weigh a change against their spread.
pub(super) fn applies(row: &ResultRow, base: &ResultRow) -> bool {
    row.repeats.len() >= MIN_REPEATS && base.repeats.len() >= MIN_REPEATS
}

/// The check of `row` against `base` on one figure, by the rank test at `alpha` and `allowed`.
pub(super) fn check(
    row: &ResultRow,
    base: &ResultRow,
    c: &Compared,
    allowed: Percent,
    alpha: f64,
) -> CheckResult {
    let values = |r: &ResultRow| -> Vec<f64> { r.repeats.iter().filter_map(c.value).collect() };
    let (now, then) = (values(row), values(base));
    let (n, m) = (now.len(), then.len());
    let sign = if c.higher_better { ">=" } else { "<=" };
    let dir = if c.higher_better { "-" } else { "+" };
    let mut out = CheckResult {
        subject: row.subject(),
        what: c.what.to_owned(),
        flag: "--max-regression",
        limit: "-".into(),
        measured: "-".into(),
        verdict: Verdict::Skip,
        message: String::new(),
        source: Some(row.source.clone()),
        line: row.line,
    };
    let (Some(med_now), Some(med_then)) = (median(&now), median(&then)) else {
        out.message = format!("{}: no repetition holds this figure", row.subject());
        return out;
    };
    out.limit = format!("{sign} {} {dir}{allowed} or p > {alpha}", (c.fmt)(med_then));
    if med_then <= 0.0 {
        out.measured = (c.fmt)(med_now);
        out.message = format!(
            "{}: the baseline median is {med_then}, nothing to compare with",
            row.subject()
        );
        return out;
    }
    let change = (med_now - med_then) / med_then * 100.0;
    let worse = if c.higher_better { -change } else { change };
    // Worse means lower bandwidth, or higher latency: test that direction only.
    let test = if c.higher_better {
        mann_whitney_less(&now, &then)
    } else {
        mann_whitney_less(&then, &now)
    };
    let p = test.map_or(1.0, |t| t.p);
    out.measured = format!(
        "{} ({change:+.1}%) p={p:.3}, {n}:{m} runs",
        (c.fmt)(med_now)
    );
    let floor = smallest_p(n, m);
    if floor > alpha {
        out.verdict = Verdict::Fail;
        out.message = format!(
            "{} {}: {n} and {m} repetitions can never show a change at --alpha {alpha} (the \
             smallest p is {floor:.3}); record at least {} per side (roce_compare --repeat {})",
            row.subject(),
            c.what,
            repetitions_for(alpha),
            repetitions_for(alpha)
        );
        return out;
    }
    // Inclusive, and immune to float noise, as the plain percentage rule.
    let regressed = worse > allowed.0 + 1e-9 && p <= alpha;
    out.verdict = if regressed {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    if regressed {
        out.message = format!(
            "{} {}: median {} of {n} runs against {} of {m} is {worse:.1}% worse, more than \
             --max-regression {allowed}, and beyond the run-to-run spread (Mann-Whitney p={p:.4} \
             <= --alpha {alpha})",
            row.subject(),
            c.what,
            (c.fmt)(med_now),
            (c.fmt)(med_then)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::fmt_gbps;
    use crate::params::{Metric, RoceVersion, TestKind, TransportKind, Verb};
    use crate::results::BandwidthFigures;

    fn bw_row(reps: &[f64]) -> ResultRow {
        let f = |gbps| Figures::Bandwidth(BandwidthFigures { gbps, mpps: 1.0 });
        ResultRow {
            source: "now.json".into(),
            line: None,
            label: None,
            test: TestKind::new(Verb::Write, Metric::Bandwidth),
            transport: TransportKind::Soft,
            roce: Some(RoceVersion::V2),
            role: None,
            size: 65536,
            figures: f(reps.first().copied().unwrap_or(0.0)),
            repeats: reps.iter().map(|&g| f(g)).collect(),
            path: None,
        }
    }

    const BW: Compared = Compared {
        what: "bandwidth vs baseline",
        value: |f| f.bandwidth().map(|b| b.gbps),
        higher_better: true,
        fmt: fmt_gbps,
    };

    fn verdict(now: &[f64], base: &[f64]) -> CheckResult {
        check(&bw_row(now), &bw_row(base), &BW, Percent(5.0), 0.01)
    }

    #[test]
    fn a_slowdown_beyond_the_spread_fails() {
        let c = verdict(
            &[10.1, 9.8, 10.4, 9.9, 10.0],
            &[20.3, 19.7, 20.9, 21.2, 19.9],
        );
        assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
        assert_eq!(c.measured, "10.00 Gb/s (-50.7%) p=0.004, 5:5 runs");
        assert_eq!(c.limit, ">= 20.30 Gb/s -5% or p > 0.01");
        assert!(
            c.message
                .contains("beyond the run-to-run spread (Mann-Whitney p=0.0040 <= --alpha 0.01)"),
            "{}",
            c.message
        );
    }

    #[test]
    fn a_change_within_the_spread_passes_even_past_the_percentage() {
        // Medians 10 % apart, but the runs interleave: noise, not a regression.
        let c = verdict(
            &[18.0, 23.0, 16.5, 21.0, 17.0],
            &[20.0, 24.0, 17.5, 22.0, 19.0],
        );
        assert!(c.measured.contains("(-10.0%)"), "{}", c.measured);
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        // Separated, but by less than --max-regression: not worth failing a build.
        let c = verdict(
            &[19.5, 19.6, 19.7, 19.8, 19.9],
            &[20.0, 20.1, 20.2, 20.3, 20.4],
        );
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        // Faster is never a regression.
        let c = verdict(
            &[30.0, 31.0, 32.0, 33.0, 34.0],
            &[20.0, 20.1, 20.2, 20.3, 20.4],
        );
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    }

    #[test]
    fn too_few_repetitions_to_ever_fail_is_a_failure_that_says_how_many() {
        let c = verdict(&[10.0, 10.1, 10.2], &[20.0, 20.1, 20.2]);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(
            c.message.contains("3 and 3 repetitions can never show a change at --alpha 0.01 (the smallest p is 0.050); record at least 5 per side (roce_compare --repeat 5)"),
            "{}",
            c.message
        );
        assert!(applies(&bw_row(&[1.0, 2.0]), &bw_row(&[1.0, 2.0])));
        assert!(!applies(&bw_row(&[1.0]), &bw_row(&[1.0, 2.0, 3.0])));
    }
}
