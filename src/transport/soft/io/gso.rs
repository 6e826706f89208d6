//! Transmit batches with UDP generic segmentation offload: many RoCE packets per datagram send.
//!
//! A [`GsoTxBatch`] holds up to `entries` super-datagrams. Consecutive packets to the same peer with
//! the same length are appended to one entry, which `sendmmsg` hands to the kernel with a
//! `UDP_SEGMENT` control message; the kernel (or the NIC) cuts it back into the individual
//! datagrams. A 64 KiB RDMA WRITE at MTU 4096 thus costs two sends (FIRST, then MIDDLE…LAST) instead
//! of sixteen. Only the last segment of an entry may be shorter, so a shorter packet closes its entry.
//!
//! What it changes on the wire (see `SoftConfig::gso`): the kernel refuses UDP_SEGMENT on sockets
//! without checksums, so datagrams carry a UDP checksum (masked by the ICRC, so still valid RoCE);
//! where the super-datagram is cut up (in software before a device without UDP segmentation, or by a
//! NIC), IPv4 segment k gets IP ID k (the first keeps the 0 of an unconnected DF socket), which the
//! ICRC covers: [`GsoTxBatch::try_push`] says which segment a packet became, so its ICRC can be
//! computed for that ID. Captures taken on the sending host (lo, veth) show the super-datagram, not
//! the packets. IPv6 has no ID.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::batch::{
    CtrlBuf, msg_headers, send_failed, send_queued, sendto_nowait, slot_iovecs, zeroed_names,
};
use super::slots::Slots;
use super::sockaddr;

/// `UDP_SEGMENT` (include/uapi/linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;
/// Segments per super-datagram the kernel accepts (UDP_MAX_SEGMENTS in older kernels).
const MAX_SEGMENTS: u16 = 64;
/// Bytes of UDP payload per super-datagram: below the 65507 an IPv4 datagram can carry.
const MAX_ENTRY_BYTES: usize = 65_000;

/// Preallocated super-datagrams for `sendmmsg` with `UDP_SEGMENT`.
pub struct GsoTxBatch {
    mem: Slots,
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[libc::sockaddr_storage]>,
    ctrl: Box<[CtrlBuf]>,
    /// Each closed entry's segment size and number of segments, for its UDP_SEGMENT message.
    seg: Box<[usize]>,
    segs: Box<[u16]>,
    /// The last queued entry while packets may still join it (kept here, not in the arrays, so
    /// that appending a packet reads and writes one small struct; its header, iovec and segments
    /// are written when it closes, and a lone packet's send needs none of them); `None` after
    /// every send.
    open: Option<Open>,
    /// Where the last queued packet is: (entry, offset, length).
    last_packet: (usize, usize, usize),
    max_packet: usize,
    queued: usize,
    sent: usize,
    packets: usize,
}

/// The entry a run of packets is being appended to.
#[derive(Clone, Copy)]
struct Open {
    /// Its index.
    e: usize,
    /// The peer its packets go to.
    dst: SocketAddr,
    /// The length of its segments (the first packet's).
    seg: usize,
    /// Segments in it so far.
    segs: u16,
    /// Its bytes so far.
    len: usize,
}

// SAFETY: the header pointers point only into this struct's own heap arrays, which move with it.
unsafe impl Send for GsoTxBatch {}

impl GsoTxBatch {
    /// Room for `entries` super-datagrams; `max_packet` is the largest single packet `fill` writes.
    pub fn new(entries: usize, max_packet: usize) -> GsoTxBatch {
        assert!(max_packet <= MAX_ENTRY_BYTES);
        let mut mem = Slots::new(entries, MAX_ENTRY_BYTES);
        let mut iovs = slot_iovecs(&mut mem, 0);
        let mut names = zeroed_names(entries);
        let mut ctrl = CtrlBuf::boxed(entries);
        let hdrs = msg_headers(&mut iovs, Some(&mut names), Some(&mut ctrl));
        GsoTxBatch {
            mem,
            hdrs,
            iovs,
            names,
            ctrl,
            seg: vec![0; entries].into_boxed_slice(),
            segs: vec![0; entries].into_boxed_slice(),
            open: None,
            last_packet: (0, 0, 0),
            max_packet,
            queued: 0,
            sent: 0,
            packets: 0,
        }
    }

    /// True when no packet can be queued before a send: every entry is in use.
    pub fn is_full(&self) -> bool {
        self.queued == self.hdrs.len()
    }

