//! Manual progress (fi_domain(3) `FI_PROGRESS_MANUAL`): what makes progress when the
//! application polls, and the list of such sources that each CQ and counter drives. Below
//! `cq`, `cntr` and `provider`, which all use it.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

/// Something that makes progress when the application polls (manual progress,
/// fi_domain(3)): endpoints register themselves with the CQs and counters they are bound to.
pub trait Progress: Send + Sync {
    fn progress(&self);

    /// `progress`, called when this source's idle hint has just said it has work: a source
    /// whose `progress` asks the same question first skips it here.
    fn progress_busy(&self) {
        self.progress();
    }

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

impl Source {
    /// Runs the source's progress unless its hint says there is nothing to do or it is gone.
    #[inline(always)]
    fn run(&self) {
        match &self.idle {
            Some(i) if i.idle() => {}
            Some(_) => {
                if let Some(p) = self.progress.upgrade() {
                    p.progress_busy();
                }
            }
            None => {
                if let Some(p) = self.progress.upgrade() {
                    p.progress();
                }
            }
        }
    }
}

/// Sources held in slots that pollers read without a lock (most CQs and counters have one
/// or two).
const FIXED: usize = 4;

/// The endpoints a CQ or counter drives (registered on bind).
///
/// `progress_all` runs on every `fi_cq_read`, including the empty reads of a poll loop, so it
/// takes no lock for the first `FIXED` sources: they sit in write-once slots, published by a
/// count. A read-write lock's read side costs two locked instructions per poll, and on the
/// receiving side of a message-rate test that was a fifth of the library's time per message.
/// A slot stays taken after its endpoint is gone (its weak reference no longer upgrades);
/// sources past the slots go to a list that is pruned as before.
#[derive(Default)]
pub struct Sources {
    fixed: [OnceLock<Source>; FIXED],
    /// How many of `fixed` are set (always a prefix).
    used: AtomicUsize,
    more: RwLock<Vec<Source>>,
    /// Whether `more` may hold anything (saves its lock when it does not).
    has_more: AtomicBool,
    /// Serializes `add`.
    adding: Mutex<()>,
}

impl Sources {
    fn fixed(&self) -> impl Iterator<Item = &Source> {
        let n = self.used.load(Ordering::Acquire).min(FIXED);
        self.fixed[..n].iter().filter_map(OnceLock::get)
    }

    fn more(&self) -> std::sync::RwLockReadGuard<'_, Vec<Source>> {
        self.more.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a source once; `first` sees it when it is new (to add its fd to a wait object).
    pub fn add(&self, source: Weak<dyn Progress>, first: impl FnOnce(&dyn Progress)) {
        let _g = self.adding.lock().unwrap_or_else(|e| e.into_inner());
        let mut more = self.more.write().unwrap_or_else(|e| e.into_inner());
        more.retain(|w| w.progress.strong_count() > 0);
        let known = |s: &Source| Weak::ptr_eq(&s.progress, &source);
        if self.fixed().any(known) || more.iter().any(known) {
            return;
        }
        let Some(live) = source.upgrade() else { return };
        first(&*live);
        let s = Source {
            idle: live.idle_hint(),
            progress: source,
        };
        let n = self.used.load(Ordering::Relaxed);
        if n < FIXED {
            // Only `add` sets slots, serialized by `adding`: slot `n` is still empty.
            let _ = self.fixed[n].set(s);
            self.used.store(n + 1, Ordering::Release);
        } else {
            more.push(s);
            self.has_more.store(true, Ordering::Release);
        }
    }

    /// The sources still alive.
    pub fn live(&self) -> Vec<Arc<dyn Progress>> {
        let mut v: Vec<_> = self.fixed().filter_map(|s| s.progress.upgrade()).collect();
        if self.has_more.load(Ordering::Acquire) {
            v.extend(self.more().iter().filter_map(|s| s.progress.upgrade()));
        }
        v
    }

    /// The wait fds of the live sources.
    pub fn wait_fds(&self) -> Vec<RawFd> {
        self.live().iter().filter_map(|p| p.wait_fd()).collect()
    }

    /// Runs the progress of every live source that may have work. No lock is held while they
    /// run (a source may take other locks, another thread may bind); those past the fixed
    /// slots are gathered under the list's lock first.
    /// The fixed slots are run in line, the rest out of line (`progress_more`): with both in
    /// one function an empty poll paid the larger one's prologue (some 20 instructions).
    #[inline(always)]
    pub fn progress_all(&self) {
        for s in self.fixed() {
            s.run();
        }
        if self.has_more.load(Ordering::Acquire) {
            self.progress_more();
        }
    }

    /// The sources past the fixed slots.
    #[inline(never)]
    fn progress_more(&self) {
        // Gathered under the lock, run after it; a few on the stack, so that a CQ with more
        // sources than slots (fi_rdm_bw_mt's endpoints) still allocates nothing per read.
        const ON_STACK: usize = 4;
        let mut few: [Option<Arc<dyn Progress>>; ON_STACK] = Default::default();
        let mut rest = Vec::new();
        {
            let more = self.more();
            let busy = more
                .iter()
                .filter(|s| !s.idle.as_ref().is_some_and(|i| i.idle()))
                .filter_map(|s| s.progress.upgrade());
            for (i, p) in busy.enumerate() {
                match few.get_mut(i) {
                    Some(slot) => *slot = Some(p),
                    None => rest.push(p),
                }
            }
        }
        for p in few.iter().flatten().chain(rest.iter()) {
            p.progress();
        }
    }
}
