//! RoCE v2 over an ordinary UDP socket: unprivileged, IPv4 and IPv6.
//!
//! The socket is bound to the interface's exact address on port 4791 and never connected. With
//! `IP_PMTUDISC_DO` every IPv4 datagram carries DF and, because the socket is unconnected, IP ID 0
//! (`ip_select_ident_segs`; a connected socket numbers them from a random start we cannot read):
//! the one unmasked IPv4 field we do not write ourselves is therefore known, and the ICRC we
//! compute over `45 00 len 0000 4000 ff 11 ffff src dst` is the one a capture of the wire verifies
//! (roce-wire.md §9). Bound to one address, it receives only datagrams sent to that address, so it
//! does not ask the kernel for each one's destination (no IP_PKTINFO control message). UDP
//! checksums are 0 as rxe sends them (`SO_NO_CHECK`, `UDP_NO_CHECK6_TX`), and IPv6 zero-checksum
//! datagrams are accepted (`UDP_NO_CHECK6_RX`), which rxe and ConnectX send.
//!
//! Packets move in batches: [`RxBatch`] for `recvmmsg`, [`TxBatch`] for `sendmmsg`, each with its
//! headers, iovecs, addresses and packet slots allocated once. `UdpDevice` is the backend the
//! endpoint holds: the socket with its batches, GSO super-datagrams on the way out (each segment's
//! ICRC moved to the IPv4 ID the kernel gives it) and GRO datagrams split on the way in.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use rustix::io::Errno;
use rustix::net::sockopt::{self, Ipv4PathMtuDiscovery, Ipv6PathMtuDiscovery};

use super::batch::{RxBatch, RxDatagram, TxBatch};
use super::device::{Backend, Device, Plan, PlanInput, RxMeta};
use super::gso::GsoTxBatch;
use super::{IoError, ROCE_V2_PORT, grow_buffer, move_icrc_to_ipv4_id, setsockopt_int};
use crate::params::RoceVersion;
use crate::transport::soft::marks;
use crate::transport::soft::netdev::NetDev;
use crate::transport::soft::rc::Instant;
use crate::wire::{Ipv4IdCache, Opcode};

/// Largest UDP payload of a RoCE packet at MTU 4096: BTH 12 + RETH 16 + ImmDt 4 + 4096 + ICRC 4,
/// rounded up with room to spare.
pub(crate) const MAX_ROCE_UDP_PAYLOAD: usize = 4096 + 128;

/// Socket and batch sizes of the UDP backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Local and peer UDP port; 4791 except in tests that must not collide.
    pub port: u16,
    /// Packets per `recvmmsg`/`sendmmsg`.
    pub batch: usize,
    /// Bytes per packet slot.
    pub slot_len: usize,
    /// Requested SO_RCVBUF and SO_SNDBUF.
    pub socket_buffer: usize,
    /// Let the kernel merge received datagrams (UDP_GRO); slots must then hold 64 KiB and the
    /// caller splits by [`super::batch::RxDatagram::gro_segment`].
    pub gro: bool,
    /// Send UDP checksum 0, as rxe does (the ICRC masks it, so any value is valid RoCE). The kernel
    /// refuses UDP_SEGMENT sends (EINVAL) on a socket without checksums, so GSO needs this off.
    pub zero_checksum: bool,
    /// Ask for each datagram's destination address (IP_PKTINFO / IPV6_RECVPKTINFO). A socket
    /// bound to one unicast address receives only datagrams sent to it, so the endpoint leaves this
    /// off and spares the kernel a control message per datagram.
    pub pktinfo: bool,
    /// IP_TOS / IPV6_TCLASS: the class of every datagram (RoCE v2 data: ECT(0) unless `--tclass`
    /// says otherwise); `None` leaves the kernel's 0.
    pub tclass: Option<u8>,
    /// The class CNPs leave with, set per datagram by a control message.
    pub cnp_tclass: u8,
    /// SO_PRIORITY (`-S`): the kernel's frames carry it as an 802.1Q priority only through a VLAN
    /// device's egress map.
    pub priority: Option<u8>,
    /// IP_RECVTOS / IPV6_RECVTCLASS: every datagram comes with its TOS / traffic class, so a CE
    /// mark is seen (and every receive is a `recvmsg` with a control message to read).
    pub recv_tclass: bool,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            port: ROCE_V2_PORT,
            batch: 64,
            slot_len: MAX_ROCE_UDP_PAYLOAD,
            socket_buffer: 8 << 20,
            gro: false,
            zero_checksum: true,
            pktinfo: false,
            tclass: None,
            cnp_tclass: 0,
            priority: None,
            recv_tclass: false,
        }
    }
}

/// A UDP socket bound to one address on port 4791 (or the configured port), non-blocking.
pub struct UdpSocket {
    fd: OwnedFd,
    local: SocketAddr,
    /// Received datagrams come with control messages (UDP_GRO, PKTINFO) that must be read.
    control: bool,
}

// Kernel constants that not every libc version exports.
const UDP_NO_CHECK6_TX: libc::c_int = 101;
const UDP_NO_CHECK6_RX: libc::c_int = 102;

impl UdpSocket {
    /// Binds `addr` (which must be configured on `dev`; any 127/8 address on `lo`).
    pub fn bind(dev: &NetDev, addr: IpAddr, cfg: &UdpConfig) -> Result<UdpSocket, IoError> {
        if !dev.has_address(addr) {
            let mut available: Vec<String> = dev.ipv4.iter().map(|a| a.to_string()).collect();
            available.extend(dev.ipv6.iter().map(|a| a.to_string()));
            return Err(IoError::AddrNotOnInterface {
                addr,
                dev: dev.name.clone(),
                available,
            });
        }
        // Link-local IPv6 needs the interface as scope.
        let scope = match addr {
            IpAddr::V6(v6) if v6.is_unicast_link_local() => dev.index,
            _ => 0,
        };
        UdpSocket::bind_scoped(addr, scope, cfg)
    }

