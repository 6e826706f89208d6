//! The receive checks, as pure functions over received bytes: is this a whole RoCE packet, is its
//! ICRC right, is it for us, which queue pair does it go to, and does it come from that queue pair's
//! peer. Whatever fails is counted as a drop by reason ([`DropSummary`]), never trusted.

use std::net::{IpAddr, SocketAddr, SocketAddrV4};

use super::counters::DropSummary;
use super::icrc_cache::HeaderIcrcs;
use super::io::batch::{RxDatagram, RxFrame};
use super::io::udp::MAX_ROCE_UDP_PAYLOAD;
use super::path::{ipv4_repr, ipv6_repr};
use super::unreliable::Grh;
use crate::params::marks::{CE, ECN_MASK};
use crate::wire::pfc::MAC_CONTROL_ETHERTYPE;
use crate::wire::{
    Encapsulation, Gid, GrhPacket, ICRC_LEN, Icrc, Ipv4IdCache, Ipv4Packet, Ipv6Packet, NetRepr,
    RoceFrame, UdpRepr,
};

/// What a frame must be addressed to, to be ours (AF_PACKET sees every RoCE frame on the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameFilter {
    /// Our encapsulation: frames of another are not for us.
    pub encap: Encapsulation,
    /// Our IP address (RoCE v2).
    pub ip: Option<IpAddr>,
    /// Our GID (RoCE v1 checks the GRH DGID).
    pub gid: Gid,
}

/// ICRCs started over received headers, by the BTH-through-pad length, the sender's address and
/// port, and our address as the socket reported it (`None`: the one it is bound to). The length
/// comes first: it tells entries apart in one compare, where the addresses (enums) cost several.
/// With the start comes how IPv4 ID 1 moves the ICRC (0 on IPv6): the ID of a GSO send's second
/// segment, which carries a ping-pong's coalesced ACK; and the sender as a [`Source`]. Only a
/// datagram whose addresses passed the checks makes an entry, so a hit needs none of them again.
pub(crate) type RxIcrcs = HeaderIcrcs<RxIcrcKey, (Icrc, u32, Source)>;

/// What a received datagram's ICRC start is kept by in [`RxIcrcs`]: the BTH-through-pad length,
/// the sender, and our address as the socket reported it; first the three as one word
/// ([`v4_key`]) for an IPv4 sender to the bound address, which a plain datagram's lookup compares
/// alone ([`NOT_V4_KEY`] for the others).
pub(crate) type RxIcrcKey = (u64, usize, SocketAddr, Option<IpAddr>);

/// The word of an [`RxIcrcKey`] that is not an IPv4 sender's to the bound address: no [`v4_key`]
/// (its length field is below 0xffff).
const NOT_V4_KEY: u64 = u64::MAX;
const _: () = assert!(MAX_ROCE_UDP_PAYLOAD < 0xffff);

/// An IPv4 sender's `len` bytes (BTH..pad, below 0xffff) to the bound address as one word: its
/// address, port and length.
#[inline(always)]
fn v4_key(len: usize, src: &SocketAddrV4) -> u64 {
    u64::from(src.ip().to_bits()) << 32 | u64::from(src.port()) << 16 | len as u64
}

/// The source of a verified packet as the connected peer is known: its IP address as a GID (RoCE v2),
/// or the GRH's source GID (RoCE v1). [`from_peer`] compares it with the queue pair's peer.
pub(crate) type Source = Gid;

/// True when a packet from `src` may be processed by a queue pair connected to `peer`: the address
/// must be the peer's, as rxe's `check_addr` requires (the UDP port is not checked: RoCE senders pick
/// it per queue pair; nor the source MAC, which is a router's when the peer is routed).
#[inline]
pub(crate) fn from_peer(src: Source, peer: Source) -> bool {
    src == peer
}

