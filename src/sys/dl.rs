//! `dlopen(3)`: libraries loaded at run time (rdma-core for the EFA hardware device), so that
//! `libfabric.so.1` has no link-time dependency on them and loads where they are absent.

use core::ffi::c_void;
use std::ffi::{CStr, CString};

/// A library opened with `RTLD_NOW | RTLD_LOCAL`; closed when dropped, or kept for the life
/// of the process with [`Library::keep`] (its functions handed out for good).
pub struct Library {
    handle: *mut c_void,
    name: &'static str,
}

impl Library {
    /// Opens `name` (searched as the dynamic linker does: LD_LIBRARY_PATH, ld.so.cache,
    /// default paths). The error is `dlerror()`'s text.
    pub fn open(name: &'static str) -> Result<Library, String> {
        let c = CString::new(name).map_err(|_| format!("{name}: bad library name"))?;
        // SAFETY: `c` is a NUL-terminated path; dlopen runs the library's constructors,
        // which is what loading a library means (rdma-core's are benign).
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(last_error(name));
        }
        Ok(Library { handle, name })
    }

    /// Never closes the library (nothing else to free: the name is static).
    pub fn keep(self) {
        core::mem::forget(self);
    }

    /// The address of symbol `name` (non-null).
    pub fn sym(&self, name: &str) -> Result<*mut c_void, String> {
        let c = CString::new(name).map_err(|_| format!("{name}: bad symbol name"))?;
        // SAFETY: `handle` is a live dlopen handle and `c` a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            return Err(format!("{}: no symbol {name}", self.name));
        }
        Ok(p)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and nothing obtained through it outlives this
        // (callers that keep symbols forget the Library).
        unsafe { libc::dlclose(self.handle) };
    }
}

fn last_error(name: &str) -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call
    // on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return format!("{name}: cannot be loaded");
    }
    // SAFETY: as above.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_and_symbol_are_errors() {
        assert!(Library::open("libdoes-not-exist-here.so.9").is_err());
        let c = Library::open("libc.so.6").unwrap();
        assert!(c.sym("getpid").is_ok());
        assert!(c.sym("no_such_symbol_here").is_err());
    }
}
