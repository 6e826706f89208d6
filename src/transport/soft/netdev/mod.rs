//! Network interface discovery for the soft transport: `-d lo`, `-d eth0`, `-d veth0`.
//!
//! Everything comes from the kernel of the current network namespace (`sys`): `getifaddrs(3)` for
//! the index, flags, MAC and addresses, and the `SIOCGIFMTU` ioctl for the link MTU (not
//! `/sys/class/net`, which shows the namespace that mounted sysfs rather than ours). From that we
//! derive what an RDMA device would show in its GID table (`gids`) and its active MTU.

mod gids;
mod sys;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::transport::{Param, RoceMtu};
use crate::wire::{Encapsulation, MacAddr};

pub(crate) use gids::GidEntry;
pub use gids::GidKind;

/// Errors of interface discovery; every message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    /// No interface of that name in this network namespace.
    #[error(
        "no network interface named '{name}' in this network namespace; interfaces here: {}; pass one of them with {}",
        available.join(", "), Param::Device
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
        "interface '{name}' has no {family} address; add one (e.g. `ip addr add {example} dev {name}`) or pick another interface with {}",
        Param::Device
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
        "interface '{name}' has no Ethernet address; RoCE v1 and {} packet need an Ethernet interface (veth, eth0)",
        Param::Io
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

/// One network interface of this namespace, as the soft transport sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDev {
    /// Interface name (`lo`, `eth0`).
    pub name: String,
    /// Kernel interface index (AF_PACKET binds and IPv6 link-local scopes use it).
    pub index: u32,
    /// Ethernet address; `None` for interfaces without one (or all-zero, as on `lo`).
    pub mac: Option<MacAddr>,
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
        sys::list()
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
    pub(crate) fn require_mac(&self) -> Result<MacAddr, NetdevError> {
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
    pub(crate) fn has_address(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => self.ipv4.contains(&v4) || (self.loopback && v4.is_loopback()),
            IpAddr::V6(v6) => self.ipv6.contains(&v6),
        }
    }

    /// Every address of the interface as text, IPv4 first: what an error lists as the choices.
    pub(crate) fn address_list(&self) -> Vec<String> {
        self.ipv4
            .iter()
            .map(|a| a.to_string())
            .chain(self.ipv6.iter().map(|a| a.to_string()))
            .collect()
    }

    /// The largest RoCE MTU whose packets fit the link MTU with `encap`'s headers.
    pub fn active_mtu(&self, encap: Encapsulation) -> Result<RoceMtu, NetdevError> {
        let overhead = encap.mtu_overhead();
        RoceMtu::fitting(self.link_mtu, overhead).ok_or_else(|| NetdevError::MtuTooSmall {
            name: self.name.clone(),
            link_mtu: self.link_mtu,
            overhead,
        })
    }

    /// A multi-line description for the run header: name, index, flags, MAC, MTUs and GIDs.
    pub fn describe(&self) -> String {
        let mut s = self.summary();
        for encap in Encapsulation::ALL {
            if let Ok(m) = self.active_mtu(encap) {
                s.push_str(&format!("\n  active MTU {encap}: {m}"));
            }
        }
        for (i, g) in self.gids().iter().enumerate() {
            s.push_str(&format!("\n  GID[{i}] {g}"));
        }
        s
    }

    /// The link speed sysfs reports (`/sys/class/net/<name>/speed`, Mb/s); `None` when it cannot
    /// be read (`lo`, a veth that is down). It may read -1 (unknown): see
    /// [`crate::wire::pfc::link_speed_mbps`].
    pub fn sysfs_speed(&self) -> Option<i64> {
        let path = format!("/sys/class/net/{}/speed", self.name);
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
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
            s.push_str(&format!(", MAC {m}"));
        }
        s.push(')');
        s
    }
}
