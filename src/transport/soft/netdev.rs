//! Network interface discovery for the soft transport: `-d lo`, `-d eth0`, `-d veth0`.
//!
//! Everything comes from the kernel of the current network namespace: `getifaddrs(3)` for the index,
//! flags, MAC and addresses, and the `SIOCGIFMTU` ioctl for the link MTU (not `/sys/class/net`, which
//! shows the namespace that mounted sysfs rather than ours). From that we derive what an RDMA device
//! would show in its GID table and its active MTU.

use std::ffi::CStr;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::params::RoceVersion;

/// Errors of interface discovery; every message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    /// No interface of that name in this network namespace.
    #[error(
        "no network interface named '{name}' in this network namespace; interfaces here: {}; pass one of them with -d",
        available.join(", ")
    )]
    NotFound {
        /// The name asked for.
        name: String,
        /// The interfaces that do exist.
        available: Vec<String>,
    },
    /// The interface exists but is administratively down.
    #[error("interface '{name}' is down; bring it up with `ip link set {name} up`")]
    Down {
        /// The interface.
        name: String,
    },
    /// The interface has no address of the family the chosen encapsulation needs.
    #[error(
        "interface '{name}' has no {family} address; add one (e.g. `ip addr add {example} dev {name}`) or pick another interface with -d"
    )]
    NoAddress {
        /// The interface.
        name: String,
        /// `IPv4` or `IPv6`.
        family: AddrFamily,
        /// An example address of that family for the hint.
        example: &'static str,
    },
    /// The interface has no link-layer (MAC) address, which RoCE v1 and AF_PACKET need.
    #[error(
        "interface '{name}' has no Ethernet address; RoCE v1 and --io packet need an Ethernet interface (veth, eth0)"
    )]
    NoMac {
        /// The interface.
        name: String,
    },
    /// The link MTU is too small for even a 256-byte RoCE MTU.
    #[error(
        "interface '{name}' has MTU {link_mtu}, too small for the smallest RoCE MTU (256 + {overhead} bytes of headers); raise it with `ip link set {name} mtu 1500`"
    )]
    MtuTooSmall {
        /// The interface.
        name: String,
        /// Its link MTU.
        link_mtu: u32,
        /// Header bytes the encapsulation adds.
        overhead: u32,
    },
    /// A system call failed.
    #[error("{context}: {source}")]
    Os {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// An address family, for messages and address selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrFamily {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
}

impl fmt::Display for AddrFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddrFamily::Ipv4 => "IPv4",
            AddrFamily::Ipv6 => "IPv6",
        })
    }
}

/// A RoCE path MTU: 256, 512, 1024, 2048 or 4096 bytes of payload per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoceMtu(u32);

impl RoceMtu {
    /// Every RoCE MTU, smallest first (IB enum values 1..=5).
    pub const ALL: [RoceMtu; 5] = [
        RoceMtu(256),
        RoceMtu(512),
        RoceMtu(1024),
        RoceMtu(2048),
        RoceMtu(4096),
    ];

    /// The MTU of `bytes` if it is one of the five RoCE MTUs.
    pub fn from_bytes(bytes: u32) -> Option<RoceMtu> {
        RoceMtu::ALL.into_iter().find(|m| m.0 == bytes)
    }

    /// The largest RoCE MTU whose packets, with `overhead` header bytes, fit in `link_mtu`.
    pub fn fitting(link_mtu: u32, overhead: u32) -> Option<RoceMtu> {
        let room = link_mtu.checked_sub(overhead)?;
        RoceMtu::ALL.into_iter().rev().find(|m| m.0 <= room)
    }

    /// Payload bytes per packet.
    pub fn bytes(self) -> u32 {
        self.0
    }

    /// The IB enum value (`IBV_MTU_256` = 1 ... `IBV_MTU_4096` = 5).
    pub fn ib_enum(self) -> u8 {
        (self.0.trailing_zeros() - 7) as u8
    }
}

impl fmt::Display for RoceMtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The three RoCE encapsulations; each has its own header overhead inside the link MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// RoCE v1: Ethertype 0x8915, GRH.
    V1,
    /// RoCE v2 over IPv4 + UDP 4791.
    V2Ipv4,
    /// RoCE v2 over IPv6 + UDP 4791.
    V2Ipv6,
}

