//! I/O backends of the soft transport: how RoCE packets reach the wire.
//!
//! - [`udp`]: RoCE v2 over an ordinary UDP socket bound to port 4791. Unprivileged; the kernel writes
//!   the Ethernet, IP and UDP headers, we write BTH..ICRC.
//! - [`packet`]: AF_PACKET raw frames: RoCE v1 (Ethertype 0x8915) and v2, every header ours, so the
//!   ICRC can be verified over the real IPv4 header. Needs CAP_NET_RAW.
//!
//! Both move packets in batches (one syscall per batch, not per packet) through preallocated
//! [`slots::Slots`], so the busy-polling datapath never allocates: [`batch`] (`recvmmsg` /
//! `sendmmsg`), [`gso`] (UDP segmentation offload), [`packet_gso`] (the same for RoCE v2 over
//! AF_PACKET, through `virtio_net_hdr` super-frames), [`ring`] (PACKET_MMAP receive ring for
//! AF_PACKET). Each backend's file holds its socket and its device (`UdpDevice`, `PacketDevice`),
//! which owns its batches, and its plan, which it makes itself; every device, and the simulated
//! link, is a [`device::Device`], and each socket backend a `device::Backend` whose plan is a
//! `device::Plan`; [`fault`] wraps any of them to drop, duplicate, reorder, delay or corrupt
//! packets on purpose as an [`impair`] spec says; [`sockaddr`] converts addresses without
//! allocating; [`kernel_rx`] keeps the kernel's own IP/UDP receive off the RoCE v2 frames an
//! AF_PACKET socket took (a TCX ingress program, `tcx`, or a sink socket).
//!
//! The backends are listed once, below: one line each declares the backend's module, its variant
//! of `Nic` (the backend an endpoint opened) and of `BackendPlan`, and `--io`'s word for it
//! (`nic` holds the macro). A new backend is its `--io` word (`params::IoKind`), its file here,
//! and its line in the list.

pub mod batch;
pub mod device;
pub mod fault;
pub mod gso;
pub mod impair;
pub mod kernel_rx;
mod nic;
pub mod packet_gso;
pub(crate) mod qp_filter;
pub(crate) mod ring;
pub(crate) mod slots;
pub(crate) mod sockaddr;
mod tcx;
#[cfg(test)]
mod test_frames;

use std::net::IpAddr;
use std::os::fd::AsFd;

use super::netdev::NetdevError;
use crate::transport::{Error, Param};
use crate::wire::{ICRC_LEN, Ipv4IdCache};

pub(crate) use crate::wire::ROCE_V2_PORT;

// The backends, one line each: `--io`'s word (an `IoKind` variant), then the module of the
// backend's file and its device. The line declares the module, the `Nic` and `BackendPlan`
// variants and the dispatch to the backend's checks and plan (see `nic`).
nic::backends! {
    /// RoCE v2 over a UDP socket (`--io udp`).
    Udp(udp::UdpDevice),
    /// RoCE v1 and v2 over AF_PACKET (`--io packet`).
    Packet(packet::PacketDevice),
}

/// Errors of the I/O backends; each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// Someone already owns the UDP port on that address.
    #[error(
        "UDP port {port} on {addr} is taken: another roceperf or the kernel's rdma_rxe owns it; use distinct addresses for the two sides (e.g. 127.0.0.1 and 127.0.0.2 on lo, chosen with {}), a network namespace per side (ip netns add, joined by a veth pair), or unload rdma_rxe",
        Param::Bind
    )]
    PortInUse {
        /// The address we tried to bind.
        addr: IpAddr,
        /// The port.
        port: u16,
    },
    /// The address to bind is not configured on the chosen interface.
    #[error(
        "address {addr} is not configured on interface '{dev}' (its addresses: {}); pick one of them, or add it with `ip addr add {addr} dev {dev}`",
        if available.is_empty() { "none".to_string() } else { available.join(", ") }
    )]
    AddrNotOnInterface {
        /// The address asked for.
        addr: IpAddr,
        /// The interface.
        dev: String,
        /// The addresses the interface has.
        available: Vec<String>,
    },
    /// AF_PACKET needs CAP_NET_RAW.
    #[error(
        "{io} packet needs the CAP_NET_RAW capability to open an AF_PACKET socket on '{dev}': run as root, or grant it once with `sudo setcap cap_net_raw+ep <path to the binary>`; or use `{io} udp` (RoCE v2 only, no privileges)",
        io = Param::Io
    )]
    NeedCapNetRaw {
        /// The interface.
        dev: String,
    },
    /// RoCE v1 over the UDP backend.
    #[error(
        "RoCE v1 (Ethertype 0x8915) cannot travel over a UDP socket; use {} packet (needs CAP_NET_RAW) or {} v2",
        Param::Io,
        Param::Roce
    )]
    V1OverUdp,
    /// The interface cannot carry what the backend needs (AF_PACKET off loopback: a MAC).
    #[error(transparent)]
    Netdev(#[from] NetdevError),
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

impl IoError {
    /// An `Os` error from `errno`.
    pub(crate) fn last_os(context: impl Into<String>) -> IoError {
        IoError::Os {
            context: context.into(),
            source: std::io::Error::last_os_error(),
        }
    }
}

impl IoError {
    /// An `Os` error from a rustix call.
    pub(crate) fn os(context: impl Into<String>, errno: rustix::io::Errno) -> IoError {
        IoError::Os {
            context: context.into(),
            source: errno.into(),
        }
    }
}

/// A backend failure on the datapath as the transport error.
pub(crate) fn io_error(e: IoError) -> Error {
    match e {
        IoError::Os { context, source } => Error::Io { context, source },
        other => Error::Unavailable(other.to_string()),
    }
}

/// Rewrites the ICRC of a UDP payload (BTH..ICRC) computed under IPv4 ID 0 to the one under ID `id`:
/// the kernel gives segment k of an IPv4 GSO super-datagram (or super-frame) ID k, and the ICRC
/// covers it, so both backends that send super-datagrams move it for every segment after the first.
#[inline(always)]
pub(crate) fn move_icrc_to_ipv4_id(pkt: &mut [u8], id: u16, ipv4_ids: &mut Ipv4IdCache) {
    let ib_len = pkt.len() - ICRC_LEN;
    let delta = ipv4_ids.get(ib_len).delta(id);
    let icrc = &mut pkt[ib_len..];
    let v = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]);
    icrc.copy_from_slice(&(v ^ delta).to_le_bytes());
}

