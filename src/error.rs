//! Errors as libfabric reports them: a positive `FI_E*` number (fi_errno(3)). Entry points
//! return it negated.
//!
//! The bottom of the crate after `abi`: `sys` and everything above report errors with this
//! type. Its text (`Display`, `Debug`) is `core::errno`'s, implemented in `core::error`.

use crate::abi::consts as c;

/// A libfabric error number (`FI_EAGAIN`, `FI_EINVAL`, ...), always positive.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

pub type Result<T> = core::result::Result<T, Errno>;

impl Errno {
    pub const PERM: Errno = Errno(c::FI_EPERM);
    pub const NOENT: Errno = Errno(c::FI_ENOENT);
    pub const IO: Errno = Errno(c::FI_EIO);
    pub const AGAIN: Errno = Errno(c::FI_EAGAIN);
    pub const NOMEM: Errno = Errno(c::FI_ENOMEM);
    pub const ACCES: Errno = Errno(c::FI_EACCES);
    pub const FAULT: Errno = Errno(c::FI_EFAULT);
    pub const BUSY: Errno = Errno(c::FI_EBUSY);
    pub const NODEV: Errno = Errno(c::FI_ENODEV);
    pub const INVAL: Errno = Errno(c::FI_EINVAL);
    pub const NOSPC: Errno = Errno(c::FI_ENOSPC);
    pub const NOSYS: Errno = Errno(c::FI_ENOSYS);
    pub const NOMSG: Errno = Errno(c::FI_ENOMSG);
    pub const NODATA: Errno = Errno(c::FI_ENODATA);
    pub const OVERFLOW: Errno = Errno(c::FI_EOVERFLOW);
    pub const MSGSIZE: Errno = Errno(c::FI_EMSGSIZE);
    pub const NOPROTOOPT: Errno = Errno(c::FI_ENOPROTOOPT);
    pub const OPNOTSUPP: Errno = Errno(c::FI_EOPNOTSUPP);
    pub const ADDRINUSE: Errno = Errno(c::FI_EADDRINUSE);
    pub const ADDRNOTAVAIL: Errno = Errno(c::FI_EADDRNOTAVAIL);
    pub const NETUNREACH: Errno = Errno(c::FI_ENETUNREACH);
    pub const CONNABORTED: Errno = Errno(c::FI_ECONNABORTED);
    pub const CONNRESET: Errno = Errno(c::FI_ECONNRESET);
    pub const NOTCONN: Errno = Errno(c::FI_ENOTCONN);
    pub const SHUTDOWN: Errno = Errno(c::FI_ESHUTDOWN);
    pub const TIMEDOUT: Errno = Errno(c::FI_ETIMEDOUT);
    pub const CONNREFUSED: Errno = Errno(c::FI_ECONNREFUSED);
    pub const HOSTUNREACH: Errno = Errno(c::FI_EHOSTUNREACH);
    pub const ALREADY: Errno = Errno(c::FI_EALREADY);
    pub const REMOTEIO: Errno = Errno(c::FI_EREMOTEIO);
    pub const PROTO: Errno = Errno(c::FI_EPROTO);
    pub const CANCELED: Errno = Errno(c::FI_ECANCELED);
    pub const KEYREJECTED: Errno = Errno(c::FI_EKEYREJECTED);
    pub const OTHER: Errno = Errno(c::FI_EOTHER);
    pub const TOOSMALL: Errno = Errno(c::FI_ETOOSMALL);
    pub const OPBADSTATE: Errno = Errno(c::FI_EOPBADSTATE);
    pub const AVAIL: Errno = Errno(c::FI_EAVAIL);
    pub const BADFLAGS: Errno = Errno(c::FI_EBADFLAGS);
    pub const NOEQ: Errno = Errno(c::FI_ENOEQ);
    pub const DOMAIN: Errno = Errno(c::FI_EDOMAIN);
    pub const NOCQ: Errno = Errno(c::FI_ENOCQ);
    pub const CRC: Errno = Errno(c::FI_ECRC);
    pub const TRUNC: Errno = Errno(c::FI_ETRUNC);
    pub const NOKEY: Errno = Errno(c::FI_ENOKEY);
    pub const NOAV: Errno = Errno(c::FI_ENOAV);
    pub const OVERRUN: Errno = Errno(c::FI_EOVERRUN);
    pub const NORX: Errno = Errno(c::FI_ENORX);
    pub const NOMR: Errno = Errno(c::FI_ENOMR);

    /// The value an entry point returns: `-FI_Exxx`.
    pub const fn neg(self) -> i32 {
        -self.0
    }

    /// From an OS `errno` (the FI_E* numbers below 256 are the errno values).
    pub const fn from_os(errno: i32) -> Errno {
        if errno > 0 {
            Errno(errno)
        } else {
            Errno::OTHER
        }
    }

    /// The last OS error of this thread.
    pub fn last_os() -> Errno {
        Errno::from_os(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        Errno::from_os(e.raw_os_error().unwrap_or(0))
    }
}
