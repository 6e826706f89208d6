//! The soft endpoint's counters ([`SoftCounters`], [`DropSummary`]): what `-v` prints and the JSON
//! report carries, summed over the endpoint's own receive path and every engine.

use serde::Serialize;

use super::cc::CcCounters;
use super::io::impair::ImpairStats;
use super::pfc::PfcCounters;
use super::rc::{Counters, NakCounts, ProtocolDrops};
use super::unreliable::UnreliableCounters;

/// Received packets dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropSummary {
    /// The ICRC did not match.
    pub bad_icrc: u64,
    /// No queue pair of this endpoint has the BTH.DestQP.
    pub unknown_qpn: u64,
    /// Too short, cut (truncated), inconsistent lengths, or a header RoCE never sends.
    pub malformed: u64,
    /// Addressed to another host or GID, or of the other RoCE version.
    pub not_for_us: u64,
    /// For one of our queue pairs, but from another address (RoCE v2) or GID (v1) than the peer it is
    /// connected to (rxe's `check_addr`).
    pub wrong_source: u64,
    /// Zero-length UDP datagrams.
    pub empty: u64,
    /// Dropped by an engine, by reason. The JSON report gives their total under `protocol`, then
    /// each reason as a key of its own.
    #[serde(flatten)]
    pub protocol: ProtocolDrops,
}

/// The engines' drops as the report's `drops` holds them: `protocol`, their total (derived, so it
/// always matches the reasons), then each reason by its field's name.
impl Serialize for ProtocolDrops {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let reasons = self.by_name();
        let mut m = s.serialize_map(Some(1 + reasons.len()))?;
        m.serialize_entry("protocol", &self.total())?;
        for (name, n) in reasons {
            m.serialize_entry(name, &n)?;
        }
        m.end()
    }
}

/// The counters `-v` prints and the JSON report carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SoftCounters {
    /// Packets received from the backend.
    pub rx_packets: u64,
    /// Packets handed to the backend.
    pub tx_packets: u64,
    /// Receive syscalls that returned packets.
    pub rx_batches: u64,
    /// Transmit syscalls.
    pub tx_batches: u64,
    /// Request packets retransmitted (go-back-N or selective repeat).
    pub retransmitted_packets: u64,
    /// Payload bytes sent again: request data resent and READ responses replayed (what the loss
    /// cost on the wire beyond the data itself).
    pub(crate) retransmitted_bytes: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Duplicate requests received.
    pub duplicate_requests: u64,
    /// ACKs (and atomic ACKs) the responders sent, re-ACKs of duplicates included.
    pub acks_sent: u64,
    /// ACKs (and atomic ACKs) the requesters accepted.
    pub(crate) acks_received: u64,
    /// NAKs sent, by kind.
    pub naks_sent: NakCounts,
    /// NAKs received, by kind.
    pub naks_received: NakCounts,
    /// Remote accesses refused for a bad rkey, bounds or rights (out-of-bounds access).
    pub remote_access_violations: u64,
    /// RoCE v2 packets received for a queue pair marked Congestion Experienced (ECN 11), as
    /// ConnectX counts them (`hw_counters/np_ecn_marked_roce_packets`).
    pub np_ecn_marked_roce_packets: u64,
    /// Receive drops, by reason.
    pub drops: DropSummary,
    /// What the deliberate impairment did to transmitted packets.
    pub impair: ImpairStats,
    /// What it did to received packets (`rx:` keys); absent when nothing.
    #[serde(skip_serializing_if = "ImpairStats::is_empty")]
    pub(crate) impair_rx: ImpairStats,
    /// UC and UD queue pairs (`-c`): messages delivered, cut short, and packets lost or dropped;
    /// absent for RC.
    #[serde(skip_serializing_if = "UnreliableCounters::is_empty")]
    pub unreliable: UnreliableCounters,
    /// Congestion control (`--cc dcqcn`), summed over the RC queue pairs: CNPs sent and handled,
    /// rate cuts, the pacing rate now and the lowest a cut left; absent when nothing happened.
    #[serde(skip_serializing_if = "CcCounters::is_empty")]
    pub cc: CcCounters,
    /// PFC and global pause frames received (AF_PACKET), as mlx5 names them: per priority that
    /// saw one, `rx_prio{N}_pause`, `_pause_duration` (µs held) and `_resume`; absent when none came.
    #[serde(skip_serializing_if = "PfcCounters::is_empty")]
    pub pfc: PfcCounters,
}