/// A non-blocking, close-on-exec UDP socket of `ip`'s family.
pub(crate) fn udp_socket(ip: IpAddr) -> rustix::io::Result<std::os::fd::OwnedFd> {
    let family = if ip.is_ipv4() {
        rustix::net::AddressFamily::INET
    } else {
        rustix::net::AddressFamily::INET6
    };
    rustix::net::socket_with(
        family,
        rustix::net::SocketType::DGRAM,
        rustix::net::SocketFlags::NONBLOCK | rustix::net::SocketFlags::CLOEXEC,
        None,
    )
}

/// Sets an integer socket option that rustix has no typed setter for, naming it in the error.
pub(crate) fn setsockopt_int(
    fd: impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &str,
) -> Result<(), IoError> {
    crate::transport::sockopt::set_int(fd, level, name, value).map_err(|source| IoError::Os {
        context: format!("setsockopt({what}={value})"),
        source,
    })
}

/// Grows a socket buffer to `bytes`: SO_*BUFFORCE when privileged (ignores rmem_max), else the
/// ordinary option, which the kernel caps at net.core.{r,w}mem_max.
pub(crate) fn grow_buffer(fd: impl AsFd, rx: bool, bytes: usize) -> Result<(), IoError> {
    use rustix::net::sockopt;
    let bytes = bytes.min(i32::MAX as usize);
    let forced = if rx {
        sockopt::set_socket_recv_buffer_size_force(&fd, bytes)
    } else {
        sockopt::set_socket_send_buffer_size_force(&fd, bytes)
    };
    if forced.is_ok() {
        return Ok(());
    }
    let (plain, what) = if rx {
        (
            sockopt::set_socket_recv_buffer_size(&fd, bytes),
            "SO_RCVBUF",
        )
    } else {
        (
            sockopt::set_socket_send_buffer_size(&fd, bytes),
            "SO_SNDBUF",
        )
    };
    plain.map_err(|e| IoError::os(format!("setsockopt({what}={bytes})"), e))
}

/// Whether the running kernel is at least `major.minor` (false when its release cannot be read).
pub(crate) fn kernel_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: all-zero is a valid utsname, which uname fills with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a live utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return false;
    }
    // SAFETY: uname NUL-terminated the release inside its array.
    let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (have_major, have_minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (have_major, have_minor) >= (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_flags_as_typed() {
        let busy = IoError::PortInUse {
            addr: "127.0.0.1".parse().unwrap(),
            port: 4791,
        };
        assert_eq!(
            busy.to_string(),
            "UDP port 4791 on 127.0.0.1 is taken: another roceperf or the kernel's rdma_rxe owns it; use distinct addresses for the two sides (e.g. 127.0.0.1 and 127.0.0.2 on lo, chosen with --bind), a network namespace per side (ip netns add, joined by a veth pair), or unload rdma_rxe"
        );
        let raw = IoError::NeedCapNetRaw {
            dev: "veth0".into(),
        };
        assert_eq!(
            raw.to_string(),
            "--io packet needs the CAP_NET_RAW capability to open an AF_PACKET socket on 'veth0': run as root, or grant it once with `sudo setcap cap_net_raw+ep <path to the binary>`; or use `--io udp` (RoCE v2 only, no privileges)"
        );
    }
}
