//! The RoCE invariant CRC (roce-wire.md §5), computed over caller buffers without allocating.
//!
//! CRC-32 over eight 0xFF bytes (a pseudo-LRH), the network header with its variant fields set to
//! ones, the BTH with byte 4 set to ones, then everything up to the ICRC. The result goes on the wire
//! least-significant byte first.
//!
//! Only the network header and the BTH are copied (to a small stack buffer, to mask them); the rest is
//! fed straight from the caller's buffers, so computing an ICRC never allocates, and the headers and the
//! payload may live in different buffers.

use super::Encapsulation;
use super::crc32;
use super::field::need;
use super::{
    BthPacket, GrhPacket, GrhRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, Result, UdpPacket,
    UdpRepr,
};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// CRC-32 of the 8-byte pseudo-LRH of all ones; every ICRC starts from here.
const PSEUDO_LRH_CRC: u32 = 0x2144_df1c;

const GRH_LEN: usize = GrhPacket::<&[u8]>::LEN;
const IPV4_LEN: usize = Ipv4Packet::<&[u8]>::LEN;
const IPV6_LEN: usize = Ipv6Packet::<&[u8]>::LEN;
const UDP_LEN: usize = UdpPacket::<&[u8]>::LEN;
const BTH_LEN: usize = BthPacket::<&[u8]>::LEN;
/// The BTH's leading bytes that the ICRC masks or that stay the same for one queue pair's packets
/// of one opcode and pad: everything before AckReq and the PSN.
pub(crate) const BTH_HEAD_LEN: usize = 8;

/// Sets TClass / traffic class, FlowLabel and HopLmt of an IPv6-shaped header (GRH or IPv6) to ones.
#[inline]
fn mask_ipv6_shaped(h: &mut [u8]) {
    use super::ipv6::field;
    // Everything but the 4-bit version.
    let first = &mut h[field::VER_TC_FLOW];
    first[0] |= 0x0f;
    first[1..].fill(0xff);
    h[field::HOP_LIMIT] = 0xff;
}

/// Sets TOS, TTL and the header checksum of an IPv4 header to ones.
#[inline]
fn mask_ipv4(h: &mut [u8]) {
    use super::ipv4::field;
    h[field::DSCP_ECN] = 0xff;
    h[field::TTL] = 0xff;
    h[field::CHECKSUM].fill(0xff);
}

/// Sets the checksum of a UDP header to ones.
#[inline]
fn mask_udp(h: &mut [u8]) {
    h[super::udp::field::CHECKSUM].fill(0xff);
}

/// Sets the BTH byte of FECN, BECN and resv6a to ones.
#[inline]
fn mask_bth(h: &mut [u8]) {
    h[super::bth::field::ECN] = 0xff;
}

/// The ICRC of a contiguous packet: `net` (GRH, or IP and UDP headers, as on the wire, of the
/// encapsulation's length) followed by `ib` (BTH through pad). The network header and the BTH are masked
/// in one stack copy and hashed in one call; the rest is hashed straight from `ib`. Panics if `net` does
/// not have the encapsulation's header length or `ib` is shorter than a BTH.
#[inline]
pub(crate) fn icrc_contiguous(encap: Encapsulation, net: &[u8], ib: &[u8]) -> u32 {
    let mut h = [0u8; IPV6_LEN + UDP_LEN + BTH_LEN];
    let n = net.len();
    h[..n].copy_from_slice(net);
    h[n..n + BTH_LEN].copy_from_slice(&ib[..BTH_LEN]);
    match encap {
        Encapsulation::V1 => {
            assert_eq!(n, GRH_LEN);
            mask_ipv6_shaped(&mut h);
        }
        Encapsulation::V2v4 => {
            assert_eq!(n, IPV4_LEN + UDP_LEN);
            mask_ipv4(&mut h);
            mask_udp(&mut h[IPV4_LEN..n]);
        }
        Encapsulation::V2v6 => {
            assert_eq!(n, IPV6_LEN + UDP_LEN);
            mask_ipv6_shaped(&mut h);
            mask_udp(&mut h[IPV6_LEN..n]);
        }
    }
    mask_bth(&mut h[n..n + BTH_LEN]);
    let crc = crc32::update(PSEUDO_LRH_CRC, &h[..n + BTH_LEN]);
    crc32::update(crc, &ib[BTH_LEN..])
}

/// An ICRC being computed: start from the network header, feed the BTH, then the rest, then finish.
/// A plain value: one started from a header can be kept and reused for every packet of that length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Icrc {
    /// The CRC-32 of what was fed so far.
    crc: u32,
}