impl Encap {
    /// Bytes inside the link MTU (i.e. after the Ethernet header) that are not RDMA payload, for the
    /// worst data packet: network header, UDP, BTH (12), RETH (16) + ImmDt (4) on WRITE_ONLY_WITH_IMM,
    /// and the ICRC (4). Pad bytes never matter because a full-MTU payload is a multiple of 4.
    ///
    /// rxe subtracts a flat 80 (`RXE_MAX_HDR_LENGTH`); that equals or exceeds ours except for IPv6,
    /// where 84 is the truth. Both give the same RoCE MTU for every common link MTU (1500, 9000, 65536).
    pub fn overhead(self) -> u32 {
        const IB_MAX: u32 = 12 + 16 + 4 + 4;
        match self {
            Encap::V1 => 40 + IB_MAX,
            Encap::V2Ipv4 => 20 + 8 + IB_MAX,
            Encap::V2Ipv6 => 40 + 8 + IB_MAX,
        }
    }

    /// The RoCE version of this encapsulation.
    pub fn version(self) -> RoceVersion {
        match self {
            Encap::V1 => RoceVersion::V1,
            Encap::V2Ipv4 | Encap::V2Ipv6 => RoceVersion::V2,
        }
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encap::V1 => "RoCE v1",
            Encap::V2Ipv4 => "RoCE v2/IPv4",
            Encap::V2Ipv6 => "RoCE v2/IPv6",
        })
    }
}

/// What kind of GID an entry is, as `show_gids` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidKind {
    /// RoCE v1 GID (GRH SGID/DGID).
    V1,
    /// RoCE v2 GID: an IPv4-mapped or IPv6 address.
    V2,
}

/// One entry of the derived GID table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The 16 GID bytes in wire order.
    pub gid: [u8; 16],
    /// v1 or v2.
    pub kind: GidKind,
    /// The IP address the GID stands for, if any (the EUI-64 default GID has none on some links).
    pub ip: Option<IpAddr>,
}

impl fmt::Display for GidEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            GidKind::V1 => "v1",
            GidKind::V2 => "v2",
        };
        write!(f, "{} ({kind}", Ipv6Addr::from(self.gid))?;
        if let Some(ip) = self.ip {
            write!(f, ", {ip}")?;
        }
        f.write_str(")")
    }
}

/// The GID that stands for an IP address: IPv4-mapped `::ffff:a.b.c.d` or the IPv6 address itself.
pub fn gid_of_ip(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The IP address a RoCE v2 GID stands for (IPv4 for `::ffff:a.b.c.d`).
pub fn ip_of_gid(gid: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// The link-local EUI-64 GID `fe80::` + MAC with the U/L bit flipped and `ff:fe` inserted: the default
/// GID every RoCE port has, and what RoCE v1 peers use to derive each other's MAC.
pub fn eui64_link_local(mac: [u8; 6]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8] = mac[0] ^ 0x02;
    g[9] = mac[1];
    g[10] = mac[2];
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13] = mac[3];
    g[14] = mac[4];
    g[15] = mac[5];
    g
}

/// The MAC inside a link-local EUI-64 GID, if the GID is one.
pub fn mac_of_eui64(gid: [u8; 16]) -> Option<[u8; 6]> {
    let link_local = gid[0] == 0xfe && gid[1] & 0xc0 == 0x80 && gid[2..8] == [0; 6];
    (link_local && gid[11] == 0xff && gid[12] == 0xfe)
        .then(|| [gid[8] ^ 0x02, gid[9], gid[10], gid[13], gid[14], gid[15]])
}

/// One network interface of this namespace, as the soft transport sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDev {
    /// Interface name (`lo`, `eth0`).
    pub name: String,
    /// Kernel interface index (AF_PACKET binds and IPv6 link-local scopes use it).
    pub index: u32,
    /// Ethernet address; `None` for interfaces without one (or all-zero, as on `lo`).
    pub mac: Option<[u8; 6]>,
    /// Link MTU: the largest IP packet (or Ethernet payload) the link carries.
    pub link_mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Operationally running (`IFF_RUNNING`): carrier present.
    pub running: bool,
    /// The loopback interface.
    pub loopback: bool,
    /// IPv4 addresses, in kernel order.
    pub ipv4: Vec<Ipv4Addr>,
    /// IPv6 addresses, in kernel order (link-local ones included).
    pub ipv6: Vec<Ipv6Addr>,
}

