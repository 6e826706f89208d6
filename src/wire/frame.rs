//! A whole RoCE frame: Ethernet, the network header, the IB headers, payload, pad and ICRC.
//!
//! Ethernet may be 802.1Q-tagged; the network header is a GRH (v1) or IPv4/IPv6 + UDP (v2). The
//! lengths are taken from the GRH PayLen or the IP/UDP length fields, never from the frame length
//! (which may include Ethernet padding).

use super::ethernet::ethertype;
use super::field::need;
use super::{
    BthPacket, Encapsulation, Error, EthernetFrame, EthernetRepr, GrhPacket, GrhRepr, ICRC_LEN,
    IbRepr, Icrc, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, ROCE_V2_PORT, Result, UdpPacket,
    UdpRepr,
};

/// The network layer of a RoCE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetRepr {
    /// RoCE v1: a GRH directly after the Ethernet header.
    V1(GrhRepr),
    /// RoCE v2 over IPv4.
    V2v4(Ipv4Repr, UdpRepr),
    /// RoCE v2 over IPv6.
    V2v6(Ipv6Repr, UdpRepr),
}

impl NetRepr {
    /// Bytes of network header: 40 (GRH), 28 (IPv4 + UDP) or 48 (IPv6 + UDP).
    #[inline]
    pub fn header_len(&self) -> usize {
        match self {
            NetRepr::V1(_) => GrhPacket::<&[u8]>::LEN,
            NetRepr::V2v4(..) => Ipv4Packet::<&[u8]>::LEN + UdpPacket::<&[u8]>::LEN,
            NetRepr::V2v6(..) => Ipv6Packet::<&[u8]>::LEN + UdpPacket::<&[u8]>::LEN,
        }
    }

    /// The EtherType that announces this network header.
    #[inline]
    pub fn ethertype(&self) -> u16 {
        match self {
            NetRepr::V1(_) => ethertype::ROCE_V1,
            NetRepr::V2v4(..) => ethertype::IPV4,
            NetRepr::V2v6(..) => ethertype::IPV6,
        }
    }

    /// The IPv4 TOS, IPv6 traffic class or GRH TClass byte.
    #[inline]
    pub fn tclass(&self) -> u8 {
        match self {
            NetRepr::V1(grh) => grh.tclass,
            NetRepr::V2v4(ip, _) => ip.tos,
            NetRepr::V2v6(ip, _) => ip.traffic_class,
        }
    }

    /// This header with its TOS / traffic class byte set to `tclass` (masked in the ICRC: a start
    /// kept for one class is the start for every other).
    #[inline]
    pub fn with_tclass(mut self, tclass: u8) -> NetRepr {
        match &mut self {
            NetRepr::V1(grh) => grh.tclass = tclass,
            NetRepr::V2v4(ip, _) => ip.tos = tclass,
            NetRepr::V2v6(ip, _) => ip.traffic_class = tclass,
        }
        self
    }

    /// The ICRC of `ib` (BTH through pad) under this network header.
    pub fn icrc(&self, ib: &[u8]) -> u32 {
        self.icrc_start(ib.len()).finish_ib(ib)
    }

    /// The ICRC started over this header for `ib_len` bytes of BTH through pad: the same for every
    /// packet of that length, so a caller may keep it and only [`finish_ib`](Icrc::finish_ib).
    #[inline]
    pub fn icrc_start(&self, ib_len: usize) -> Icrc {
        match self {
            NetRepr::V1(grh) => Icrc::v1(grh, ib_len),
            NetRepr::V2v4(ip, udp) => Icrc::v2_ipv4(ip, udp, ib_len),
            NetRepr::V2v6(ip, udp) => Icrc::v2_ipv6(ip, udp, ib_len),
        }
    }

    /// Bytes of BTH through ICRC (the UDP or GRH payload) for `ib` and `payload_len` bytes of payload.
    #[inline]
    pub fn transport_len(ib: &IbRepr, payload_len: usize) -> usize {
        ib.header_len() + payload_len + usize::from(ib.bth.pad_count & 3) + ICRC_LEN
    }

