//! The path to the peer: how each queue pair frames its packets (`Path`), decided once at
//! connect from both sides' descriptions. Pure but for the neighbour lookup, which the caller
//! passes in.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use super::config::PeerMismatch;
use super::marks::{Class, Classes};
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
        /// The IP and UDP headers the kernel will write, for the ICRC (the socket's options set
        /// their class: the device's).
        net: NetRepr,
    },
    /// AF_PACKET: every header ours.
    Frame {
        /// The Ethernet header (its EtherType is filled per packet from `net`).
        eth: EthernetRepr,
        /// The GRH, or IP and UDP headers.
        net: NetRepr,
        /// The class CNPs leave with: their TOS / traffic class and priority tag.
        cnp: Class,
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
    /// What data and CNPs are marked with.
    pub classes: Classes,
}

/// rxe's UDP source port for a QP pair (roce-wire.md §8.1): symmetric, in 0xC000..=0xFFFF.
pub(crate) fn rxe_udp_sport(lqpn: u32, rqpn: u32) -> u16 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    udp_sport_of_flow_label((v & 0xf_ffff) as u32)
}

/// The UDP source port a flow label gives (the kernel's `rdma_flow_label_to_udp_sport`), which rxe
/// uses when the address handle has a flow label (`rdma_get_udp_sport`).
pub(crate) fn udp_sport_of_flow_label(fl: u32) -> u16 {
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

/// The framing for QP `lqpn` towards the peer's QP `rqpn`, with IPv6 / GRH flow label
/// `flow_label` (`--flow_label`, 0 without). `resolve(local, peer)` asks the kernel's neighbour
/// table for a peer MAC, when nothing else gives it (AF_PACKET, RoCE v2, a peer that sent only its
/// GID).
pub(crate) fn path_to(
    local: &LocalEnd,
    peer: &ConnInfo,
    (lqpn, rqpn): (u32, u32),
    flow_label: u32,
    resolve: impl FnOnce(IpAddr, IpAddr) -> Result<MacAddr, String>,
) -> Result<Path, PeerMismatch> {
    let path = match local.socket {
        Some(sock) => udp_path(local, sock, peer),
        // Framed RoCE v2 picks its UDP source port as rxe does: from the flow label when there is
        // one, else from the two QPNs.
        None => {
            let sport = match flow_label {
                0 => rxe_udp_sport(lqpn, rqpn),
                fl => udp_sport_of_flow_label(fl),
            };
            frame_path(local, peer, sport, resolve)
        }
    }?;
    Ok(path.marked(&local.classes, flow_label))
}

impl Path {
    /// This path with data's class and `flow_label` in its headers, and CNPs' class beside them
    /// (AF_PACKET; the UDP backend's socket has no flow label, see `io::udp`).
    fn marked(self, classes: &Classes, flow_label: u32) -> Path {
        let label = |net: NetRepr| match net {
            NetRepr::V1(mut grh) => {
                grh.flow_label = flow_label;
                NetRepr::V1(grh)
            }
            NetRepr::V2v6(mut ip, udp) => {
                ip.flow_label = flow_label;
                NetRepr::V2v6(ip, udp)
            }
            v4 => v4,
        };
        match self {
            // The kernel writes these headers: the reprs are for the ICRC, which masks both fields,
            // and say what the socket sends (its IP_TOS / IPV6_TCLASS).
            Path::Udp { dst, net } => Path::Udp {
                dst,
                net: net.with_tclass(classes.data.tclass),
            },
            Path::Frame { mut eth, net, .. } => {
                eth.vlan = classes.data.vlan;
                Path::Frame {
                    eth,
                    net: label(net.with_tclass(classes.data.tclass)),
                    cnp: classes.cnp,
                }
            }
        }
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
    Ok(Path::Frame {
        eth,
        net,
        cnp: Class::default(),
    })
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
            classes: Classes::default(),
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
        let Path::Udp { dst, net } = path_to(&me, &p, (0x11, 0x12), 0, no_neighbour).unwrap()
        else {
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
        let Path::Udp { dst, .. } = path_to(&me6, &p6, (1, 2), 0, no_neighbour).unwrap() else {
            panic!()
        };
        assert_eq!(dst, "[fe80::2%7]:4791".parse().unwrap());

        let mixed = peer(Gid::ZERO, Some("[fd00::2]:4791"), None);
        let e = path_to(&me, &mixed, (1, 2), 0, no_neighbour).unwrap_err();
        assert_eq!(
            e.to_string(),
            "this side uses 10.0.0.1 and the peer fd00::2: both must be IPv4 or both IPv6"
        );
        let bad = peer(Gid::ZERO, Some("nowhere"), None);
        assert_eq!(
            path_to(&me, &bad, (1, 2), 0, no_neighbour).unwrap_err(),
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
        let Path::Frame { eth, net, .. } = path_to(&me, &p, (1, 2), 0, no_neighbour).unwrap()
        else {
            panic!()
        };
        assert_eq!(eth.dst, their_mac);
        assert!(matches!(net, NetRepr::V1(g) if g.dgid == p.gid && g.sgid == me.gid));
        // A v1 GID that holds no MAC, from a peer that sent none.
        let q = peer(Gid::from_ip("10.0.0.2".parse().unwrap()), None, None);
        assert_eq!(
            path_to(&me, &q, (1, 2), 0, no_neighbour).unwrap_err(),
            PeerMismatch::NoMac
        );
        // RoCE v2: the neighbour table, and rxe's source port.
        let me = local(RoceVersion::V2, None, Some("10.0.0.1"));
        let Path::Frame { eth, net, .. } = path_to(&me, &q, (0x11, 0x12), 0, |l, p| {
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
        let e = path_to(&me, &q, (1, 2), 0, |_, _| Err("unreachable".into())).unwrap_err();
        assert_eq!(e, PeerMismatch::Neighbour("unreachable".into()));
    }

    #[test]
    fn marks_go_into_every_header_and_the_flow_label_picks_the_source_port() {
        use crate::params::{Marks, RoceVersion as V};
        use crate::transport::soft::marks::classes;
        let marks = Marks {
            tclass: Some(104),
            sl: Some(3),
            flow_labels: vec![0x12345],
        };
        // RoCE v2/IPv6 over AF_PACKET: traffic class with ECT(0), flow label, priority tag, and
        // rxe's source port of the flow label.
        let mut me = local(V::V2, None, Some("fd00::1"));
        me.classes = classes(V::V2, &marks, 48, 6, true);
        let p = peer(
            "fd00::2".parse().unwrap(),
            None,
            Some(MacAddr([2, 0, 0, 0, 0, 2])),
        );
        let Path::Frame { eth, net, cnp } =
            path_to(&me, &p, (1, 2), 0x12345, no_neighbour).unwrap()
        else {
            panic!()
        };
        let NetRepr::V2v6(ip, udp) = net else {
            panic!("{net:?}")
        };
        assert_eq!((ip.traffic_class, ip.flow_label), (106, 0x12345));
        assert_eq!(udp.src_port, udp_sport_of_flow_label(0x12345));
        assert_eq!(udp.src_port, 0xc000 | (0x2345 ^ 0x4));
        assert_eq!(eth.vlan.map(|t| (t.pcp, t.vid)), Some((3, 0)));
        assert_eq!((cnp.tclass, cnp.vlan.map(|t| t.pcp)), (0xc2, Some(6)));
        // RoCE v1: the GRH's class as given, and the flow label.
        let mut me = local(V::V1, None, None);
        me.gid = Gid::link_local_eui64(MacAddr([2, 0, 0, 0, 0, 1]));
        me.classes = classes(V::V1, &marks, 48, 6, true);
        let p = peer(
            Gid::link_local_eui64(MacAddr([2, 0, 0, 0, 0, 2])),
            None,
            None,
        );
        let Path::Frame { net, .. } = path_to(&me, &p, (1, 2), 7, no_neighbour).unwrap() else {
            panic!()
        };
        assert!(matches!(net, NetRepr::V1(g) if g.tclass == 104 && g.flow_label == 7));
        // The UDP backend: the reprs say what the socket sends (for the ICRC, which masks it).
        let mut me = local(V::V2, Some("10.0.0.1:4791"), Some("10.0.0.1"));
        me.classes = classes(V::V2, &Marks::default(), 48, 6, false);
        let p = peer(Gid::ZERO, Some("10.0.0.2:4791"), None);
        let Path::Udp { net, .. } = path_to(&me, &p, (1, 2), 0, no_neighbour).unwrap() else {
            panic!()
        };
        assert_eq!(net.tclass(), 0x02, "ECT(0) by default");
    }
}
