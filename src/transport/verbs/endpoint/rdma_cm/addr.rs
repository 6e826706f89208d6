//! Addresses between Rust and librdmacm's structures: the `sockaddr` it takes, the IP address a
//! GID or a `sockaddr_storage` it gives stands for, and the peer that RTR attributes describe.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ptr;

use crate::transport::RoceMtu;
use crate::transport::cm::CmPeer;
use rdma_mummy_sys as sys;

/// `ip:port` as the `struct sockaddr_storage` librdmacm takes.
pub(super) fn sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (unspecified) address.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write(ptr::from_mut(&mut ss).cast(), sin) };
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { ptr::write(ptr::from_mut(&mut ss).cast(), sin6) };
        }
    }
    ss
}

/// The IP address a GID stands for on RoCE v2 (IPv4-mapped or IPv6).
pub(super) fn gid_ip(gid: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// The peer as RTR attributes describe it: QPN, its first PSN, the path MTU, its address.
pub(super) fn peer_of(rtr: &sys::ibv_qp_attr, responder_resources: u8) -> CmPeer {
    // SAFETY: ibv_gid is a union of byte views of the same 16 bytes.
    let dgid = unsafe { rtr.ah_attr.grh.dgid.raw };
    CmPeer {
        ip: gid_ip(dgid),
        qpn: rtr.dest_qp_num,
        psn: rtr.rq_psn,
        mtu: RoceMtu::from_ib_enum(rtr.path_mtu).map_or(1024, RoceMtu::bytes),
        responder_resources,
    }
}

/// The IP address of a `sockaddr_storage` (an id's peer, as librdmacm keeps it), if it is IPv4 or IPv6;
/// an IPv4-mapped IPv6 address as the IPv4 address it stands for.
pub(super) fn ip_of(ss: &libc::sockaddr_storage) -> Option<IpAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in, whose family it has.
            let sin: libc::sockaddr_in = unsafe { ptr::read(ptr::from_ref(ss).cast()) };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: libc::sockaddr_in6 = unsafe { ptr::read(ptr::from_ref(ss).cast()) };
            let v6 = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}
