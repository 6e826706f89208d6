//! The GID table a RoCE port on an interface would have, derived from its MAC and addresses in
//! `show_gids` order, as rxe builds it.

use std::fmt;
use std::net::IpAddr;

use super::NetDev;
use crate::params::RoceVersion;
use crate::wire::Gid;

/// What kind of GID an entry is, as `show_gids` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidKind {
    /// RoCE v1 GID (GRH SGID/DGID).
    V1,
    /// RoCE v2 GID: an IPv4-mapped or IPv6 address.
    V2,
}

impl GidKind {
    /// The kind of entry a RoCE version uses.
    pub fn of(version: RoceVersion) -> GidKind {
        match version {
            RoceVersion::V1 => GidKind::V1,
            RoceVersion::V2 => GidKind::V2,
        }
    }
}

/// One entry of the derived GID table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
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
        write!(f, "{} ({kind}", self.gid)?;
        if let Some(ip) = self.ip {
            write!(f, ", {ip}")?;
        }
        f.write_str(")")
    }
}

impl NetDev {
    /// The GID table a RoCE port on this interface would have, in `show_gids` order: the default
    /// EUI-64 link-local GID (needs a MAC), then per address the v1 and v2 entries. RoCE v1 gets every
    /// GID but IPv4-mapped ones are only meaningful for v2; we list them for v1 too, as the kernel does.
    pub fn gids(&self) -> Vec<GidEntry> {
        fn push_both(out: &mut Vec<GidEntry>, gid: Gid, ip: Option<IpAddr>) {
            for kind in [GidKind::V1, GidKind::V2] {
                out.push(GidEntry { gid, kind, ip });
            }
        }
        let mut out = Vec::new();
        let eui = self.mac.map(Gid::link_local_eui64);
        if let Some(g) = eui {
            push_both(&mut out, g, None);
        }
        for v4 in &self.ipv4 {
            let ip = IpAddr::V4(*v4);
            push_both(&mut out, Gid::from_ip(ip), Some(ip));
        }
        for v6 in &self.ipv6 {
            let g = Gid::from(*v6);
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
}
