//! What `roce_switch` (the congested link's userspace switch) did: its settings, its egress port's
//! queue, its PFC frames and each port's counts, as `--stats FILE` holds them
//! (`results/schema/switch.schema.json`). The switch writes it; `roce_compare --congestion` reads it.

use serde::{Deserialize, Serialize};
use std::path::Path;

use super::files::{WriteError, replace_with};

/// The `schema` field of a switch's stats.
pub const SWITCH_SCHEMA: &str = "roceperf-switch/1";

/// A switch run's settings and counts.
/// The egress port's buffer and thresholds: what the switch ran with, and what a congestion study
/// records of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// The egress buffer, bytes of frames.
    pub buffer_bytes: u64,
    /// ECN: the queue below which nothing is marked, bytes.
    pub kmin_bytes: u64,
    /// ECN: the queue at which the marking probability reaches `pmax`, bytes.
    pub kmax_bytes: u64,
    /// ECN: the marking probability at `kmax_bytes`.
    pub pmax: f64,
    /// PFC: the lossless priority's queue above which the switch pauses its senders, bytes.
    pub xoff_bytes: u64,
    /// PFC: the queue below which it resumes them, bytes.
    pub xon_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchStats {
    /// [`SWITCH_SCHEMA`].
    pub schema: String,
    /// `lossy`, `ecn` or `pfc`.
    pub discipline: String,
    /// The egress port's drain rate, Gb/s (wire bits: preamble, IFG and FCS counted).
    pub rate_gbps: f64,
    /// The buffer and the ECN and PFC thresholds it ran with (flattened: same keys).
    #[serde(flatten)]
    pub thresholds: Thresholds,
    /// PFC: the lossless priority.
    pub pfc_prio: u8,
    /// ECN: the one priority RED acted on (`--ecn-prio`); absent: every priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_prio: Option<u8>,
    /// From the first frame in to the stop, seconds.
    pub duration_s: f64,
    /// CPU time the switch used from its start to the stop, user and system, seconds: what it
    /// took from the cores the endpoints run on (0 in files written before it was recorded).
    #[serde(default)]
    pub cpu_s: f64,
    /// The egress (bottleneck) port's queue.
    pub egress: EgressStats,
    /// Pause frames sent.
    pub pfc: PfcStats,
    /// Each port's frames.
    pub ports: Vec<PortStats>,
    /// `[t_us, queued bytes]` every `--sample-us` (empty without it); t from the first frame in.
    pub queue_samples: Vec<[u64; 2]>,
}

/// The bottleneck's queue: what was offered to it and what became of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EgressStats {
    /// Frames towards the egress port.
    pub offered_packets: u64,
    /// Their bytes (Ethernet header on, FCS excluded).
    pub offered_bytes: u64,
    /// Frames sent out of the egress port.
    pub forwarded_packets: u64,
    /// Their bytes.
    pub forwarded_bytes: u64,
    /// Frames dropped: tail drop (buffer full), RED drop of non-ECN-capable IP frames above Kmin
    /// (ecn), headroom drops (pfc).
    pub dropped_packets: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// PFC: frames of the lossless priority that did not fit although the senders were paused.
    pub headroom_drops: u64,
    /// ECN: frames marked CE.
    pub marked_packets: u64,
    /// Frames still queued when the switch stopped (offered = forwarded + dropped + this).
    pub queued_at_stop_packets: u64,
    /// Frames larger than the port's MTU allows, refused at any port (GSO/GRO left on somewhere).
    pub oversize_drops: u64,
    /// The longest queue seen, bytes (the frame that made it included).
    pub max_queue_bytes: u64,
    /// The queue's time-weighted mean over the run, bytes.
    pub mean_queue_bytes: f64,
    /// Bytes sent out of the egress port per second of the time it was busy, Gb/s of wire bits:
    /// how closely departures kept to `rate_gbps` (the switch sleeps between departures).
    pub achieved_busy_gbps: f64,
    /// How late frames left against their scheduled departure, mean, ns (wake-up jitter).
    pub departure_late_mean_ns: f64,
    /// The latest a frame left, ns.
    pub departure_late_max_ns: u64,
}

/// The PFC frames the switch sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PfcStats {
    /// Pause frames (quanta > 0), refreshes included, counted once per port.
    pub pause_frames_sent: u64,
    /// Resume frames (quanta 0), counted once per port.
    pub resume_frames_sent: u64,
    /// Time any ingress port was held paused, ns.
    pub paused_ns: u64,
}

/// One port of the switch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortStats {
    /// The interface.
    pub name: String,
    /// Frames received on it.
    pub rx_packets: u64,
    /// Frames sent out of it (pause frames included).
    pub tx_packets: u64,
    /// Pause and resume frames sent out of it.
    pub pause_frames_sent: u64,
    /// Frames the kernel dropped before the switch read them (its socket's receive buffer full).
    pub rx_kernel_drops: u64,
}

