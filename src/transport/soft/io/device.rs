//! The link-facing device every backend of the soft transport is: the UDP backend (`UdpDevice`),
//! the AF_PACKET backend (`PacketDevice`) and the simulated link all move finished RoCE packets
//! through [`Device`], so one impairer ([`super::fault::Impaired`]) wraps any of them, as smoltcp's
//! `phy::FaultInjector` wraps any `phy::Device`.
//!
//! A device works per RoCE packet, whatever it does below: the UDP backend packs runs of packets into
//! GSO super-datagrams and splits GRO datagrams back into packets, so whatever wraps it still sees,
//! drops or delays one RoCE packet at a time, and the fast path stays the fast path.
//!
//! A socket backend is also a `Backend`: it opens from its part of the setup plan and answers what
//! the endpoint asks besides moving packets (its address, whether it takes super-frames, its GSO
//! state, its counters, how it describes itself), so the endpoint never asks which backend it holds.
//! Its part of the setup plan is a [`Plan`], which the backend makes itself from the [`PlanInput`]
//! the planner decided for every backend alike, so the planner never asks which backend it plans.

use crate::params::Marks;
use std::net::{IpAddr, SocketAddr};

use super::IoError;
use super::kernel_rx::KernelRx;
use crate::params::RoceVersion;
use crate::transport::soft::netdev::NetDev;
use crate::transport::soft::rc::Instant;
use crate::wire::Encapsulation;

/// What the setup planner decided before any backend is planned, the same for every backend: each
/// [`Plan`] is made from this alone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanInput<'a> {
    /// The interface.
    pub dev: &'a NetDev,
    /// RoCE v1, v2/IPv4 or v2/IPv6.
    pub encap: Encapsulation,
    /// Our IP address (RoCE v2; `None` for v1).
    pub local_ip: Option<IpAddr>,
    /// The address was asked for (`--bind` or `-x`), so it must not move.
    pub address_asked: bool,
    /// The UDP port of both sides (4791 except in tests).
    pub udp_port: u16,
    /// Packets per receive and transmit batch.
    pub batch: usize,
    /// Bytes of a packet slot: a whole frame around the largest packet of the path MTU.
    pub slot_len: usize,
    /// Super-datagrams or super-frames are wanted (`--no-gso` not given).
    pub gso: bool,
    /// With `gso`, merged receives are wanted too (bandwidth tests; a ping-pong has nothing to merge).
    pub gro: bool,
    /// Frames of a receive ring, for a backend that has one (0: none).
    pub rx_ring: usize,
    /// How a frame backend keeps the kernel's IP/UDP receive off the RoCE v2 frames it took.
    pub kernel_rx: KernelRx,
    /// `--tclass`, `-S`, `--flow_label`.
    pub marks: &'a Marks,
    /// CNPs' DSCP and 802.1Q priority.
    pub cnp_dscp: u8,
    /// CNPs' 802.1Q priority, when frames are tagged.
    pub cnp_prio: u8,
    /// Read each packet's ECN field (a UDP socket must then hand over a control message with every
    /// datagram; a frame carries it in its header).
    pub read_ce: bool,
}

/// A backend's part of the setup plan: how to open it, decided from the [`PlanInput`] before any
/// socket is opened, as a pure function.
pub(crate) trait Plan: Sized {
    /// Refuses a RoCE version the backend cannot carry; asked before the interface is looked up.
    fn check(version: RoceVersion) -> Result<(), IoError> {
        let _ = version;
        Ok(())
    }

    /// Plans the backend from what the planner decided.
    fn new(input: &PlanInput<'_>) -> Result<Self, IoError>;

    /// Whether packets will leave in super-datagrams or super-frames (told in the run header).
    fn gso(&self) -> bool;
}

/// What a received packet carries besides its bytes, for the receive checks: a socket backend hands
/// over either UDP payloads (the kernel read the headers) or whole frames (every header is there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxMeta {
    /// One RoCE v2 packet of a UDP datagram.
    Datagram {
        /// The sender.
        src: Option<SocketAddr>,
        /// Our address it was sent to.
        dst: Option<IpAddr>,
        /// The datagram was cut.
        truncated: bool,
        /// Its IPv4 TOS / IPv6 traffic class, when the socket reads it (0 otherwise).
        tclass: u8,
    },
    /// One link-layer frame.
    Frame {
        /// `PACKET_HOST`, `PACKET_OTHERHOST`, ...
        pkttype: u8,
        /// The interface it arrived on.
        ifindex: i32,
        /// The frame was cut.
        truncated: bool,
    },
}

