//! Memory regions: buffers the engine owns, registered ranges with access rights and lkey/rkey.
//!
//! As with verbs, a buffer is plain memory and a memory region (MR) is a registered window into
//! it. Every buffer gets a synthetic virtual address, so a region's `va` is what a peer puts in a
//! RETH. Remote WRITE/READ/atomics resolve through `MemoryTable::resolve_remote`, which checks the
//! rkey, the bounds and the access rights before any byte is touched.

use crate::transport::memory::{self, OutOfMemory};
use crate::transport::{Access, Error as TransportError, RecvRequest, SendRequest};

/// Where synthetic virtual addresses start; far from 0 so a zeroed RETH never hits a region.
const VA_BASE: u64 = 0x0000_1000_0000_0000;
/// Virtual-address gap left between buffers, so an overrun of one never aliases the next.
const VA_GAP: u64 = 1 << 20;

/// Identifies a buffer of a [`MemoryTable`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct BufferId(pub usize);

/// The keys and address of a registered region, what a peer needs (`rkey`, `va`, `len`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MrKeys {
    /// Local key: names the region in local work requests.
    pub lkey: u32,
    /// Remote key: names the region in a peer's RETH or AtomicETH.
    pub rkey: u32,
    /// Virtual address of the region's first byte.
    pub va: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A registered window of a buffer.
#[derive(Clone, Copy, Debug)]
pub struct MemoryRegion {
    /// The buffer it lies in.
    pub buffer: BufferId,
    /// Offset of its first byte in the buffer.
    pub offset: usize,
    /// Keys, address and length.
    pub keys: MrKeys,
    /// Rights granted.
    pub access: Access,
}

/// Why a memory access was refused; each is counted by the engine.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub(crate) enum AccessViolation {
    /// No region has this key.
    #[error("no memory region has key {0:#x}")]
    UnknownKey(u32),
    /// The range leaves the region.
    #[error("range {va:#x}+{len} lies outside the region")]
    OutOfBounds {
        /// Start of the requested range.
        va: u64,
        /// Length of the requested range.
        len: u64,
    },
    /// The region does not grant the right.
    #[error("the region does not grant access {0:?}")]
    AccessDenied(Access),
}

/// Registration errors.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum MrError {
    /// The buffer does not exist.
    #[error("no buffer {0}")]
    NoBuffer(usize),
    /// The window does not fit the buffer.
    #[error("region {offset}+{len} does not fit in buffer {buffer} of {buffer_len} bytes")]
    OutOfBuffer {
        /// Buffer index.
        buffer: usize,
        /// Requested offset.
        offset: usize,
        /// Requested length.
        len: usize,
        /// The buffer's length.
        buffer_len: usize,
    },
    /// More than 2^24 − 1 regions.
    #[error("too many memory regions")]
    TooMany,
}

/// A resolved, checked byte range: `len` bytes at `offset` of buffer `buffer`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Span {
    /// Buffer index.
    pub buffer: usize,
    /// First byte in the buffer.
    pub offset: usize,
    /// Length.
    pub len: usize,
}

struct Buffer {
    bytes: Box<[u8]>,
    va: u64,
}

/// The buffers and regions of one queue pair (or one protection domain).
pub struct MemoryTable {
    buffers: Vec<Buffer>,
    regions: Vec<MemoryRegion>,
    next_va: u64,
    key_salt: u32,
    /// This table's own number ([`id`](Self::id)).
    id: u64,
}

