//! Errors of the verbs transport. Each says what is missing and what to do next; setup errors exit 2.

use super::gid::GidError;
use std::io;

/// Why the verbs transport could not be set up or used.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// The binary was compiled with `--no-default-features`.
    #[error(
        "--transport verbs: this roceperf was built without the `verbs` cargo feature; rebuild with default features \
         (cargo build --release) or use --transport soft"
    )]
    NotBuilt,

    /// libibverbs.so.1 could not be loaded.
    #[error(
        "--transport verbs: libibverbs is not installed ({detail}).\n  Install rdma-core: apt-get install rdma-core ibverbs-providers \
         (Debian/Ubuntu) or dnf install rdma-core libibverbs (RHEL/Fedora),\n  or run without an RDMA NIC: --transport soft{}",
        soft_hint(interfaces)
    )]
    LibraryMissing {
        /// The loader's message.
        detail: String,
        /// Interfaces usable with `--transport soft`.
        interfaces: Vec<String>,
    },

    /// libibverbs is there but the kernel has no RDMA support (no ib_uverbs: ENOSYS).
    #[error(
        "--transport verbs: this kernel has no RDMA support (libibverbs: {detail}; /sys/class/infiniband_verbs is missing).\n  \
         Load your NIC's RDMA driver (mlx5_ib, irdma, bnxt_re, ...) and ib_uverbs, or create a Soft-RoCE device: \
         modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE,\n  or use --transport soft{}",
        soft_hint(interfaces)
    )]
    KernelNoRdma {
        /// libibverbs' errno text.
        detail: String,
        /// Interfaces usable with `--transport soft`.
        interfaces: Vec<String>,
    },

    /// The kernel has RDMA but no device is registered.
    #[error(
        "--transport verbs: no RDMA devices found (ibv_get_device_list returned none).\n  Load your NIC's RDMA driver, or create \
         a Soft-RoCE device: rdma link add rxe0 type rxe netdev IFACE,\n  or use --transport soft{}",
        soft_hint(interfaces)
    )]
    NoDevices {
        /// Interfaces usable with `--transport soft`.
        interfaces: Vec<String>,
    },

    /// `-d NAME` is not an RDMA device here.
    #[error("-d {name}: no RDMA device of that name; RDMA devices here: {}{}", available.join(", "), netdev_hint(name, owner.as_deref()))]
    UnknownDevice {
        /// What the user gave.
        name: String,
        /// The RDMA devices that exist.
        available: Vec<String>,
        /// The RDMA device whose GIDs live on `name`, when `name` is a network interface.
        owner: Option<String>,
    },

    /// `-i PORT` does not exist on the device.
    #[error("-i {port}: {device} has {ports} port(s), numbered from 1")]
    NoSuchPort {
        /// Device name.
        device: String,
        /// Requested port.
        port: u8,
        /// Number of physical ports.
        ports: u8,
    },

    /// The port is not ACTIVE.
    #[error(
        "port {port} of {device} is {state}, not ACTIVE; check the link (ip link show {netdev}; cable, switch port) or pick another port with -i"
    )]
    PortDown {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// The state libibverbs reports.
        state: String,
        /// The interface under the port, or `IFACE`.
        netdev: String,
    },

    /// The port is InfiniBand, not Ethernet.
    #[error(
        "port {port} of {device} has link layer {link_layer}; roceperf's verbs transport measures RoCE (Ethernet link layer) only"
    )]
    NotEthernet {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// What the port reports.
        link_layer: String,
    },

    /// No usable source GID (see [`GidError`]).
    #[error("{device} port {port}: {source}")]
    Gid {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// The reason.
        #[source]
        source: GidError,
    },

    /// A parameter is out of range for this device or for the transport.
    #[error("{0}")]
    Config(String),

    /// The peer's description does not fit ours.
    #[error("peer mismatch: {0}")]
    Peer(String),

    /// A libibverbs call failed.
    #[error("{call} on {device} failed: {source}{}", call_hint(call, source))]
    Call {
        /// The verb, e.g. `ibv_reg_mr`.
        call: &'static str,
        /// Device name.
        device: String,
        /// The errno.
        #[source]
        source: io::Error,
    },
    /// A queue pair's buffer could not be allocated.
    #[error("queue pair {qp}'s buffer: {source}")]
    OutOfMemory {
        /// The queue pair.
        qp: usize,
        /// The failed allocation.
        #[source]
        source: crate::transport::memory::OutOfMemory,
    },
}

impl VerbsError {
    /// A failed libibverbs call: the errno is taken from `err`'s source chain (sideway wraps it),
    /// else from `errno`, else the error's own text.
    pub fn call(
        call: &'static str,
        device: &str,
        err: &(dyn std::error::Error + 'static),
    ) -> VerbsError {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
        let mut code = None;
        while let Some(e) = cur {
            if let Some(io) = e.downcast_ref::<io::Error>()
                && let Some(c) = io.raw_os_error()
            {
                code = Some(c);
                break;
            }
            cur = e.source();
        }
        let code = code.or_else(|| {
            io::Error::last_os_error()
                .raw_os_error()
                .filter(|&c| c != 0)
        });
        VerbsError::Call {
            call,
            device: device.to_string(),
            source: match code {
                Some(c) => io::Error::from_raw_os_error(c),
                None => io::Error::other(err.to_string()),
            },
        }
    }

    /// The process exit code for this error: every verbs error is a usage or setup error (2).
    pub fn exit_code(&self) -> i32 {
        2
    }

    /// True for the cases where verbs cannot run on this machine at all (the caller may suggest soft).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            VerbsError::NotBuilt
                | VerbsError::LibraryMissing { .. }
                | VerbsError::KernelNoRdma { .. }
                | VerbsError::NoDevices { .. }
        )
    }
}

