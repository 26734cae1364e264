//! The safety net under delayed acknowledgements, and the NIC the software device lacks.
//!
//! At the end of a pass the SRD device may keep an acknowledgement back for up to its
//! `ack_delay` (`srd::Config`), so that more arrivals, or the application's answer, carry it:
//! one ack for several datagrams in a stream, none of its own in a request–reply. Under
//! `FI_PROGRESS_MANUAL` nothing of ours runs while the application is away, and a receiver that
//! read its last completion and stopped calling would leave its peer waiting for that ack
//! until it gave the receiver up as unreachable. A device the application does not poll at all
//! must also be attended to as a NIC would be (`Device::service`: arrivals acknowledged into
//! the posted buffers or refused with RNR, retransmissions sent), so that an application busy
//! elsewhere for seconds is neither given up by its peers nor flooded past its buffers
//! (fabtests' `fi_efa_rnr_read_cq_error` expects the RNR a NIC would send).
//!
//! Both wait for the application to stop calling, so each endpoint has a deadline that its
//! calls keep pushing back: one that polls sets it `TICK` after its poll, and one that leaves
//! something kept back makes sure it is that soon (`ep::Locked`'s drop). One thread per
//! process sleeps on one timer (a timerfd) set to the earliest deadline, and runs only when it
//! fires, that is `TICK` at most after an endpoint's last call: it sends what the device still
//! keeps (unless the application is inside the library: its call ends with a flush),
//! services the device once it has been left alone for `ep::UNATTENDED`, and sets the
//! endpoint's deadline again (`RdmEndpoint::on_ack_timer`). While the application keeps
//! calling the thread never runs, and the timer is set a millisecond at most however many
//! endpoints it calls (`EndpointTimer::set_due`). Ticking every 2 ms instead while anything was
//! kept back (a ping-pong keeps an ack back at nearly every call), the thread ran 500 times a
//! second and preempted a busy-polling process up to 600 times a second; with a timer for
//! each endpoint, each pushed once a millisecond, 65 endpoints called in turn made 1.5
//! `timerfd_settime` calls a message. A device that is quiet and watched (`quiet`: local
//! peers through shm, nothing pending) has no deadline: its watcher makes it due at once when
//! the device turns readable (`service_needed`). A program whose peers all go through shm
//! never sees the thread run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::RdmEndpoint;
use crate::sys::poll::{Epoll, TimerFd};

/// Longest something kept back waits for this thread after the application's last call (the
/// device's own `ack_delay` bounds the wait while the application keeps calling). Well under
/// the UDP device's minimum retransmission timeout (5 ms, `device::udp`), so a stopped
/// receiver's kept ack reaches its sender before the sender's timer does.
pub(super) const TICK: Duration = Duration::from_millis(2);
/// How often a device left alone is serviced, once it has been for `ep::UNATTENDED`.
pub(super) const SERVICE_TICK: Duration = Duration::from_millis(10);
/// A round also takes the endpoints due this soon after it: each would wake the thread again.
const GATHER: Duration = Duration::from_micros(500);

const NEVER: u64 = u64::MAX;

/// An endpoint's deadline: when its application has stopped calling (see the module's
/// comment). Set by the endpoint under its lock, and by the thread when it takes the endpoint.
pub(super) struct EndpointTimer {
    /// `sys::os::monotonic_ns` by which the thread must look at the endpoint (`NEVER`: it
    /// needs nothing).
    due: AtomicU64,
    /// The endpoint in the registry (its `Quiet` token).
    token: u64,
}

impl EndpointTimer {
    pub(super) fn due(&self) -> u64 {
        self.due.load(Ordering::SeqCst)
    }

    /// The endpoint needs the thread by `due` (an endpoint's call ends; `now` is that call's
    /// clock). An atomic store; a system call only when the process's timer must fire
    /// sooner, or when this endpoint's deadline was the one it is set to and is near (then
    /// it moves to the next deadline: a call a millisecond at most while the application
    /// keeps calling, and the thread never runs).
    pub(super) fn set_due(&self, due: u64, now: u64) {
        self.due.store(due, Ordering::SeqCst);
        // Registered, so the thread runs in this process (`register`).
        let Some(t) = TIMER.as_ref() else {
            return;
        };
        let armed = t.armed.load(Ordering::SeqCst);
        if due < armed {
            t.arm_sooner(&t.eps(), due, self.token);
        } else if t.owner.load(Ordering::Relaxed) == self.token
            && armed < now.saturating_add(TICK.as_nanos() as u64 / 2)
        {
            t.rearm(&t.eps());
        }
    }

    /// As the thread sets it, while it takes the endpoint: its round ends with `rearm`.
    pub(super) fn set_due_in_round(&self, due: u64) {
        self.due.store(due, Ordering::SeqCst);
    }
}

struct Registered {
    ep: Weak<RdmEndpoint>,
    timer: Arc<EndpointTimer>,
}

/// One timer for the process, due at the earliest of its endpoints' deadlines.
///
/// `armed` is what the timerfd is set to, or later than it: the fd never fires after an
/// endpoint's deadline. A call stores its deadline, then reads `armed`, and sets the fd only
/// if it is sooner. Every setting of the fd happens under `eps`' lock, and one that may move
/// it later (`rearm`) first raises `armed` to `NEVER` and then reads every deadline: a
/// deadline stored meanwhile is either read, or its call sees `NEVER` and waits for the lock
/// to compare with the result (the operations are sequentially consistent).
struct AckTimer {
    epoll: Epoll,
    fd: TimerFd,
    armed: AtomicU64,
    /// The endpoint whose deadline `armed` is: only its calls move `armed` later.
    owner: AtomicU64,
    eps: Mutex<HashMap<u64, Registered>>,
    /// The process the thread runs in: a child forked since has the registry but no thread.
    pid: u32,
}

