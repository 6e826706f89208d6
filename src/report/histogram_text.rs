//! A latency histogram drawn in the terminal with logarithmic buckets, one line per bucket.
//!
//! Bucket edges follow the preferred-number series (1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8 per decade,
//! coarser when the range is wide), so edges are round numbers a reader can quote, and a long tail gets as
//! much room per decade as the body.

use hdrhistogram::Histogram;
use std::fmt::Write;

/// Preferred-number series, finest first: R10, R5, 1-2-5, decades.
const SERIES: [&[f64]; 4] = [
    &[1.0, 1.25, 1.6, 2.0, 2.5, 3.2, 4.0, 5.0, 6.3, 8.0],
    &[1.0, 1.6, 2.5, 4.0, 6.3],
    &[1.0, 2.0, 5.0],
    &[1.0],
];

/// Most buckets drawn; a wider range switches to a coarser series.
pub(crate) const MAX_BUCKETS: usize = 24;

/// One bucket: samples in `[lo_ns, hi_ns)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bucket {
    /// Lower edge, ns (inclusive).
    pub lo_ns: f64,
    /// Upper edge, ns (exclusive).
    pub hi_ns: f64,
    /// Samples in the bucket.
    pub count: u64,
}

/// The buckets covering min..=max of `h` (empty when `h` is).
pub(crate) fn buckets(h: &Histogram<u64>) -> Vec<Bucket> {
    if h.is_empty() {
        return Vec::new();
    }
    let (lo, hi) = (h.min().max(1) as f64, h.max().max(1) as f64);
    let edges = SERIES
        .iter()
        .map(|s| edges_for(s, lo, hi))
        .find(|e| e.len() - 1 <= MAX_BUCKETS)
        .unwrap_or_else(|| edges_for(SERIES[3], lo, hi));
    let mut out: Vec<Bucket> = edges
        .windows(2)
        .map(|w| Bucket {
            lo_ns: w[0],
            hi_ns: w[1],
            count: 0,
        })
        .collect();
    for v in h.iter_recorded() {
        // The middle of the recorded value's equivalence range: the best estimate of what was measured.
        let x = h.median_equivalent(v.value_iterated_to()).max(1) as f64;
        let i = out
            .iter()
            .position(|b| x < b.hi_ns)
            .unwrap_or(out.len() - 1);
        out[i].count += v.count_at_value();
    }
    out
}

/// Edges m·10^k of `series` from the last one <= lo to the first one > hi.
fn edges_for(series: &[f64], lo: f64, hi: f64) -> Vec<f64> {
    let mut decade = 10f64.powi(lo.log10().floor() as i32);
    let mut edges = Vec::new();
    loop {
        for &m in series {
            let e = round_edge(m * decade);
            if e > hi {
                edges.push(e);
                // The first edge may be below lo by up to a whole step; drop leading edges past lo.
                while edges.len() > 2 && edges[1] <= lo {
                    edges.remove(0);
                }
                return edges;
            }
            edges.push(e);
        }
        decade *= 10.0;
    }
}

/// Removes floating-point noise from m·10^k (1.25 * 1000 = 1250 exactly, 6.3 * 0.1 ...).
fn round_edge(x: f64) -> f64 {
    let mag = 10f64.powi(x.log10().floor() as i32 - 3);
    (x / mag).round() * mag
}

