//! The receive batch: one `recvmmsg` (or `recvmsg` while datagrams come one at a time) fills up to
//! a batch of preallocated slots, read back as datagrams (with their addresses and GRO size) or
//! link-layer frames.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;

use super::{CtrlBuf, UDP_GRO, msg_headers, slot_iovecs, zeroed_names};
use crate::transport::soft::io::slots::Slots;
use crate::transport::soft::io::sockaddr;

/// Gives header `h` back the capacities of its address and control space, which a receive
/// overwrote with the lengths it used, and clears the flags it reported.
#[inline(always)]
fn restore(h: &mut libc::mmsghdr) {
    h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    h.msg_hdr.msg_controllen = std::mem::size_of::<CtrlBuf>() as _;
    h.msg_hdr.msg_flags = 0;
}

/// The TOS of a datagram whose one control message is IPv4's TOS byte (what a socket reading CE
/// marks gets with every datagram of a ping-pong), read without walking the messages.
#[inline(always)]
fn lone_tos(msg: &libc::msghdr) -> Option<u8> {
    // SAFETY: CMSG_SPACE and CMSG_LEN only compute sizes.
    let (space, len) = unsafe { (libc::CMSG_SPACE(1), libc::CMSG_LEN(1)) };
    if msg.msg_controllen != space as usize {
        return None;
    }
    // SAFETY: the kernel wrote `space` bytes of control data at msg_control, room for one message
    // header and its byte, which is read only when the header says it is there.
    unsafe {
        let c = msg.msg_control as *const libc::cmsghdr;
        let h = std::ptr::read_unaligned(c);
        (h.cmsg_level == libc::IPPROTO_IP
            && h.cmsg_type == libc::IP_TOS
            && h.cmsg_len as usize == len as usize)
            .then(|| *libc::CMSG_DATA(c))
    }
}

/// This thread's errno, after a libc call that failed.
fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno, always valid to read.
    unsafe { *libc::__errno_location() }
}

/// `recvmsg(fd, msg, MSG_DONTWAIT)`: the datagram's length, or the errno. On x86-64 Linux the
/// system call itself, inline: libc's wrapper (a cancellation point) and the errno read after it
/// cost more than the call's set-up, on every receive of a busy poll.
#[inline(always)]
fn recvmsg_nowait(fd: RawFd, msg: &mut libc::msghdr) -> Result<usize, i32> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let rc: isize;
        // SAFETY: recvmsg(2) with a live msghdr whose name, iovec and control buffers the caller
        // owns; the kernel writes only within them. `syscall` clobbers rcx and r11 (declared) and
        // returns in rax: the length, or -errno.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_recvmsg as isize => rc,
                in("rdi") fd as isize,
                in("rsi") std::ptr::from_mut(msg),
                in("rdx") libc::MSG_DONTWAIT as isize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        if rc < 0 {
            Err(-rc as i32)
        } else {
            Ok(rc as usize)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: as above, through libc.
        let rc = unsafe { libc::recvmsg(fd, msg, libc::MSG_DONTWAIT) };
        if rc < 0 {
            Err(errno())
        } else {
            Ok(rc as usize)
        }
    }
}

/// One received UDP datagram, borrowed from an [`RxBatch`].
#[derive(Debug, Clone, Copy)]
pub struct RxDatagram<'a> {
    /// The UDP payload (BTH ... ICRC for RoCE v2).
    pub data: &'a [u8],
    /// Sender's address and port.
    pub src: Option<SocketAddr>,
    /// Our address the datagram was sent to (IP_PKTINFO / IPV6_PKTINFO, on a socket that asks for
    /// it; `None` otherwise, where the socket's bound address is the answer).
    pub dst: Option<IpAddr>,
    /// The datagram was longer than the slot and got cut (MSG_TRUNC): drop it as malformed.
    pub truncated: bool,
    /// With UDP_GRO on: the kernel merged datagrams of this size into `data` (the last may be
    /// shorter); split before use. `None`: `data` is one datagram.
    pub gro_segment: Option<u16>,
    /// The IPv4 TOS / IPv6 traffic class (IP_RECVTOS / IPV6_RECVTCLASS, on a socket that asks
    /// for it; 0 otherwise): its low two bits say whether a switch marked it CE.
    pub tclass: u8,
}

