//! Maps on the data path (peer tokens, `fi_addr_t`s, MR keys, peer addresses), hashed with a
//! multiply-rotate mixer and splitmix64's finalizer instead of std's SipHash: a lookup per
//! message or datagram is a few cycles instead of tens (SipHash was a tenth of a receiver's
//! time with 1500-byte datagrams over veth). The keys are ours (random tokens and keys, AV
//! indices) or a peer's, and a peer able to pick colliding keys can only slow its own lookups.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` hashed by [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A `HashMap` keyed by `u64`, hashed by [`FastHasher`].
pub type U64Map<V> = FastMap<u64, V>;

/// Each word written is folded in by a rotate, an xor and a multiply by an odd constant; the
/// finalizer of splitmix64 then carries every input bit to the high bits (hashbrown's control
/// bytes) and the low bits (its bucket index).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        let mut z = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
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
                let mut h = FastHasher::default();
                h.write_u64(k);
                h.finish() >> 57
            })
            .collect();
        assert_eq!(tags.len(), 128);
    }

    #[test]
    fn composite_keys_with_swapped_or_repeated_fields_differ() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let b = BuildHasherDefault::<FastHasher>::default();
        assert_ne!(b.hash_one((1u32, 2u32)), b.hash_one((2u32, 1u32)));
        assert_ne!(b.hash_one((7u16, 7u16)), b.hash_one((0u16, 0u16)));
        let addr = |i: u8| std::net::SocketAddr::from(([10, 0, 0, i], 4000 + u16::from(i)));
        let spread: std::collections::HashSet<u64> = (0..=255u8)
            .map(|i| b.hash_one((addr(i), 99u32)) >> 57)
            .collect();
        assert!(spread.len() > 64, "{} tags of 128", spread.len());
        let mut m: FastMap<(std::net::SocketAddr, u32), u8> = FastMap::default();
        for i in 0..=255u8 {
            m.insert((addr(i), u32::from(i)), i);
        }
        assert!((0..=255u8).all(|i| m.get(&(addr(i), u32::from(i))) == Some(&i)));
    }
}
