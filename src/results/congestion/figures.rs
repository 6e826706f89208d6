//! The arithmetic of a congestion study, pure: rates from cumulative byte series, time to converge,
//! goodput against the bottleneck, and steady-state fairness (Jain's index is `stats::jain_index`).
//!
//! **Time to converge** (the rule the document and docs/congestion.md state): rates are taken over a
//! sliding window of `window_ms` ending at each sample; the fair share in a window is the flows'
//! total over it ÷ N (so it measures how evenly the flows share what got through, not how much got
//! through: that is the goodput fraction). A window is *fair* when every flow's rate is within
//! ±`band` of that share. The flows converged at the end of the first fair window from which every
//! later window is fair too, provided that run of fair windows lasts at least one window more (a
//! run that is fair only at its very end has not shown it settled); otherwise they never did.

use super::Convergence;
/// Jain's index over the flows' goodputs (`stats`' one formula), for the document's builders.
pub(crate) use crate::stats::jain_index;

/// Gb/s from `bytes` over `ms` milliseconds (0 over no time).
pub(crate) fn gbps(bytes: u64, ms: f64) -> f64 {
    if ms > 0.0 {
        bytes as f64 * 8.0 / (ms * 1e6)
    } else {
        0.0
    }
}

/// Goodput over each interval of a cumulative series: sample k's rate covers (t[k-1], t[k]], the first
/// from 0 (bytes 0) when `t_ms[0]` is after 0. A counter that went back (a restarted peer) counts as
/// nothing delivered, never negative.
pub(crate) fn interval_rates(t_ms: &[f64], cumulative: &[u64]) -> Vec<f64> {
    let mut prev = (0.0, 0u64);
    t_ms.iter()
        .zip(cumulative)
        .map(|(&t, &b)| {
            let rate = gbps(b.saturating_sub(prev.1), t - prev.0);
            prev = (t, b);
            rate
        })
        .collect()
}

/// Each flow's rate over the window of `window_ms` ending at sample k, for every k whose window lies
/// within the series (its start at or after 0): `(k, rates per flow)`. `cumulative[flow][sample]`.
pub(crate) fn window_rates(
    t_ms: &[f64],
    cumulative: &[Vec<u64>],
    window_ms: f64,
) -> Vec<(usize, Vec<f64>)> {
    // The sample at the window's start: the latest at or before t - window (the origin, 0 ms with 0
    // bytes, before the first sample).
    let at = |k: Option<usize>, flow: &Vec<u64>| match k {
        Some(i) => (t_ms[i], flow[i]),
        None => (0.0, 0),
    };
    (0..t_ms.len())
        .filter_map(|k| {
            let start = t_ms[k] - window_ms;
            if start < -1e-9 {
                return None;
            }
            let from = t_ms[..k].iter().rposition(|&t| t <= start + 1e-9);
            let rates = cumulative
                .iter()
                .map(|flow| {
                    let (t0, b0) = at(from, flow);
                    gbps(flow[k].saturating_sub(b0), t_ms[k] - t0)
                })
                .collect();
            Some((k, rates))
        })
        .collect()
}

/// Whether every rate is within ±`band` of their mean (the fair share); the worst flow and its rate ÷
/// the share otherwise.
fn fair(rates: &[f64], band: f64) -> Result<(), (usize, f64)> {
    let share = rates.iter().sum::<f64>() / rates.len() as f64;
    if share <= 0.0 {
        return Err((0, 0.0));
    }
    let (worst, dev) = rates
        .iter()
        .map(|r| (r / share - 1.0).abs())
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("at least one flow");
    if dev <= band + 1e-12 {
        Ok(())
    } else {
        Err((worst, rates[worst] / share))
    }
}

