//! Devices and ports through libibverbs (sideway): list, open by `-d`, query a port (`-i`).

use super::error::VerbsError;
use super::loader;
use super::sysfs::Sysfs;
use super::{DeviceInfo, PortInfo};
use crate::transport::RoceMtu;
use sideway::ibverbs::device::{DeviceInfo as _, DeviceList};
use sideway::ibverbs::device_context::{AtomicCapability, DeviceContext, LinkLayer, PortState};
use std::sync::Arc;

/// An opened device: its context and what we learned about it.
pub(crate) struct OpenDevice {
    /// The libibverbs context every resource hangs from.
    pub ctx: Arc<DeviceContext>,
    /// Name, ports and GID tables.
    pub info: DeviceInfo,
}

/// The device list, or the reason there is none (library, kernel, no device).
fn device_names(sys: &Sysfs) -> Result<(DeviceList, Vec<String>), VerbsError> {
    let library = loader::probe_library();
    let list = match DeviceList::new() {
        Ok(l) => l,
        Err(e) => {
            let io = match e.0 {
                sideway::ibverbs::device::GetDeviceListErrorKind::Ibverbs(io) => io,
                #[allow(unreachable_patterns)]
                _ => std::io::Error::other("unknown"),
            };
            return Err(loader::classify_list_error(library, &io, sys));
        }
    };
    // A library that loaded but lists nothing can still be a missing library (the shim answered).
    if list.is_empty() {
        if let Err(detail) = library {
            return Err(VerbsError::LibraryMissing {
                detail,
                interfaces: sys.net_interfaces(),
            });
        }
        return Err(VerbsError::NoDevices {
            interfaces: sys.net_interfaces(),
        });
    }
    let names = list.iter().map(|d| d.name()).collect();
    Ok((list, names))
}

/// Opens the device named `name` (or the first one), as perftest does with `-d`.
pub(crate) fn open(name: Option<&str>, sys: &Sysfs) -> Result<OpenDevice, VerbsError> {
    let (list, names) = device_names(sys)?;
    let idx = match name {
        None => 0,
        Some(n) => names.iter().position(|d| d == n).ok_or_else(|| {
            loader::unknown_device(n, &names, |d| {
                (1..=2).flat_map(|p| sys.netdevs_of(d, p)).collect()
            })
        })?,
    };
    let dev_name = names[idx].clone();
    let device = list.get(idx).expect("index from the same list");
    let ctx = device
        .open()
        .map_err(|e| VerbsError::call("ibv_open_device", &dev_name, &e))?;
    let info = describe(&ctx, &dev_name, sys)?;
    Ok(OpenDevice { ctx, info })
}

fn describe(ctx: &Arc<DeviceContext>, name: &str, sys: &Sysfs) -> Result<DeviceInfo, VerbsError> {
    let attr = ctx
        .query_device()
        .map_err(|e| VerbsError::call("ibv_query_device", name, &e))?;
    let mut ports = Vec::new();
    for port in 1..=attr.phys_port_cnt() {
        let p = ctx
            .query_port(port)
            .map_err(|e| VerbsError::call("ibv_query_port", name, &e))?;
        ports.push(PortInfo {
            port,
            state: port_state_name(p.port_state()).to_string(),
            active: p.port_state() == PortState::Active,
            ethernet: p.link_layer() == LinkLayer::Ethernet,
            link_layer: format!("{:?}", p.link_layer()),
            active_mtu: mtu_bytes(p.active_mtu() as u32),
            max_mtu: mtu_bytes(p.max_mtu() as u32),
            gids: sys.gid_table(name, port),
        });
    }
    Ok(DeviceInfo {
        name: name.to_string(),
        vendor_id: attr.vendor_id(),
        vendor_part_id: attr.vendor_part_id(),
        firmware: attr.firmware_version(),
        max_qp_wr: attr.max_qp_wr().max(0) as u32,
        max_qp_rd_atom: attr.max_qp_rd_atom().max(0) as u32,
        atomics: attr.atomic_capability() != AtomicCapability::None,
        ports,
    })
}

/// Every device with its ports and GID tables (for listing and for `devices`-style output).
pub(crate) fn discover(sys: &Sysfs) -> Result<Vec<DeviceInfo>, VerbsError> {
    let (list, names) = device_names(sys)?;
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let Some(dev) = list.get(i) else { continue };
        let ctx = dev
            .open()
            .map_err(|e| VerbsError::call("ibv_open_device", name, &e))?;
        out.push(describe(&ctx, name, sys)?);
    }
    Ok(out)
}

fn port_state_name(s: PortState) -> &'static str {
    match s {
        PortState::Active => "ACTIVE",
        PortState::Down => "DOWN",
        PortState::Initializing => "INIT",
        PortState::Armed => "ARMED",
        PortState::ActiveDefer => "ACTIVE_DEFER",
        PortState::Nop => "NOP",
    }
}

/// `enum ibv_mtu` to bytes; 0 for a code outside 1..=5.
fn mtu_bytes(code: u32) -> u32 {
    RoceMtu::from_ib_enum(code).map_or(0, RoceMtu::bytes)
}
