//! A run's place in a loss sweep (`roce_compare --loss-sweep`): the loss it met, how that loss was
//! made, and what repairing it cost. Carried by [`CompareRun::loss`](super::CompareRun::loss).

use crate::params::Recovery;
use serde::{Deserialize, Serialize};

/// One run of a loss sweep: a transport (and recovery) at one loss rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    /// The curve it belongs to: `RoCE v2 gbn`, `RoCE v2 sr`, `RoCE v1 gbn`, `TCP`.
    pub series: String,
    /// Probability that a packet is lost, each direction, 0.0..=1.0.
    pub rate: f64,
    /// Mean length of a loss burst (Gilbert–Elliott), when losses came in bursts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<f64>,
    /// The loss recovery of a RoCE run; absent for TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// How the loss was made, e.g. `iptables statistic (INPUT, both namespaces)`.
    pub via: String,
    /// Payload bytes the run delivered.
    pub delivered_bytes: u64,
    /// Payload bytes sent again (both sides; TCP: retransmitted segments × MSS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmitted_bytes: Option<u64>,
    /// NAKs (PSN sequence error) received; TCP: fast retransmissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naks: Option<u64>,
    /// Retransmission timeouts, both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<u64>,
    /// Goodput relative to the same series' loss-free run (bandwidth tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<f64>,
}

impl LossPoint {
    /// Retransmitted bytes per delivered byte.
    pub fn retransmitted_per_byte(&self) -> Option<f64> {
        let r = self.retransmitted_bytes?;
        (self.delivered_bytes > 0).then(|| r as f64 / self.delivered_bytes as f64)
    }
}