/// [`check_udp_in`] of a whole datagram, as the tests hold one.
#[cfg(test)]
pub(crate) fn check_udp<'a>(
    d: &RxDatagram<'a>,
    local: SocketAddr,
    ipv4_ids: &mut Ipv4IdCache,
    icrcs: &mut RxIcrcs,
    drops: &mut DropSummary,
) -> Option<(&'a [u8], Source)> {
    let udp = UdpRx {
        data: d.data,
        src: &d.src,
        dst: &d.dst,
        truncated: d.truncated,
    };
    check_udp_in(udp, &local, ipv4_ids, icrcs, drops)
}

/// The fields of a received datagram [`check_udp_in`] reads, borrowed where the socket left them: the
/// addresses are enums, and a copy of them cost the receive more than the few fields a check reads.
#[derive(Clone, Copy)]
pub(crate) struct UdpRx<'a, 'm> {
    /// BTH..ICRC.
    pub data: &'a [u8],
    /// The sender.
    pub src: &'m Option<SocketAddr>,
    /// Our address it was sent to (`None`: the socket's).
    pub dst: &'m Option<IpAddr>,
    /// The datagram was cut.
    pub truncated: bool,
}

/// The lengths a RoCE packet in a UDP datagram (BTH..ICRC) may have: a BTH and its ICRC at least;
/// longer than any RoCE packet is junk (a GRO receive slot holds 64 KiB, so nothing truncates it).
const UDP_PACKET_LEN: std::ops::RangeInclusive<usize> = 12 + ICRC_LEN..=MAX_ROCE_UDP_PAYLOAD;

/// Checks a UDP datagram (BTH..ICRC) sent to the socket at `local` and returns its IB part
/// (BTH..pad) and its source, or counts the drop. Always inlined: its one caller, the receive
/// loop, would otherwise build the datagram and the result in memory for every packet.
#[inline(always)]
pub(crate) fn check_udp_in<'a>(
    d: UdpRx<'a, '_>,
    local: &SocketAddr,
    ipv4_ids: &mut Ipv4IdCache,
    icrcs: &mut RxIcrcs,
    drops: &mut DropSummary,
) -> Option<(&'a [u8], Source)> {
    if d.data.is_empty() && !d.truncated {
        drops.empty += 1;
        return None;
    }
    let Some(src) = d
        .src
        .as_ref()
        .filter(|_| !d.truncated && UDP_PACKET_LEN.contains(&d.data.len()))
    else {
        drops.malformed += 1;
        return None;
    };
    let (ib, icrc) = d.data.split_at(d.data.len() - ICRC_LEN);
    // The headers the ICRC covers depend only on the addresses, ports and length: a peer's packets
    // of one length share their start (and their checks of the addresses).
    let len = ib.len();
    let kept = |(_, l, s, dst): &RxIcrcKey| *l == len && same_sender(s, src) && dst == d.dst;
    let Some((start, id1_delta, from)) =
        icrcs.try_get_by(kept, || udp_icrc_start(len, src, d.dst, local, ipv4_ids))
    else {
        drops.malformed += 1;
        return None;
    };
    check_icrc(ib, icrc, (start, id1_delta), src.is_ipv4(), ipv4_ids, drops)?;
    Some((ib, from))
}

/// [`check_udp_in`] of a datagram from the IPv4 sender `src`, not cut, sent to the socket's own
/// address: the checks a plain IPv4 datagram makes, without the addresses' enums.
#[inline(always)]
pub(crate) fn check_udp_v4<'a>(
    data: &'a [u8],
    src: SocketAddrV4,
    local: &SocketAddr,
    ipv4_ids: &mut Ipv4IdCache,
    icrcs: &mut RxIcrcs,
    drops: &mut DropSummary,
) -> Option<(&'a [u8], Source)> {
    if data.is_empty() {
        drops.empty += 1;
        return None;
    }
    if !UDP_PACKET_LEN.contains(&data.len()) {
        drops.malformed += 1;
        return None;
    }
    let (ib, icrc) = data.split_at(data.len() - ICRC_LEN);
    let len = ib.len();
    // Length, sender and destination in one compare (the length is below MAX).
    let key = v4_key(len, &src);
    let kept = |(k, ..): &RxIcrcKey| *k == key;
    let Some((start, id1_delta, from)) = icrcs.try_get_by(kept, || {
        udp_icrc_start(len, &SocketAddr::V4(src), &None, local, ipv4_ids)
    }) else {
        drops.malformed += 1;
        return None;
    };
    check_icrc(ib, icrc, (start, id1_delta), true, ipv4_ids, drops)?;
    Some((ib, from))
}