    /// Binds `addr` without checking it against an interface (`scope` is the IPv6 scope id).
    pub fn bind_scoped(addr: IpAddr, scope: u32, cfg: &UdpConfig) -> Result<UdpSocket, IoError> {
        let fd = super::udp_socket(addr)
            .map_err(|e| IoError::os("socket(SOCK_DGRAM) for RoCE v2", e))?;
        match addr {
            IpAddr::V4(_) => {
                sockopt::set_ip_mtu_discover(&fd, Ipv4PathMtuDiscovery::DO)
                    .map_err(failed("IP_MTU_DISCOVER", libc::IP_PMTUDISC_DO))?;
                if cfg.zero_checksum {
                    setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1, "SO_NO_CHECK")?;
                }
                if cfg.pktinfo {
                    setsockopt_int(&fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1, "IP_PKTINFO")?;
                }
                if let Some(tos) = cfg.tclass {
                    setsockopt_int(&fd, libc::IPPROTO_IP, libc::IP_TOS, tos.into(), "IP_TOS")?;
                }
                if cfg.recv_tclass {
                    setsockopt_int(&fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1, "IP_RECVTOS")?;
                }
            }
            IpAddr::V6(_) => {
                sockopt::set_ipv6_v6only(&fd, true).map_err(failed("IPV6_V6ONLY", 1))?;
                sockopt::set_ipv6_mtu_discover(&fd, Ipv6PathMtuDiscovery::DO)
                    .map_err(failed("IPV6_MTU_DISCOVER", libc::IPV6_PMTUDISC_DO))?;
                if cfg.zero_checksum {
                    setsockopt_int(
                        &fd,
                        libc::IPPROTO_UDP,
                        UDP_NO_CHECK6_TX,
                        1,
                        "UDP_NO_CHECK6_TX",
                    )?;
                }
                setsockopt_int(
                    &fd,
                    libc::IPPROTO_UDP,
                    UDP_NO_CHECK6_RX,
                    1,
                    "UDP_NO_CHECK6_RX",
                )?;
                if cfg.pktinfo {
                    setsockopt_int(
                        &fd,
                        libc::IPPROTO_IPV6,
                        libc::IPV6_RECVPKTINFO,
                        1,
                        "IPV6_RECVPKTINFO",
                    )?;
                }
                if let Some(tclass) = cfg.tclass {
                    setsockopt_int(
                        &fd,
                        libc::IPPROTO_IPV6,
                        libc::IPV6_TCLASS,
                        tclass.into(),
                        "IPV6_TCLASS",
                    )?;
                }
                if cfg.recv_tclass {
                    setsockopt_int(
                        &fd,
                        libc::IPPROTO_IPV6,
                        libc::IPV6_RECVTCLASS,
                        1,
                        "IPV6_RECVTCLASS",
                    )?;
                }
            }
        }
        if let Some(prio) = cfg.priority {
            setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_PRIORITY, prio.into(), "SO_PRIORITY")
                .map_err(|e| match e {
                    IoError::Os { source, .. } if source.raw_os_error() == Some(libc::EPERM) => {
                        IoError::Os {
                            context: format!(
                                "-S {prio}: setsockopt(SO_PRIORITY={prio}) needs CAP_NET_ADMIN above 6; run as root or give -S 0..6"
                            ),
                            source,
                        }
                    }
                    e => e,
                })?;
        }
        if cfg.gro {
            setsockopt_int(&fd, libc::SOL_UDP, super::batch::UDP_GRO, 1, "UDP_GRO")?;
        }
        grow_buffer(&fd, true, cfg.socket_buffer)?;
        grow_buffer(&fd, false, cfg.socket_buffer)?;
        let local = match addr {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V4(v4), cfg.port),
            IpAddr::V6(v6) => SocketAddr::V6(std::net::SocketAddrV6::new(v6, cfg.port, 0, scope)),
        };
        rustix::net::bind(&fd, &local).map_err(|e| match e {
            Errno::ADDRINUSE => IoError::PortInUse {
                addr,
                port: cfg.port,
            },
            Errno::ADDRNOTAVAIL => IoError::AddrNotOnInterface {
                addr,
                dev: "any interface of this network namespace".into(),
                available: Vec::new(),
            },
            _ => IoError::os(format!("bind UDP {local}"), e),
        })?;
        Ok(UdpSocket {
            fd,
            local,
            control: cfg.gro || cfg.pktinfo || cfg.recv_tclass,
        })
    }

    /// The bound address and port.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The receive buffer the kernel actually granted (it reports twice the requested value).
    pub fn recv_buffer(&self) -> Result<usize, IoError> {
        sockopt::socket_recv_buffer_size(&self.fd)
            .map_err(|e| IoError::os("getsockopt(SO_RCVBUF)", e))
    }

    /// Receives up to a batch of datagrams without blocking; returns how many (0 when none wait).
    #[inline]
    pub fn recv_batch(&self, rx: &mut RxBatch) -> Result<usize, IoError> {
        rx.recv(self.fd.as_raw_fd(), self.control)
            .map_err(|source| self.recv_failed(source))
    }

    /// The error of a failed receive. Out of line: the datapath's receives succeed (or find
    /// nothing), and the poll then carries no formatting code.
    #[cold]
    #[inline(never)]
    fn recv_failed(&self, source: std::io::Error) -> IoError {
        IoError::Os {
            context: format!("recvmmsg on UDP {}", self.local),
            source,
        }
    }

    /// Sends one datagram to `dst` with its own class `tclass` (IP_TOS / IPV6_TCLASS as a control
    /// message: the socket's option stays data's): a CNP.
    pub fn send_with_tclass(&self, data: &[u8], dst: SocketAddr, tclass: u8) -> Result<(), IoError> {
        // SAFETY: a plain kernel struct; all-zero is valid.
        let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let namelen = super::sockaddr::encode(dst, &mut name);
        let mut ctrl = super::batch::CtrlBuf([0; 128]);
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: a plain kernel struct; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = std::ptr::from_mut(&mut name).cast();
        msg.msg_namelen = namelen;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.0.as_mut_ptr().cast();
        let (level, kind) = match dst {
            SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
            SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
        };
        let int = std::mem::size_of::<libc::c_int>() as u32;
        // SAFETY: CMSG_SPACE/LEN are size computations; the 128-byte control buffer holds one cmsg
        // with an int, and msg describes it; name, iov and data outlive the call, which only reads.
        let rc = unsafe {
            msg.msg_controllen = libc::CMSG_SPACE(int) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = level;
            (*c).cmsg_type = kind;
            (*c).cmsg_len = libc::CMSG_LEN(int) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, tclass.into());
            libc::sendmsg(self.fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT)
        };
        if rc < 0 {
            return Err(IoError::Os {
                context: format!("sendmsg (a CNP, traffic class {tclass:#04x}) from UDP {}", self.local),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Sends the queued datagrams of `tx` with as few `sendmmsg` calls as the kernel allows without
    /// blocking; what the kernel did not take stays queued. Returns how many were sent now.
    #[inline]
    pub fn send_batch(&self, tx: &mut TxBatch) -> Result<usize, IoError> {
        tx.send(self.fd.as_raw_fd())
            .map_err(|source| self.send_failed("sendmmsg", source))
    }

    /// The error of a failed send (`what`: the call), with what EPERM means. Out of line: the
    /// datapath's sends succeed, and its flush then carries no formatting code.
    #[cold]
    #[inline(never)]
    fn send_failed(&self, what: &str, source: std::io::Error) -> IoError {
        IoError::Os {
            context: format!("{what} from UDP {}{}", self.local, refused_hint(&source)),
            source,
        }
    }

    /// Sends the queued super-datagrams of `tx` (UDP_SEGMENT); what the kernel did not take stays
    /// queued. Returns how many super-datagrams went out. The socket needs `zero_checksum: false`.
    /// Always inlined into the device's flush, with the lone entry's send (`GsoTxBatch::send`).
    #[inline(always)]
    pub fn send_gso_batch(&self, tx: &mut super::gso::GsoTxBatch) -> Result<usize, IoError> {
        tx.send(self.fd.as_raw_fd())
            .map_err(|source| self.send_failed("sendmmsg(UDP_SEGMENT)", source))
    }
}

/// How to open the UDP backend: the socket, where, and its transmit side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UdpPlan {
    /// The socket's settings, and the receive batch's (`batch`, `slot_len`).
    pub cfg: UdpConfig,
    /// The address to bind.
    pub ip: IpAddr,
    /// On `lo` with the default address only: if the port is taken, the next free 127.0.0.x
    /// may be used instead (an address the user asked for is never moved).
    pub may_move: bool,
    /// Bytes of a transmit slot: the largest packet.
    pub tx_slot: usize,
    /// Runs of packets to one peer leave as GSO super-datagrams.
    pub gso: bool,
}

impl Plan for UdpPlan {
    /// A UDP socket carries RoCE v2 only: RoCE v1 has no IP header.
    fn check(version: RoceVersion) -> Result<(), IoError> {
        match version {
            RoceVersion::V1 => Err(IoError::V1OverUdp),
            RoceVersion::V2 => Ok(()),
        }
    }

    fn new(input: &PlanInput<'_>) -> Result<UdpPlan, IoError> {
        let gso = input.gso;
        let gro = input.gso && input.gro;
        let ip = input.local_ip.expect("v2 has a local address");
        let classes = marks::classes(
            RoceVersion::V2,
            input.marks,
            input.cnp_dscp,
            input.cnp_prio,
            false,
        );
        Ok(UdpPlan {
            cfg: UdpConfig {
                port: input.udp_port,
                batch: input.batch,
                // GRO hands over up to 64 KiB of merged datagrams at once.
                slot_len: if gro { 65_536 } else { input.slot_len },
                gro,
                zero_checksum: !gso,
                tclass: Some(classes.data.tclass),
                cnp_tclass: classes.cnp.tclass,
                priority: classes.so_priority,
                recv_tclass: input.read_ce,
                ..UdpConfig::default()
            },
            ip,
            may_move: !input.address_asked && input.dev.loopback && ip.is_ipv4(),
            tx_slot: input.slot_len,
            gso,
        })
    }

    fn gso(&self) -> bool {
        self.gso
    }
}

/// The loopback addresses a second endpoint on `lo` tries, in order, when 127.0.0.1's port is taken.
fn loopback_alternatives() -> impl Iterator<Item = IpAddr> {
    (2..=254u8).map(|x| IpAddr::V4(Ipv4Addr::new(127, 0, 0, x)))
}

/// The packets of one received datagram: with UDP_GRO, one datagram may hold several packets of
/// `gro_segment` bytes each (the last may be shorter). A zero-length datagram is one empty packet,
/// so that it is counted (the receive checks drop it as `empty`).
#[inline]
pub(crate) fn gro_packets<'a>(d: RxDatagram<'a>) -> impl Iterator<Item = RxDatagram<'a>> {
    let seg = d.gro_segment.map(usize::from).filter(|&s| s > 0);
    let seg = seg.unwrap_or(d.data.len()).max(1);
    let empty = d.data.is_empty().then_some(d.data);
    d.data
        .chunks(seg)
        .chain(empty)
        .map(move |part| RxDatagram { data: part, ..d })
}