/// A socket backend of the soft transport: a [`Device`] that sends to the peer's UDP address, or to
/// nothing when a frame carries its own (`Addr`), and hands over [`RxMeta`]. Every method is
/// answered by the backend itself: a new backend answers them all, and nothing above matches on
/// which backend it is.
pub(crate) trait Backend: Device<Addr = Option<SocketAddr>, Meta = RxMeta> + Sized {
    /// What opening it takes: its part of the setup plan (a [`Plan`], or the [`Nic`](super::Nic)'s
    /// plan of whichever backend was asked for).
    type Plan;

    /// Opens it on `dev` as `plan` says, with its batches.
    fn open(dev: &NetDev, plan: &Self::Plan) -> Result<Self, IoError>;

    /// The local UDP address when the kernel writes the headers (a UDP socket); `None` when every
    /// frame carries its own addresses.
    fn local_addr(&self) -> Option<SocketAddr>;

    /// Whether it receives super-datagrams or super-frames whole and splits them (so the peer may
    /// send them), rather than needing one packet per frame (an AF_PACKET receive ring).
    fn takes_super_frames(&self) -> bool;

    /// True while packets leave in GSO super-datagrams or super-frames.
    fn gso_sending(&self) -> bool;

    /// Sends one packet per datagram or frame from now on (a peer that cannot take super-frames);
    /// true when it was sending super-frames until now.
    fn stop_gso(&mut self) -> bool;

    /// Transmit syscalls so far (batches handed to the kernel).
    fn tx_batches(&self) -> u64;

    /// What it is, for the run header: socket, address or interface, and how it batches.
    fn describe(&self) -> String;

    /// Keeps out every RoCE frame not addressed to `qps` (a filter in the kernel, on a socket that
    /// sees the whole interface's frames: AF_PACKET); a socket the kernel already delivers only
    /// its own datagrams to (UDP) has nothing to do.
    fn accept_only(&mut self, qps: super::qp_filter::QpRange) -> Result<(), IoError>;

    /// The socket a side sleeps on under `-e` (`poll(2)` for POLLIN): the one it receives from.
    fn wait_fd(&self) -> std::os::fd::BorrowedFd<'_>;
}

/// A place finished RoCE packets leave through and arrive from, in batches.
///
/// Transmission is two steps: [`tx_push`](Device::tx_push) queues packets (the caller writes each in
/// place), [`flush`](Device::flush) hands what is queued to the link. Reception hands each packet of
/// one batch to a closure. Nothing here allocates per packet.
pub trait Device {
    /// Where a transmitted packet goes: the peer's UDP address, or nothing (a frame carries its own).
    type Addr: Copy;
    /// What a received packet carries besides its bytes, for the receive checks.
    type Meta: Copy;

    /// The largest packet a `fill` may write or a receive may hand over, in bytes.
    fn max_packet(&self) -> usize;

    /// True when no packet can be queued before a [`flush`](Device::flush).
    fn tx_full(&self) -> bool;

    /// Packets (or super-datagrams) queued and not sent yet.
    fn tx_pending(&self) -> usize;

    /// True when nothing is queued or held: the transmit checks' question, which a layer may answer
    /// without summing its counts.
    #[inline]
    fn tx_idle(&self) -> bool {
        self.tx_pending() == 0
    }

    /// Queues one packet to `to`: `fill` writes the finished packet into the buffer it is given (at
    /// least [`max_packet`](Device::max_packet) bytes) and returns its length, or declines with `None`,
    /// in which case nothing is queued. True when a packet was queued.
    fn tx_push(
        &mut self,
        now: Instant,
        to: Self::Addr,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool;

    /// Hands what is queued to the link; what the link does not take now stays queued.
    fn flush(&mut self, now: Instant) -> Result<(), IoError>;

    /// Receives one batch and calls `each` with every packet in it; returns how many packets came.
    fn receive(
        &mut self,
        now: Instant,
        each: impl FnMut(Self::Meta, &[u8]),
    ) -> Result<usize, IoError>;

    /// [`receive`](Device::receive) with `each` made by `make` only once something came: a receive
    /// that finds nothing (half of a ping-pong's) then builds no closure in memory.
    #[inline(always)]
    fn receive_lazy<F: FnMut(Self::Meta, &[u8])>(
        &mut self,
        now: Instant,
        make: impl FnOnce() -> F,
    ) -> Result<usize, IoError> {
        self.receive(now, make())
    }

    /// When the device must be called again even if nothing else happens (packets it holds back),
    /// if ever.
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}
