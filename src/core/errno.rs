//! `fi_strerror` text: the OS text below `FI_ERRNO_OFFSET`, libfabric's own above it.

use std::ffi::CStr;
use std::sync::OnceLock;

use crate::abi::consts::{FI_EOTHER, FI_ERRNO_MAX, FI_ERRNO_OFFSET};

/// fi_errno(3): text of the libfabric-specific numbers, from `FI_EOTHER` (256) on.
const FABRIC_ERRORS: [&CStr; (FI_ERRNO_MAX - FI_ERRNO_OFFSET) as usize] = [
    c"Unspecified error",
    c"Provided buffer is too small",
    c"Operation not permitted in current state",
    c"Error available",
    c"Flags not supported",
    c"Missing or unavailable event queue",
    c"Invalid resource domain",
    c"Missing or unavailable completion queue",
    c"CRC error",
    c"Truncation error",
    c"Required key not available",
    c"Missing or unavailable address vector",
    c"Queue has been overrun",
    c"Receiver not ready, no receive buffers available",
    c"Memory registration limit exceeded",
    c"Host unreacheable due to firewall",
];

/// The text for an error number (either sign), with a `'static` lifetime so that the C entry
/// point can hand out the pointer.
pub fn strerror_c(errnum: i32) -> &'static CStr {
    let n = errnum.unsigned_abs() as i32;
    if n < FI_ERRNO_OFFSET {
        static OS: OnceLock<Vec<std::ffi::CString>> = OnceLock::new();
        let table = OS.get_or_init(|| {
            (0..FI_ERRNO_OFFSET)
                .map(crate::sys::os::errno_text)
                .collect()
        });
        &table[n as usize]
    } else if n < FI_ERRNO_MAX {
        FABRIC_ERRORS[(n - FI_ERRNO_OFFSET) as usize]
    } else {
        FABRIC_ERRORS[(FI_EOTHER - FI_ERRNO_OFFSET) as usize]
    }
}

pub fn strerror(errnum: i32) -> &'static str {
    strerror_c(errnum).to_str().unwrap_or("Unknown error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri's strerror_r gives Rust's io::Error text")]
    fn texts() {
        assert_eq!(strerror(-libc::EAGAIN), "Resource temporarily unavailable");
        assert_eq!(strerror(libc::EINVAL), "Invalid argument");
        assert_eq!(strerror(265), "Truncation error");
        assert_eq!(
            strerror(-269),
            "Receiver not ready, no receive buffers available"
        );
        assert_eq!(strerror(5000), "Unspecified error");
        assert_eq!(strerror(0), "Success");
    }
}
