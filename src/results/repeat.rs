//! Repetitions of one run (`roce_compare --repeat N`): every repetition's figures, and the one shown.
//!
//! A comparison that repeats each transport keeps, per message size, the figures of every repetition
//! (so a gate can weigh a change against the run-to-run spread), and shows the median repetition's
//! full result (histogram included) in its table, files and plots.

use super::{BandwidthFigures, CompareRun, Figures, Floor, LatencyFigures, SizeResult};
use serde::{Deserialize, Serialize};

/// One message size's figures in each repetition, in the order the repetitions ran.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Repetitions {
    /// Message size in bytes.
    #[serde(rename = "size_bytes")]
    pub size: u64,
    /// A bandwidth test's figures, one per repetition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bandwidth: Vec<BandwidthFigures>,
    /// A latency test's figures, one per repetition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<LatencyFigures>,
}

impl Repetitions {
    /// Every repetition's figures, in order.
    pub fn figures(&self) -> Vec<Figures> {
        let bw = self.bandwidth.iter().map(|b| Figures::Bandwidth(*b));
        let lat = self.latency.iter().map(|l| Figures::Latency(*l));
        bw.chain(lat).collect()
    }

    fn push(&mut self, f: Figures) {
        match f {
            Figures::Bandwidth(b) => self.bandwidth.push(b),
            Figures::Latency(l) => self.latency.push(l),
        }
    }
}

/// The headline figure a repetition is chosen and spread by: bandwidth (Gb/s), or median latency (µs).
fn headline(f: &Figures) -> f64 {
    match f {
        Figures::Bandwidth(b) => b.gbps,
        Figures::Latency(l) => l.median_us,
    }
}

/// How good a result is on its headline figure, higher better: bandwidth, or minus the median latency.
fn goodness(r: &SizeResult) -> f64 {
    match r.figures() {
        f @ Figures::Bandwidth(_) => headline(&f),
        f @ Figures::Latency(_) => -headline(&f),
    }
}

