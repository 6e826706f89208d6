//! What the wire would allow: a comparison's port (speed and MTU, and where they came from) and,
//! per bandwidth row and size, its protocol's goodput ceiling there and the row's share of it.
//!
//! The arithmetic is `compare::ceiling`'s; these are the figures it leaves in a comparison.

use super::set::CompareRun;
use serde::{Deserialize, Serialize};

/// The port the ceilings are worked out for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WirePort {
    /// Speed, 10^9 bit/s.
    pub speed_gbps: f64,
    /// Link MTU, bytes after the Ethernet header.
    pub mtu: u32,
    /// Where the speed and MTU came from: `--link-speed 100G`, `/sys/class/net/eth0/speed`.
    pub source: String,
}

/// One message size's goodput ceiling for a row's protocol at the comparison's port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireCeiling {
    /// Message size in bytes.
    #[serde(rename = "size_bytes")]
    pub size: u64,
    /// `RoCE v1`, `RoCE v2/IPv4`, `TCP/IPv4`.
    pub protocol: String,
    /// The largest payload of one packet: the RoCE MTU, or TCP's MSS.
    pub payload_mtu: u32,
    /// Packets a message takes in the direction of its data (TCP: segments, a fraction when
    /// messages share them).
    pub packets: f64,
    /// Bytes a message takes on the line that way: headers, ICRC, Ethernet's framing, preamble and gap.
    pub wire_bytes: f64,
    /// The goodput ceiling, Gb/s of payload (ACKs ride the other direction).
    pub gbps: f64,
    /// The row's Gb/s ÷ the ceiling.
    pub share: f64,
}

impl CompareRun {
    /// The wire's ceiling at `size`, when the comparison has a port.
    pub fn ceiling_at(&self, size: u64) -> Option<&WireCeiling> {
        self.ceilings.iter().find(|c| c.size == size)
    }
}
