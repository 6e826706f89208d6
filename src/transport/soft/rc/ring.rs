//! A fixed-capacity FIFO allocated once, so queues never allocate on the packet path.

use std::fmt;

/// A FIFO that holds at most `capacity` items and never grows past what it allocated at creation.
///
/// Its slots are allocated at creation and reused in a circle, and a push writes its slot in
/// place: no growth path to check (a `VecDeque`'s push keeps one, and a call with it). Items are
/// plain values (`Copy`), so a slot is read by copy and a removed item needs no drop.
#[derive(Clone)]
pub(crate) struct Ring<T> {
    /// The slots written so far, at most `mask + 1` (allocated whole at creation): the `len`
    /// from `head` on, wrapping at `mask + 1`, hold the items; the others stale copies. Every
    /// slot that holds an item lies within it: a push writes its slot before the item counts
    /// ([`held`](Self::held) reads one without a bounds check).
    items: Vec<T>,
    /// The oldest item's slot.
    head: usize,
    len: usize,
    capacity: usize,
    /// The slots (`capacity` rounded up to a power of two) less one: a slot index wraps by a
    /// mask, without the compare and select a wrap at `capacity` took.
    mask: usize,
}

impl<T: Copy> Ring<T> {
    /// An empty ring with room for `capacity` items, allocated now.
    pub(crate) fn with_capacity(capacity: usize) -> Ring<T> {
        let slots = capacity.next_power_of_two();
        Ring {
            items: Vec::with_capacity(slots),
            head: 0,
            len: 0,
            capacity,
            mask: slots - 1,
        }
    }

    /// An empty ring with room for `capacity` items, every slot written with `fill` now: a push
    /// then always finds its slot written, and [`push_back_slot`](Self::push_back_slot) hands it out.
    pub(crate) fn filled(capacity: usize, fill: T) -> Ring<T> {
        let slots = capacity.next_power_of_two();
        Ring {
            items: vec![fill; slots],
            head: 0,
            len: 0,
            capacity,
            mask: slots - 1,
        }
    }

    /// Maximum number of items.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of items held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when no further item fits.
    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Free slots.
    pub(crate) fn room(&self) -> usize {
        self.capacity - self.len
    }

    /// The slot of the item `index` places after the oldest (`index` at most the capacity).
    #[inline(always)]
    fn slot(&self, index: usize) -> usize {
        (self.head + index) & self.mask
    }

    /// The item in slot `at`, which holds one (`at` is `slot(index)` for an `index` below `len`):
    /// read without the bounds check, which every look at the ring paid.
    #[inline(always)]
    fn held(&self, at: usize) -> &T {
        debug_assert!(at < self.items.len(), "slot {at} holds no item");
        // SAFETY: a slot that holds an item lies within `items`: every push writes its slot (an
        // existing element, or one appended at index `items.len()`, see `write`) before it counts
        // the item in `len`, `items` never shrinks, and `head` and `len` only ever name slots
        // pushes wrote (pops and drops step over held items, `clear` holds none).
        unsafe { self.items.get_unchecked(at) }
    }

    /// [`held`](Self::held), mutably.
    #[inline(always)]
    fn held_mut(&mut self, at: usize) -> &mut T {
        debug_assert!(at < self.items.len(), "slot {at} holds no item");
        // SAFETY: as in `held`.
        unsafe { self.items.get_unchecked_mut(at) }
    }

    /// Writes `item` into slot `at`, the next slot a push writes (`slot(len)`); false, with
    /// nothing written, if that slot is neither within `items` nor the next one to append (never,
    /// as slots are first written in order: a guard of the invariant `held` relies on).
    #[inline(always)]
    fn write(&mut self, at: usize, item: T) -> bool {
        let written = self.items.len();
        match self.items.get_mut(at) {
            Some(slot) => *slot = item,
            None if at == written => self.items.push(item),
            None => return false,
        }
        true
    }

