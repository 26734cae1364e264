//! Leaving a quiet device alone.
//!
//! An efa endpoint whose local peers go through shm still has its device to look at, and on
//! the software SRD device every look is a system call (`recvmmsg`): a program polling its CQ
//! for shm messages would spend its time in empty ones. Once the device has given nothing for
//! `DEVICE_QUIET` and nothing of ours is in it, the endpoint is *quiet*: its polls skip the
//! device without taking the endpoint's lock ([`Quiet::skip`], also its idle hint for CQs).
//!
//! Something must still notice a datagram from a remote peer, or a device timer falling due.
//! A thread of ours ([`Watcher`]) blocks in epoll on the wait fds of quiet devices, each
//! watched once (`EPOLLONESHOT`), and raises the endpoint's flag when its device becomes
//! readable; the endpoint's next poll then looks at the device, and it is watched again when
//! it is quiet again. The thread wakes only for such arrivals, never while shm carries the
//! traffic. Where it cannot run, or the device has no fd, a quiet device is looked at every
//! `QUIET_POLL_PERIOD` instead (fi_pingpong -p efa through shm, 8 B: polling every 5 µs cost
//! 1.23× the latency of never polling, medians of 12 alternating runs).

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use crate::prov::shm::IdleHint;
use crate::sys::poll::Epoll;
use crate::util::provider::Idle;

/// The device gave nothing for this long: the endpoint may stop looking at it on every poll.
pub(super) const DEVICE_QUIET: Duration = Duration::from_millis(1);
/// Without the watcher, a quiet device is still looked at this often.
pub(super) const QUIET_POLL_PERIOD: Duration = Duration::from_micros(5);
/// Without the watcher, polls that skip the device without the lock or the clock, for one that
/// takes the lock and reads the clock (which costs as much as the rest of an empty poll).
const QUIET_SKIPS: u32 = 8;

/// What a poller may know of an endpoint's device without the endpoint's lock. The endpoint
/// sets `quiet` and `watched` each time its lock is released (`ep::Locked`); the watcher sets
/// `input`.
pub(super) struct Quiet {
    /// Shm carries the local peers, nothing of ours is pending and the device has been quiet.
    quiet: AtomicBool,
    /// The watcher watches the device (else `QUIET_POLL_PERIOD` applies).
    watched: AtomicBool,
    /// The watcher saw the device readable since it was last looked at.
    input: AtomicBool,
    /// Polls that skipped an unwatched device. A relaxed load and store, not a locked
    /// increment: a count lost to a race only moves that poll.
    skipped: AtomicU32,
    /// The shm endpoint's own idle hint.
    shm: Option<Arc<IdleHint>>,
    /// This endpoint in the watcher's epoll set.
    token: u64,
}