/// Time to converge (the module's rule) over `cumulative[flow][sample]` at `t_ms`; null with the
/// reason when the flows never converged, or the series cannot say.
pub(crate) fn convergence(
    t_ms: &[f64],
    cumulative: &[Vec<u64>],
    window_ms: f64,
    band: f64,
) -> Convergence {
    let never = |reason: String| Convergence {
        time_s: None,
        reason: Some(reason),
    };
    if cumulative.len() < 2 {
        return never("one flow: nothing to share".into());
    }
    if cumulative.iter().any(|f| f.len() != t_ms.len()) {
        return never("the flows' series have different lengths".into());
    }
    let windows = window_rates(t_ms, cumulative, window_ms);
    let Some((_, last)) = windows.last() else {
        return never(format!(
            "the series is shorter than one {window_ms} ms window"
        ));
    };
    if let Err((flow, ratio)) = fair(last, band) {
        return never(if ratio == 0.0 {
            "nothing was delivered in the last window".into()
        } else {
            format!(
                "never: in the last {window_ms} ms window flow {flow} ran at {ratio:.2}x the fair \
                 share (±{:.0}% needed)",
                band * 100.0
            )
        });
    }
    // The first window of the fair run that reaches the end.
    let first = windows
        .iter()
        .rposition(|(_, rates)| fair(rates, band).is_err())
        .map_or(0, |i| i + 1);
    let k = windows[first].0;
    let settled = t_ms[t_ms.len() - 1] - t_ms[k];
    if settled + 1e-9 < window_ms {
        return never(format!(
            "never settled: fair only over the last {settled:.0} ms, less than one {window_ms} ms \
             window"
        ));
    }
    Convergence {
        time_s: Some(t_ms[k] / 1000.0),
        reason: None,
    }
}

/// The goodput as a fraction of the bottleneck's rate; None without a rate.
pub(crate) fn goodput_fraction(goodput_gbps: f64, bottleneck_gbps: f64) -> Option<f64> {
    (bottleneck_gbps > 0.0).then(|| goodput_gbps / bottleneck_gbps)
}

/// Jain's index over each flow's goodput from `from_ms` to the series' end (the sample at or just
/// before `from_ms` starts it); None when less than one interval remains.
pub(crate) fn jain_from(t_ms: &[f64], cumulative: &[Vec<u64>], from_ms: f64) -> Option<f64> {
    let end = t_ms.len().checked_sub(1)?;
    let start = t_ms.iter().rposition(|&t| t <= from_ms + 1e-9);
    if start == Some(end) {
        return None;
    }
    let origin = |flow: &Vec<u64>| match start {
        Some(i) => (t_ms[i], flow[i]),
        None => (0.0, 0),
    };
    let rates: Vec<f64> = cumulative
        .iter()
        .map(|flow| {
            let (t0, b0) = origin(flow);
            gbps(flow[end].saturating_sub(b0), t_ms[end] - t0)
        })
        .collect();
    jain_index(&rates)
}