impl Icrc {
    #[inline]
    fn start(masked_header: &[u8]) -> Self {
        Icrc {
            crc: crc32::update(PSEUDO_LRH_CRC, masked_header),
        }
    }

    /// Starts a RoCE v1 ICRC from the 40-byte GRH as it is on the wire. Panics if `grh` is shorter.
    #[inline]
    pub(crate) fn v1_header(grh: &[u8]) -> Self {
        let mut h = [0u8; GRH_LEN];
        h.copy_from_slice(&grh[..GRH_LEN]);
        mask_ipv6_shaped(&mut h);
        Self::start(&h)
    }

    /// Starts a RoCE v2 ICRC from an IP header of `N - UDP_LEN` bytes, masked by `mask_ip`, and the
    /// UDP header. `N` is a parameter because the stack copy's length must be a constant.
    #[inline]
    fn v2_header<const N: usize>(ip: &[u8], udp: &[u8], mask_ip: impl Fn(&mut [u8])) -> Self {
        let mut h = [0u8; N];
        let (ip_h, udp_h) = h.split_at_mut(N - UDP_LEN);
        ip_h.copy_from_slice(&ip[..N - UDP_LEN]);
        udp_h.copy_from_slice(&udp[..UDP_LEN]);
        mask_ip(ip_h);
        mask_udp(udp_h);
        Self::start(&h)
    }

    /// Starts a RoCE v2 ICRC from the 20-byte IPv4 and 8-byte UDP headers as they are on the wire.
    /// Panics if either is shorter.
    #[inline]
    pub(crate) fn v2_ipv4_header(ip: &[u8], udp: &[u8]) -> Self {
        Self::v2_header::<{ IPV4_LEN + UDP_LEN }>(ip, udp, mask_ipv4)
    }

    /// Starts a RoCE v2 ICRC from the 40-byte IPv6 and 8-byte UDP headers as they are on the wire.
    /// Panics if either is shorter.
    #[inline]
    pub(crate) fn v2_ipv6_header(ip: &[u8], udp: &[u8]) -> Self {
        Self::v2_header::<{ IPV6_LEN + UDP_LEN }>(ip, udp, mask_ipv6_shaped)
    }

    /// Starts a RoCE v1 ICRC from a GRH repr, for `ib_len` bytes of BTH through pad.
    #[inline]
    pub fn v1(grh: &GrhRepr, ib_len: usize) -> Self {
        let mut h = [0u8; GRH_LEN];
        grh.emit(&mut h, ib_len + ICRC_LEN);
        Self::v1_header(&h)
    }

    /// Starts a RoCE v2/IPv4 ICRC from reprs, for `ib_len` bytes of BTH through pad, without the IP
    /// header bytes in a buffer (for a UDP socket, where the kernel writes them). The IPv4
    /// Identification and DF flag are covered, so they must be what the kernel will send.
    #[inline]
    pub fn v2_ipv4(ip: &Ipv4Repr, udp: &UdpRepr, ib_len: usize) -> Self {
        let mut h = [0u8; IPV4_LEN + UDP_LEN];
        let udp_len = UDP_LEN + ib_len + ICRC_LEN;
        ip.emit_unchecksummed(&mut h[..IPV4_LEN], udp_len);
        udp.emit(&mut h[IPV4_LEN..], ib_len + ICRC_LEN);
        Self::v2_ipv4_header(&h[..IPV4_LEN], &h[IPV4_LEN..])
    }

    /// Starts a RoCE v2/IPv6 ICRC from reprs, for `ib_len` bytes of BTH through pad.
    #[inline]
    pub(crate) fn v2_ipv6(ip: &Ipv6Repr, udp: &UdpRepr, ib_len: usize) -> Self {
        let mut h = [0u8; IPV6_LEN + UDP_LEN];
        let udp_len = UDP_LEN + ib_len + ICRC_LEN;
        ip.emit(&mut h[..IPV6_LEN], udp_len);
        udp.emit(&mut h[IPV6_LEN..], ib_len + ICRC_LEN);
        Self::v2_ipv6_header(&h[..IPV6_LEN], &h[IPV6_LEN..])
    }