    /// The longest BTH-through-ICRC this header's 16-bit length field can describe.
    #[inline]
    pub fn max_transport_len(&self) -> usize {
        let max = usize::from(u16::MAX);
        match self {
            NetRepr::V1(_) => max,
            NetRepr::V2v4(..) => max - Ipv4Packet::<&[u8]>::LEN - UdpPacket::<&[u8]>::LEN,
            NetRepr::V2v6(..) => max - UdpPacket::<&[u8]>::LEN,
        }
    }

    /// Writes what follows this network header, BTH through ICRC: what a RoCE v2 UDP socket sends
    /// while the kernel writes the IP and UDP headers. The pad is `ib.bth.pad_count` zero bytes; the
    /// ICRC is computed under this header (for IPv4, `ident` and DF must be what the kernel sends).
    /// Returns the length. Panics if `buf` is shorter than [`transport_len`](Self::transport_len).
    pub fn emit_transport(&self, ib: &IbRepr, payload: &[u8], buf: &mut [u8]) -> usize {
        let len = Self::transport_len(ib, payload.len());
        let buf = &mut buf[..len];
        let hl = ib.header_len();
        ib.emit(buf);
        buf[hl..hl + payload.len()].copy_from_slice(payload);
        let icrc_at = len - ICRC_LEN;
        buf[hl + payload.len()..icrc_at].fill(0);
        let icrc = self.icrc(&buf[..icrc_at]);
        buf[icrc_at..].copy_from_slice(&icrc.to_le_bytes());
        len
    }

    /// Parses BTH through ICRC as received on a RoCE v2 UDP socket, verifying the ICRC under this
    /// network header (rebuilt from the socket's addresses; for IPv4 the sender's `ident` is needed).
    /// Returns the IB headers and the payload. Fails, never panics, on any input.
    pub fn parse_transport<'a>(&self, bth_through_icrc: &'a [u8]) -> Result<(IbRepr, &'a [u8])> {
        let (ib, found) = super::split_icrc(bth_through_icrc)?;
        if bth_through_icrc.len() > self.max_transport_len() {
            return Err(Error::Malformed(
                "RoCE packet longer than its 16-bit length fields allow",
            ));
        }
        let expected = self.icrc(ib);
        if expected != found {
            return Err(Error::BadIcrc { expected, found });
        }
        IbRepr::parse(ib)
    }

    /// Writes the network header for `ib_len` bytes of BTH through pad (the ICRC is added to the
    /// lengths here). Panics if `buf` is shorter than `header_len()`.
    pub fn emit(&self, buf: &mut [u8], ib_len: usize) {
        let after_net = ib_len + ICRC_LEN;
        match self {
            NetRepr::V1(grh) => grh.emit(buf, after_net),
            NetRepr::V2v4(ip, udp) => {
                let (ip_buf, udp_buf) = buf.split_at_mut(Ipv4Packet::<&[u8]>::LEN);
                ip.emit(ip_buf, UdpPacket::<&[u8]>::LEN + after_net);
                udp.emit(udp_buf, after_net);
            }
            NetRepr::V2v6(ip, udp) => {
                let (ip_buf, udp_buf) = buf.split_at_mut(Ipv6Packet::<&[u8]>::LEN);
                ip.emit(ip_buf, UdpPacket::<&[u8]>::LEN + after_net);
                udp.emit(udp_buf, after_net);
            }
        }
    }
}

/// A checked view of a whole RoCE frame: every header up to the BTH validated, the IB region and the
/// ICRC located. The ICRC is not verified until [`verify_icrc`](Self::verify_icrc) is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    frame: &'a [u8],
    encap: Encapsulation,
    net_at: usize,
    ib_at: usize,
    icrc_at: usize,
}

