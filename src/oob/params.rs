//! The parameters both sides must agree on, and the check that names the first one that differs.
//!
//! Only what changes the traffic is here: the test, transport, RoCE version, sizes, iterations or
//! duration, queue pairs, MTU, direction, warm-up, validation, traffic class and service level
//! (`--flow_label` stays per side: a label names one direction's flows and changes no class of
//! service, as perftest assigns each side's own). How each side shows or stores its
//! figures (`--report_gbits`, `--output`, `--csv`, `--json`, `--results`, `--percentiles`, `-v`,
//! `--cpu`, gate thresholds) is its own business and never travels.

use crate::params::{
    AtomicOp, CcParams, CongestionControl, ConnType, Recovery, RoceVersion, TestKind, TransportKind,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Everything that must be the same on the two sides of a test: what changes the traffic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TestParams {
    /// Which of the six tests (the binary's name).
    pub test: TestKind,
    /// The transport.
    pub transport: TransportKind,
    /// RoCE version (soft and verbs only).
    pub roce: Option<RoceVersion>,
    /// `-a`: sweep every size.
    pub all_sizes: bool,
    /// `-s`: the message size (the largest of the sweep with `-a`).
    pub size: u64,
    /// `-n`: iterations per size (0 in duration mode).
    pub iterations: u64,
    /// `-D`: seconds, in duration mode.
    pub duration: Option<u64>,
    /// `-f`: margin seconds, in duration mode.
    pub margin: Option<u64>,
    /// `-q`: queue pairs.
    pub qps: u32,
    /// `-m`: MTU (soft and verbs only).
    pub mtu: Option<u32>,
    /// `-b`: bidirectional.
    pub bidirectional: bool,
    /// `--warmup`: iterations run before measuring (both sides of a ping-pong must run the same number).
    pub warmup: u64,
    /// `--validate`: the sender writes the pattern the receiver checks (a READ responder fills it too).
    #[serde(default)]
    pub validate: bool,
    /// `--recovery`: what this side asks for. Negotiated, never a mismatch: selective repeat runs
    /// only when both sides ask for it ([`Recovery::agree`]); a peer that does not say asks for gbn.
    #[serde(default)]
    pub recovery: Recovery,
    /// `--run_infinitely`: both sides run until one of them stops.
    #[serde(default)]
    pub run_infinitely: bool,
    /// `--latency_gap` in nanoseconds: the initiator waits it, the responder takes it out of its samples.
    #[serde(default)]
    pub latency_gap_ns: u64,
    /// `-c`: RC, UC or UD queue pairs (a peer that does not say runs RC).
    #[serde(default)]
    pub connection: ConnType,
    /// `-R`: the queue pairs are connected through the CM (both sides must, or nobody answers).
    #[serde(default)]
    pub rdma_cm: bool,
    /// `-A`: the atomic operation (atomic tests only).
    #[serde(default)]
    pub atomic_type: Option<AtomicOp>,
    /// `--tclass` (0 when not given, as perftest): the class both directions' packets travel in
    /// (a peer that does not say sends 0).
    #[serde(default)]
    pub tclass: u8,
    /// `-S` (0 when not given): the priority both directions' frames travel at.
    #[serde(default)]
    pub sl: u8,
    /// `--cc`: the soft transport's congestion control (a peer that does not say runs DCQCN, the
    /// default; verbs and TCP never change it).
    #[serde(default)]
    pub cc: CongestionControl,
    /// `--cc-param`: DCQCN's parameters (a peer that does not say runs the defaults).
    #[serde(default)]
    pub cc_params: CcParams,
}

/// The first parameter that differs between this side and the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// Parameter name, e.g. `size`.
    pub name: &'static str,
    /// This side's value.
    pub ours: String,
    /// The peer's value.
    pub theirs: String,
    /// What to do, e.g. `give both sides the same -s`.
    pub hint: &'static str,
    /// How the values are said.
    pub said: Said,
}

/// How a [`Mismatch`] says the two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    /// `size: this side 65536, peer 1024`.
    Values,
    /// `run length: this side runs -n 1000, the peer -D 2`: each value is the flag that gives it.
    Runs,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, ours, theirs, hint) = (self.name, &self.ours, &self.theirs, self.hint);
        match self.said {
            Said::Values => write!(f, "{name}: this side {ours}, peer {theirs} — {hint}"),
            Said::Runs => write!(
                f,
                "{name}: this side runs {ours}, the peer {theirs} — {hint}"
            ),
        }
    }
}

