//! Maps keyed by 64-bit integers on the data path (peer tokens, `fi_addr_t`s, MR keys), hashed
//! with a multiply-xorshift mixer instead of std's SipHash: a lookup per message is a few
//! cycles instead of tens. The keys are ours (random tokens and keys, AV indices) or a
//! peer's, and a peer able to pick colliding keys can only slow its own lookups.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by `u64`, hashed by [`U64Hasher`].
pub type U64Map<V> = HashMap<u64, V, BuildHasherDefault<U64Hasher>>;

/// The finalizer of splitmix64: every input bit reaches the high bits (hashbrown's control
/// bytes) and the low bits (its bucket index).
#[derive(Default, Clone, Copy)]
pub struct U64Hasher(u64);

impl Hasher for U64Hasher {
    fn finish(&self) -> u64 {
        let mut z = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `u64` keys; other input folds in byte by byte.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_works_and_spreads_sequential_keys() {
        let mut m: U64Map<u64> = U64Map::default();
        for k in 0..10_000u64 {
            m.insert(k, k * 2);
        }
        assert!((0..10_000u64).all(|k| m.get(&k) == Some(&(k * 2))));
        assert_eq!(m.get(&10_000), None);
        // Sequential keys differ in their top 7 bits (hashbrown's tag) as well as the low ones.
        let tags: std::collections::HashSet<u64> = (0..1000u64)
            .map(|k| {
                let mut h = U64Hasher::default();
                h.write_u64(k);
                h.finish() >> 57
            })
            .collect();
        assert_eq!(tags.len(), 128);
    }
}