/// The ICRC check of a datagram's `ib` (BTH..pad) against the `icrc` it carries, from the start
/// kept for its headers and what IPv4 ID 1 moves it by; counts the drop.
#[inline(always)]
fn check_icrc(
    ib: &[u8],
    icrc: &[u8],
    (start, id1_delta): (Icrc, u32),
    ipv4: bool,
    ipv4_ids: &mut Ipv4IdCache,
    drops: &mut DropSummary,
) -> Option<()> {
    let expected = start.finish_ib(ib);
    let found = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]);
    // The sender's IPv4 ID is covered by the ICRC but invisible to a UDP socket: computed under ID
    // 0, the ICRC must differ from the one found by what some ID makes (wire::Ipv4IdInfluence). ID 0
    // (a plain roceperf send), k (GSO segment k) and rxe's hashed IDs all pass; IPv6 has no ID.
    // ID 1 is checked by one compare (the cached delta is nonzero: every ID bit moves the ICRC).
    let moved = expected ^ found;
    let ok = moved == 0
        || (ipv4
            && (moved == id1_delta || ipv4_ids.get(ib.len()).solve(expected, found).is_some()));
    if !ok {
        drops.bad_icrc += 1;
        return None;
    }
    Some(())
}

/// `a == b`, an IPv4 sender's compare inline and an IPv6 one's out of line: the compiler hoisted
/// the loads of the wider address onto every packet's lookup.
#[inline(always)]
fn same_sender(a: &SocketAddr, b: &SocketAddr) -> bool {
    match (a, b) {
        (SocketAddr::V4(a), SocketAddr::V4(b)) => a == b,
        _ => same_wide_sender(a, b),
    }
}

/// [`same_sender`] of all but two IPv4 senders.
#[inline(never)]
fn same_wide_sender(a: &SocketAddr, b: &SocketAddr) -> bool {
    a == b
}

/// The ICRC start of `len` bytes (BTH..pad) from `src` to `dst` (`None`: `local`'s address) at
/// `local`'s port, with what IPv4 ID 1 moves it by and the sender as a [`Source`], keyed for
/// [`RxIcrcs`]; `None` when the addresses are of different families. Out of line: a peer's
/// packets of one length hit the cache.
#[cold]
#[inline(never)]
fn udp_icrc_start(
    len: usize,
    src: &SocketAddr,
    dst: &Option<IpAddr>,
    local: &SocketAddr,
    ipv4_ids: &mut Ipv4IdCache,
) -> Option<(RxIcrcKey, (Icrc, u32, Source))> {
    let net = datagram_net(*src, dst.unwrap_or(local.ip()), local.port())?;
    let id1 = match src {
        SocketAddr::V4(_) => ipv4_ids.get(len).delta(1),
        SocketAddr::V6(_) => 0,
    };
    let start = (net.icrc_start(len), id1, Gid::from_ip(src.ip()));
    let word = match (src, dst) {
        (SocketAddr::V4(s), None) => v4_key(len, s),
        _ => NOT_V4_KEY,
    };
    Some(((word, len, *src, *dst), start))
}