/// How long a run goes: `-n` iterations or `-D` seconds, said as the flag that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunLength {
    /// `-n`.
    Iterations(u64),
    /// `-D`.
    Seconds(u64),
}

impl RunLength {
    /// What to tell a user whose two sides run `a` and `b`.
    pub(crate) fn hint(a: RunLength, b: RunLength) -> &'static str {
        match (a, b) {
            (RunLength::Iterations(_), RunLength::Iterations(_)) => "give both sides the same -n",
            (RunLength::Seconds(_), RunLength::Seconds(_)) => "give both sides the same -D",
            _ => "give both sides the same -n, or both the same -D",
        }
    }
}

impl fmt::Display for RunLength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunLength::Iterations(n) => write!(f, "-n {n}"),
            RunLength::Seconds(s) => write!(f, "-D {s}"),
        }
    }
}

/// The name of the run-length parameter, said with [`Said::Runs`].
const RUN_LENGTH: &str = "run length";

fn opt<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "none".to_string(), |v| v.to_string())
}

impl TestParams {
    /// How long the run goes: `-D` seconds, else `-n` iterations.
    pub(crate) fn run_length(&self) -> RunLength {
        match self.duration {
            Some(secs) => RunLength::Seconds(secs),
            None => RunLength::Iterations(self.iterations),
        }
    }

    /// The parameters in the order they are checked: name, value as shown, what to do. What another
    /// parameter follows from comes first: `-c` and `-m` before the sizes (UD's default size is the
    /// MTU), the run's length as one (`-n` or `-D`) before its margin.
    fn fields(&self) -> [(&'static str, String, &'static str); 21] {
        [
            (
                "test",
                self.test.to_string(),
                "run the same roce_* binary on both sides",
            ),
            (
                "transport",
                self.transport.to_string(),
                "give both sides the same --transport",
            ),
            ("roce", opt(&self.roce), "give both sides the same --roce"),
            (
                "connection type",
                self.connection.to_string(),
                "give both sides the same -c",
            ),
            ("mtu", opt(&self.mtu), "give both sides the same -m"),
            (
                "all sizes",
                self.all_sizes.to_string(),
                "give -a to both sides or to neither",
            ),
            ("size", self.size.to_string(), "give both sides the same -s"),
            // Said with [`Said::Runs`] and its hint from both values ([`RunLength::hint`]).
            (RUN_LENGTH, self.run_length().to_string(), ""),
            ("margin", opt(&self.margin), "give both sides the same -f"),
            ("qps", self.qps.to_string(), "give both sides the same -q"),
            (
                "bidirectional",
                self.bidirectional.to_string(),
                "give -b to both sides or to neither",
            ),
            (
                "warmup",
                self.warmup.to_string(),
                "give both sides the same --warmup",
            ),
            (
                "validate",
                self.validate.to_string(),
                "give --validate to both sides or to neither",
            ),
            (
                "run_infinitely",
                self.run_infinitely.to_string(),
                "give --run_infinitely to both sides or to neither",
            ),
            (
                "latency gap",
                format!("{} ns", self.latency_gap_ns),
                "give both sides the same --latency_gap",
            ),
            (
                "rdma_cm",
                self.rdma_cm.to_string(),
                "give -R to both sides or to neither",
            ),
            (
                "atomic type",
                opt(&self.atomic_type),
                "give both sides the same -A",
            ),
            (
                "tclass",
                self.tclass.to_string(),
                "give both sides the same --tclass (each side marks what it sends)",
            ),
            (
                "sl",
                self.sl.to_string(),
                "give both sides the same -S (each side marks what it sends)",
            ),
            ("cc", self.cc.to_string(), "give both sides the same --cc"),
            (
                "cc-param",
                self.cc_params.to_string(),
                "give both sides the same --cc-param values",
            ),
        ]
    }

