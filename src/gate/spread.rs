//! A baseline comparison, one figure at a time, weighed against the spread the baseline measured.
//!
//! A figure's limit is the baseline's median moved by `max(--max-regression, K × spread)`: the spread
//! is how far the baseline's repetitions (`roce_compare --repeat N`) strayed from their median, the
//! largest distance in percent of it, and K is `--spread-factor` (2). A baseline whose repetitions
//! strayed by 4 % lets a result be 8 % worse; one measured once has no spread and keeps the
//! percentage alone. When the result holds repetitions too, a median past the limit fails only when
//! the one-sided Mann-Whitney U test ([`super::rank`]) also puts the repetitions beyond the spread, at
//! p <= `--alpha`. docs/ci-gate.md says why this rule.

use super::rank::{mann_whitney_less, median, repetitions_for, smallest_p};
use super::{CheckResult, Percent, Verdict};
use crate::results::{Figures, ResultRow};
use crate::stats::{samples_needed, thousands};

/// Repetitions a side needs to count as repeated: fewer is a single run, which has no spread.
pub(crate) const MIN_REPEATS: usize = 2;

/// `--spread-factor` when not given: how many times the baseline's spread a result may stray.
pub(crate) const DEFAULT_SPREAD_FACTOR: f64 = 2.0;

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

/// How a baseline comparison is weighed: `--max-regression`, `--spread-factor` and `--alpha`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rule {
    /// How much worse a result may always be.
    pub allowed: Percent,
    /// How many times the baseline's spread a result may stray, when that is more.
    pub factor: f64,
    /// The rank test's level, when both sides hold repetitions.
    pub alpha: f64,
}

/// Whether `row` holds repetitions (a spread), rather than a single run.
pub(crate) fn is_repeated(row: &ResultRow) -> bool {
    row.repeats.len() >= MIN_REPEATS
}

/// The figure's values on `row`: one per repetition, or its one figure when it was measured once.
fn values(row: &ResultRow, c: &Compared) -> Vec<f64> {
    if is_repeated(row) {
        row.repeats.iter().filter_map(c.value).collect()
    } else {
        (c.value)(&row.figures).into_iter().collect()
    }
}

/// How far `values` strayed from their median: the largest distance, in percent of the median.
/// None for fewer than [`MIN_REPEATS`] values or a median that is not above zero.
pub(crate) fn spread_percent(values: &[f64]) -> Option<f64> {
    let med = median(values).filter(|m| *m > 0.0 && m.is_finite())?;
    if values.len() < MIN_REPEATS {
        return None;
    }
    let far = values.iter().map(|v| (v - med).abs()).fold(0.0, f64::max);
    Some(far / med * 100.0)
}

