//! `--io`: which I/O backend carries the soft transport's packets.

use serde::Serialize;

/// Which I/O backend carries the soft transport's packets (`--io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoKind {
    /// A UDP socket on port 4791: RoCE v2 only, unprivileged.
    Udp,
    /// AF_PACKET raw frames: RoCE v1 and v2, needs CAP_NET_RAW.
    Packet,
}

impl IoKind {
    /// Every backend, in the order `--help` lists them.
    pub const ALL: [IoKind; 2] = [IoKind::Udp, IoKind::Packet];

    /// `udp` or `packet`, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Udp => "udp",
            IoKind::Packet => "packet",
        }
    }
}

// `--io udp|packet`.
value_enum!(IoKind {
    Udp => "A UDP socket on port 4791 (RoCE v2 only, unprivileged)",
    Packet => "AF_PACKET raw frames (RoCE v1 and v2, needs CAP_NET_RAW)",
});
