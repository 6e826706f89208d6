//! IPv6 header of RoCE v2 (40 bytes; roce-wire.md §2.4), and the fixed-header code the RoCE v1 GRH
//! shares (the GRH is IPv6's layout under IB names).

use core::net::Ipv6Addr;

use super::field::{get_array, get_ver_tc_flow, len16, need, set_u16, set_ver_tc_flow};
use super::ipv4::PROTO_UDP;
use super::{Error, Result};

/// Byte layout of the IPv6 header.
pub(super) mod field {
    use crate::wire::field::Field;

    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub(crate) const VER_TC_FLOW: Field = 0..4;
    /// Payload Length.
    pub(crate) const LENGTH: Field = 4..6;
    /// Next Header.
    pub(crate) const NXT_HDR: usize = 6;
    /// Hop limit.
    pub(crate) const HOP_LIMIT: usize = 7;
    /// Source address.
    pub(crate) const SRC_ADDR: Field = 8..24;
    /// Destination address.
    pub(crate) const DST_ADDR: Field = 24..40;
}

header!(
    /// A view of an IPv6 header at the start of a buffer.
    Ipv6Packet, "IPv6 header", len = field::DST_ADDR.end;
    get {
        /// Payload Length.
        pub payload_len: u16 = field::LENGTH;
        /// Next Header (17 for RoCE v2).
        pub(crate) next_header: u8 = field::NXT_HDR;
        /// Hop limit; masked in the ICRC.
        pub hop_limit: u8 = field::HOP_LIMIT;
    }
);

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Checks that Payload Length fits the buffer.
    pub(crate) fn check_lengths(&self) -> Result<()> {
        self.check_len()?;
        self.check_payload_len("IPv6 packet (Payload Length)")
    }
    /// Fails with `Truncated`, naming `what`, unless the buffer holds the payload Payload Length
    /// announces. The header itself must already be checked.
    pub(super) fn check_payload_len(&self, what: &'static str) -> Result<()> {
        need(
            what,
            Self::LEN + usize::from(self.payload_len()),
            self.b().len(),
        )
    }
    /// Version (6).
    #[inline]
    pub fn version(&self) -> u8 {
        get_ver_tc_flow(self.b(), field::VER_TC_FLOW).0
    }
    /// Traffic class; masked in the ICRC.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        get_ver_tc_flow(self.b(), field::VER_TC_FLOW).1
    }
    /// Flow label (20 bits); masked in the ICRC.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        get_ver_tc_flow(self.b(), field::VER_TC_FLOW).2
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(get_array::<16>(self.b(), field::SRC_ADDR))
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(get_array::<16>(self.b(), field::DST_ADDR))
    }
    /// The bytes after the header, up to Payload Length. Needs `check_lengths`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[Self::LEN..Self::LEN + usize::from(self.payload_len())]
    }
}

/// The fields of a RoCE v2 IPv6 header (next header UDP, no extension headers). Payload Length is
/// derived on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits; rxe sends 0).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Reads a view, rejecting what RoCE v2 cannot be.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Self> {
        p.check_lengths()?;
        if p.version() != 6 {
            return Err(Error::Malformed("IPv6 version field is not 6"));
        }
        if p.next_header() != PROTO_UDP {
            return Err(Error::NotUdp(p.next_header()));
        }
        Ok(Ipv6Repr {
            src: p.src(),
            dst: p.dst(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
        })
    }

    /// Writes the 40-byte header for `payload_len` bytes of UDP. Panics if `buf` is too short or the
    /// payload exceeds 65535 bytes.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        FixedHeader {
            traffic_class: self.traffic_class,
            flow_label: self.flow_label,
            next_header: PROTO_UDP,
            hop_limit: self.hop_limit,
            src: self.src.octets(),
            dst: self.dst.octets(),
        }
        .emit(buf, "IPv6 payload", payload_len);
    }
}

/// The fields of an IPv6-shaped header (IPv6 or GRH) but Version, which is 6, and Payload Length,
/// which `emit` derives.
pub(super) struct FixedHeader {
    pub(super) traffic_class: u8,
    pub(super) flow_label: u32,
    pub(super) next_header: u8,
    pub(super) hop_limit: u8,
    pub(super) src: [u8; 16],
    pub(super) dst: [u8; 16],
}

impl FixedHeader {
    /// Writes the 40-byte header for `payload_len` bytes after it. Panics, naming the length `what`,
    /// if `buf` is too short or the payload exceeds 65535 bytes.
    #[inline]
    pub(super) fn emit(&self, buf: &mut [u8], what: &'static str, payload_len: usize) {
        let b = &mut buf[..Ipv6Packet::<&[u8]>::LEN];
        set_ver_tc_flow(
            b,
            field::VER_TC_FLOW,
            6,
            self.traffic_class,
            self.flow_label,
        );
        set_u16(b, field::LENGTH, len16(what, payload_len));
        b[field::NXT_HDR] = self.next_header;
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC_ADDR].copy_from_slice(&self.src);
        b[field::DST_ADDR].copy_from_slice(&self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_field_positions() {
        let r = Ipv6Repr {
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            traffic_class: 0xab,
            flow_label: 0xcdef1,
            hop_limit: 7,
        };
        let mut buf = vec![0xa5u8; 40 + 36];
        r.emit(&mut buf, 36);
        assert_eq!(&buf[..8], &[0x6a, 0xbc, 0xde, 0xf1, 0x00, 36, 17, 7]);
        buf[40..].fill(0);
        let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), r);
        assert_eq!(p.payload().len(), 36);
        assert!(matches!(
            Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buf[..75])),
            Err(Error::Truncated { .. })
        ));
        buf[6] = 58;
        assert_eq!(
            Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buf[..])),
            Err(Error::NotUdp(58))
        );
        buf[6] = 17;
        buf[0] = 0x4a;
        assert!(matches!(
            Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buf[..])),
            Err(Error::Malformed(_))
        ));
    }
}
