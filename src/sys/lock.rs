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
//!
//! A lock made `serial` (`new_serial`) belongs to an object of a domain whose application
//! serializes every call into it (fi_domain(3) `FI_THREAD_DOMAIN`, fabtests' default, and
//! the provider runs no thread of its own there): it takes and releases with plain loads and
//! stores, no locked instruction, as upstream's no-op locks do for that model. A call that
//! breaks the model and finds the lock held still waits for it, as the full lock would.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct SpinLock<T> {
    locked: AtomicBool,
    /// The application serializes the callers (see the module's notes).
    serial: bool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out the value to one thread at a time (as a Mutex does), so a `T` that
// may move between threads may be shared through it.
unsafe impl<T: Send> Send for SpinLock<T> {}
// SAFETY: as above: access to the value is serialized by `locked`, or, for a `serial` lock, by
// the application, whose threading model (`FI_THREAD_DOMAIN`) promises that no two threads
// call into the domain's objects at once.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Spins before the first yield.
const SPINS: u32 = 64;
/// Yields before waiters start to sleep between looks.
const YIELDS: u32 = 1000;
const NAP: Duration = Duration::from_micros(50);

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> SpinLock<T> {
        Self::new_serial(value, false)
    }

    /// A lock whose callers the application serializes when `serial` (see the module's notes).
    pub const fn new_serial(value: T, serial: bool) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            serial,
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self.serial {
            if self.locked.load(Ordering::Relaxed) {
                self.lock_contended();
            } else {
                self.locked.store(true, Ordering::Relaxed);
            }
        } else if self
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
        let taken = if self.serial {
            !self.locked.load(Ordering::Relaxed) && {
                self.locked.store(true, Ordering::Relaxed);
                true
            }
        } else {
            self.locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        };
        // `then`, not `then_some`: a guard made and dropped on failure would release the lock
        // its holder has.
        taken.then(|| SpinGuard { lock: self })
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

/// A `Mutex` for sections that may be long or contended (an endpoint's state: its progress
/// copies messages under it), which a `serial` domain (see the module's notes) replaces with a
/// serial `SpinLock`: plain loads and stores. No poisoning: a panic while it is held releases
/// it (the callers of `Mutex` here ignored poisoning).
pub struct DomainLock<T> {
    raw: RawLock,
    value: UnsafeCell<T>,
}

enum RawLock {
    Serial(SpinLock<()>),
    Shared(std::sync::Mutex<()>),
}

/// What a `DomainGuard` holds: never read, only dropped with the guard, which releases it.
#[allow(dead_code)]
enum Held<'a> {
    Serial(SpinGuard<'a, ()>),
    Shared(std::sync::MutexGuard<'a, ()>),
}

// SAFETY: as for `SpinLock`: the value goes to one thread at a time, by the mutex or, when
// serial, by the application's threading model.
unsafe impl<T: Send> Send for DomainLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for DomainLock<T> {}

impl<T> DomainLock<T> {
    pub fn new(value: T, serial: bool) -> DomainLock<T> {
        DomainLock {
            raw: if serial {
                RawLock::Serial(SpinLock::new_serial((), true))
            } else {
                RawLock::Shared(std::sync::Mutex::new(()))
            },
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> DomainGuard<'_, T> {
        let held = match &self.raw {
            RawLock::Serial(l) => Held::Serial(l.lock()),
            RawLock::Shared(m) => Held::Shared(m.lock().unwrap_or_else(|e| e.into_inner())),
        };
        DomainGuard {
            lock: self,
            _held: held,
        }
    }

    pub fn try_lock(&self) -> Option<DomainGuard<'_, T>> {
        let held = match &self.raw {
            RawLock::Serial(l) => Held::Serial(l.try_lock()?),
            RawLock::Shared(m) => Held::Shared(match m.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            }),
        };
        Some(DomainGuard {
            lock: self,
            _held: held,
        })
    }
}

/// `DomainLock`'s guard: the value while it lives.
pub struct DomainGuard<'a, T> {
    lock: &'a DomainLock<T>,
    _held: Held<'a>,
}

impl<T> Deref for DomainGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (the mutex, or the serial lock under the
        // application's threading model), so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for DomainGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only use of the guard.
        unsafe { &mut *self.lock.value.get() }
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
        assert!(
            l.try_lock().is_none(),
            "a failed try_lock leaves the holder's lock held"
        );
        drop(g);
        assert!(l.try_lock().is_some());
    }

    /// A serial lock hands out the value and takes it back like the full one, and a caller
    /// that finds it held (the application broke its threading model) waits.
    #[test]
    fn a_serial_lock_still_waits_for_a_holder() {
        let l = Arc::new(SpinLock::new_serial(0u64, true));
        *l.lock() += 1;
        let g = l.lock();
        let l2 = l.clone();
        let t = std::thread::spawn(move || {
            *l2.lock() += 1;
        });
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(*g, 1, "the second caller waits while the value is held");
        drop(g);
        t.join().unwrap();
        assert_eq!(*l.lock(), 2);
    }

    /// Both kinds of `DomainLock` hand the value to one holder at a time.
    #[test]
    fn a_domain_lock_serializes_either_way() {
        for serial in [false, true] {
            let l = Arc::new(DomainLock::new(0u64, serial));
            let g = l.lock();
            assert!(l.try_lock().is_none());
            let l2 = l.clone();
            let t = std::thread::spawn(move || *l2.lock() += 1);
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(*g, 0, "the second caller waits while the value is held");
            drop(g);
            t.join().unwrap();
            *l.try_lock().unwrap() += 1;
            assert_eq!(*l.lock(), 2);
        }
    }
}
