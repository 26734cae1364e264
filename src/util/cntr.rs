//! Counters (fi_cntr(3)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::progress::{Progress, Sources};
use super::wait::WaitObj;
use crate::abi::consts::*;
use crate::core::{Errno, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CntrAttr {
    pub events: u32,
    pub wait_obj: u32,
    pub flags: u64,
}

pub struct Cntr {
    attr: CntrAttr,
    value: AtomicU64,
    err: AtomicU64,
    sources: Sources,
    wait: Option<WaitObj>,
}

impl std::fmt::Debug for Cntr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cntr")
            .field("value", &self.value)
            .field("err", &self.err)
            .finish_non_exhaustive()
    }
}

impl Cntr {
    pub fn new(attr: &CntrAttr) -> Result<Arc<Cntr>> {
        if attr.events != FI_CNTR_EVENTS_COMP && attr.events != FI_CNTR_EVENTS_BYTES {
            return Err(Errno::INVAL);
        }
        if attr.flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        let wait = WaitObj::for_attr(attr.wait_obj)?;
        Ok(Arc::new(Cntr {
            attr: *attr,
            value: AtomicU64::new(0),
            err: AtomicU64::new(0),
            sources: Sources::default(),
            wait,
        }))
    }

    pub fn attr(&self) -> &CntrAttr {
        &self.attr
    }

    pub fn wait(&self) -> Option<&WaitObj> {
        self.wait.as_ref()
    }

    pub fn add_source(&self, source: Weak<dyn Progress>) {
        self.sources.add(source, |p| {
            if let (Some(w), Some(fd)) = (&self.wait, p.wait_fd()) {
                let _ = w.add_fd(fd);
            }
        });
    }

    /// Whether blocking on the wait fd is safe: every source can wake it.
    pub fn waitable(&self) -> bool {
        self.sources
            .live()
            .iter()
            .all(|p| p.wait_fd().is_some() && p.wait_fd_complete())
    }

    pub fn progress(&self) {
        self.sources.progress_all();
    }

    /// Counts one completed operation of `bytes` bytes (provider side): +1, or +bytes for
    /// `FI_CNTR_EVENTS_BYTES` counters.
    pub fn complete(&self, bytes: usize) {
        let inc = if self.attr.events == FI_CNTR_EVENTS_BYTES {
            bytes as u64
        } else {
            1
        };
        self.value.fetch_add(inc, Ordering::AcqRel);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// Counts one failed operation (provider side).
    pub fn fail(&self) {
        self.err.fetch_add(1, Ordering::AcqRel);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    pub fn read(&self) -> u64 {
        self.progress();
        self.value.load(Ordering::Acquire)
    }

    pub fn readerr(&self) -> u64 {
        self.progress();
        self.err.load(Ordering::Acquire)
    }

    pub fn add(&self, v: u64) {
        self.value.fetch_add(v, Ordering::AcqRel);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    pub fn set(&self, v: u64) {
        self.value.store(v, Ordering::Release);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    pub fn adderr(&self, v: u64) {
        self.err.fetch_add(v, Ordering::AcqRel);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    pub fn seterr(&self, v: u64) {
        self.err.store(v, Ordering::Release);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// fi_cntr_wait(3): until the value reaches `threshold` (Ok), the error count changes
    /// (`AVAIL`), or the timeout (`TIMEDOUT`; negative waits forever).
    pub fn wait_until(&self, threshold: u64, timeout_ms: i32) -> Result<()> {
        if self.attr.wait_obj == FI_WAIT_NONE {
            return Err(Errno::NOSYS);
        }
        let deadline =
            (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        let err0 = self.err.load(Ordering::Acquire);
        let mut spins = 0u32;
        loop {
            self.progress();
            if self.value.load(Ordering::Acquire) >= threshold {
                return Ok(());
            }
            if self.err.load(Ordering::Acquire) != err0 {
                return Err(Errno::AVAIL);
            }
            if let Some(d) = deadline
                && Instant::now() >= d
            {
                return Err(Errno::TIMEDOUT);
            }
            spins = spins.saturating_add(1);
            if spins < 256 {
                std::thread::yield_now();
            } else {
                let fds = self.sources.wait_fds();
                crate::sys::poll::wait_readable(&fds, 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "epoll and eventfd (wait objects)")]
    fn counts_and_waits() {
        let c = Cntr::new(&CntrAttr {
            events: FI_CNTR_EVENTS_COMP,
            wait_obj: FI_WAIT_UNSPEC,
            flags: 0,
        })
        .unwrap();
        c.complete(100);
        c.add(2);
        assert_eq!(c.read(), 3);
        assert_eq!(c.wait_until(3, 0), Ok(()));
        assert_eq!(c.wait_until(4, 10), Err(Errno::TIMEDOUT));
        c.set(10);
        c.fail();
        assert_eq!(c.readerr(), 1);
        let b = Cntr::new(&CntrAttr {
            events: FI_CNTR_EVENTS_BYTES,
            wait_obj: FI_WAIT_NONE,
            flags: 0,
        })
        .unwrap();
        b.complete(100);
        assert_eq!(b.read(), 100);
        assert_eq!(b.wait_until(1, 0), Err(Errno::NOSYS));
    }
}