/// One received link-layer frame (AF_PACKET), borrowed from an [`RxBatch`].
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The frame from the destination MAC on (no FCS).
    pub data: &'a [u8],
    /// `PACKET_HOST`, `PACKET_BROADCAST`, `PACKET_OTHERHOST`, `PACKET_OUTGOING`, ...
    pub pkttype: u8,
    /// Interface the frame arrived on.
    pub ifindex: i32,
    /// The frame was longer than the slot and got cut: drop it as malformed.
    pub truncated: bool,
}

/// Preallocated state for one `recvmmsg`: `batch` slots, headers, iovecs, addresses, control space.
pub struct RxBatch {
    slots: Slots,
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[libc::sockaddr_storage]>,
    // Kept alive for the kernel: the headers point into it.
    _ctrl: Box<[CtrlBuf]>,
    filled: usize,
    /// Headers a `recvmmsg` may have written since their capacities were last restored (header 0,
    /// which `recvmsg` writes too, is restored before each `recvmsg` and each `recvmmsg`).
    dirty: usize,
    /// The next receive takes one datagram with `recvmsg` (see [`RxBatch::recv`]).
    single: bool,
    /// Receives in a row that returned data, counted while `single`.
    streak: u8,
}

// SAFETY: the raw pointers inside the headers point only into this struct's own heap arrays, which
// move with it; nothing is shared with another thread.
unsafe impl Send for RxBatch {}

impl RxBatch {
    /// Room for `batch` packets of up to `slot_len` bytes.
    pub fn new(batch: usize, slot_len: usize) -> RxBatch {
        let mut slots = Slots::new(batch, slot_len);
        let slot_len = slots.slot_len();
        let mut iovs = slot_iovecs(&mut slots, slot_len);
        let mut names = zeroed_names(batch);
        let mut ctrl = CtrlBuf::boxed(batch);
        let hdrs = msg_headers(&mut iovs, Some(&mut names), Some(&mut ctrl));
        RxBatch {
            slots,
            hdrs,
            iovs,
            names,
            _ctrl: ctrl,
            filled: 0,
            dirty: batch,
            single: false,
            streak: 0,
        }
    }

    /// Packets received by the last receive.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// True when the last receive got nothing.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Capacity in packets.
    pub fn capacity(&self) -> usize {
        self.slots.count()
    }

    /// One non-blocking receive on `fd` into this batch; 0 when nothing waits. `control`: the socket
    /// hands out control messages the caller reads (UDP_GRO sizes, PKTINFO addresses).
    ///
    /// While datagrams come one at a time (a ping-pong, or a spin on an idle socket) it is a plain
    /// `recvmsg` into the first slot, which costs the kernel less than `recvmmsg`'s loop, or, with
    /// no control message to read, `recvfrom`, which spares it the message header and iovec copies
    /// too; two receives in a row that find data mean a stream, and it goes back to `recvmmsg` for
    /// whole batches until one of those finds at most one datagram. Inlined whole into its caller,
    /// with the batch's `recvmmsg` out of line (the poll receives several times a round trip, half
    /// of them finding nothing): each receive then costs less than a shared copy did.
    #[inline(always)]
    pub(crate) fn recv(&mut self, fd: RawFd, control: bool) -> io::Result<usize> {
        let got = if !self.single {
            self.recv_many(fd)
        } else if control {
            // The kernel overwrote header 0's capacities if the last receive got a datagram: given
            // back here, three stores, rather than tracked and restored behind a compare on every
            // receive (`dirty` counts only what `recvmmsg` touched).
            let h = self.first_header_mut();
            restore(h);
            // recvmmsg reports the length in the header; recvmsg returns it.
            recvmsg_nowait(fd, &mut h.msg_hdr).map(|len| {
                h.msg_len = len as libc::c_uint;
                1
            })
        } else {
            self.recv_one_from(fd)
        };
        let got = match got {
            Ok(got) => got,
            Err(errno) => {
                self.filled = 0;
                self.streak = 0;
                self.single = true;
                // An idle receive is the common case and needs no io::Error; its EAGAIN is
                // asked first (the compiler had ordered the two compares by value).
                if errno == libc::EAGAIN {
                    return Ok(0);
                }
                std::hint::cold_path();
                if errno == libc::EINTR {
                    return Ok(0);
                }
                return Err(io::Error::from_raw_os_error(errno));
            }
        };
        self.filled = got;
        if self.single {
            self.streak += 1;
            if self.streak >= 2 {
                self.single = false;
                self.streak = 0;
            }
        } else {
            self.single = self.filled <= 1;
        }
        Ok(self.filled)
    }

