//! The path to the peer: how each queue pair frames its packets (`Path`), decided once at
//! connect from both sides' descriptions. Pure but for the neighbour lookup, which the caller
//! passes in.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use super::config::PeerMismatch;
use crate::params::RoceVersion;
use crate::transport::ConnInfo;
use crate::wire::{EthernetRepr, Gid, GrhRepr, Ipv4Repr, Ipv6Repr, MacAddr, NetRepr, UdpRepr};

/// How to frame packets to the peer, fixed at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// UDP socket: the kernel writes Ethernet/IP/UDP; we need the reprs for the ICRC only.
    Udp {
        /// The peer's socket address.
        dst: SocketAddr,
        /// The IP and UDP headers the kernel will write, for the ICRC.
        net: NetRepr,
    },
    /// AF_PACKET: every header ours.
    Frame {
        /// The Ethernet header (its EtherType is filled per packet from `net`).
        eth: EthernetRepr,
        /// The GRH, or IP and UDP headers.
        net: NetRepr,
    },
}

impl Path {
    /// Where the peer's packets come from, as the receive checks compare it: its IP address as a GID
    /// (RoCE v2), or its GID (v1).
    pub(crate) fn peer_source(&self) -> Gid {
        let (Path::Udp { net, .. } | Path::Frame { net, .. }) = self;
        match net {
            NetRepr::V1(grh) => grh.dgid,
            NetRepr::V2v4(ip, _) => Gid::from_ip(IpAddr::V4(ip.dst)),
            NetRepr::V2v6(ip, _) => Gid::from(ip.dst),
        }
    }

    /// Where the device sends the path's packets: the peer's UDP address, or nothing for a frame.
    #[inline]
    pub(crate) fn addr(&self) -> Option<SocketAddr> {
        match self {
            Path::Udp { dst, .. } => Some(*dst),
            Path::Frame { .. } => None,
        }
    }
}

/// What this side contributes to a path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalEnd {
    /// RoCE version in use.
    pub version: RoceVersion,
    /// The UDP socket's address, when the UDP backend is in use; `None` means AF_PACKET.
    pub socket: Option<SocketAddr>,
    /// Our IP address (RoCE v2).
    pub ip: Option<IpAddr>,
    /// Our GID.
    pub gid: Gid,
    /// Our MAC, if the interface has one.
    pub mac: Option<MacAddr>,
    /// The interface index (scope of IPv6 link-local peers).
    pub ifindex: u32,
    /// The interface is `lo` (frames need no real MAC).
    pub loopback: bool,
    /// The RoCE v2 UDP port of both sides.
    pub udp_port: u16,
}

/// rxe's UDP source port for a QP pair (roce-wire.md §8.1): symmetric, in 0xC000..=0xFFFF.
pub(crate) fn rxe_udp_sport(lqpn: u32, rqpn: u32) -> u16 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    let fl = (v & 0xf_ffff) as u32;
    (((fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14)) | 0xc000) as u16
}

/// The IPv4 header we send and assume: ID 0 and DF, what an unconnected PMTUDISC_DO UDP socket
/// sends (roce-wire.md §9) and what we write ourselves on AF_PACKET, so both backends produce
/// identical ICRCs.
pub(crate) fn ipv4_repr(src: Ipv4Addr, dst: Ipv4Addr) -> Ipv4Repr {
    Ipv4Repr::roce(src, dst)
}

/// The IPv6 header we send and assume.
pub(crate) fn ipv6_repr(src: Ipv6Addr, dst: Ipv6Addr) -> Ipv6Repr {
    Ipv6Repr {
        src,
        dst,
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 64,
    }
}

/// The framing for QP `lqpn` towards the peer's QP `rqpn`. `resolve(local, peer)` asks the
/// kernel's neighbour table for a peer MAC, when nothing else gives it (AF_PACKET, RoCE v2, a
/// peer that sent only its GID).
pub(crate) fn path_to(
    local: &LocalEnd,
    peer: &ConnInfo,
    lqpn: u32,
    rqpn: u32,
    resolve: impl FnOnce(IpAddr, IpAddr) -> Result<MacAddr, String>,
) -> Result<Path, PeerMismatch> {
    match local.socket {
        Some(sock) => udp_path(local, sock, peer),
        // Framed RoCE v2 picks its UDP source port as rxe does, from the two QPNs.
        None => frame_path(local, peer, rxe_udp_sport(lqpn, rqpn), resolve),
    }
}