/// The network header (without its IP ID) of a datagram from `src` to `dst` at our UDP port
/// `port`, or `None` when the two are of different families.
fn datagram_net(src: SocketAddr, dst: IpAddr, port: u16) -> Option<NetRepr> {
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: port,
        checksum: 0,
    };
    match (src.ip(), dst) {
        (IpAddr::V4(s), IpAddr::V4(l)) => Some(NetRepr::V2v4(ipv4_repr(s, l), udp)),
        (IpAddr::V6(s), IpAddr::V6(l)) => Some(NetRepr::V2v6(ipv6_repr(s, l), udp)),
        _ => None,
    }
}

/// True when a RoCE v2 packet's TOS / traffic class byte `tclass` says a switch marked it
/// Congestion Experienced. RoCE v1 has no ECN field (its GRH traffic class is not read so).
#[inline]
pub(crate) fn is_ce(tclass: u8) -> bool {
    tclass & ECN_MASK == CE
}

/// Checks a whole received frame (from the ring or a batch): not cut, for this host, headers, ICRC
/// (over the real IP header) and destination; returns BTH..pad, the source and whether a RoCE v2
/// packet arrived marked CE, or counts the drop.
#[inline]
pub(crate) fn check_frame<'a>(
    f: &RxFrame<'a>,
    me: &FrameFilter,
    drops: &mut DropSummary,
) -> Option<(&'a [u8], Source, bool)> {
    if f.truncated {
        drops.malformed += 1;
        return None;
    }
    if f.pkttype == libc::PACKET_OTHERHOST {
        drops.not_for_us += 1;
        return None;
    }
    let Ok(view) = RoceFrame::new_checked(f.data) else {
        drops.malformed += 1;
        return None;
    };
    // The checked view holds the whole network header, so the unchecked views below are in bounds.
    let net = view.net_header();
    let (ours, src, ce) = match (me.encap, view.encapsulation()) {
        (Encapsulation::V1, Encapsulation::V1) => {
            let grh = GrhPacket::new_unchecked(net);
            (grh.dgid() == me.gid, grh.sgid(), false)
        }
        (Encapsulation::V2v4, Encapsulation::V2v4) => {
            let ip = Ipv4Packet::new_unchecked(net);
            (
                me.ip == Some(IpAddr::V4(ip.dst())),
                Gid::from_ip(IpAddr::V4(ip.src())),
                is_ce(ip.tos()),
            )
        }
        (Encapsulation::V2v6, Encapsulation::V2v6) => {
            let ip = Ipv6Packet::new_unchecked(net);
            (
                me.ip == Some(IpAddr::V6(ip.dst())),
                Gid::from(ip.src()),
                is_ce(ip.traffic_class()),
            )
        }
        _ => (false, Gid::ZERO, false),
    };
    if !ours {
        drops.not_for_us += 1;
        return None;
    }
    // Only frames addressed to us cost a CRC: on a shared link (lo, a bridge) a packet socket sees
    // every other endpoint's frames too, GSO super-frames among them, which are none of our business.
    if view.verify_icrc().is_err() {
        drops.bad_icrc += 1;
        return None;
    }
    Some((view.ib(), src, ce))
}

/// True for a MAC Control frame (EtherType 0x8808: a PFC or global pause frame), which the
/// AF_PACKET filter passes beside RoCE frames for the pause state (`soft::pfc`) to read; a RoCE
/// frame costs this one compare.
#[inline(always)]
pub(crate) fn is_mac_control(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&MAC_CONTROL_ETHERTYPE.to_be_bytes()[..])
}

/// Where a verified packet came in: what a UD receive needs to rebuild its network header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RxNet<'a> {
    /// The UDP payload (BTH..ICRC, `len` bytes) of a datagram from `src` to `dst`.
    Udp {
        /// The sender's address.
        src: IpAddr,
        /// Our address it was sent to.
        dst: IpAddr,
        /// UDP payload bytes.
        len: usize,
        /// The TOS / traffic class the socket read (0 when it reads none).
        tclass: u8,
    },
    /// A whole frame, headers included.
    Frame(&'a [u8]),
}