    /// One `recvmmsg` for a whole batch; how many datagrams came, or the errno. Out of line: a
    /// stream's receive, rare beside the one-at-a-time receives of a ping-pong or an idle spin,
    /// which then compile without it.
    #[inline(never)]
    fn recv_many(&mut self, fd: RawFd) -> Result<usize, i32> {
        // The kernel overwrites these lengths in the headers of the datagrams it returns: restore
        // the capacities of those `recvmmsg` touched (its datagrams and one more), and of header
        // 0, which `recvmsg` and `recvfrom` write.
        let dirty = self.dirty.max(1).min(self.slots.count());
        for h in self.hdrs[..dirty].iter_mut() {
            restore(h);
        }
        self.dirty = 0;
        // SAFETY: every header points into this batch's own live arrays (see new).
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.slots.count() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(errno());
        }
        // Its datagrams' headers, and maybe one more.
        self.dirty = rc as usize + 1;
        Ok(rc as usize)
    }

    /// `recvfrom` into slot 0, recorded in header 0 as `recvmsg` would (length, address, MSG_TRUNC,
    /// no control message); 1, or the errno.
    fn recv_one_from(&mut self, fd: RawFd) -> Result<usize, i32> {
        let h = &mut self.hdrs[0];
        let mut namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: iovec 0 describes slot 0 and name 0 is a live sockaddr_storage, both this batch's
        // own; MSG_TRUNC makes the call return the datagram's real length, which may exceed the slot.
        let rc = unsafe {
            libc::recvfrom(
                fd,
                self.iovs[0].iov_base,
                self.iovs[0].iov_len,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                &mut self.names[0] as *mut _ as *mut libc::sockaddr,
                &mut namelen,
            )
        };
        if rc < 0 {
            return Err(errno());
        }
        let len = rc as usize;
        h.msg_len = len.min(self.iovs[0].iov_len) as libc::c_uint;
        h.msg_hdr.msg_namelen = namelen;
        h.msg_hdr.msg_controllen = 0;
        h.msg_hdr.msg_flags = if len > self.iovs[0].iov_len {
            libc::MSG_TRUNC
        } else {
            0
        };
        Ok(1)
    }

    /// Header 0, which `recvmsg` fills: without the bounds check that every receive, idle ones
    /// too, paid.
    #[inline(always)]
    fn first_header_mut(&mut self) -> &mut libc::mmsghdr {
        // SAFETY: `Slots::new` asserts at least one slot, and `new` makes a header per slot.
        unsafe { self.hdrs.get_unchecked_mut(0) }
    }

    /// The header and the address of datagram `i` of the last receive, which must be one of
    /// them: without bounds checks beside that one (folded away where `i` is known below it).
    #[inline(always)]
    fn received(&self, i: usize) -> (&libc::mmsghdr, &libc::sockaddr_storage) {
        assert!(i < self.filled, "packet {i} of a batch of {}", self.filled);
        // SAFETY: `filled` never exceeds the slot count (a receive returns at most that many),
        // and there are as many headers and addresses as slots (see `new`).
        unsafe { (self.hdrs.get_unchecked(i), self.names.get_unchecked(i)) }
    }

    #[inline]
    fn data(&self, i: usize) -> (&[u8], bool) {
        let (h, _) = self.received(i);
        // Every receive iovec spans its whole slot, so the slot's length bounds the packet.
        (
            self.slots.head(i, h.msg_len as usize),
            h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        )
    }

    /// Datagram `i` of the last receive on a UDP socket. Inlined: the receive loop would otherwise
    /// build every datagram in memory to read it back.
    #[inline(always)]
    pub fn datagram(&self, i: usize) -> RxDatagram<'_> {
        let (dst, gro_segment, tclass) = self.udp_cmsgs(i);
        self.datagram_with(i, dst, gro_segment, tclass)
    }

    /// Datagram `i` with what its control messages said.
    #[inline(always)]
    fn datagram_with(
        &self,
        i: usize,
        dst: Option<IpAddr>,
        gro_segment: Option<u16>,
        tclass: u8,
    ) -> RxDatagram<'_> {
        let (data, truncated) = self.data(i);
        RxDatagram {
            data,
            src: sockaddr::decode(self.received(i).1),
            dst,
            truncated,
            gro_segment,
            tclass,
        }
    }

    /// Datagram `i` of the last receive on a UDP socket when its control messages hold no more
    /// than its TOS (none, or a ping-pong's lone TOS): no destination address to read, no GRO size
    /// to split by. `None`: they must be walked ([`datagram`](Self::datagram)). Read without a call,
    /// so that its caller holds nothing across one.
    #[inline(always)]
    pub fn plain_datagram(&self, i: usize) -> Option<RxDatagram<'_>> {
        let msg = &self.received(i).0.msg_hdr;
        let tclass = match lone_tos(msg) {
            Some(tos) => tos,
            None if msg.msg_controllen == 0 => 0,
            None => return None,
        };
        Some(self.datagram_with(i, None, None, tclass))
    }

    /// Datagram `i` of the last receive when it is what GRO makes of an IPv4 sender's packets: its
    /// control messages a GRO size and the TOS, in the order the kernel writes them, and it was
    /// not cut. Its sender, segment size, TOS and bytes, read without the walk; `None`: walk them.
    #[inline(always)]
    pub fn gro_ipv4(&self, i: usize) -> Option<(SocketAddrV4, u16, u8, &[u8])> {
        let msg = &self.received(i).0.msg_hdr;
        // SAFETY: CMSG_SPACE and CMSG_LEN only compute sizes.
        let (gro_space, gro_len, tos_len) =
            unsafe { (libc::CMSG_SPACE(4), libc::CMSG_LEN(4), libc::CMSG_LEN(1)) };
        // SAFETY: CMSG_SPACE only computes a size.
        if msg.msg_controllen != (gro_space + unsafe { libc::CMSG_SPACE(1) }) as usize {
            return None;
        }
        // SAFETY: the kernel wrote msg_controllen bytes of control data at msg_control: room for a
        // header and an int, then a header and its byte, read only when the headers say so.
        let (size, tos) = unsafe {
            let gro = msg.msg_control as *const libc::cmsghdr;
            let tos =
                (msg.msg_control as *const u8).add(gro_space as usize) as *const libc::cmsghdr;
            let (g, t) = (std::ptr::read_unaligned(gro), std::ptr::read_unaligned(tos));
            if g.cmsg_level != libc::SOL_UDP
                || g.cmsg_type != UDP_GRO
                || g.cmsg_len as u64 != u64::from(gro_len)
                || t.cmsg_level != libc::IPPROTO_IP
                || t.cmsg_type != libc::IP_TOS
                || t.cmsg_len as u64 != u64::from(tos_len)
            {
                return None;
            }
            let size = std::ptr::read_unaligned(libc::CMSG_DATA(gro) as *const libc::c_int);
            (size, *libc::CMSG_DATA(tos))
        };
        let (data, truncated) = self.data(i);
        match sockaddr::decode(self.received(i).1) {
            Some(SocketAddr::V4(src)) if !truncated => {
                Some((src, u16::try_from(size).ok()?, tos, data))
            }
            _ => None,
        }
    }

    /// Frame `i` of the last receive on an AF_PACKET socket, writable (a super-frame is split in
    /// place), with its packet type, interface and whether it was cut.
    pub(crate) fn frame_mut(&mut self, i: usize) -> (&mut [u8], u8, i32, bool) {
        let (len, truncated) = {
            let (d, t) = self.data(i);
            (d.len(), t)
        };
        // SAFETY: as in `frame`: an AF_PACKET socket writes a sockaddr_ll into the storage.
        let sll = unsafe {
            &*(&self.names[i] as *const libc::sockaddr_storage as *const libc::sockaddr_ll)
        };
        let (pkttype, ifindex) = (sll.sll_pkttype, sll.sll_ifindex);
        (
            &mut self.slots.slot_mut(i)[..len],
            pkttype,
            ifindex,
            truncated,
        )
    }

    /// Frame `i` of the last receive on an AF_PACKET socket.
    pub fn frame(&self, i: usize) -> RxFrame<'_> {
        let (data, truncated) = self.data(i);
        // SAFETY: an AF_PACKET socket writes a sockaddr_ll, which fits in sockaddr_storage.
        let sll = unsafe {
            &*(&self.names[i] as *const libc::sockaddr_storage as *const libc::sockaddr_ll)
        };
        RxFrame {
            data,
            pkttype: sll.sll_pkttype,
            ifindex: sll.sll_ifindex,
            truncated,
        }
    }

    /// The destination address (IP_PKTINFO / IPV6_PKTINFO), the GRO segment size (UDP_GRO) and
    /// the TOS / traffic class (IP_TOS / IPV6_TCLASS) from the control messages of datagram `i`.
    /// The lone TOS of a ping-pong's datagram is read inline, the walk over several messages out of
    /// line ([`walk_udp_cmsgs`]).
    #[inline(always)]
    fn udp_cmsgs(&self, i: usize) -> (Option<IpAddr>, Option<u16>, u8) {
        let msg = &self.received(i).0.msg_hdr;
        // The address is written in place: returned with the rest, it would be copied about
        // whole on the lone TOS's path too.
        let mut dst = None;
        let (gro, tclass) = match lone_tos(msg) {
            Some(tos) => (None, tos),
            None => walk_udp_cmsgs(msg, &mut dst),
        };
        (dst, gro, tclass)
    }
}

