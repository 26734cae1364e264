//! CRC-32C (Castagnoli), with the SSE 4.2 instruction when the CPU has it. The software SRD
//! protects every header with it, and payloads where UDP's own checksum cannot (our fault
//! injector damages datagrams before UDP sees them): see `prov::efa::srd::wire`.

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

/// Inputs at least this long are folded with carry-less multiplies when the CPU can.
const FOLD_MIN: usize = 512;

#[cfg(target_arch = "x86_64")]
fn has_vpclmul() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("sse4.2")
    })
}

/// x^n mod P for the CRC-32C polynomial P, as a 64-bit operand of a carry-less multiply over
/// bit-reflected data (the coefficient of x^d at bit 63 − d).
const fn xpow_mod(n: u32) -> u64 {
    const P_NORMAL: u64 = (1 << 32) | 0x1EDC_6F41;
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & (1 << 32) != 0 {
            r ^= P_NORMAL;
        }
        i += 1;
    }
    r.reverse_bits()
}

/// The pair of multipliers that moves a 16-byte accumulator `d` bytes further down the
/// stream: its first 8 bytes are the terms x^64 higher than its last 8, and a carry-less
/// product of reflected operands comes out one degree low, hence the − 1.
const fn fold_by(d: u32) -> (u64, u64) {
    (xpow_mod(8 * d + 64 - 1), xpow_mod(8 * d - 1))
}

/// CRC-32C update by folding (the CRC is linear: a 16-byte block followed by `d` more bytes
/// contributes the block times x^(8d) mod P, two carry-less multiplies by constants), four
/// 64-byte accumulators at a time with AVX-512, then the 16 bytes left in one accumulator and
/// the last bytes through the CRC instruction: 56 GB/s on data in cache on this project's
/// machine, where one chain of the instruction does 9.7.
///
/// # Safety
/// The CPU supports AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE 4.2; `data` holds at least
/// `FOLD_MIN` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn update_fold(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::*;
    const K256: (u64, u64) = fold_by(256);
    const K64: (u64, u64) = fold_by(64);
    const K16: (u64, u64) = fold_by(16);
    debug_assert!(data.len() >= FOLD_MIN);
    let p = data.as_ptr();
    let load = |off: usize| {
        debug_assert!(off + 64 <= data.len());
        // SAFETY: callers stay inside `data` (off + 64 ≤ len).
        unsafe { _mm512_loadu_si512(p.add(off).cast()) }
    };
    let k512 = |k: (u64, u64)| {
        _mm512_set_epi64(
            k.1 as i64, k.0 as i64, k.1 as i64, k.0 as i64, k.1 as i64, k.0 as i64, k.1 as i64,
            k.0 as i64,
        )
    };
    // acc × x^(8d) + next, per 16-byte lane: first half by the high multiplier, second by
    // the low one (a three-way XOR in one instruction).
    let fold512 = |acc: __m512i, k: __m512i, next: __m512i| {
        _mm512_ternarylogic_epi64(
            _mm512_clmulepi64_epi128(acc, k, 0x00),
            _mm512_clmulepi64_epi128(acc, k, 0x11),
            next,
            0x96,
        )
    };
    // Starting from register `crc` equals starting from 0 with it XORed into the first bytes.
    let mut a0 = _mm512_xor_si512(
        load(0),
        _mm512_zextsi128_si512(_mm_cvtsi32_si128(crc as i32)),
    );
    let (mut a1, mut a2, mut a3) = (load(64), load(128), load(192));
    let mut off = 256;
    let k = k512(K256);
    while off + 256 <= data.len() {
        a0 = fold512(a0, k, load(off));
        a1 = fold512(a1, k, load(off + 64));
        a2 = fold512(a2, k, load(off + 128));
        a3 = fold512(a3, k, load(off + 192));
        off += 256;
    }
    let k = k512(K64);
    a1 = fold512(a0, k, a1);
    a2 = fold512(a1, k, a2);
    a3 = fold512(a2, k, a3);
    let k16 = _mm_set_epi64x(K16.1 as i64, K16.0 as i64);
    let fold128 = |acc: __m128i, next: __m128i| {
        _mm_xor_si128(
            _mm_xor_si128(
                _mm_clmulepi64_si128(acc, k16, 0x00),
                _mm_clmulepi64_si128(acc, k16, 0x11),
            ),
            next,
        )
    };
    let mut x = _mm512_extracti32x4_epi32(a3, 0);
    x = fold128(x, _mm512_extracti32x4_epi32(a3, 1));
    x = fold128(x, _mm512_extracti32x4_epi32(a3, 2));
    x = fold128(x, _mm512_extracti32x4_epi32(a3, 3));
    while off + 16 <= data.len() {
        // SAFETY: off + 16 ≤ len.
        let next = unsafe { _mm_loadu_si128(p.add(off).cast()) };
        x = fold128(x, next);
        off += 16;
    }
    // The accumulator's CRC from a zero register is the CRC of everything folded into it.
    let lo = _mm_cvtsi128_si64(x) as u64;
    let hi = _mm_extract_epi64(x, 1) as u64;
    let c = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32;
    // SAFETY: the CPU supports SSE 4.2 (the caller's contract).
    unsafe { update_hw(c, &data[off..]) }
}

