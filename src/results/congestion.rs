//! A congestion study's document: `congestion.json` (schema `roceperf.congestion`), which
//! `roce_compare --congestion` writes and `roce_gate` judges, and the rows of `congestion.csv`.
//!
//! One setup (the bottleneck: rate, buffer, ECN and PFC thresholds; N flows of one message size; the
//! victim; the host's cores), the victim alone on the idle bottleneck, and one run per discipline
//! ([`Discipline`]): what it ran, how it ended, per flow and in total what it delivered and what the
//! switch and the endpoints counted, the victim's latency under load, and when the flows converged
//! ([`figures`] holds the arithmetic). A null figure was not measured there (TCP sends no CNP; a run
//! that failed before the switch wrote its stats has no drops); the reason is in the document when
//! it is not obvious.

pub(crate) mod csv;
pub(crate) mod figures;

use crate::params::{Recovery, TransportKind};
use crate::results::size::histogram_serde;
use crate::results::switch::Thresholds;
use serde::{Deserialize, Serialize};

/// `schema` of congestion.json.
pub(crate) const CONGESTION_SCHEMA: &str = "roceperf.congestion";
/// `schema_version` of congestion.json: changes only when a key is renamed, removed or changes meaning.
pub(crate) const CONGESTION_SCHEMA_VERSION: u32 = 1;

/// How the bottleneck treats the data, and which transport and rate control run through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Discipline {
    /// Tail drop, no rate control, go-back-N recovery.
    LossyGbn,
    /// Tail drop, no rate control, selective repeat.
    LossySr,
    /// CE marking between Kmin and Kmax, DCQCN at the senders.
    EcnDcqcn,
    /// PFC pause at Xoff, no rate control.
    Pfc,
    /// PFC pause at Xoff and DCQCN (the switch marks too).
    PfcDcqcn,
    /// TCP with cubic through a tail-drop queue: the baseline.
    TcpCubic,
}

impl Discipline {
    /// Every discipline, in the order a study runs and shows them.
    pub(crate) const ALL: [Discipline; 6] = [
        Discipline::LossyGbn,
        Discipline::LossySr,
        Discipline::EcnDcqcn,
        Discipline::Pfc,
        Discipline::PfcDcqcn,
        Discipline::TcpCubic,
    ];

    /// `lossy-gbn`, `ecn-dcqcn`, ...: its name in flags, files and tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Discipline::LossyGbn => "lossy-gbn",
            Discipline::LossySr => "lossy-sr",
            Discipline::EcnDcqcn => "ecn-dcqcn",
            Discipline::Pfc => "pfc",
            Discipline::PfcDcqcn => "pfc-dcqcn",
            Discipline::TcpCubic => "tcp-cubic",
        }
    }

    /// The discipline word the switch takes (`roce_switch --discipline`): `lossy`, `ecn`, `pfc`,
    /// or `pfc-ecn` (PFC with DCQCN: the switch pauses and marks).
    pub(crate) fn switch(self) -> &'static str {
        match self {
            Discipline::LossyGbn | Discipline::LossySr | Discipline::TcpCubic => "lossy",
            Discipline::EcnDcqcn => "ecn",
            Discipline::Pfc => "pfc",
            Discipline::PfcDcqcn => "pfc-ecn",
        }
    }

    /// The transport the flows run over.
    pub(crate) fn transport(self) -> TransportKind {
        match self {
            Discipline::TcpCubic => TransportKind::Tcp,
            _ => TransportKind::Soft,
        }
    }

    /// The rate control: `--cc dcqcn|none`, or TCP's congestion control.
    pub(crate) fn cc(self) -> &'static str {
        match self {
            Discipline::EcnDcqcn | Discipline::PfcDcqcn => "dcqcn",
            Discipline::TcpCubic => "cubic",
            _ => "none",
        }
    }

    /// The RoCE loss recovery asked for (`--recovery`); None for TCP and for the disciplines that
    /// take the binaries' default (go-back-N).
    pub(crate) fn recovery(self) -> Option<Recovery> {
        match self {
            Discipline::LossyGbn => Some(Recovery::Gbn),
            Discipline::LossySr => Some(Recovery::Sr),
            _ => None,
        }
    }

    /// `lossy-gbn` etc. back to the discipline; the error lists the names.
    pub(crate) fn parse(s: &str) -> Result<Discipline, String> {
        Discipline::ALL
            .into_iter()
            .find(|d| d.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a discipline; use {}",
                    Discipline::ALL.map(Discipline::name).join(", ")
                )
            })
    }
}

impl std::fmt::Display for Discipline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The tool that wrote a document.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Tool {
    /// `roce_compare`.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// congestion.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CongestionDoc {
    /// [`CONGESTION_SCHEMA`].
    pub schema: String,
    /// [`CONGESTION_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The tool that wrote it.
    pub tool: Tool,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    /// What every run shared.
    pub setup: Setup,
    /// The victim alone through the idle bottleneck: the reference of its latency under load.
    pub idle_victim: Option<Victim>,
    /// One run per discipline, in the order run.
    pub runs: Vec<DisciplineRun>,
    /// What the reader must know: what shared a core, what was not measured and why.
    pub notes: Vec<String>,
    /// Where the study ran ([`super::Provenance`], no NIC: its links are veths it made); absent
    /// from files written before issue 34.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<super::Provenance>,
}

