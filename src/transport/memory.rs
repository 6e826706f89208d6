//! Fallible zeroed buffers: a queue pair's memory that the host cannot give is an error the user can
//! act on (fewer queue pairs, smaller messages), never an abort.

use std::alloc::{Layout, alloc_zeroed};
use std::cell::Cell;

thread_local! {
    /// Set while [`zeroed`] allocates: a global allocator that ends the process on failure (the
    /// binaries' `ExitOnOom`) returns null instead, so the failure becomes this module's error.
    static HANDLED: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread makes an allocation whose failure its caller handles (see [`zeroed`]).
pub(crate) fn failure_is_handled() -> bool {
    // try_with: the allocator also runs while thread-locals are torn down.
    HANDLED.try_with(Cell::get).unwrap_or(false)
}

/// The allocator refused `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate {bytes} bytes ({}) of buffer memory", human_bytes(*bytes as u64))]
pub struct OutOfMemory {
    /// What was asked for.
    pub bytes: usize,
}

/// Runs `alloc`, an allocation whose failure (a null pointer) the caller handles.
pub(crate) fn handled<T>(alloc: impl FnOnce() -> T) -> T {
    HANDLED.with(|h| h.set(true));
    let out = alloc();
    HANDLED.with(|h| h.set(false));
    out
}

/// `len` zeroed bytes, or [`OutOfMemory`]. Zeroed pages come from the allocator (`calloc`'s lazily
/// zeroed pages for large sizes), so nothing is touched that the run does not touch.
pub(crate) fn zeroed(len: usize) -> Result<Box<[u8]>, OutOfMemory> {
    if len == 0 {
        return Ok(Box::default());
    }
    let layout = Layout::array::<u8>(len).map_err(|_| OutOfMemory { bytes: len })?;
    // SAFETY: the layout has a non-zero size.
    let p = handled(|| unsafe { alloc_zeroed(layout) });
    if p.is_null() {
        return Err(OutOfMemory { bytes: len });
    }
    // SAFETY: `p` holds `len` initialised (zeroed) bytes allocated by the global allocator with the
    // layout of a `[u8; len]`, which is the layout `Box<[u8]>` frees it with.
    Ok(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) })
}

/// `16 MiB`, `1.5 GiB`, `512 B`: a byte count as a person reads it.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zeroed_and_impossible_sizes_are_errors() {
        let b = zeroed(3000).unwrap();
        assert_eq!(b.len(), 3000);
        assert!(b.iter().all(|&x| x == 0));
        assert!(zeroed(0).unwrap().is_empty());
        assert_eq!(zeroed(usize::MAX).unwrap_err().bytes, usize::MAX);
        let e = zeroed(isize::MAX as usize).unwrap_err();
        assert!(e.to_string().starts_with("cannot allocate"), "{e}");
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes(256 << 30), "256 GiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
