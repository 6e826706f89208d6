//! Batches of packets for `recvmmsg` / `sendmmsg`, shared by the UDP and AF_PACKET backends.
//!
//! Everything a batch syscall touches (headers, iovecs, addresses, control space, packet slots) is
//! allocated once, when the batch is made; each call then moves up to a whole batch with one
//! syscall and no allocation.

//!
//! `rx`: [`RxBatch`] for `recvmmsg`, handing out [`RxDatagram`]s (UDP) or [`RxFrame`]s
//! (AF_PACKET); `tx`: [`TxBatch`] for `sendmmsg`, which the impairment also edits in place.

mod rx;
mod tx;

pub use rx::{RxBatch, RxDatagram, RxFrame};
pub use tx::TxBatch;
pub(crate) use tx::send_queued;

/// `UDP_GRO` (include/uapi/linux/udp.h), not in every libc version.
pub(crate) const UDP_GRO: libc::c_int = 104;

/// Control-message space: room for IPV6_PKTINFO (or IP_PKTINFO) and a UDP_GRO size, 8-aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(crate) struct CtrlBuf(pub(crate) [u8; 128]);
