//! Unpredictable numbers from the kernel (getrandom(2)): QKEYs, MR keys.

/// Fills `buf` with random bytes.
pub fn fill(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: writes at most `buf.len() - done` bytes into the unfilled tail of `buf`.
        let r = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), buf.len() - done, 0) };
        if r > 0 {
            done += r as usize;
        } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // getrandom cannot fail on supported kernels once the pool is initialised; fall back
            // to the clock so that a key is never all-zero.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            for (i, b) in buf[done..].iter_mut().enumerate() {
                *b = (t >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
            }
            return;
        }
    }
}

pub fn u64() -> u64 {
    let mut b = [0u8; 8];
    fill(&mut b);
    u64::from_ne_bytes(b)
}

pub fn u32() -> u32 {
    u64() as u32
}