    /// Appends `item`, or gives it back when the ring is full.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, item: T) -> Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        let at = self.slot(self.len);
        // Slots are first written in order, so a slot not yet written is the next one; the
        // allocation already holds it.
        if !self.write(at, item) {
            return Err(item);
        }
        self.len += 1;
        Ok(())
    }

    /// Appends `item`, dropping the oldest item when the ring is full (a ring of capacity 0 keeps
    /// nothing). The oldest goes by a step of the head, not a `pop_front` that reads it.
    #[inline(always)]
    pub(crate) fn push_back_evicting(&mut self, item: T) {
        // Written after the newest whether or not the ring is full: the slots are `capacity`
        // rounded up, so that slot is the oldest's only when they are the same number. At
        // capacity 0 it is the one slot, which the head, stepping by a mask of 0, never leaves.
        let at = self.slot(self.len);
        if !self.write(at, item) {
            return;
        }
        if self.is_full() {
            self.head = (self.head + 1) & self.mask;
        } else {
            self.len += 1;
        }
    }

    /// Appends an item the caller writes into the slot returned (it holds a stale item), or
    /// `None` when the ring is full or the slot was never written (a ring not [`filled`](Self::filled)):
    /// a large item is then built in place, not on the stack and copied.
    #[inline(always)]
    pub(crate) fn push_back_slot(&mut self) -> Option<&mut T> {
        if self.is_full() {
            return None;
        }
        let at = self.slot(self.len);
        let slot = self.items.get_mut(at)?;
        self.len += 1;
        Some(slot)
    }

    /// Removes the oldest item.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        self.pop_front_if(|_| true)
    }

    /// Removes the oldest item when `fits` accepts it: one look at it, where a `front` then a
    /// `drop_front` checked the length twice.
    #[inline(always)]
    pub(crate) fn pop_front_if(&mut self, fits: impl FnOnce(&T) -> bool) -> Option<T> {
        let item = *self.front().filter(|item| fits(item))?;
        self.len -= 1;
        // The last item out (a ping-pong's lone receive or request): the head stays, where the
        // next push writes, without the step.
        if self.len > 0 {
            self.head = (self.head + 1) & self.mask;
        }
        Some(item)
    }

    /// Moves the oldest items into `out`, as many as it holds and `out` takes; how many.
    #[inline(always)]
    pub(crate) fn pop_into(&mut self, out: &mut [T]) -> usize {
        // One item (a ping-pong's completion, a SEND's receive each round trip): a copy without
        // the loop's set-up and count.
        if self.len == 1
            && let Some(first) = out.first_mut()
        {
            *first = *self.held(self.head);
            // The head stays: an empty ring's next push writes at the head, a slot free now.
            self.len = 0;
            return 1;
        }
        self.pop_many_into(out)
    }

    /// [`pop_into`](Self::pop_into) of any count. Out of line: the loop's registers stay out of
    /// the polls that inline the one-item copy.
    #[inline(never)]
    fn pop_many_into(&mut self, out: &mut [T]) -> usize {
        // The count known first: each item is then a copy and a step of the head, where a
        // `pop_front` a slot re-checked the length and built an `Option` of the item.
        let n = self.len.min(out.len());
        let mut at = self.head;
        for slot in &mut out[..n] {
            *slot = *self.held(at);
            at = (at + 1) & self.mask;
        }
        self.head = at;
        self.len -= n;
        n
    }

    /// Removes the `n` oldest items (at most all of them).
    #[inline(always)]
    pub(crate) fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.head = self.slot(n);
        self.len -= n;
    }

    /// The oldest item.
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        Some(self.held(self.head))
    }

    /// The oldest item, mutably.
    #[inline(always)]
    pub(crate) fn front_mut(&mut self) -> Option<&mut T> {
        if self.len == 0 {
            return None;
        }
        Some(self.held_mut(self.head))
    }

    /// The newest item, mutably.
    pub(crate) fn back_mut(&mut self) -> Option<&mut T> {
        let last = self.len.checked_sub(1)?;
        self.get_mut(last)
    }

    /// The item `index` places after the oldest.
    #[inline(always)]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        Some(self.held(self.slot(index)))
    }

    /// The item `index` places after the oldest, mutably.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index >= self.len {
            return None;
        }
        let at = self.slot(index);
        Some(self.held_mut(at))
    }

    /// Oldest to newest.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        let (first, wrapped) = self.as_slices();
        first.iter().chain(wrapped)
    }

    /// The items oldest first, in two runs: from the head to the end of the slots, then those
    /// wrapped to the start.
    #[inline(always)]
    pub(crate) fn as_slices(&self) -> (&[T], &[T]) {
        let end = self.head + self.len;
        let slots = self.mask + 1;
        let (first, wrapped) = if end <= slots {
            (self.items.get(self.head..end), self.items.get(..0))
        } else {
            let wrapped = end - slots;
            (self.items.get(self.head..), self.items.get(..wrapped))
        };
        (first.unwrap_or_default(), wrapped.unwrap_or_default())
    }

    /// Removes everything, keeping the allocation.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As a `VecDeque` of the items prints, with the capacity beside it.
        struct Items<'a, T>(&'a Ring<T>);
        impl<T: Copy + fmt::Debug> fmt::Debug for Items<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list().entries(self.0.iter()).finish()
            }
        }
        f.debug_struct("Ring")
            .field("items", &Items(self))
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_items_beyond_capacity_and_keeps_order() {
        let mut r = Ring::with_capacity(2);
        assert!(r.push_back(1).is_ok());
        assert!(r.push_back(2).is_ok());
        assert_eq!(r.push_back(3), Err(3));
        assert_eq!(r.pop_front(), Some(1));
        assert!(r.push_back(4).is_ok());
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(r.room(), 0);
    }

    #[test]
    fn an_evicting_push_drops_the_oldest_at_any_capacity() {
        // 3 items in 4 slots (the slots wrap by a mask), 4 in 4, and none.
        for cap in [3usize, 4] {
            let mut r = Ring::with_capacity(cap);
            for i in 0..10u32 {
                r.push_back_evicting(i);
                let want: Vec<u32> = (i.saturating_sub(cap as u32 - 1)..=i).collect();
                assert_eq!(
                    r.iter().copied().collect::<Vec<_>>(),
                    want,
                    "capacity {cap}"
                );
                assert_eq!(r.front(), want.first());
            }
        }
        let mut r = Ring::with_capacity(0);
        r.push_back_evicting(1u32);
        assert!(r.is_empty());
    }

    #[test]
    fn the_last_item_out_leaves_the_head_for_the_next_push() {
        let mut r = Ring::filled(2, 0);
        let mut out = [0; 4];
        for round in 0..3 {
            *r.push_back_slot().unwrap() = round;
            assert_eq!(r.pop_into(&mut out), 1);
            assert_eq!(out[0], round);
            r.push_back(round + 10).unwrap();
            assert_eq!(r.pop_front_if(|_| true), Some(round + 10));
            assert!(r.is_empty());
        }
        r.push_back(1).unwrap();
        r.push_back(2).unwrap();
        assert_eq!(r.pop_front(), Some(1));
        r.push_back(3).unwrap();
        assert_eq!(r.pop_into(&mut out), 2);
        assert_eq!(out[..2], [2, 3]);
    }

    #[test]
    fn never_reallocates_within_capacity() {
        let mut r = Ring::with_capacity(100);
        let cap_before = r.items.capacity();
        for round in 0..10 {
            for i in 0..100 {
                r.push_back(round * 100 + i).unwrap();
            }
            while r.pop_front().is_some() {}
        }
        assert_eq!(r.items.capacity(), cap_before);
    }

    #[test]
    fn hands_out_slots_in_order_only_when_filled() {
        let mut r = Ring::filled(2, 0);
        *r.push_back_slot().unwrap() = 1;
        *r.push_back_slot().unwrap() = 2;
        assert!(r.push_back_slot().is_none());
        assert_eq!(r.pop_front_if(|&i| i > 1), None);
        assert_eq!(r.pop_front_if(|&i| i == 1), Some(1));
        *r.push_back_slot().unwrap() = 3;
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 3]);
        assert!(Ring::<u8>::with_capacity(1).push_back_slot().is_none());
    }
}
