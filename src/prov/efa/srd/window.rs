//! A peer's send window: its slots in sequence order, in a ring whose storage is reused, so
//! that a send writes its slot's fields where they live. Built whole on the stack and moved
//! into a `VecDeque`, a slot was read back right after it was written, in other widths and at
//! other offsets than it was written with: the CPU's store-to-load forwarding failed on it,
//! and those stalls were two-thirds of the samples of `Transport::launch` (perf annotate,
//! veth sender).

use core::ops::{Index, IndexMut};

pub(super) struct Window<T> {
    ring: Vec<T>,
    /// Where the front is in `ring`.
    head: usize,
    len: usize,
}

impl<T: Default> Window<T> {
    pub fn new() -> Window<T> {
        Window {
            ring: Vec::new(),
            head: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the `i`th of the window (`i` < `ring.len()`) is in `ring`.
    fn at(&self, i: usize) -> usize {
        let j = self.head + i;
        if j >= self.ring.len() {
            j - self.ring.len()
        } else {
            j
        }
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.ring[self.at(i)])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            let j = self.at(i);
            Some(&mut self.ring[j])
        } else {
            None
        }
    }

    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    #[cfg(test)]
    pub fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Adds one at the back and returns it: storage that a slot popped earlier left, with its
    /// fields as they were (the caller sets every one), or a new default one.
    pub fn push_back(&mut self) -> &mut T {
        if self.len == self.ring.len() {
            self.ring.rotate_left(self.head);
            self.head = 0;
            self.ring.push(T::default());
        }
        let j = self.at(self.len);
        self.len += 1;
        &mut self.ring[j]
    }

    /// Takes the front out of the window and returns it; its storage stays for a later push.
    pub fn pop_front(&mut self) -> Option<&mut T> {
        if self.len == 0 {
            return None;
        }
        let j = self.head;
        self.head = self.at(1);
        self.len -= 1;
        Some(&mut self.ring[j])
    }

    /// Empties the window (its storage stays).
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// In window order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        (0..self.len).map(move |i| &self.ring[self.at(i)])
    }

    /// In window order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let (wrapped, from_head) = self.ring.split_at_mut(self.head);
        from_head.iter_mut().chain(wrapped).take(self.len)
    }
}

impl<T: Default> Index<usize> for Window<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "slot {i} of a window of {}", self.len);
        &self.ring[self.at(i)]
    }
}

impl<T: Default> IndexMut<usize> for Window<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "slot {i} of a window of {}", self.len);
        let j = self.at(i);
        &mut self.ring[j]
    }
}

impl<T: Default + core::fmt::Debug> core::fmt::Debug for Window<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring agrees with a `VecDeque` through pushes and pops that wrap it and grow it.
    #[test]
    fn agrees_with_a_deque() {
        let mut w: Window<u32> = Window::new();
        let mut d = std::collections::VecDeque::new();
        let mut next = 0u32;
        let mut rng = 0x9E37_79B9_u32;
        for _ in 0..10_000 {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            if !rng.is_multiple_of(3) || d.is_empty() {
                *w.push_back() = next;
                d.push_back(next);
                next += 1;
            } else {
                assert_eq!(w.pop_front().copied(), d.pop_front());
            }
            assert_eq!(w.len(), d.len());
            assert!(w.iter().eq(d.iter()));
            assert!(w.iter().rev().eq(d.iter().rev()));
            assert!(w.iter_mut().map(|x| *x).eq(d.iter().copied()));
            assert_eq!(w.front(), d.front());
            assert_eq!(w.back(), d.back());
            assert_eq!(w.get(d.len()), None);
            if let Some(i) = (!d.is_empty()).then(|| rng as usize % d.len()) {
                assert_eq!(w[i], d[i]);
                *w.get_mut(i).unwrap() += 0;
            }
        }
        w.clear();
        assert!(w.is_empty() && w.front().is_none());
    }
}
