//! RoCE v1 Global Route Header (40 bytes, IPv6-shaped; roce-wire.md §2.2).

use super::field::{get_array, get_u16, get_ver_tc_flow, len16, need, set_u16, set_ver_tc_flow};
use super::{Error, Gid, Result};

/// GRH Next Header value announcing an IBA transport header.
pub const NXTHDR_IBA: u8 = 0x1b;

/// Byte layout of the GRH: IPv6's, under IB names.
pub(super) mod field {
    use crate::wire::field::Field;

    /// IPVer (4 bits), TClass (8 bits), FlowLabel (20 bits).
    pub const VER_TCLASS_FLOW: Field = 0..4;
    /// PayLen: BTH through ICRC.
    pub const PAYLEN: Field = 4..6;
    /// NxtHdr.
    pub const NXTHDR: usize = 6;
    /// HopLmt.
    pub const HOPLMT: usize = 7;
    /// Source GID.
    pub const SGID: Field = 8..24;
    /// Destination GID.
    pub const DGID: Field = 24..40;
}

header_view!(
    /// A view of a GRH at the start of a buffer.
    GrhPacket,
    field::DGID.end,
    "GRH"
);

impl<T: AsRef<[u8]>> GrhPacket<T> {
    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Checks that PayLen fits the buffer.
    pub fn check_lengths(&self) -> Result<()> {
        self.check_len()?;
        need(
            "RoCE v1 packet (GRH PayLen)",
            Self::LEN + usize::from(self.payload_len()),
            self.b().len(),
        )
    }
    /// IPVer (6).
    #[inline]
    pub fn ipver(&self) -> u8 {
        get_ver_tc_flow(self.b(), field::VER_TCLASS_FLOW).0
    }
    /// TClass; masked in the ICRC.
    #[inline]
    pub fn tclass(&self) -> u8 {
        get_ver_tc_flow(self.b(), field::VER_TCLASS_FLOW).1
    }
    /// FlowLabel (20 bits); masked in the ICRC.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        get_ver_tc_flow(self.b(), field::VER_TCLASS_FLOW).2
    }
    /// PayLen: BTH through ICRC.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get_u16(self.b(), field::PAYLEN)
    }
    /// NxtHdr (0x1B).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.b()[field::NXTHDR]
    }
    /// HopLmt; masked in the ICRC.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOPLMT]
    }
    /// Source GID.
    #[inline]
    pub fn sgid(&self) -> Gid {
        Gid(get_array(self.b(), field::SGID))
    }
    /// Destination GID.
    #[inline]
    pub fn dgid(&self) -> Gid {
        Gid(get_array(self.b(), field::DGID))
    }
    /// The bytes after the GRH, up to PayLen. Needs `check_lengths`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[Self::LEN..Self::LEN + usize::from(self.payload_len())]
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
        let b = &mut buf[..GrhPacket::<&[u8]>::LEN];
        set_ver_tc_flow(b, field::VER_TCLASS_FLOW, 6, self.tclass, self.flow_label);
        set_u16(b, field::PAYLEN, len16("GRH PayLen", payload_len));
        b[field::NXTHDR] = NXTHDR_IBA;
        b[field::HOPLMT] = self.hop_limit;
        b[field::SGID].copy_from_slice(self.sgid.as_bytes());
        b[field::DGID].copy_from_slice(self.dgid.as_bytes());
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