/// The UDP backend: a [`UdpSocket`] with its receive batch and its transmit batch, plain or GSO, as
/// one [`Device`] that moves one RoCE packet at a time.
///
/// With GSO, consecutive packets to one peer share a super-datagram; segment k of an IPv4 one leaves
/// with IP ID k, so its ICRC (written for ID 0) is moved here. With GRO, a received datagram is split
/// back into its packets. Whatever wraps the device (the impairer) therefore sees single packets.
pub(crate) struct UdpDevice {
    sock: UdpSocket,
    rx: RxBatch,
    /// One packet per datagram, when GSO is off (then `gso` is `None`).
    plain: TxBatch,
    /// UDP segmentation offload, until the peer asks for single datagrams.
    gso: Option<GsoTxBatch>,
    /// How the IPv4 ID moves the ICRC, per packet length, for GSO segments.
    ipv4_ids: Ipv4IdCache,
    /// GSO was planned (the peer may have turned it off since) and GRO is on: what it says it is.
    gso_planned: bool,
    gro: bool,
    tx_batches: u64,
    /// The class CNPs leave with ([`UdpSocket::send_with_tclass`]).
    cnp_tclass: u8,
    /// A CNP taken out of the transmit path, sent on its own.
    cnp: [u8; CNP_SLOT],
}

/// Bytes of a CNP: BTH 12, 16 reserved, ICRC 4.
const CNP_SLOT: usize = 32;

/// Whether the `n` bytes a fill wrote into `b` are a CNP, which leaves alone with its own class.
#[inline(always)]
fn is_cnp(b: &[u8], n: usize) -> bool {
    b[0] == Opcode::CNP.0 && n <= CNP_SLOT
}

