//! RoCE v1 and v2 over AF_PACKET: whole Ethernet frames, every header ours.
//!
//! Why raw frames: RoCE v1 has no kernel stack at all (Ethertype 0x8915), and only a raw frame shows
//! the sender's real IPv4 header (ID, flags), which the ICRC covers and a UDP socket hides. The cost
//! is CAP_NET_RAW.
//!
//! The socket is created with protocol 0 (it receives nothing), gets a classic BPF filter that passes
//! only RoCE frames and MAC Control frames (PFC and global pause, [`roce_filter`]), and only then is
//! bound to the interface with ETH_P_ALL, so no unrelated frame is ever queued to us. Our own transmitted frames are not looped back to us
//! (PACKET_IGNORE_OUTGOING). Frames move in `recvmmsg`/`sendmmsg` batches over preallocated slots.
//! `PacketDevice` is the backend the endpoint holds: the socket with its receive ring or batch,
//! and its transmit batch of single frames or of `virtio_net_hdr` super-frames.
//!
//! Why single frames leave through `sendmmsg` and not a PACKET_TX_RING: a ring was built and
//! measured (Linux 6.18, RoCE v1 64 KiB write_bw across a veth pair at MTU 9000, four runs each
//! way): 18.7 Gb/s against 19.3 through `sendmmsg`. The kernel hands a ring's frames on as
//! zero-copy page fragments, and a veth must copy those at the namespace crossing
//! (`skb_copy_ubufs`, a page allocated per frame), so the copy from user memory it saves comes back
//! dearer. What the sending core mostly spends is the receiver's side anyway: the veth delivers in
//! the sender's softirq, which copies each frame into the peer's receive ring (a third of the core).
//! Moving that copy to the receiving core does not pay either (the same link, three runs each,
//! medians): receiving through `recvmmsg` instead of the ring, so that the receiver copies each
//! frame as a UDP socket's reader does, ran at 20.7 Gb/s against the ring's 22.1; steering the
//! veth's receive to the receiving core with RPS cut soft v2 over UDP from 44.9 to 26.6 Gb/s and
//! RoCE v1 to 19.0; PACKET_QDISC_BYPASS on the veth's noqueue gained nothing (21.5); and binding
//! to RoCE v1's Ethertype instead of ETH_P_ALL (which the PFC frames need) gained 1.6 % (21.9
//! against 21.55, four runs each).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use super::batch::{RxBatch, RxFrame, TxBatch};
use super::device::{Backend, Device, Plan, PlanInput, RxMeta};
use super::kernel_rx::{KernelRx, KernelRxGuard};
use super::packet_gso::{PacketGsoTx, SUPER_FRAME_SLOT, split_frames};
use super::qp_filter::{QpRange, qp_filter};
use super::ring::RxRing;
use super::{IoError, ROCE_V2_PORT, grow_buffer, move_icrc_to_ipv4_id, setsockopt_int};
use crate::transport::soft::netdev::NetDev;
use crate::transport::soft::rc::Instant;
use crate::wire::pfc::MAC_CONTROL_ETHERTYPE;
use crate::wire::{Encapsulation, Ipv4IdCache};

/// Ethertype of RoCE v1 (`ETH_P_IBOE`).
pub(crate) const ETH_P_IBOE: u16 = 0x8915;