impl Quiet {
    pub(super) fn new(shm: Option<Arc<IdleHint>>) -> Arc<Quiet> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(Quiet {
            quiet: AtomicBool::new(false),
            watched: AtomicBool::new(false),
            input: AtomicBool::new(false),
            skipped: AtomicU32::new(0),
            shm,
            token: NEXT.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Whether this poll may leave the device alone.
    #[inline(always)]
    pub(super) fn skip(&self) -> bool {
        self.answer(true)
    }

    /// `skip`'s last answer again, without counting another poll: for a progress call that
    /// the idle hint (`Idle::idle`, which asked `skip`) has just let through. Asking `skip`
    /// again there counted two polls for one, so an unwatched device's every eighth poll, the
    /// one let through, was always the second count: it was never looked at.
    #[inline(always)]
    pub(super) fn skip_again(&self) -> bool {
        self.answer(false)
    }

    /// `skip`, counting this poll against an unwatched device (`count`) or not.
    #[inline(always)]
    fn answer(&self, count: bool) -> bool {
        if !self.quiet.load(Ordering::Acquire) {
            return false;
        }
        if self.watched.load(Ordering::Relaxed) {
            return !self.input.load(Ordering::Acquire);
        }
        let mut n = self.skipped.load(Ordering::Relaxed);
        if count {
            n = n.wrapping_add(1);
            self.skipped.store(n, Ordering::Relaxed);
        }
        !n.is_multiple_of(QUIET_SKIPS)
    }

    /// Published by the lock holder as it releases the lock.
    pub(super) fn publish(&self, quiet: bool, watched: bool) {
        self.watched.store(watched, Ordering::Relaxed);
        self.quiet.store(quiet, Ordering::Release);
    }

    /// Whether the device needs nothing from the ack timer (`ack_timer`): it is quiet and
    /// watched, so whatever it must attend to (an arrival, a timer of its own, armed on its fd
    /// when it went quiet) makes the watcher raise `input` first, and the watcher then fires
    /// the endpoint's timer (`ack_timer::service_needed`). The thread sets no timer again on
    /// this answer (`RdmEndpoint::on_ack_timer`).
    pub(super) fn needs_no_service(&self) -> bool {
        self.quiet.load(Ordering::SeqCst)
            && self.watched.load(Ordering::SeqCst)
            && !self.input.load(Ordering::SeqCst)
    }

    /// Whether the watcher saw the device readable; clears it (the caller looks at the device
    /// now, and its watch has ended: the device must be watched again).
    pub(super) fn take_input(&self) -> bool {
        self.input.swap(false, Ordering::AcqRel)
    }

    /// Has the watcher watch `fd` (the device's wait fd) once; false when it cannot, as in a
    /// child forked after it started (it has the registry, not the thread). Asked as the
    /// device goes quiet, not per poll: getpid(2) is a system call.
    pub(super) fn watch(self: &Arc<Self>, fd: Option<RawFd>) -> bool {
        let (Some(fd), Some(w)) = (fd, WATCHER.as_ref().filter(|w| w.pid == std::process::id()))
        else {
            return false;
        };
        self.input.store(false, Ordering::Release);
        w.watch(self, fd)
    }

    /// This endpoint's key with the watcher and with the ack timer (`ack_timer::register`).
    pub(super) fn token(&self) -> u64 {
        self.token
    }

    /// The endpoint closes: the watcher forgets it.
    pub(super) fn forget(&self, fd: Option<RawFd>) {
        if let Some(w) = WATCHER.as_ref() {
            w.forget(self.token, fd);
        }
    }
}

impl Idle for Quiet {
    fn idle(&self) -> bool {
        self.shm.as_ref().is_some_and(|s| s.idle_now()) && self.skip()
    }
}

/// The thread that watches quiet devices, and the endpoints it watches for.
struct Watcher {
    epoll: Epoll,
    eps: Mutex<HashMap<u64, Weak<Quiet>>>,
    /// The process the thread runs in.
    pid: u32,
}

/// Started with the first watch; None if the epoll set or the thread could not be had.
static WATCHER: LazyLock<Option<Arc<Watcher>>> = LazyLock::new(|| {
    let w = Arc::new(Watcher {
        epoll: Epoll::new().ok()?,
        eps: Mutex::new(HashMap::new()),
        pid: std::process::id(),
    });
    let run = w.clone();
    std::thread::Builder::new()
        .name("fabric-quiet".into())
        .spawn(move || run.run())
        .ok()?;
    Some(w)
});

impl Watcher {
    fn eps(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<Quiet>>> {
        self.eps.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watch(&self, q: &Arc<Quiet>, fd: RawFd) -> bool {
        let mut eps = self.eps();
        // Endpoints dropped without fi_close (their fds closed, so out of the epoll set).
        eps.retain(|_, w| w.strong_count() > 0);
        eps.insert(q.token, Arc::downgrade(q));
        drop(eps);
        self.epoll.watch_once(fd, q.token).is_ok()
    }

    fn forget(&self, token: u64, fd: Option<RawFd>) {
        if let Some(fd) = fd {
            self.epoll.remove(fd);
        }
        self.eps().remove(&token);
    }

    fn run(&self) {
        let mut tokens = [0u64; 16];
        loop {
            let n = self.epoll.wait_tokens(&mut tokens, -1);
            let eps = self.eps();
            for t in &tokens[..n] {
                if let Some(q) = eps.get(t).and_then(Weak::upgrade) {
                    q.input.store(true, Ordering::SeqCst);
                    // The application may not look for a while: the ack timer services the
                    // device then, as it does any device left unattended.
                    super::ack_timer::service_needed(q.token);
                }
            }
        }
    }
}
