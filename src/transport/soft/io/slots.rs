//! Fixed-size packet slots carved out of one allocation: the buffer pool behind every batch.
//!
//! A batch of N packets owns N slots of `slot_len` bytes each, allocated once when the backend is
//! created. Receiving and sending reuse the same slots forever, so the hot path never allocates.

/// `count` slots of `slot_len` bytes in one contiguous, zero-initialised allocation.
pub(crate) struct Slots {
    mem: Box<[u8]>,
    slot_len: usize,
    count: usize,
}

impl Slots {
    /// Allocates `count` slots of `slot_len` bytes (rounded up to a multiple of 64 so that slots do
    /// not share cache lines).
    pub(crate) fn new(count: usize, slot_len: usize) -> Slots {
        assert!(
            count > 0 && slot_len > 0,
            "a slot pool needs at least one non-empty slot"
        );
        let slot_len = slot_len.next_multiple_of(64);
        Slots {
            mem: vec![0u8; count * slot_len].into_boxed_slice(),
            slot_len,
            count,
        }
    }

    /// Number of slots.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Bytes per slot.
    pub(crate) fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Slot `i`, whole.
    pub(crate) fn slot(&self, i: usize) -> &[u8] {
        &self.mem[i * self.slot_len..(i + 1) * self.slot_len]
    }

    /// The first `len` bytes of slot `i` (all of it when `len` is longer): a received packet,
    /// sliced with two bounds checks where the whole slot and then its head took four.
    #[inline]
    pub(crate) fn head(&self, i: usize, len: usize) -> &[u8] {
        &self.mem[i * self.slot_len..][..len.min(self.slot_len)]
    }

    /// Slot `i`, whole, writable.
    #[inline]
    pub(crate) fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.mem[i * self.slot_len..(i + 1) * self.slot_len]
    }

    /// `len` bytes of slot `i` from `at` (`at + len` within the slot): a packet to write, sliced
    /// with two bounds checks where the whole slot and then its part took four.
    #[inline]
    pub(crate) fn part_mut(&mut self, i: usize, at: usize, len: usize) -> &mut [u8] {
        debug_assert!(at + len <= self.slot_len);
        &mut self.mem[i * self.slot_len + at..][..len]
    }

    /// The first `len` bytes of slot 0 (`len` within the slot): one bounds check, where
    /// [`part_mut`](Self::part_mut) of slot 0 took two.
    #[inline(always)]
    pub(crate) fn first_mut(&mut self, len: usize) -> &mut [u8] {
        debug_assert!(len <= self.slot_len);
        &mut self.mem[..len]
    }

    /// Raw pointer to slot 0, without [`slot_ptr`](Self::slot_ptr)'s check on every send: the
    /// pool's start, and slot 0 always exists (`new` asserts a slot).
    #[inline(always)]
    pub(crate) fn first_ptr(&mut self) -> *mut u8 {
        self.mem.as_mut_ptr()
    }

    /// Raw pointer to slot `i`, for the iovecs the kernel fills or reads.
    #[inline]
    pub(crate) fn slot_ptr(&mut self, i: usize) -> *mut u8 {
        assert!(i < self.count);
        // SAFETY: i < count, so the offset stays inside the allocation.
        unsafe { self.mem.as_mut_ptr().add(i * self.slot_len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_disjoint_and_aligned_in_size() {
        let mut s = Slots::new(3, 100);
        assert_eq!(s.slot_len(), 128);
        s.slot_mut(1).fill(7);
        assert!(s.slot(0).iter().all(|&b| b == 0));
        assert!(s.slot(1).iter().all(|&b| b == 7));
        assert!(s.slot(2).iter().all(|&b| b == 0));
        let p0 = s.slot_ptr(0) as usize;
        let p2 = s.slot_ptr(2) as usize;
        assert_eq!(p2 - p0, 256);
    }
}
