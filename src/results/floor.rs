//! What a comparison row carries beside its figures: the host path its packets took, and that path's
//! floor (a busy-polling reference over the same path, measured in the same run) with the stack's own
//! cost above it.
//!
//! Rows of one path differ by protocol; rows of different paths differ, first, by what the host
//! charges for each path. The floor is what tells the two apart.

use super::set::CompareRun;
use crate::params::{RoceVersion, TransportKind};
use serde::{Deserialize, Serialize};

/// The way a row's packets went through the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostPath {
    /// AF_PACKET raw frames, one frame per RoCE packet: RoCE v1, and v2 with the same batching.
    AfPacket,
    /// A UDP socket with GSO super-datagrams: soft RoCE v2's unprivileged default.
    UdpGso,
    /// The kernel's TCP socket.
    TcpSocket,
    /// An RDMA NIC through verbs: the NIC moves the packets, no host path.
    RdmaNic,
}

impl HostPath {
    /// As the files spell it: `af_packet`, `udp_gso`, `tcp_socket`, `rdma_nic`.
    pub fn name(self) -> &'static str {
        match self {
            HostPath::AfPacket => "af_packet",
            HostPath::UdpGso => "udp_gso",
            HostPath::TcpSocket => "tcp_socket",
            HostPath::RdmaNic => "rdma_nic",
        }
    }

    /// How a label names it: `AF_PACKET`, `UDP socket`, `TCP socket`, `RDMA NIC`.
    pub fn short(self) -> &'static str {
        match self {
            HostPath::AfPacket => "AF_PACKET",
            HostPath::UdpGso => "UDP socket",
            HostPath::TcpSocket => "TCP socket",
            HostPath::RdmaNic => "RDMA NIC",
        }
    }

    /// The path a transport takes by default: verbs the NIC, TCP its socket, soft RoCE v1 AF_PACKET
    /// and soft RoCE v2 its UDP socket (`--io`'s defaults).
    pub fn default_for(transport: TransportKind, roce: Option<RoceVersion>) -> HostPath {
        match (transport, roce) {
            (TransportKind::Verbs, _) => HostPath::RdmaNic,
            (TransportKind::Tcp, _) => HostPath::TcpSocket,
            (TransportKind::Soft, Some(RoceVersion::V1)) => HostPath::AfPacket,
            (TransportKind::Soft, _) => HostPath::UdpGso,
        }
    }
}

/// The label of a run that took `path`: `RoCE v2 (soft, AF_PACKET)`, `RoCE v2 (verbs)`, `TCP`.
pub fn path_label(transport: TransportKind, roce: Option<RoceVersion>, path: HostPath) -> String {
    match (transport, roce) {
        (TransportKind::Tcp, _) => "TCP".into(),
        (TransportKind::Verbs, r) => super::default_label(transport, r),
        (TransportKind::Soft, Some(r)) => format!("RoCE {r} (soft, {})", path.short()),
        (TransportKind::Soft, None) => format!("RoCE (soft, {})", path.short()),
    }
}

/// One message size's floor: what the path alone gives, and what the stack adds above it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Floor {
    /// Message size in bytes.
    #[serde(rename = "size_bytes")]
    pub size: u64,
    /// The reference that ran, as a command line: `roce_ref packet-pingpong -d veth0 -s 76`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Latency rows: the reference's median in the row's terms (one-way, or the whole round trip
    /// for READ and atomics), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    /// Latency rows: the row's median minus the floor's, µs: what the stack adds.
    #[serde(
        default,
        rename = "above_floor_us",
        skip_serializing_if = "Option::is_none"
    )]
    pub above_us: Option<f64>,
    /// Bandwidth rows: the payload Gb/s the reference's frame rate carries in the row's packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Bandwidth rows: the row's Gb/s ÷ the floor's.
    #[serde(
        default,
        rename = "share_of_floor",
        skip_serializing_if = "Option::is_none"
    )]
    pub share: Option<f64>,
    /// Why there is no floor, or what it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Floor {
    /// A floor that could not be measured at `size`, and why.
    pub fn missing(size: u64, why: impl Into<String>) -> Floor {
        Floor {
            size,
            note: Some(why.into()),
            ..Floor::default()
        }
    }

    /// The floor of `reference` for a latency row of median `median_us`: `floor_us` and what lies
    /// above it.
    pub fn latency(size: u64, reference: String, floor_us: f64, median_us: f64) -> Floor {
        Floor {
            size,
            reference: Some(reference),
            median_us: Some(floor_us),
            above_us: Some(median_us - floor_us),
            ..Floor::default()
        }
    }

    /// The floor of `reference` for a bandwidth row of `gbps`: `floor_gbps` and the row's share of
    /// it (None when the floor moved nothing).
    pub fn bandwidth(size: u64, reference: String, floor_gbps: f64, gbps: f64) -> Floor {
        Floor {
            size,
            reference: Some(reference),
            gbps: Some(floor_gbps),
            share: (floor_gbps > 0.0).then(|| gbps / floor_gbps),
            ..Floor::default()
        }
    }
}

impl CompareRun {
    /// The floor at `size`, if one was measured or noted.
    pub fn floor_at(&self, size: u64) -> Option<&Floor> {
        self.floors.iter().find(|f| f.size == size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_path_of_soft_runs_only() {
        let soft = TransportKind::Soft;
        let v1 = Some(RoceVersion::V1);
        let v2 = Some(RoceVersion::V2);
        assert_eq!(
            path_label(soft, v1, HostPath::AfPacket),
            "RoCE v1 (soft, AF_PACKET)"
        );
        assert_eq!(
            path_label(soft, v2, HostPath::UdpGso),
            "RoCE v2 (soft, UDP socket)"
        );
        assert_eq!(
            path_label(TransportKind::Verbs, v2, HostPath::RdmaNic),
            "RoCE v2 (verbs)"
        );
        assert_eq!(
            path_label(TransportKind::Tcp, None, HostPath::TcpSocket),
            "TCP"
        );
        assert_eq!(HostPath::default_for(soft, v2), HostPath::UdpGso);
        assert_eq!(HostPath::default_for(soft, v1), HostPath::AfPacket);
        for p in [
            HostPath::AfPacket,
            HostPath::UdpGso,
            HostPath::TcpSocket,
            HostPath::RdmaNic,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
    }

    #[test]
    fn a_floor_says_what_lies_above_it() {
        let f = Floor::latency(2, "roce_ref packet-pingpong -s 76".into(), 2.0, 2.5);
        assert_eq!(f.above_us, Some(0.5));
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["above_floor_us"], 0.5);
        assert_eq!(v["size_bytes"], 2);
        assert!(v.get("share_of_floor").is_none(), "{v}");
        let b = Floor::bandwidth(65536, "r".into(), 20.0, 15.0);
        assert_eq!(b.share, Some(0.75));
        assert_eq!(Floor::bandwidth(1, "r".into(), 0.0, 15.0).share, None);
        let m = Floor::missing(2, "roce_ref is missing");
        let back: Floor = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
