//! A PACKET_MMAP receive ring (TPACKET_V2) for the AF_PACKET backend.
//!
//! The kernel copies each accepted frame into the next free slot of a ring shared with us and flips
//! the slot's status word to "user"; we read frames straight out of the ring and flip the word back.
//! Finding out that nothing arrived is one memory load instead of a `recvmmsg` syscall, which is
//! what a busy-polling receiver does most of the time. TPACKET_V2 rather than V3: V3 hands over
//! whole blocks, only when full or after a timeout of at least a millisecond, which would wreck
//! latency tests; V2 hands over every frame as soon as it is written.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use super::batch::RxFrame;

const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// The header the kernel writes at the start of each frame slot (`struct tpacket2_hdr`).
#[repr(C)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}
/// Where the `sockaddr_ll` sits in a slot: after the header, 16-byte aligned (TPACKET_ALIGN).
const SLL_OFFSET: usize = (std::mem::size_of::<Tpacket2Hdr>() + 15) & !15;

#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

/// A mapped TPACKET_V2 receive ring.
pub struct RxRing {
    map: *mut u8,
    map_len: usize,
    frame_size: usize,
    /// Bytes per block and frames per block: frames never cross a block, so a block may end in a
    /// gap smaller than a frame.
    block_size: usize,
    per_block: usize,
    frames: usize,
    cur: usize,
}

/// Bytes the kernel puts in front of a frame's data in a slot: the header and the `sockaddr_ll`
/// (TPACKET2_HDRLEN), then up to 16 bytes of alignment around the MAC header
/// (`netoff = TPACKET_ALIGN(TPACKET2_HDRLEN + max(maclen, 16))`).
pub(crate) const SLOT_OVERHEAD: usize = 96;

/// Bytes per ring block: a multiple of the page size, large enough for several frames of any size
/// a RoCE MTU needs.
const BLOCK_SIZE: usize = 64 * 1024;

// SAFETY: the mapping is owned by this struct and only touched through &mut self / &self.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Switches `fd` (an AF_PACKET socket, not yet bound) to TPACKET_V2 and maps a ring of at least
    /// `frames` slots for frames of up to `max_frame` bytes. Slots are sized to the frame (rounded
    /// to 16 bytes, not to a power of two) and packed into 64 KiB blocks, so a 4096-MTU ring costs
    /// about 4.3 KiB per frame rather than 8.
    pub(crate) fn attach(fd: RawFd, frames: usize, max_frame: usize) -> io::Result<RxRing> {
        let frame_size = (max_frame + SLOT_OVERHEAD).next_multiple_of(16);
        if frame_size > BLOCK_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a ring slot of {frame_size} bytes does not fit a {BLOCK_SIZE}-byte block"),
            ));
        }
        let set = |name, value: *const libc::c_void, len: usize| {
            // SAFETY: value points at `len` live bytes of the option's type.
            let rc = unsafe {
                libc::setsockopt(fd, libc::SOL_PACKET, name, value, len as libc::socklen_t)
            };
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let version = TPACKET_V2;
        set(
            PACKET_VERSION,
            &version as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>(),
        )?;
        let per_block = BLOCK_SIZE / frame_size;
        let blocks = frames.max(1).div_ceil(per_block);
        let frames = blocks * per_block;
        let req = TpacketReq {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: frames as u32,
        };
        set(
            PACKET_RX_RING,
            &req as *const _ as *const libc::c_void,
            std::mem::size_of::<TpacketReq>(),
        )?;
        let map_len = blocks * BLOCK_SIZE;
        // SAFETY: mapping the ring the kernel just allocated for this socket.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing {
            map: map as *mut u8,
            map_len,
            frame_size,
            block_size: BLOCK_SIZE,
            per_block,
            frames,
            cur: 0,
        })
    }

    fn slot(&self, i: usize) -> *mut u8 {
        let at = (i / self.per_block) * self.block_size + (i % self.per_block) * self.frame_size;
        debug_assert!(at + self.frame_size <= self.map_len);
        // SAFETY: i < frames, so the slot lies inside its block, inside the mapping.
        unsafe { self.map.add(at) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: every slot starts with the 4-byte-aligned tp_status word the kernel and we share.
        unsafe { &*(self.slot(i) as *const AtomicU32) }
    }

    /// The frame in the current slot, if the kernel has filled it. Call [`release`](Self::release)
    /// when done with it.
    pub fn peek(&self) -> Option<RxFrame<'_>> {
        if self.status(self.cur).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return None;
        }
        let base = self.slot(self.cur);
        // SAFETY: the kernel filled the slot (status USER, acquired above): the header, the
        // sockaddr_ll and `tp_snaplen` bytes at `tp_mac` are initialised and inside the slot.
        unsafe {
            let hdr = &*(base as *const Tpacket2Hdr);
            let sll = &*(base.add(SLL_OFFSET) as *const libc::sockaddr_ll);
            let data =
                std::slice::from_raw_parts(base.add(hdr.tp_mac as usize), hdr.tp_snaplen as usize);
            Some(RxFrame {
                data,
                pkttype: sll.sll_pkttype,
                ifindex: sll.sll_ifindex,
                truncated: hdr.tp_snaplen < hdr.tp_len,
            })
        }
    }

    /// Hands the current slot back to the kernel and moves to the next.
    pub fn release(&mut self) {
        self.status(self.cur)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.frames;
    }

    /// Slots in the ring.
    pub fn frames(&self) -> usize {
        self.frames
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}
