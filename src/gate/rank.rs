//! The Mann-Whitney U rank test, one-sided, exact for the small samples repetitions give.
//!
//! A baseline with repetitions is judged against the run-to-run spread they measure: a change is a
//! regression only when the current repetitions rank below (or above, for latency) the baseline's more
//! consistently than chance would make them. Ranks need no assumption about the shape of the spread
//! (benchmark figures are skewed, and a busy neighbour makes outliers), and the test's exact
//! distribution holds at five repetitions, where a bootstrap or a normal approximation does not.

/// The outcome of a one-sided test that one sample tends to be smaller than another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RankTest {
    /// Mann-Whitney U of the first sample: pairs in which it is the larger, ties counting one half.
    pub u: f64,
    /// Probability of a U this small or smaller when both samples come from one distribution.
    pub p: f64,
    /// Whether `p` is exact (the permutation distribution) rather than the normal approximation.
    pub exact: bool,
}

/// Pooled sample sizes up to which the permutation distribution is computed exactly.
const EXACT_UP_TO: usize = 50;

/// One-sided Mann-Whitney U test that `x` tends to be smaller than `y`. Ties get midranks and the
/// exact distribution accounts for them. None when a sample is empty or holds a non-finite value.
pub(crate) fn mann_whitney_less(x: &[f64], y: &[f64]) -> Option<RankTest> {
    let (n, m) = (x.len(), y.len());
    if n == 0 || m == 0 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    // Doubled midranks keep everything in integers: a tie over ranks a..=b has midrank (a + b) / 2.
    let mut pooled: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = n + m;
    let mut ranks2 = vec![0usize; total];
    let mut ties: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < total {
        let mut j = i;
        while j + 1 < total && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        for r in &mut ranks2[i..=j] {
            *r = (i + 1) + (j + 1);
        }
        ties.push(j - i + 1);
        i = j + 1;
    }
    let w2: usize = (0..total).filter(|&k| pooled[k].1).map(|k| ranks2[k]).sum();
    let u = w2 as f64 / 2.0 - (n * (n + 1)) as f64 / 2.0;
    if total <= EXACT_UP_TO {
        return Some(RankTest {
            u,
            p: exact_lower_tail(&ranks2, n, w2),
            exact: true,
        });
    }
    let (nf, mf, tf) = (n as f64, m as f64, total as f64);
    let tie_sum: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let var = nf * mf / 12.0 * ((tf + 1.0) - tie_sum / (tf * (tf - 1.0)));
    let p = if var <= 0.0 {
        1.0
    } else {
        // Continuity correction: U moves in steps of one half or one.
        normal_cdf((u + 0.5 - nf * mf / 2.0) / var.sqrt())
    };
    Some(RankTest {
        u,
        p: p.clamp(0.0, 1.0),
        exact: false,
    })
}

/// P(sum of `n` of the doubled ranks `ranks2`, drawn without replacement, <= `w2`): the exact
/// permutation distribution of the rank sum, ties included, by counting subsets per size and sum.
fn exact_lower_tail(ranks2: &[usize], n: usize, w2: usize) -> f64 {
    let max_sum: usize = ranks2.iter().sum();
    // ways[k][s]: subsets of k of the ranks seen so far with doubled rank sum s.
    let mut ways = vec![vec![0f64; max_sum + 1]; n + 1];
    ways[0][0] = 1.0;
    for &r in ranks2 {
        for k in (1..=n).rev() {
            let (lower, upper) = ways.split_at_mut(k);
            let (from, to) = (&lower[k - 1], &mut upper[0]);
            for s in (r..=max_sum).rev() {
                to[s] += from[s - r];
            }
        }
    }
    let all: f64 = ways[n].iter().sum();
    let below: f64 = ways[n][..=w2.min(max_sum)].iter().sum();
    (below / all).clamp(0.0, 1.0)
}

/// The smallest one-sided p-value the exact test can give samples of `n` and `m` without ties: one
/// arrangement in C(n + m, n), when they do not overlap at all.
pub(crate) fn smallest_p(n: usize, m: usize) -> f64 {
    let (small, total) = (n.min(m), n + m);
    let mut c = 1f64;
    for i in 0..small {
        c = c * (total - i) as f64 / (i + 1) as f64;
    }
    1.0 / c
}

/// The fewest repetitions per side (the same on both) whose smallest p-value reaches `alpha`.
pub(crate) fn repetitions_for(alpha: f64) -> usize {
    (1..=64).find(|&k| smallest_p(k, k) <= alpha).unwrap_or(64)
}

/// The median of `values`: one rule for the gates and the reports (`stats::median`).
pub(crate) use crate::stats::median;

