//! Summaries, percentiles and perftest's BW peak against hand-computed values.

use super::*;
use proptest::prelude::*;

fn hist_of(values_ns: impl IntoIterator<Item = u64>) -> Histogram<u64> {
    let mut h = new_latency_histogram();
    for v in values_ns {
        h.record(v).unwrap();
    }
    h
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

#[test]
fn uniform_1_to_1000_us() {
    let h = hist_of((1..=1000u64).map(|us| us * 1000));
    let s = LatencyStats::from_histogram(&h, &[90.0, 99.0, 99.9, 99.99]);
    assert_eq!(s.samples, 1000);
    assert!(close(s.min_us, 1.0, 1e-3), "min {}", s.min_us);
    assert!(close(s.max_us, 1000.0, 1e-3), "max {}", s.max_us);
    assert!(close(s.median_us, 500.0, 1e-3), "median {}", s.median_us);
    assert!(close(s.mean_us, 500.5, 1e-3), "mean {}", s.mean_us);
    // Population stdev of 1..=1000 is sqrt((1000^2 - 1) / 12) = 288.675...
    assert!(close(s.stdev_us, 288.675, 2e-3), "stdev {}", s.stdev_us);
    let labels: Vec<String> = s.percentiles.iter().map(Percentile::label).collect();
    assert_eq!(labels, ["p90", "p99", "p99.9", "p99.99"]);
    assert!(close(s.get(90.0).unwrap(), 900.0, 1e-3));
    assert!(close(s.get(99.0).unwrap(), 990.0, 1e-3));
    // One sample beyond p99.9, none beyond p99.99: withheld.
    assert_eq!((s.get(99.9), s.get(99.99)), (None, None));
    assert_eq!(s.get(50.0), None);
    // The rank arithmetic itself, below the rule: the 999th sample, not the 1000th.
    assert!(close(value_at_percentile(&h, 99.9) as f64, 999_000.0, 1e-3));
    assert!(close(
        value_at_percentile(&h, 99.99) as f64,
        1_000_000.0,
        1e-3
    ));
}

#[test]
fn constant_samples_have_zero_stdev() {
    let h = hist_of(std::iter::repeat_n(1234, 500));
    let s = LatencyStats::from_histogram(&h, &[99.0]);
    assert_eq!(s.samples, 500);
    assert_eq!(s.stdev_us, 0.0);
    assert!(close(s.min_us, 1.234, 1e-3) && close(s.max_us, 1.234, 1e-3));
    assert_eq!(s.median_us, s.max_us);
}

#[test]
fn true_max_is_kept() {
    // perftest would hide the two largest samples; we must not.
    let mut values: Vec<u64> = vec![1000; 998];
    values.extend([50_000, 90_000]);
    let s = LatencyStats::from_histogram(&hist_of(values), &[]);
    assert!(close(s.max_us, 90.0, 1e-3), "max {}", s.max_us);
    // A real stdev: one 89 µs outlier in 1000 samples is far from zero.
    assert!(s.stdev_us > 2.0, "stdev {}", s.stdev_us);
}

#[test]
fn empty_histogram_is_all_zero() {
    let s = LatencyStats::from_histogram(&new_latency_histogram(), &[99.0, f64::NAN, 150.0]);
    assert_eq!(s.samples, 0);
    assert_eq!(
        (s.min_us, s.max_us, s.mean_us, s.stdev_us),
        (0.0, 0.0, 0.0, 0.0)
    );
    assert_eq!(s.percentiles.len(), 2);
    assert!(
        s.percentiles.iter().all(|p| p.us.is_none()),
        "no sample: withheld"
    );
}

#[test]
fn out_of_range_percentiles_are_clamped() {
    let h = hist_of((0..20).map(|i| if i < 10 { 1000 } else { 2000 }));
    let s = LatencyStats::from_histogram(&h, &[-5.0, 50.0, 250.0]);
    assert!(close(s.percentiles[0].us.unwrap(), 1.0, 1e-3));
    assert!(close(s.percentiles[1].us.unwrap(), 1.0, 1e-3));
    // Clamped to p100: no sample ever lies beyond it.
    assert_eq!(s.percentiles[2].us, None);
}

#[test]
fn samples_needed_puts_ten_beyond_the_percentile() {
    for (pct, n) in [
        (0.0, 10),
        (50.0, 20),
        (90.0, 100),
        (99.0, 1_000),
        (99.9, 10_000),
        (99.99, 100_000),
        (99.999, 1_000_000),
        (95.0, 200),
        (99.5, 2_000),
        // 10 / (1/3) = 30, but 10 / 0.3333 = 30.003: one more sample.
        (66.67, 31),
    ] {
        assert_eq!(samples_needed(pct), n, "p{pct}");
        assert!(
            percentile_holds(n, pct) && !percentile_holds(n - 1, pct),
            "p{pct}"
        );
    }
    assert_eq!(samples_needed(100.0), u64::MAX);
    assert_eq!(withheld_reason(99.9), "needs 10,000 samples");
    assert_eq!(
        withheld_because(1000, 99.9),
        "p99.9 needs 10,000 samples (10 beyond it); this result has 1,000"
    );
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
}

#[test]
fn percentiles_are_withheld_below_ten_samples_beyond_them() {
    let pcts = [90.0, 99.0, 99.9, 99.99];
    let held = |n: u64| -> Vec<bool> {
        let s = LatencyStats::from_histogram(&hist_of((1..=n).map(|v| v * 10)), &pcts);
        s.percentiles.iter().map(|p| p.us.is_some()).collect()
    };
    assert_eq!(held(99), [false, false, false, false]);
    assert_eq!(held(100), [true, false, false, false]);
    assert_eq!(held(999), [true, false, false, false]);
    assert_eq!(held(1000), [true, true, false, false]);
    assert_eq!(held(10_000), [true, true, true, false]);
    assert_eq!(held(100_000), [true, true, true, true]);
    // get() and at() agree: None for a withheld percentile, whatever the histogram holds.
    let h = hist_of((1..=1000).map(|v| v * 10));
    let s = LatencyStats::from_histogram(&h, &pcts);
    assert_eq!(s.get(99.9), None);
    assert_eq!(s.at(&h, 99.9), None);
    assert!(s.at(&h, 99.0).is_some());
    // Asked for p90 only, at() still gives p99 from the histogram.
    let only90 = LatencyStats::from_histogram(&h, &[90.0]);
    assert_eq!(only90.at(&h, 99.0), s.get(99.0));
}

#[test]
fn withheld_percentiles_are_null_with_a_reason_in_json() {
    let h = hist_of((1..=1000).map(|v| v * 10));
    let s = LatencyStats::from_histogram(&h, &[99.0, 99.9, 99.99]);
    let v = serde_json::to_value(&s).unwrap();
    assert!(v["percentiles"]["p99"].is_f64(), "{v}");
    assert!(v["percentiles"]["p99.9"].is_null(), "{v}");
    assert!(v["percentiles"]["p99.99"].is_null(), "{v}");
    let w = &v["percentiles_withheld"];
    assert_eq!(w["p99.9"]["reason"], WITHHELD_REASON);
    assert_eq!(w["p99.9"]["samples_needed"], 10_000);
    assert_eq!(w["p99.99"]["samples_needed"], 100_000);
    assert!(w.get("p99").is_none(), "{v}");
    let back: LatencyStats = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
    // Every percentile held: no percentiles_withheld key.
    let all = serde_json::to_value(LatencyStats::from_histogram(&h, &[90.0])).unwrap();
    assert!(all.get("percentiles_withheld").is_none(), "{all}");
    // A file's number for a percentile its samples do not hold is read as withheld.
    let mut forged = serde_json::to_value(&s).unwrap();
    forged["percentiles"]["p99.9"] = 12.5.into();
    let read: LatencyStats = serde_json::from_value(forged).unwrap();
    assert_eq!(read.get(99.9), None);
}

#[test]
fn latency_stats_json_uses_percentile_keys() {
    let s = LatencyStats::from_histogram(&hist_of((1..=10_000).map(|v| v * 10)), &[90.0, 99.9]);
    let v = serde_json::to_value(&s).unwrap();
    assert!(v["percentiles"]["p90"].is_f64());
    assert!(v["percentiles"]["p99.9"].is_f64());
    let back: LatencyStats = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
    let bad = serde_json::json!({"samples": 1, "min_us": 1.0, "max_us": 1.0, "median_us": 1.0,
        "mean_us": 1.0, "stdev_us": 0.0, "percentiles": {"q99": 1.0}});
    let err = serde_json::from_value::<LatencyStats>(bad).unwrap_err();
    assert!(err.to_string().contains("q99"), "{err}");
}

#[test]
fn bandwidth_units() {
    // 5000 x 65536 B in 29.7 ms: the ib_write_bw reference row is 11028.45 MiB/s, 0.176455 Mpps.
    let elapsed = (5000.0 * 65536.0 / (11028.45 * MIB) * 1e9) as u64;
    let b = BandwidthStats::compute(65536, 5000, elapsed, Some(65536.0 * 1e9 / (11030.12 * MIB)));
    assert!(close(b.avg_mibps, 11028.45, 1e-6), "{}", b.avg_mibps);
    assert!(
        close(b.avg_gbps, 11028.45 * MIB * 8.0 / 1e9, 1e-6),
        "{}",
        b.avg_gbps
    );
    assert!(
        close(b.msg_rate_mpps, 0.176455, 1e-5),
        "{}",
        b.msg_rate_mpps
    );
    assert!(close(b.peak_mibps.unwrap(), 11030.12, 1e-9));
    assert!(close(
        b.peak_gbps.unwrap(),
        11030.12 * MIB * 8.0 / 1e9,
        1e-9
    ));
    // 1 GB in one second is exactly 8 Gb/s and 1 Mpps for 1000-byte messages.
    let b = BandwidthStats::compute(1000, 1_000_000, 1_000_000_000, None);
    assert_eq!((b.avg_gbps, b.msg_rate_mpps), (8.0, 1.0));
    assert_eq!((b.peak_gbps, b.peak_mibps), (None, None));
}

#[test]
fn bidirectional_sums_rates() {
    let a = BandwidthStats::compute(4096, 1000, 1_000_000, Some(800.0));
    let b = BandwidthStats::compute(4096, 500, 2_000_000, None);
    let c = a.combined(&b);
    assert_eq!(
        (c.messages, c.elapsed_ns, c.msg_size),
        (1500, 2_000_000, 4096)
    );
    assert!(close(c.avg_gbps, a.avg_gbps + b.avg_gbps, 1e-12));
    assert!(close(c.avg_mibps, a.avg_mibps + b.avg_mibps, 1e-12));
    assert!(close(c.msg_rate_mpps, 1.0 + 0.25, 1e-12));
    assert_eq!(
        c.peak_gbps, None,
        "a one-sided peak is not a bidirectional one"
    );
    let d = a.combined(&a);
    assert!(close(
        d.peak_gbps.unwrap(),
        2.0 * a.peak_gbps.unwrap(),
        1e-12
    ));
}

#[test]
fn repeated_percentiles_are_reported_once() {
    let s = LatencyStats::from_histogram(&hist_of([1000, 2000]), &[99.0, 90.0, 99.0]);
    let pcts: Vec<f64> = s.percentiles.iter().map(|p| p.pct).collect();
    assert_eq!(pcts, [99.0, 90.0]);
}

#[test]
fn bandwidth_degenerate_inputs() {
    let b = BandwidthStats::compute(65536, 10, 0, Some(0.0));
    assert_eq!((b.avg_gbps, b.avg_mibps, b.msg_rate_mpps), (0.0, 0.0, 0.0));
    assert_eq!(b.peak_gbps, None);
    assert_eq!(
        BandwidthStats::compute(8, 1, 10, Some(f64::NAN)).peak_mibps,
        None
    );
}

/// The definition, quadratically.
fn brute_peak(tposted: &[u64], tcompleted: &[u64], cq_mod: u64) -> Option<f64> {
    let n = tposted.len();
    let m = cq_mod.max(1) as usize;
    let mut best: Option<f64> = None;
    for (c, &done) in tcompleted.iter().enumerate() {
        if c * m >= n {
            break;
        }
        let j = ((c + 1) * m).min(n) - 1;
        for (i, &post) in tposted.iter().enumerate().take(j + 1) {
            let t = (done as f64 - post as f64) / (j - i + 1) as f64;
            best = Some(best.map_or(t, |b: f64| b.min(t)));
        }
    }
    best
}

#[test]
fn peak_small_cases() {
    // Steady 10 ns per message except one fast burst of 3 messages in 12 ns.
    let posted = [0, 10, 20, 30, 31, 32, 50];
    let completed = [15, 25, 35, 40, 43, 44, 60];
    let p = perftest_peak(&posted, &completed, 1).unwrap();
    assert_eq!(Some(p), brute_peak(&posted, &completed, 1));
    assert!((p - 14.0 / 3.0).abs() < 1e-9, "{p}");
    assert_eq!(perftest_peak(&[], &[], 1), None);
    assert_eq!(perftest_peak(&[1, 2], &[], 1), None);
    let big = vec![0u64; PEAK_MAX_MESSAGES + 1];
    assert_eq!(perftest_peak(&big, &[1], 1), None);
}

#[test]
fn peak_with_cq_moderation_and_partial_last_batch() {
    // 10 messages, cq_mod 4: completions close messages 3, 7 and 9 (partial batch).
    let posted: Vec<u64> = (0..10).map(|k| k * 100).collect();
    let completed = [450, 800, 950, 99_999];
    let p = perftest_peak(&posted, &completed, 4).unwrap();
    assert_eq!(Some(p), brute_peak(&posted, &completed, 4));
    // Every full batch runs at 100 ns per message or slower; the partial batch holds the best
    // window, message 9 alone: 950 - 900.
    assert!((p - 50.0).abs() < 1e-9, "{p}");
    assert_eq!(
        perftest_peak(&posted, &completed, 0),
        brute_peak(&posted, &completed, 1)
    );
}

proptest! {
    #[test]
    fn peak_matches_brute_force(
        gaps in prop::collection::vec(0u64..1000, 1..300),
        lat in prop::collection::vec(0u64..5000, 1..300),
        cq_mod in 1u64..8,
    ) {
        // Realistic shape: monotone post times, completions after their posts.
        let mut posted = Vec::with_capacity(gaps.len());
        let mut t = 1_000_000u64;
        for g in &gaps { t += g; posted.push(t); }
        let batches = posted.len().div_ceil(cq_mod as usize);
        let mut completed = Vec::with_capacity(batches);
        let mut last = 0u64;
        for c in 0..batches {
            let j = ((c + 1) * cq_mod as usize).min(posted.len()) - 1;
            last = last.max(posted[j] + lat[c % lat.len()]);
            completed.push(last);
        }
        let fast = perftest_peak(&posted, &completed, cq_mod).unwrap();
        let slow = brute_peak(&posted, &completed, cq_mod).unwrap();
        prop_assert!((fast - slow).abs() <= 1e-9 * slow.abs().max(1.0), "{} vs {}", fast, slow);
    }

    #[test]
    fn peak_matches_brute_force_on_arbitrary_times(
        posted in prop::collection::vec(0u64..1_000_000, 1..200),
        completed in prop::collection::vec(0u64..1_000_000, 1..200),
        cq_mod in 0u64..5,
    ) {
        let fast = perftest_peak(&posted, &completed, cq_mod);
        let slow = brute_peak(&posted, &completed, cq_mod);
        match (fast, slow) {
            (Some(a), Some(b)) => prop_assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{} vs {}", a, b),
            (a, b) => prop_assert_eq!(a, b),
        }
    }
}

#[test]
fn jains_index_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
    assert_eq!(jain_index(&[3.0, 3.0, 3.0]), Some(1.0));
    assert_eq!(jain_index(&[4.0, 0.0, 0.0, 0.0]), Some(0.25));
    let j = jain_index(&[1.0, 2.0]).unwrap();
    assert!((j - 0.9).abs() < 1e-12, "{j}");
    assert_eq!(jain_index(&[]), None);
    assert_eq!(jain_index(&[0.0, 0.0]), None);
}
