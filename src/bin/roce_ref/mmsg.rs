//! Batched sends and receives of a stream: `sendmmsg` of prepared messages that all point at one
//! buffer (so nothing is copied per message), UDP GSO super-datagrams, and `recvmmsg` into slots.

use std::io;
use std::os::fd::RawFd;

use crate::proto::DATA;
use crate::sys::is_busy;

/// `UDP_SEGMENT` (include/uapi/linux/udp.h): the segment size of a GSO send.
pub const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO`: receive runs of datagrams as one buffer.
pub const UDP_GRO: libc::c_int = 104;
/// The kernel's cap on segments in one UDP GSO send (UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest UDP payload over IPv4, the cap on a whole GSO super-datagram.
const UDP_MAX_PAYLOAD: usize = 65_507;

/// Prepared stream messages, sent again and again.
pub struct MmsgTx {
    // The kernel reads through raw pointers into these: the heap buffers never move or resize.
    _buf: Vec<u8>,
    _iov: Vec<libc::iovec>,
    _cmsg: Vec<u64>,
    msgs: Vec<libc::mmsghdr>,
    payload_per_msg: u64,
}

impl MmsgTx {
    /// `batch` messages of `header` (an Ethernet header, or nothing) followed by `size` bytes of DATA.
    pub fn plain(header: &[u8], size: usize, batch: usize) -> MmsgTx {
        let mut buf = header.to_vec();
        buf.resize(header.len() + size, 0);
        buf[header.len()] = DATA;
        let iov = vec![
            libc::iovec {
                iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            };
            1
        ];
        let msgs = (0..batch).map(|_| msghdr(&iov, None)).collect();
        MmsgTx {
            _buf: buf,
            _iov: iov,
            _cmsg: Vec::new(),
            msgs,
            payload_per_msg: size as u64,
        }
    }

    /// One UDP GSO super-datagram of as many `size`-byte DATA datagrams as the kernel takes in one send;
    /// a plain datagram when only one fits.
    pub fn gso(size: usize) -> MmsgTx {
        let segs = gso_segments(size);
        if segs == 1 {
            return MmsgTx::plain(&[], size, 1);
        }
        let mut buf = vec![0u8; segs * size];
        for seg in buf.chunks_mut(size) {
            seg[0] = DATA;
        }
        let iov = vec![libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        }];
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
        // u64 words keep the buffer aligned for cmsghdr.
        let mut cmsg = vec![0u64; space.div_ceil(8)];
        let mut hdr = msghdr(&iov, Some((&mut cmsg, space)));
        // SAFETY: msg_control points at `space` zeroed bytes, enough for one cmsghdr and a u16, so
        // CMSG_FIRSTHDR is non-null and CMSG_DATA lies inside the buffer.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&hdr.msg_hdr);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, size as u16);
        }
        hdr.msg_len = 0;
        MmsgTx {
            _buf: buf,
            _iov: iov,
            _cmsg: cmsg,
            msgs: vec![hdr],
            payload_per_msg: (segs * size) as u64,
        }
    }

    /// Sends the batch once on `fd` (connected or bound); payload bytes the kernel took (0 when busy).
    #[inline]
    pub fn send(&mut self, fd: RawFd) -> io::Result<u64> {
        // SAFETY: every mmsghdr points at iovecs and control data owned by self, alive and unmoved.
        let rc = unsafe {
            libc::sendmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                0,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if is_busy(&e) { Ok(0) } else { Err(e) };
        }
        Ok(rc as u64 * self.payload_per_msg)
    }
}

/// Segments of `size` bytes in one GSO send.
pub fn gso_segments(size: usize) -> usize {
    (UDP_MAX_PAYLOAD / size.max(1)).clamp(1, GSO_MAX_SEGMENTS)
}

fn msghdr(iov: &[libc::iovec], control: Option<(&mut Vec<u64>, usize)>) -> libc::mmsghdr {
    // SAFETY: all-zero is a valid mmsghdr (null name, no control).
    let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
    m.msg_hdr.msg_iov = iov.as_ptr() as *mut libc::iovec;
    m.msg_hdr.msg_iovlen = iov.len() as _;
    if let Some((buf, len)) = control {
        m.msg_hdr.msg_control = buf.as_mut_ptr() as *mut libc::c_void;
        m.msg_hdr.msg_controllen = len as _;
    }
    m
}

/// Slots a `recvmmsg` fills.
pub struct MmsgRx {
    buf: Vec<u8>,
    _iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    slot: usize,
}

impl MmsgRx {
    /// `batch` slots of `slot` bytes each.
    pub fn new(batch: usize, slot: usize) -> MmsgRx {
        let mut buf = vec![0u8; batch * slot];
        let iov: Vec<libc::iovec> = buf
            .chunks_mut(slot)
            .map(|s| libc::iovec {
                iov_base: s.as_mut_ptr() as *mut libc::c_void,
                iov_len: slot,
            })
            .collect();
        let msgs = iov
            .iter()
            .map(|v| msghdr(std::slice::from_ref(v), None))
            .collect();
        MmsgRx {
            buf,
            _iov: iov,
            msgs,
            slot,
        }
    }

    /// Receives what waits on `fd`, up to a batch, without blocking; how many messages (0: none).
    #[inline]
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        // SAFETY: every mmsghdr points at one iovec into self.buf, alive and unmoved.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if is_busy(&e) { Ok(0) } else { Err(e) };
        }
        Ok(rc as usize)
    }

    /// Message `i` of the last receive.
    #[inline]
    pub fn msg(&self, i: usize) -> &[u8] {
        let len = (self.msgs[i].msg_len as usize).min(self.slot);
        &self.buf[i * self.slot..i * self.slot + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_fills_a_datagram_within_the_kernel_caps() {
        assert_eq!(gso_segments(1472), 44);
        assert_eq!(gso_segments(36), 64);
        assert_eq!(gso_segments(40_000), 1);
        assert_eq!(gso_segments(0), 64);
    }
}