impl SoftCounters {
    /// Adds one engine's counters.
    pub(crate) fn add_engine(&mut self, k: &Counters) {
        self.retransmitted_packets += k.retransmitted_packets;
        self.retransmitted_bytes += k.retransmitted_bytes;
        self.timeouts += k.timeouts;
        self.duplicate_requests += k.duplicate_requests;
        self.acks_sent += k.acks_sent;
        self.acks_received += k.acks_received;
        self.naks_sent.add(&k.naks_sent);
        self.naks_received.add(&k.naks_received);
        self.remote_access_violations += k.remote_access_violations;
        let d = &k.drops;
        let c = &mut self.drops;
        c.unknown_qpn += d.unknown_qpn;
        c.malformed += d.malformed;
        c.protocol.add(&d.protocol);
    }
}

/// What a timeout on a clean run is, said beside the count: between roceperf peers the timer is the
/// measured round trip's (at least 0.25 ms; before the first ACK, the floor alone), so a peer that
/// answers late (descheduled on a busy host, or still faulting in its buffer at the start) times
/// out as a lost packet would; the probe that follows costs one packet, and the peer counts the
/// late ones among its duplicate requests (issue 34: every timeout of the clean runs measured).
const TIMEOUTS_WHY: &str = " (no ACK within the round-trip timer: a late peer counts too, and counts \
                            it among its duplicate requests)";

