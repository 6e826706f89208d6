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

use std::ptr;

use super::slots::Slots;

pub use rx::RxBatch;
pub(crate) use rx::{RxDatagram, RxFrame};
pub use tx::TxBatch;
pub(crate) use tx::{send_failed, send_queued, sendto_nowait};

/// `UDP_GRO` (include/uapi/linux/udp.h), not in every libc version.
pub(crate) const UDP_GRO: libc::c_int = 104;

/// Control-message space: room for IPV6_PKTINFO (or IP_PKTINFO) and a UDP_GRO size, 8-aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(crate) struct CtrlBuf(pub(crate) [u8; 128]);

impl CtrlBuf {
    /// One empty control buffer per header of a batch.
    pub(crate) fn boxed(n: usize) -> Box<[CtrlBuf]> {
        vec![CtrlBuf([0; 128]); n].into_boxed_slice()
    }
}

/// One iovec per slot of `slots`, each `len` bytes long: the whole slot for a receive, 0 for a
/// transmit slot not yet written.
pub(crate) fn slot_iovecs(slots: &mut Slots, len: usize) -> Box<[libc::iovec]> {
    (0..slots.count())
        .map(|i| libc::iovec {
            iov_base: slots.slot_ptr(i).cast(),
            iov_len: len,
        })
        .collect()
}

/// `n` zeroed socket addresses, one per header of a batch.
pub(crate) fn zeroed_names(n: usize) -> Box<[libc::sockaddr_storage]> {
    // SAFETY: a plain kernel struct; all-zero is valid.
    let zero: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    vec![zero; n].into_boxed_slice()
}

/// The message headers of a batch: header `i` points at `iovs[i]`, and at `names[i]` and `ctrl[i]`
/// where the batch has them (a batch on a bound AF_PACKET socket sends to no address). The arrays
/// are boxed by their owner, so the pointers stay valid when the batch moves.
pub(crate) fn msg_headers(
    iovs: &mut [libc::iovec],
    mut names: Option<&mut [libc::sockaddr_storage]>,
    mut ctrl: Option<&mut [CtrlBuf]>,
) -> Box<[libc::mmsghdr]> {
    // SAFETY: a plain kernel struct; all-zero is valid.
    let zero: libc::mmsghdr = unsafe { std::mem::zeroed() };
    let mut hdrs = vec![zero; iovs.len()].into_boxed_slice();
    for (i, h) in hdrs.iter_mut().enumerate() {
        h.msg_hdr.msg_iov = &mut iovs[i];
        h.msg_hdr.msg_iovlen = 1;
        if let Some(names) = names.as_deref_mut() {
            h.msg_hdr.msg_name = ptr::from_mut(&mut names[i]).cast();
        }
        if let Some(ctrl) = ctrl.as_deref_mut() {
            h.msg_hdr.msg_control = ctrl[i].0.as_mut_ptr().cast();
        }
    }
    hdrs
}
