//! Selective acknowledgement bits: which of the datagrams past a point have arrived. The
//! receiver keeps one set per peer (bit i: `expected + i`), an acknowledgement carries one
//! (bit i: `cum + 1 + i`), and the width is the most datagrams a sender may have in flight.

use core::fmt;

/// 64-bit words in a set.
pub const SACK_WORDS: usize = 4;
/// Datagrams a set covers.
pub const SACK_BITS: u32 = 64 * SACK_WORDS as u32;
/// Bytes of a set on the wire (little-endian words, lowest bit first).
pub const SACK_BYTES: usize = 8 * SACK_WORDS;

#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Sack([u64; SACK_WORDS]);

impl Sack {
    pub const EMPTY: Sack = Sack([0; SACK_WORDS]);

    /// Word i holds bits `64 i .. 64 i + 63`.
    #[cfg(test)]
    pub const fn from_words(words: [u64; SACK_WORDS]) -> Sack {
        Sack(words)
    }

    /// A set with the bits listed.
    #[cfg(test)]
    pub fn of(bits: &[u32]) -> Sack {
        let mut s = Sack::EMPTY;
        for &b in bits {
            s.insert(b);
        }
        s
    }

    pub fn words(&self) -> [u64; SACK_WORDS] {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().fold(0, |a, w| a | w) == 0
    }

    /// Whether bit `i` is set (none is past [`SACK_BITS`]).
    pub fn contains(&self, i: u32) -> bool {
        i < SACK_BITS && self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`; one past [`SACK_BITS`] is ignored (callers check first).
    pub fn insert(&mut self, i: u32) {
        if i < SACK_BITS {
            self.0[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    /// How many bits are set from bit 0 up before the first clear one.
    pub fn trailing_ones(&self) -> u32 {
        let mut n = 0;
        for w in self.0 {
            n += w.trailing_ones();
            if w != u64::MAX {
                break;
            }
        }
        n
    }

    /// Moves every bit `n` places down (bit `i + n` becomes bit `i`); those below `n` are
    /// dropped.
    pub fn shift_down(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        let (words, bits) = ((n / 64) as usize, n % 64);
        let src = self.0;
        let at = |i: usize| src.get(i).copied().unwrap_or(0);
        for (i, w) in self.0.iter_mut().enumerate() {
            let (lo, hi) = (at(i + words), at(i + words + 1));
            *w = if bits == 0 {
                lo
            } else {
                lo >> bits | hi << (64 - bits)
            };
        }
    }

    /// The set bits, lowest first.
    pub fn iter(&self) -> Ones {
        Ones {
            words: self.0,
            at: 0,
        }
    }

    /// The set in its first [`SACK_BYTES`] bytes of `b` (callers checked the length).
    pub fn read(b: &[u8]) -> Sack {
        let mut words = [0u64; SACK_WORDS];
        for (w, chunk) in words.iter_mut().zip(b[..SACK_BYTES].chunks_exact(8)) {
            let mut v = [0u8; 8];
            v.copy_from_slice(chunk);
            *w = u64::from_le_bytes(v);
        }
        Sack(words)
    }

    /// Writes the set into the first [`SACK_BYTES`] bytes of `b`.
    pub fn write(&self, b: &mut [u8]) {
        for (w, chunk) in self.0.iter().zip(b[..SACK_BYTES].chunks_exact_mut(8)) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// The set bits of a [`Sack`], lowest first: a word at a time, each zero word one compare (an
/// ack in order names none, and the walk over its words was a tenth of `on_ack`).
pub struct Ones {
    words: [u64; SACK_WORDS],
    at: usize,
}

impl Iterator for Ones {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while let Some(w) = self.words.get_mut(self.at) {
            if *w != 0 {
                let k = w.trailing_zeros();
                *w &= *w - 1;
                return Some(64 * self.at as u32 + k);
            }
            self.at += 1;
        }
        None
    }
}

impl fmt::Debug for Sack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sack(")?;
        for w in self.0.iter().rev() {
            write!(f, "{w:016x}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: a set as a sorted list of bit numbers.
    fn bits(s: &Sack) -> Vec<u32> {
        (0..SACK_BITS).filter(|&i| s.contains(i)).collect()
    }

    proptest! {
        #[test]
        fn operations_match_a_list_of_bits(
            words in any::<[u64; SACK_WORDS]>(), n in 0u32..SACK_BITS + 70, i in 0u32..SACK_BITS + 5,
        ) {
            let s = Sack::from_words(words);
            let list = bits(&s);
            prop_assert_eq!(s.iter().collect::<Vec<_>>(), list.clone());
            prop_assert_eq!(s.is_empty(), list.is_empty());
            let ones = (0..).take_while(|k| list.contains(k)).count() as u32;
            prop_assert_eq!(s.trailing_ones(), ones);
            let mut shifted = s;
            shifted.shift_down(n);
            let want: Vec<u32> = list.iter().filter(|&&k| k >= n).map(|&k| k - n).collect();
            prop_assert_eq!(bits(&shifted), want);
            let mut with = s;
            with.insert(i);
            prop_assert_eq!(with.contains(i), i < SACK_BITS);
            prop_assert_eq!(with.iter().filter(|&k| k != i).count(), list.iter().filter(|&&k| k != i).count());
            let mut b = [0u8; SACK_BYTES + 3];
            s.write(&mut b[1..]);
            prop_assert_eq!(Sack::read(&b[1..]), s);
        }
    }

    #[test]
    fn all_ones_and_edges() {
        let mut s = Sack::from_words([u64::MAX; SACK_WORDS]);
        assert_eq!(s.trailing_ones(), SACK_BITS);
        assert_eq!(s.iter().count(), SACK_BITS as usize);
        s.shift_down(SACK_BITS - 1);
        assert_eq!(bits(&s), vec![0]);
        s.shift_down(1);
        assert!(s.is_empty());
        s.insert(SACK_BITS - 1);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![SACK_BITS - 1]);
        assert!(!s.contains(SACK_BITS));
    }
}