    /// The first parameter that differs from the peer's, in a fixed order (test first, then transport, ...).
    ///
    /// `soft` and `verbs` put the same RoCE packets on the wire, so they pair with each other (a host
    /// without an RDMA NIC against one with); a RoCE version left to the device (`None`, verbs without
    /// `--roce`) pairs with either.
    pub(crate) fn first_mismatch(&self, peer: &TestParams) -> Option<Mismatch> {
        let roce_pair =
            |a: TransportKind, b: TransportKind| a != TransportKind::Tcp && b != TransportKind::Tcp;
        let lenient = |name: &str| match name {
            "transport" => roce_pair(self.transport, peer.transport),
            "roce" => self.roce.is_none() || peer.roce.is_none(),
            _ => false,
        };
        self.fields()
            .into_iter()
            .zip(peer.fields())
            .find(|(a, b)| a.1 != b.1 && !lenient(a.0))
            .map(|((name, ours, hint), (_, theirs, _))| match name {
                RUN_LENGTH => Mismatch {
                    name,
                    ours,
                    theirs,
                    hint: RunLength::hint(self.run_length(), peer.run_length()),
                    said: Said::Runs,
                },
                _ => Mismatch {
                    name,
                    ours,
                    theirs,
                    hint,
                    said: Said::Values,
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_pairs_with_verbs_but_not_with_tcp() {
        let soft = TestParams {
            transport: TransportKind::Soft,
            roce: Some(RoceVersion::V2),
            ..base()
        };
        let verbs = TestParams {
            transport: TransportKind::Verbs,
            roce: None,
            ..base()
        };
        assert_eq!(soft.first_mismatch(&verbs), None);
        let v1 = TestParams {
            roce: Some(RoceVersion::V1),
            ..verbs.clone()
        };
        assert_eq!(soft.first_mismatch(&v1).map(|m| m.name), Some("roce"));
        assert_eq!(
            soft.first_mismatch(&base()).map(|m| m.name),
            Some("transport")
        );
    }

    fn base() -> TestParams {
        TestParams {
            test: TestKind::WRITE_BW,
            transport: TransportKind::Tcp,
            roce: None,
            all_sizes: false,
            size: 65536,
            iterations: 5000,
            duration: None,
            margin: None,
            qps: 1,
            mtu: None,
            bidirectional: false,
            warmup: 0,
            validate: false,
            atomic_type: None,
            recovery: Recovery::Gbn,
            run_infinitely: false,
            latency_gap_ns: 0,
            connection: ConnType::Rc,
            rdma_cm: false,
            tclass: 0,
            sl: 0,
            cc: CongestionControl::Dcqcn,
            cc_params: CcParams::default(),
        }
    }

    #[test]
    fn tclass_and_sl_must_match_and_an_older_peer_sends_0() {
        let marked = TestParams {
            tclass: 104,
            ..base()
        };
        assert_eq!(
            marked.first_mismatch(&base()).unwrap().to_string(),
            "tclass: this side 104, peer 0 — give both sides the same --tclass (each side marks what it sends)"
        );
        let sl = TestParams { sl: 3, ..base() };
        assert_eq!(
            base().first_mismatch(&sl).unwrap().to_string(),
            "sl: this side 0, peer 3 — give both sides the same -S (each side marks what it sends)"
        );
        let mut old = serde_json::to_value(base()).unwrap();
        let o = old.as_object_mut().unwrap();
        o.remove("tclass");
        o.remove("sl");
        let old: TestParams = serde_json::from_value(old).unwrap();
        assert_eq!((old.tclass, old.sl), (0, 0));
    }

    #[test]
    fn congestion_control_and_its_parameters_must_match() {
        let none = TestParams {
            cc: CongestionControl::None,
            ..base()
        };
        assert_eq!(
            none.first_mismatch(&base()).unwrap().to_string(),
            "cc: this side none, peer dcqcn — give both sides the same --cc"
        );
        let tuned = TestParams {
            cc_params: CcParams::parse(["rp_ai_rate=10"]).unwrap(),
            ..base()
        };
        assert_eq!(
            base().first_mismatch(&tuned).unwrap().to_string(),
            "cc-param: this side defaults, peer rp_ai_rate=10 — give both sides the same --cc-param values"
        );
        let mut old = serde_json::to_value(base()).unwrap();
        old.as_object_mut().unwrap().remove("cc");
        old.as_object_mut().unwrap().remove("cc_params");
        let old: TestParams = serde_json::from_value(old).unwrap();
        assert_eq!(
            old.first_mismatch(&base()),
            None,
            "an older peer runs the defaults"
        );
    }

    #[test]
    fn the_connection_type_must_match_and_an_older_peer_runs_rc() {
        let ud = TestParams {
            connection: ConnType::Ud,
            ..base()
        };
        let m = ud.first_mismatch(&base()).unwrap();
        assert_eq!(
            m.to_string(),
            "connection type: this side UD, peer RC — give both sides the same -c"
        );
        let mut old = serde_json::to_value(base()).unwrap();
        old.as_object_mut().unwrap().remove("connection");
        let old: TestParams = serde_json::from_value(old).unwrap();
        assert_eq!(old.connection, ConnType::Rc);
    }

    #[test]
    fn a_run_length_is_said_as_the_flags_that_give_it() {
        let timed = TestParams {
            iterations: 0,
            duration: Some(2),
            margin: Some(0),
            ..base()
        };
        let m = base().first_mismatch(&timed).unwrap();
        assert_eq!(
            m.to_string(),
            "run length: this side runs -n 5000, the peer -D 2 — give both sides the same -n, or \
             both the same -D"
        );
        let longer = TestParams {
            iterations: 6000,
            ..base()
        };
        let m = longer.first_mismatch(&base()).unwrap();
        assert_eq!(
            m.to_string(),
            "run length: this side runs -n 6000, the peer -n 5000 — give both sides the same -n"
        );
        let m = timed
            .first_mismatch(&TestParams {
                duration: Some(3),
                ..timed.clone()
            })
            .unwrap();
        assert_eq!(m.hint, "give both sides the same -D");
    }

    #[test]
    fn the_connection_type_and_mtu_come_before_the_sizes_they_set() {
        // UD's default size is the MTU: a UD side's 4096 against an RC side's 65536 is -c's doing.
        let ud = TestParams {
            connection: ConnType::Ud,
            size: 4096,
            mtu: Some(4096),
            ..base()
        };
        assert_eq!(
            ud.first_mismatch(&base()).map(|m| m.name),
            Some("connection type")
        );
        let small = TestParams {
            mtu: Some(1024),
            size: 1024,
            ..ud.clone()
        };
        assert_eq!(ud.first_mismatch(&small).map(|m| m.name), Some("mtu"));
    }

    #[test]
    fn rdma_cm_must_agree() {
        let r = TestParams {
            rdma_cm: true,
            ..base()
        };
        let m = r.first_mismatch(&base()).unwrap();
        assert_eq!(
            m.to_string(),
            "rdma_cm: this side true, peer false — give -R to both sides or to neither"
        );
    }

    #[test]
    fn recovery_is_negotiated_not_checked() {
        let sr = TestParams {
            recovery: Recovery::Sr,
            ..base()
        };
        assert_eq!(sr.first_mismatch(&base()), None);
        assert_eq!(sr.recovery.agree(base().recovery), Recovery::Gbn);
        assert_eq!(sr.recovery.agree(sr.recovery), Recovery::Sr);
        // A peer that predates --recovery sends no such key: it asks for go-back-N.
        let mut old = serde_json::to_value(base()).unwrap();
        old.as_object_mut().unwrap().remove("recovery");
        let old: TestParams = serde_json::from_value(old).unwrap();
        assert_eq!(old.recovery, Recovery::Gbn);
    }

    #[test]
    fn equal_parameters_agree() {
        assert_eq!(base().first_mismatch(&base()), None);
    }

    #[test]
    fn names_the_first_difference_with_both_values() {
        let mut peer = base();
        peer.size = 1024;
        peer.iterations = 10;
        let m = base().first_mismatch(&peer).unwrap();
        assert_eq!(
            (m.name, m.ours.as_str(), m.theirs.as_str()),
            ("size", "65536", "1024")
        );
        assert_eq!(
            m.to_string(),
            "size: this side 65536, peer 1024 — give both sides the same -s"
        );
    }

    #[test]
    fn test_kind_is_checked_before_anything_else() {
        let mut peer = base();
        peer.test = TestKind::READ_BW;
        peer.size = 2;
        let m = base().first_mismatch(&peer).unwrap();
        assert_eq!((m.name, m.theirs.as_str()), ("test", "read_bw"));
    }

    #[test]
    fn atomic_type_must_agree() {
        let fa = TestParams {
            test: TestKind::ATOMIC_BW,
            atomic_type: Some(crate::params::AtomicOp::FetchAndAdd),
            ..base()
        };
        let cas = TestParams {
            atomic_type: Some(crate::params::AtomicOp::CmpAndSwap),
            ..fa.clone()
        };
        let m = fa.first_mismatch(&cas).unwrap();
        assert_eq!(
            m.to_string(),
            "atomic type: this side FETCH_AND_ADD, peer CMP_AND_SWAP — give both sides the same -A"
        );
    }
}
