//! POSIX shared memory objects (shm_open(3), mmap(2)), created owner-only and checked for owner
//! and permissions before they are mapped.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Errno, Result};

/// A mapping of a shared-memory object.
#[derive(Debug)]
pub struct ShmMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access goes through raw pointers and atomics
// that are valid from any thread.
unsafe impl Send for ShmMap {}
// SAFETY: as above.
unsafe impl Sync for ShmMap {}

/// Where shm_open(3) keeps its objects on Linux.
const SHM_DIR: &str = "/dev/shm";

/// The names of the shared-memory objects that exist now (without the leading `/`).
pub fn names() -> Vec<String> {
    std::fs::read_dir(SHM_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn cname(name: &str) -> Result<CString> {
    if !name.starts_with('/') || name[1..].contains('/') || name.len() > 250 {
        return Err(Errno::INVAL);
    }
    CString::new(name).map_err(|_| Errno::INVAL)
}

fn map(fd: &OwnedFd, len: usize) -> Result<ShmMap> {
    // SAFETY: maps `len` bytes of an object we hold open; the result is checked.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Errno::last_os());
    }
    Ok(ShmMap { ptr: p.cast(), len })
}

impl ShmMap {
    /// Creates `name` (which must not exist) with mode 0600, sized `len` and zero-filled.
    pub fn create(name: &str, len: usize) -> Result<ShmMap> {
        let c = cname(name)?;
        // SAFETY: `c` is a valid C string; the returned fd is checked.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(Errno::last_os());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: resizing our own fresh object.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            let e = Errno::last_os();
            unlink(name);
            return Err(e);
        }
        map(&fd, len).inspect_err(|_| unlink(name))
    }

    /// Opens an existing object for reading and writing, refusing one that is not owned by this
    /// user, is accessible to others, or is smaller than `min_len`. Maps its whole size.
    pub fn open(name: &str, min_len: usize) -> Result<ShmMap> {
        let c = cname(name)?;
        // SAFETY: `c` is a valid C string; O_NOFOLLOW refuses symlinks; the fd is checked.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                0,
            )
        };
        if fd < 0 {
            return Err(Errno::last_os());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero stat is valid; fstat fills it for our fd.
        let st = unsafe {
            let mut st: libc::stat = core::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
                return Err(Errno::last_os());
            }
            st
        };
        if st.st_uid != super::os::uid() || st.st_mode & 0o077 != 0 {
            return Err(Errno::ACCES);
        }
        let len = usize::try_from(st.st_size).map_err(|_| Errno::INVAL)?;
        if len < min_len {
            return Err(Errno::INVAL);
        }
        map(&fd, len)
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
}

impl Drop for ShmMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value created; nothing refers to it afterwards
        // (the owners of raw pointers into it hold the ShmMap alive).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Removes a shared-memory object name (mappings stay valid).
pub fn unlink(name: &str) {
    if let Ok(c) = cname(name) {
        // SAFETY: `c` is a valid C string.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}

/// Names (with the leading '/') of this user's shared-memory objects starting with `prefix`.
pub fn list(prefix: &str) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    let uid = super::os::uid();
    dir.filter_map(|e| e.ok())
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .map(|n| format!("/{n}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_permissions() {
        let name = format!(
            "/fabric-test-{}-{}",
            std::process::id(),
            crate::sys::random::u32()
        );
        let a = ShmMap::create(&name, 4096).unwrap();
        assert_eq!(
            ShmMap::create(&name, 4096).unwrap_err(),
            Errno::from_os(libc::EEXIST)
        );
        let b = ShmMap::open(&name, 4096).unwrap();
        assert_eq!(b.len(), 4096);
        assert_eq!(ShmMap::open(&name, 8192).unwrap_err(), Errno::INVAL);
        assert!(list("fabric-test-").contains(&name));
        // Group/other access is refused.
        let path = format!("/dev/shm{name}");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        assert_eq!(ShmMap::open(&name, 4096).unwrap_err(), Errno::ACCES);
        unlink(&name);
        assert!(ShmMap::open(&name, 0).is_err());
        assert_eq!(ShmMap::open("no-slash", 0).unwrap_err(), Errno::INVAL);
        drop((a, b));
    }
}
