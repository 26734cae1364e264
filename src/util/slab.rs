//! A table of pending operations addressed by ids that peers echo back. Ids carry a generation,
//! so a stale or forged id never reaches an operation it does not name.

#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    pub fn new() -> Slab<T> {
        Slab::default()
    }

    /// `insert` of the value `make` returns, built where it is kept when the compiler can:
    /// a large value built first and then moved in was a `memcpy` call per insert.
    #[inline]
    pub fn insert_with(&mut self, make: impl FnOnce() -> T) -> u64 {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            // The next insert's slot, while this one is filled (see `prefetch`).
            if let Some(&next) = self.free.last()
                && let Some(slot) = self.slots.get(next as usize)
            {
                crate::sys::mem::prefetch(slot);
            }
            let slot = &mut self.slots[i as usize];
            slot.0 = slot.0.wrapping_add(1);
            slot.1 = Some(make());
            return (u64::from(slot.0) << 32) | u64::from(i);
        }
        self.slots.push((1, Some(make())));
        (1u64 << 32) | (self.slots.len() as u64 - 1)
    }

    /// Stores `v`; returns its id.
    #[inline]
    pub fn insert(&mut self, v: T) -> u64 {
        self.insert_with(|| v)
    }

    /// Asks the core for the slot of `id` ahead of a `get`/`remove` of it: a table of
    /// operations in flight is touched when each is posted and again when it completes, and
    /// between the two a bulk transfer streams megabytes through the caches. Only a hint:
    /// nothing is read, and an id that names no slot is ignored.
    #[inline(always)]
    pub fn prefetch(&self, id: u64) {
        if let Some(slot) = self.slots.get((id & 0xffff_ffff) as usize) {
            crate::sys::mem::prefetch(slot);
        }
    }

    #[inline]
    fn index(&self, id: u64) -> Option<usize> {
        let i = (id & 0xffff_ffff) as usize;
        let generation = (id >> 32) as u32;
        match self.slots.get(i) {
            Some((g, Some(_))) if *g == generation => Some(i),
            _ => None,
        }
    }

    #[inline]
    pub fn get(&self, id: u64) -> Option<&T> {
        self.index(id).and_then(|i| self.slots[i].1.as_ref())
    }

    #[inline]
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        self.index(id).and_then(|i| self.slots[i].1.as_mut())
    }

    /// Removes the entry after `f` took what it wants from it where it lies: no move of the
    /// whole value out of its slot (a `memcpy` call for a large one). Whether `id` named one.
    #[inline]
    pub fn remove_with(&mut self, id: u64, f: impl FnOnce(&mut T)) -> bool {
        let Some(i) = self.index(id) else {
            return false;
        };
        self.len -= 1;
        self.free.push(i as u32);
        if let Some(v) = self.slots[i].1.as_mut() {
            f(v);
        }
        self.slots[i].1 = None;
        true
    }

    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let i = self.index(id)?;
        self.len -= 1;
        self.free.push(i as u32);
        self.slots[i].1.take()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A 32-bit form of `id` for wire protocols that carry u32 operation ids: 15 bits of
    /// generation and 16 of index (so at most 65536 live entries can be named this way); the top
    /// bit is left to the caller (e.g. to tell two tables apart).
    pub fn wire_id(id: u64) -> Option<u32> {
        let i = id & 0xffff_ffff;
        if i > 0xffff {
            return None;
        }
        Some((((id >> 32) as u32 & 0x7fff) << 16) | i as u32)
    }

    /// The full id of a live entry named by a [`Slab::wire_id`] (top bit ignored), if its
    /// generation matches.
    pub fn from_wire(&self, w: u32) -> Option<u64> {
        let i = (w & 0xffff) as usize;
        match self.slots.get(i) {
            Some((g, Some(_))) if (g & 0x7fff) == (w >> 16) & 0x7fff => {
                Some((u64::from(*g) << 32) | i as u64)
            }
            _ => None,
        }
    }

    /// Ids of entries matching `pred`.
    pub fn ids_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, (g, v))| {
                v.as_ref()
                    .filter(|v| pred(v))
                    .map(|_| (u64::from(*g) << 32) | i as u64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_and_forged_ids_miss() {
        let mut s = Slab::new();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.get(a), Some(&"a"));
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.get(a), None);
        let c = s.insert("c");
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "slot reused");
        assert_eq!(s.get(a), None, "old id must not reach the new entry");
        assert_eq!(s.get(c), Some(&"c"));
        assert_eq!(s.get(u64::MAX), None);
        assert_eq!(s.len(), 2);
        assert_eq!(s.ids_where(|v| *v == "b"), [b]);
        let w = Slab::<&str>::wire_id(c).unwrap();
        assert_eq!(s.from_wire(w), Some(c));
        assert_eq!(s.from_wire(Slab::<&str>::wire_id(a).unwrap()), None);
        assert_eq!(s.from_wire(0x7fff_ffff), None);
        let mut taken = "";
        assert!(s.remove_with(b, |v| taken = *v));
        assert_eq!((taken, s.get(b), s.len()), ("b", None, 1));
        assert!(!s.remove_with(b, |_| panic!("a removed entry is not handed over")));
        assert_eq!(
            s.from_wire(w | 0x8000_0000),
            Some(c),
            "the top bit is the caller's"
        );
    }

    #[test]
    fn prefetch_of_any_id_changes_nothing() {
        let mut s = Slab::new();
        s.prefetch(0);
        let a = s.insert(1u64);
        let b = s.insert(2u64);
        s.remove(a);
        // Stale, forged, out of range: a hint, never a fault nor a change.
        for id in [a, b, u64::MAX, b + (1 << 32), 7] {
            s.prefetch(id);
        }
        assert_eq!((s.len(), s.get(a), s.get(b)), (1, None, Some(&2)));
        // The insert that prefetches the next free slot fills the right one.
        s.remove(b);
        let c = s.insert(3);
        let d = s.insert(4);
        assert_eq!((s.get(c), s.get(d), s.len()), (Some(&3), Some(&4), 2));
        assert_ne!(c & 0xffff_ffff, d & 0xffff_ffff);
    }
}
