//! Anonymous private memory mapped for a device's registered buffers (mmap(2)): from huge
//! pages (`MAP_HUGETLB`) when asked for and the system has some reserved, else from normal
//! pages. Huge pages need fewer NIC translation entries and TLB entries for the same bytes;
//! a host with none reserved (`HugePages_Total: 0` in /proc/meminfo, the usual default)
//! refuses `MAP_HUGETLB` with ENOMEM, and the mapping falls back.

use crate::error::{Errno, Result};

/// A private anonymous mapping, zero-filled, unmapped on drop.
#[derive(Debug)]
pub struct Pages {
    ptr: *mut u8,
    /// Bytes mapped: the length asked for, rounded up to the page size used.
    len: usize,
    huge: bool,
}

// SAFETY: plain private memory; access goes through the raw pointer, whose users synchronise
// (the device's pools are used under the endpoint's lock).
unsafe impl Send for Pages {}
// SAFETY: as above.
unsafe impl Sync for Pages {}

/// The system's default huge page size (`Hugepagesize` in /proc/meminfo), if it has one.
pub fn huge_page_size() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("Hugepagesize:"))?;
    let kb: usize = line
        .trim_start_matches("Hugepagesize:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024).filter(|&n| n > 0)
}

fn map(len: usize, extra: libc::c_int) -> Result<*mut u8> {
    // SAFETY: a new private anonymous mapping (no address hint, no file); the result is
    // checked.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Errno::last_os());
    }
    Ok(p.cast())
}

impl Pages {
    /// Maps at least `len` bytes (`len` > 0): from huge pages if `huge` and the system gives
    /// them, else from normal pages.
    pub fn map(len: usize, huge: bool) -> Result<Pages> {
        if len == 0 {
            return Err(Errno::INVAL);
        }
        if huge && let Some(hp) = huge_page_size() {
            let n = len.div_ceil(hp).checked_mul(hp).ok_or(Errno::NOMEM)?;
            if let Ok(ptr) = map(n, libc::MAP_HUGETLB) {
                return Ok(Pages {
                    ptr,
                    len: n,
                    huge: true,
                });
            }
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|&p| p > 0)
            .unwrap_or(4096);
        let n = len.div_ceil(page).checked_mul(page).ok_or(Errno::NOMEM)?;
        let ptr = map(n, 0)?;
        Ok(Pages {
            ptr,
            len: n,
            huge: false,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping is made of huge pages.
    pub fn is_huge(&self) -> bool {
        self.huge
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value made (a whole number of its pages);
        // users of pointers into it keep the Pages alive.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal pages are always there, zero-filled and writable; huge pages are used when the
    /// system has some reserved, and otherwise the mapping falls back to normal pages.
    #[test]
    fn huge_pages_are_used_when_reserved_else_normal_pages() {
        let p = Pages::map(10_000, false).unwrap();
        assert!(!p.is_huge());
        assert!(p.len() >= 10_000);
        // SAFETY: the mapping is `len` bytes, ours alone while `p` lives.
        let s = unsafe { core::slice::from_raw_parts_mut(p.as_ptr(), p.len()) };
        assert!(s.iter().all(|&b| b == 0));
        s.fill(7);
        let reserved = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("HugePages_Free:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let h = Pages::map(3 << 20, true).unwrap();
        assert!(h.len() >= 3 << 20);
        if reserved == 0 {
            assert!(!h.is_huge(), "no huge page reserved: normal pages");
        }
        if h.is_huge() {
            assert_eq!(h.len() % huge_page_size().unwrap(), 0);
        }
        // SAFETY: as above.
        let s = unsafe { core::slice::from_raw_parts_mut(h.as_ptr(), h.len()) };
        assert!(s.iter().all(|&b| b == 0));
        s.fill(1);
        assert_eq!(Pages::map(0, true).unwrap_err(), Errno::INVAL);
    }
}
