//! UDP header of RoCE v2 (8 bytes; roce-wire.md §2.5).

use super::field::{len16, need, set_u16};
use super::{Error, Result};

/// UDP destination port of RoCE v2 (`ROCE_V2_UDP_DPORT`).
pub(crate) const ROCE_V2_PORT: u16 = 4791;

/// Byte layout of the UDP header.
pub(super) mod field {
    use crate::wire::field::Field;

    /// Source port.
    pub(crate) const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub(crate) const DST_PORT: Field = 2..4;
    /// Length of header and payload.
    pub(crate) const LENGTH: Field = 4..6;
    /// Checksum (masked in the ICRC).
    pub(crate) const CHECKSUM: Field = 6..8;
}

header!(
    /// A view of a UDP header at the start of a buffer.
    UdpPacket, "UDP header", len = field::CHECKSUM.end;
    get {
        /// Source port (flow entropy on RoCE v2).
        pub src_port: u16 = field::SRC_PORT;
        /// Destination port (4791).
        pub dst_port: u16 = field::DST_PORT;
        /// Length, header included.
        pub len: u16 = field::LENGTH;
        /// Checksum (rxe sends 0; masked in the ICRC).
        pub checksum: u16 = field::CHECKSUM;
    }
);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Checks the Length field against the header size and the buffer.
    pub(crate) fn check_lengths(&self) -> Result<()> {
        self.check_len()?;
        let len = usize::from(self.len());
        if len < Self::LEN {
            return Err(Error::Malformed("UDP Length is shorter than its header"));
        }
        need("UDP datagram (Length)", len, self.b().len())
    }
    /// True when the Length field is 0 (never valid).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes after the header, up to Length. Needs `check_lengths`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[Self::LEN..usize::from(self.len())]
    }
}

/// The fields of a UDP header. Length is derived on emit; the checksum is kept as it was (RoCE masks it
/// in the ICRC and rxe sends 0), so that a parsed packet re-emits byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Checksum as sent (0 = none).
    pub checksum: u16,
}

impl UdpRepr {
    /// A RoCE v2 header to port 4791 from `src_port`, with no checksum, as rxe sends it.
    pub fn roce(src_port: u16) -> Self {
        UdpRepr {
            src_port,
            dst_port: ROCE_V2_PORT,
            checksum: 0,
        }
    }

    /// Reads a view after checking its lengths.
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<Self> {
        p.check_lengths()?;
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            checksum: p.checksum(),
        })
    }

    /// Writes the 8-byte header for `payload_len` bytes after it. Panics if `buf` is too short or the
    /// datagram exceeds 65535 bytes.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        let b = &mut buf[..UdpPacket::<&[u8]>::LEN];
        set_u16(b, field::SRC_PORT, self.src_port);
        set_u16(b, field::DST_PORT, self.dst_port);
        let len = len16("UDP datagram", UdpPacket::<&[u8]>::LEN + payload_len);
        set_u16(b, field::LENGTH, len);
        set_u16(b, field::CHECKSUM, self.checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_checks() {
        let r = UdpRepr::roce(0xc123);
        let mut buf = [0xa5u8; 8 + 40];
        r.emit(&mut buf, 40);
        assert_eq!(&buf[..8], &[0xc1, 0x23, 0x12, 0xb7, 0, 48, 0, 0]);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p).unwrap(), r);
        assert_eq!(p.payload().len(), 40);
        assert!(matches!(
            UdpRepr::parse(&UdpPacket::new_unchecked(&buf[..47])),
            Err(Error::Truncated { .. })
        ));
        buf[4..6].copy_from_slice(&[0, 7]);
        assert!(matches!(
            UdpRepr::parse(&UdpPacket::new_unchecked(&buf[..])),
            Err(Error::Malformed(_))
        ));
    }
}