impl From<VerbsError> for crate::transport::Error {
    fn from(e: VerbsError) -> Self {
        match e {
            VerbsError::Peer(m) => crate::transport::Error::Connection(m),
            VerbsError::OutOfMemory { qp, source } => crate::transport::Error::OutOfMemory {
                what: format!("queue pair {qp}'s buffer"),
                source,
            },
            other => crate::transport::Error::Unavailable(other.to_string()),
        }
    }
}

fn soft_hint(interfaces: &[String]) -> String {
    if interfaces.is_empty() {
        String::new()
    } else {
        format!(" -d IFACE (interfaces here: {})", interfaces.join(", "))
    }
}

fn netdev_hint(name: &str, owner: Option<&str>) -> String {
    match owner {
        Some(dev) => format!(
            "\n  '{name}' is a network interface: its RDMA device is {dev} (-d {dev}); or use --transport soft -d {name}"
        ),
        None => String::new(),
    }
}

fn call_hint(call: &str, e: &io::Error) -> &'static str {
    match (call, e.raw_os_error()) {
        ("ibv_reg_mr", Some(libc::ENOMEM)) | ("ibv_reg_mr", Some(libc::EPERM)) => {
            "; the locked-memory limit is probably too low: ulimit -l unlimited (or raise memlock in /etc/security/limits.conf)"
        }
        ("ibv_modify_qp(RTR)", Some(libc::ETIMEDOUT))
        | ("ibv_modify_qp(RTR)", Some(libc::ENETUNREACH)) => {
            "; the peer's GID is not reachable from the chosen source GID: check addresses and routes on both sides, and that both use the same RoCE version"
        }
        ("ibv_modify_qp(RTR)", Some(libc::EINVAL)) => {
            "; check -m (MTU), the GID index (-x) and that the peer runs the same test"
        }
        ("ibv_create_qp", Some(libc::EINVAL)) | ("ibv_create_qp", Some(libc::ENOMEM)) => {
            "; -t/-r (queue depths), -I (inline size) or -q (QPs) exceed what the device supports"
        }
        (_, Some(libc::EACCES)) | (_, Some(libc::EPERM)) => {
            "; permission denied: run as root or check /dev/infiniband permissions"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailability_messages_are_distinct_and_say_what_to_do() {
        let ifs = vec!["eth0".to_string(), "lo".to_string()];
        let lib = VerbsError::LibraryMissing {
            detail: "libibverbs.so.1: cannot open shared object file".into(),
            interfaces: ifs.clone(),
        }
        .to_string();
        assert!(lib.contains("libibverbs is not installed"));
        assert!(lib.contains("apt-get install rdma-core ibverbs-providers"));
        assert!(lib.contains("--transport soft -d IFACE (interfaces here: eth0, lo)"));
        let kernel = VerbsError::KernelNoRdma {
            detail: "Function not implemented".into(),
            interfaces: ifs.clone(),
        }
        .to_string();
        assert!(kernel.contains("this kernel has no RDMA support"));
        assert!(kernel.contains("rdma link add rxe0 type rxe netdev IFACE"));
        let none = VerbsError::NoDevices { interfaces: ifs }.to_string();
        assert!(none.contains("no RDMA devices found"));
        assert!(none.contains("eth0, lo"));
        assert_ne!(lib, kernel);
        assert_ne!(kernel, none);
    }

    #[test]
    fn unknown_device_lists_devices_and_recognises_an_interface() {
        let e = VerbsError::UnknownDevice {
            name: "veth0".into(),
            available: vec!["rxe0".into(), "rxe1".into()],
            owner: Some("rxe0".into()),
        };
        let m = e.to_string();
        assert!(
            m.starts_with("-d veth0: no RDMA device of that name; RDMA devices here: rxe0, rxe1")
        );
        assert!(m.contains("its RDMA device is rxe0 (-d rxe0); or use --transport soft -d veth0"));
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn call_errors_take_the_errno_from_the_source_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("failed to register memory region")]
        struct Wrapped(#[source] io::Error);
        let e = VerbsError::call(
            "ibv_reg_mr",
            "rxe0",
            &Wrapped(io::Error::from_raw_os_error(libc::ENOMEM)),
        );
        match &e {
            VerbsError::Call { source, .. } => {
                assert_eq!(source.raw_os_error(), Some(libc::ENOMEM))
            }
            other => panic!("{other}"),
        }
        assert!(e.to_string().starts_with("ibv_reg_mr on rxe0 failed: "));
        assert!(e.to_string().contains("ulimit -l"));
    }

    #[test]
    fn reg_mr_enomem_points_at_memlock() {
        let e = VerbsError::Call {
            call: "ibv_reg_mr",
            device: "mlx5_0".into(),
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        };
        assert!(e.to_string().contains("ulimit -l unlimited"));
    }
}
