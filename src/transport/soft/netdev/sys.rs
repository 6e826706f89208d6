//! What the kernel of this network namespace says about its interfaces: `getifaddrs(3)` for names,
//! flags, MACs and addresses, `SIOCGIFINDEX` and `SIOCGIFMTU` for the index and the link MTU.

use std::ffi::CStr;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::net::{AddressFamily, SocketFlags, SocketType};

use super::{NetDev, NetdevError};
use crate::wire::MacAddr;

/// Every interface of this network namespace, sorted by index.
pub(super) fn list() -> Result<Vec<NetDev>, NetdevError> {
    let mut devs: Vec<NetDev> = Vec::new();
    let ifaddrs = IfAddrs::new()?;
    for ifa in ifaddrs.iter() {
        // SAFETY: getifaddrs gives a NUL-terminated name for every entry.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let pos = match devs.iter().position(|d| d.name == name) {
            Some(p) => p,
            None => {
                devs.push(NetDev::empty(name));
                devs.len() - 1
            }
        };
        let dev = &mut devs[pos];
        let flags = ifa.ifa_flags;
        dev.up = flags & libc::IFF_UP as u32 != 0;
        dev.running = flags & libc::IFF_RUNNING as u32 != 0;
        dev.loopback = flags & libc::IFF_LOOPBACK as u32 != 0;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null (checked above) and points to a sockaddr whose family tells
        // its real type and size; each arm reads only the type its family names.
        unsafe {
            match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    dev.ipv4
                        .push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    dev.ipv6.push(Ipv6Addr::from(sin6.sin6_addr.s6_addr));
                }
                libc::AF_PACKET => {
                    let sll = &*(ifa.ifa_addr as *const libc::sockaddr_ll);
                    dev.index = sll.sll_ifindex as u32;
                    if sll.sll_halen == 6 {
                        let mac =
                            MacAddr::try_from(&sll.sll_addr[..6]).expect("six bytes make a MAC");
                        dev.mac = (!mac.is_zero()).then_some(mac);
                    }
                }
                _ => {}
            }
        }
    }
    drop(ifaddrs);
    if devs.is_empty() {
        return Ok(devs);
    }
    let sock = ioctl_socket()?;
    for dev in &mut devs {
        if dev.index == 0 {
            dev.index = rustix::net::netdevice::name_to_index(&sock, &dev.name).map_err(|e| {
                NetdevError::Os {
                    context: format!("if_nametoindex({})", dev.name),
                    source: e.into(),
                }
            })?;
        }
        dev.link_mtu = link_mtu(&sock, &dev.name)?;
    }
    devs.sort_by_key(|d| d.index);
    Ok(devs)
}

/// Owns the list `getifaddrs` returns and frees it on drop.
struct IfAddrs(*mut libc::ifaddrs);

impl IfAddrs {
    fn new() -> Result<IfAddrs, NetdevError> {
        let mut head = std::ptr::null_mut();
        // SAFETY: getifaddrs writes a list head we free in Drop.
        if unsafe { libc::getifaddrs(&mut head) } != 0 {
            return Err(NetdevError::Os {
                context: "getifaddrs (listing network interfaces)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(IfAddrs(head))
    }

    fn iter(&self) -> impl Iterator<Item = &libc::ifaddrs> {
        let mut cur = self.0;
        std::iter::from_fn(move || {
            // SAFETY: a non-null entry of the list stays valid until freeifaddrs in Drop.
            let ifa = unsafe { cur.as_ref()? };
            cur = ifa.ifa_next;
            Some(ifa)
        })
    }
}

impl Drop for IfAddrs {
    fn drop(&mut self) {
        // SAFETY: the pointer came from getifaddrs and is freed once.
        unsafe { libc::freeifaddrs(self.0) }
    }
}

/// A throwaway datagram socket: the handle interface ioctls need (any family does).
fn ioctl_socket() -> Result<OwnedFd, NetdevError> {
    rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| NetdevError::Os {
        context: "socket(AF_INET) for SIOCGIFMTU".into(),
        source: e.into(),
    })
}

/// The link MTU of `name` through `SIOCGIFMTU`.
fn link_mtu(sock: &OwnedFd, name: &str) -> Result<u32, NetdevError> {
    let invalid = |context: String| NetdevError::Os {
        context,
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    };
    let c =
        std::ffi::CString::new(name).map_err(|_| invalid(format!("interface name {name:?}")))?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return Err(invalid(format!(
            "interface name {name:?} is longer than IFNAMSIZ"
        )));
    }
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads ifr_name (NUL-terminated, within IFNAMSIZ) and writes ifru_mtu of
    // the valid ifreq we pass; `sock` is an open socket.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
        return Err(NetdevError::Os {
            context: format!("SIOCGIFMTU on {name}"),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: the kernel filled the mtu member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}