/// What one walk over the headers finds: the view and the reprs it validated on the way.
#[inline(always)]
fn walk(frame: &[u8]) -> Result<(RoceFrame<'_>, EthernetRepr, NetRepr)> {
    let eth_view = EthernetFrame::new_checked(frame)?;
    let eth = EthernetRepr::parse(&eth_view)?;
    let net_at = eth_view.header_len();
    let rest = &frame[net_at..];
    let (encap, net, net_len, net_end) = match eth.ethertype {
        ethertype::ROCE_V1 => {
            let p = GrhPacket::new_unchecked(rest);
            let grh = GrhRepr::parse(&p)?;
            let end = GrhPacket::<&[u8]>::LEN + usize::from(p.payload_len());
            (
                Encapsulation::V1,
                NetRepr::V1(grh),
                GrhPacket::<&[u8]>::LEN,
                end,
            )
        }
        ethertype::IPV4 => {
            let p = Ipv4Packet::new_unchecked(rest);
            let ip = Ipv4Repr::parse(&p)?;
            let udp = parse_roce_udp(p.payload())?;
            let end = usize::from(p.total_len());
            let hl = Ipv4Packet::<&[u8]>::LEN + UdpPacket::<&[u8]>::LEN;
            (Encapsulation::V2v4, NetRepr::V2v4(ip, udp), hl, end)
        }
        ethertype::IPV6 => {
            let p = Ipv6Packet::new_unchecked(rest);
            let ip = Ipv6Repr::parse(&p)?;
            let udp = parse_roce_udp(p.payload())?;
            let end = Ipv6Packet::<&[u8]>::LEN + usize::from(p.payload_len());
            let hl = Ipv6Packet::<&[u8]>::LEN + UdpPacket::<&[u8]>::LEN;
            (Encapsulation::V2v6, NetRepr::V2v6(ip, udp), hl, end)
        }
        other => return Err(Error::UnknownEtherType(other)),
    };
    need(
        "BTH and ICRC",
        net_len + BthPacket::<&[u8]>::LEN + ICRC_LEN,
        net_end,
    )?;
    let view = RoceFrame {
        frame,
        encap,
        net_at,
        ib_at: net_at + net_len,
        icrc_at: net_at + net_end - ICRC_LEN,
    };
    Ok((view, eth, net))
}

/// Parses the UDP header of a RoCE v2 packet, whose Length must fill the IP payload exactly.
fn parse_roce_udp(ip_payload: &[u8]) -> Result<UdpRepr> {
    let p = UdpPacket::new_unchecked(ip_payload);
    let udp = UdpRepr::parse(&p)?;
    if usize::from(p.len()) != ip_payload.len() {
        return Err(Error::Malformed("UDP Length disagrees with the IP length"));
    }
    if udp.dst_port != ROCE_V2_PORT {
        return Err(Error::NotRocePort(udp.dst_port));
    }
    Ok(udp)
}

impl<'a> RoceFrame<'a> {
    /// Validates every header up to the BTH and locates the IB region and the ICRC.
    pub fn new_checked(frame: &'a [u8]) -> Result<Self> {
        walk(frame).map(|(v, _, _)| v)
    }

    /// The encapsulation.
    #[inline]
    pub fn encapsulation(&self) -> Encapsulation {
        self.encap
    }

    /// The Ethernet header.
    #[inline]
    pub fn ethernet(&self) -> EthernetFrame<&'a [u8]> {
        EthernetFrame::new_unchecked(&self.frame[..self.net_at])
    }

    /// The network header bytes: the GRH, or the IP and UDP headers.
    #[inline]
    pub fn net_header(&self) -> &'a [u8] {
        &self.frame[self.net_at..self.ib_at]
    }

    /// BTH through pad: what [`IbRepr::parse`] takes.
    #[inline]
    pub fn ib(&self) -> &'a [u8] {
        &self.frame[self.ib_at..self.icrc_at]
    }

    /// The BTH (always present in a checked frame).
    #[inline]
    pub fn bth(&self) -> BthPacket<&'a [u8]> {
        BthPacket::new_unchecked(self.ib())
    }

    /// The frame up to and including the ICRC (Ethernet padding, if any, excluded).
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        &self.frame[..self.icrc_at + ICRC_LEN]
    }

    /// The ICRC the frame carries.
    #[inline]
    pub fn icrc(&self) -> u32 {
        let b = &self.frame[self.icrc_at..self.icrc_at + ICRC_LEN];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The ICRC computed over the frame's bytes.
    pub fn compute_icrc(&self) -> u32 {
        super::icrc::icrc_contiguous(self.encap, self.net_header(), self.ib())
    }

    /// Fails with `BadIcrc` unless the carried ICRC matches the computed one.
    pub fn verify_icrc(&self) -> Result<()> {
        let (expected, found) = (self.compute_icrc(), self.icrc());
        if expected == found {
            Ok(())
        } else {
            Err(Error::BadIcrc { expected, found })
        }
    }
}

