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

/// A control message of one `UDP_SEGMENT` (`CMSG_SPACE(2)` bytes), built on the stack for
/// [`GsoTxBatch::send_unqueued_two`].
#[repr(C)]
struct SegmentCmsg {
    hdr: libc::cmsghdr,
    seg: u16,
    pad: [u8; 6],
}

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
        Some(self.mem.first_mut(max))
    }

    /// Queues the `len` bytes written into [`unqueued_buf`](Self::unqueued_buf), to `dst`, as
    /// [`try_push`](Self::try_push) would have queued them: a second packet follows.
    pub(crate) fn queue_unqueued(&mut self, dst: SocketAddr, len: usize) {
        self.open_entry(0, dst, len);
    }

    /// Where a second packet goes while the first (`len` bytes) waits unqueued in
    /// [`unqueued_buf`](Self::unqueued_buf): right behind it, `max_packet` bytes, where
    /// [`try_push`](Self::try_push) would append it to the first's entry; `None` when `try_push`
    /// would not (one entry only, or no room for a packet behind the first).
    #[inline(always)]
    pub(crate) fn second_buf(&mut self, len: usize) -> Option<&mut [u8]> {
        let max = self.max_packet;
        if self.hdrs.len() < 2 || len + max > MAX_ENTRY_BYTES {
            return None;
        }
        Some(self.mem.part_mut(0, len, max))
    }

    /// Queues the first packet (`len` bytes, [`unqueued_buf`](Self::unqueued_buf)) and the second
    /// (`second` bytes, [`second_buf`](Self::second_buf)), both to `dst`, as two `try_push` calls
    /// would have queued them: the second appended when it is no longer than the first (the
    /// entry closed when it is shorter), else moved to an entry of its own.
    pub(crate) fn queue_unqueued_two(&mut self, dst: SocketAddr, len: usize, second: usize) {
        self.open_entry(0, dst, len);
        if second > len {
            self.move_longer(dst, len, second);
            return;
        }
        let Some(o) = &mut self.open else {
            unreachable!("open_entry opened entry 0");
        };
        o.len += second;
        o.segs += 1;
        if second < len {
            self.close_open();
        }
        self.packets += 1;
        self.last_packet = (0, len, second);
    }

    /// [`queue_unqueued_two`](Self::queue_unqueued_two) of a second packet longer than the
    /// first: copied to the next entry, opened with it, as `try_push` moves it. Cold: a
    /// transmission's second packet is an ACK or a segment no longer than the first.
    #[cold]
    #[inline(never)]
    fn move_longer(&mut self, dst: SocketAddr, at: usize, len: usize) {
        let e = self.queued;
        let (src_ptr, dst_ptr) = (self.mem.slot_ptr(0), self.mem.slot_ptr(e));
        // SAFETY: two distinct slots of our pool (e is 1: entry 0 is queued); `at + len` stays
        // within slot 0 (`second_buf` checked).
        unsafe { std::ptr::copy_nonoverlapping(src_ptr.add(at), dst_ptr, len) };
        self.open_entry(e, dst, len);
    }

    /// Sends the first packet (`len` bytes) and the second appended to it (`second` bytes, no
    /// longer) to `dst`, encoded as `name`: one sendmsg with a UDP_SEGMENT of `len`, the message
    /// [`send`](Self::send) makes of the entry [`queue_unqueued_two`](Self::queue_unqueued_two)
    /// queues, without its bookkeeping. What the kernel does not take stays queued, closed.
    #[inline(always)]
    pub(crate) fn send_unqueued_two(
        &mut self,
        fd: RawFd,
        dst: &SocketAddr,
        name: &sockaddr::Name,
        len: usize,
        second: usize,
    ) -> io::Result<usize> {
        debug_assert!(second <= len);
        let mut iov = libc::iovec {
            iov_base: self.mem.first_ptr() as *mut libc::c_void,
            iov_len: len + second,
        };
        let mut ctrl = SegmentCmsg {
            // SAFETY: a plain kernel struct; all-zero is valid.
            hdr: unsafe { std::mem::zeroed() },
            seg: len as u16,
            pad: [0; 6],
        };
        ctrl.hdr.cmsg_level = libc::SOL_UDP;
        ctrl.hdr.cmsg_type = UDP_SEGMENT;
        // SAFETY: CMSG_LEN/SPACE are size computations.
        let (cmsg_len, space) = unsafe { (libc::CMSG_LEN(2), libc::CMSG_SPACE(2)) };
        ctrl.hdr.cmsg_len = cmsg_len as _;
        debug_assert!(space as usize <= std::mem::size_of::<SegmentCmsg>());
        // SAFETY: a plain kernel struct; all-zero is valid.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_name = name.ptr() as *mut libc::c_void;
        m.msg_namelen = name.len();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = &mut ctrl as *mut SegmentCmsg as *mut libc::c_void;
        m.msg_controllen = space as _;
        // SAFETY: `m` describes live memory only: the name, the iovec over entry 0's first
        // `len + second` bytes (written by the fills), the control message above.
        let rc = unsafe { libc::sendmsg(fd, &m, libc::MSG_DONTWAIT) };
        if rc >= 0 {
            return Ok(1);
        }
        self.two_unsent(io::Error::last_os_error(), fd, *dst, len, second)
    }

    /// [`send_unqueued_two`](Self::send_unqueued_two)'s sendmsg failed with `err`: the two are
    /// queued and closed as `send` had them, and the send goes on as `send_queued` would
    /// (again past an ICMP error).
    #[cold]
    #[inline(never)]
    fn two_unsent(
        &mut self,
        err: io::Error,
        fd: RawFd,
        dst: SocketAddr,
        len: usize,
        second: usize,
    ) -> io::Result<usize> {
        self.queue_unqueued_two(dst, len, second);
        self.close_open();
        match send_failed(err) {
            Ok(true) => self.send_entries(fd),
            kept => kept.map(|_| 0),
        }
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
            iov_base: self.mem.first_ptr() as *mut libc::c_void,
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
    use std::os::fd::AsRawFd;

    /// A receiving socket at `rx_ip` and a sending one at `tx_ip` on the same free port, the
    /// sender with UDP checksums (GSO needs them).
    fn socket_pair(rx_ip: &str, tx_ip: &str) -> (UdpSocket, UdpSocket) {
        let ip: IpAddr = rx_ip.parse().unwrap();
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
        let tx = UdpSocket::bind_scoped(tx_ip.parse().unwrap(), 0, &tx_cfg).unwrap();
        (rx, tx)
    }

    #[test]
    fn runs_of_equal_packets_share_an_entry_and_arrive_one_by_one() {
        let (rx, tx) = socket_pair("127.0.0.13", "127.0.0.14");
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

    #[test]
    fn two_unqueued_packets_leave_as_two_pushes_would_send_them() {
        let (rx, tx) = socket_pair("127.0.0.15", "127.0.0.16");
        let dst = rx.local_addr();
        let name = sockaddr::Name::of(dst);
        let fd = tx.as_raw_fd();
        let mut rb = RxBatch::new(16, 512);
        // A shorter second (a request's trailing ACK), an equal one, a longer one.
        for (first, second) in [(120usize, 40usize), (100, 100), (60, 150)] {
            let mut b = GsoTxBatch::new(4, 300);
            b.unqueued_buf().unwrap()[..first].fill(1);
            b.second_buf(first).unwrap()[..second].fill(2);
            if second <= first {
                assert_eq!(
                    b.send_unqueued_two(fd, &dst, &name, first, second).unwrap(),
                    1
                );
            } else {
                b.queue_unqueued_two(dst, first, second);
                assert_eq!(
                    (b.packets(), b.pending()),
                    (2, 2),
                    "the longer one in its own entry"
                );
                assert_eq!(b.last_packet_mut(), &vec![2u8; second][..]);
                assert_eq!(tx.send_gso_batch(&mut b).unwrap(), 2);
            }
            assert!(b.is_idle());
            let mut got = Vec::new();
            recv_datagrams(&rx, &mut rb, 2, |d| got.push(d.data.to_vec()));
            assert_eq!(got, vec![vec![1u8; first], vec![2u8; second]]);
        }
        // Queued (more follow): the state two `try_push` calls leave.
        let mut b = GsoTxBatch::new(4, 300);
        b.unqueued_buf().unwrap()[..100].fill(1);
        b.second_buf(100).unwrap()[..100].fill(2);
        b.queue_unqueued_two(dst, 100, 100);
        assert_eq!(b.last_packet_mut(), &[2u8; 100][..]);
        let third = b.try_push(dst, |buf| {
            buf[..80].fill(3);
            Some(80)
        });
        assert_eq!(third, Some(2), "the third joins the open entry");
        assert_eq!((b.packets(), b.pending()), (3, 1));
        assert_eq!(tx.send_gso_batch(&mut b).unwrap(), 1);
        let mut got = Vec::new();
        recv_datagrams(&rx, &mut rb, 3, |d| got.push(d.data.to_vec()));
        assert_eq!(got, vec![vec![1u8; 100], vec![2u8; 100], vec![3u8; 80]]);
        // No room behind a first packet for one more of max_packet bytes: not offered.
        let mut b = GsoTxBatch::new(4, 40_000);
        assert!(b.second_buf(30_000).is_none());
        assert!(GsoTxBatch::new(1, 300).second_buf(10).is_none());
    }
}