// Kernel constants that not every libc version exports (include/uapi/linux/if_packet.h).
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Options of the AF_PACKET backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketConfig {
    /// UDP destination port the filter passes for RoCE v2 (4791 except in tests).
    pub udp_port: u16,
    /// Frames per `recvmmsg`/`sendmmsg`.
    pub batch: usize,
    /// Bytes per frame slot (a 4096-MTU RoCE v2/IPv6 frame is 14 + 40 + 8 + 4132 bytes).
    pub slot_len: usize,
    /// Requested SO_RCVBUF and SO_SNDBUF.
    pub socket_buffer: usize,
    /// Hand frames straight to the driver, skipping the qdisc (PACKET_QDISC_BYPASS). Off when tc
    /// netem must see our frames.
    pub qdisc_bypass: bool,
    /// Receive through a PACKET_MMAP ring of this many frame slots instead of `recvmmsg`
    /// (0: no ring). Polling an idle ring costs a memory load, not a syscall.
    pub rx_ring_frames: usize,
    /// RoCE v2 off loopback: our address and UDP port, whose frames the kernel's own IP/UDP receive
    /// is kept off as [`kernel_rx`](Self::kernel_rx) says ([`super::kernel_rx`]).
    pub v2_local: Option<SocketAddr>,
    /// How: a TCX ingress program (falling back to a sink socket), the sink socket, or nothing.
    pub kernel_rx: KernelRx,
    /// Every frame sent and received carries a `virtio_net_hdr` first (PACKET_VNET_HDR), so RoCE
    /// v2 frames move as segmentation-offload super-frames ([`super::packet_gso`]). Excludes a
    /// receive ring, whose slots are sized for single frames.
    pub vnet_hdr: bool,
}

impl Default for PacketConfig {
    fn default() -> Self {
        PacketConfig {
            udp_port: ROCE_V2_PORT,
            batch: 64,
            slot_len: 14 + 4 + 40 + 8 + super::udp::MAX_ROCE_UDP_PAYLOAD,
            socket_buffer: 8 << 20,
            qdisc_bypass: false,
            rx_ring_frames: 0,
            v2_local: None,
            kernel_rx: KernelRx::Tcx,
            vnet_hdr: false,
        }
    }
}

impl Plan for PacketConfig {
    fn new(input: &PlanInput<'_>) -> Result<PacketConfig, IoError> {
        let dev = input.dev;
        if !dev.loopback {
            dev.require_mac()?;
        }
        // virtio_net_hdr super-frames for RoCE v2 (RoCE v1 has no UDP to segment).
        let vnet_hdr = input.gso && input.encap != Encapsulation::V1;
        Ok(PacketConfig {
            udp_port: input.udp_port,
            batch: input.batch,
            slot_len: input.slot_len,
            // netem (when present) must see our frames; bypassing the qdisc would skip it.
            qdisc_bypass: false,
            // A ring's slots hold single frames; super-frames arrive through recvmmsg.
            rx_ring_frames: if vnet_hdr { 0 } else { input.rx_ring },
            vnet_hdr,
            // Off loopback, RoCE v2 frames also climb the kernel's IP/UDP receive unless kept off.
            v2_local: input
                .local_ip
                .filter(|_| !dev.loopback)
                .map(|ip| SocketAddr::new(ip, input.udp_port)),
            kernel_rx: input.kernel_rx,
            ..PacketConfig::default()
        })
    }

    fn gso(&self) -> bool {
        self.vnet_hdr
    }
}