/// [`RxBatch::udp_cmsgs`] by walking the control messages of `msg`, which the kernel wrote: the
/// destination address into `dst`, the GRO segment size and the TOS / traffic class returned.
#[inline(never)]
fn walk_udp_cmsgs(msg: &libc::msghdr, dst: &mut Option<IpAddr>) -> (Option<u16>, u8) {
    let (mut gro, mut tclass) = (None, 0);
    // SAFETY: msg_control/msg_controllen describe the control bytes the kernel wrote for this
    // datagram; each payload is read unaligned with the type the kernel documents for it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        // A lone message (a ping-pong datagram's TOS) leaves no room for a second header, so
        // CMSG_NXTHDR, which would find none, is not asked.
        let lone = msg.msg_controllen < 2 * std::mem::size_of::<libc::cmsghdr>();
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let pi = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                    *dst = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(pi.ipi_addr.s_addr))));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let pi = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                    *dst = Some(IpAddr::V6(Ipv6Addr::from(pi.ipi6_addr.s6_addr)));
                }
                (libc::SOL_UDP, UDP_GRO) => {
                    let size = std::ptr::read_unaligned(data as *const libc::c_int);
                    gro = u16::try_from(size).ok();
                }
                // IPv4 hands over the TOS as one byte, IPv6 the traffic class as an int.
                (libc::IPPROTO_IP, libc::IP_TOS) => tclass = *data,
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    tclass = std::ptr::read_unaligned(data as *const libc::c_int) as u8;
                }
                _ => {}
            }
            if lone {
                break;
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (gro, tclass)
}