/// UDP backend: the peer's socket address and the headers the kernel will write.
fn udp_path(local: &LocalEnd, sock: SocketAddr, peer: &ConnInfo) -> Result<Path, PeerMismatch> {
    // The peer's socket address (its port too: two endpoints may share an address on different
    // ports in tests), else its GID and our port.
    let mut dst = match &peer.addr {
        Some(a) => a
            .parse::<SocketAddr>()
            .map_err(|_| PeerMismatch::Address(a.clone()))?,
        None => SocketAddr::new(peer.gid.to_ip(), local.udp_port),
    };
    let peer_ip = dst.ip();
    if let (SocketAddr::V6(d), IpAddr::V6(v6)) = (&mut dst, peer_ip)
        && v6.is_unicast_link_local()
    {
        *d = SocketAddrV6::new(v6, d.port(), 0, local.ifindex);
    }
    let udp = UdpRepr {
        src_port: sock.port(),
        dst_port: dst.port(),
        checksum: 0,
    };
    let net = match (sock.ip(), peer_ip) {
        (IpAddr::V4(src), IpAddr::V4(d)) => NetRepr::V2v4(ipv4_repr(src, d), udp),
        (IpAddr::V6(src), IpAddr::V6(d)) => NetRepr::V2v6(ipv6_repr(src, d), udp),
        (l, p) => return Err(PeerMismatch::Family { local: l, peer: p }),
    };
    Ok(Path::Udp { dst, net })
}