impl NetDev {
    /// Every interface of this network namespace, sorted by index.
    pub fn list() -> Result<Vec<NetDev>, NetdevError> {
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
            // SAFETY: ifa_addr points to a sockaddr whose family tells its real type and size.
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
                            let mut mac = [0u8; 6];
                            mac.copy_from_slice(&sll.sll_addr[..6]);
                            dev.mac = (mac != [0; 6]).then_some(mac);
                        }
                    }
                    _ => {}
                }
            }
        }
        drop(ifaddrs);
        for dev in &mut devs {
            if dev.index == 0 {
                dev.index = if_index(&dev.name)?;
            }
            dev.link_mtu = link_mtu(&dev.name)?;
        }
        devs.sort_by_key(|d| d.index);
        Ok(devs)
    }

    /// The interface called `name`; the error lists the interfaces that exist.
    pub fn by_name(name: &str) -> Result<NetDev, NetdevError> {
        let devs = NetDev::list()?;
        let available = devs.iter().map(|d| d.name.clone()).collect();
        devs.into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| NetdevError::NotFound {
                name: name.to_string(),
                available,
            })
    }

    fn empty(name: String) -> NetDev {
        NetDev {
            name,
            index: 0,
            mac: None,
            link_mtu: 0,
            up: false,
            running: false,
            loopback: false,
            ipv4: Vec::new(),
            ipv6: Vec::new(),
        }
    }

    /// Fails with a hint when the interface is administratively down.
    pub fn require_up(&self) -> Result<(), NetdevError> {
        if self.up {
            Ok(())
        } else {
            Err(NetdevError::Down {
                name: self.name.clone(),
            })
        }
    }

    /// The MAC, or an error saying that RoCE v1 / AF_PACKET need one.
    pub fn require_mac(&self) -> Result<[u8; 6], NetdevError> {
        self.mac.ok_or_else(|| NetdevError::NoMac {
            name: self.name.clone(),
        })
    }

    /// The address the soft transport uses for `family`: the first global one (not link-local) if any,
    /// else the first of that family. Loopback's `127.0.0.1` and `::1` are fine.
    pub fn address(&self, family: AddrFamily) -> Result<IpAddr, NetdevError> {
        let found = match family {
            AddrFamily::Ipv4 => self.ipv4.first().map(|a| IpAddr::V4(*a)),
            AddrFamily::Ipv6 => self
                .ipv6
                .iter()
                .find(|a| !a.is_unicast_link_local())
                .or_else(|| self.ipv6.first())
                .map(|a| IpAddr::V6(*a)),
        };
        found.ok_or(NetdevError::NoAddress {
            name: self.name.clone(),
            family,
            example: match family {
                AddrFamily::Ipv4 => "10.77.0.1/24",
                AddrFamily::Ipv6 => "fd77::1/64",
            },
        })
    }

    /// True when `ip` is configured on this interface. On `lo` every address of 127.0.0.0/8 counts,
    /// because the kernel accepts and binds them all (that is how two endpoints share one host).
    pub fn has_address(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => self.ipv4.contains(&v4) || (self.loopback && v4.is_loopback()),
            IpAddr::V6(v6) => self.ipv6.contains(&v6),
        }
    }

    /// The GID table a RoCE port on this interface would have, in `show_gids` order: the default
    /// EUI-64 link-local GID (needs a MAC), then per address the v1 and v2 entries. RoCE v1 gets every
    /// GID but IPv4-mapped ones are only meaningful for v2; we list them for v1 too, as the kernel does.
    pub fn gids(&self) -> Vec<GidEntry> {
        fn push_both(out: &mut Vec<GidEntry>, gid: [u8; 16], ip: Option<IpAddr>) {
            out.push(GidEntry {
                gid,
                kind: GidKind::V1,
                ip,
            });
            out.push(GidEntry {
                gid,
                kind: GidKind::V2,
                ip,
            });
        }
        let mut out = Vec::new();
        let eui = self.mac.map(eui64_link_local);
        if let Some(g) = eui {
            push_both(&mut out, g, None);
        }
        for v4 in &self.ipv4 {
            push_both(&mut out, gid_of_ip(IpAddr::V4(*v4)), Some(IpAddr::V4(*v4)));
        }
        for v6 in &self.ipv6 {
            let g = v6.octets();
            if Some(g) == eui {
                // The EUI-64 link-local address is the default GID already listed; name its IP.
                for e in out.iter_mut().filter(|e| e.gid == g) {
                    e.ip = Some(IpAddr::V6(*v6));
                }
                continue;
            }
            push_both(&mut out, g, Some(IpAddr::V6(*v6)));
        }
        out
    }

    /// The GIDs usable with `version`: v2 needs an IP behind the GID; v1 takes any entry of kind v1.
    pub fn gids_for(&self, version: RoceVersion) -> Vec<GidEntry> {
        self.gids()
            .into_iter()
            .filter(|e| match version {
                RoceVersion::V1 => e.kind == GidKind::V1,
                RoceVersion::V2 => e.kind == GidKind::V2 && e.ip.is_some(),
            })
            .collect()
    }

    /// The largest RoCE MTU whose packets fit the link MTU with `encap`'s headers.
    pub fn active_mtu(&self, encap: Encap) -> Result<RoceMtu, NetdevError> {
        RoceMtu::fitting(self.link_mtu, encap.overhead()).ok_or_else(|| NetdevError::MtuTooSmall {
            name: self.name.clone(),
            link_mtu: self.link_mtu,
            overhead: encap.overhead(),
        })
    }

    /// A multi-line description for the run header: name, index, flags, MAC, MTUs and GIDs.
    pub fn describe(&self) -> String {
        let mut s = self.summary();
        for encap in [Encap::V1, Encap::V2Ipv4, Encap::V2Ipv6] {
            if let Ok(m) = self.active_mtu(encap) {
                s.push_str(&format!("\n  active MTU {encap}: {m}"));
            }
        }
        for (i, g) in self.gids().iter().enumerate() {
            s.push_str(&format!("\n  GID[{i}] {g}"));
        }
        s
    }

    /// One line: name, index, state, link MTU and MAC (the first line of [`NetDev::describe`]).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} (index {}, {}{}{}, link MTU {}",
            self.name,
            self.index,
            if self.up { "up" } else { "down" },
            if self.running { ", running" } else { "" },
            if self.loopback { ", loopback" } else { "" },
            self.link_mtu
        );
        if let Some(m) = self.mac {
            s.push_str(&format!(", MAC {}", format_mac(m)));
        }
        s.push(')');
        s
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Owns the list `getifaddrs` returns and frees it on drop.
struct IfAddrs(*mut libc::ifaddrs);

