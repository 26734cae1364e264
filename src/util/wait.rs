//! Wait objects (fi_eq(3), fi_cq(3), fi_cntr(3) `wait_obj`): an epoll set holding a doorbell
//! eventfd plus the fds of the endpoints that feed the queue, so that the fd handed out by
//! `fi_control(FI_GETWAIT)` becomes readable when there is something to progress.

use std::os::fd::RawFd;

use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::sys::poll::{Epoll, EventFd};

#[derive(Debug)]
pub struct WaitObj {
    kind: u32,
    doorbell: EventFd,
    set: Epoll,
}

impl WaitObj {
    /// The wait object for a `wait_obj` attribute: none for `FI_WAIT_NONE`; `FI_WAIT_UNSPEC`,
    /// `FI_WAIT_FD` and `FI_WAIT_YIELD` are served by an fd; the deprecated kinds are refused.
    pub fn for_attr(wait_obj: u32) -> Result<Option<WaitObj>> {
        match wait_obj {
            FI_WAIT_NONE => Ok(None),
            FI_WAIT_UNSPEC | FI_WAIT_FD | FI_WAIT_YIELD => {
                let doorbell = EventFd::new()?;
                let set = Epoll::new()?;
                set.add(doorbell.raw())?;
                Ok(Some(WaitObj {
                    kind: wait_obj,
                    doorbell,
                    set,
                }))
            }
            _ => Err(Errno::NOSYS),
        }
    }

    pub fn kind(&self) -> u32 {
        self.kind
    }

    /// The fd an application may poll (`FI_GETWAIT` with `FI_WAIT_FD`).
    pub fn fd(&self) -> RawFd {
        self.set.raw()
    }

    /// Adds an endpoint's fd (its socket) to the set.
    pub fn add_fd(&self, fd: RawFd) -> Result<()> {
        self.set.add(fd)
    }

    pub fn signal(&self) {
        self.doorbell.signal();
    }

    /// Clears the doorbell (before the owner checks its queue again, `fi_trywait`).
    pub fn reset(&self) {
        self.doorbell.drain();
    }

    pub fn wait(&self, timeout_ms: i32) -> bool {
        self.set.wait(timeout_ms)
    }
}