/// Hardware CRC-32C update.
///
/// # Safety
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
unsafe fn update_hw(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u32, _mm_crc32_u64};
    let mut c = u64::from(crc);
    let mut chunks = data.chunks_exact(8);
    for w in &mut chunks {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        c = _mm_crc32_u64(c, v);
    }
    let mut c = c as u32;
    let mut rest = chunks.remainder();
    if let Some((w, tail)) = rest.split_first_chunk::<4>() {
        c = _mm_crc32_u32(c, u32::from_le_bytes(*w));
        rest = tail;
    }
    for &b in rest {
        c = _mm_crc32_u8(c, b);
    }
    c
}

fn update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= FOLD_MIN && has_vpclmul() {
        // SAFETY: the CPU was checked for AVX-512 VPCLMULQDQ and SSE 4.2.
        return unsafe { update_fold(crc, data) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_sse42() {
        // SAFETY: the CPU was checked for SSE 4.2.
        return unsafe { update_hw(crc, data) };
    }
    update_soft(crc, data)
}

/// CRC-32C of the concatenation of `parts`.
pub fn crc32c(parts: &[&[u8]]) -> u32 {
    // Short parts (an SRD header around its checksum field, an ack trailer) go straight to
    // the instruction: the feature checks and the folding test per part were most of the
    // cost of sealing a header.
    #[cfg(target_arch = "x86_64")]
    if has_sse42() && parts.iter().all(|p| p.len() < FOLD_MIN) {
        // SAFETY: the CPU was checked for SSE 4.2.
        return !parts.iter().fold(!0u32, |c, p| unsafe { update_hw(c, p) });
    }
    !parts.iter().fold(!0u32, |c, p| update(c, p))
}

/// CRC-32C of the little-endian bytes of `words`, then of `last`'s four if given. A header
/// assembled in registers is checksummed from them: stored byte by byte and read back eight at
/// a time, it stalled the CPU's store-to-load forwarding (two-thirds of the time of sealing an
/// SRD data header went to the first read).
#[inline]
pub fn crc32c_words<const N: usize>(words: [u64; N], last: Option<u32>) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if has_sse42() {
        // SAFETY: the CPU was checked for SSE 4.2.
        return unsafe { crc32c_words_hw(words, last) };
    }
    let mut c = !0u32;
    for w in words {
        c = update_soft(c, &w.to_le_bytes());
    }
    if let Some(l) = last {
        c = update_soft(c, &l.to_le_bytes());
    }
    !c
}

/// [`crc32c_words`] with the instruction.
///
/// # Safety
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
unsafe fn crc32c_words_hw<const N: usize>(words: [u64; N], last: Option<u32>) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64};
    let mut c = u64::from(!0u32);
    for w in words {
        c = _mm_crc32_u64(c, w);
    }
    let mut c = c as u32;
    if let Some(l) = last {
        c = _mm_crc32_u32(c, l);
    }
    !c
}

/// A checksum of large buffers that runs three CRC-32C lanes over the thirds (the instruction
/// has a latency of three cycles, so three independent chains, advanced together in one loop,
/// keep it busy), combined by rotation so that a change in any lane changes the result.
pub fn lanes(data: &[u8]) -> u32 {
    if data.len() < 3 * 1024 {
        return crc32c(&[data]);
    }
    let third = (data.len() / 3) & !7;
    let (a, rest) = data.split_at(third);
    let (b, c) = rest.split_at(third);
    let (ca, cb, cc) = crc32c_three(a, b, c);
    ca ^ cb.rotate_left(11) ^ cc.rotate_left(22)
}