impl IfAddrs {
    fn new() -> Result<IfAddrs, NetdevError> {
        let mut head = std::ptr::null_mut();
        // SAFETY: getifaddrs writes a list head we free in Drop.
        if unsafe { libc::getifaddrs(&mut head) } != 0 {
            return Err(os_error("getifaddrs (listing network interfaces)"));
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

fn os_error(context: impl Into<String>) -> NetdevError {
    NetdevError::Os {
        context: context.into(),
        source: std::io::Error::last_os_error(),
    }
}

fn c_name(name: &str) -> Result<std::ffi::CString, NetdevError> {
    std::ffi::CString::new(name).map_err(|_| NetdevError::Os {
        context: format!("interface name {name:?}"),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })
}

fn if_index(name: &str) -> Result<u32, NetdevError> {
    let c = c_name(name)?;
    // SAFETY: c is NUL-terminated.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(os_error(format!("if_nametoindex({name})"))),
        i => Ok(i),
    }
}

/// The link MTU through `SIOCGIFMTU` on a throwaway datagram socket.
fn link_mtu(name: &str) -> Result<u32, NetdevError> {
    let c = c_name(name)?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return Err(NetdevError::Os {
            context: format!("interface name {name:?} is longer than IFNAMSIZ"),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    }
    // SAFETY: plain socket creation; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_error("socket(AF_INET) for SIOCGIFMTU"));
    }
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads ifr_name and writes ifru_mtu of a valid ifreq.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    let result = if rc < 0 {
        Err(os_error(format!("SIOCGIFMTU on {name}")))
    } else {
        // SAFETY: the kernel filled the mtu member of the union.
        Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
    };
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_with_its_addresses() {
        let lo = NetDev::by_name("lo").expect("lo exists in every namespace");
        assert!(lo.loopback);
        assert!(lo.index >= 1);
        assert_eq!(lo.mac, None, "lo's all-zero MAC is reported as none");
        assert!(lo.link_mtu >= 1500);
        if lo.up {
            assert!(lo.ipv4.contains(&Ipv4Addr::LOCALHOST));
            assert_eq!(
                lo.address(AddrFamily::Ipv4).unwrap(),
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            );
            assert!(
                lo.has_address("127.0.0.2".parse().unwrap()),
                "all of 127/8 is usable on lo"
            );
        }
    }

    #[test]
    fn unknown_interface_lists_the_existing_ones() {
        let err = NetDev::by_name("nosuchif0").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("nosuchif0"), "{msg}");
        assert!(msg.contains("lo"), "the list names lo: {msg}");
        assert!(msg.contains("-d"), "{msg}");
    }

    #[test]
    fn loopback_gids_are_ipv4_mapped_and_ipv6() {
        let lo = NetDev::by_name("lo").unwrap();
        let v2 = lo.gids_for(RoceVersion::V2);
        if lo.ipv4.contains(&Ipv4Addr::LOCALHOST) {
            let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
            assert!(v2.iter().any(|e| e.gid == mapped), "{v2:?}");
        }
        if lo.ipv6.contains(&Ipv6Addr::LOCALHOST) {
            assert!(v2.iter().any(|e| e.gid == Ipv6Addr::LOCALHOST.octets()));
        }
        // No MAC on lo, so no EUI-64 default GID.
        assert!(lo.gids().iter().all(|e| e.gid[0] != 0xfe));
    }

    #[test]
    fn active_mtu_follows_rxe_for_common_links() {
        // rxe: link MTU - 80 rounded down to an IB MTU (roce-wire.md §4).
        for (link, want) in [
            (1500, 1024),
            (9000, 4096),
            (65536, 4096),
            (2200, 2048),
            (1200, 1024),
            (700, 512),
        ] {
            for encap in [Encap::V1, Encap::V2Ipv4, Encap::V2Ipv6] {
                assert_eq!(
                    RoceMtu::fitting(link, encap.overhead()).map(RoceMtu::bytes),
                    Some(want)
                );
            }
        }
        // Exactly at the edge: 1024 + 64 fits v2/IPv4, not v2/IPv6 (84 bytes of headers).
        assert_eq!(
            RoceMtu::fitting(1088, Encap::V2Ipv4.overhead())
                .unwrap()
                .bytes(),
            1024
        );
        assert_eq!(
            RoceMtu::fitting(1088, Encap::V2Ipv6.overhead())
                .unwrap()
                .bytes(),
            512
        );
        assert_eq!(RoceMtu::fitting(300, Encap::V2Ipv6.overhead()), None);
        // 576 (the IPv4 minimum): 512 + 64 fits exactly, where rxe's flat 80 would say 256.
        assert_eq!(
            RoceMtu::fitting(576, Encap::V2Ipv4.overhead())
                .unwrap()
                .bytes(),
            512
        );
        assert_eq!(RoceMtu::from_bytes(4096).unwrap().ib_enum(), 5);
        assert_eq!(RoceMtu::from_bytes(256).unwrap().ib_enum(), 1);
        assert_eq!(RoceMtu::from_bytes(1000), None);
    }

    #[test]
    fn eui64_round_trips_and_matches_the_kernel_rule() {
        let mac = [0x02, 0xfc, 0x00, 0x00, 0x00, 0x01];
        let gid = eui64_link_local(mac);
        // Same rule as the kernel's addrconf: fe80::fc:ff:fe00:1 for 02:fc:00:00:00:01.
        assert_eq!(
            Ipv6Addr::from(gid),
            "fe80::fc:ff:fe00:1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(mac_of_eui64(gid), Some(mac));
        assert_eq!(mac_of_eui64(gid_of_ip("10.0.0.1".parse().unwrap())), None);
    }

    #[test]
    fn gid_ip_round_trip() {
        for ip in ["10.77.0.2", "fd77::2", "::1"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(ip_of_gid(gid_of_ip(ip)), ip);
        }
    }

    #[test]
    fn gid_table_of_an_ethernet_interface() {
        let mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0x07];
        let ll = Ipv6Addr::from(eui64_link_local(mac));
        let dev = NetDev {
            name: "veth-test".into(),
            index: 7,
            mac: Some(mac),
            link_mtu: 1500,
            up: true,
            running: true,
            loopback: false,
            ipv4: vec!["10.77.0.1".parse().unwrap()],
            ipv6: vec![ll, "fd77::1".parse().unwrap()],
        };
        let v1 = dev.gids_for(RoceVersion::V1);
        assert_eq!(v1[0].gid, ll.octets(), "default GID first");
        assert_eq!(v1[0].ip, Some(IpAddr::V6(ll)));
        assert_eq!(v1.len(), 3, "{v1:?}");
        let v2 = dev.gids_for(RoceVersion::V2);
        assert_eq!(v2.len(), 3);
        assert!(
            v2.iter()
                .any(|e| e.gid == gid_of_ip("10.77.0.1".parse().unwrap()))
        );
        assert_eq!(
            dev.address(AddrFamily::Ipv6).unwrap(),
            "fd77::1".parse::<IpAddr>().unwrap()
        );
        assert!(dev.describe().contains("active MTU RoCE v2/IPv4: 1024"));
        let none = NetDev {
            ipv4: vec![],
            ..dev.clone()
        };
        let msg = none.address(AddrFamily::Ipv4).unwrap_err().to_string();
        assert!(
            msg.contains("no IPv4 address") && msg.contains("ip addr add"),
            "{msg}"
        );
        let down = NetDev { up: false, ..dev };
        assert!(
            down.require_up()
                .unwrap_err()
                .to_string()
                .contains("ip link set veth-test up")
        );
    }
}
