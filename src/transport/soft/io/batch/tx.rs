//! The transmit batch: packets written straight into preallocated slots, then sent with as few
//! `sendmmsg` calls as the kernel allows.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::{msg_headers, slot_iovecs, zeroed_names};
use crate::transport::soft::io::slots::Slots;
use crate::transport::soft::io::sockaddr;

/// Preallocated state for `sendmmsg`: packets are written straight into slots, then sent at once.
pub struct TxBatch {
    slots: Slots,
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[libc::sockaddr_storage]>,
    queued: usize,
    sent: usize,
}

// SAFETY: as for RxBatch, the header pointers only point into this struct's own heap arrays.
unsafe impl Send for TxBatch {}

impl TxBatch {
    /// Room for `batch` packets of up to `slot_len` bytes.
    pub fn new(batch: usize, slot_len: usize) -> TxBatch {
        let mut slots = Slots::new(batch, slot_len);
        let mut iovs = slot_iovecs(&mut slots, 0);
        let mut names = zeroed_names(batch);
        let hdrs = msg_headers(&mut iovs, Some(&mut names), None);
        TxBatch {
            slots,
            hdrs,
            iovs,
            names,
            queued: 0,
            sent: 0,
        }
    }

    /// Packets queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.queued - self.sent
    }

    /// True when no slot is free: send before pushing more.
    pub fn is_full(&self) -> bool {
        self.queued == self.slots.count()
    }

    /// Bytes one slot holds.
    pub fn slot_len(&self) -> usize {
        self.slots.slot_len()
    }

    /// Queues one UDP datagram to `dst`: `fill` writes it into the slot it is given and returns its
    /// length. Returns false (and does not call `fill`) when the batch is full.
    pub fn push(&mut self, dst: SocketAddr, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        self.try_push(dst, |b| Some(fill(b)))
    }

    /// Like [`push`](Self::push), but `fill` may decline by returning `None` (nothing to send), in
    /// which case nothing is queued. Returns true when a datagram was queued.
    pub fn try_push(
        &mut self,
        dst: SocketAddr,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let Some(i) = self.fill_next(fill) else {
            return false;
        };
        self.hdrs[i].msg_hdr.msg_namelen = sockaddr::encode(dst, &mut self.names[i]);
        true
    }

    /// Queues one whole link-layer frame for an AF_PACKET socket, which sends it on the interface it
    /// is bound to. Returns false when the batch is full.
    pub fn push_frame(&mut self, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        self.try_push_frame(|b| Some(fill(b)))
    }

    /// Like [`push_frame`](Self::push_frame), but `fill` may decline by returning `None`.
    pub fn try_push_frame(&mut self, fill: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        let Some(i) = self.fill_next(fill) else {
            return false;
        };
        // No address: the kernel sends on the bound interface with the bound protocol.
        self.hdrs[i].msg_hdr.msg_namelen = 0;
        true
    }

    /// The bytes of the most recently queued, unsent packet (for deliberate corruption).
    pub fn last_mut(&mut self) -> Option<&mut [u8]> {
        let i = self.queued.checked_sub(1).filter(|&i| i >= self.sent)?;
        let iov = self.iovs[i];
        // SAFETY: iov describes `iov_len` initialised bytes of one of our slots (after a swap, maybe
        // not slot i), borrowed mutably through &mut self.
        Some(unsafe { std::slice::from_raw_parts_mut(iov.iov_base as *mut u8, iov.iov_len) })
    }

    /// Removes the most recently queued, unsent packet (a deliberate loss). False if there is none.
    pub fn drop_last(&mut self) -> bool {
        if self.queued > self.sent {
            self.queued -= 1;
            true
        } else {
            false
        }
    }

    /// Queues a second copy of the most recently queued packet, to the same address (a deliberate
    /// duplicate). False when there is none or the batch is full.
    pub fn duplicate_last(&mut self) -> bool {
        if self.queued <= self.sent || self.is_full() {
            return false;
        }
        let (src, dst) = (self.queued - 1, self.queued);
        let len = self.iovs[src].iov_len;
        // SAFETY: iovs[src] and iovs[dst] point at two distinct slots (see fill_next), each at least
        // `len` bytes long.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.iovs[src].iov_base as *const u8,
                self.iovs[dst].iov_base as *mut u8,
                len,
            )
        };
        self.iovs[dst].iov_len = len;
        self.names[dst] = self.names[src];
        self.hdrs[dst].msg_hdr.msg_namelen = self.hdrs[src].msg_hdr.msg_namelen;
        self.queued += 1;
        true
    }

    /// Swaps the two most recently queued, unsent packets (a deliberate reordering) without copying
    /// packet bytes: the iovecs and addresses trade places. False when fewer than two are queued.
    pub fn swap_last_two(&mut self) -> bool {
        if self.queued < self.sent + 2 {
            return false;
        }
        let (i, j) = (self.queued - 2, self.queued - 1);
        // The headers keep pointing at iovs[i] and iovs[j]; swapping their contents swaps the data
        // (and keeps the iovecs a permutation of the slots, which fill_next relies on).
        self.iovs.swap(i, j);
        self.names.swap(i, j);
        let (ni, nj) = (
            self.hdrs[i].msg_hdr.msg_namelen,
            self.hdrs[j].msg_hdr.msg_namelen,
        );
        self.hdrs[i].msg_hdr.msg_namelen = nj;
        self.hdrs[j].msg_hdr.msg_namelen = ni;
        true
    }

    fn fill_next(&mut self, fill: impl FnOnce(&mut [u8]) -> Option<usize>) -> Option<usize> {
        if self.is_full() {
            return None;
        }
        let i = self.queued;
        // Write into the slot iovs[i] points at: swaps permute the iovecs, so the slots they point at
        // are always all distinct, and the one at a free index is never a queued packet's.
        let slot_len = self.slots.slot_len();
        // SAFETY: iov_base is the start of one of our slots, slot_len bytes long, and no other live
        // reference to that slot exists while &mut self is held.
        let slot =
            unsafe { std::slice::from_raw_parts_mut(self.iovs[i].iov_base as *mut u8, slot_len) };
        let len = fill(slot)?;
        assert!(len <= slot_len, "packet of {len} bytes overflows its slot");
        self.iovs[i].iov_len = len;
        self.queued += 1;
        Some(i)
    }

    /// Sends what is queued with as few non-blocking `sendmmsg` calls as the kernel allows; what it
    /// did not take stays queued for the next call. Returns how many went out now.
    pub(crate) fn send(&mut self, fd: RawFd) -> io::Result<usize> {
        let sent_now = send_queued(fd, &mut self.hdrs, &mut self.sent, self.queued)?;
        if self.sent == self.queued {
            self.sent = 0;
            self.queued = 0;
        }
        Ok(sent_now)
    }
}