/// The check of `row` against `base` on one figure, under `rule`.
pub(super) fn check(row: &ResultRow, base: &ResultRow, c: &Compared, rule: Rule) -> CheckResult {
    let (now, then) = (values(row, c), values(base, c));
    let (n, m) = (now.len(), then.len());
    let mut out = CheckResult {
        subject: row.subject(),
        what: c.what.to_owned(),
        flag: "--max-regression",
        limit: "-".into(),
        measured: "n/a".into(),
        verdict: Verdict::Skip,
        message: String::new(),
        source: Some(row.source.clone()),
        line: row.line,
    };
    let (Some(med_now), Some(med_then)) = (median(&now), median(&then)) else {
        // Both rows hold the same kind of figures, so a missing one is a withheld percentile.
        let side = if now.is_empty() {
            "the result"
        } else {
            "the baseline"
        };
        out.message = format!(
            "{}: {side} withholds this figure, not enough samples (p99 needs {})",
            row.subject(),
            thousands(samples_needed(99.0))
        );
        return out;
    };
    let (one, many) = (|v: f64| (c.fmt)(v), n >= MIN_REPEATS && m >= MIN_REPEATS);
    if med_then <= 0.0 || !med_then.is_finite() {
        out.measured = one(med_now);
        out.message = format!(
            "{}: the baseline's value is {med_then}, nothing to compare with",
            row.subject()
        );
        return out;
    }
    // The allowance: the percentage, or K times what the baseline's repetitions strayed by.
    let spread = spread_percent(&then);
    let widened = spread
        .map(|s| rule.factor * s)
        .filter(|w| *w > rule.allowed.0);
    let allowance = widened.unwrap_or(rule.allowed.0);
    let (sign, limit) = if c.higher_better {
        (">=", med_then * (1.0 - allowance / 100.0))
    } else {
        ("<=", med_then * (1.0 + allowance / 100.0))
    };
    out.limit = format!("{sign} {}", one(limit));
    let change = (med_now - med_then) / med_then * 100.0;
    let worse = if c.higher_better { -change } else { change };
    // Inclusive, and immune to float noise: 2.1 µs against 2.0 µs is 5.000000000000004 %.
    let past = worse > allowance + 1e-9;
    let why_limit = match (widened, spread) {
        (Some(w), Some(s)) => format!(
            "the baseline's median {} {}{w:.1}%: {} x its repetitions' spread of {s:.1}% \
             (--spread-factor), wider than --max-regression {}",
            one(med_then),
            if c.higher_better { "-" } else { "+" },
            rule.factor,
            rule.allowed
        ),
        _ => format!(
            "the baseline's {} {} {}{}",
            if m >= MIN_REPEATS { "median" } else { "value" },
            one(med_then),
            if c.higher_better { "-" } else { "+" },
            rule.allowed
        ),
    };
    let what_now = if n >= MIN_REPEATS {
        format!("median {} of {n} runs", one(med_now))
    } else {
        one(med_now)
    };
    if !many {
        out.measured = format!("{} ({change:+.1}%)", one(med_now));
        out.verdict = if past { Verdict::Fail } else { Verdict::Pass };
        if past {
            out.message = format!(
                "{} {}: {what_now} is {worse:.1}% worse, past the limit {} ({why_limit})",
                row.subject(),
                c.what,
                one(limit)
            );
        }
        return out;
    }
    // Both repeated: worse means lower bandwidth, or higher latency; test that direction only.
    let test = if c.higher_better {
        mann_whitney_less(&now, &then)
    } else {
        mann_whitney_less(&then, &now)
    };
    let p = test.map_or(1.0, |t| t.p);
    out.limit.push_str(&format!(" or p > {}", rule.alpha));
    out.measured = format!("{} ({change:+.1}%) p={p:.3}, {n}:{m} runs", one(med_now));
    let floor = smallest_p(n, m);
    if floor > rule.alpha {
        out.verdict = Verdict::Fail;
        out.message = format!(
            "{} {}: {n} and {m} repetitions can never show a change at --alpha {} (the \
             smallest p is {floor:.3}); record at least {} per side (roce_compare --repeat {})",
            row.subject(),
            c.what,
            rule.alpha,
            repetitions_for(rule.alpha),
            repetitions_for(rule.alpha)
        );
        return out;
    }
    let regressed = past && p <= rule.alpha;
    out.verdict = if regressed {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    if regressed {
        out.message = format!(
            "{} {}: {what_now} against {} of {m} is {worse:.1}% worse, past the limit {} \
             ({why_limit}), and beyond the run-to-run spread (Mann-Whitney p={p:.4} <= --alpha {})",
            row.subject(),
            c.what,
            one(med_then),
            one(limit),
            rule.alpha
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{fmt_gbps, fmt_us};
    use crate::params::{Metric, RoceVersion, TestKind, TransportKind, Verb};
    use crate::results::{BandwidthFigures, LatencyFigures};

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
            figures: f(median(reps).unwrap_or(0.0)),
            repeats: if reps.len() > 1 {
                reps.iter().map(|&g| f(g)).collect()
            } else {
                Vec::new()
            },
            path: None,
        }
    }

    const BW: Compared = Compared {
        what: "bandwidth vs baseline",
        value: |f| f.bandwidth().map(|b| b.gbps),
        higher_better: true,
        fmt: fmt_gbps,
    };

    const RULE: Rule = Rule {
        allowed: Percent(5.0),
        factor: DEFAULT_SPREAD_FACTOR,
        alpha: 0.01,
    };

    fn verdict(now: &[f64], base: &[f64]) -> CheckResult {
        check(&bw_row(now), &bw_row(base), &BW, RULE)
    }

    #[test]
    fn a_slowdown_beyond_the_spread_fails() {
        // The baseline strayed by 0.9 of its median 20.3 (4.4 %): twice that, 1.8, is the allowance.
        let c = verdict(
            &[10.1, 9.8, 10.4, 9.9, 10.0],
            &[20.3, 19.7, 20.9, 21.2, 19.9],
        );
        assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
        assert_eq!(c.measured, "10.00 Gb/s (-50.7%) p=0.004, 5:5 runs");
        assert_eq!(c.limit, ">= 18.50 Gb/s or p > 0.01");
        assert!(
            c.message.contains(
                "past the limit 18.50 Gb/s (the baseline's median 20.30 Gb/s -8.9%: 2 x its \
                 repetitions' spread of 4.4% (--spread-factor), wider than --max-regression 5%)"
            ),
            "{}",
            c.message
        );
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
        // A tight baseline keeps the percentage: 5 % under the median 20.2.
        assert_eq!(c.limit, ">= 19.19 Gb/s or p > 0.01");
        // Faster is never a regression.
        let c = verdict(
            &[30.0, 31.0, 32.0, 33.0, 34.0],
            &[20.0, 20.1, 20.2, 20.3, 20.4],
        );
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    }

    #[test]
    fn a_single_run_against_repetitions_is_held_to_the_widened_limit() {
        let base = [20.3, 19.7, 20.9, 21.2, 19.9];
        // 18.6 is 8.4 % under the median: past 5 %, inside twice the spread (8.9 %).
        let c = verdict(&[18.6], &base);
        assert_eq!(
            (c.verdict, c.limit.as_str()),
            (Verdict::Pass, ">= 18.50 Gb/s")
        );
        assert_eq!(c.measured, "18.60 Gb/s (-8.4%)");
        let c = verdict(&[18.4], &base);
        assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
        assert_eq!(
            c.message,
            "write_bw soft v2 65536 B bandwidth vs baseline: 18.40 Gb/s is 9.4% worse, past the \
             limit 18.50 Gb/s (the baseline's median 20.30 Gb/s -8.9%: 2 x its repetitions' \
             spread of 4.4% (--spread-factor), wider than --max-regression 5%)"
        );
        // A smaller factor narrows it.
        let narrow = Rule {
            factor: 1.0,
            ..RULE
        };
        let c = check(&bw_row(&[18.6]), &bw_row(&base), &BW, narrow);
        assert_eq!(
            (c.verdict, c.limit.as_str()),
            (Verdict::Fail, ">= 19.29 Gb/s")
        );
    }

    #[test]
    fn the_limit_column_shows_the_limit_itself() {
        // The case: a p99 baseline of 2.263 µs at +5 % is a limit of 2.376 µs.
        let lat = |us: f64| {
            let mut r = bw_row(&[1.0]);
            r.test = TestKind::new(Verb::Write, Metric::Latency);
            r.figures = Figures::Latency(LatencyFigures {
                samples: 100_000,
                median_us: us,
                p99_us: Some(us),
                p999_us: None,
                max_us: us,
            });
            r
        };
        let p99 = Compared {
            what: "p99 vs baseline",
            value: |f| f.latency().and_then(|l| l.p99_us),
            higher_better: false,
            fmt: fmt_us,
        };
        let c = check(&lat(2.3), &lat(2.263), &p99, RULE);
        assert_eq!(
            (c.verdict, c.limit.as_str()),
            (Verdict::Pass, "<= 2.376 µs")
        );
        let c = check(&lat(4.413), &lat(2.263), &p99, RULE);
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(
            c.message,
            "write_lat soft v2 65536 B p99 vs baseline: 4.413 µs is 95.0% worse, past the limit \
             2.376 µs (the baseline's value 2.263 µs +5%)"
        );
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
        assert!(is_repeated(&bw_row(&[1.0, 2.0])));
        assert!(!is_repeated(&bw_row(&[1.0])));
    }

    #[test]
    fn the_spread_is_the_farthest_repetition_from_the_median() {
        assert_eq!(spread_percent(&[10.0]), None);
        assert_eq!(spread_percent(&[9.0, 10.0, 12.0]), Some(20.0));
        assert_eq!(spread_percent(&[0.0, 0.0]), None);
    }
}