/// CRC-32C of `a`, `b` and `c` (`a` and `b` of one length, a multiple of 8; `c` at least as
/// long), the common prefix interleaved.
fn crc32c_three(a: &[u8], b: &[u8], c: &[u8]) -> (u32, u32, u32) {
    debug_assert!(a.len() == b.len() && a.len().is_multiple_of(8) && c.len() >= a.len());
    #[cfg(target_arch = "x86_64")]
    if has_sse42() && !(a.len() >= FOLD_MIN && has_vpclmul()) {
        // SAFETY: the CPU was checked for SSE 4.2.
        let (ca, cb, cc) = unsafe { interleaved_hw(a, b, &c[..a.len()]) };
        let cc = !update(!cc, &c[a.len()..]);
        return (ca, cb, cc);
    }
    (crc32c(&[a]), crc32c(&[b]), crc32c(&[c]))
}

/// CRC-32C of three slices of one length (a multiple of 8), one word of each per iteration.
///
/// # Safety
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn interleaved_hw(a: &[u8], b: &[u8], c: &[u8]) -> (u32, u32, u32) {
    use std::arch::x86_64::_mm_crc32_u64;
    let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
    let (mut x, mut y, mut z) = (u64::from(!0u32), u64::from(!0u32), u64::from(!0u32));
    for ((wa, wb), wc) in a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .zip(c.chunks_exact(8))
    {
        x = _mm_crc32_u64(x, word(wa));
        y = _mm_crc32_u64(y, word(wb));
        z = _mm_crc32_u64(z, word(wc));
    }
    (!(x as u32), !(y as u32), !(z as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The folded and instruction paths are what this checks; Miri runs neither.
    #[cfg_attr(miri, ignore)]
    fn folding_agrees_with_the_table() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i * 131 + i / 7) as u8).collect();
        for n in [
            0, 1, 15, 16, 255, 511, 512, 513, 527, 528, 767, 768, 1000, 1023, 4096, 65_483, 70_000,
        ] {
            for start in [0, 1, 7] {
                let d = &data[start..start + n.min(data.len() - start)];
                for init in [!0u32, 0, 0x1234_5678] {
                    assert_eq!(
                        update(init, d),
                        update_soft(init, d),
                        "len {} init {init:#x}",
                        d.len()
                    );
                }
            }
        }
    }

    #[test]
    fn parts_give_the_crc_of_their_concatenation() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        for total in [0, 1, 3, 4, 5, 20, 24, 44, 63, 64, 65, 100] {
            let whole = &data[..total];
            let want = !update_soft(!0, whole);
            for cut in 0..=total {
                let (a, b) = whole.split_at(cut);
                assert_eq!(crc32c(&[a, b]), want, "{total} cut at {cut}");
                let mid = cut / 2;
                assert_eq!(crc32c(&[&a[..mid], &a[mid..], b]), want, "{total} in three");
            }
            assert_eq!(crc32c(&[whole]), want);
        }
    }

    #[test]
    fn words_agree_with_the_table() {
        let data: Vec<u8> = (0..64u32).map(|i| (i * 53 + 7) as u8).collect();
        fn check<const N: usize>(d: &[u8], last: Option<u32>) {
            let words: [u64; N] = core::array::from_fn(|i| {
                u64::from_le_bytes(d[8 * i..8 * i + 8].try_into().unwrap())
            });
            let mut bytes = d[..8 * N].to_vec();
            if let Some(l) = last {
                bytes.extend_from_slice(&l.to_le_bytes());
            }
            assert_eq!(
                crc32c_words(words, last),
                !update_soft(!0, &bytes),
                "{N} words, {last:?}"
            );
        }
        for last in [None, Some(0x0102_0304), Some(u32::MAX)] {
            check::<0>(&data, last);
            check::<1>(&data, last);
            check::<2>(&data, last);
            check::<5>(&data, last);
            check::<8>(&data, last);
        }
    }

    #[test]
    fn known_values_and_agreement() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(crc32c(&[&[0u8; 32]]), 0x8A91_36AA);
        assert_eq!(crc32c(&[b"123456789"]), 0xE306_9283);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        assert_eq!(!update_soft(!0, &data), crc32c(&[&data]));
        assert_eq!(crc32c(&[&data[..333], &data[333..]]), crc32c(&[&data]));
        // The interleaved lanes agree with three separate CRCs, whatever the lengths.
        for n in [3 * 1024, 3 * 1024 + 5, 9_999, 10_000] {
            let d = &data[..n];
            let third = (n / 3) & !7;
            let want = crc32c(&[&d[..third]])
                ^ crc32c(&[&d[third..2 * third]]).rotate_left(11)
                ^ crc32c(&[&d[2 * third..]]).rotate_left(22);
            assert_eq!(lanes(d), want, "length {n}");
        }
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