/// What [`UdpDevice::tx_unqueued`] did with a transmission's first packet.
pub(crate) enum Unqueued {
    /// Nothing asked: the device has no GSO batch, or packets are queued.
    Busy,
    /// The fill had no packet.
    Declined,
    /// A CNP, sent on its own as [`Device::tx_push`] sends it.
    Cnp,
    /// A packet of this many bytes, written and not queued: for
    /// [`tx_unqueued_send`](UdpDevice::tx_unqueued_send) or
    /// [`tx_unqueued_queue`](UdpDevice::tx_unqueued_queue).
    Filled(usize),
}

impl UdpDevice {
    /// The device on `sock`, with batches as `plan` says.
    pub(crate) fn new(sock: UdpSocket, plan: &UdpPlan) -> UdpDevice {
        let batch = plan.cfg.batch;
        UdpDevice {
            sock,
            rx: RxBatch::new(batch, plan.cfg.slot_len),
            plain: TxBatch::new(batch, plan.tx_slot),
            gso: plan
                .gso
                .then(|| GsoTxBatch::new(batch.min(32), plan.tx_slot)),
            ipv4_ids: Ipv4IdCache::new(),
            gso_planned: plan.gso,
            gro: plan.cfg.gro,
            tx_batches: 0,
            cnp_tclass: plan.cfg.cnp_tclass,
            cnp: [0; CNP_SLOT],
        }
    }

    /// A transmission's first packet to `dst` while nothing is queued (a ping-pong's every
    /// transmission): `fill` writes it where the GSO batch's first entry goes, but it is not
    /// queued, so that a lone packet leaves by one sendto without an entry opened and closed
    /// around it. Without GSO, or with packets queued, the device is busy.
    #[inline(always)]
    pub(crate) fn tx_unqueued(
        &mut self,
        dst: &SocketAddr,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Unqueued {
        let Some(buf) = self.gso.as_mut().and_then(|g| g.unqueued_buf()) else {
            return Unqueued::Busy;
        };
        let max = buf.len();
        let Some(n) = fill(buf) else {
            return Unqueued::Declined;
        };
        assert!(n <= max, "packet of {n} bytes exceeds max_packet {max}");
        // A CNP takes its own class (see `tx_push`): sent alone from where it was written.
        if is_cnp(buf, n) {
            let _ = self.sock.send_with_tclass(&buf[..n], *dst, self.cnp_tclass);
            return Unqueued::Cnp;
        }
        Unqueued::Filled(n)
    }

    /// Sends the packet of `len` bytes [`tx_unqueued`](Self::tx_unqueued) wrote, alone, as the
    /// flush of a batch that queued it alone would (what the kernel does not take stays queued);
    /// whether it was sent.
    #[inline(always)]
    pub(crate) fn tx_unqueued_send(
        &mut self,
        dst: &SocketAddr,
        name: &super::sockaddr::Name,
        len: usize,
    ) -> Result<bool, IoError> {
        let Some(g) = self.gso.as_mut() else {
            unreachable!("tx_unqueued writes only into a GSO batch");
        };
        self.tx_batches += 1;
        g.send_unqueued(self.sock.as_raw_fd(), dst, name, len)
            .map_err(|source| self.sock.send_failed("sendmmsg(UDP_SEGMENT)", source))
            .map(|sent| sent == 1)
    }

    /// Queues the packet of `len` bytes [`tx_unqueued`](Self::tx_unqueued) wrote, as
    /// [`Device::tx_push`] would have: more follow.
    pub(crate) fn tx_unqueued_queue(&mut self, dst: &SocketAddr, len: usize) {
        if let Some(g) = self.gso.as_mut() {
            g.queue_unqueued(*dst, len);
        }
    }
}

/// What [`UdpDevice::tx_unqueued_second`] did with a transmission's second packet.
pub(crate) enum Second {
    /// Nothing asked: no room behind the first in the batch's first entry.
    Busy,
    /// The fill had no packet.
    Declined,
    /// A CNP, sent on its own as [`Device::tx_push`] sends it.
    Cnp,
    /// A packet of this many bytes written behind the first, no longer than it (its ICRC moved
    /// to segment 1's IPv4 ID): for [`tx_unqueued_send_two`](UdpDevice::tx_unqueued_send_two)
    /// or [`tx_unqueued_queue_two`](UdpDevice::tx_unqueued_queue_two).
    Appended(usize),
    /// A packet of this many bytes written behind the first and longer than it: for
    /// `tx_unqueued_queue_two`, which moves it to an entry of its own.
    Longer(usize),
}

impl UdpDevice {
    /// A transmission's second packet while the first (`len` bytes) waits where
    /// [`tx_unqueued`](Self::tx_unqueued) wrote it: `fill` writes it right behind the first, in
    /// the GSO batch's first entry, as [`Device::tx_push`] would have after the first was queued.
    #[inline(always)]
    pub(crate) fn tx_unqueued_second(
        &mut self,
        dst: &SocketAddr,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Second {
        let Some(g) = self.gso.as_mut() else {
            return Second::Busy;
        };
        let Some(buf) = g.second_buf(len) else {
            return Second::Busy;
        };
        let max = buf.len();
        let Some(n) = fill(buf) else {
            return Second::Declined;
        };
        assert!(n <= max, "packet of {n} bytes exceeds max_packet {max}");
        if is_cnp(buf, n) {
            let _ = self.sock.send_with_tclass(&buf[..n], *dst, self.cnp_tclass);
            return Second::Cnp;
        }
        if n > len {
            return Second::Longer(n);
        }
        // Segment 1 of an IPv4 super-datagram: its ICRC for IP ID 1, as `tx_push` moves it.
        if dst.is_ipv4() {
            move_icrc_to_ipv4_id(&mut buf[..n], 1, &mut self.ipv4_ids);
        }
        Second::Appended(n)
    }

    /// Sends the first packet (`len` bytes) and the `second` bytes appended to it as one GSO
    /// super-datagram, as the flush of a batch that queued the two would.
    #[inline(always)]
    pub(crate) fn tx_unqueued_send_two(
        &mut self,
        dst: &SocketAddr,
        name: &super::sockaddr::Name,
        len: usize,
        second: usize,
    ) -> Result<(), IoError> {
        let Some(g) = self.gso.as_mut() else {
            unreachable!("tx_unqueued_second writes only into a GSO batch");
        };
        self.tx_batches += 1;
        g.send_unqueued_two(self.sock.as_raw_fd(), dst, name, len, second)
            .map_err(|source| self.sock.send_failed("sendmmsg(UDP_SEGMENT)", source))
            .map(|_| ())
    }

    /// Queues the first packet (`len` bytes) and the `second` bytes written behind it, as two
    /// [`Device::tx_push`] calls would have: more follow, or the second was longer.
    pub(crate) fn tx_unqueued_queue_two(&mut self, dst: &SocketAddr, len: usize, second: usize) {
        if let Some(g) = self.gso.as_mut() {
            g.queue_unqueued_two(*dst, len, second);
        }
    }
}

impl super::Nic {
    /// The UDP device, if this is one: the datapath receives from it without the dispatch.
    #[inline(always)]
    pub(crate) fn udp_mut(&mut self) -> Option<&mut UdpDevice> {
        match self {
            super::Nic::Udp(d) => Some(d),
            _ => None,
        }
    }
}

impl Device for UdpDevice {
    /// The peer's UDP address (a packet without one is not sent).
    type Addr = Option<SocketAddr>;
    type Meta = RxMeta;

