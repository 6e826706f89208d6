//! [`RoceMtu`]: the five IB path MTUs (256..4096 bytes of payload per packet) and the `enum ibv_mtu`
//! codes they travel as; the soft and verbs transports and the perftest handshake share it.

use std::fmt;

/// A RoCE path MTU: 256, 512, 1024, 2048 or 4096 bytes of payload per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoceMtu(u32);

impl RoceMtu {
    /// Every RoCE MTU, smallest first (IB enum values 1..=5).
    pub const ALL: [RoceMtu; 5] = [
        RoceMtu(256),
        RoceMtu(512),
        RoceMtu(1024),
        RoceMtu(2048),
        RoceMtu(4096),
    ];

    /// The smallest RoCE MTU (256).
    pub(crate) const MIN: RoceMtu = RoceMtu(256);

    /// The MTU of `bytes` if it is one of the five RoCE MTUs.
    pub(crate) fn from_bytes(bytes: u32) -> Option<RoceMtu> {
        RoceMtu::ALL.into_iter().find(|m| m.0 == bytes)
    }

    /// The largest RoCE MTU whose packets, with `overhead` header bytes, fit in `link_mtu`.
    pub(crate) fn fitting(link_mtu: u32, overhead: u32) -> Option<RoceMtu> {
        let room = link_mtu.checked_sub(overhead)?;
        RoceMtu::ALL.into_iter().rev().find(|m| m.0 <= room)
    }

    /// The largest RoCE MTU not above `bytes`, and 256 below that.
    pub(crate) fn at_most(bytes: u32) -> RoceMtu {
        RoceMtu::fitting(bytes, 0).unwrap_or(RoceMtu::MIN)
    }

    /// The MTU of an `enum ibv_mtu` code (`IBV_MTU_256` = 1 ... `IBV_MTU_4096` = 5).
    pub(crate) fn from_ib_enum(code: u32) -> Option<RoceMtu> {
        match code {
            1..=5 => Some(RoceMtu(128 << code)),
            _ => None,
        }
    }

    /// Payload bytes per packet.
    pub fn bytes(self) -> u32 {
        self.0
    }

    /// The IB enum value (`IBV_MTU_256` = 1 ... `IBV_MTU_4096` = 5).
    pub(crate) fn ib_enum(self) -> u8 {
        (self.0.trailing_zeros() - 7) as u8
    }
}

impl fmt::Display for RoceMtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_codes_round_trip() {
        for (code, bytes) in [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
            let m = RoceMtu::from_ib_enum(code).unwrap();
            assert_eq!(m.bytes(), bytes);
            assert_eq!(u32::from(m.ib_enum()), code);
            assert_eq!(RoceMtu::at_most(bytes), m);
        }
        assert_eq!(RoceMtu::from_ib_enum(0), None);
        assert_eq!(RoceMtu::from_ib_enum(6), None);
        assert_eq!(RoceMtu::at_most(9000).ib_enum(), 5);
        assert_eq!(RoceMtu::at_most(100).ib_enum(), 1);
        assert_eq!(RoceMtu::from_bytes(1000), None);
    }
}
