//! RoCE v2 over AF_PACKET with segmentation offload: runs of equal frames leave as one super-frame
//! and arrive as one, split back into their frames here.
//!
//! With `PACKET_VNET_HDR` every frame the socket sends or receives is preceded by a 10-byte
//! `virtio_net_hdr`. A [`PacketGsoTx`] entry is one such frame: the Ethernet, IP and UDP headers of
//! its first RoCE packet, then the UDP payloads (BTH..ICRC) of up to 64 packets of one flow, and a
//! header asking for `VIRTIO_NET_HDR_GSO_UDP_L4` segmentation at the first payload's length. The
//! kernel (or a NIC) cuts it into the packets on the way out exactly as it cuts a UDP_SEGMENT send
//! of the UDP backend, IPv4 segment k taking IP ID k, so the ICRC of each packet is computed for
//! that ID. Across a veth pair nobody cuts it: the receiver's tap gets the super-frame whole, with a
//! `virtio_net_hdr` saying so, and [`split_frames`] rebuilds each packet's headers in place in front
//! of its payload. A 64 KiB WRITE at MTU 4096 thus costs the sender two frames to build and the
//! kernel two skbs to move, instead of sixteen of each.

use std::os::fd::RawFd;

use super::batch::{msg_headers, send_queued, slot_iovecs};
use super::slots::Slots;

/// Bytes of the `virtio_net_hdr` in front of every frame on a `PACKET_VNET_HDR` socket.
pub const VNET_HDR_LEN: usize = 10;