impl RxNet<'_> {
    /// Where datagram `d`, which passed [`check_udp`] on the socket bound to `local`, came in.
    #[inline]
    pub(crate) fn of_datagram(d: &RxDatagram<'_>, local: SocketAddr) -> RxNet<'static> {
        RxNet::Udp {
            // check_udp passed: the datagram has a sender.
            src: d.src.map_or(local.ip(), |s| s.ip()),
            dst: d.dst.unwrap_or(local.ip()),
            len: d.data.len(),
            tclass: d.tclass,
        }
    }

    /// The 40 bytes verbs puts in front of a UD message, as rxe fills them: RoCE v1's GRH; on RoCE v2
    /// 20 zero bytes and the IPv4 header, or the IPv6 header. A UDP socket hides the sender's IPv4 ID
    /// and TTL (rebuilt as roceperf sends them, 0 and 64) and the flow label (0); the TOS / traffic
    /// class is the one the socket read (IP_RECVTOS), the rest is exact.
    pub(crate) fn grh(&self) -> Grh {
        let mut g = [0u8; 40];
        match *self {
            RxNet::Udp {
                src,
                dst,
                len,
                tclass,
            } => match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => crate::wire::Ipv4Repr {
                    tos: tclass,
                    ..ipv4_repr(s, d)
                }
                .emit(&mut g[20..], 8 + len),
                (IpAddr::V6(s), IpAddr::V6(d)) => crate::wire::Ipv6Repr {
                    traffic_class: tclass,
                    ..ipv6_repr(s, d)
                }
                .emit(&mut g, 8 + len),
                _ => {}
            },
            RxNet::Frame(frame) => {
                if let Ok(view) = RoceFrame::new_checked(frame) {
                    let net = view.net_header();
                    match view.encapsulation() {
                        Encapsulation::V2v4 => g[20..].copy_from_slice(&net[..20]),
                        Encapsulation::V1 | Encapsulation::V2v6 => g.copy_from_slice(&net[..40]),
                    }
                }
            }
        }
        Grh(g)
    }
}

