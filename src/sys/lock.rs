//! A lock for short critical sections on per-message paths (a CQ's queue, a receive queue).
//!
//! `std::sync::Mutex` releases with a locked exchange (it must see whether a waiter sleeps),
//! so each lock and unlock pair costs two locked instructions; on x86 each waits for the
//! core's earlier stores to drain, including those to lines another process holds (a shm
//! peer's ring). This lock releases with a plain store, one locked instruction per pair.
//! Waiters never sleep in the kernel: they spin a little, then yield, then sleep briefly (a
//! real-time waiter that only yielded could keep a lower-priority holder off its core).
//! Meant for sections that hold no other lock for long and never block. In `sys` because it
//! hands out its value through an `UnsafeCell`.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out the value to one thread at a time (as a Mutex does), so a `T` that
// may move between threads may be shared through it.
unsafe impl<T: Send> Send for SpinLock<T> {}
// SAFETY: as above: access to the value is serialized by `locked`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Spins before the first yield.
const SPINS: u32 = 64;
/// Yields before waiters start to sleep between looks.
const YIELDS: u32 = 1000;
const NAP: Duration = Duration::from_micros(50);

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut n = 0u32;
        loop {
            // Plain loads while it is held: no line bouncing between waiters.
            while self.locked.load(Ordering::Relaxed) {
                n = n.saturating_add(1);
                if n < SPINS {
                    core::hint::spin_loop();
                } else if n < SPINS + YIELDS {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(NAP);
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(SpinGuard { lock: self })
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T> core::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SpinLock").finish_non_exhaustive()
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

/// The lock, held until dropped (a panic while it is held releases it too: there is no
/// poisoning, as the callers of `Mutex` here ignored it).
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only use of the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn serializes_threads() {
        let l = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 40_000);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        drop(g);
        assert!(l.try_lock().is_some());
    }
}