    /// Feeds the 12-byte BTH, masking FECN, BECN and resv6a (byte 4). Panics if `bth` is shorter.
    /// The tests' step-by-step reference: [`finish_ib`](Self::finish_ib) hashes the BTH's tail with
    /// what follows it.
    #[cfg(test)]
    pub(crate) fn update_bth(&mut self, bth: &[u8]) {
        let mut b = [0u8; BTH_LEN];
        b.copy_from_slice(&bth[..BTH_LEN]);
        mask_bth(&mut b);
        self.crc = crc32::update(self.crc, &b);
    }

    /// Feeds the first [`BTH_HEAD_LEN`] bytes of a BTH (opcode, flags, P_Key, the masked byte 4,
    /// DestQP), which every packet of one opcode and pad to one queue pair shares: an ICRC started
    /// over a header and fed them can be kept, and each packet finished with
    /// [`finish_after_bth_head`](Self::finish_after_bth_head). Panics if `bth` is shorter.
    #[inline]
    pub(crate) fn update_bth_head(&mut self, bth: &[u8]) {
        let mut b = [0u8; BTH_HEAD_LEN];
        b.copy_from_slice(&bth[..BTH_HEAD_LEN]);
        mask_bth(&mut b);
        self.crc = crc32::update8(self.crc, &b);
    }

    /// Feeds `ib` (BTH through pad) from byte [`BTH_HEAD_LEN`] on (AckReq and PSN, nothing of it
    /// masked, then the rest) and returns the ICRC: for an ICRC fed `ib`'s own BTH head
    /// ([`update_bth_head`](Self::update_bth_head)), the same value as [`finish_ib`](Self::finish_ib)
    /// from the start before it. Panics if `ib` is shorter than the head. Always inlined: the
    /// transmission's only hashing, one check and a jump to the folding.
    #[inline(always)]
    pub(crate) fn finish_after_bth_head(self, ib: &[u8]) -> u32 {
        crc32::update(self.crc, &ib[BTH_HEAD_LEN..])
    }

    /// Feeds bytes after the BTH (extension headers, payload, pad), unmasked.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.crc = crc32::update(self.crc, bytes);
    }

    /// Feeds `ib` (BTH through pad) and returns the ICRC. Panics if `ib` is shorter than a BTH.
    /// Always inlined, the fallback apart: every received packet's check calls it, and out of line
    /// it cost the receive a call and a frame.
    #[inline(always)]
    pub fn finish_ib(self, ib: &[u8]) -> u32 {
        assert!(ib.len() >= BTH_LEN, "finish_ib: {} bytes, no BTH", ib.len());
        // The whole of `ib` in one run, the masked byte (FECN, BECN, resv6a) counted as ones in
        // the folding's first lane: no copy, and no separate step for the head.
        const _: () = assert!(super::bth::field::ECN == 4);
        if let Some(crc) = crc32::update_bth(self.crc, ib) {
            return crc;
        }
        self.finish_ib_masked(ib)
    }

    /// [`finish_ib`](Self::finish_ib) where the CPU cannot fold the masked byte in place.
    #[cold]
    #[inline(never)]
    fn finish_ib_masked(mut self, ib: &[u8]) -> u32 {
        // The mask touches only the BTH head: the head masked, then everything after it in one
        // run, hashes in whole 8-byte steps where the BTH and the rest apart left two short tails.
        self.update_bth_head(ib);
        self.finish_after_bth_head(ib)
    }

    /// The ICRC value; write it with `to_le_bytes()`.
    #[inline]
    pub fn finish(self) -> u32 {
        self.crc
    }
}

/// RoCE v1 ICRC of `ib` (BTH through pad) under `grh`.
pub fn icrc_v1(grh: &GrhRepr, ib: &[u8]) -> u32 {
    Icrc::v1(grh, ib.len()).finish_ib(ib)
}

/// RoCE v2/IPv4 ICRC of `ib_and_payload_and_pad` (BTH through pad) under `ip` and `udp`, computed
/// without the IP header bytes (for a UDP socket, where the kernel writes them).
pub fn icrc_v2_ipv4(ip: &Ipv4Repr, udp: &UdpRepr, ib_and_payload_and_pad: &[u8]) -> u32 {
    Icrc::v2_ipv4(ip, udp, ib_and_payload_and_pad.len()).finish_ib(ib_and_payload_and_pad)
}

/// RoCE v2/IPv6 ICRC of `ib_and_payload_and_pad` (BTH through pad) under `ip` and `udp`.
pub fn icrc_v2_ipv6(ip: &Ipv6Repr, udp: &UdpRepr, ib_and_payload_and_pad: &[u8]) -> u32 {
    Icrc::v2_ipv6(ip, udp, ib_and_payload_and_pad.len()).finish_ib(ib_and_payload_and_pad)
}