/// Steady state: from convergence when the flows converged, else the second half of the series.
/// (Jain's index there, where it starts in s, and which basis it took.)
pub(crate) fn steady_jain(
    t_ms: &[f64],
    cumulative: &[Vec<u64>],
    converged: &Convergence,
) -> (Option<f64>, Option<f64>, String) {
    let Some(&end) = t_ms.last() else {
        return (None, None, "no series".into());
    };
    let (from_ms, basis) = match converged.time_s {
        Some(s) => (s * 1000.0, "converged"),
        None => (end / 2.0, "second half (never converged)"),
    };
    match jain_from(t_ms, cumulative, from_ms) {
        Some(j) => (Some(j), Some(from_ms / 1000.0), basis.into()),
        None => (
            None,
            None,
            format!("{basis}: less than one interval after it"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn interval_rates_from_a_cumulative_series() {
        // 125,000 bytes in 1 ms is 1 Gb/s.
        let t = [1.0, 2.0, 4.0];
        let b = [125_000, 375_000, 375_000];
        assert_eq!(interval_rates(&t, &b), vec![1.0, 2.0, 0.0]);
        // A series that starts at 0 ms: its first interval is empty.
        assert_eq!(interval_rates(&[0.0, 1.0], &[0, 250_000]), vec![0.0, 2.0]);
        // A counter that went back delivers nothing in that interval, and counts from its new value.
        assert_eq!(
            interval_rates(&[1.0, 2.0, 3.0], &[250_000, 125_000, 250_000]),
            vec![2.0, 0.0, 1.0]
        );
    }

    #[test]
    fn window_rates_slide_over_the_samples() {
        let t = [1.0, 2.0, 3.0, 4.0];
        let flows = vec![
            vec![125_000, 250_000, 375_000, 500_000], // 1 Gb/s throughout
            vec![0, 0, 250_000, 500_000],             // nothing, then 2 Gb/s
        ];
        let w = window_rates(&t, &flows, 2.0);
        // Windows of 2 ms end at samples 1 (from the origin), 2 and 3.
        assert_eq!(
            w,
            vec![
                (1, vec![1.0, 0.0]),
                (2, vec![1.0, 1.0]),
                (3, vec![1.0, 2.0])
            ]
        );
    }

    #[test]
    fn time_to_converge_is_the_start_of_the_fair_run_that_reaches_the_end() {
        // Two flows, 10 ms samples, 20 ms windows. Flow 1 starts late and catches up: from 40 ms
        // on, both deliver 1.25 MB per 10 ms (1 Gb/s).
        let t: Vec<f64> = (1..=8).map(|k| k as f64 * 10.0).collect();
        let a: Vec<u64> = (1..=8).map(|k| k * 1_250_000).collect();
        let b: Vec<u64> = vec![
            0, 0, 1_250_000, 2_500_000, 3_750_000, 5_000_000, 6_250_000, 7_500_000,
        ];
        // Windows end at 20..80 ms. The window (20, 40] has a: 2.5 MB, b: 2.5 MB: fair. (10, 30]
        // has a 2.5 MB, b 1.25 MB: not. So the fair run starts at the window ending at 40 ms.
        let c = convergence(&t, &[a.clone(), b.clone()], 20.0, 0.1);
        assert_eq!(c.time_s, Some(0.04), "{c:?}");
        assert_eq!(c.reason, None);
        // Steady state from there: both equal.
        let (j, from, basis) = steady_jain(&t, &[a.clone(), b.clone()], &c);
        assert_eq!(
            (j, from, basis.as_str()),
            (Some(1.0), Some(0.04), "converged")
        );
        // Whole-run fairness is lower: a 10 MB, b 7.5 MB: (17.5)^2 / (2 * (100 + 56.25)) = 0.98.
        assert!(close(
            jain_from(&t, &[a, b], 0.0).unwrap(),
            17.5 * 17.5 / (2.0 * 156.25)
        ));
    }

    #[test]
    fn flows_that_never_settle_have_no_time_and_say_why() {
        let t: Vec<f64> = (1..=6).map(|k| k as f64 * 10.0).collect();
        let a: Vec<u64> = (1..=6).map(|k| k * 2_000_000).collect();
        let b: Vec<u64> = (1..=6).map(|k| k * 1_000_000).collect();
        let c = convergence(&t, &[a.clone(), b.clone()], 20.0, 0.1);
        assert_eq!(c.time_s, None);
        let reason = c.reason.clone().unwrap();
        assert!(
            reason.contains("flow 1 ran at 0.67x the fair share"),
            "{reason}"
        );
        // Steady state falls back to the second half: from 30 ms, a 6 MB, b 3 MB: 81 / (2 * 45).
        let (j, from, basis) = steady_jain(&t, &[a, b], &c);
        assert!(close(j.unwrap(), 0.9), "{j:?}");
        assert_eq!(from, Some(0.03));
        assert_eq!(basis, "second half (never converged)");
    }

    #[test]
    fn flows_fair_only_at_the_very_end_have_not_settled() {
        // Two flows, 10 ms samples, 20 ms windows: unequal until 50 ms, then equal for 10 ms only.
        let t: Vec<f64> = (1..=6).map(|k| k as f64 * 10.0).collect();
        let a: Vec<u64> = [2, 4, 6, 8, 10, 11].iter().map(|m| m * 1_000_000).collect();
        let b: Vec<u64> = [0, 0, 0, 0, 10, 11].iter().map(|m| m * 1_000_000).collect();
        let c = convergence(&t, &[a, b], 20.0, 0.1);
        assert_eq!(c.time_s, None);
        assert!(c.reason.unwrap().starts_with("never"));
    }

    #[test]
    fn a_series_that_cannot_say_is_null_with_its_reason() {
        let t = [10.0];
        let c = convergence(&t, &[vec![1], vec![1]], 20.0, 0.1);
        assert!(c.reason.unwrap().contains("shorter than one 20 ms window"));
        let c = convergence(&t, &[vec![1]], 20.0, 0.1);
        assert_eq!(c.reason.as_deref(), Some("one flow: nothing to share"));
        let c = convergence(&[10.0, 20.0], &[vec![0, 0], vec![0, 0]], 20.0, 0.1);
        assert_eq!(
            c.reason.as_deref(),
            Some("nothing was delivered in the last window")
        );
        assert_eq!(steady_jain(&[], &[], &c).0, None);
    }

    #[test]
    fn goodput_against_the_bottleneck() {
        assert_eq!(goodput_fraction(1.8, 2.0), Some(0.9));
        assert_eq!(goodput_fraction(1.8, 0.0), None);
        assert!(close(gbps(250_000_000, 1000.0), 2.0));
    }
}
