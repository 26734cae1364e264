//! x87 `long double` arithmetic for atomics, done by `c/long_double.c`.

unsafe extern "C" {
    fn fabric_long_double_op(
        op: i32,
        complex: i32,
        dst: *mut u8,
        src: *const u8,
        cmp: *const u8,
        bytes: usize,
    ) -> i32;
    fn fabric_long_double_to_double(p: *const u8) -> f64;
    fn fabric_long_double_from_double(v: f64, p: *mut u8);
}

/// Applies fi_atomic op `op` over 16-byte `long double` elements (pairs for complex).
/// The slices must have equal lengths (or `cmp` empty); false for an op that does not apply.
pub fn apply(op: u32, complex: bool, dst: &mut [u8], src: &[u8], cmp: &[u8]) -> bool {
    if src.len() != dst.len()
        || (!cmp.is_empty() && cmp.len() != dst.len())
        || !dst.len().is_multiple_of(16)
    {
        return false;
    }
    let cmp_ptr = if cmp.is_empty() {
        core::ptr::null()
    } else {
        cmp.as_ptr()
    };
    // SAFETY: all three buffers hold `dst.len()` bytes (checked above, cmp may be NULL which the
    // C code accepts); the C code reads and writes only whole 16-byte elements within them.
    let r = unsafe {
        fabric_long_double_op(
            op as i32,
            i32::from(complex),
            dst.as_mut_ptr(),
            src.as_ptr(),
            cmp_ptr,
            dst.len(),
        )
    };
    r == 0
}

/// A `long double` holding `v` (for tests and reference values).
pub fn from_f64(v: f64) -> [u8; 16] {
    let mut b = [0u8; 16];
    // SAFETY: writes exactly one 16-byte long double into `b`.
    unsafe { fabric_long_double_from_double(v, b.as_mut_ptr()) };
    b
}

/// The value of the first `long double` of `b`, rounded to f64 (`b` must hold 16 bytes).
pub fn to_f64(b: &[u8]) -> f64 {
    assert!(b.len() >= 16);
    // SAFETY: `b` holds at least one 16-byte long double.
    unsafe { fabric_long_double_to_double(b.as_ptr()) }
}