    fn max_packet(&self) -> usize {
        self.plain.slot_len()
    }

    #[inline]
    fn tx_full(&self) -> bool {
        self.gso
            .as_ref()
            .map_or(self.plain.is_full(), |g| g.is_full())
    }

    #[inline]
    fn tx_pending(&self) -> usize {
        self.gso
            .as_ref()
            .map_or(self.plain.pending(), |g| g.pending())
    }

    #[inline(always)]
    fn tx_idle(&self) -> bool {
        match &self.gso {
            Some(g) => g.is_idle(),
            None => self.plain.pending() == 0,
        }
    }

    #[inline]
    fn tx_push(
        &mut self,
        _now: Instant,
        to: Option<SocketAddr>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let Some(dst) = to else {
            return false;
        };
        // A CNP takes its own class, which the socket's option (data's) cannot give it: it is
        // copied out of the batch's slot and sent alone with a control message. One compare per
        // packet; CNPs are rare (at most one per queue pair per min_time_between_cnps).
        let mut cnp_len = 0;
        let cnp = &mut self.cnp;
        let fill = |b: &mut [u8]| {
            let n = fill(b)?;
            if is_cnp(b, n) {
                cnp[..n].copy_from_slice(&b[..n]);
                cnp_len = n;
                return None;
            }
            Some(n)
        };
        let queued = match self.gso.as_mut() {
            Some(g) => match g.try_push(dst, fill) {
                // The kernel gives segment k of an IPv4 super-datagram ID k (the first keeps the 0
                // every ICRC is computed for): move its ICRC there.
                Some(k @ 1..) if dst.is_ipv4() => {
                    move_icrc_to_ipv4_id(g.last_packet_mut(), k, &mut self.ipv4_ids);
                    true
                }
                Some(_) => true,
                None => false,
            },
            None => self.plain.try_push(dst, fill),
        };
        // A CNP is never queued (`fill` declines it): asked only when nothing was.
        if !queued && cnp_len > 0 {
            // A CNP the socket refuses (its send buffer full) is lost, as one dropped on a
            // congested wire: the notification point sends another on the next CE mark.
            let _ = self
                .sock
                .send_with_tclass(&self.cnp[..cnp_len], dst, self.cnp_tclass);
            return true;
        }
        queued
    }

    #[inline(always)]
    fn flush(&mut self, _now: Instant) -> Result<(), IoError> {
        if self.tx_pending() == 0 {
            return Ok(());
        }
        self.tx_batches += 1;
        match self.gso.as_mut() {
            Some(g) => self.sock.send_gso_batch(g),
            None => self.sock.send_batch(&mut self.plain),
        }
        .map(|_| ())
    }

    #[inline(always)]
    fn receive(
        &mut self,
        now: Instant,
        each: impl FnMut(Self::Meta, &[u8]),
    ) -> Result<usize, IoError> {
        self.receive_lazy(now, move || each)
    }

    /// The receive syscall inline, the hand-on of what came out of line (`hand_on_all`): half the
    /// receives of a ping-pong find nothing, and then cost their caller no call and no closure.
    #[inline(always)]
    fn receive_lazy<F: FnMut(RxMeta, &[u8])>(
        &mut self,
        _now: Instant,
        make: impl FnOnce() -> F,
    ) -> Result<usize, IoError> {
        let n = self.sock.recv_batch(&mut self.rx)?;
        if n == 0 {
            return Ok(0);
        }
        Ok(self.hand_on_all(&mut MetaSink(make())))
    }
}

/// What a UDP receive hands its packets to: an IPv4 datagram's that needs no more than its sender
/// and TOS (not cut, to the socket's own address) as those values, any other with its [`RxMeta`].
/// The values go in registers, where a meta was built on the stack for every packet.
pub(crate) trait RxSink {
    /// A packet `data` from `src` with TOS `tos`, not cut, sent to the socket's own address.
    fn ipv4(&mut self, src: SocketAddrV4, tos: u8, data: &[u8]);
    /// Any other packet, as [`Device::receive`] hands it on.
    fn meta(&mut self, meta: RxMeta, data: &[u8]);
}

/// A [`Device::receive`] closure as an [`RxSink`].
struct MetaSink<F>(F);

impl<F: FnMut(RxMeta, &[u8])> RxSink for MetaSink<F> {
    #[inline(always)]
    fn ipv4(&mut self, src: SocketAddrV4, tos: u8, data: &[u8]) {
        let meta = RxMeta::Datagram {
            src: Some(SocketAddr::V4(src)),
            dst: None,
            truncated: false,
            tclass: tos,
        };
        (self.0)(meta, data)
    }

    #[inline(always)]
    fn meta(&mut self, meta: RxMeta, data: &[u8]) {
        (self.0)(meta, data)
    }
}

impl UdpDevice {
    /// [`Device::receive_lazy`] to an [`RxSink`]: the receive of an endpoint that asks its UDP
    /// device directly.
    #[inline(always)]
    pub(crate) fn receive_sink<S: RxSink>(
        &mut self,
        make: impl FnOnce() -> S,
    ) -> Result<usize, IoError> {
        let n = self.sock.recv_batch(&mut self.rx)?;
        if n == 0 {
            return Ok(0);
        }
        Ok(self.hand_on_all(&mut make()))
    }

