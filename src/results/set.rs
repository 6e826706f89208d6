//! A comparison set: transports running the same tests, the ones that could not, and each RoCE row
//! against RoCE v1 on the same host path.
//!
//! The set knows nothing of how its runs were made: live by `compare`, or read from result files.

use super::{Floor, HostPath, LossPoint, Repetitions, RunInfo, SizeResult, WireCeiling, WirePort};
use crate::params::{Metric, RoceVersion, TestKind, TransportKind};
use serde::{Deserialize, Serialize};

/// One transport running one test over one or more message sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRun {
    /// How the transport is shown, e.g. "RoCE v2 (soft)", "TCP".
    pub label: String,
    /// What moved the bytes.
    pub transport: TransportKind,
    /// RoCE encapsulation; None for TCP.
    pub roce: Option<RoceVersion>,
    /// Which test.
    pub test: TestKind,
    /// One result per message size, ascending.
    pub results: Vec<SizeResult>,
    /// Why this transport was chosen or what limited it ("soft: no RDMA device").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The link the run's traffic crossed, as the comparison that ran it names it: `lo`, or
    /// `veth (netns rpc42a<->rpc42b, MTU 9000)`; None when not known (a run read from its own file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Every repetition's figures per message size (`roce_compare --repeat N`); `results` then holds
    /// the median repetition. Empty for a run made once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<Repetitions>,
    /// In a loss sweep: the loss the run met and what repairing it cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossPoint>,
    /// The way its packets went through the host; None when not known (a run read from its own file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HostPath>,
    /// Per message size, the floor of that path measured in the same comparison (or why there is none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub floors: Vec<Floor>,
    /// Per message size of a bandwidth test, its protocol's goodput ceiling at the comparison's port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ceilings: Vec<WireCeiling>,
}

/// A transport that could not run, and why (e.g. RoCE v1 needs CAP_NET_RAW for a veth pair).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The transport's label.
    pub label: String,
    /// What was missing and how to get it, or how the run failed.
    pub reason: String,
    /// The transport was tried and its run failed (rather than not being tried at all).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

/// Everything a comparison report shows.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CompareSet {
    /// RFC 3339 UTC time the comparison started.
    pub started_at: String,
    /// roceperf version that made it.
    pub version: String,
    /// The runs, in the order made (usually v1, v2, TCP per test).
    pub runs: Vec<CompareRun>,
    /// Transports that could not run.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// What chose the comparison's settings (cores, iterations, the floors' reference), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The port the wire ceilings are worked out for; None: no ceilings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<WirePort>,
    /// Where the comparison ran ([`super::Provenance`], no NIC: each run's file names its own);
    /// absent from comparisons assembled in tests and from files written before issue 34.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<super::Provenance>,
}

/// The label a transport gets by default: `RoCE v2 (soft)`, `RoCE v1 (verbs)`, `TCP`.
pub fn default_label(transport: TransportKind, roce: Option<RoceVersion>) -> String {
    match (transport, roce) {
        (TransportKind::Tcp, _) => "TCP".into(),
        (t, Some(r)) => format!("RoCE {r} ({t})"),
        (t, None) => format!("RoCE ({t})"),
    }
}

/// Order in the table: RoCE v1, then v2 (verbs before soft), TCP last as the reference.
pub(crate) fn transport_rank(t: TransportKind, r: Option<RoceVersion>) -> u8 {
    match (t, r) {
        (TransportKind::Tcp, _) => 9,
        (TransportKind::Verbs, Some(RoceVersion::V1)) => 0,
        (TransportKind::Soft, Some(RoceVersion::V1)) => 1,
        (TransportKind::Verbs, _) => 2,
        (TransportKind::Soft, _) => 3,
    }
}

impl CompareRun {
    /// A run from a result file's RunInfo and results, labelled by [`default_label`].
    pub fn from_run(info: &RunInfo, results: Vec<SizeResult>) -> CompareRun {
        CompareRun {
            label: default_label(info.transport, info.roce),
            transport: info.transport,
            roce: info.roce,
            test: info.test,
            results,
            notes: info.notes.clone(),
            link: None,
            repetitions: Vec::new(),
            loss: None,
            path: None,
            floors: Vec::new(),
            ceilings: Vec::new(),
        }
    }

    /// The result at `size`, if measured.
    pub fn at(&self, size: u64) -> Option<&SizeResult> {
        self.results.iter().find(|r| r.size == size)
    }
}

