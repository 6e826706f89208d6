//! Conversions between `std::net::SocketAddr` and the kernel's `sockaddr_storage`, without allocation.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Writes `addr` into `out` and returns the length the kernel expects.
pub(crate) fn encode(addr: SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin =
                unsafe { &mut *(out as *mut libc::sockaddr_storage as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            };
            sin.sin_zero = [0; 8];
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
            let sin6 =
                unsafe { &mut *(out as *mut libc::sockaddr_storage as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo().to_be();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// A peer's socket address encoded once, where its path is made ([`encode`]'s bytes and length):
/// the name a sendto passes, so a lone packet's send does not encode it again.
#[derive(Clone, Copy)]
pub(crate) struct Name {
    raw: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl Name {
    /// `addr`, encoded by [`encode`].
    pub(crate) fn of(addr: SocketAddr) -> Name {
        // SAFETY: sockaddr_storage is plain bytes; all zeros is a valid (AF_UNSPEC) value.
        let mut raw: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = encode(addr, &mut raw);
        Name { raw, len }
    }

    /// The name a sendto passes.
    #[inline(always)]
    pub(crate) fn ptr(&self) -> *const libc::sockaddr {
        &self.raw as *const libc::sockaddr_storage as *const libc::sockaddr
    }

    /// Its length, as [`encode`] returned it.
    #[inline(always)]
    pub(crate) fn len(&self) -> libc::socklen_t {
        self.len
    }
}

/// Reads an IPv4 or IPv6 socket address the kernel wrote; `None` for other families.
pub(crate) fn decode(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let sin =
                unsafe { &*(ss as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let sin6 =
                unsafe { &*(ss as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_v4_and_v6() {
        for a in ["127.0.0.2:4791", "[fd77::1]:4791", "[fe80::1%3]:1234"] {
            let a: SocketAddr = a.parse().unwrap();
            // SAFETY: all-zero is a valid sockaddr_storage.
            let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let len = encode(a, &mut ss);
            assert!(len as usize >= std::mem::size_of::<libc::sockaddr_in>());
            assert_eq!(decode(&ss), Some(a));
            let name = Name::of(a);
            assert_eq!(name.len(), len, "{a}: the length encode gives");
            assert_eq!(
                decode(&name.raw),
                Some(a),
                "{a}: a name the kernel reads back as the peer"
            );
        }
    }
}
