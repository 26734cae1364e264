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
//! Both wait for the application to stop calling, so each endpoint has a timer (a timerfd)
//! that its calls keep pushing back: one that polls moves it to `TICK` ahead whenever it is
//! due within half of that (a system call a millisecond at most), and one that leaves
//! something kept back makes sure it is due within `TICK` (`ep::Locked`'s drop). One thread
//! per process blocks in epoll on all the timers and runs only when one fires, that is
//! `TICK` at most after an endpoint's last call: it sends what the device still keeps
//! (unless the application is inside the library: its call ends with a flush), services the
//! device once it has been left alone for `ep::UNATTENDED`, and sets the timer again
//! (`RdmEndpoint::on_ack_timer`). While the application keeps calling the thread never
//! runs. Ticking every 2 ms instead while anything was kept back (a ping-pong keeps an ack
//! back at nearly every call), it ran 500 times a second and preempted a busy-polling process
//! up to 600 times a second; tagged 1 MiB sends made ten times the context switches of
//! 2.5.1's tcp. A device that is quiet and watched (`quiet`: local peers through
//! shm, nothing pending) sets no timer: its watcher fires it when the device turns readable
//! (`service_needed`). A program whose peers all go through shm never sees the thread run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
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

/// An endpoint's timer: due when its application has stopped calling (see the module's
/// comment). Armed by the endpoint under its lock, and by the thread when it fires.
pub(super) struct EndpointTimer {
    fd: TimerFd,
    /// The endpoint in the thread's epoll set and registry (its `Quiet` token).
    token: u64,
}

impl EndpointTimer {
    /// Due `after` from now (zero: at once); replaces any earlier deadline.
    pub(super) fn arm(&self, after: Duration) {
        self.fd.arm(after.as_nanos() as u64);
    }
}

struct Registered {
    ep: Weak<RdmEndpoint>,
    timer: Arc<EndpointTimer>,
}

struct AckTimer {
    epoll: Epoll,
    eps: Mutex<HashMap<u64, Registered>>,
    /// The process the thread runs in: a child forked since has the registry but no thread.
    pid: u32,
}

/// Started with the first endpoint; None if the epoll set or the thread could not be had
/// (then no endpoint keeps anything back: `register`, as in a child forked after it started).
static TIMER: LazyLock<Option<AckTimer>> = LazyLock::new(|| {
    let epoll = Epoll::new().ok()?;
    std::thread::Builder::new()
        .name("fabric-acks".into())
        .spawn(run)
        .ok()?;
    Some(AckTimer {
        epoll,
        eps: Mutex::new(HashMap::new()),
        pid: std::process::id(),
    })
});

impl AckTimer {
    fn eps(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Registered>> {
        self.eps.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Times the thread woke (a timer fired), in this process: tests check that it does not while
/// applications keep calling, nor for a quiet, watched device.
static ROUNDS: AtomicU64 = AtomicU64::new(0);

pub(super) fn rounds() -> u64 {
    ROUNDS.load(Ordering::Relaxed)
}

/// Gives `ep` (an enabled endpoint, `token` its `Quiet` token) a timer the thread watches;
/// None when there is no thread or no timer to be had: the endpoint must then keep nothing
/// back.
pub(super) fn register(token: u64, ep: Weak<RdmEndpoint>) -> Option<Arc<EndpointTimer>> {
    let t = TIMER.as_ref().filter(|t| t.pid == std::process::id())?;
    let timer = Arc::new(EndpointTimer {
        fd: TimerFd::new().ok()?,
        token,
    });
    let mut eps = t.eps();
    // Endpoints dropped without fi_close.
    eps.retain(|_, r| r.ep.strong_count() > 0);
    t.epoll.add_token(timer.fd.raw(), token).ok()?;
    eps.insert(
        token,
        Registered {
            ep,
            timer: timer.clone(),
        },
    );
    Some(timer)
}

/// The endpoint closes: its timer leaves the epoll set and the registry.
pub(super) fn forget(timer: &EndpointTimer) {
    if let Some(t) = TIMER.as_ref() {
        t.epoll.remove(timer.fd.raw());
        t.eps().remove(&timer.token);
    }
}

/// A quiet, watched device turned readable (`quiet`'s watcher), and its application may not
/// look for a while: the thread looks at once (servicing the device if it has been left
/// alone for `ep::UNATTENDED`, as any other).
pub(super) fn service_needed(token: u64) {
    if let Some(t) = TIMER.as_ref()
        && let Some(r) = t.eps().get(&token)
    {
        r.timer.arm(Duration::ZERO);
    }
}

fn run() {
    // Waits for the initializer that started this thread to finish.
    let Some(t) = TIMER.as_ref() else {
        return;
    };
    let mut tokens = [0u64; 16];
    loop {
        let n = t.epoll.wait_tokens(&mut tokens, -1);
        ROUNDS.fetch_add(1, Ordering::Relaxed);
        for token in &tokens[..n] {
            let Some((ep, timer)) = t
                .eps()
                .get(token)
                .map(|r| (r.ep.upgrade(), r.timer.clone()))
            else {
                continue;
            };
            timer.fd.drain();
            match ep {
                // The endpoint sets the timer again as it sees fit, under its lock.
                Some(ep) => ep.on_ack_timer(&timer),
                None => forget(&timer),
            }
        }
    }
}