/// Sends headers `sent..queued` with as few non-blocking `sendmmsg` calls (`sendmsg` for one) as the kernel allows,
/// advancing `sent`; what the kernel did not take stays for the next call. Returns how many went out.
pub(crate) fn send_queued(
    fd: RawFd,
    hdrs: &mut [libc::mmsghdr],
    sent: &mut usize,
    queued: usize,
) -> io::Result<usize> {
    debug_assert!(queued <= hdrs.len());
    let mut sent_now = 0;
    while *sent < queued {
        let pending = queued - *sent;
        let sent_here = if pending == 1 {
            send_one(fd, &hdrs[*sent].msg_hdr).map(|_| 1)
        } else {
            // SAFETY: headers sent..queued lie within `hdrs` and were filled by the caller.
            let rc = unsafe {
                libc::sendmmsg(
                    fd,
                    hdrs.as_mut_ptr().add(*sent),
                    pending as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            libc_result(rc as isize)
        };
        let rc = match sent_here {
            Ok(n) => n,
            Err(err) => {
                if send_failed(err)? {
                    continue;
                }
                break;
            }
        };
        *sent += rc;
        sent_now += rc;
    }
    Ok(sent_now)
}

/// Sends the one datagram header `m` describes, without blocking: the bytes sent, or the error.
///
/// One datagram (a ping-pong's whole turn): plain sendmsg, which the kernel enters and leaves with
/// less work than sendmmsg's loop over a vector of one, or sendto for one buffer and no control
/// message ([`send_buffer`]), which spares it the header and iovec copies too.
#[inline(always)]
fn send_one(fd: RawFd, m: &libc::msghdr) -> io::Result<usize> {
    if m.msg_iovlen == 1 && m.msg_controllen == 0 {
        send_buffer(fd, m)
    } else {
        // SAFETY: `m` was filled by the caller and points into the batch's live arrays.
        libc_result(unsafe { libc::sendmsg(fd, m, libc::MSG_DONTWAIT) })
    }
}

/// A libc send's return value as a count, or the error errno holds.
#[inline(always)]
fn libc_result(rc: isize) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Sends the first buffer of header `m` to its address with sendto, without blocking (any control
/// message unsent): [`send_one`] of a header with one iovec and no control message.
#[inline(always)]
fn send_buffer(fd: RawFd, m: &libc::msghdr) -> io::Result<usize> {
    // SAFETY: the header's iovec was filled by the caller and points into the batch's live arrays.
    let iov = unsafe { &*m.msg_iov };
    // No address (a bound AF_PACKET socket) must be a null one: sendto passes any other on, where
    // sendmsg drops an empty one.
    let name = if m.msg_namelen == 0 {
        std::ptr::null()
    } else {
        m.msg_name as *const libc::sockaddr
    };
    sendto_nowait(fd, iov, name, m.msg_namelen)
}

/// `sendto(fd, buf.iov_base, buf.iov_len, MSG_DONTWAIT, name, namelen)`: the bytes sent, or the
/// error. On x86-64 Linux the system call itself, inline (as the receive's `recvmsg_nowait`):
/// libc's wrapper (a cancellation point) and its errno write cost more than the call's set-up, on
/// every send of a ping-pong.
#[inline(always)]
pub(crate) fn sendto_nowait(
    fd: RawFd,
    buf: &libc::iovec,
    name: *const libc::sockaddr,
    namelen: libc::socklen_t,
) -> io::Result<usize> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let rc: isize;
        // SAFETY: sendto(2) only reads: `iov_len` bytes at `iov_base` and `namelen` bytes at
        // `name` (or no address when null), which the caller's batch owns and keeps alive.
        // `syscall` clobbers rcx and r11 (declared) and returns in rax: the length, or -errno.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_sendto as isize => rc,
                in("rdi") fd as isize,
                in("rsi") buf.iov_base,
                in("rdx") buf.iov_len,
                in("r10") libc::MSG_DONTWAIT as isize,
                in("r8") name,
                in("r9") namelen as usize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, readonly),
            );
        }
        if rc < 0 {
            Err(io::Error::from_raw_os_error(-rc as i32))
        } else {
            Ok(rc as usize)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: as above, through libc.
        let rc = unsafe {
            libc::sendto(
                fd,
                buf.iov_base,
                buf.iov_len,
                libc::MSG_DONTWAIT,
                name,
                namelen,
            )
        };
        libc_result(rc)
    }
}

