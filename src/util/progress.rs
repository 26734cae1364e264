//! Manual progress (fi_domain(3) `FI_PROGRESS_MANUAL`): what makes progress when the
//! application polls, and the list of such sources that each CQ and counter drives. Below
//! `cq`, `cntr` and `provider`, which all use it.

use std::os::fd::RawFd;
use std::sync::{Arc, RwLock, Weak};

/// Something that makes progress when the application polls (manual progress,
/// fi_domain(3)): endpoints register themselves with the CQs and counters they are bound to.
pub trait Progress: Send + Sync {
    fn progress(&self);

    /// A file descriptor that becomes readable when progress may have work (a socket), for
    /// `FI_WAIT_FD` wait objects and blocking reads.
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }

    /// Whether `wait_fd` becomes readable for all the work this source may get, so that
    /// blocking on it alone is safe (`fi_trywait`). False when some work arrives where no fd
    /// tells (efa's local peers through shm): waits then poll, waking early on the fd.
    fn wait_fd_complete(&self) -> bool {
        true
    }

    /// What pollers may ask, without locking or even upgrading this source, whether a
    /// progress call would now find nothing to do (see [`Idle`]). None: always call it.
    fn idle_hint(&self) -> Option<Arc<dyn Idle>> {
        None
    }
}

/// A source's answer to "would progress find nothing to do now?", readable from any thread
/// with plain loads. An empty `fi_cq_read` in a loop is the common case, and upgrading the
/// source, locking it and releasing both cost four locked instructions there. A stale `true`
/// only delays work to the next poll; a source must say `false` while it holds work of its own
/// (timers, queued sends), not only while input waits.
pub trait Idle: Send + Sync {
    fn idle(&self) -> bool;
}

struct Source {
    progress: Weak<dyn Progress>,
    idle: Option<Arc<dyn Idle>>,
}

/// The endpoints a CQ or counter drives (registered on bind).
#[derive(Default)]
pub struct Sources(RwLock<Vec<Source>>);

impl Sources {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Source>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a source once; `first` sees it when it is new (to add its fd to a wait object).
    pub fn add(&self, source: Weak<dyn Progress>, first: impl FnOnce(&dyn Progress)) {
        let mut s = self.0.write().unwrap_or_else(|e| e.into_inner());
        s.retain(|w| w.progress.strong_count() > 0);
        if s.iter().any(|w| Weak::ptr_eq(&w.progress, &source)) {
            return;
        }
        let Some(live) = source.upgrade() else { return };
        first(&*live);
        s.push(Source {
            idle: live.idle_hint(),
            progress: source,
        });
    }

    /// The sources still alive.
    pub fn live(&self) -> Vec<Arc<dyn Progress>> {
        self.read()
            .iter()
            .filter_map(|s| s.progress.upgrade())
            .collect()
    }

    /// The wait fds of the live sources.
    pub fn wait_fds(&self) -> Vec<RawFd> {
        self.live().iter().filter_map(|p| p.wait_fd()).collect()
    }

    /// Runs the progress of every live source that may have work. The list's lock is not held
    /// while they run (a source may take other locks, another thread may bind), and the usual
    /// handful of sources is gathered on the stack: this runs on every `fi_cq_read`.
    pub fn progress_all(&self) {
        const ON_STACK: usize = 4;
        let mut few: [Option<Arc<dyn Progress>>; ON_STACK] = Default::default();
        let mut more = Vec::new();
        {
            let s = self.read();
            let busy = s
                .iter()
                .filter(|s| !s.idle.as_ref().is_some_and(|i| i.idle()))
                .filter_map(|s| s.progress.upgrade());
            for (i, p) in busy.enumerate() {
                match few.get_mut(i) {
                    Some(slot) => *slot = Some(p),
                    None => more.push(p),
                }
            }
        }
        for p in few.iter().flatten().chain(more.iter()) {
            p.progress();
        }
    }
}
