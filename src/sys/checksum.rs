//! CRC-32C (Castagnoli), with the SSE 4.2 instruction when the CPU has it. The software SRD
//! protects every datagram with it: EFA's links check integrity in hardware, UDP's own checksum
//! does not cover what a fault injector or a buggy peer puts in front of it.

use std::sync::OnceLock;

const POLY: u32 = 0x82F6_3B78;

fn table() -> &'static [[u32; 256]; 8] {
    static T: OnceLock<[[u32; 256]; 8]> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = [[0u32; 256]; 8];
        for i in 0..256u32 {
            let mut c = i;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            t[0][i as usize] = c;
        }
        for i in 0..256 {
            for k in 1..8 {
                let prev = t[k - 1][i];
                t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            }
        }
        t
    })
}

/// Software CRC-32C update (slicing by 8).
fn update_soft(mut crc: u32, data: &[u8]) -> u32 {
    let t = table();
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

#[cfg(target_arch = "x86_64")]
fn has_sse42() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("sse4.2"))
}

/// Hardware CRC-32C update.
///
/// # Safety
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn update_hw(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut c = u64::from(crc);
    let mut chunks = data.chunks_exact(8);
    for w in &mut chunks {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        c = _mm_crc32_u64(c, v);
    }
    let mut c = c as u32;
    for &b in chunks.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

fn update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if has_sse42() {
        // SAFETY: the CPU was checked for SSE 4.2.
        return unsafe { update_hw(crc, data) };
    }
    update_soft(crc, data)
}

/// CRC-32C of the concatenation of `parts`.
pub fn crc32c(parts: &[&[u8]]) -> u32 {
    !parts.iter().fold(!0u32, |c, p| update(c, p))
}

/// A checksum of large buffers that runs three CRC-32C lanes over the thirds (the instruction
/// has a latency of three cycles, so three independent chains keep it busy), combined by
/// rotation so that a change in any lane changes the result.
pub fn lanes(data: &[u8]) -> u32 {
    if data.len() < 3 * 1024 {
        return crc32c(&[data]);
    }
    let third = (data.len() / 3) & !7;
    let (a, rest) = data.split_at(third);
    let (b, c) = rest.split_at(third);
    crc32c(&[a]) ^ crc32c(&[b]).rotate_left(11) ^ crc32c(&[c]).rotate_left(22)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_agreement() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(crc32c(&[&[0u8; 32]]), 0x8A91_36AA);
        assert_eq!(crc32c(&[b"123456789"]), 0xE306_9283);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        assert_eq!(!update_soft(!0, &data), crc32c(&[&data]));
        assert_eq!(crc32c(&[&data[..333], &data[333..]]), crc32c(&[&data]));
        let mut flipped = data.clone();
        let before = lanes(&data);
        for i in [0, 3333, 6666, 9999] {
            flipped[i] ^= 0x10;
            assert_ne!(
                lanes(&flipped),
                before,
                "a flipped bit at {i} must change the checksum"
            );
            flipped[i] ^= 0x10;
        }
    }
}
