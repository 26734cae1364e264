//! Event queues (fi_eq(3)).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::wait::WaitObj;
use crate::abi::consts::*;
use crate::core::{Errno, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EqAttr {
    pub size: usize,
    pub flags: u64,
    pub wait_obj: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EqEvent {
    pub event: u32,
    /// The event's entry as the application reads it (e.g. a `fi_eq_entry`).
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EqErr {
    pub fid: usize,
    pub context: usize,
    pub data: u64,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
}

enum Slot {
    Event(EqEvent),
    Err(EqErr),
}

pub struct Eq {
    attr: EqAttr,
    queue: Mutex<VecDeque<Slot>>,
    wait: Option<WaitObj>,
    signaled: AtomicBool,
}

impl std::fmt::Debug for Eq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eq")
            .field("attr", &self.attr)
            .finish_non_exhaustive()
    }
}

impl Eq {
    pub fn new(attr: &EqAttr) -> Result<Arc<Eq>> {
        let wait = WaitObj::for_attr(attr.wait_obj)?;
        Ok(Arc::new(Eq {
            attr: *attr,
            queue: Mutex::new(VecDeque::new()),
            wait,
            signaled: AtomicBool::new(false),
        }))
    }

    pub fn attr(&self) -> &EqAttr {
        &self.attr
    }

    pub fn wait(&self) -> Option<&WaitObj> {
        self.wait.as_ref()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self, ev: EqEvent) {
        self.lock().push_back(Slot::Event(ev));
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    pub fn write_err(&self, err: EqErr) {
        self.lock().push_back(Slot::Err(err));
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// fi_eq_read(3): the next event; `peek` leaves it queued. `AVAIL` if an error is next.
    pub fn read(&self, peek: bool) -> Result<EqEvent> {
        let mut q = self.lock();
        match q.front() {
            None => Err(Errno::AGAIN),
            Some(Slot::Err(_)) => Err(Errno::AVAIL),
            Some(Slot::Event(e)) => {
                let e = e.clone();
                if !peek {
                    q.pop_front();
                }
                Ok(e)
            }
        }
    }

    pub fn readerr(&self, peek: bool) -> Result<EqErr> {
        let mut q = self.lock();
        match q.front() {
            Some(Slot::Err(e)) => {
                let e = e.clone();
                if !peek {
                    q.pop_front();
                }
                Ok(e)
            }
            _ => Err(Errno::AGAIN),
        }
    }

    /// fi_eq_sread(3).
    pub fn sread(&self, peek: bool, timeout_ms: i32) -> Result<EqEvent> {
        if self.attr.wait_obj == FI_WAIT_NONE {
            return Err(Errno::NOSYS);
        }
        let deadline =
            (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        loop {
            match self.read(peek) {
                Err(Errno::AGAIN) => {}
                r => return r,
            }
            if self.signaled.swap(false, Ordering::AcqRel) {
                return Err(Errno::AGAIN);
            }
            let left = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(Errno::AGAIN);
                    }
                    (d - now).as_millis().min(10) as i32
                }
                None => 10,
            };
            if let Some(w) = &self.wait
                && w.wait(left)
            {
                w.reset();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "epoll and eventfd (wait objects)")]
    fn events_and_errors_in_order() {
        let eq = Eq::new(&EqAttr {
            size: 8,
            flags: 0,
            wait_obj: FI_WAIT_UNSPEC,
        })
        .unwrap();
        eq.write(EqEvent {
            event: FI_NOTIFY,
            data: vec![1],
        });
        eq.write_err(EqErr {
            err: FI_EIO,
            ..Default::default()
        });
        assert_eq!(eq.read(true).unwrap().data, [1]);
        assert_eq!(eq.read(false).unwrap().event, FI_NOTIFY);
        assert_eq!(eq.read(false), Err(Errno::AVAIL));
        assert_eq!(eq.readerr(false).unwrap().err, FI_EIO);
        assert_eq!(eq.sread(false, 5), Err(Errno::AGAIN));
    }
}