/// Bytes of a receive slot for super-frames: the `virtio_net_hdr`, Ethernet with a VLAN tag, and
/// the largest IP packet.
pub(crate) const SUPER_FRAME_SLOT: usize = VNET_HDR_LEN + 18 + 65_535;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum from `csum_start` on is left to the kernel or NIC.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`: UDP segmentation (USO), as UDP_SEGMENT.
const GSO_UDP_L4: u8 = 5;
/// Offset of the checksum in a UDP header (`csum_offset`).
const UDP_CSUM_OFFSET: u16 = 6;
/// Packets per super-frame (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels).
const MAX_SEGMENTS: u16 = 64;
/// UDP payload bytes per super-frame: an IPv4 total length stays below 65535.
const MAX_PAYLOAD: usize = 65_000;
/// The longest header run in front of a payload: Ethernet with a VLAN tag, IPv6, UDP.
const MAX_HEADERS: usize = 18 + 40 + 8;
/// Packets with less UDP payload leave on their own: joining them saves little, and a link that
/// must carry single packets (`scripts/netns.sh up --wire-segments`) can only refuse super-frames
/// from 256 bytes up (`gso_max_size`), as their count is not known before the kernel checks them.
const MIN_SEGMENT: usize = 256;

/// Where a RoCE v2 frame's headers are: the network header's offset, the payload's (the headers'
/// length) and whether the network is IPv4. `None` for anything else (RoCE v1, IPv4 options).
fn layout(frame: &[u8]) -> Option<(usize, usize, bool)> {
    let ethertype = |at: usize| Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
    let (net, kind) = match ethertype(12)? {
        0x8100 => (18, ethertype(16)?),
        t => (14, t),
    };
    match kind {
        0x0800 if *frame.get(net)? == 0x45 && *frame.get(net + 9)? == 17 => {
            Some((net, net + 28, true))
        }
        0x86dd if *frame.get(net + 6)? == 17 => Some((net, net + 48, false)),
        _ => None,
    }
}

/// Whether two frames' headers (`h` bytes each, network header at `net`) belong to one flow: the
/// same in every byte but the lengths, the IPv4 ID and the checksums, which segmentation rewrites.
fn same_flow(a: &[u8], b: &[u8], net: usize, h: usize, v4: bool) -> bool {
    let udp = h - 8;
    let fixed: &[std::ops::Range<usize>] = if v4 {
        // Version..TOS, flags..protocol, addresses, ports.
        &[0..net + 2, net + 6..net + 10, net + 12..udp + 4]
    } else {
        // Version..flow label, next header..addresses, ports.
        &[0..net + 4, net + 6..udp + 4]
    };
    fixed.iter().all(|r| a[r.clone()] == b[r.clone()])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The ones'-complement sum of `data` as 16-bit words, not yet folded.
fn sum16(data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    let mut sum: u32 = (&mut chunks).map(|c| u32::from(get16(c, 0))).sum();
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Rewrites the length fields (and for IPv4 the ID and the header checksum) of the headers `hdr`
/// (`h` bytes, network header at `net`) for `payload` bytes of UDP payload.
fn set_lengths(hdr: &mut [u8], net: usize, h: usize, v4: bool, payload: usize, ident: u16) {
    let udp_len = (8 + payload) as u16;
    put16(hdr, h - 8 + 4, udp_len);
    if v4 {
        put16(hdr, net + 2, 20 + udp_len);
        put16(hdr, net + 4, ident);
        put16(hdr, net + 10, 0);
        let c = !fold(sum16(&hdr[net..net + 20]));
        put16(hdr, net + 10, c);
    } else {
        put16(hdr, net + 4, udp_len);
    }
}

/// The UDP checksum field a `NEEDS_CSUM` frame carries: the folded pseudo-header sum, which the
/// kernel or NIC completes over the UDP header and payload (of each segment, after adjusting it for
/// the segment's length).
fn pseudo_header_sum(hdr: &[u8], net: usize, h: usize, v4: bool) -> u16 {
    let udp_len = u32::from(get16(hdr, h - 8 + 4));
    let addrs = if v4 {
        &hdr[net + 12..net + 20]
    } else {
        &hdr[net + 8..net + 40]
    };
    fold(sum16(addrs) + 17 + udp_len)
}

/// Preallocated super-frames for `sendmmsg` on a `PACKET_VNET_HDR` socket.
pub struct PacketGsoTx {
    mem: Slots,
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    /// Per entry: frame bytes after the vnet header.
    len: Box<[usize]>,
    /// Per entry: (network header offset, headers' length, IPv4), when it may carry segments.
    layout: Box<[Option<(usize, usize, bool)>]>,
    /// Per entry: the segments' payload length, and how many it holds.
    seg: Box<[usize]>,
    segs: Box<[u16]>,
    /// Only the last queued entry can still grow; this says whether it may.
    last_open: bool,
    /// Where the last queued packet's UDP payload is: (entry, offset, length), and whether IPv4.
    last_packet: (usize, usize, usize),
    last_v4: bool,
    /// False once the peer asked for single frames: every entry then holds one packet.
    segments: bool,
    max_packet: usize,
    queued: usize,
    sent: usize,
}

// SAFETY: the header pointers point only into this struct's own heap arrays, which move with it.
unsafe impl Send for PacketGsoTx {}

impl PacketGsoTx {
    /// Room for `entries` super-frames; `max_packet` is the largest single frame `fill` writes.
    pub fn new(entries: usize, max_packet: usize) -> PacketGsoTx {
        let entry_len = VNET_HDR_LEN + MAX_HEADERS + MAX_PAYLOAD;
        assert!(max_packet <= MAX_HEADERS + MAX_PAYLOAD);
        let mut mem = Slots::new(entries, entry_len);
        let mut iovs = slot_iovecs(&mut mem, 0);
        // No address: the socket sends on the interface it is bound to.
        let hdrs = msg_headers(&mut iovs, None, None);
        PacketGsoTx {
            mem,
            hdrs,
            iovs,
            len: vec![0; entries].into_boxed_slice(),
            layout: vec![None; entries].into_boxed_slice(),
            seg: vec![0; entries].into_boxed_slice(),
            segs: vec![0; entries].into_boxed_slice(),
            last_open: false,
            last_packet: (0, 0, 0),
            last_v4: false,
            segments: true,
            max_packet,
            queued: 0,
            sent: 0,
        }
    }

    /// True when no packet can be queued before a send: every entry is in use.
    pub fn is_full(&self) -> bool {
        self.queued == self.len.len()
    }

    /// Super-frames queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.queued - self.sent
    }

    /// From now on every frame leaves on its own (a peer that cannot take super-frames); true when
    /// frames were being joined until now.
    pub fn stop_segments(&mut self) -> bool {
        self.last_open = false;
        std::mem::replace(&mut self.segments, false)
    }

    /// Whether frames are joined into super-frames.
    pub fn segmenting(&self) -> bool {
        self.segments
    }

    /// Queues one frame: `fill` writes it (at most `max_packet` bytes) into the buffer it is given
    /// and returns its length, or declines with `None`. Returns the packet's segment index in its
    /// super-frame (0 for the first), or `None` when nothing was queued.
    pub fn try_push(&mut self, fill: impl FnOnce(&mut [u8]) -> Option<usize>) -> Option<u16> {
        if self.is_full() {
            return None;
        }
        let max = self.max_packet;
        let last = self.queued.wrapping_sub(1);
        if self.queued > self.sent
            && self.last_open
            && let Some((net, h, v4)) = self.layout[last]
            && self.segs[last] < MAX_SEGMENTS
            && self.len[last] - h + self.seg[last] <= MAX_PAYLOAD
            && VNET_HDR_LEN + self.len[last] - h + max <= self.mem.slot_len()
        {
            // The new frame is written whole where its payload must go, its headers over the tail
            // of the previous payload, which is saved and put back once they have been compared.
            let at = VNET_HDR_LEN + self.len[last] - h;
            let mut saved = [0u8; MAX_HEADERS];
            let entry = self.mem.slot_mut(last);
            saved[..h].copy_from_slice(&entry[at..at + h]);
            let Some(n) = fill(&mut entry[at..at + max]) else {
                entry[at..at + h].copy_from_slice(&saved[..h]);
                return None;
            };
            assert!(n <= max, "frame of {n} bytes exceeds max_packet {max}");
            let first = &entry[VNET_HDR_LEN..VNET_HDR_LEN + h];
            let fits = n > h
                && n - h <= self.seg[last]
                && layout(&entry[at..at + n]) == Some((net, h, v4))
                && same_flow(first, &entry[at..at + h], net, h, v4);
            if fits {
                entry[at..at + h].copy_from_slice(&saved[..h]);
                let index = self.segs[last];
                self.len[last] += n - h;
                self.segs[last] += 1;
                // A shorter segment must be the last one.
                self.last_open = n - h == self.seg[last];
                self.last_packet = (last, at + h, n - h);
                self.last_v4 = v4;
                return Some(index);
            }
            // Another flow or a longer packet: it moves to a fresh entry (one is free: not full).
            let e = self.queued;
            let (src, dst) = (self.mem.slot_ptr(last), self.mem.slot_ptr(e));
            // SAFETY: two distinct slots of our pool; `at + n` and `VNET_HDR_LEN + n` stay inside.
            unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(VNET_HDR_LEN), n) };
            self.mem.slot_mut(last)[at..at + h].copy_from_slice(&saved[..h]);
            self.open_entry(e, n);
            return Some(0);
        }
        let e = self.queued;
        let n = fill(&mut self.mem.slot_mut(e)[VNET_HDR_LEN..VNET_HDR_LEN + max])?;
        assert!(n <= max, "frame of {n} bytes exceeds max_packet {max}");
        self.open_entry(e, n);
        Some(0)
    }

    fn open_entry(&mut self, e: usize, n: usize) {
        let frame = &self.mem.slot(e)[VNET_HDR_LEN..VNET_HDR_LEN + n];
        let layout = layout(frame).filter(|&(_, h, _)| n > h);
        self.len[e] = n;
        self.layout[e] = layout.filter(|&(_, h, _)| self.segments && n - h >= MIN_SEGMENT);
        self.segs[e] = 1;
        self.queued += 1;
        let (h, v4) = layout.map_or((0, false), |(_, h, v4)| (h, v4));
        self.seg[e] = n - h;
        self.last_open = self.layout[e].is_some();
        self.last_packet = (e, VNET_HDR_LEN + h, n - h);
        self.last_v4 = v4;
    }

    /// The UDP payload (BTH..ICRC) of the packet the last successful [`try_push`](Self::try_push)
    /// queued, to finish in place, and whether it travels over IPv4.
    pub fn last_packet_mut(&mut self) -> (&mut [u8], bool) {
        let (e, at, len) = self.last_packet;
        (&mut self.mem.slot_mut(e)[at..at + len], self.last_v4)
    }

    /// Writes the `virtio_net_hdr` (and, for a super-frame, the super-frame's lengths and
    /// checksums) of entry `e`.
    fn finish_entry(&mut self, e: usize) {
        let n = self.len[e];
        let segs = self.segs[e];
        let seg = self.seg[e];
        let entry = self.mem.slot_mut(e);
        let mut vnet = [0u8; VNET_HDR_LEN];
        if let (Some((net, h, v4)), 2..) = (self.layout[e], segs) {
            let hdr = &mut entry[VNET_HDR_LEN..VNET_HDR_LEN + h];
            let ident = if v4 { get16(hdr, net + 4) } else { 0 };
            set_lengths(hdr, net, h, v4, n - h, ident);
            let pseudo = pseudo_header_sum(hdr, net, h, v4);
            put16(hdr, h - 8 + 6, pseudo);
            vnet[0] = F_NEEDS_CSUM;
            vnet[1] = GSO_UDP_L4;
            // Host byte order: AF_PACKET reads virtio_net_hdr as a legacy (native-endian) device.
            vnet[2..4].copy_from_slice(&(h as u16).to_ne_bytes());
            vnet[4..6].copy_from_slice(&(seg as u16).to_ne_bytes());
            vnet[6..8].copy_from_slice(&((h - 8) as u16).to_ne_bytes());
            vnet[8..10].copy_from_slice(&UDP_CSUM_OFFSET.to_ne_bytes());
        } else {
            vnet[1] = GSO_NONE;
        }
        entry[..VNET_HDR_LEN].copy_from_slice(&vnet);
        self.iovs[e].iov_len = VNET_HDR_LEN + n;
    }

    /// Sends the queued super-frames with as few `sendmmsg` calls as the kernel allows; what it
    /// does not take stays queued. Returns how many went out.
    pub(crate) fn send(&mut self, fd: RawFd) -> std::io::Result<usize> {
        // Nothing more may join the entries now being handed over.
        self.last_open = false;
        for e in self.sent..self.queued {
            self.finish_entry(e);
        }
        let sent_now = send_queued(fd, &mut self.hdrs, &mut self.sent, self.queued)?;
        if self.sent == self.queued {
            self.sent = 0;
            self.queued = 0;
        }
        Ok(sent_now)
    }
}

/// Hands `each` the frames that one frame received on a `PACKET_VNET_HDR` socket holds (`buf` starts
/// with the `virtio_net_hdr`): the frame itself, or each packet of a super-frame, its headers
/// rebuilt in place in front of its payload (over the tail of the previous payload, which has been
/// handed out by then): lengths, and for IPv4 the ID the kernel would have given segment k (the
/// first's plus k) and the header checksum. Returns how many frames it handed out.
pub fn split_frames(buf: &mut [u8], mut each: impl FnMut(&[u8])) -> usize {
    let Some((vnet, frame)) = buf.split_at_mut_checked(VNET_HDR_LEN) else {
        return 0;
    };
    let gso_size = usize::from(u16::from_ne_bytes([vnet[4], vnet[5]]));
    let layout = layout(frame).filter(|&(_, h, _)| frame.len() > h);
    let (Some((net, h, v4)), GSO_UDP_L4, 1..) = (layout, vnet[1], gso_size) else {
        each(frame);
        return 1;
    };
    let payload = frame.len() - h;
    let mut template = [0u8; MAX_HEADERS];
    template[..h].copy_from_slice(&frame[..h]);
    let ident = if v4 { get16(&template, net + 4) } else { 0 };
    let mut count = 0;
    let mut start = h;
    while start < frame.len() {
        let len = gso_size.min(frame.len() - start);
        let hdr = &mut frame[start - h..start];
        hdr.copy_from_slice(&template[..h]);
        set_lengths(hdr, net, h, v4, len, ident.wrapping_add(count as u16));
        each(&frame[start - h..start + len]);
        count += 1;
        start += len;
    }
    debug_assert_eq!(start - h, payload);
    count
}

#[cfg(test)]
pub(in crate::transport::soft) mod tests;
