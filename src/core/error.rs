//! How an [`Errno`] reads: its `fi_strerror` text (`core::errno`). The type itself is
//! `crate::error`, below `sys`, so that system calls can report errors without `core`.

pub use crate::error::{Errno, Result};

impl core::fmt::Debug for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Errno({}: {})",
            self.0,
            crate::core::errno::strerror(self.0)
        )
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(crate::core::errno::strerror(self.0))
    }
}
