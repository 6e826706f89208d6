//! The setup plan: every decision [`SoftEndpoint::open`](super::SoftEndpoint::open) makes before it
//! opens a socket, as a pure function of the configuration and what the interface looks like
//! (as [`qp_attrs::plan`](crate::transport::verbs::qp_attrs::plan) is for verbs): encapsulation,
//! address and GID, MTU, batch slot sizes, GSO, the backend's settings, QPNs and PSNs, and the
//! notes that tell the user what was adjusted.

use std::fmt;
use std::net::IpAddr;

use super::config::{SoftConfig, SoftError};
use super::io::device::PlanInput;
use super::io::impair::ImpairConfig;
use super::io::{BackendPlan, IoError};
use super::netdev::{GidEntry, GidKind, NetDev};
use super::rc::ConfigError;
use crate::params::RoceVersion;
use crate::transport::rng;
use crate::transport::{Param, RoceMtu};
use crate::wire::{Encapsulation, Gid, ICRC_LEN};

/// A setup decision worth telling the user, printed as a `note:` line of the run header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SoftNote {
    /// `-m` asked for more than the interface carries.
    MtuCapped {
        /// The MTU asked for.
        asked: u32,
        /// The active MTU used instead.
        active: RoceMtu,
        /// The interface.
        dev: String,
        /// Its link MTU.
        link_mtu: u32,
    },
    /// The default address's port was in use on `lo` (the normal case when both sides of a pair run on
    /// one host), so the next free 127.0.0.x is used.
    AddressMoved {
        /// The address that was taken.
        taken: IpAddr,
        /// The UDP port.
        port: u16,
        /// The address used instead.
        using: IpAddr,
    },
    /// The peer receives with AF_PACKET, so GSO is off for sending.
    GsoOffForPeer,
}

impl fmt::Display for SoftNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SoftNote::MtuCapped {
                asked,
                active,
                dev,
                link_mtu,
            } => write!(
                f,
                "{} {asked} exceeds the active MTU {active} of {dev} (link MTU {link_mtu}); using {active}",
                Param::Mtu
            ),
            SoftNote::AddressMoved { taken, port, using } => write!(
                f,
                "{taken}:{port} is in use on this host (by a loopback pair's other side, as a rule); this side takes {using}:{port}"
            ),
            SoftNote::GsoOffForPeer => write!(
                f,
                "UDP GSO off for sending: the peer receives with AF_PACKET ({} packet), which would see super-datagrams whole",
                Param::Io
            ),
        }
    }
}

/// Number and first PSN of one queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpIds {
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// First PSN (24 bits).
    pub psn: u32,
}

/// Everything decided before a socket is opened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SetupPlan {
    /// RoCE v1, v2/IPv4 or v2/IPv6.
    pub encap: Encapsulation,
    /// Our IP address (RoCE v2; `None` for v1).
    pub(crate) local_ip: Option<IpAddr>,
    /// Our GID.
    pub gid: Gid,
    /// The path MTU this side offers.
    pub mtu: RoceMtu,
    /// What was adjusted, for the header.
    pub notes: Vec<SoftNote>,
    /// UDP GSO (or AF_PACKET super-frames) on.
    pub gso: bool,
    /// Deliberate impairment in force.
    pub impair: Option<ImpairConfig>,
    /// The backend to open, with its batches.
    pub backend: BackendPlan,
    /// One entry per queue pair.
    pub qps: Vec<QpIds>,
}

impl SetupPlan {
    /// After the backend moved to `using` (the UDP backend's `may_move`): our address and GID follow,
    /// and a note says why.
    pub(crate) fn moved_to(&mut self, using: IpAddr, port: u16) {
        if let Some(taken) = self.local_ip {
            self.notes
                .push(SoftNote::AddressMoved { taken, port, using });
        }
        self.local_ip = Some(using);
        self.gid = Gid::from_ip(using);
    }
}

/// The checks that need no interface; they come before the interface is looked up.
pub(crate) fn check_config(cfg: &SoftConfig) -> Result<(), SoftError> {
    BackendPlan::check(cfg.io, cfg.version)?;
    if cfg.qps == 0 || cfg.qps > 0xffff {
        return Err(SoftError::QpCount { qps: cfg.qps });
    }
    Ok(())
}

