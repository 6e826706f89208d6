//! IPv4 header of RoCE v2 (20 bytes, no options; roce-wire.md §2.3).

use core::net::Ipv4Addr;

use super::field::{get_array, len16, need, set_u16};
use super::{Error, Result};

/// IP protocol number of UDP.
pub(crate) const PROTO_UDP: u8 = 17;

/// Byte layout of the IPv4 header (no options), and the bits of its flag fields.
pub(super) mod field {
    use crate::wire::field::Field;

    /// Version (high 4 bits) and IHL (low 4 bits, in 32-bit words).
    pub(crate) const VER_IHL: usize = 0;
    /// TOS: DSCP and ECN.
    pub(crate) const DSCP_ECN: usize = 1;
    /// Total Length.
    pub(crate) const LENGTH: Field = 2..4;
    /// Identification.
    pub(crate) const IDENT: Field = 4..6;
    /// Flags and fragment offset.
    pub(crate) const FLG_OFF: Field = 6..8;
    /// TTL.
    pub(crate) const TTL: usize = 8;
    /// Protocol.
    pub(crate) const PROTOCOL: usize = 9;
    /// Header checksum.
    pub(crate) const CHECKSUM: Field = 10..12;
    /// Source address.
    pub(crate) const SRC_ADDR: Field = 12..16;
    /// Destination address.
    pub(crate) const DST_ADDR: Field = 16..20;

    /// DF, don't fragment, in `FLG_OFF`.
    pub(crate) const FLG_DF: u16 = 0x4000;
    /// IHL, in `VER_IHL`.
    pub(crate) const IHL_MASK: u8 = 0x0f;
    /// `VER_IHL` of a RoCE v2 header: version 4, 5 words.
    pub(crate) const VER4_IHL5: u8 = 0x45;
}

header!(
    /// A view of an IPv4 header at the start of a buffer. `check_len` also checks that the IHL and
    /// Total Length fit the buffer, so `payload()` never panics on a checked view.
    Ipv4Packet, "IPv4 header", len = field::DST_ADDR.end;
    get {
        /// TOS byte (DSCP + ECN); masked in the ICRC.
        pub tos: u8 = field::DSCP_ECN;
        /// Total Length.
        pub(crate) total_len: u16 = field::LENGTH;
        /// Identification; covered by the ICRC.
        pub ident: u16 = field::IDENT;
        /// Flags and fragment offset, raw.
        pub(crate) flags_frag: u16 = field::FLG_OFF;
        /// TTL; masked in the ICRC.
        pub ttl: u8 = field::TTL;
        /// Protocol (17 for RoCE v2).
        pub protocol: u8 = field::PROTOCOL;
        /// Header checksum; masked in the ICRC.
        pub checksum: u16 = field::CHECKSUM;
    }
);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Checks the IHL and Total Length against the buffer (beyond the fixed 20 bytes).
    pub(crate) fn check_lengths(&self) -> Result<()> {
        self.check_len()?;
        let hl = self.header_len();
        if hl < Self::LEN {
            return Err(Error::Malformed("IPv4 IHL is below 5"));
        }
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::Malformed(
                "IPv4 Total Length is shorter than its header",
            ));
        }
        need("IPv4 packet (Total Length)", total, self.b().len())
    }
    /// Version (4).
    #[inline]
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & field::IHL_MASK) * 4
    }
    /// DF, don't fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & field::FLG_DF != 0
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(get_array::<4>(self.b(), field::SRC_ADDR))
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(get_array::<4>(self.b(), field::DST_ADDR))
    }
    /// True when the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        checksum(&self.b()[..self.header_len()]) == 0
    }
    /// The bytes after the header, up to Total Length (Ethernet padding excluded). Needs `check_lengths`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }
}

/// Sets the ECN field (the TOS byte's low two bits) of the IPv4 header at the start of `header`
/// and rewrites its checksum, as a switch marking Congestion Experienced does. `header` holds at
/// least the header's IHL × 4 bytes; a shorter or not-IPv4 header is left alone (false).
pub fn set_ipv4_ecn(header: &mut [u8], ecn: u8) -> bool {
    let Some(&ver_ihl) = header.first() else {
        return false;
    };
    let len = usize::from(ver_ihl & field::IHL_MASK) * 4;
    if ver_ihl >> 4 != 4 || len < 20 || header.len() < len {
        return false;
    }
    header[field::DSCP_ECN] = (header[field::DSCP_ECN] & !3) | (ecn & 3);
    header[field::CHECKSUM].fill(0);
    let sum = checksum(&header[..len]);
    header[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
    true
}

/// True when the IPv4 header at the start of `header` (IHL × 4 bytes) carries a correct checksum.
pub fn ipv4_checksum_ok(header: &[u8]) -> bool {
    let len = header
        .first()
        .map_or(0, |b| usize::from(b & field::IHL_MASK) * 4);
    len >= 20 && header.len() >= len && checksum(&header[..len]) == 0
}

/// The Internet checksum (RFC 1071) of `data`: 0 when `data` holds a correct checksum.
fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The fields of a RoCE v2 IPv4 header (protocol UDP, no options, never fragmented). Total Length and
/// the checksum are not kept: emit derives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// TOS byte (DSCP + ECN).
    pub tos: u8,
    /// Identification (covered by the ICRC: a receiver needs the sender's value).
    pub ident: u16,
    /// DF flag (rxe always sets it).
    pub dont_frag: bool,
    /// TTL.
    pub ttl: u8,
}