/// Splits what a UDP socket delivers for RoCE v2 (BTH through ICRC) into the IB part (BTH through pad,
/// for [`IbRepr::parse`](super::IbRepr::parse)) and the ICRC it carries. Fails if it cannot hold a BTH
/// and an ICRC.
pub fn split_icrc(bth_through_icrc: &[u8]) -> Result<(&[u8], u32)> {
    need("BTH and ICRC", BTH_LEN + ICRC_LEN, bth_through_icrc.len())?;
    let (ib, icrc) = bth_through_icrc.split_at(bth_through_icrc.len() - ICRC_LEN);
    Ok((ib, u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]])))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward reading of roce-wire.md §5.2: copy everything, mask, hash once.
    /// (offset, bits) masks: byte 0's low nibble when `tclass` (IPv6 and the GRH start their traffic
    /// class there), and the bytes `whole`, all eight bits.
    fn masked(tclass: bool, whole: &[usize]) -> Vec<(usize, u8)> {
        let nibble = tclass.then_some((0, 0x0f));
        nibble
            .into_iter()
            .chain(whole.iter().map(|&at| (at, 0xff)))
            .collect()
    }

    fn reference(net_through_pad: &[u8], masks: &[(usize, u8)]) -> u32 {
        let mut b = vec![0xffu8; 8];
        b.extend_from_slice(net_through_pad);
        for &(at, m) in masks {
            b[8 + at] |= m;
        }
        crc32fast::hash(&b)
    }

    #[test]
    fn split_icrc_reads_the_trailer_little_endian() {
        let mut b = [0u8; 20];
        b[16..].copy_from_slice(&[0x82, 0xfd, 0x00, 0x2a]);
        let (ib, icrc) = split_icrc(&b).unwrap();
        assert_eq!((ib.len(), icrc), (16, 0x2a00_fd82));
        assert!(matches!(
            split_icrc(&b[..15]),
            Err(super::super::Error::Truncated {
                need: 16,
                have: 15,
                ..
            })
        ));
    }

    #[test]
    fn pseudo_lrh_constant_is_crc_of_eight_ones() {
        assert_eq!(crc32fast::hash(&[0xff; 8]), PSEUDO_LRH_CRC);
        // rxe's raw register value (roce-wire.md §5.1).
        assert_eq!(PSEUDO_LRH_CRC ^ 0xffff_ffff, 0xdebb_20e3);
    }

    #[test]
    fn incremental_equals_whole_copy_for_ipv4() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        let masks = masked(false, &[1, 8, 10, 11, 26, 27, 32]);
        let mut c = Icrc::v2_ipv4_header(&bytes[..20], &bytes[20..28]);
        c.update_bth(&bytes[28..40]);
        c.update(&bytes[40..100]);
        c.update(&bytes[100..]);
        assert_eq!(c.finish(), reference(&bytes, &masks));
    }

    #[test]
    fn contiguous_equals_incremental() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 53 + 7) as u8).collect();
        let v4 = Icrc::v2_ipv4_header(&bytes[..20], &bytes[20..28]).finish_ib(&bytes[28..]);
        assert_eq!(
            icrc_contiguous(Encapsulation::V2v4, &bytes[..28], &bytes[28..]),
            v4
        );
        let v6 = Icrc::v2_ipv6_header(&bytes[..40], &bytes[40..48]).finish_ib(&bytes[48..]);
        assert_eq!(
            icrc_contiguous(Encapsulation::V2v6, &bytes[..48], &bytes[48..]),
            v6
        );
        let v1 = Icrc::v1_header(&bytes[..40]).finish_ib(&bytes[40..]);
        assert_eq!(
            icrc_contiguous(Encapsulation::V1, &bytes[..40], &bytes[40..]),
            v1
        );
    }

    #[test]
    fn incremental_equals_whole_copy_for_ipv6_and_grh() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 91 + 5) as u8).collect();
        let v6 = masked(true, &[1, 2, 3, 7, 46, 47, 52]);
        let mut c = Icrc::v2_ipv6_header(&bytes[..40], &bytes[40..48]);
        c.update_bth(&bytes[48..60]);
        c.update(&bytes[60..]);
        assert_eq!(c.finish(), reference(&bytes, &v6));
        let v1 = masked(true, &[1, 2, 3, 7, 44]);
        assert_eq!(
            Icrc::v1_header(&bytes[..40]).finish_ib(&bytes[40..]),
            reference(&bytes, &v1)
        );
    }
}
