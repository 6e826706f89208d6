//! What this host offers a run: its RDMA devices and network interfaces.
//!
//! Used to choose a transport and to name the alternatives when a device is not found.

use std::path::Path;

/// Where the kernel lists RDMA devices (one entry per device, e.g. `mlx5_0`, `rxe0`).
const RDMA_CLASS: &str = "/sys/class/infiniband";

/// True when `name` is an RDMA device of this host (so `--transport auto` picks verbs for it).
pub(crate) fn is_rdma_device(name: &str) -> bool {
    Path::new(RDMA_CLASS).join(name).exists()
}

/// The RDMA devices of this host, in directory order (empty when there are none or `/sys` is unreadable).
pub(crate) fn rdma_devices() -> Vec<String> {
    std::fs::read_dir(RDMA_CLASS)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The network interfaces of this network namespace, sorted by index (empty when they cannot be listed).
pub(crate) fn interfaces() -> Vec<String> {
    super::soft::netdev::NetDev::list()
        .map(|l| l.into_iter().map(|d| d.name).collect())
        .unwrap_or_default()
}

/// The interface that holds `ip` in this network namespace (a TCP run's local address: the
/// interface its route uses); `lo` for any loopback address.
pub(crate) fn interface_with(ip: std::net::IpAddr) -> Option<String> {
    let devs = super::soft::netdev::NetDev::list().ok()?;
    let holds = |d: &super::soft::netdev::NetDev| match ip {
        std::net::IpAddr::V4(v4) => d.ipv4.contains(&v4),
        std::net::IpAddr::V6(v6) => d.ipv6.contains(&v6),
    };
    let dev = devs.iter().find(|d| holds(d));
    let dev = dev.or_else(|| ip.is_loopback().then(|| devs.iter().find(|d| d.loopback))?);
    dev.map(|d| d.name.clone())
}

/// An interface's driver and firmware through `ETHTOOL_GDRVINFO`; `None` when it has none to name
/// (lo).
pub(crate) fn interface_driver(ifname: &str) -> Option<super::ethtool::DriverInfo> {
    super::ethtool::Ethtool::open(ifname)
        .and_then(|e| e.driver_info())
        .ok()
}

/// An RDMA device's driver (its PCI device's, from sysfs: `mlx5_core`; `rdma_rxe` for a Soft-RoCE
/// device, which has no PCI device) and firmware (`fw_ver`, when not empty).
pub(crate) fn rdma_driver(dev: &str) -> super::ethtool::DriverInfo {
    let root = Path::new(RDMA_CLASS).join(dev);
    let text = |p: std::path::PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
    };
    let driver = std::fs::read_link(root.join("device/driver"))
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| text(root.join("parent")).map(|_| "rdma_rxe".to_owned()))
        .unwrap_or_default();
    super::ethtool::DriverInfo {
        driver,
        version: None,
        firmware: text(root.join("fw_ver")),
        bus: std::fs::read_link(root.join("device"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_an_interface_and_not_an_rdma_device() {
        assert!(interfaces().iter().any(|i| i == "lo"));
        assert!(!is_rdma_device("lo"));
        assert!(!rdma_devices().iter().any(|d| d == "lo"));
        assert_eq!(
            interface_with("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(
            interface_with("127.0.0.9".parse().unwrap()).as_deref(),
            Some("lo")
        );
    }
}