/// Plans the endpoint `cfg` describes on `dev`, with `impair` (the configured or environment's
/// impairment) and `seed` (for QPNs and PSNs).
pub(crate) fn plan(
    cfg: &SoftConfig,
    dev: &NetDev,
    impair: Option<ImpairConfig>,
    seed: u64,
) -> Result<SetupPlan, SoftError> {
    let impair = impair.filter(|i| !i.is_none());
    let given = gid_index_entry(cfg, dev)?;
    let bind = match (cfg.version, given) {
        (RoceVersion::V2, Some(e)) => e.ip,
        _ => cfg.bind,
    };
    let (encap, local_ip, gid) = match cfg.version {
        RoceVersion::V2 => {
            let ip = match bind {
                Some(ip) => ip,
                None => dev.address(cfg.family)?,
            };
            let encap = if ip.is_ipv4() {
                Encapsulation::V2v4
            } else {
                Encapsulation::V2v6
            };
            (encap, Some(ip), Gid::from_ip(ip))
        }
        RoceVersion::V1 => {
            let v1_gid = given.map(|e| e.gid);
            // The default GID (EUI-64 from the MAC) unless an address was asked for.
            let gid = match (v1_gid, bind, dev.mac) {
                (Some(g), _, _) => g,
                (None, Some(ip), _) => Gid::from_ip(ip),
                (None, None, Some(mac)) => Gid::link_local_eui64(mac),
                (None, None, None) => Gid::from_ip(dev.address(cfg.family)?),
            };
            (Encapsulation::V1, None, gid)
        }
    };
    if let Some(ip) = bind.or(local_ip)
        && !dev.has_address(ip)
    {
        return Err(IoError::AddrNotOnInterface {
            addr: ip,
            dev: dev.name.clone(),
            available: dev.address_list(),
        }
        .into());
    }
    let active = dev.active_mtu(encap)?;
    let mut notes = Vec::new();
    let mtu = match cfg.mtu {
        None => active,
        Some(m) => {
            let want = RoceMtu::from_bytes(m).ok_or(ConfigError::Pmtu(m))?;
            if want > active {
                notes.push(SoftNote::MtuCapped {
                    asked: m,
                    active,
                    dev: dev.name.clone(),
                    link_mtu: dev.link_mtu,
                });
                active
            } else {
                want
            }
        }
    };
    // Slots: a whole frame (Ethernet + VLAN room + network header) around the largest packet.
    let slot_len = 18 + 48 + 40 + mtu.bytes() as usize + 3 + ICRC_LEN;
    // Each backend plans itself from the same decisions (its batches, GSO, where it binds).
    // Impairment keeps GSO: the impairer works on each RoCE packet as it joins a super-datagram, so
    // an impaired run measures the same fast path as a clean one.
    let backend = BackendPlan::new(
        cfg.io,
        &PlanInput {
            dev,
            encap,
            local_ip,
            address_asked: cfg.bind.is_some() || cfg.gid_index.is_some(),
            udp_port: cfg.udp_port,
            batch: cfg.batch,
            slot_len,
            gso: cfg.gso,
            gro: cfg.gro,
            rx_ring: cfg.packet_rx_ring,
            kernel_rx: cfg.kernel_rx.unwrap_or_default(),
            marks: &cfg.marks,
            cnp_dscp: cfg.cnp_dscp(),
            cnp_prio: cfg.cnp_prio(),
            read_ce: cfg.read_ce,
        },
    )?;
    Ok(SetupPlan {
        encap,
        local_ip,
        gid,
        mtu,
        notes,
        gso: backend.gso(),
        impair,
        backend,
        qps: qp_ids(seed, cfg.qps),
    })
}

/// The entry `-x` selects: index N of the interface's whole GID table, as `-v` prints it (`GID[N]`)
/// and perftest and `show_gids` number it. Fails when the index is out of range, names an entry of
/// the other RoCE version (or, for v2, a GID with no address behind it), or an address other than
/// `--bind`'s.
fn gid_index_entry(cfg: &SoftConfig, dev: &NetDev) -> Result<Option<GidEntry>, SoftError> {
    let Some(index) = cfg.gid_index else {
        return Ok(None);
    };
    let table = dev.gids();
    let listed = |keep: &dyn Fn(&GidEntry) -> bool| -> Vec<String> {
        table
            .iter()
            .enumerate()
            .filter(|(_, e)| keep(e))
            .map(|(i, e)| format!("{i}: {e}"))
            .collect()
    };
    let usable = |e: &GidEntry| match cfg.version {
        RoceVersion::V1 => e.kind == GidKind::V1,
        RoceVersion::V2 => e.kind == GidKind::V2 && e.ip.is_some(),
    };
    let Some(&entry) = table.get(index as usize) else {
        return Err(SoftError::NoSuchGid {
            index,
            dev: dev.name.clone(),
            version: cfg.version,
            table: listed(&|_| true),
        });
    };
    if !usable(&entry) {
        return Err(SoftError::GidOfOtherKind {
            index,
            entry: entry.to_string(),
            version: cfg.version,
            usable: listed(&usable),
        });
    }
    match (entry.ip, cfg.bind) {
        (Some(ip), Some(bind)) if ip != bind => Err(SoftError::GidVersusBind {
            index,
            gid: entry.gid,
            ip,
            bind,
        }),
        _ => Ok(Some(entry)),
    }
}

/// Consecutive QPNs from a random base (low byte 0x11, as rxe's first QPN) and random PSNs.
fn qp_ids(seed: u64, n: usize) -> Vec<QpIds> {
    let base = ((seed as u32) & 0x7f_ff00).max(0x100) | 0x11;
    (0..n)
        .map(|i| QpIds {
            qpn: (base + i as u32) & 0xff_ffff,
            psn: (rng::mix(seed ^ i as u64) & 0xff_ffff) as u32,
        })
        .collect()
}

#[cfg(test)]
mod tests;