impl std::fmt::Display for SoftCounters {
    /// The `-v` block: one line per family of counters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |k: &NakCounts| {
            format!(
                "psn-sequence {} rnr {} invalid-request {} remote-access {} remote-operational {}",
                k.psn_seq, k.rnr, k.invalid_request, k.remote_access, k.remote_operational
            )
        };
        let d = &self.drops;
        let p = &d.protocol;
        writeln!(
            f,
            " packets: sent {} in {} batches, received {} in {} batches",
            self.tx_packets, self.tx_batches, self.rx_packets, self.rx_batches
        )?;
        writeln!(
            f,
            " retransmitted packets {}, timeouts {}{}, duplicate requests {}, ACKs sent {} received {}",
            self.retransmitted_packets,
            self.timeouts,
            if self.timeouts > 0 { TIMEOUTS_WHY } else { "" },
            self.duplicate_requests,
            self.acks_sent,
            self.acks_received
        )?;
        writeln!(
            f,
            " ECN: CE-marked RoCE packets received (np_ecn_marked_roce_packets) {}",
            self.np_ecn_marked_roce_packets
        )?;
        writeln!(f, " NAKs sent: {}", n(&self.naks_sent))?;
        writeln!(f, " NAKs received: {}", n(&self.naks_received))?;
        writeln!(
            f,
            " drops: bad-icrc {} unknown-qpn {} malformed {} not-for-us {} wrong-source {} empty {} protocol {} out-of-bounds-access {}",
            d.bad_icrc,
            d.unknown_qpn,
            d.malformed,
            d.not_for_us,
            d.wrong_source,
            d.empty,
            p.total(),
            self.remote_access_violations
        )?;
        writeln!(
            f,
            " protocol drops: out-of-sequence {} duplicate-unmatched {} stale-response {} bad-response {} response-queue-full {} qp-error {}",
            p.out_of_sequence,
            p.duplicate_unmatched,
            p.stale_response,
            p.bad_response,
            p.response_queue_full,
            p.qp_error
        )?;
        let u = &self.unreliable;
        if !u.is_empty() {
            writeln!(
                f,
                " UC/UD messages: sent {} received {} cut-short {}; PSN gaps {} ({} packets missing); dropped: discarded {} no-receive {} q_key {} length {} access {}",
                u.messages_sent,
                u.messages_received,
                u.messages_dropped,
                u.psn_gaps,
                u.packets_missing,
                u.packets_discarded,
                u.no_receive,
                u.qkey_mismatch,
                u.bad_length,
                u.access_violations
            )?;
        }
        let c = &self.cc;
        if !c.is_empty() {
            // A queue pair whose rate climbed back is unpaced: its current rate is none, not 0.
            let gbps = |kbps: u64| match kbps {
                0 => "unpaced".to_string(),
                k => format!("{:.3} Gb/s", k as f64 / 1e6),
            };
            writeln!(
                f,
                " congestion (DCQCN): CNPs sent {} handled {}, rate cuts {}, pacing now {}, lowest {}",
                c.np_cnp_sent,
                c.rp_cnp_handled,
                c.rp_rate_cuts,
                gbps(c.rp_current_rate_kbps),
                if c.rp_rate_cuts == 0 {
                    "no cut".to_string()
                } else {
                    gbps(c.rp_min_rate_kbps)
                }
            )?;
        }
        if !self.pfc.is_empty() {
            writeln!(f, " {}", self.pfc)?;
        }
        for (i, what) in [
            (&self.impair, ""),
            (&self.impair_rx, " of received packets"),
        ] {
            if !i.is_empty() {
                writeln!(
                    f,
                    " deliberate impairment{what}: dropped {} duplicated {} reordered {} corrupted {} delayed {}",
                    i.dropped, i.duplicated, i.reordered, i.corrupted, i.delayed
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_print_every_drop_reason() {
        let mut c = SoftCounters::default();
        c.drops.bad_icrc = 3;
        c.drops.protocol.stale_response = 4;
        c.drops.protocol.qp_error = 5;
        c.acks_sent = 6;
        c.naks_received.psn_seq = 2;
        // The JSON report keeps its field names.
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["naks_received"]["psn_sequence"], 2, "{json}");
        // The engines' protocol reasons are flattened in after their total, as keys of their own.
        let drops: Vec<_> = json["drops"].as_object().unwrap().keys().collect();
        assert_eq!(
            drops,
            [
                "bad_icrc",
                "unknown_qpn",
                "malformed",
                "not_for_us",
                "wrong_source",
                "empty",
                "protocol",
                "out_of_sequence",
                "duplicate_unmatched",
                "stale_response",
                "bad_response",
                "response_queue_full",
                "qp_error"
            ]
        );
        assert_eq!(json["drops"]["stale_response"], 4, "{json}");
        // Their total is derived from them, however they were counted.
        assert_eq!(json["drops"]["protocol"], 9, "{json}");
        let text = c.to_string();
        for needle in [
            "bad-icrc 3",
            "stale-response 4",
            "qp-error 5",
            "out-of-sequence 0",
            "duplicate-unmatched 0",
            "bad-response 0",
            "response-queue-full 0",
            "ACKs sent 6",
            "duplicate requests 0",
            "unknown-qpn 0",
            "malformed 0",
            "wrong-source 0",
            "empty 0",
            "protocol 9 out-of-bounds-access 0",
            "psn-sequence 2",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!text.contains("impairment"));
        assert!(
            text.contains(", timeouts 0, duplicate"),
            "no timeout, no explanation: {text}"
        );
        c.timeouts = 2;
        assert!(
            c.to_string()
                .contains(", timeouts 2 (no ACK within the round-trip timer: a late peer"),
            "{c}"
        );
    }

    #[test]
    fn engine_drops_add_up_into_protocol() {
        let mut k = Counters::default();
        k.drops.protocol.stale_response = 2;
        k.drops.protocol.qp_error = 1;
        k.drops.unknown_qpn = 4;
        k.acks_sent = 3;
        let mut c = SoftCounters::default();
        c.add_engine(&k);
        c.add_engine(&k);
        assert_eq!(c.drops.protocol.total(), 6);
        assert_eq!(c.drops.protocol.stale_response, 4);
        assert_eq!(c.drops.unknown_qpn, 8);
        assert_eq!(c.acks_sent, 6);
    }
}