/// The bottleneck and the traffic through it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Setup {
    /// The switch's egress rate, Gb/s.
    pub bottleneck_gbps: f64,
    /// Its buffer and ECN and PFC thresholds as the switch ran them (flattened: same keys).
    #[serde(flatten)]
    pub thresholds: Thresholds,
    /// The 802.1Q priority the data carries and PFC pauses (`-S`).
    pub pfc_prio: u8,
    /// Flows into the bottleneck (queue pairs, or TCP connections).
    pub flows: u32,
    /// Message size of the bulk flows, bytes.
    pub size_bytes: u64,
    /// Seconds each discipline's bulk run lasted (`-D`).
    pub duration_s: u64,
    /// Interval of the per-flow series, ms.
    pub series_interval_ms: u64,
    /// Message size of the victim's latency probe, bytes; None without a victim.
    pub victim_size_bytes: Option<u64>,
    /// The links' MTU, bytes.
    pub mtu_bytes: u32,
    /// Cores this host has (online).
    pub host_cores: usize,
    /// Which process ran on which core.
    pub placement: Vec<Placement>,
    /// How time to converge is judged.
    pub convergence: ConvergenceRule,
}

/// One process and the core it was pinned to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Placement {
    /// `senders`, `receiver`, `victim client`, `victim server`, `switch`.
    pub role: String,
    /// The core; None when it was left to the scheduler.
    pub core: Option<usize>,
}

/// The rule time to converge applies ([`figures::convergence`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConvergenceRule {
    /// A flow is at its fair share when within this fraction of it (0.1: ±10 %).
    pub band: f64,
    /// Rates are taken over windows of this length, ms.
    pub window_ms: u64,
}

/// One discipline's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DisciplineRun {
    /// Which.
    pub discipline: Discipline,
    /// What it ran.
    pub ran: Ran,
    /// How it ended.
    pub outcome: Outcome,
    /// Per flow, in queue pair (connection) order.
    pub flows: Vec<Flow>,
    /// Over every flow, and what the switch counted.
    pub totals: Totals,
    /// The victim's latency through the loaded bottleneck; None without a victim.
    pub victim: Option<Victim>,
    /// When the flows settled at their fair shares.
    pub convergence: Convergence,
    /// Per flow, per interval; None when the client wrote no series.
    pub series: Option<Series>,
    /// The switch's egress queue over time: [µs from its start, bytes].
    pub queue_samples: Vec<(f64, u64)>,
}

/// What a discipline's run ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ran {
    /// `soft` or `tcp`.
    pub transport: TransportKind,
    /// `--cc`: `dcqcn`, `none`; TCP's `cubic`.
    pub cc: String,
    /// `--recovery`, when given.
    pub recovery: Option<Recovery>,
    /// Whether the client checked every byte (`--validate`).
    pub validate: bool,
    /// The switch's discipline: `lossy`, `ecn`, `pfc`, `pfc-ecn`.
    pub switch: String,
    /// The client's command line.
    pub client_args: Vec<String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    /// Every process exited 0 and wrote what was asked of it.
    pub ok: bool,
    /// What went wrong, when not ok.
    pub error: Option<String>,
    /// The bulk client's exit code (None: killed, or never started).
    pub client_exit: Option<i32>,
    /// The bulk server's.
    pub server_exit: Option<i32>,
    /// The victim client's, when there was one.
    pub victim_exit: Option<i32>,
    /// The switch's.
    pub switch_exit: Option<i32>,
}

/// One flow (one queue pair, or one TCP connection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Flow {
    /// Its index, from 0.
    pub flow: u32,
    /// Its queue pair number (RoCE).
    pub qpn: Option<u32>,
    /// Payload bytes it delivered.
    pub bytes: u64,
    /// Its goodput over the run, Gb/s.
    pub goodput_gbps: f64,
    /// Payload bytes it sent again (TCP: from TCP_INFO).
    pub retransmitted_bytes: Option<u64>,
    /// CE-marked packets its receiver counted.
    pub ce_marked_packets: Option<u64>,
    /// CNPs its receiver sent.
    pub cnps_sent: Option<u64>,
    /// CNPs its sender handled.
    pub cnps_handled: Option<u64>,
    /// Times DCQCN cut its rate.
    pub rate_cuts: Option<u64>,
    /// The lowest rate DCQCN paced it at, Gb/s.
    pub rate_lowest_gbps: Option<f64>,
}