    /// Hands the datagrams of the last receive (at least one) to `each`; how many packets they
    /// held. Their count is read from the batch, not passed: then the batch's own check that a
    /// datagram is one of them folds away.
    #[inline(never)]
    fn hand_on_all(&self, each: &mut impl RxSink) -> usize {
        let n = self.rx.len();
        // A ping-pong's receive finds one datagram: handed on without the loop, whose set-up (the
        // batch's arrays held across the calls) costs more than that datagram's reads.
        if n == 1 {
            // A ping-pong's datagram (no control message but its TOS): one packet, handed on
            // with no call before `each` (the walk of control messages is one), so that nothing
            // is held across a call and this path saves few registers.
            if let Some(d) = self.rx.plain_datagram(0) {
                hand_on_one(&d, each);
                return 1;
            }
            return self.hand_on_walked(0, each);
        }
        self.hand_on_many(n, each)
    }

    /// [`hand_on_all`](Self::hand_on_all) for `n` datagrams. Out of line: the loop's registers,
    /// held across its calls, made the lone datagram's path save and restore them too.
    #[inline(never)]
    fn hand_on_many(&self, n: usize, each: &mut impl RxSink) -> usize {
        let mut packets = 0;
        for i in 0..n {
            packets += self.hand_on(i, each);
        }
        packets
    }

    /// [`hand_on`](Self::hand_on) of a lone datagram whose control messages are more than its TOS
    /// (a destination address, a GRO size).
    #[inline(never)]
    fn hand_on_walked(&self, i: usize, each: &mut impl RxSink) -> usize {
        // A ping-pong's packet merged by GRO with the one that followed it (a WRITE with the ACK
        // sent behind it): split in two without the walk and the splitting iterator, as
        // `gro_packets` splits it.
        if let Some((src, seg, tos, data)) = self.rx.gro_ipv4(i) {
            let seg = usize::from(seg);
            if seg > 0 && seg < data.len() && data.len() <= 2 * seg {
                let (first, second) = data.split_at(seg);
                each.ipv4(src, tos, first);
                each.ipv4(src, tos, second);
                return 2;
            }
        }
        self.hand_on(i, each)
    }

    /// Hands datagram `i` of the last receive to `each`, one RoCE packet a call (a GRO datagram
    /// split into its packets); how many packets it held.
    #[inline(always)]
    fn hand_on(&self, i: usize, each: &mut impl RxSink) -> usize {
        let d = self.rx.datagram(i);
        // One packet (no GRO, or a merged datagram of one segment): handed on as it is, without
        // the splitting iterator, which costs a stream's every packet without GRO.
        if d.gro_segment.is_none_or(|s| s == 0 || usize::from(s) >= d.data.len()) {
            hand_on_one(&d, each);
            return 1;
        }
        let mut packets = 0;
        for one in gro_packets(d) {
            packets += 1;
            hand_on_one(&one, each);
        }
        packets
    }
}

/// Hands one packet `d` to `each`: a plain IPv4 datagram's as values ([`RxSink::ipv4`]), any
/// other's with its meta. An IPv4 sender's meta is built at a call of its own: then it stores no
/// IPv6 address's bytes (the checks read only the family's fields).
#[inline(always)]
fn hand_on_one(d: &RxDatagram<'_>, each: &mut impl RxSink) {
    match d.src {
        Some(SocketAddr::V4(a)) if d.dst.is_none() && !d.truncated => {
            each.ipv4(a, d.tclass, d.data)
        }
        Some(SocketAddr::V4(a)) => each.meta(
            RxMeta::Datagram {
                src: Some(SocketAddr::V4(a)),
                dst: d.dst,
                truncated: d.truncated,
                tclass: d.tclass,
            },
            d.data,
        ),
        _ => each.meta(datagram_meta(d), d.data),
    }
}

/// What the receive checks read of a datagram besides its bytes.
#[inline(always)]
fn datagram_meta(d: &RxDatagram<'_>) -> RxMeta {
    RxMeta::Datagram {
        src: d.src,
        dst: d.dst,
        truncated: d.truncated,
        tclass: d.tclass,
    }
}

impl Backend for UdpDevice {
    type Plan = UdpPlan;

    /// Binds the planned address; a second endpoint on `lo` whose plan allows it takes the next
    /// free 127.0.0.x by itself when that one's port is taken (the peer learns it from ConnInfo).
    fn open(dev: &NetDev, plan: &UdpPlan) -> Result<UdpDevice, IoError> {
        let sock = match UdpSocket::bind(dev, plan.ip, &plan.cfg) {
            Ok(sock) => sock,
            Err(IoError::PortInUse { .. }) if plan.may_move => loopback_alternatives()
                .find_map(|alt| UdpSocket::bind(dev, alt, &plan.cfg).ok())
                .ok_or(IoError::PortInUse {
                    addr: plan.ip,
                    port: plan.cfg.port,
                })?,
            Err(e) => return Err(e),
        };
        Ok(UdpDevice::new(sock, plan))
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        Some(self.sock.local_addr())
    }

    fn accept_only(&mut self, _qps: super::qp_filter::QpRange) -> Result<(), IoError> {
        // The kernel hands this socket only the datagrams to its own address and port.
        Ok(())
    }

    fn wait_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.sock.fd.as_fd()
    }

    fn takes_super_frames(&self) -> bool {
        true
    }

    fn gso_sending(&self) -> bool {
        self.gso.is_some()
    }

    fn stop_gso(&mut self) -> bool {
        self.gso.take().is_some()
    }

    fn tx_batches(&self) -> u64 {
        self.tx_batches
    }

