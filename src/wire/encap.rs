//! What each [`Encapsulation`] (RoCE v1, v2 over IPv4, v2 over IPv6) is called and costs: the name the
//! transports print and the header bytes it takes out of the link MTU.

use std::fmt;

/// Which encapsulation a frame uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encapsulation {
    /// RoCE v1 (GRH).
    V1,
    /// RoCE v2 over IPv4.
    V2v4,
    /// RoCE v2 over IPv6.
    V2v6,
}

impl Encapsulation {
    /// Every encapsulation, v1 first.
    pub const ALL: [Encapsulation; 3] =
        [Encapsulation::V1, Encapsulation::V2v4, Encapsulation::V2v6];

    /// Bytes inside the link MTU (i.e. after the Ethernet header) that are not RDMA payload, for the
    /// worst data packet: network header, UDP, BTH (12), RETH (16) + ImmDt (4) on WRITE_ONLY_WITH_IMM,
    /// and the ICRC (4). Pad bytes never matter because a full-MTU payload is a multiple of 4.
    ///
    /// rxe subtracts a flat 80 (`RXE_MAX_HDR_LENGTH`); that equals or exceeds ours except for IPv6,
    /// where 84 is the truth. Both give the same RoCE MTU for every common link MTU (1500, 9000, 65536).
    pub const fn mtu_overhead(self) -> u32 {
        const IB_MAX: u32 = 12 + 16 + 4 + 4;
        match self {
            Encapsulation::V1 => 40 + IB_MAX,
            Encapsulation::V2v4 => 20 + 8 + IB_MAX,
            Encapsulation::V2v6 => 40 + 8 + IB_MAX,
        }
    }
}

impl fmt::Display for Encapsulation {
    /// `RoCE v1`, `RoCE v2/IPv4`, `RoCE v2/IPv6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encapsulation::V1 => "RoCE v1",
            Encapsulation::V2v4 => "RoCE v2/IPv4",
            Encapsulation::V2v6 => "RoCE v2/IPv6",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_overheads() {
        let got: Vec<(String, u32)> = Encapsulation::ALL
            .iter()
            .map(|e| (e.to_string(), e.mtu_overhead()))
            .collect();
        assert_eq!(
            got,
            [
                ("RoCE v1".to_string(), 76),
                ("RoCE v2/IPv4".to_string(), 64),
                ("RoCE v2/IPv6".to_string(), 84)
            ]
        );
    }
}