/// The classic BPF program that passes RoCE frames and MAC Control frames (PFC and global pause,
/// which the endpoint honours: `soft::pfc`) only, written out by hand. Jump offsets count from the
/// next instruction.
///
/// ```text
///  0: ldh [12]                 ; Ethertype
///  1: jeq #0x8915, 16, 2       ; RoCE v1 -> ACCEPT
///  2: jeq #0x8808, 16, 3       ; MAC Control (PFC, pause) -> ACCEPT
///  3: jeq #0x0800, 5, 4        ; IPv4
///  4: jeq #0x86dd, 12, 17      ; IPv6, else DROP
///  5: ldb [23]                 ; IPv4 protocol
///  6: jeq #17, 7, 17           ; UDP, else DROP
///  7: ldh [20]                 ; flags + fragment offset
///  8: jset #0x1fff, 17, 9      ; a non-first fragment has no UDP header: DROP
///  9: ldxb 4*([14]&0xf)        ; X = IPv4 header length
/// 10: ldh [x+16]               ; UDP destination port at 14 + IHL + 2
/// 11: jeq #port, 16, 17
/// 12: ldb [20]                 ; IPv6 next header (RoCE never sends extension headers)
/// 13: jeq #17, 14, 17
/// 14: ldh [56]                 ; UDP destination port at 14 + 40 + 2
/// 15: jeq #port, 16, 17
/// 16: ret #262144              ; ACCEPT the whole frame
/// 17: ret #0                   ; DROP
/// ```
///
/// VLAN tags never reach the filter at offset 12: the kernel moves them into packet metadata on
/// receive, for AF_PACKET as for everyone else. A RoCE v2 frame pays one more compare in the
/// kernel for the MAC Control test; the datapath tells the two apart by the same two bytes.
pub(crate) fn roce_filter(udp_port: u16) -> Vec<libc::sock_filter> {
    use super::qp_filter::cbpf::*;
    const ACCEPT: usize = 16;
    const DROP: usize = 17;
    let port = udp_port as u32;
    let mut prog = vec![
        op(LD_H_ABS, 12),
        jmp(1, JEQ_K, ETH_P_IBOE as u32, ACCEPT, 2),
        jmp(2, JEQ_K, u32::from(MAC_CONTROL_ETHERTYPE), ACCEPT, 3),
    ];
    prog.extend(ipv4_udp_to(3, port, ACCEPT, 12, DROP));
    prog.extend(ipv6_udp_to(12, port, ACCEPT, DROP));
    prog.extend([op(RET_K, ACCEPT_ALL), op(RET_K, 0)]);
    debug_assert_eq!(prog.len(), DROP + 1);
    prog
}