impl CompareRun {
    /// One run from the repetitions of one transport and test (in the order they ran; None when
    /// there are none): per size, the full result of the median repetition by the headline figure
    /// (bandwidth, or median latency; of an even count, the worse of the two middle ones) with that
    /// repetition's floor, and every repetition's figures in [`CompareRun::repetitions`]. Notes are
    /// those of the first repetition followed by any new ones the others add.
    pub fn from_repetitions(reps: Vec<CompareRun>) -> Option<CompareRun> {
        let mut iter = reps.into_iter();
        let mut out = iter.next()?;
        let mut all: Vec<(Vec<SizeResult>, Vec<Floor>)> = vec![(
            std::mem::take(&mut out.results),
            std::mem::take(&mut out.floors),
        )];
        for rep in iter {
            for note in rep.notes {
                if !out.notes.contains(&note) {
                    out.notes.push(note);
                }
            }
            all.push((rep.results, rep.floors));
        }
        let mut sizes: Vec<u64> = all.iter().flat_map(|a| &a.0).map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            // Each repetition's result at this size, with that repetition's floors.
            let mut at: Vec<(&SizeResult, &[Floor])> = all
                .iter()
                .flat_map(|(results, floors)| results.iter().map(move |r| (r, floors.as_slice())))
                .filter(|(r, _)| r.size == size)
                .collect();
            let mut rep = Repetitions {
                size,
                ..Repetitions::default()
            };
            for (r, _) in &at {
                rep.push(r.figures());
            }
            // Worst first, so that the lower middle of an even count is the worse one.
            at.sort_by(|a, b| goodness(a.0).total_cmp(&goodness(b.0)));
            let (median, floors) = at[(at.len() - 1) / 2];
            out.results.push(median.clone());
            out.floors
                .extend(floors.iter().filter(|f| f.size == size).cloned());
            out.repetitions.push(rep);
        }
        Some(out)
    }

    /// The most repetitions any size of this run holds; 0 when it was not repeated.
    pub fn repetitions_run(&self) -> usize {
        self.repetitions
            .iter()
            .map(|r| r.bandwidth.len() + r.latency.len())
            .max()
            .unwrap_or(0)
    }

    /// The lowest and highest headline figure (median latency in µs, or bandwidth in Gb/s, the figure
    /// the shown repetition was chosen by) across the repetitions at `size`; None when fewer than two
    /// repetitions ran there.
    pub fn spread(&self, size: u64) -> Option<(f64, f64)> {
        let values: Vec<f64> = self.repeated_figures(size).iter().map(headline).collect();
        if values.len() < 2 {
            return None;
        }
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((lo, hi))
    }

    /// The figures of every repetition at `size`; empty when the run was not repeated.
    pub fn repeated_figures(&self, size: u64) -> Vec<Figures> {
        self.repetitions
            .iter()
            .find(|r| r.size == size)
            .map(Repetitions::figures)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::{bw, lat, set};

    fn with(template: &CompareRun, results: Vec<SizeResult>, note: &str) -> CompareRun {
        CompareRun {
            results,
            notes: vec![note.into()],
            ..template.clone()
        }
    }

    #[test]
    fn the_median_repetition_is_shown_and_every_one_kept() {
        let set = set();
        let bw_run = &set.runs[4];
        let reps = vec![
            with(bw_run, vec![bw(65536, 30.0), bw(4096, 5.0)], "a"),
            with(bw_run, vec![bw(65536, 10.0)], "b"),
            with(bw_run, vec![bw(65536, 20.0), bw(4096, 7.0)], "a"),
        ];
        let run = CompareRun::from_repetitions(reps).unwrap();
        assert_eq!(run.notes, ["a", "b"]);
        let sizes: Vec<u64> = run.results.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [4096, 65536]);
        let gbps = |r: &SizeResult| r.figures().bandwidth().unwrap().gbps;
        assert!((gbps(&run.results[1]) - 20.0).abs() < 1e-6);
        // Two repetitions at 4 KiB: the worse of the two is shown.
        assert!((gbps(&run.results[0]) - 5.0).abs() < 1e-6);
        let order: Vec<f64> = run
            .repeated_figures(65536)
            .iter()
            .map(|f| f.bandwidth().unwrap().gbps.round())
            .collect();
        assert_eq!(order, [30.0, 10.0, 20.0]);
        assert!(run.repeated_figures(2).is_empty());
        // The spread of the bandwidths: 10 to 30 Gb/s at 64 KiB, 5 to 7 at 4 KiB.
        let (lo, hi) = run.spread(65536).unwrap();
        assert!(
            (lo - 10.0).abs() < 1e-6 && (hi - 30.0).abs() < 1e-6,
            "{lo} {hi}"
        );
        let (lo, hi) = run.spread(4096).unwrap();
        assert!(
            (lo - 5.0).abs() < 1e-6 && (hi - 7.0).abs() < 1e-6,
            "{lo} {hi}"
        );
        assert_eq!(run.spread(2), None);
        assert!(CompareRun::from_repetitions(vec![]).is_none());
    }

    #[test]
    fn latency_repetitions_pick_the_median_by_median_latency_with_its_floor() {
        let set = set();
        let lat_run = &set.runs[1];
        let reps = [3000, 1000, 2000, 9000, 4000]
            .map(|ns| CompareRun {
                floors: vec![Floor::missing(2, format!("rep of {ns} ns"))],
                ..with(lat_run, vec![lat(2, ns, 10_000)], "n")
            })
            .to_vec();
        let run = CompareRun::from_repetitions(reps).unwrap();
        // The floor shown is the one measured beside the median repetition.
        assert_eq!(run.floors.len(), 1);
        let note = run.floors[0].note.as_deref().unwrap();
        assert_eq!(note, "rep of 3000 ns");
        let median = run.results[0].figures().latency().unwrap().median_us;
        let all: Vec<f64> = run
            .repeated_figures(2)
            .iter()
            .map(|f| f.latency().unwrap().median_us)
            .collect();
        assert_eq!(all.len(), 5);
        let mut sorted = all.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(median, sorted[2], "{all:?}");
        // The spread beside the median: the lowest and highest repetition's median latency.
        assert_eq!(run.spread(2), Some((sorted[0], sorted[4])));
        assert_eq!(run.spread(4096), None);
        // The serde form: per size, one figure object per repetition under the test's kind.
        let v = serde_json::to_value(&run.repetitions).unwrap();
        assert_eq!(v[0]["size_bytes"], 2);
        assert_eq!(v[0]["latency"].as_array().unwrap().len(), 5);
        assert!(v[0]["latency"][0]["p99_9_us"].is_f64(), "{v}");
        assert!(v[0].get("bandwidth").is_none(), "{v}");
        let back: Vec<Repetitions> = serde_json::from_value(v).unwrap();
        assert_eq!(back, run.repetitions);
    }
}