impl CompareSet {
    /// The RoCE v1 run of `run`'s test that took the same host path (and transport), if there is one.
    pub fn v1_on_path_of(&self, run: &CompareRun) -> Option<&CompareRun> {
        let path = run.path?;
        self.runs.iter().find(|r| {
            r.test == run.test
                && r.transport == run.transport
                && r.roce == Some(RoceVersion::V1)
                && r.path == Some(path)
        })
    }

    /// `run`'s headline figure ÷ RoCE v1's at `size` on the same host path: median latency ÷ v1's for
    /// latency tests, Gb/s ÷ v1's for bandwidth tests, so that what differs is the protocol, not the
    /// host's path. None without such a v1 run (rows of other paths, TCP), or when a figure is zero.
    pub fn ratio_to_v1(&self, run: &CompareRun, size: u64) -> Option<f64> {
        run.roce?;
        let v1 = self.v1_on_path_of(run)?.at(size)?.figures();
        let this = run.at(size)?.figures();
        let ratio = match run.test.metric {
            Metric::Bandwidth => this.bandwidth()?.gbps / v1.bandwidth()?.gbps,
            Metric::Latency => this.latency()?.median_us / v1.latency()?.median_us,
        };
        ratio.is_finite().then_some(ratio)
    }

    /// The tests present, in the order first seen.
    pub fn tests(&self) -> Vec<TestKind> {
        let mut out: Vec<TestKind> = Vec::new();
        for r in &self.runs {
            if !out.contains(&r.test) {
                out.push(r.test);
            }
        }
        out
    }

    /// The links the runs crossed, each with the labels of the runs that crossed it (None: not
    /// recorded), in the order first seen; empty when no run records its link.
    pub fn links(&self) -> Vec<(Option<&str>, Vec<&str>)> {
        if self.runs.iter().all(|r| r.link.is_none()) {
            return Vec::new();
        }
        let mut out: Vec<(Option<&str>, Vec<&str>)> = Vec::new();
        for r in &self.runs {
            let link = r.link.as_deref();
            match out.iter_mut().find(|(l, _)| *l == link) {
                Some((_, labels)) if labels.contains(&r.label.as_str()) => {}
                Some((_, labels)) => labels.push(&r.label),
                None => out.push((link, vec![&r.label])),
            }
        }
        out
    }

    /// Sorts the runs by test (in `tests` order) and then by [`transport_rank`]: RoCE v1, v2, TCP.
    pub fn sort_runs(&mut self, tests: &[TestKind]) {
        self.runs.sort_by_key(|r| {
            (
                tests.iter().position(|t| *t == r.test),
                transport_rank(r.transport, r.roce),
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::*;

    #[test]
    fn default_labels() {
        assert_eq!(
            default_label(TransportKind::Soft, Some(RoceVersion::V2)),
            "RoCE v2 (soft)"
        );
        assert_eq!(default_label(TransportKind::Tcp, None), "TCP");
    }

    #[test]
    fn the_ratio_compares_v2_with_v1_on_one_path_only() {
        let mut set = set();
        // Without paths nothing is comparable.
        assert_eq!(set.ratio_to_v1(&set.runs[4], 65536), None);
        for run in &mut set.runs {
            run.path = Some(HostPath::default_for(run.transport, run.roce));
        }
        // The fixture's v1 is soft over AF_PACKET, its v2 over the UDP socket: different paths.
        assert_eq!(set.ratio_to_v1(&set.runs[4], 65536), None);
        for run in &mut set.runs {
            if run.roce.is_some() {
                run.path = Some(HostPath::AfPacket);
            }
        }
        let v2_bw = &set.runs[4];
        assert_eq!(v2_bw.label, "RoCE v2 (soft)");
        // 0.9 x (20 + 15 x 2) Gb/s over 1.0 x 50.
        let r = set.ratio_to_v1(v2_bw, 65536).unwrap();
        assert!((r - 0.9).abs() < 1e-6, "{r}");
        // Latency: the median over v1's, both at the same point of the same spread: 2000 / 1800.
        let r = set.ratio_to_v1(&set.runs[1], 2).unwrap();
        assert!((r - 2000.0 / 1800.0).abs() < 0.01, "{r}");
        assert_eq!(set.ratio_to_v1(&set.runs[0], 2), Some(1.0));
        assert_eq!(set.ratio_to_v1(&set.runs[2], 2), None, "TCP has no v1");
        assert_eq!(set.ratio_to_v1(&set.runs[1], 4096), None);
    }
}
