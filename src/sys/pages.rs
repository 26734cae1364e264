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

/// `MADV_COLLAPSE` (Linux 6.1, include/uapi/asm-generic/mman-common.h; not in the libc crate's
/// list for every target).
const MADV_COLLAPSE: libc::c_int = 25;

/// The size of a transparent huge page (`hpage_pmd_size`), when the system allows them at all
/// (`enabled` not `never`: an administrator who turned them off is obeyed).
pub fn transparent_huge_page_size() -> Option<usize> {
    static SIZE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        let dir = "/sys/kernel/mm/transparent_hugepage";
        let enabled = std::fs::read_to_string(format!("{dir}/enabled")).ok()?;
        if enabled.contains("[never]") {
            return None;
        }
        let size: usize = std::fs::read_to_string(format!("{dir}/hpage_pmd_size"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        size.is_power_of_two().then_some(size)
    })
}

/// Moves the application memory at `addr..addr + len` onto transparent huge pages where it can,
/// for a region registered for shared-memory RMA: each aligned huge-page block inside it whose
/// pages are all resident already (mincore(2)) is collapsed (madvise(2) `MADV_COLLAPSE`);
/// nothing else changes (no block is filled that the program has not touched, and the range's
/// policy for later faults stays the program's). Returns the bytes collapsed.
///
/// A block the kernel finds busy (`EAGAIN`: a page of it pinned or locked at the moment) is
/// skipped; any other refusal ends the range (before 6.1, memory that is not anonymous;
/// `ENOMEM`: no free huge page, and each try may compact memory first). Slow (the
/// kernel copies each block: 0.25–5 ms per 2 MiB here): a process spends a bounded budget on
/// it (`util::huge_pages`).
///
/// Why: a peer's `process_vm_writev`/`readv` into or out of this memory pins it page by page
/// (`get_user_pages`), and every copy into or out of it walks it page by page; on 2 MiB pages
/// both cost a 512th (`util::huge_pages` has the figures).
pub fn collapse_resident(addr: usize, len: usize) -> usize {
    let Some(huge) = transparent_huge_page_size() else {
        return 0;
    };
    let start = addr.next_multiple_of(huge);
    let end = addr.saturating_add(len) & !(huge - 1);
    if end <= start {
        return 0;
    }
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => return 0,
    };
    let mut resident = vec![0u8; huge / page];
    let mut collapsed = 0;
    for block in (start..end).step_by(huge) {
        // SAFETY: mincore only reads the page tables of this range of our own address space
        // and writes one byte per 4 KiB page into `resident`, which has room for a block;
        // unmapped memory gives ENOMEM, which skips the block.
        let r = unsafe { libc::mincore(block as *mut libc::c_void, huge, resident.as_mut_ptr()) };
        if r != 0 || !resident.iter().all(|&b| b & 1 != 0) {
            continue;
        }
        // SAFETY: MADV_COLLAPSE moves the block's contents to a huge page and changes no byte
        // the program sees; the range is inside memory the program registered.
        if unsafe { libc::madvise(block as *mut libc::c_void, huge, MADV_COLLAPSE) } == 0 {
            collapsed += huge;
        } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            return collapsed;
        }
    }
    collapsed
}

/// Held by tests that collapse memory, which may share a mapping once the kernel merges
/// neighbours.
#[cfg(test)]
pub static COLLAPSING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The bytes on transparent huge pages (`AnonHugePages` in smaps) of the mapping holding `at`,
/// which the kernel may have merged with a neighbour: at least the mapping's.
#[cfg(test)]
pub fn anon_huge_bytes(at: usize) -> usize {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut ours = false;
    for l in smaps.lines() {
        if let Some((a, b)) = l.split(' ').next().and_then(|r| r.split_once('-'))
            && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
        {
            ours = (a..b).contains(&at);
        } else if ours && let Some(v) = l.strip_prefix("AnonHugePages:") {
            return v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .unwrap()
                * 1024;
        }
    }
    0
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

    /// Pages of `range` resident now (mincore).
    fn resident(range: &[u8]) -> usize {
        let mut v = vec![0u8; range.len().div_ceil(4096)];
        // SAFETY: `range` is mapped memory of ours; `v` has a byte per page of it.
        let r = unsafe { libc::mincore(range.as_ptr() as *mut _, range.len(), v.as_mut_ptr()) };
        assert_eq!(r, 0);
        v.iter().filter(|&&b| b & 1 != 0).count()
    }

    /// Only blocks the program filled are collapsed, with their bytes kept; memory it never
    /// touched stays unpopulated. Where the kernel collapses (6.1 on, THP not `never`), the
    /// filled blocks end on huge pages (`AnonHugePages` of the mapping in smaps).
    #[test]
    fn only_resident_blocks_are_collapsed_and_keep_their_bytes() {
        let _alone = COLLAPSING.lock();
        let huge = transparent_huge_page_size().unwrap_or(2 << 20);
        let p = Pages::map(8 * huge, false).unwrap();
        // SAFETY: the mapping is `len` bytes, ours alone while `p` lives.
        let s = unsafe { core::slice::from_raw_parts_mut(p.as_ptr(), p.len()) };
        let first = s.as_ptr().align_offset(huge);
        // Three aligned blocks filled.
        let filled = first..first + 3 * huge;
        for (i, b) in s[filled.clone()].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // Then a block with one page touched (the kernel would fill the rest to collapse it),
        // and one never touched.
        let untouched = filled.end..filled.end + 2 * huge;
        s[untouched.start] = 1;
        assert_eq!(resident(&s[untouched.clone()]), 1);
        let whole = first..untouched.end;
        let collapsed = collapse_resident(s[whole.clone()].as_ptr() as usize, whole.len());
        assert!(collapsed <= 3 * huge, "only the filled blocks");
        assert_eq!(resident(&s[untouched]), 1, "nothing populated that was not");
        assert!(
            s[filled.clone()]
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i % 251) as u8),
            "the bytes stay"
        );
        // An unaligned range holds no whole block.
        assert_eq!(collapse_resident(s.as_ptr() as usize + first + 1, huge), 0);
        if transparent_huge_page_size().is_none() {
            assert_eq!(collapsed, 0, "THP off: nothing moves");
        }
        if collapsed > 0 {
            assert!(
                anon_huge_bytes(p.as_ptr() as usize) >= collapsed,
                "on huge pages"
            );
        }
    }
}
