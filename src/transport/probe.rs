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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_an_interface_and_not_an_rdma_device() {
        assert!(interfaces().iter().any(|i| i == "lo"));
        assert!(!is_rdma_device("lo"));
        assert!(!rdma_devices().iter().any(|d| d == "lo"));
    }
}
