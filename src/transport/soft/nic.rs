//! The soft endpoint's network device: its backend (a UDP socket or an AF_PACKET socket) with the
//! receive and transmit batches, as one [`Device`] that moves one RoCE packet at a time.
//!
//! On UDP with GSO, consecutive packets to one peer share a super-datagram; segment k of an IPv4 one
//! leaves with IP ID k, so its ICRC (written for ID 0) is moved here. With GRO, a received datagram is
//! split back into its packets. Whatever wraps the device (the impairer) therefore sees single
//! packets, and the fast path stays on.

use std::net::{IpAddr, SocketAddr};

use super::backend::Backend;
use super::egress::move_icrc_to_ipv4_id;
use super::ingress::gro_packets;
use super::io::IoError;
use super::io::batch::{RxBatch, TxBatch};
use super::io::device::Device;
use super::io::gso::GsoTxBatch;
use super::io::packet_gso::{PacketGsoTx, split_frames};
use super::rc::Instant;
use crate::wire::Ipv4IdCache;

/// What a received packet carries besides its bytes.
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
    },
    /// One AF_PACKET frame.
    Frame {
        /// `PACKET_HOST`, `PACKET_OTHERHOST`, ...
        pkttype: u8,
        /// The interface it arrived on.
        ifindex: i32,
        /// The frame was cut.
        truncated: bool,
    },
}

/// The backend and its batches.
pub(crate) struct Nic {
    backend: Backend,
    rx: RxBatch,
    /// One packet per datagram (UDP) or frame (AF_PACKET).
    plain: TxBatch,
    /// UDP segmentation offload, when on (then `plain` stays unused).
    gso: Option<GsoTxBatch>,
    /// AF_PACKET with `virtio_net_hdr` super-frames (RoCE v2), when on (then `plain` stays unused).
    pgso: Option<PacketGsoTx>,
    /// How the IPv4 ID moves the ICRC, per packet length, for GSO segments.
    ipv4_ids: Ipv4IdCache,
    /// Packets per receive batch.
    batch: usize,
    /// Transmit syscalls (batches handed to the kernel).
    pub tx_batches: u64,
}