/// Why a switch's stats could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SwitchStatsError {
    /// The file could not be read.
    #[error("cannot read the switch's stats {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS's reason.
        source: std::io::Error,
    },
    /// It is not a switch's stats of this version.
    #[error("{path} is not roce_switch stats ({SWITCH_SCHEMA}): {detail}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
}

impl SwitchStats {
    /// What running the switch cost the machine, for a study's notes, prefixed with `label`: its
    /// share of a core (taken from the endpoints on that core), the rate its port kept while busy
    /// and its latest departure; `None` when it recorded no CPU time (a file from before it did).
    pub fn load_note(&self, label: &str) -> Option<String> {
        if self.cpu_s <= 0.0 || self.duration_s <= 0.0 {
            return None;
        }
        Some(format!(
            "{label}: the switch used {:.0}% of a core ({:.2} s of CPU in {:.1} s; its wake-ups \
             and the kernel's delivery of the frames it sends count), taken from the endpoints on \
             its core; its port sent {:.3} Gb/s of its {} while busy, the latest frame {:.2} ms \
             behind its schedule",
            100.0 * self.cpu_s / self.duration_s,
            self.cpu_s,
            self.duration_s,
            self.egress.achieved_busy_gbps,
            self.rate_gbps,
            self.egress.departure_late_max_ns as f64 / 1e6,
        ))
    }

    /// Writes the stats whole to `path` (through a temporary file renamed over it).
    pub fn write(&self, path: &Path) -> Result<(), WriteError> {
        replace_with(path, |w| {
            serde_json::to_writer_pretty(&mut *w, self)?;
            w.write_all(b"\n")
        })
    }

    /// Reads stats a switch wrote.
    pub fn read(path: &Path) -> Result<SwitchStats, SwitchStatsError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SwitchStatsError::Read {
            path: name.clone(),
            source,
        })?;
        let stats: SwitchStats =
            serde_json::from_str(&text).map_err(|e| SwitchStatsError::Format {
                path: name.clone(),
                detail: e.to_string(),
            })?;
        if stats.schema != SWITCH_SCHEMA {
            return Err(SwitchStatsError::Format {
                path: name,
                detail: format!("schema {:?}", stats.schema),
            });
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> SwitchStats {
        SwitchStats {
            schema: SWITCH_SCHEMA.into(),
            discipline: "ecn".into(),
            rate_gbps: 2.0,
            thresholds: Thresholds {
                buffer_bytes: 1 << 20,
                kmin_bytes: 5_000,
                kmax_bytes: 200_000,
                pmax: 0.01,
                xoff_bytes: 0,
                xon_bytes: 0,
            },
            pfc_prio: 3,
            ecn_prio: Some(3),
            duration_s: 1.5,
            cpu_s: 0.25,
            egress: EgressStats {
                offered_packets: 10,
                marked_packets: 2,
                ..EgressStats::default()
            },
            pfc: PfcStats::default(),
            ports: vec![PortStats {
                name: "s".into(),
                rx_packets: 10,
                ..PortStats::default()
            }],
            queue_samples: vec![[0, 0], [100, 4200]],
        }
    }

    #[test]
    fn the_load_note_gives_the_share_of_a_core_and_the_rate_kept() {
        let mut s = stats();
        s.duration_s = 12.0;
        s.cpu_s = 9.0;
        s.rate_gbps = 1.0;
        s.egress.achieved_busy_gbps = 0.971;
        s.egress.departure_late_max_ns = 7_450_000;
        let n = s.load_note("ecn-dcqcn").unwrap();
        assert!(
            n.starts_with("ecn-dcqcn: the switch used 75% of a core (9.00 s of CPU in 12.0 s"),
            "{n}"
        );
        assert!(n.contains("0.971 Gb/s of its 1 while busy"), "{n}");
        assert!(n.contains("7.45 ms behind its schedule"), "{n}");
        s.cpu_s = 0.0;
        assert_eq!(s.load_note("pfc"), None, "an old stats file records no CPU");
    }

    #[test]
    fn stats_round_trip_through_their_file_and_a_stranger_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sw.json");
        let stats = stats();
        stats.write(&path).unwrap();
        assert_eq!(SwitchStats::read(&path).unwrap(), stats);
        std::fs::write(&path, r#"{"schema":"other"}"#).unwrap();
        let err = SwitchStats::read(&path).unwrap_err().to_string();
        assert!(err.contains("is not roce_switch stats"), "{err}");
        let err = SwitchStats::read(&dir.path().join("none.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot read the switch's stats"), "{err}");
    }
}
