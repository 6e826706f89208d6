//! [`PinnedBuf`]: the page-aligned, zeroed memory a queue pair registers, which the NIC reads and
//! writes behind Rust's back (hence raw, not a `Vec`).

use crate::transport::memory::{self, OutOfMemory};
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// Page size the buffers are aligned and rounded to.
const PAGE: usize = 4096;

/// A zeroed, page-aligned buffer that the NIC may read and write (hence raw, not a `Vec`).
pub(super) struct PinnedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl PinnedBuf {
    /// At least `len` zeroed bytes, rounded up to whole pages, or the error when the host cannot
    /// give them.
    pub(super) fn new(len: usize) -> Result<PinnedBuf, OutOfMemory> {
        let too_much = OutOfMemory { bytes: len };
        let len = len
            .checked_next_multiple_of(PAGE)
            .ok_or(too_much)?
            .max(PAGE);
        let layout = Layout::from_size_align(len, PAGE).map_err(|_| too_much)?;
        // SAFETY: the layout has a non-zero size.
        let p = memory::handled(|| unsafe { alloc_zeroed(layout) });
        let ptr = NonNull::new(p).ok_or(OutOfMemory { bytes: len })?;
        Ok(PinnedBuf { ptr, layout })
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        self.layout.size()
    }

    /// Its address, as the NIC sees it.
    pub(super) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// The whole buffer.
    pub(super) fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocation is `len()` bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    /// The whole buffer, mutably.
    pub(super) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only Rust reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the MR that pinned it is dropped first
        // (field order in `Qp`).
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}
