//! RoCE v1 Global Route Header (40 bytes, IPv6-shaped; roce-wire.md §2.2).

use super::ipv6::{FixedHeader, Ipv6Packet};
use super::{Error, Gid, Result};

/// GRH Next Header value announcing an IBA transport header.
pub(crate) const NXTHDR_IBA: u8 = 0x1b;

header!(
    /// A view of a GRH at the start of a buffer.
    GrhPacket, "GRH", len = Ipv6Packet::<&[u8]>::LEN;
);

/// The GRH has IPv6's byte layout, so its fields are read through an IPv6 view of the same bytes.
impl<T: AsRef<[u8]>> GrhPacket<T> {
    #[inline]
    fn ip6(&self) -> Ipv6Packet<&[u8]> {
        Ipv6Packet::new_unchecked(self.buffer.as_ref())
    }
    /// Checks that PayLen fits the buffer.
    pub(crate) fn check_lengths(&self) -> Result<()> {
        self.check_len()?;
        self.ip6().check_payload_len("RoCE v1 packet (GRH PayLen)")
    }
    /// IPVer (6).
    #[inline]
    pub(crate) fn ipver(&self) -> u8 {
        self.ip6().version()
    }
    /// TClass; masked in the ICRC.
    #[inline]
    pub fn tclass(&self) -> u8 {
        self.ip6().traffic_class()
    }
    /// FlowLabel (20 bits); masked in the ICRC.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.ip6().flow_label()
    }
    /// PayLen: BTH through ICRC.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        self.ip6().payload_len()
    }
    /// NxtHdr (0x1B).
    #[inline]
    pub(crate) fn next_header(&self) -> u8 {
        self.ip6().next_header()
    }
    /// HopLmt; masked in the ICRC.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.ip6().hop_limit()
    }
    /// Source GID.
    #[inline]
    pub fn sgid(&self) -> Gid {
        Gid(self.ip6().src().octets())
    }
    /// Destination GID.
    #[inline]
    pub fn dgid(&self) -> Gid {
        Gid(self.ip6().dst().octets())
    }
    /// The bytes after the GRH, up to PayLen. Needs `check_lengths`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::LEN..Self::LEN + usize::from(self.payload_len())]
    }
}

/// The fields of a GRH. PayLen is derived on emit, IPVer is 6 and NxtHdr 0x1B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrhRepr {
    /// TClass.
    pub tclass: u8,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// HopLmt.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: Gid,
    /// Destination GID.
    pub dgid: Gid,
}

impl GrhRepr {
    /// Reads a view, rejecting a GRH that does not carry an IB transport header.
    pub fn parse<T: AsRef<[u8]>>(p: &GrhPacket<T>) -> Result<Self> {
        p.check_lengths()?;
        if p.ipver() != 6 {
            return Err(Error::Malformed("GRH IPVer is not 6"));
        }
        if p.next_header() != NXTHDR_IBA {
            return Err(Error::NotIbTransport(p.next_header()));
        }
        Ok(GrhRepr {
            tclass: p.tclass(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            sgid: p.sgid(),
            dgid: p.dgid(),
        })
    }

    /// Writes the 40-byte GRH for `payload_len` bytes after it (BTH through ICRC). Panics if `buf` is
    /// too short or the payload exceeds 65535 bytes.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        FixedHeader {
            traffic_class: self.tclass,
            flow_label: self.flow_label,
            next_header: NXTHDR_IBA,
            hop_limit: self.hop_limit,
            src: self.sgid.octets(),
            dst: self.dgid.octets(),
        }
        .emit(buf, "GRH PayLen", payload_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_scapy_example_and_re_emits_it() {
        // roce-wire.md §2.2: "60 20 00 00 | 00 28 1b 40 | ..." (TClass 2, PayLen 40, HopLmt 64).
        let mut b = [0u8; 80];
        b[..8].copy_from_slice(&[0x60, 0x20, 0, 0, 0, 0x28, 0x1b, 0x40]);
        b[8..24].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 15, 0, 0, 2]);
        b[24..40].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 15, 0, 0, 2]);
        let p = GrhPacket::new_checked(&b[..]).unwrap();
        let r = GrhRepr::parse(&p).unwrap();
        assert_eq!((r.tclass, r.flow_label, r.hop_limit), (2, 0, 64));
        assert_eq!(p.payload().len(), 40);
        let mut out = [0xa5u8; 40];
        r.emit(&mut out, 40);
        assert_eq!(&out[..], &b[..40]);
        assert!(matches!(
            GrhRepr::parse(&GrhPacket::new_unchecked(&b[..79])),
            Err(Error::Truncated { .. })
        ));
        b[6] = 0x11;
        assert_eq!(
            GrhRepr::parse(&GrhPacket::new_unchecked(&b[..])),
            Err(Error::NotIbTransport(0x11))
        );
    }
}