/// The standard normal distribution function.
fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// The complementary error function, to a relative error under 1.2e-7 (Numerical Recipes' erfcc,
/// a Chebyshev fit).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 + 1e-6 * b.abs()
    }

    #[test]
    fn clearly_separated_samples_give_the_smallest_p() {
        // Five bandwidths after a 2x slowdown against five before: every one lower.
        let now = [10.1, 9.8, 10.4, 9.9, 10.0];
        let base = [20.3, 19.7, 20.9, 21.2, 19.9];
        let t = mann_whitney_less(&now, &base).unwrap();
        assert_eq!(t.u, 0.0);
        assert!(close(t.p, 1.0 / 252.0), "{t:?}");
        assert!(t.exact);
        assert!(t.p <= 0.01, "flagged at alpha 0.01");
        // The other way round is as unlikely to be smaller as can be.
        let back = mann_whitney_less(&base, &now).unwrap();
        assert_eq!(back.u, 25.0);
        assert!(close(back.p, 1.0), "{back:?}");
        assert!(close(smallest_p(5, 5), 1.0 / 252.0));
    }

    #[test]
    fn overlapping_samples_are_not_flagged() {
        // Interleaved: the run-to-run spread covers the difference.
        let now = [1.0, 3.0, 5.0, 7.0, 9.0];
        let base = [2.0, 4.0, 6.0, 8.0, 10.0];
        let t = mann_whitney_less(&now, &base).unwrap();
        assert_eq!(t.u, 10.0);
        // P(U <= 10) for n = m = 5: 87 of the 252 arrangements.
        assert!(close(t.p, 87.0 / 252.0), "{t:?}");
        assert!(t.p > 0.05);
        // A 10 % drop inside a 20 % spread is not flagged either.
        let now = [90.0, 110.0, 95.0, 104.0, 99.0];
        let base = [100.0, 120.0, 91.0, 112.0, 97.0];
        assert!(mann_whitney_less(&now, &base).unwrap().p > 0.1);
    }

    #[test]
    fn the_exact_distribution_matches_the_table() {
        // n = m = 5: P(U <= u) for u = 0..4 is 1, 2, 4, 7, 12 of 252.
        let base = [10.0, 11.0, 12.0, 13.0, 14.0];
        for (u, count) in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 7.0), (4, 12.0)] {
            // The largest of `now` moves up past u of the baseline.
            let mut now = [1.0, 2.0, 3.0, 4.0, 5.0];
            now[4] = if u == 0 { 5.0 } else { 9.5 + u as f64 };
            let t = mann_whitney_less(&now, &base).unwrap();
            assert_eq!(t.u, u as f64, "{now:?}");
            assert!(close(t.p, count / 252.0), "u = {u}: {t:?}");
        }
        // Unequal sizes: 3 against 4, separated: 1 of C(7, 3) = 35.
        let t = mann_whitney_less(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0, 7.0]).unwrap();
        assert!(close(t.p, 1.0 / 35.0), "{t:?}");
    }

    #[test]
    fn ties_count_one_half_and_identical_samples_are_never_flagged() {
        let t = mann_whitney_less(&[5.0, 5.0, 5.0], &[5.0, 5.0, 5.0]).unwrap();
        assert_eq!(t.u, 4.5);
        assert!(close(t.p, 1.0), "{t:?}");
        // One tie across the samples: U = 0.5; the two arrangements with the lowest rank sum (either
        // 6 with the four smallest) are as extreme.
        let t = mann_whitney_less(&[1.0, 2.0, 3.0, 4.0, 6.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert_eq!(t.u, 0.5);
        assert!(close(t.p, 2.0 / 252.0), "{t:?}");
        assert_eq!(mann_whitney_less(&[], &[1.0]), None);
        assert_eq!(mann_whitney_less(&[f64::NAN], &[1.0]), None);
    }

    #[test]
    fn large_samples_use_the_normal_approximation_close_to_the_exact_one() {
        // 25 against 25 (exact) and 26 against 26 (approximate), the same interleaving pattern.
        let pattern = |k: usize| -> (Vec<f64>, Vec<f64>) {
            let x = (0..k).map(|i| (2 * i) as f64 + if i % 3 == 0 { 3.5 } else { 0.0 });
            let y = (0..k).map(|i| (2 * i + 1) as f64);
            (x.collect(), y.collect())
        };
        let (x, y) = pattern(25);
        let exact = mann_whitney_less(&x, &y).unwrap();
        assert!(exact.exact);
        let (x, y) = pattern(26);
        let approx = mann_whitney_less(&x, &y).unwrap();
        assert!(!approx.exact);
        assert!((exact.p - approx.p).abs() < 0.1, "{exact:?} {approx:?}");
        let far = mann_whitney_less(&vec![1.0; 30], &vec![2.0; 30]).unwrap();
        assert!(far.p < 1e-9, "{far:?}");
        assert!(close(normal_cdf(0.0), 0.5));
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }

    #[test]
    fn repetitions_needed_and_medians() {
        assert_eq!(repetitions_for(0.05), 3);
        assert_eq!(repetitions_for(0.01), 5);
        assert!(close(smallest_p(3, 3), 0.05));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