/// Started with the first endpoint; None if the timer or the thread could not be had (then no
/// endpoint keeps anything back: `register`, as in a child forked after it started).
static TIMER: LazyLock<Option<AckTimer>> = LazyLock::new(|| {
    let epoll = Epoll::new().ok()?;
    let fd = TimerFd::new().ok()?;
    epoll.add_token(fd.raw(), 0).ok()?;
    std::thread::Builder::new()
        .name("fabric-acks".into())
        .spawn(run)
        .ok()?;
    Some(AckTimer {
        epoll,
        fd,
        armed: AtomicU64::new(NEVER),
        owner: AtomicU64::new(0),
        eps: Mutex::new(HashMap::new()),
        pid: std::process::id(),
    })
});

impl AckTimer {
    fn eps(&self) -> MutexGuard<'_, HashMap<u64, Registered>> {
        self.eps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An endpoint needs the thread by `due`, which may be sooner than the fd is set to.
    fn arm_sooner(&self, _eps: &MutexGuard<'_, HashMap<u64, Registered>>, due: u64, token: u64) {
        if due < self.armed.load(Ordering::SeqCst) {
            ARMS.fetch_add(1, Ordering::Relaxed);
            self.fd.arm_at(due);
            self.owner.store(token, Ordering::Relaxed);
            self.armed.store(due, Ordering::SeqCst);
        }
    }

    /// Sets the fd to the earliest deadline (or disarms it): after a round, or when the
    /// deadline it was set to has moved.
    fn rearm(&self, eps: &MutexGuard<'_, HashMap<u64, Registered>>) {
        self.armed.store(NEVER, Ordering::SeqCst);
        let (mut first, mut owner) = (NEVER, 0);
        for (&token, r) in eps.iter() {
            let due = r.timer.due();
            if due < first {
                (first, owner) = (due, token);
            }
        }
        ARMS.fetch_add(1, Ordering::Relaxed);
        if first == NEVER {
            self.fd.disarm();
        } else {
            self.fd.arm_at(first);
        }
        self.owner.store(owner, Ordering::Relaxed);
        self.armed.store(first, Ordering::SeqCst);
    }
}

/// Times the thread woke (the timer fired), in this process: tests check that it does not
/// while applications keep calling, nor for a quiet, watched device.
static ROUNDS: AtomicU64 = AtomicU64::new(0);

pub(super) fn rounds() -> u64 {
    ROUNDS.load(Ordering::Relaxed)
}

/// Times the timer was set, in this process (a system call each): tests check that this
/// does not grow with the endpoints an application polls.
static ARMS: AtomicU64 = AtomicU64::new(0);

pub(super) fn arms() -> u64 {
    ARMS.load(Ordering::Relaxed)
}

/// Registers `ep` (an enabled endpoint, `token` its `Quiet` token) with the thread, with no
/// deadline yet; None when there is no thread: the endpoint must then keep nothing back.
pub(super) fn register(token: u64, ep: Weak<RdmEndpoint>) -> Option<Arc<EndpointTimer>> {
    // getpid(2) is a system call (glibc caches no pid): asked here only.
    let t = TIMER.as_ref().filter(|t| t.pid == std::process::id())?;
    let timer = Arc::new(EndpointTimer {
        due: AtomicU64::new(NEVER),
        token,
    });
    let mut eps = t.eps();
    // Endpoints dropped without fi_close.
    eps.retain(|_, r| r.ep.strong_count() > 0);
    eps.insert(
        token,
        Registered {
            ep,
            timer: timer.clone(),
        },
    );
    Some(timer)
}

/// The endpoint closes: it leaves the registry (a timer set for it fires for nothing, once).
pub(super) fn forget(timer: &EndpointTimer) {
    if let Some(t) = TIMER.as_ref() {
        t.eps().remove(&timer.token);
    }
}

/// A quiet, watched device turned readable (`quiet`'s watcher), and its application may not
/// look for a while: the thread takes the endpoint at once (servicing the device if it has
/// been left alone for `ep::UNATTENDED`, as any other).
pub(super) fn service_needed(token: u64) {
    if let Some(t) = TIMER.as_ref() {
        let eps = t.eps();
        if let Some(r) = eps.get(&token) {
            r.timer.set_due_in_round(0);
            t.arm_sooner(&eps, 0, token);
        }
    }
}

fn run() {
    // Waits for the initializer that started this thread to finish.
    let Some(t) = TIMER.as_ref() else {
        return;
    };
    let mut token = [0u64; 1];
    let mut round: Vec<(Weak<RdmEndpoint>, Arc<EndpointTimer>)> = Vec::new();
    loop {
        if t.epoll.wait_tokens(&mut token, -1) == 0 {
            continue;
        }
        t.fd.drain();
        ROUNDS.fetch_add(1, Ordering::Relaxed);
        let by = crate::sys::os::monotonic_ns().saturating_add(GATHER.as_nanos() as u64);
        // Taken outside the registry's lock: an endpoint's calls take it under theirs.
        round.extend(
            t.eps()
                .values()
                .filter(|r| r.timer.due() <= by)
                .map(|r| (r.ep.clone(), r.timer.clone())),
        );
        for (ep, timer) in round.drain(..) {
            match ep.upgrade() {
                // Sets the endpoint's deadline again as it needs, under its lock.
                Some(ep) => ep.on_ack_timer(&timer),
                None => forget(&timer),
            }
        }
        t.rearm(&t.eps());
    }
}