/// A whole RoCE frame as plain fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceFrameRepr {
    /// Ethernet header. On emit its EtherType is taken from `net`.
    pub eth: EthernetRepr,
    /// GRH, or IP and UDP headers.
    pub net: NetRepr,
    /// IB transport headers. On emit `ib.bth.pad_count` pad bytes are written: set it to
    /// [`pad_len`](super::pad_len)`(payload.len())` for a conforming packet.
    pub ib: IbRepr,
}

impl RoceFrameRepr {
    /// Parses a frame and verifies its ICRC. Returns the repr and the payload (pad removed).
    pub fn parse(frame: &[u8]) -> Result<(Self, &[u8])> {
        let (view, eth, net) = walk(frame)?;
        view.verify_icrc()?;
        let (ib, payload) = IbRepr::parse(view.ib())?;
        Ok((RoceFrameRepr { eth, net, ib }, payload))
    }

    /// Parses a frame without checking its ICRC (for tools and tests that inspect damaged frames).
    pub fn parse_unverified(frame: &[u8]) -> Result<(Self, &[u8])> {
        let (view, eth, net) = walk(frame)?;
        let (ib, payload) = IbRepr::parse(view.ib())?;
        Ok((RoceFrameRepr { eth, net, ib }, payload))
    }

    /// Bytes before the payload: Ethernet, network and IB headers.
    #[inline]
    pub fn header_len(&self) -> usize {
        self.eth.header_len() + self.net.header_len() + self.ib.header_len()
    }

    /// Whole frame length for `payload_len` bytes of payload (pad and ICRC included, no FCS).
    #[inline]
    pub fn frame_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + usize::from(self.ib.bth.pad_count & 3) + ICRC_LEN
    }

    /// Writes the whole frame with `payload` into `buf` and returns its length. Panics if `buf` is
    /// shorter than `frame_len(payload.len())`.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> usize {
        let at = self.header_len();
        buf[at..at + payload.len()].copy_from_slice(payload);
        self.emit_in_place(buf, payload.len())
    }

    /// Writes every header, the pad and the ICRC around a payload of `payload_len` bytes that the
    /// caller already placed at `buf[header_len()..]` (so it can be copied straight from a memory
    /// region). Returns the frame length. Panics if `buf` is too short.
    pub fn emit_in_place(&self, buf: &mut [u8], payload_len: usize) -> usize {
        let total = self.frame_len(payload_len);
        let buf = &mut buf[..total];
        let mut eth = self.eth;
        eth.ethertype = self.net.ethertype();
        eth.emit(buf);
        let net_at = eth.header_len();
        let ib_at = net_at + self.net.header_len();
        let icrc_at = total - ICRC_LEN;
        self.net.emit(&mut buf[net_at..ib_at], icrc_at - ib_at);
        self.ib.emit(&mut buf[ib_at..]);
        buf[ib_at + self.ib.header_len() + payload_len..icrc_at].fill(0);
        let view = RoceFrame {
            frame: buf,
            encap: match self.net {
                NetRepr::V1(_) => Encapsulation::V1,
                NetRepr::V2v4(..) => Encapsulation::V2v4,
                NetRepr::V2v6(..) => Encapsulation::V2v6,
            },
            net_at,
            ib_at,
            icrc_at,
        };
        let icrc = view.compute_icrc();
        buf[icrc_at..].copy_from_slice(&icrc.to_le_bytes());
        total
    }
}