/// A run's totals.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Totals {
    /// Sum of the flows' goodputs, Gb/s.
    pub goodput_gbps: f64,
    /// That ÷ the bottleneck's rate.
    pub goodput_fraction: Option<f64>,
    /// Jain's fairness index over the flows' goodputs, whole run.
    pub jain: Option<f64>,
    /// Jain's index over the flows' goodputs in steady state (from `steady_from_s` to the end).
    pub jain_steady: Option<f64>,
    /// Where steady state was taken from, seconds into the run.
    pub steady_from_s: Option<f64>,
    /// Why: `converged`, `second half (never converged)`, or why there is none.
    pub steady_basis: String,
    /// Bytes offered to the bottleneck (switch).
    pub offered_bytes: Option<u64>,
    /// Packets the switch dropped at its egress (buffer full).
    pub drops: Option<u64>,
    /// Packets dropped in PFC headroom (the queue full although paused upstream).
    pub headroom_drops: Option<u64>,
    /// Packets the switch marked CE.
    pub marks: Option<u64>,
    /// CE-marked packets the receiver counted.
    pub ce_marked_packets: Option<u64>,
    /// CNPs the receiver sent.
    pub cnps_sent: Option<u64>,
    /// CNPs the senders handled.
    pub cnps_handled: Option<u64>,
    /// DCQCN rate cuts.
    pub rate_cuts: Option<u64>,
    /// Payload bytes sent again.
    pub retransmitted_bytes: Option<u64>,
    /// PFC pause frames the switch sent upstream.
    pub pause_frames_sent: Option<u64>,
    /// Pause frames the senders counted (`rx_prio{N}_pause`).
    pub pause_frames_received: Option<u64>,
    /// Time the switch held its upstream paused, ms.
    pub paused_ms_switch: Option<f64>,
    /// Time the senders were paused (`rx_prio{N}_pause_duration`), ms.
    pub paused_ms_senders: Option<f64>,
    /// The switch queue's peak, bytes.
    pub max_queue_bytes: Option<u64>,
}

/// The victim's one-way latency (`roce_write_lat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Victim {
    /// Samples.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: Option<f64>,
    /// p99, µs; None when withheld.
    pub p99_us: Option<f64>,
    /// p99.9, µs; None when withheld.
    pub p99_9_us: Option<f64>,
    /// Maximum, µs.
    pub max_us: Option<f64>,
    /// Why a percentile is null: `p99.9 needs 10,000 samples (10 beyond it); this result has 2,000`.
    pub withheld: Vec<String>,
    /// The whole distribution, ns (HdrHistogram V2, as in a result's JSON).
    #[serde(with = "histogram_serde")]
    pub histogram: hdrhistogram::Histogram<u64>,
}

/// Time to converge.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Convergence {
    /// Seconds into the run; None when the flows never converged.
    pub time_s: Option<f64>,
    /// Why it is null.
    pub reason: Option<String>,
}

/// Per-flow series from the client's `--qp-series`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Series {
    /// The interval asked for, ms.
    pub interval_ms: u64,
    /// Each sample's time from the run's start, ms.
    pub t_ms: Vec<f64>,
    /// Cumulative payload bytes, `bytes[flow][sample]`.
    pub bytes: Vec<Vec<u64>>,
    /// Goodput over each interval (ending at that sample), Gb/s, `gbps[flow][sample]`.
    pub gbps: Vec<Vec<f64>>,
}

impl Ran {
    /// What `d` runs, by the client's command line `client_args` (validated when it has
    /// `--validate`).
    pub(crate) fn of(d: Discipline, client_args: Vec<String>) -> Ran {
        Ran {
            transport: d.transport(),
            cc: d.cc().into(),
            recovery: d.recovery(),
            validate: client_args.iter().any(|a| a == "--validate"),
            switch: d.switch().into(),
            client_args,
        }
    }
}

impl Victim {
    /// The victim's figures from its latency histogram (ns), each percentile withheld by `stats`'
    /// rule (10 samples beyond it).
    pub(crate) fn from_histogram(histogram: hdrhistogram::Histogram<u64>) -> Victim {
        use crate::stats::{held_value_at_percentile, withheld_because};
        let samples = histogram.len();
        let us = |ns: u64| ns as f64 / 1000.0;
        let mut withheld = Vec::new();
        let mut at = |pct: f64| {
            let held = held_value_at_percentile(&histogram, pct).map(us);
            if held.is_none() {
                withheld.push(withheld_because(samples, pct));
            }
            held
        };
        let (p50_us, p99_us, p99_9_us) = (at(50.0), at(99.0), at(99.9));
        Victim {
            samples,
            p50_us,
            p99_us,
            p99_9_us,
            max_us: (samples > 0).then(|| us(histogram.max())),
            withheld,
            histogram,
        }
    }
}

impl CongestionDoc {
    /// The run of `d`, when the study ran it.
    pub(crate) fn run(&self, d: Discipline) -> Option<&DisciplineRun> {
        self.runs.iter().find(|r| r.discipline == d)
    }

    /// A run's victim p99 ÷ the idle victim's; None when either is withheld or missing.
    pub(crate) fn victim_p99_vs_idle(&self, run: &DisciplineRun) -> Option<f64> {
        let loaded = run.victim.as_ref()?.p99_us?;
        let idle = self.idle_victim.as_ref()?.p99_us?;
        (idle > 0.0).then(|| loaded / idle)
    }
}

#[cfg(test)]
pub(crate) mod testdata;
#[cfg(test)]
mod tests;