/// `0.8`, `1.25`, `12.5`, `1000`: an edge in µs without trailing zeros.
fn fmt_edge_us(ns: f64) -> String {
    let text = format!("{:.3}", ns / 1000.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// Joins each run of consecutive empty buckets into one, so a sparse tail takes a line, not a screen.
fn merge_empty(bs: Vec<Bucket>) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = Vec::with_capacity(bs.len());
    for b in bs {
        match out.last_mut() {
            Some(last) if last.count == 0 && b.count == 0 => last.hi_ns = b.hi_ns,
            _ => out.push(b),
        }
    }
    out
}

/// Draws `h` in at most `width` columns: `  1.25 -    1.6 µs |██████▌      |  45.21%    4521`.
/// Consecutive empty buckets share one line.
pub(crate) fn render(h: &Histogram<u64>, width: usize) -> String {
    let bs = merge_empty(buckets(h));
    if bs.is_empty() {
        return "  (no samples)\n".into();
    }
    let total: u64 = bs.iter().map(|b| b.count).sum();
    let peak = bs.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let lo_w = bs
        .iter()
        .map(|b| fmt_edge_us(b.lo_ns).len())
        .max()
        .unwrap_or(1);
    let hi_w = bs
        .iter()
        .map(|b| fmt_edge_us(b.hi_ns).len())
        .max()
        .unwrap_or(1);
    let count_w = total.to_string().len();
    // "  lo - hi µs |" + bar + "| " + "100.00%" + " " + count
    let fixed = 2 + lo_w + 3 + hi_w + 4 + 2 + 7 + 1 + count_w;
    let bar_w = width.saturating_sub(fixed).clamp(10, 60);
    let mut out = String::new();
    for b in &bs {
        let eighths = (b.count as f64 / peak as f64 * (bar_w * 8) as f64).round() as usize;
        let bar = bar_of(eighths, b.count > 0);
        let pad = bar_w - bar.chars().count();
        let _ = writeln!(
            out,
            "  {:>lo_w$} - {:>hi_w$} µs |{bar}{}| {:>6.2}% {:>count_w$}",
            fmt_edge_us(b.lo_ns),
            fmt_edge_us(b.hi_ns),
            " ".repeat(pad),
            b.count as f64 * 100.0 / total as f64,
            b.count
        );
    }
    out
}

/// A bar of `eighths`/8 cells; a non-empty bucket always shows at least a sliver.
fn bar_of(eighths: usize, nonempty: bool) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = if nonempty { eighths.max(1) } else { 0 };
    let mut s = "█".repeat(eighths / 8);
    if eighths % 8 > 0 {
        s.push(PARTS[eighths % 8]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_latency_histogram;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = new_latency_histogram();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn buckets_cover_every_sample_with_round_edges() {
        let h = hist(&[1000, 1100, 1300, 1700, 2600, 2600, 9000]);
        let bs = buckets(&h);
        assert_eq!(bs.iter().map(|b| b.count).sum::<u64>(), 7);
        assert_eq!(bs[0].lo_ns, 1000.0);
        assert_eq!(bs[0].hi_ns, 1250.0);
        assert_eq!(bs[0].count, 2);
        assert!(bs.last().unwrap().hi_ns > 9000.0);
        let at = |ns: f64| {
            bs.iter()
                .find(|b| b.lo_ns <= ns && ns < b.hi_ns)
                .unwrap()
                .count
        };
        assert_eq!(at(2600.0), 2);
        assert_eq!(at(1300.0), 1);
        for w in bs.windows(2) {
            assert_eq!(w[0].hi_ns, w[1].lo_ns);
        }
    }

    #[test]
    fn wide_ranges_use_coarser_series() {
        let h = hist(&[500, 5_000_000_000]);
        let bs = buckets(&h);
        assert!(bs.len() <= MAX_BUCKETS, "{}", bs.len());
        assert_eq!(bs.iter().map(|b| b.count).sum::<u64>(), 2);
        assert!(bs[0].lo_ns <= 500.0 && bs.last().unwrap().hi_ns > 4.99e9);
    }

    #[test]
    fn render_fits_the_width_and_shows_percentages() {
        let h = hist(&[1000, 1000, 1000, 2100, 50_000]);
        let text = render(&h, 100);
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "{line}");
        }
        let first = text.lines().next().unwrap();
        assert!(
            first.contains("1 - ") && first.contains("60.00%"),
            "{first}"
        );
        assert!(text.contains("µs |"));
        // The 50 µs outlier has a bar a third as long as the peak's; empty buckets have none.
        let outlier = text
            .lines()
            .find(|l| l.trim_start().starts_with("50 -"))
            .unwrap();
        assert_eq!(outlier.matches('█').count(), 20, "{text}");
        assert!(
            text.lines()
                .filter(|l| l.ends_with("0.00% 0"))
                .all(|l| !l.contains('█'))
        );
        assert_eq!(render(&new_latency_histogram(), 100), "  (no samples)\n");
    }
}