/// What a failed send's error means: `Ok(true)` to send again now, `Ok(false)` when the kernel
/// takes no more for now (what is queued stays), or the error. Out of line: the datapath's sends
/// succeed.
#[cold]
#[inline(never)]
pub(crate) fn send_failed(err: io::Error) -> io::Result<bool> {
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(false),
        // An ICMP error for an earlier datagram (the peer's port closed) is reported on this call
        // instead of sending; the next call sends. Retransmission handles loss.
        Some(libc::ECONNREFUSED) => Ok(true),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued_bytes(tx: &TxBatch) -> Vec<Vec<u8>> {
        (tx.sent..tx.queued)
            .map(|i| {
                let iov = tx.iovs[i];
                // SAFETY: a queued iovec describes iov_len initialised bytes of one of our slots.
                unsafe { std::slice::from_raw_parts(iov.iov_base as *const u8, iov.iov_len) }
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn swap_drop_and_duplicate_never_overwrite_a_queued_packet() {
        let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut tx = TxBatch::new(4, 64);
        let put = |tx: &mut TxBatch, b: u8| {
            assert!(tx.push(dst, |s| {
                s[..3].fill(b);
                3
            }))
        };
        put(&mut tx, 1);
        put(&mut tx, 2);
        assert!(tx.swap_last_two());
        assert_eq!(queued_bytes(&tx), vec![vec![2; 3], vec![1; 3]]);
        assert!(tx.drop_last());
        put(&mut tx, 3); // must not land in the slot that still holds packet 2
        assert!(tx.duplicate_last());
        assert_eq!(queued_bytes(&tx), vec![vec![2; 3], vec![3; 3], vec![3; 3]]);
        tx.last_mut().unwrap()[0] = 9;
        assert_eq!(queued_bytes(&tx)[2], vec![9, 3, 3]);
        assert_eq!(queued_bytes(&tx)[1], vec![3; 3]);
    }
}