impl Ipv4Repr {
    /// The header RoCE v2 sends from `src` to `dst`: TOS 0, ID 0, DF and TTL 64, what an unconnected
    /// PMTUDISC_DO UDP socket sends (roce-wire.md §9).
    pub fn roce(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Ipv4Repr {
            src,
            dst,
            tos: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
        }
    }

    /// Reads a view that passed `check_lengths`, rejecting what RoCE v2 cannot be.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self> {
        p.check_lengths()?;
        if p.version() != 4 {
            return Err(Error::Malformed("IPv4 version field is not 4"));
        }
        if p.header_len() != Ipv4Packet::<&[u8]>::LEN {
            return Err(Error::Malformed(
                "IPv4 header has options (IHL != 5); RoCE v2 never sends them",
            ));
        }
        if p.flags_frag() & !field::FLG_DF != 0 {
            return Err(Error::Malformed(
                "IPv4 packet is a fragment or has the reserved flag set",
            ));
        }
        if p.protocol() != PROTO_UDP {
            return Err(Error::NotUdp(p.protocol()));
        }
        Ok(Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            ttl: p.ttl(),
        })
    }

    /// Writes the 20-byte header for `payload_len` bytes of UDP, checksum included.
    /// Panics if `buf` is shorter than 20 bytes or the packet exceeds 65535 bytes.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        self.emit_unchecksummed(buf, payload_len);
        let b = &mut buf[..Ipv4Packet::<&[u8]>::LEN];
        let c = checksum(b);
        set_u16(b, field::CHECKSUM, c);
    }

    /// Writes the header with checksum 0: for the ICRC, which masks the checksum anyway (computing it
    /// for every packet a UDP socket sends showed up in profiles).
    pub(crate) fn emit_unchecksummed(&self, buf: &mut [u8], payload_len: usize) {
        let b = &mut buf[..Ipv4Packet::<&[u8]>::LEN];
        let len = len16("IPv4 packet", Ipv4Packet::<&[u8]>::LEN + payload_len);
        b[field::VER_IHL] = field::VER4_IHL5;
        b[field::DSCP_ECN] = self.tos;
        set_u16(b, field::LENGTH, len);
        set_u16(b, field::IDENT, self.ident);
        let flags = if self.dont_frag { field::FLG_DF } else { 0 };
        set_u16(b, field::FLG_OFF, flags);
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = PROTO_UDP;
        set_u16(b, field::CHECKSUM, 0);
        b[field::SRC_ADDR].copy_from_slice(&self.src.octets());
        b[field::DST_ADDR].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 header of tests/data/vectors/v2_write_only.hex.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x44, 0x12, 0x35, 0x40, 0x00, 0x40, 0x11, 0x14, 0x72, 10, 0, 0, 1, 10, 0,
        0, 2,
    ];

    #[test]
    fn parses_and_re_emits_vector_header() {
        let mut pkt = HDR.to_vec();
        pkt.resize(0x44, 0);
        let p = Ipv4Packet::new_checked(&pkt[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.src, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(r.dst, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!((r.ident, r.dont_frag, r.ttl, r.tos), (0x1235, true, 64, 0));
        assert_eq!(p.payload().len(), 0x44 - 20);
        let mut out = [0xa5u8; 20];
        r.emit(&mut out, 0x44 - 20);
        assert_eq!(out, HDR);
    }

    #[test]
    fn rejects_bad_lengths_and_non_roce_headers() {
        let mut pkt = HDR.to_vec();
        pkt.resize(0x44, 0);
        // Total Length beyond the buffer.
        assert!(matches!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&pkt[..0x43])),
            Err(Error::Truncated { .. })
        ));
        let mut bad = pkt.clone();
        bad[0] = 0x46; // options
        assert!(matches!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bad[..])),
            Err(Error::Malformed(_))
        ));
        let mut bad = pkt.clone();
        bad[0] = 0x44; // IHL 4
        assert!(matches!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bad[..])),
            Err(Error::Malformed(_))
        ));
        let mut bad = pkt.clone();
        bad[9] = 6; // TCP
        assert_eq!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bad[..])),
            Err(Error::NotUdp(6))
        );
        let mut bad = pkt.clone();
        bad[7] = 1; // fragment offset
        assert!(matches!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bad[..])),
            Err(Error::Malformed(_))
        ));
        let mut bad = pkt.clone();
        bad[2..4].copy_from_slice(&[0, 10]); // Total Length < header
        assert!(matches!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bad[..])),
            Err(Error::Malformed(_))
        ));
        assert!(Ipv4Packet::new_checked(&pkt[..19]).is_err());
    }
}