/// The index of the queue pair a verified packet (BTH..pad) goes to, when QPNs are consecutive
/// from `first_qpn`: BTH.DestQP minus the first. Out of range means no QP of ours.
#[inline]
pub(crate) fn qp_index(ib: &[u8], first_qpn: u32) -> usize {
    let dest_qp = u32::from_be_bytes([0, ib[5], ib[6], ib[7]]);
    dest_qp.wrapping_sub(first_qpn) as usize
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::transport::soft::io::packet_gso::tests::eth;
    use crate::transport::soft::io::udp::gro_packets;
    use crate::wire::{BthRepr, IbRepr, Opcode, RoceFrameRepr};

    /// An RDMA WRITE ONLY of 8 bytes to QP 0x12 (BTH + RETH + payload).
    fn ib_bytes() -> Vec<u8> {
        let mut bth = BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, 0x12, 0x100);
        bth.ack_req = true;
        let mut ib = IbRepr::new(bth);
        ib.reth = Some(crate::wire::RethRepr {
            va: 0x1000,
            rkey: 0x55,
            dma_len: 8,
        });
        let net = NetRepr::V2v4(
            ipv4_repr(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST),
            UdpRepr::roce(1),
        );
        let mut buf = vec![0u8; 256];
        let len = net.emit_transport(&ib, &[7; 8], &mut buf);
        buf.truncate(len - ICRC_LEN);
        buf
    }

    fn datagram<'a>(data: &'a [u8], src: &str) -> RxDatagram<'a> {
        RxDatagram {
            data,
            src: Some(src.parse().unwrap()),
            dst: None,
            truncated: false,
            gro_segment: None,
            tclass: 0,
        }
    }

    #[test]
    fn udp_packets_pass_under_any_ipv4_id_and_fail_when_corrupted() {
        let local: SocketAddr = "10.0.0.2:4791".parse().unwrap();
        let src = "10.0.0.1:4791";
        let ib = ib_bytes();
        let net = NetRepr::V2v4(
            ipv4_repr(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            UdpRepr::roce(4791),
        );
        let mut ids = Ipv4IdCache::new();
        let icrc = net.icrc(&ib);
        let mut drops = DropSummary::default();
        for id in [0u16, 1, 7, 0xbeef] {
            let moved = icrc ^ ids.get(ib.len()).delta(id);
            let pkt = [&ib[..], &moved.to_le_bytes()].concat();
            let got = check_udp(
                &datagram(&pkt, src),
                local,
                &mut ids,
                &mut RxIcrcs::new(),
                &mut drops,
            );
            let from = Gid::from_ip("10.0.0.1".parse().unwrap());
            assert_eq!(got, Some((&ib[..], from)), "IP ID {id}");
        }
        assert_eq!(drops, DropSummary::default());
        let mut pkt = [&ib[..], &icrc.to_le_bytes()].concat();
        pkt[20] ^= 1;
        assert_eq!(
            check_udp(
                &datagram(&pkt, src),
                local,
                &mut ids,
                &mut RxIcrcs::new(),
                &mut drops
            ),
            None
        );
        assert_eq!(drops.bad_icrc, 1);
        let short = datagram(&pkt[..10], src);
        assert_eq!(
            check_udp(&short, local, &mut ids, &mut RxIcrcs::new(), &mut drops),
            None
        );
        let from_v6 = datagram(&pkt, "[::1]:4791");
        assert_eq!(
            check_udp(&from_v6, local, &mut ids, &mut RxIcrcs::new(), &mut drops),
            None
        );
        assert_eq!(drops.malformed, 2);
        // Issue 18: a zero-length datagram is one packet, counted as empty.
        let nothing = datagram(&[], src);
        let parts: Vec<RxDatagram> = gro_packets(nothing).collect();
        assert_eq!(parts.len(), 1);
        assert_eq!(
            check_udp(&parts[0], local, &mut ids, &mut RxIcrcs::new(), &mut drops),
            None
        );
        assert_eq!((drops.empty, drops.malformed), (1, 2));
    }

    #[test]
    fn only_the_connected_peers_address_passes() {
        let peer = Gid::from_ip("10.0.0.1".parse().unwrap());
        assert!(from_peer(peer, peer));
        assert!(!from_peer(Gid::from_ip("10.0.0.9".parse().unwrap()), peer));
        assert!(!from_peer(Gid::from_ip("::1".parse().unwrap()), peer));
    }

    #[test]
    fn frames_are_checked_for_icrc_and_destination() {
        let (me, other) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 3));
        let frame = |dst: Ipv4Addr| {
            let repr = RoceFrameRepr {
                eth: eth(),
                net: NetRepr::V2v4(ipv4_repr(Ipv4Addr::new(10, 0, 0, 1), dst), UdpRepr::roce(1)),
                ib: IbRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x12, 9)),
            };
            let mut buf = vec![0u8; 128];
            let n = repr.emit(&mut buf, &[1, 2, 3, 4]);
            buf.truncate(n);
            buf
        };
        fn rx(data: &[u8]) -> RxFrame<'_> {
            RxFrame {
                data,
                pkttype: libc::PACKET_HOST,
                ifindex: 1,
                truncated: false,
            }
        }
        let filter = FrameFilter {
            encap: Encapsulation::V2v4,
            ip: Some(IpAddr::V4(me)),
            gid: Gid::from_ip(IpAddr::V4(me)),
        };
        let mut drops = DropSummary::default();
        let good = frame(me);
        let (got, src, ce) = check_frame(&rx(&good), &filter, &mut drops).expect("ours");
        assert!(!ce);
        // A switch's CE mark (TOS 0x02 -> 0x03, checksum redone as a switch does; the ICRC masks
        // the TOS) is seen; ECT(1) is not CE.
        for (tos, marked) in [(0x03u8, true), (0x6b, true), (0x01, false)] {
            let mut m = good.clone();
            m[15] = tos;
            m[24..26].fill(0);
            let sum: u32 = m[14..34]
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            let c = !(((sum & 0xffff) + (sum >> 16)) as u16);
            m[24..26].copy_from_slice(&c.to_be_bytes());
            let (_, _, ce) = check_frame(&rx(&m), &filter, &mut drops).expect("still ours");
            assert_eq!(ce, marked, "TOS {tos:#04x}");
        }
        assert_eq!(qp_index(got, 0x10), 2);
        assert_eq!(src, Gid::from_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(check_frame(&rx(&frame(other)), &filter, &mut drops), None);
        assert_eq!(drops.not_for_us, 1);
        let v1 = FrameFilter {
            encap: Encapsulation::V1,
            ..filter
        };
        assert_eq!(check_frame(&rx(&good), &v1, &mut drops), None);
        assert_eq!(drops.not_for_us, 2);
        let mut bad = good.clone();
        bad[60] ^= 0x80;
        assert_eq!(check_frame(&rx(&bad), &filter, &mut drops), None);
        assert_eq!(drops.bad_icrc, 1);
        assert_eq!(check_frame(&rx(&good[..30]), &filter, &mut drops), None);
        assert_eq!(drops.malformed, 1);
    }

    #[test]
    fn mac_control_frames_are_told_from_roce_frames_by_their_ethertype() {
        let mut pause = [0u8; 60];
        crate::wire::pfc::PauseRepr::priority(crate::wire::MacAddr([2, 0, 0, 0, 0, 9]), 3, 1)
            .emit(&mut pause);
        assert!(is_mac_control(&pause));
        assert!(!is_mac_control(&pause[..13]), "a runt is not");
        let mut v2 = pause;
        v2[12..14].copy_from_slice(&[0x08, 0x00]);
        assert!(!is_mac_control(&v2));
    }

    #[test]
    fn a_ud_receive_gets_the_network_header_rxe_would_give_it() {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let repr = RoceFrameRepr {
            eth: eth(),
            net: NetRepr::V2v4(ipv4_repr(src, dst), UdpRepr::roce(0xc000)),
            ib: IbRepr {
                deth: Some(crate::wire::DethRepr {
                    qkey: 0x1111_1111,
                    src_qp: 0x11,
                }),
                ..IbRepr::new(BthRepr::new(Opcode::UD_SEND_ONLY, 0x12, 9))
            },
        };
        let mut frame = vec![0u8; repr.frame_len(8)];
        repr.emit(&mut frame, &[5; 8]);
        // RoCE v2 over IPv4: 20 zero bytes, then the IPv4 header as it arrived.
        let from_frame = RxNet::Frame(&frame).grh().0;
        assert_eq!(from_frame[..20], [0; 20]);
        assert_eq!(from_frame[20..], frame[14..34]);
        // A UDP socket shows no IP header: it is rebuilt, equal here since we sent it the same way.
        let udp_len = frame.len() - 14 - 20 - 8;
        let rebuilt = RxNet::Udp {
            src: src.into(),
            dst: dst.into(),
            len: udp_len,
            tclass: 0,
        }
        .grh()
        .0;
        assert_eq!(rebuilt, from_frame);
        // RoCE v2 over IPv6: the IPv6 header itself.
        let v6 = RxNet::Udp {
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            len: 100,
            tclass: 0x6a,
        }
        .grh()
        .0;
        assert_eq!(
            (v6[0] >> 4, v6[6], u16::from_be_bytes([v6[4], v6[5]])),
            (6, 17, 108)
        );
        // The traffic class the socket read (0x6a) is the header's.
        assert_eq!(((v6[0] & 0xf) << 4) | (v6[1] >> 4), 0x6a);
    }
}