    fn describe(&self) -> String {
        let addr = self.sock.local_addr();
        if !self.gso_planned {
            return format!("UDP socket {addr}");
        }
        format!(
            "UDP socket {addr}, {}: {}{}",
            if self.gro { "GSO/GRO" } else { "GSO" },
            if self.gso_sending() {
                "up to 64 packets per send (a capture on this host may show them merged; --no-gso shows each)"
            } else {
                "1 packet per send (the peer needs single datagrams)"
            },
            if self.gro {
                ""
            } else {
                "; no GRO (a latency test receives one packet at a time)"
            },
        )
    }
}

/// The error of a typed socket option setter, named as `setsockopt_int` names its own.
fn failed(what: &'static str, value: libc::c_int) -> impl FnOnce(Errno) -> IoError {
    move |e| IoError::os(format!("setsockopt({what}={value})"), e)
}

/// What EPERM on a send means: netfilter dropped the datagram on its way out.
fn refused_hint(e: &std::io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EPERM) {
        " (refused by a netfilter/iptables rule on this host's output path: allow UDP port 4791)"
    } else {
        ""
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn cfg(port: u16) -> UdpConfig {
        UdpConfig {
            port,
            batch: 8,
            pktinfo: true,
            ..UdpConfig::default()
        }
    }

    /// A free high port for a test, so parallel tests and a real roceperf on 4791 never collide.
    pub(in crate::transport::soft::io) fn free_port(ip: IpAddr) -> u16 {
        std::net::UdpSocket::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A socket on 127.0.0.1 and one on `b_ip`, on one free port.
    fn loopback_pair(b_ip: IpAddr) -> (UdpSocket, UdpSocket) {
        let port = free_port(b_ip);
        let a = UdpSocket::bind_scoped("127.0.0.1".parse().unwrap(), 0, &cfg(port)).unwrap();
        let b = UdpSocket::bind_scoped(b_ip, 0, &cfg(port)).unwrap();
        (a, b)
    }

    #[test]
    fn batch_round_trip_over_loopback_v4() {
        let b_ip: IpAddr = "127.0.0.3".parse().unwrap();
        let (a, b) = loopback_pair(b_ip);
        let mut tx = TxBatch::new(8, 256);
        for k in 0..8u8 {
            assert!(tx.push(b.local_addr(), |buf| {
                buf[..3].copy_from_slice(&[k, k, k]);
                3 + k as usize
            }));
        }
        assert!(tx.is_full());
        assert!(!tx.push(b.local_addr(), |_| unreachable!(
            "full batch must not call fill"
        )));
        assert_eq!(a.send_batch(&mut tx).unwrap(), 8);
        assert_eq!(tx.pending(), 0);
        let mut rx = RxBatch::new(8, 256);
        let mut got = Vec::new();
        recv_datagrams(&b, &mut rx, 8, |d| {
            assert_eq!(d.src, Some(a.local_addr()));
            assert_eq!(d.dst, Some(b_ip));
            assert!(!d.truncated);
            got.push((d.data[0], d.data.len()));
        });
        assert_eq!(
            got,
            (0..8u8).map(|k| (k, 3 + k as usize)).collect::<Vec<_>>()
        );
    }

    /// Receives until one call returns data (the datagrams may take a moment on a loaded host).
    fn recv_some(s: &UdpSocket, rx: &mut RxBatch) -> usize {
        for _ in 0..1000 {
            let n = s.recv_batch(rx).unwrap();
            if n > 0 {
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("nothing arrived on {}", s.local_addr());
    }

    /// Receives until `n` datagrams have arrived (they may take a moment on a loaded host), handing
    /// each to `each`; gives up after about a second, leaving the caller's checks to fail.
    pub(in crate::transport::soft::io) fn recv_datagrams(
        s: &UdpSocket,
        rx: &mut RxBatch,
        n: usize,
        mut each: impl FnMut(RxDatagram<'_>),
    ) {
        let mut got = 0;
        for _ in 0..1000 {
            s.recv_batch(rx).unwrap();
            for i in 0..rx.len() {
                each(rx.datagram(i));
            }
            got += rx.len();
            if got >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn one_datagram_at_a_time_until_two_receives_in_a_row_find_data() {
        let b_ip: IpAddr = "127.0.0.6".parse().unwrap();
        let (a, b) = loopback_pair(b_ip);
        let mut tx = TxBatch::new(8, 64);
        let mut send = |count: u8| {
            for k in 0..count {
                tx.push(b.local_addr(), |buf| {
                    buf[0] = k;
                    1
                });
            }
            assert_eq!(a.send_batch(&mut tx).unwrap(), count as usize);
        };
        let mut rx = RxBatch::new(8, 64);
        // A batch receive that finds one datagram turns to one at a time.
        send(1);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 1);
        send(4);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Four waiting: one per receive, twice (the second in a row with data switches back) ...
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(rx.datagram(0).data, [0]);
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(rx.datagram(0).data, [1]);
        assert_eq!(rx.datagram(0).src, Some(a.local_addr()));
        // ... then the rest in one batch.
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 2);
        assert_eq!(
            (rx.datagram(0).data, rx.datagram(1).data),
            (&[2u8][..], &[3u8][..])
        );
        // An empty receive turns to one at a time again; truncation is still reported there.
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 0);
        a.send_batch(&mut {
            let mut t = TxBatch::new(1, 128);
            t.push(b.local_addr(), |buf| {
                buf[..100].fill(7);
                100
            });
            t
        })
        .unwrap();
        assert_eq!(recv_some(&b, &mut rx), 1);
        assert!(rx.datagram(0).truncated);
        assert_eq!(rx.datagram(0).data.len(), 64);
    }

    #[test]
    fn gro_datagrams_split_into_their_packets() {
        let data = [1u8; 10];
        let mut d = RxDatagram {
            data: &data,
            src: Some("10.0.0.1:4791".parse().unwrap()),
            dst: None,
            truncated: false,
            gro_segment: None,
            tclass: 0,
        };
        assert_eq!(gro_packets(d).count(), 1);
        d.gro_segment = Some(4);
        let lens: Vec<usize> = gro_packets(d).map(|p| p.data.len()).collect();
        assert_eq!(lens, [4, 4, 2]);
        d.gro_segment = Some(0);
        assert_eq!(gro_packets(d).count(), 1);
    }

    /// A device plan on `ip`:`port` with GSO and GRO, as a bandwidth test opens it.
    fn gso_plan(ip: IpAddr, port: u16, may_move: bool) -> UdpPlan {
        UdpPlan {
            cfg: UdpConfig {
                port,
                gro: true,
                zero_checksum: false,
                slot_len: 65_536,
                ..UdpConfig::default()
            },
            ip,
            may_move,
            tx_slot: 2048,
            gso: true,
        }
    }

    #[test]
    fn the_device_says_what_it_is_and_sends_single_datagrams_once_asked() {
        let lo = NetDev::by_name("lo").unwrap();
        let ip: IpAddr = "127.0.0.23".parse().unwrap();
        let port = free_port(ip);
        let mut d = UdpDevice::open(&lo, &gso_plan(ip, port, false)).unwrap();
        assert_eq!(d.local_addr(), Some(SocketAddr::new(ip, port)));
        assert!(d.takes_super_frames() && d.gso_sending());
        assert_eq!(
            d.describe(),
            format!(
                "UDP socket {ip}:{port}, GSO/GRO: up to 64 packets per send (a capture on this host may show them merged; --no-gso shows each)"
            )
        );
        assert!(d.stop_gso(), "GSO was on");
        assert!(!d.stop_gso() && !d.gso_sending());
        assert_eq!(
            d.describe(),
            format!(
                "UDP socket {ip}:{port}, GSO/GRO: 1 packet per send (the peer needs single datagrams)"
            )
        );
        assert!(
            d.takes_super_frames(),
            "receiving is not the peer's business"
        );
    }

    #[test]
    fn a_taken_port_moves_only_a_plan_that_may_move() {
        let lo = NetDev::by_name("lo").unwrap();
        let first: IpAddr = "127.0.0.1".parse().unwrap();
        let port = free_port(first);
        let _taken = UdpDevice::open(&lo, &gso_plan(first, port, false)).unwrap();
        let err = UdpDevice::open(&lo, &gso_plan(first, port, false)).err();
        assert!(matches!(err, Some(IoError::PortInUse { .. })), "{err:?}");
        let moved = UdpDevice::open(&lo, &gso_plan(first, port, true)).unwrap();
        let at = moved.local_addr().unwrap();
        assert!(loopback_alternatives().any(|alt| alt == at.ip()), "{at}");
        assert_eq!(at.port(), port);
    }

    #[test]
    fn ipv6_loopback_with_zero_checksum_rx() {
        let ip: IpAddr = "::1".parse().unwrap();
        let Ok(probe) = std::net::UdpSocket::bind((ip, 0)) else {
            return; // no IPv6 on this host's lo: nothing to test
        };
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let b = UdpSocket::bind_scoped(ip, 0, &cfg(port)).unwrap();
        // The sender sets UDP_NO_CHECK6_TX, so the datagram really carries checksum 0; the receiver
        // only gets it because of UDP_NO_CHECK6_RX.
        let a = std::net::UdpSocket::bind((ip, 0)).unwrap();
        setsockopt_int(
            &a,
            libc::IPPROTO_UDP,
            UDP_NO_CHECK6_TX,
            1,
            "UDP_NO_CHECK6_TX",
        )
        .unwrap();
        a.send_to(b"roce", b.local_addr()).unwrap();
        let mut rx = RxBatch::new(4, 64);
        recv_some(&b, &mut rx);
        assert_eq!(rx.len(), 1);
        assert_eq!(rx.datagram(0).data, b"roce");
        assert_eq!(rx.datagram(0).dst, Some(ip));
    }

    #[test]
    fn truncation_is_flagged() {
        let ip: IpAddr = "127.0.0.4".parse().unwrap();
        let port = free_port(ip);
        let b = UdpSocket::bind_scoped(ip, 0, &cfg(port)).unwrap();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(&[0x55; 300], b.local_addr()).unwrap();
        let mut rx = RxBatch::new(2, 64);
        recv_some(&b, &mut rx);
        assert!(rx.datagram(0).truncated);
        assert_eq!(rx.datagram(0).data.len(), 64);
    }

    #[test]
    fn port_in_use_names_the_remedies() {
        let ip: IpAddr = "127.0.0.5".parse().unwrap();
        let port = free_port(ip);
        let _first = UdpSocket::bind_scoped(ip, 0, &cfg(port)).unwrap();
        let msg = UdpSocket::bind_scoped(ip, 0, &cfg(port))
            .err()
            .unwrap()
            .to_string();
        assert!(
            msg.contains("127.0.0.5") && msg.contains("rdma_rxe"),
            "{msg}"
        );
        assert!(
            msg.contains("127.0.0.2") && msg.contains("ip netns add") && !msg.contains("scripts/"),
            "{msg}"
        );
    }

    #[test]
    fn address_not_on_the_interface_is_refused() {
        let lo = NetDev::by_name("lo").unwrap();
        let err = UdpSocket::bind(&lo, "192.0.2.99".parse().unwrap(), &cfg(4791))
            .err()
            .unwrap();
        assert!(matches!(err, IoError::AddrNotOnInterface { .. }), "{err}");
        assert!(err.to_string().contains("'lo'"), "{err}");
    }

    /// A CNP leaves with its own class by a control message, data with the socket's; the receiver
    /// reads each datagram's class (IP_RECVTOS / IPV6_RECVTCLASS), GSO or not, IPv4 and IPv6.
    #[test]
    fn cnps_take_their_own_class_and_the_receiver_reads_every_class() {
        for (a_ip, b_ip, gso) in [
            ("127.0.0.24", "127.0.0.25", true),
            ("127.0.0.24", "127.0.0.25", false),
            ("::1", "::1", true),
        ] {
            let (a_ip, b_ip): (IpAddr, IpAddr) = (a_ip.parse().unwrap(), b_ip.parse().unwrap());
            let marked = |ip: IpAddr, port: u16| UdpPlan {
                cfg: UdpConfig {
                    port,
                    tclass: Some(0x6a),
                    cnp_tclass: 0xc2,
                    priority: Some(3),
                    recv_tclass: true,
                    zero_checksum: !gso,
                    ..UdpConfig::default()
                },
                ip,
                may_move: false,
                tx_slot: 2048,
                gso,
            };
            let lo = NetDev::by_name("lo").unwrap();
            let mut a = UdpDevice::open(&lo, &marked(a_ip, free_port(a_ip))).unwrap();
            let mut b = UdpDevice::open(&lo, &marked(b_ip, free_port(b_ip))).unwrap();
            let to = b.local_addr();
            let now = Instant::ZERO;
            // Data, a CNP (BTH opcode 0x81, 16 reserved bytes, ICRC), data: the CNP leaves at once,
            // on its own; the data around it as one batch.
            for op in [0x04u8, Opcode::CNP.0, 0x04] {
                assert!(a.tx_push(now, to, |buf| {
                    buf[..32].fill(0);
                    buf[0] = op;
                    Some(32)
                }));
            }
            a.flush(now).unwrap();
            let mut got = Vec::new();
            for _ in 0..1000 {
                b.receive(now, |meta, data| {
                    let RxMeta::Datagram { tclass, .. } = meta else {
                        panic!("{meta:?}")
                    };
                    got.push((data[0], tclass));
                })
                .unwrap();
                if got.len() >= 3 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            got.sort();
            assert_eq!(
                got,
                [(0x04, 0x6a), (0x04, 0x6a), (Opcode::CNP.0, 0xc2)],
                "{a_ip} GSO {gso}"
            );
        }
    }
}