/// Attaches (or replaces, atomically) the socket's classic BPF filter.
fn attach_filter(s: RawFd, prog: &[libc::sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points at prog, which outlives the call; the kernel copies the program.
    let rc = unsafe {
        libc::setsockopt(
            s,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &fprog as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// An AF_PACKET socket bound to one interface, passing only RoCE frames.
pub struct PacketSocket {
    // Declared before `fd` so the ring is unmapped before the socket closes.
    ring: Option<RxRing>,
    fd: OwnedFd,
    /// What keeps the kernel's IP/UDP receive off our RoCE v2 frames ([`PacketConfig::v2_local`]).
    kernel_rx: Option<KernelRxGuard>,
    vnet: bool,
    ifindex: u32,
    dev: String,
    /// RoCE v2's UDP port, which the filters test.
    udp_port: u16,
}

impl PacketSocket {
    /// Opens the socket on `dev`. Fails with [`IoError::NeedCapNetRaw`] without CAP_NET_RAW.
    pub fn open(dev: &NetDev, cfg: &PacketConfig) -> Result<PacketSocket, IoError> {
        // Protocol 0 (`None`): nothing is queued to the socket until bind, after the filter is in place.
        let fd = rustix::net::socket_with(
            AddressFamily::PACKET,
            SocketType::RAW,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| match e {
            Errno::PERM | Errno::ACCESS => IoError::NeedCapNetRaw {
                dev: dev.name.clone(),
            },
            _ => IoError::os(format!("socket(AF_PACKET) for {}", dev.name), e),
        })?;
        let s = fd.as_raw_fd();
        attach_filter(s, &roce_filter(cfg.udp_port))
            .map_err(|e| IoError::last_os(format!("SO_ATTACH_FILTER (RoCE filter) on {}: {e}", dev.name)))?;
        // Our own frames would otherwise come back to us as PACKET_OUTGOING copies.
        setsockopt_int(
            &fd,
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            1,
            "PACKET_IGNORE_OUTGOING",
        )?;
        if cfg.qdisc_bypass {
            setsockopt_int(
                &fd,
                libc::SOL_PACKET,
                PACKET_QDISC_BYPASS,
                1,
                "PACKET_QDISC_BYPASS",
            )?;
        }
        // Before Linux 6.2 a packet socket cannot describe a received UDP super-frame and drops
        // it: such a kernel gets single frames and a receive ring instead.
        let vnet = cfg.vnet_hdr && super::kernel_at_least(6, 2);
        if vnet {
            setsockopt_int(&fd, libc::SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR")?;
        }
        grow_buffer(&fd, true, cfg.socket_buffer)?;
        grow_buffer(&fd, false, cfg.socket_buffer)?;
        let ring = match cfg.rx_ring_frames {
            _ if vnet => None,
            0 => None,
            n => Some(
                RxRing::attach(s, n, cfg.slot_len).map_err(|source| IoError::Os {
                    context: format!("PACKET_RX_RING of {n} frames on {}", dev.name),
                    source,
                })?,
            ),
        };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = dev.index as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                s,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os(format!(
                "bind AF_PACKET to {} (index {})",
                dev.name, dev.index
            )));
        }
        Ok(PacketSocket {
            ring,
            fd,
            kernel_rx: cfg
                .v2_local
                .map(|to| KernelRxGuard::open(dev.index, to, cfg.kernel_rx)),
            vnet,
            ifindex: dev.index,
            dev: dev.name.clone(),
            udp_port: cfg.udp_port,
        })
    }

    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Whether a TCX ingress program keeps the kernel's IP/UDP receive off our RoCE v2 frames (false
    /// when a sink socket does, or nothing: RoCE v1, loopback, or the program could not be attached).
    pub fn skips_kernel_udp(&self) -> bool {
        self.kernel_rx
            .as_ref()
            .is_some_and(KernelRxGuard::skips_kernel_udp)
    }

    /// Whether every frame carries a `virtio_net_hdr` first ([`PacketConfig::vnet_hdr`]).
    pub fn vnet_hdr(&self) -> bool {
        self.vnet
    }

    /// The receive ring, when the socket was opened with one; frames then arrive there and
    /// [`recv_batch`](Self::recv_batch) finds nothing.
    pub fn rx_ring(&mut self) -> Option<&mut RxRing> {
        self.ring.as_mut()
    }

    /// Receives up to a batch of RoCE frames without blocking; returns how many (0 when none wait).
    #[inline]
    pub fn recv_batch(&self, rx: &mut RxBatch) -> Result<usize, IoError> {
        // The frame's metadata comes in its sockaddr_ll: no control message.
        rx.recv(self.fd.as_raw_fd(), false)
            .map_err(|source| IoError::Os {
                context: format!("recvmmsg on AF_PACKET {}", self.dev),
                source,
            })
    }

    /// Sends the queued super-frames (a `PACKET_VNET_HDR` socket); what the kernel did not take
    /// stays queued. Returns how many went out.
    #[inline]
    pub fn send_gso_batch(&self, tx: &mut PacketGsoTx) -> Result<usize, IoError> {
        tx.send(self.fd.as_raw_fd()).map_err(|source| IoError::Os {
            context: format!("sendmmsg(virtio_net_hdr) on AF_PACKET {}", self.dev),
            source,
        })
    }

    /// Sends the queued frames; what the kernel did not take stays queued. Returns how many went out.
    #[inline]
    pub fn send_batch(&self, tx: &mut TxBatch) -> Result<usize, IoError> {
        tx.send(self.fd.as_raw_fd()).map_err(|source| IoError::Os {
            context: format!("sendmmsg on AF_PACKET {}", self.dev),
            source,
        })
    }
}

/// How the AF_PACKET backend sends: one frame per slot, or `virtio_net_hdr` super-frames.
enum FrameTx {
    /// One frame per `sendmmsg` slot (RoCE v1, or no `virtio_net_hdr`).
    Single(TxBatch),
    /// Runs of RoCE v2 frames of one flow joined into super-frames (a `PACKET_VNET_HDR` socket).
    Super(PacketGsoTx),
}

/// The AF_PACKET backend: a [`PacketSocket`] with its receive ring or batch and its transmit batch,
/// as one [`Device`] that moves one RoCE frame at a time.
///
/// With `virtio_net_hdr`, segment k of an IPv4 super-frame leaves with IP ID k, so its ICRC (written
/// for ID 0) is moved here, and a received super-frame is split back into its frames.
pub(crate) struct PacketDevice {
    sock: PacketSocket,
    rx: RxBatch,
    tx: FrameTx,
    /// Bytes of a transmit slot: the largest frame.
    max_frame: usize,
    /// How the IPv4 ID moves the ICRC, per packet length, for super-frame segments.
    ipv4_ids: Ipv4IdCache,
    /// Frames per receive batch (and per turn of the ring).
    batch: usize,
    tx_batches: u64,
}

/// What a received frame carries besides its bytes.
#[inline]
fn frame_meta(f: &RxFrame<'_>) -> RxMeta {
    RxMeta::Frame {
        pkttype: f.pkttype,
        ifindex: f.ifindex,
        truncated: f.truncated,
    }
}

impl PacketDevice {
    /// The device on `sock`, with batches as `cfg` says.
    fn new(sock: PacketSocket, cfg: &PacketConfig) -> PacketDevice {
        let (batch, slot_len) = (cfg.batch, cfg.slot_len);
        // A super-frame brings its headers and the virtio_net_hdr.
        let rx_slot = if cfg.vnet_hdr {
            SUPER_FRAME_SLOT
        } else {
            slot_len
        };
        // A socket with virtio_net_hdr takes every frame through the super-frame batch.
        let tx = if sock.vnet_hdr() {
            FrameTx::Super(PacketGsoTx::new(batch.min(32), slot_len))
        } else {
            FrameTx::Single(TxBatch::new(batch, slot_len))
        };
        PacketDevice {
            sock,
            rx: RxBatch::new(batch, rx_slot),
            tx,
            max_frame: slot_len,
            ipv4_ids: Ipv4IdCache::new(),
            batch,
            tx_batches: 0,
        }
    }
}

impl Device for PacketDevice {
    /// Ignored: a frame carries its own addresses.
    type Addr = Option<SocketAddr>;
    type Meta = RxMeta;

    fn max_packet(&self) -> usize {
        self.max_frame
    }

    #[inline]
    fn tx_full(&self) -> bool {
        match &self.tx {
            FrameTx::Single(b) => b.is_full(),
            FrameTx::Super(p) => p.is_full(),
        }
    }

    #[inline]
    fn tx_pending(&self) -> usize {
        match &self.tx {
            FrameTx::Single(b) => b.pending(),
            FrameTx::Super(p) => p.pending(),
        }
    }

    #[inline]
    fn tx_push(
        &mut self,
        _now: Instant,
        _to: Option<SocketAddr>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        match &mut self.tx {
            FrameTx::Single(b) => b.try_push_frame(fill),
            // As for UDP: segment k of an IPv4 super-frame leaves with IP ID k.
            FrameTx::Super(p) => match p.try_push(fill) {
                Some(k @ 1..) => {
                    if let (pkt, true) = p.last_packet_mut() {
                        move_icrc_to_ipv4_id(pkt, k, &mut self.ipv4_ids);
                    }
                    true
                }
                Some(0) => true,
                None => false,
            },
        }
    }

    #[inline]
    fn flush(&mut self, _now: Instant) -> Result<(), IoError> {
        if self.tx_pending() == 0 {
            return Ok(());
        }
        self.tx_batches += 1;
        match &mut self.tx {
            FrameTx::Single(b) => self.sock.send_batch(b),
            FrameTx::Super(p) => self.sock.send_gso_batch(p),
        }
        .map(|_| ())
    }

    // Out of line: the endpoint's poll inlines the UDP backend's receive syscall, and a frame
    // backend's receive (its ring or its batch) would only grow the poll beside it.
    #[inline(never)]
    fn receive(
        &mut self,
        _now: Instant,
        mut each: impl FnMut(RxMeta, &[u8]),
    ) -> Result<usize, IoError> {
        if let Some(ring) = self.sock.rx_ring() {
            let mut got = 0;
            while got < self.batch {
                let Some(f) = ring.peek() else { break };
                got += 1;
                each(frame_meta(&f), f.data);
                ring.release();
            }
            return Ok(got);
        }
        let n = self.sock.recv_batch(&mut self.rx)?;
        if self.sock.vnet_hdr() {
            // virtio_net_hdr first: a super-frame is split into its packets, in place.
            let mut packets = 0;
            for i in 0..n {
                let (buf, pkttype, ifindex, truncated) = self.rx.frame_mut(i);
                let meta = RxMeta::Frame {
                    pkttype,
                    ifindex,
                    truncated,
                };
                packets += split_frames(buf, |f| each(meta, f));
            }
            return Ok(packets);
        }
        for i in 0..n {
            let f = self.rx.frame(i);
            each(frame_meta(&f), f.data);
        }
        Ok(n)
    }
}

impl Backend for PacketDevice {
    type Plan = PacketConfig;

    fn open(dev: &NetDev, cfg: &PacketConfig) -> Result<PacketDevice, IoError> {
        Ok(PacketDevice::new(PacketSocket::open(dev, cfg)?, cfg))
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn accept_only(&mut self, qps: QpRange) -> Result<(), IoError> {
        let dev = &self.sock.dev;
        attach_filter(self.sock.fd.as_raw_fd(), &qp_filter(self.sock.udp_port, qps)).map_err(
            |source| IoError::Os {
                context: format!(
                    "SO_ATTACH_FILTER (the filter of QPNs {:#08x}.., {} of them) on {dev}",
                    qps.first, qps.count
                ),
                source,
            },
        )
    }

    fn wait_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // A ring's frames make the socket readable as recvmmsg's do.
        std::os::fd::AsFd::as_fd(&self.sock.fd)
    }

    fn takes_super_frames(&self) -> bool {
        self.sock.vnet_hdr()
    }

    fn gso_sending(&self) -> bool {
        matches!(&self.tx, FrameTx::Super(p) if p.segmenting())
    }

    fn stop_gso(&mut self) -> bool {
        match &mut self.tx {
            FrameTx::Super(p) => p.stop_segments(),
            FrameTx::Single(_) => false,
        }
    }

    fn tx_batches(&self) -> u64 {
        self.tx_batches
    }

    fn describe(&self) -> String {
        let ifindex = self.sock.ifindex();
        let mut line = format!("AF_PACKET on ifindex {ifindex}");
        // RoCE v1, and v2 with --no-gso, move alike: the same words say so.
        match &self.sock.ring {
            _ if self.sock.vnet_hdr() => {}
            Some(ring) => {
                line += &format!(", single frames, a receive ring of {} frames", ring.frames())
            }
            None => line += &format!(", single frames in batches of {}", self.batch),
        }
        if self.sock.vnet_hdr() {
            line += ", virtio_net_hdr super-frames: ";
            line += if self.gso_sending() {
                "up to 64 packets per frame sent, split on receipt (--no-gso sends each)"
            } else {
                "1 packet per frame sent (the peer needs single frames), split on receipt"
            };
        }
        if let Some(guard) = &self.sock.kernel_rx {
            line += "; ";
            line += &guard.describe();
        }
        line
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_frames::{eth, ipv4_udp, ipv6_udp, run_bpf as run};
    use super::*;

    /// The AF_PACKET device on `lo` as `cfg` says, or `None` without CAP_NET_RAW (nothing to test).
    fn on_lo(cfg: &PacketConfig) -> Option<PacketDevice> {
        let lo = NetDev::by_name("lo").unwrap();
        match PacketDevice::open(&lo, cfg) {
            Err(IoError::NeedCapNetRaw { .. }) => None,
            other => Some(other.unwrap()),
        }
    }

    #[test]
    fn the_device_says_what_it_is_and_sends_single_frames_once_asked() {
        let ring = PacketConfig {
            rx_ring_frames: 64,
            ..PacketConfig::default()
        };
        let Some(mut d) = on_lo(&ring) else { return };
        let ifindex = d.sock.ifindex();
        assert_eq!(d.local_addr(), None);
        assert!(!d.takes_super_frames() && !d.gso_sending() && !d.stop_gso());
        // 64 frames asked for, as many as fill the ring's last block given.
        let frames = d.sock.ring.as_ref().map_or(0, RxRing::frames);
        assert!((64..128).contains(&frames), "{frames}");
        assert_eq!(
            d.describe(),
            format!("AF_PACKET on ifindex {ifindex}, single frames, a receive ring of {frames} frames")
        );
        let Some(d) = on_lo(&PacketConfig::default()) else {
            return;
        };
        assert_eq!(
            d.describe(),
            format!("AF_PACKET on ifindex {ifindex}, single frames in batches of 64")
        );
        let vnet = PacketConfig {
            vnet_hdr: true,
            ..PacketConfig::default()
        };
        let Some(mut d) = on_lo(&vnet) else { return };
        if !d.sock.vnet_hdr() {
            return; // a kernel before 6.2 gets single frames
        }
        assert!(d.takes_super_frames() && d.gso_sending());
        assert_eq!(
            d.describe(),
            format!(
                "AF_PACKET on ifindex {ifindex}, virtio_net_hdr super-frames: up to 64 packets per frame sent, split on receipt (--no-gso sends each)"
            )
        );
        assert!(d.stop_gso() && !d.stop_gso() && !d.gso_sending());
        assert!(
            d.takes_super_frames(),
            "receiving is not the peer's business"
        );
        assert!(
            d.describe().ends_with(
                "1 packet per frame sent (the peer needs single frames), split on receipt"
            )
        );
    }

    /// Where the test frames go: the classic filter looks at no address.
    const OURS: [u8; 4] = [10, 77, 0, 1];

    #[test]
    fn filter_passes_roce_and_nothing_else() {
        let prog = roce_filter(4791);
        assert_eq!(prog.len(), 18);
        let pass = |f: &[u8]| run(&prog, f) != 0;
        assert!(pass(&eth(0x8915, &[0x60; 60])), "RoCE v1");
        assert!(
            pass(&ipv4_udp(OURS, 5, 0x4000, 17, 4791)),
            "RoCE v2 / IPv4 with DF"
        );
        assert!(
            pass(&ipv4_udp(OURS, 6, 0, 17, 4791)),
            "IPv4 with options: port found after IHL"
        );
        assert!(pass(&ipv6_udp("fd77::1", 17, 4791)), "RoCE v2 / IPv6");
        assert!(!pass(&ipv4_udp(OURS, 5, 0x4000, 17, 4792)), "other UDP port");
        assert!(!pass(&ipv4_udp(OURS, 5, 0, 6, 4791)), "TCP to 4791");
        assert!(
            !pass(&ipv4_udp(OURS, 5, 0x2000 | 0x10, 17, 4791)),
            "non-first fragment"
        );
        assert!(!pass(&ipv6_udp("fd77::1", 6, 4791)), "IPv6 TCP");
        assert!(!pass(&ipv6_udp("fd77::1", 17, 53)), "IPv6 other port");
        assert!(!pass(&eth(0x0806, &[0; 28])), "ARP");
        let mut pause = [0u8; 60];
        crate::wire::pfc::PauseRepr::priority(crate::wire::MacAddr([2, 0, 0, 0, 0, 9]), 3, 9)
            .emit(&mut pause);
        assert!(pass(&pause), "PFC pause, which the endpoint honours");
        assert!(!pass(&eth(0x88cc, &[0; 46])), "LLDP");
        assert!(!pass(&eth(0x0800, &[0x45])), "truncated IPv4");
        assert!(!pass(&[0u8; 10]), "runt frame");
        // The port is a parameter: tests use a free port instead of 4791.
        assert!(run(&roce_filter(1234), &ipv4_udp(OURS, 5, 0, 17, 1234)) != 0);
        assert!(!pass(&ipv4_udp(OURS, 5, 0, 17, 1234)));
    }
}