/// AF_PACKET backend: every header, the peer's MAC included; RoCE v2 from UDP port `src_port`.
fn frame_path(
    local: &LocalEnd,
    peer: &ConnInfo,
    src_port: u16,
    resolve: impl FnOnce(IpAddr, IpAddr) -> Result<MacAddr, String>,
) -> Result<Path, PeerMismatch> {
    // A verbs or perftest peer sends only its GID: a link-local one holds the MAC, an IP-based
    // (v2) one is looked up in the kernel's neighbour table.
    let peer_mac = match (peer.mac, peer.gid.eui64_mac(), local.ip) {
        (Some(m), _, _) => m,
        (None, _, _) if local.loopback => MacAddr::ZERO,
        (None, Some(m), _) => m,
        (None, None, Some(ip)) if local.version == RoceVersion::V2 => {
            resolve(ip, peer.gid.to_ip()).map_err(PeerMismatch::Neighbour)?
        }
        (None, None, _) => return Err(PeerMismatch::NoMac),
    };
    let eth = EthernetRepr {
        dst: peer_mac,
        src: local.mac.unwrap_or(MacAddr::ZERO),
        vlan: None,
        ethertype: 0,
    };
    let net = match local.version {
        RoceVersion::V1 => NetRepr::V1(GrhRepr {
            tclass: 0,
            flow_label: 0,
            hop_limit: 64,
            sgid: local.gid,
            dgid: peer.gid,
        }),
        RoceVersion::V2 => {
            let udp = UdpRepr {
                dst_port: local.udp_port,
                ..UdpRepr::roce(src_port)
            };
            match (local.ip, peer.gid.to_ip()) {
                (Some(IpAddr::V4(s)), IpAddr::V4(d)) => NetRepr::V2v4(ipv4_repr(s, d), udp),
                (Some(IpAddr::V6(s)), IpAddr::V6(d)) => NetRepr::V2v6(ipv6_repr(s, d), udp),
                (l, p) => return Err(PeerMismatch::FramedFamily { local: l, peer: p }),
            }
        }
    };
    Ok(Path::Frame { eth, net })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::TransportKind;

    fn peer(gid: Gid, addr: Option<&str>, mac: Option<MacAddr>) -> ConnInfo {
        ConnInfo {
            transport: TransportKind::Soft,
            gid,
            gid_index: None,
            mac,
            addr: addr.map(str::to_string),
            mtu: 1024,
            qps: Vec::new(),
            needs_single_datagrams: false,
            connection: Default::default(),
            qkey: None,
        }
    }

    fn local(version: RoceVersion, socket: Option<&str>, ip: Option<&str>) -> LocalEnd {
        let ip = ip.map(|i| i.parse().unwrap());
        LocalEnd {
            version,
            socket: socket.map(|s| s.parse().unwrap()),
            ip,
            gid: ip.map_or(Gid::ZERO, Gid::from_ip),
            mac: Some(MacAddr([2, 0, 0, 0, 0, 1])),
            ifindex: 7,
            loopback: false,
            udp_port: 4791,
        }
    }

    fn no_neighbour(_: IpAddr, _: IpAddr) -> Result<MacAddr, String> {
        panic!("no neighbour lookup expected")
    }

    #[test]
    fn rxe_sport_matches_the_documented_example() {
        // roce-wire.md §8.1: QPNs 0x11/0x12 -> flow label 0x132 -> sport 0xC132, symmetric.
        assert_eq!(rxe_udp_sport(0x11, 0x12), 0xc132);
        assert_eq!(rxe_udp_sport(0x12, 0x11), 0xc132);
    }

    #[test]
    fn udp_path_takes_the_peer_socket_and_scopes_link_local_peers() {
        let me = local(RoceVersion::V2, Some("10.0.0.1:4791"), Some("10.0.0.1"));
        let p = peer(Gid::ZERO, Some("10.0.0.2:5000"), None);
        let Path::Udp { dst, net } = path_to(&me, &p, 0x11, 0x12, no_neighbour).unwrap() else {
            panic!("UDP backend frames nothing")
        };
        assert_eq!(dst, "10.0.0.2:5000".parse().unwrap());
        let NetRepr::V2v4(ip, udp) = net else {
            panic!("{net:?}")
        };
        assert_eq!((ip.ident, ip.dont_frag), (0, true));
        assert_eq!((udp.src_port, udp.dst_port, udp.checksum), (4791, 5000, 0));

        let me6 = local(RoceVersion::V2, Some("[fe80::1]:4791"), Some("fe80::1"));
        let p6 = peer("fe80::2".parse().unwrap(), None, None);
        let Path::Udp { dst, .. } = path_to(&me6, &p6, 1, 2, no_neighbour).unwrap() else {
            panic!()
        };
        assert_eq!(dst, "[fe80::2%7]:4791".parse().unwrap());

        let mixed = peer(Gid::ZERO, Some("[fd00::2]:4791"), None);
        let e = path_to(&me, &mixed, 1, 2, no_neighbour).unwrap_err();
        assert_eq!(
            e.to_string(),
            "this side uses 10.0.0.1 and the peer fd00::2: both must be IPv4 or both IPv6"
        );
        let bad = peer(Gid::ZERO, Some("nowhere"), None);
        assert_eq!(
            path_to(&me, &bad, 1, 2, no_neighbour).unwrap_err(),
            PeerMismatch::Address("nowhere".into())
        );
    }

    #[test]
    fn frame_path_finds_the_peer_mac() {
        // RoCE v1: the MAC from the peer's EUI-64 GID.
        let mut me = local(RoceVersion::V1, None, None);
        me.gid = Gid::link_local_eui64(MacAddr([2, 0, 0, 0, 0, 1]));
        let their_mac = MacAddr([2, 0, 0, 0, 0, 2]);
        let p = peer(Gid::link_local_eui64(their_mac), None, None);
        let Path::Frame { eth, net } = path_to(&me, &p, 1, 2, no_neighbour).unwrap() else {
            panic!()
        };
        assert_eq!(eth.dst, their_mac);
        assert!(matches!(net, NetRepr::V1(g) if g.dgid == p.gid && g.sgid == me.gid));
        // A v1 GID that holds no MAC, from a peer that sent none.
        let q = peer(Gid::from_ip("10.0.0.2".parse().unwrap()), None, None);
        assert_eq!(
            path_to(&me, &q, 1, 2, no_neighbour).unwrap_err(),
            PeerMismatch::NoMac
        );
        // RoCE v2: the neighbour table, and rxe's source port.
        let me = local(RoceVersion::V2, None, Some("10.0.0.1"));
        let Path::Frame { eth, net } = path_to(&me, &q, 0x11, 0x12, |l, p| {
            assert_eq!(
                (l.to_string(), p.to_string()),
                ("10.0.0.1".into(), "10.0.0.2".into())
            );
            Ok(their_mac)
        })
        .unwrap() else {
            panic!()
        };
        assert_eq!(eth.dst, their_mac);
        assert!(matches!(net, NetRepr::V2v4(_, u) if u.src_port == 0xc132 && u.dst_port == 4791));
        let e = path_to(&me, &q, 1, 2, |_, _| Err("unreachable".into())).unwrap_err();
        assert_eq!(e, PeerMismatch::Neighbour("unreachable".into()));
    }
}
