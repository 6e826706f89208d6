//! The link-facing device every backend of the soft transport is: the UDP socket, the AF_PACKET
//! socket and the simulated link all move finished RoCE packets through [`Device`], so one impairer
//! ([`super::fault::Impaired`]) wraps any of them, as smoltcp's `phy::FaultInjector` wraps any
//! `phy::Device`.
//!
//! A device works per RoCE packet, whatever it does below: the UDP backend packs runs of packets into
//! GSO super-datagrams and splits GRO datagrams back into packets, so whatever wraps it still sees,
//! drops or delays one RoCE packet at a time, and the fast path stays the fast path.

use super::IoError;
use crate::transport::soft::rc::Instant;

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

    /// When the device must be called again even if nothing else happens (packets it holds back),
    /// if ever.
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}
