//! Ethernet II header with an optional 802.1Q tag (roce-wire.md §2.1). The FCS is the NIC's business.

use super::field::{get_array, get_u16, need, set_u16};
use super::{Error, MacAddr, Result};

/// Byte layout of the Ethernet header, with and without an 802.1Q tag.
mod field {
    use crate::wire::field::Field;

    /// Destination MAC.
    pub(crate) const DESTINATION: Field = 0..6;
    /// Source MAC.
    pub(crate) const SOURCE: Field = 6..12;
    /// EtherType, or the 802.1Q TPID of a tagged frame.
    pub(crate) const ETHERTYPE: Field = 12..14;
    /// TCI of the 802.1Q tag (PCP, DEI, VID).
    pub(crate) const VLAN_TCI: Field = 14..16;
    /// EtherType of a tagged frame.
    pub(crate) const VLAN_ETHERTYPE: Field = 16..18;
}

/// EtherType values RoCE uses.
pub(crate) mod ethertype {
    /// IPv4 (RoCE v2).
    pub(crate) const IPV4: u16 = 0x0800;
    /// IPv6 (RoCE v2).
    pub(crate) const IPV6: u16 = 0x86dd;
    /// `ETH_P_IBOE`: RoCE v1, a GRH follows.
    pub(crate) const ROCE_V1: u16 = 0x8915;
    /// 802.1Q VLAN tag protocol identifier.
    pub(crate) const VLAN: u16 = 0x8100;
}

/// A view of an Ethernet header (14 bytes, or 18 with an 802.1Q tag) at the start of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Length of an untagged header.
    pub const LEN: usize = field::ETHERTYPE.end;
    /// Length of an 802.1Q tag.
    pub(crate) const VLAN_LEN: usize = field::VLAN_ETHERTYPE.end - field::ETHERTYPE.end;

    /// Wraps a buffer without checking; accessors panic if it is too short.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after checking that it holds the whole header, tag included.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Fails with `Truncated` unless the whole header (and tag, if any) is present.
    #[inline]
    pub(crate) fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        need("Ethernet header", Self::LEN, have)?;
        need("802.1Q-tagged Ethernet header", self.header_len(), have)
    }

    /// Returns the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC.
    #[inline]
    pub fn dst(&self) -> MacAddr {
        MacAddr(get_array(self.buffer.as_ref(), field::DESTINATION))
    }
    /// Source MAC.
    #[inline]
    pub fn src(&self) -> MacAddr {
        MacAddr(get_array(self.buffer.as_ref(), field::SOURCE))
    }
    /// True when an 802.1Q tag follows the source MAC.
    #[inline]
    pub(crate) fn has_vlan(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::ETHERTYPE) == ethertype::VLAN
    }
    /// The 16-bit TCI of the 802.1Q tag (PCP, DEI, VID), if tagged.
    #[inline]
    pub(crate) fn vlan_tci(&self) -> Option<u16> {
        self.has_vlan()
            .then(|| get_u16(self.buffer.as_ref(), field::VLAN_TCI))
    }
    /// EtherType of the payload (after the tag, if any).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        let at = if self.has_vlan() {
            field::VLAN_ETHERTYPE
        } else {
            field::ETHERTYPE
        };
        get_u16(self.buffer.as_ref(), at)
    }
    /// Header length: 14, or 18 with a tag.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.has_vlan() {
            Self::LEN + Self::VLAN_LEN
        } else {
            Self::LEN
        }
    }
    /// Bytes after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// An 802.1Q tag: priority, drop eligibility and VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// Decodes a TCI.
    #[inline]
    pub(crate) fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
    /// Encodes the TCI (fields truncated to their widths).
    #[inline]
    pub(crate) fn tci(&self) -> u16 {
        (u16::from(self.pcp & 0x7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }
}

/// The fields of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// EtherType of the payload.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> Result<Self> {
        f.check_len()?;
        Ok(EthernetRepr {
            dst: f.dst(),
            src: f.src(),
            vlan: f.vlan_tci().map(VlanTag::from_tci),
            ethertype: f.ethertype(),
        })
    }

    /// Header length this repr emits: 14, or 18 with a tag.
    #[inline]
    pub fn header_len(&self) -> usize {
        let tag = if self.vlan.is_some() {
            EthernetFrame::<&[u8]>::VLAN_LEN
        } else {
            0
        };
        EthernetFrame::<&[u8]>::LEN + tag
    }

    /// Writes `header_len()` bytes at the start of `buf`. Panics if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::DESTINATION].copy_from_slice(self.dst.as_bytes());
        buf[field::SOURCE].copy_from_slice(self.src.as_bytes());
        match self.vlan {
            Some(tag) => {
                set_u16(buf, field::ETHERTYPE, ethertype::VLAN);
                set_u16(buf, field::VLAN_TCI, tag.tci());
                set_u16(buf, field::VLAN_ETHERTYPE, self.ethertype);
            }
            None => set_u16(buf, field::ETHERTYPE, self.ethertype),
        }
    }

    /// The RoCE flavour the EtherType announces, or `UnknownEtherType`.
    pub fn check_roce_ethertype(&self) -> Result<()> {
        match self.ethertype {
            ethertype::IPV4 | ethertype::IPV6 | ethertype::ROCE_V1 => Ok(()),
            other => Err(Error::UnknownEtherType(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untagged_and_tagged_round_trip() {
        let mut r = EthernetRepr {
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            vlan: None,
            ethertype: ethertype::ROCE_V1,
        };
        let mut buf = [0xa5u8; 18];
        r.emit(&mut buf);
        assert_eq!(
            &buf[..14],
            &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x89, 0x15]
        );
        let f = EthernetFrame::new_checked(&buf[..14]).unwrap();
        assert_eq!(EthernetRepr::parse(&f).unwrap(), r);

        r.vlan = Some(VlanTag {
            pcp: 3,
            dei: true,
            vid: 0x123,
        });
        r.ethertype = ethertype::IPV6;
        buf.fill(0xa5);
        r.emit(&mut buf);
        assert_eq!(&buf[12..], &[0x81, 0x00, 0x71, 0x23, 0x86, 0xdd]);
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(f.header_len(), 18);
        assert_eq!(EthernetRepr::parse(&f).unwrap(), r);
        assert!(matches!(
            EthernetFrame::new_checked(&buf[..17]),
            Err(Error::Truncated {
                need: 18,
                have: 17,
                ..
            })
        ));
        assert!(EthernetFrame::new_checked(&buf[..13]).is_err());
    }

    #[test]
    fn non_roce_ethertype_is_named() {
        let r = EthernetRepr {
            dst: MacAddr::ZERO,
            src: MacAddr::ZERO,
            vlan: None,
            ethertype: 0x0806,
        };
        assert_eq!(
            r.check_roce_ethertype(),
            Err(Error::UnknownEtherType(0x0806))
        );
    }
}