    /// Super-datagrams queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.queued - self.sent
    }

    /// True when every super-datagram queued was sent: one compare, no count computed.
    #[inline(always)]
    pub fn is_idle(&self) -> bool {
        self.queued == self.sent
    }

    /// Packets queued since the last complete send.
    pub fn packets(&self) -> usize {
        self.packets
    }

    /// Queues one packet to `dst`: `fill` writes it (at most `max_packet` bytes) into the buffer it
    /// is given and returns its length, or declines with `None`. Returns the packet's segment index
    /// in its super-datagram (0 for the first), or `None` when nothing was queued.
    #[inline]
    pub fn try_push(
        &mut self,
        dst: SocketAddr,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Option<u16> {
        if self.is_full() {
            return None;
        }
        let max = self.max_packet;
        // Append to the open entry when it is for this peer and has room; a spare entry is
        // guaranteed (not full), in case the packet turns out longer than the entry's segments.
        if let Some(o) = &mut self.open
            && o.segs < MAX_SEGMENTS
            && o.len + max <= MAX_ENTRY_BYTES
            && o.dst == dst
        {
            let at = o.len;
            let len = fill(self.mem.part_mut(o.e, at, max))?;
            assert!(len <= max, "packet of {len} bytes exceeds max_packet {max}");
            if len <= o.seg {
                let (e, index) = (o.e, o.segs);
                o.len += len;
                o.segs += 1;
                // A shorter segment must be the last one.
                if len < o.seg {
                    self.close_open();
                }
                self.packets += 1;
                self.last_packet = (e, at, len);
                return Some(index);
            }
            // Longer than the entry's segments: move it to a fresh entry (the spare one).
            let (last, e) = (o.e, self.queued);
            let (src_ptr, dst_ptr) = (self.mem.slot_ptr(last), self.mem.slot_ptr(e));
            // SAFETY: two distinct slots of our pool; `at + len` stays within slot `last`.
            unsafe { std::ptr::copy_nonoverlapping(src_ptr.add(at), dst_ptr, len) };
            self.open_entry(e, dst, len);
            return Some(0);
        }
        let e = self.queued;
        let len = fill(self.mem.part_mut(e, 0, max))?;
        assert!(len <= max, "packet of {len} bytes exceeds max_packet {max}");
        self.open_entry(e, dst, len);
        Some(0)
    }

    /// The packet the last successful [`try_push`](Self::try_push) queued, to finish in place.
    /// Always inlined: left to the compiler it went out of line with unrelated changes here, a
    /// call for every segment after a super-datagram's first (+150 instructions a 64 KiB message).
    #[inline(always)]
    pub fn last_packet_mut(&mut self) -> &mut [u8] {
        let (e, at, len) = self.last_packet;
        &mut self.mem.slot_mut(e)[at..at + len]
    }

    /// Opens entry `e` with its first packet (`len` bytes, to `dst`), closing the one open (to
    /// another peer, full, or left for a longer packet: it takes no more). Only `open` holds
    /// what the new entry is until [`close_open`](Self::close_open) writes its header, iovec and
    /// segments; a lone packet (a ping-pong's turn) is sent from `open` alone.
    #[inline(never)]
    fn open_entry(&mut self, e: usize, dst: SocketAddr, len: usize) {
        // Closed last, a tail call that keeps none of the arguments across it.
        let closing = self.open.take();
        self.queued += 1;
        self.open = Some(Open {
            e,
            dst,
            seg: len,
            segs: 1,
            len,
        });
        self.packets += 1;
        self.last_packet = (e, 0, len);
        if let Some(o) = closing {
            self.close(o);
        }
    }

    /// Writes the open entry (if any) into its header, iovec and segment counts, for
    /// `send_entries`; nothing more joins it.
    #[inline]
    fn close_open(&mut self) {
        if let Some(o) = self.open.take() {
            self.close(o);
        }
    }

    /// [`close_open`](Self::close_open) of entry `o`, taken out of `open`.
    fn close(&mut self, o: Open) {
        self.iovs[o.e].iov_len = o.len;
        self.seg[o.e] = o.seg;
        self.segs[o.e] = o.segs;
        self.hdrs[o.e].msg_hdr.msg_namelen = sockaddr::encode(o.dst, &mut self.names[o.e]);
    }

    /// Sends the queued super-datagrams with as few `sendmmsg` calls as the kernel allows; what it
    /// does not take stays queued. Returns how many super-datagrams went out. Inlined into the
    /// transmission's flush: a ping-pong's turn is one lone entry, for which a call costs more than
    /// its send.
    #[inline(always)]
    pub(crate) fn send(&mut self, fd: RawFd) -> io::Result<usize> {
        // One packet since the last complete send is entry 0's only segment, still open unless an
        // earlier send of it failed.
        if self.packets == 1
            && let Some(o) = &self.open
        {
            let (e, len, dst) = (o.e, o.len, o.dst);
            return self.send_lone(fd, e, len, dst);
        }
        // Nothing more may join the entries now being handed over.
        self.close_open();
        self.send_entries(fd)
    }

    /// [`send`](Self::send) of several entries or of one super-datagram: each entry's control
    /// message, then `sendmmsg`. Out of line, so that the lone entry's send stays small enough to
    /// inline.
    #[inline(never)]
    fn send_entries(&mut self, fd: RawFd) -> io::Result<usize> {
        for e in self.sent..self.queued {
            let msg = &mut self.hdrs[e].msg_hdr;
            if self.segs[e] > 1 {
                msg.msg_control = self.ctrl[e].0.as_mut_ptr() as *mut libc::c_void;
                // SAFETY: CMSG_SPACE/LEN are size computations; the control buffer of entry e holds
                // one cmsg with a u16, and msg describes it.
                unsafe {
                    msg.msg_controllen = libc::CMSG_SPACE(2) as _;
                    let c = libc::CMSG_FIRSTHDR(msg);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, self.seg[e] as u16);
                }
            } else {
                msg.msg_control = std::ptr::null_mut();
                msg.msg_controllen = 0;
            }
        }
        let sent_now = send_queued(fd, &mut self.hdrs, &mut self.sent, self.queued)?;
        if self.sent == self.queued {
            self.emptied();
        }
        Ok(sent_now)
    }

    /// Everything queued went out: the batch starts again from its first entry.
    #[inline]
    fn emptied(&mut self) {
        self.sent = 0;
        self.queued = 0;
        self.packets = 0;
    }

    /// [`send`](Self::send) of a lone entry of one packet (a ping-pong's whole turn), the open
    /// entry `e` of `len` bytes to `dst`: the one sendto `send_queued` would make for it, without
    /// its header, iovec or control message. Always inlined: a ping-pong sends this way once per
    /// transmission. What the kernel does not take stays queued, closed, for `send_entries`.
    #[inline(always)]
    fn send_lone(&mut self, fd: RawFd, e: usize, len: usize, dst: SocketAddr) -> io::Result<usize> {
        match self.sendto_entry(fd, e, len, dst) {
            Ok(true) => {
                self.open = None;
                self.emptied();
                Ok(1)
            }
            kept => {
                self.close_open();
                kept.map(|_| 0)
            }
        }
    }

    /// One sendto of the first `len` bytes of entry `e` to `dst` (past an ICMP error reported for
    /// an earlier datagram); false when the kernel took nothing now.
    #[inline(always)]
    fn sendto_entry(
        &mut self,
        fd: RawFd,
        e: usize,
        len: usize,
        dst: SocketAddr,
    ) -> io::Result<bool> {
        let name = &mut self.names[e];
        let namelen = sockaddr::encode(dst, name);
        let name = name as *const libc::sockaddr_storage as *const libc::sockaddr;
        self.sendto_slot(fd, e, len, name, namelen)
    }

    /// One sendto of the first `len` bytes of entry `e` to the encoded `name` of `namelen` bytes
    /// (past an ICMP error reported for an earlier datagram); false when the kernel took nothing.
    #[inline(always)]
    fn sendto_slot(
        &mut self,
        fd: RawFd,
        e: usize,
        len: usize,
        name: *const libc::sockaddr,
        namelen: libc::socklen_t,
    ) -> io::Result<bool> {
        let buf = libc::iovec {
            iov_base: self.mem.slot_ptr(e) as *mut libc::c_void,
            iov_len: len,
        };
        loop {
            match sendto_nowait(fd, &buf, name, namelen) {
                Ok(_) => return Ok(true),
                Err(err) => match send_failed(err) {
                    Ok(true) => {}
                    kept => return kept,
                },
            }
        }
    }

    /// Where a packet goes that may leave alone, unqueued ([`send_unqueued`](Self::send_unqueued)):
    /// the first entry's `max_packet` bytes; `None` unless the batch is empty.
    #[inline(always)]
    pub(crate) fn unqueued_buf(&mut self) -> Option<&mut [u8]> {
        if self.queued != 0 {
            return None;
        }
        let max = self.max_packet;
        Some(self.mem.part_mut(0, 0, max))
    }

    /// Queues the `len` bytes written into [`unqueued_buf`](Self::unqueued_buf), to `dst`, as
    /// [`try_push`](Self::try_push) would have queued them: a second packet follows.
    pub(crate) fn queue_unqueued(&mut self, dst: SocketAddr, len: usize) {
        self.open_entry(0, dst, len);
    }

    /// Sends the `len` bytes written into [`unqueued_buf`](Self::unqueued_buf) to `dst`, encoded
    /// as `name` where the path was made: the sendto [`send`](Self::send) makes for a lone packet,
    /// without the entry's bookkeeping or the address's encoding. What the kernel does not take
    /// stays queued, closed, as `send` leaves it.
    #[inline(always)]
    pub(crate) fn send_unqueued(
        &mut self,
        fd: RawFd,
        dst: &SocketAddr,
        name: &sockaddr::Name,
        len: usize,
    ) -> io::Result<usize> {
        let buf = libc::iovec {
            iov_base: self.mem.slot_ptr(0) as *mut libc::c_void,
            iov_len: len,
        };
        // The first try apart, its error to a cold path: `sendto_slot`'s loop left a merge of
        // its outcomes (five instructions) on every ping-pong's send.
        match sendto_nowait(fd, &buf, name.ptr(), name.len()) {
            Ok(_) => Ok(1),
            Err(err) => self.unsent(err, fd, dst, name, len),
        }
    }

    /// [`send_unqueued`](Self::send_unqueued)'s first sendto failed with `err`: as `sendto_slot`
    /// goes on from it (again past an ICMP error), and a packet the kernel did not take is
    /// queued and closed.
    #[cold]
    #[inline(never)]
    fn unsent(
        &mut self,
        err: io::Error,
        fd: RawFd,
        dst: &SocketAddr,
        name: &sockaddr::Name,
        len: usize,
    ) -> io::Result<usize> {
        let sent = match send_failed(err) {
            Ok(true) => self.sendto_slot(fd, 0, len, name.ptr(), name.len()),
            kept => kept,
        };
        match sent {
            Ok(true) => Ok(1),
            kept => {
                self.open_entry(0, *dst, len);
                self.close_open();
                kept.map(|_| 0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::RxBatch;
    use super::super::udp::tests::{free_port, recv_datagrams};
    use super::super::udp::{UdpConfig, UdpSocket};
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn runs_of_equal_packets_share_an_entry_and_arrive_one_by_one() {
        let ip: IpAddr = "127.0.0.13".parse().unwrap();
        let port = free_port(ip);
        let rx_cfg = UdpConfig {
            port,
            ..UdpConfig::default()
        };
        let rx = UdpSocket::bind_scoped(ip, 0, &rx_cfg).unwrap();
        let tx_cfg = UdpConfig {
            port,
            zero_checksum: false,
            ..UdpConfig::default()
        };
        let tx = UdpSocket::bind_scoped("127.0.0.14".parse().unwrap(), 0, &tx_cfg).unwrap();
        let mut b = GsoTxBatch::new(4, 300);
        // FIRST-like 120, then 100 x3, a short 40 (closes), then 100 again (new entry).
        let lens = [120usize, 100, 100, 100, 40, 100];
        let mut index = Vec::new();
        for (k, &len) in lens.iter().enumerate() {
            index.push(b.try_push(rx.local_addr(), |buf| {
                buf[..len].fill(k as u8);
                Some(len)
            }));
            assert_eq!(b.last_packet_mut(), &vec![k as u8; len][..]);
        }
        assert_eq!(
            b.try_push(rx.local_addr(), |_| None),
            None,
            "declined fill queues nothing"
        );
        // Entries: [120, 100] (a shorter segment ends its entry), [100, 100, 40], [100].
        let want_index = [0u16, 1, 0, 1, 2, 0];
        assert_eq!(index, want_index.map(Some));
        assert_eq!(b.packets(), 6);
        assert_eq!(b.pending(), 3);
        assert_eq!(tx.send_gso_batch(&mut b).unwrap(), 3);
        assert_eq!(b.pending(), 0);
        let mut rb = RxBatch::new(16, 512);
        let mut got = Vec::new();
        recv_datagrams(&rx, &mut rb, 6, |d| {
            let d = d.data;
            assert!(d.iter().all(|&x| x == d[0]));
            got.push((d[0] as usize, d.len()));
        });
        let want: Vec<(usize, usize)> = lens.iter().copied().enumerate().collect();
        assert_eq!(
            got, want,
            "every packet arrives as its own datagram, in order"
        );
    }
}