impl Nic {
    /// A device on `backend` with batches of `batch` packets: transmit slots of `slot_len` bytes,
    /// receive slots of `rx_slot`, and GSO when `gso`.
    pub fn new(backend: Backend, batch: usize, slot_len: usize, rx_slot: usize, gso: bool) -> Nic {
        // An AF_PACKET socket with virtio_net_hdr takes every frame through the super-frame batch.
        let vnet = matches!(&backend, Backend::Packet(s) if s.vnet_hdr());
        Nic {
            backend,
            rx: RxBatch::new(batch, rx_slot),
            plain: TxBatch::new(if vnet { 1 } else { batch }, slot_len),
            gso: (gso && !vnet).then(|| GsoTxBatch::new(batch.min(32), slot_len)),
            pgso: vnet.then(|| PacketGsoTx::new(batch.min(32), slot_len)),
            ipv4_ids: Ipv4IdCache::new(),
            batch,
            tx_batches: 0,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// True while packets leave in GSO super-datagrams or super-frames.
    pub fn gso_sending(&self) -> bool {
        self.gso.is_some() || self.pgso.as_ref().is_some_and(|p| p.segmenting())
    }

    /// Sends one packet per datagram from now on (a peer that cannot take super-datagrams); true
    /// when GSO was on.
    pub fn stop_gso(&mut self) -> bool {
        let frames = self.pgso.as_mut().is_some_and(|p| p.stop_segments());
        self.gso.take().is_some() || frames
    }

    /// Whether this side takes super-frames whole (an AF_PACKET socket with `virtio_net_hdr`, or
    /// a UDP socket) rather than needing one packet per frame (an AF_PACKET receive ring).
    pub fn takes_super_frames(&self) -> bool {
        match &self.backend {
            Backend::Udp(_) => true,
            Backend::Packet(s) => s.vnet_hdr(),
        }
    }
}

impl Device for Nic {
    /// The peer's UDP address; `None` for a frame, which carries its own addresses.
    type Addr = Option<SocketAddr>;
    type Meta = RxMeta;

    fn max_packet(&self) -> usize {
        self.plain.slot_len()
    }

    #[inline]
    fn tx_full(&self) -> bool {
        if let Some(p) = &self.pgso {
            return p.is_full();
        }
        self.gso
            .as_ref()
            .map_or(self.plain.is_full(), |g| g.is_full())
    }

    #[inline]
    fn tx_pending(&self) -> usize {
        if let Some(p) = &self.pgso {
            return p.pending();
        }
        self.gso
            .as_ref()
            .map_or(self.plain.pending(), |g| g.pending())
    }

    #[inline]
    fn tx_push(
        &mut self,
        _now: Instant,
        to: Option<SocketAddr>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        match (to, self.gso.as_mut()) {
            (Some(dst), Some(g)) => match g.try_push(dst, fill) {
                // The kernel gives segment k of an IPv4 super-datagram ID k (the first keeps the 0
                // every ICRC is computed for): move its ICRC there.
                Some(k @ 1..) if dst.is_ipv4() => {
                    move_icrc_to_ipv4_id(g.last_packet_mut(), k, &mut self.ipv4_ids);
                    true
                }
                Some(_) => true,
                None => false,
            },
            (Some(dst), None) => self.plain.try_push(dst, fill),
            (None, _) => match self.pgso.as_mut() {
                // As for UDP: segment k of an IPv4 super-frame leaves with IP ID k.
                Some(p) => match p.try_push(fill) {
                    Some(k @ 1..) => {
                        if let (pkt, true) = p.last_packet_mut() {
                            move_icrc_to_ipv4_id(pkt, k, &mut self.ipv4_ids);
                        }
                        true
                    }
                    Some(0) => true,
                    None => false,
                },
                None => self.plain.try_push_frame(fill),
            },
        }
    }

    fn flush(&mut self, _now: Instant) -> Result<(), IoError> {
        if self.tx_pending() == 0 {
            return Ok(());
        }
        self.tx_batches += 1;
        match (&self.backend, self.gso.as_mut()) {
            (Backend::Udp(s), Some(g)) => s.send_gso_batch(g),
            (Backend::Udp(s), None) => s.send_batch(&mut self.plain),
            (Backend::Packet(s), _) => match self.pgso.as_mut() {
                Some(p) => s.send_gso_batch(p),
                None => s.send_batch(&mut self.plain),
            },
        }
        .map(|_| ())
    }

    #[inline]
    fn receive(
        &mut self,
        _now: Instant,
        mut each: impl FnMut(RxMeta, &[u8]),
    ) -> Result<usize, IoError> {
        if let Backend::Packet(sock) = &mut self.backend
            && let Some(ring) = sock.rx_ring()
        {
            let mut got = 0;
            while got < self.batch {
                let Some(f) = ring.peek() else { break };
                got += 1;
                let meta = RxMeta::Frame {
                    pkttype: f.pkttype,
                    ifindex: f.ifindex,
                    truncated: f.truncated,
                };
                each(meta, f.data);
                ring.release();
            }
            return Ok(got);
        }
        let n = match &self.backend {
            Backend::Udp(s) => s.recv_batch(&mut self.rx),
            Backend::Packet(s) => s.recv_batch(&mut self.rx),
        }?;
        if self.pgso.is_some() {
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
        let mut packets = 0;
        for i in 0..n {
            match &self.backend {
                Backend::Udp(_) => {
                    for one in gro_packets(self.rx.datagram(i)) {
                        packets += 1;
                        let meta = RxMeta::Datagram {
                            src: one.src,
                            dst: one.dst,
                            truncated: one.truncated,
                        };
                        each(meta, one.data);
                    }
                }
                Backend::Packet(_) => {
                    packets += 1;
                    let f = self.rx.frame(i);
                    let meta = RxMeta::Frame {
                        pkttype: f.pkttype,
                        ifindex: f.ifindex,
                        truncated: f.truncated,
                    };
                    each(meta, f.data);
                }
            }
        }
        Ok(packets)
    }
}

#[cfg(test)]
mod tests;