/// The next table's [`MemoryTable::id`].
static NEXT_TABLE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl MemoryTable {
    /// An empty table. `key_salt` varies the low key byte so keys from another table rarely match.
    pub fn new(key_salt: u32) -> MemoryTable {
        MemoryTable {
            buffers: Vec::new(),
            regions: Vec::new(),
            next_va: VA_BASE,
            key_salt,
            id: NEXT_TABLE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A number no other table of this process has. A region, once registered, never changes
    /// (regions are only added): a copy of one is this table's for as long as the ids agree.
    #[inline(always)]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Adds a zeroed buffer of `len` bytes and returns its id.
    pub fn add_buffer(&mut self, len: usize) -> BufferId {
        self.try_add_buffer(len).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Adds a zeroed buffer of `len` bytes and returns its id, or says that the host cannot give it.
    pub(crate) fn try_add_buffer(&mut self, len: usize) -> Result<BufferId, OutOfMemory> {
        let bytes = memory::zeroed(len)?;
        let va = self.next_va;
        self.next_va = (va + len as u64 + VA_GAP + 4095) & !4095;
        self.buffers.push(Buffer { bytes, va });
        Ok(BufferId(self.buffers.len() - 1))
    }

    /// Registers `len` bytes at `offset` of `buffer` with `access`; returns its keys.
    pub fn register(
        &mut self,
        buffer: BufferId,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<MrKeys, MrError> {
        let buf = self
            .buffers
            .get(buffer.0)
            .ok_or(MrError::NoBuffer(buffer.0))?;
        if offset
            .checked_add(len)
            .is_none_or(|end| end > buf.bytes.len())
        {
            return Err(MrError::OutOfBuffer {
                buffer: buffer.0,
                offset,
                len,
                buffer_len: buf.bytes.len(),
            });
        }
        let index = self.regions.len() as u32;
        if index >= 0x00ff_ffff {
            return Err(MrError::TooMany);
        }
        // rxe's layout: index in the upper 24 bits, a varying byte below, and lkey == rkey.
        let tag = (self
            .key_salt
            .wrapping_mul(0x9e37_79b9)
            .wrapping_add(index.wrapping_mul(0x45))
            >> 24)
            & 0xff;
        let key = ((index + 1) << 8) | tag;
        let keys = MrKeys {
            lkey: key,
            rkey: key,
            va: buf.va + offset as u64,
            len: len as u64,
        };
        // The postings' fast path (local_span) relies on it.
        debug_assert!(keys.va.checked_add(keys.len).is_some(), "region wraps");
        self.regions.push(MemoryRegion {
            buffer,
            offset,
            keys,
            access,
        });
        Ok(keys)
    }

    /// Adds a buffer and registers all of it: the common case of one buffer per QP.
    pub fn add_registered(&mut self, len: usize, access: Access) -> MrKeys {
        self.try_add_registered(len, access)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`add_registered`](Self::add_registered), or the error when the host cannot give the buffer.
    pub(crate) fn try_add_registered(
        &mut self,
        len: usize,
        access: Access,
    ) -> Result<MrKeys, OutOfMemory> {
        let b = self.try_add_buffer(len)?;
        Ok(self
            .register(b, 0, len, access)
            .expect("a fresh buffer holds its own full range"))
    }

    /// The region a key (lkey or rkey) names.
    #[inline]
    pub fn region(&self, key: u32) -> Option<&MemoryRegion> {
        // Key index 0 wraps to an index past any table (at most 0xff_fffe regions): one compare.
        let index = (key >> 8).wrapping_sub(1) as usize;
        self.regions.get(index).filter(|r| r.keys.lkey == key)
    }

    /// A buffer's bytes.
    pub fn buffer(&self, id: BufferId) -> &[u8] {
        &self.buffers[id.0].bytes
    }

    /// A buffer's bytes, for filling.
    pub fn buffer_mut(&mut self, id: BufferId) -> &mut [u8] {
        &mut self.buffers[id.0].bytes
    }

    /// A region's bytes, by key.
    pub fn region_bytes(&self, key: u32) -> Option<&[u8]> {
        let r = *self.region(key)?;
        Some(&self.buffers[r.buffer.0].bytes[r.offset..r.offset + r.keys.len as usize])
    }

    /// A region's bytes, by key, for filling.
    pub fn region_bytes_mut(&mut self, key: u32) -> Option<&mut [u8]> {
        let r = *self.region(key)?;
        Some(&mut self.buffers[r.buffer.0].bytes[r.offset..r.offset + r.keys.len as usize])
    }

    /// Checks a peer's access of `len` bytes at `va` under `rkey` needing `need`.
    pub(crate) fn resolve_remote(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<Span, AccessViolation> {
        let r = self.region(rkey).ok_or(AccessViolation::UnknownKey(rkey))?;
        Self::within(r, va, len, need)
    }

    /// [`resolve_remote`](Self::resolve_remote)'s span, or `None` where it refuses the access.
    /// Inlined: the responder's fast READ got its span back through memory from a call.
    #[inline(always)]
    pub(crate) fn remote_span(&self, rkey: u32, va: u64, len: u64, need: Access) -> Option<Span> {
        Self::within(self.region(rkey)?, va, len, need).ok()
    }

    /// The bytes of a peer's access of `len` bytes at `va` under `rkey` needing `need`, or `None`
    /// where [`resolve_remote`](Self::resolve_remote) refuses it. Inlined: the responder's fast
    /// path writes through it without a span, and two calls, in between.
    #[inline(always)]
    pub(crate) fn remote_mut(
        &mut self,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Option<&mut [u8]> {
        let s = Self::within(self.region(rkey)?, va, len, need).ok()?;
        Some(&mut self.buffers[s.buffer].bytes[s.offset..][..s.len])
    }

    /// Checks an access of `len` bytes at `va` inside region `r`, needing `need`.
    #[inline]
    fn within(r: &MemoryRegion, va: u64, len: u64, need: Access) -> Result<Span, AccessViolation> {
        let start = va
            .checked_sub(r.keys.va)
            .ok_or(AccessViolation::OutOfBounds { va, len })?;
        if start.checked_add(len).is_none_or(|end| end > r.keys.len) {
            return Err(AccessViolation::OutOfBounds { va, len });
        }
        if !r.access.contains(need) {
            return Err(AccessViolation::AccessDenied(need));
        }
        Ok(Span {
            buffer: r.buffer.0,
            offset: r.offset + start as usize,
            len: len as usize,
        })
    }

    /// Checks a local access of `len` bytes at `offset` into the region `lkey`, needing `need`.
    pub(crate) fn resolve_local(
        &self,
        lkey: u32,
        offset: u64,
        len: u64,
        need: Access,
    ) -> Result<Span, AccessViolation> {
        // The region is looked up once: a posting checks its local range with this.
        let r = self.region(lkey).ok_or(AccessViolation::UnknownKey(lkey))?;
        let va = r.keys.va;
        let va = va
            .checked_add(offset)
            .ok_or(AccessViolation::OutOfBounds { va, len })?;
        Self::within(r, va, len, need)
    }

    /// [`resolve_local`](Self::resolve_local)'s span in region `r` (already looked up: a copy of
    /// one of this table's, see [`id`](Self::id)), or `None` where it refuses the access: the
    /// postings' fast paths, which leave the reason to it.
    #[inline(always)]
    pub(crate) fn local_span_of(
        r: &MemoryRegion,
        offset: u64,
        len: u64,
        need: Access,
    ) -> Option<Span> {
        // `offset + len` must end inside the region (within's check, whose start is `offset`
        // again). resolve_local's first, that `va + offset` does not wrap, follows: a region
        // ends below 2^64 (its address sums the lengths of buffers allocated before it).
        if offset.checked_add(len).is_none_or(|end| end > r.keys.len) || !r.access.contains(need) {
            return None;
        }
        Some(Span {
            buffer: r.buffer.0,
            offset: r.offset + offset as usize,
            len: len as usize,
        })
    }

    /// Checks the local buffer of a send work request (`need` as its opcode requires); the error
    /// names the request.
    pub(crate) fn send_buffer(
        &self,
        lkey: u32,
        wr: &SendRequest,
        need: Access,
    ) -> crate::transport::Result<Span> {
        self.resolve_local(lkey, wr.offset, wr.len.into(), need)
            .map_err(|e| {
                TransportError::InvalidRequest(format!(
                    "work request {}: local range {}+{} refused: {e}",
                    wr.wr_id, wr.offset, wr.len
                ))
            })
    }

    /// Checks the buffer of a receive, which it must be allowed to write; the error names it.
    /// Inlined, its error made out of line: a posting's span then comes back in registers, not
    /// through memory.
    #[inline]
    pub(crate) fn recv_buffer(
        &self,
        lkey: u32,
        wr: &RecvRequest,
    ) -> crate::transport::Result<Span> {
        self.resolve_local(lkey, wr.offset, wr.len.into(), Access::LOCAL_WRITE)
            .map_err(|e| recv_refused(wr, e))
    }

    /// The bytes of a checked span. Inline: the requester writes every SEND or WRITE from it.
    #[inline(always)]
    pub(crate) fn span(&self, s: Span) -> &[u8] {
        &self.buffers[s.buffer].bytes[s.offset..s.offset + s.len]
    }

    /// The bytes of a checked span, mutably. Inline: the responder's fast path writes a SEND
    /// into its receive buffer through it, once a packet.
    #[inline]
    pub(crate) fn span_mut(&mut self, s: Span) -> &mut [u8] {
        &mut self.buffers[s.buffer].bytes[s.offset..s.offset + s.len]
    }

    /// Bytes `range` of a checked span, mutably: where a segment of a multi-packet WRITE lands.
    /// Always inlined: the responder's per-packet path, which [`span_mut`](Self::span_mut) left
    /// a call in.
    #[inline(always)]
    pub(crate) fn span_part_mut(&mut self, s: Span, range: std::ops::Range<usize>) -> &mut [u8] {
        &mut self.buffers[s.buffer].bytes[s.offset..s.offset + s.len][range]
    }
}

/// The error that refuses the buffer of receive `wr`. Cold: a refused receive is a caller's bug.
#[cold]
#[inline(never)]
fn recv_refused(wr: &RecvRequest, e: AccessViolation) -> TransportError {
    TransportError::InvalidRequest(format!(
        "receive {}: local range {}+{} refused: {e}; the buffer needs LOCAL_WRITE",
        wr.wr_id, wr.offset, wr.len
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (MemoryTable, BufferId, MrKeys) {
        let mut t = MemoryTable::new(7);
        let b = t.add_buffer(1024);
        let k = t
            .register(b, 100, 200, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        (t, b, k)
    }

    #[test]
    fn remote_access_is_checked_for_key_bounds_and_rights() {
        let (t, _, k) = table();
        let s = t
            .resolve_remote(k.rkey, k.va + 10, 20, Access::REMOTE_WRITE)
            .unwrap();
        assert_eq!(
            s,
            Span {
                buffer: 0,
                offset: 110,
                len: 20
            }
        );
        assert_eq!(
            t.resolve_remote(k.rkey, k.va, 200, Access::REMOTE_WRITE)
                .unwrap()
                .len,
            200
        );
        assert_eq!(
            t.resolve_remote(k.rkey ^ 0x100, k.va, 1, Access::REMOTE_WRITE),
            Err(AccessViolation::UnknownKey(k.rkey ^ 0x100))
        );
        assert!(matches!(
            t.resolve_remote(k.rkey, k.va + 1, 200, Access::REMOTE_WRITE),
            Err(AccessViolation::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.resolve_remote(k.rkey, k.va - 1, 2, Access::REMOTE_WRITE),
            Err(AccessViolation::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.resolve_remote(k.rkey, u64::MAX, 2, Access::REMOTE_WRITE),
            Err(AccessViolation::OutOfBounds { .. })
        ));
        assert_eq!(
            t.resolve_remote(k.rkey, k.va, 8, Access::REMOTE_READ),
            Err(AccessViolation::AccessDenied(Access::REMOTE_READ))
        );
    }

    #[test]
    fn keys_differ_between_regions_and_tables() {
        let (mut t, b, k) = table();
        let k2 = t.register(b, 0, 10, Access::REMOTE_READ).unwrap();
        assert_ne!(k.rkey, k2.rkey);
        assert_eq!(t.region(k2.lkey).unwrap().offset, 0);
        assert!(t.region(0).is_none());
        assert!(t.region(0xffff_ff00).is_none());
    }

    #[test]
    fn registration_must_fit_the_buffer() {
        let (mut t, b, _) = table();
        assert!(matches!(
            t.register(b, 1000, 25, Access::LOCAL_WRITE),
            Err(MrError::OutOfBuffer { .. })
        ));
        assert!(matches!(
            t.register(b, usize::MAX, 2, Access::LOCAL_WRITE),
            Err(MrError::OutOfBuffer { .. })
        ));
        assert!(matches!(
            t.register(BufferId(9), 0, 1, Access::LOCAL_WRITE),
            Err(MrError::NoBuffer(9))
        ));
    }

    #[test]
    fn buffers_get_disjoint_addresses() {
        let mut t = MemoryTable::new(1);
        let a = t.add_registered(5000, Access::REMOTE_WRITE);
        let b = t.add_registered(10, Access::REMOTE_WRITE);
        assert!(b.va >= a.va + a.len + VA_GAP);
        assert!(
            t.resolve_remote(a.rkey, b.va, 1, Access::REMOTE_WRITE)
                .is_err()
        );
    }

    #[test]
    fn local_offsets_are_relative_to_the_region() {
        let (t, _, k) = table();
        let s = t.resolve_local(k.lkey, 5, 10, Access::LOCAL_WRITE).unwrap();
        assert_eq!(s.offset, 105);
        assert!(
            t.resolve_local(k.lkey, 195, 10, Access::LOCAL_WRITE)
                .is_err()
        );
    }
}
