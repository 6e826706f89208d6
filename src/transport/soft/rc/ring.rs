//! A fixed-capacity FIFO allocated once, so queues never allocate on the packet path.

use std::collections::VecDeque;

/// A FIFO that holds at most `capacity` items and never grows past what it allocated at creation.
#[derive(Debug, Clone)]
pub(crate) struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    /// An empty ring with room for `capacity` items, allocated now.
    pub(crate) fn with_capacity(capacity: usize) -> Ring<T> {
        Ring {
            items: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Maximum number of items.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of items held.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// True when no further item fits.
    pub(crate) fn is_full(&self) -> bool {
        self.items.len() >= self.capacity
    }

    /// Free slots.
    pub(crate) fn room(&self) -> usize {
        self.capacity - self.items.len()
    }

    /// Appends `item`, or gives it back when the ring is full.
    pub(crate) fn push_back(&mut self, item: T) -> Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        self.items.push_back(item);
        Ok(())
    }

    /// Removes the oldest item.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    /// Removes the `n` oldest items (at most all of them).
    pub(crate) fn drop_front(&mut self, n: usize) {
        self.items.drain(..n.min(self.items.len()));
    }

    /// The oldest item.
    pub(crate) fn front(&self) -> Option<&T> {
        self.items.front()
    }

    /// The oldest item, mutably.
    pub(crate) fn front_mut(&mut self) -> Option<&mut T> {
        self.items.front_mut()
    }

    /// The newest item, mutably.
    pub(crate) fn back_mut(&mut self) -> Option<&mut T> {
        self.items.back_mut()
    }

    /// The item `index` places after the oldest.
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.items.get(index)
    }

    /// The item `index` places after the oldest, mutably.
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.items.get_mut(index)
    }

    /// Oldest to newest.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Removes everything, keeping the allocation.
    pub(crate) fn clear(&mut self) {
        self.items.clear();
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
}
