//! The safety net under delayed acknowledgements.
//!
//! At the end of a pass the SRD device may keep an acknowledgement back for up to its
//! `ack_delay` (`srd::Config`), so that more arrivals, or the application's answer, carry it:
//! one ack for several datagrams in a stream, none of its own in a request–reply. Under
//! `FI_PROGRESS_MANUAL` nothing of ours runs while the application is away, and a receiver that
//! read its last completion and stopped calling would leave its peer waiting for that ack
//! until it gave the receiver up as unreachable. So an endpoint that keeps an ack back raises
//! its flag, and this thread, every `TICK`, flushes what the flagged endpoints still keep
//! (when their lock is free: when it is not, the application is inside the library and its
//! call ends with a flush). After `IDLE_TICKS` ticks with nothing kept it parks, and the next
//! endpoint that keeps an ack wakes it for at least `IDLE_TICKS` ticks again; while it is
//! awake the endpoints make no system call for it.
//!
//! It also stands in for the NIC that the software device lacks: while endpoints exist, its
//! park ends every `SERVICE_TICK`, and a device the application has not polled for
//! `ep::UNATTENDED` is serviced (`Device::service`: arrivals acknowledged into the posted
//! buffers or refused with RNR, retransmissions sent). An application busy elsewhere for
//! seconds is then neither given up by its peers as unreachable nor flooded past its buffers
//! (fabtests' `fi_efa_rnr_read_cq_error` expects the RNR a NIC would send). A device that is
//! quiet and watched (`quiet`: local peers through shm, nothing pending) needs no tick: its
//! watcher wakes this thread when it turns readable, and the endpoint does when it leaves
//! quiet (`service_needed`). With every device so, the thread parks for good: a program
//! whose peers all go through shm never sees it run.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::RdmEndpoint;

/// Longest an ack waits for this thread beyond the application's last call (the device's own
/// `ack_delay` bounds the wait while the application keeps calling). Well under the UDP
/// device's minimum retransmission timeout (5 ms, `device::udp`), so a stopped receiver's
/// kept ack reaches its sender before the sender's timer does. Each tick preempts a
/// busy-polling process on a busy host: every 100 µs cost ping-pongs on two cores 20–50 % of
/// their latency; every 1 ms, 8-byte ping-pongs over SRD (pinned, 34 interleaved rounds) took
/// 1.01–1.04× as long as every 2 ms, run by run (8.3–8.8 µs against 8.0–8.2, medians).
const TICK: Duration = Duration::from_millis(2);
/// Ticks with nothing kept back before the thread parks (20 ms).
const IDLE_TICKS: u32 = 10;
/// How often unattended devices are looked for while parked with endpoints open.
const SERVICE_TICK: Duration = Duration::from_millis(10);

struct Entry {
    kept: Arc<AtomicBool>,
    ep: Weak<RdmEndpoint>,
}

struct AckTimer {
    eps: Mutex<Vec<Entry>>,
    /// `AWAKE`, `PARKED` (until the next service tick) or `PARKED_FOR_GOOD`.
    parked: AtomicU8,
    thread: OnceLock<Thread>,
}

/// The thread runs, or is about to look again.
const AWAKE: u8 = 0;
/// Parked until the next service tick at the latest.
const PARKED: u8 = 1;
/// Parked with no tick to keep: only `kept`, `service_needed` or `register` wake it.
const PARKED_FOR_GOOD: u8 = 2;

static TIMER: LazyLock<AckTimer> = LazyLock::new(|| AckTimer {
    eps: Mutex::new(Vec::new()),
    parked: AtomicU8::new(AWAKE),
    thread: OnceLock::new(),
});

/// Watches `ep`, whose device reports kept-back acks through `kept`.
pub(super) fn register(kept: Arc<AtomicBool>, ep: Weak<RdmEndpoint>) {
    let t = &*TIMER;
    let mut eps = t.eps.lock().unwrap_or_else(|e| e.into_inner());
    eps.retain(|e| e.ep.strong_count() > 0);
    eps.push(Entry { kept, ep });
    drop(eps);
    t.thread.get_or_init(|| {
        match std::thread::Builder::new()
            .name("fabric-acks".into())
            .spawn(run)
        {
            Ok(h) => {
                RUNNING.store(true, Ordering::Release);
                h.thread().clone()
            }
            // Without the thread no ack is kept back (`keeping_allowed`).
            Err(_) => std::thread::current(),
        }
    });
    // It may be parked for good (no endpoint needed it): this one is to be serviced.
    if RUNNING.load(Ordering::Acquire)
        && let Some(th) = t.thread.get()
    {
        th.unpark();
    }
}

/// An endpoint's device needs the service tick again (it left quiet, or its watcher saw it
/// readable: `RdmEndpoint::needs_service`): a thread parked for good ticks again. The
/// caller changed what `needs_service` reads first; the fence orders that before this look
/// at `parked`, as the thread orders its store of `parked` before its look at the endpoints
/// (either the thread sees the change, or this sees it parked).
pub(super) fn service_needed() {
    let t = &*TIMER;
    core::sync::atomic::fence(Ordering::SeqCst);
    if t.parked.load(Ordering::SeqCst) == PARKED_FOR_GOOD
        && t.parked
            .compare_exchange(PARKED_FOR_GOOD, PARKED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        && let Some(th) = t.thread.get()
    {
        th.unpark();
    }
}

/// The thread runs: acks may be kept back.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Whether acks may be kept back at all: only with the thread running to flush them.
pub(super) fn keeping_allowed() -> bool {
    RUNNING.load(Ordering::Relaxed)
}

/// Times an endpoint woke the parked thread (`kept`), in this process.
static WAKES: AtomicU64 = AtomicU64::new(0);

/// Rounds of the thread's loop, in this process: each is a wake from a sleep or a park.
static ROUNDS: AtomicU64 = AtomicU64::new(0);

/// How many times the thread has woken so far (tests: it must not while every device is quiet
/// and watched).
pub(super) fn rounds() -> u64 {
    ROUNDS.load(Ordering::Relaxed)
}

/// How many times endpoints of this process have woken the ack timer's thread from its park:
/// a system call on the application's path each time, so at most one per `IDLE_TICKS` ticks
/// (logged when an endpoint closes).
pub(super) fn wakes() -> u64 {
    WAKES.load(Ordering::Relaxed)
}

/// An endpoint raised its flag: make sure the thread is awake. (Its flag was stored first,
/// sequentially consistent with `parked`: either this sees the thread parked and wakes it, or
/// the thread, about to park, sees the flag.)
pub(super) fn kept() {
    let t = &*TIMER;
    if t.parked.load(Ordering::SeqCst) != AWAKE
        && t.parked.swap(AWAKE, Ordering::SeqCst) != AWAKE
        && let Some(th) = t.thread.get()
    {
        WAKES.fetch_add(1, Ordering::Relaxed);
        th.unpark();
    }
}

fn any_kept(t: &AckTimer) -> bool {
    let eps = t.eps.lock().unwrap_or_else(|e| e.into_inner());
    eps.iter().any(|e| e.kept.load(Ordering::SeqCst))
}

/// Services the devices of endpoints the application has left alone; whether any endpoint
/// needs the service tick.
fn service(t: &AckTimer) -> bool {
    let eps: Vec<_> = {
        let mut eps = t.eps.lock().unwrap_or_else(|e| e.into_inner());
        eps.retain(|e| e.ep.strong_count() > 0);
        eps.iter().filter_map(|e| e.ep.upgrade()).collect()
    };
    let mut ticking = false;
    for ep in eps.iter().filter(|ep| ep.needs_service()) {
        ticking = true;
        ep.service_unattended();
    }
    ticking
}

/// Whether any endpoint needs the service tick (`RdmEndpoint::needs_service`), asked again
/// just before the thread parks for good.
fn any_needs_service(t: &AckTimer) -> bool {
    let eps = t.eps.lock().unwrap_or_else(|e| e.into_inner());
    eps.iter()
        .any(|e| e.ep.upgrade().is_some_and(|ep| ep.needs_service()))
}

fn run() {
    let t = &*TIMER;
    let mut idle = 0u32;
    let mut ticking = true;
    let mut last_service = Instant::now();
    loop {
        // Woken from its park by an endpoint that kept an ack back (`kept` sets `parked`
        // to `AWAKE` before it unparks).
        let mut woken = false;
        if idle < IDLE_TICKS {
            std::thread::sleep(TICK);
        } else {
            t.parked.store(PARKED, Ordering::SeqCst);
            if !any_kept(t) {
                // (Either may return early: the loop looks again.) While a device needs the
                // service tick the park ends in time for it. Otherwise the thread parks for
                // good, once it has said so and then found no device needing it
                // (`service_needed` does the converse).
                if ticking {
                    std::thread::park_timeout(SERVICE_TICK);
                } else if t
                    .parked
                    .compare_exchange(PARKED, PARKED_FOR_GOOD, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    if any_needs_service(t) {
                        ticking = true;
                    } else {
                        std::thread::park();
                    }
                }
            }
            woken = t.parked.swap(AWAKE, Ordering::SeqCst) == AWAKE;
        }
        ROUNDS.fetch_add(1, Ordering::Relaxed);
        let mut any = false;
        {
            let mut eps = t.eps.lock().unwrap_or_else(|e| e.into_inner());
            eps.retain(|e| e.ep.strong_count() > 0);
            for e in eps.iter().filter(|e| e.kept.load(Ordering::SeqCst)) {
                any = true;
                if let Some(ep) = e.ep.upgrade() {
                    ep.flush_kept_acks();
                }
            }
        }
        if last_service.elapsed() >= SERVICE_TICK {
            ticking = service(t);
            last_service = Instant::now();
        }
        // A wake starts `IDLE_TICKS` ticks awake even if the endpoint's next call has
        // already sent the ack it kept, as a ping-pong's answer does at once: parking again
        // at once had every message of a ping-pong wake the thread, a futex call (1-18 µs
        // on two busy cores) in the middle of each hop and a thread put on a busy CPU.
        idle = if any || woken {
            0
        } else {
            idle.saturating_add(1)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping-pong keeps an ack back at the end of nearly every call, for the answer to carry,
    /// and its next call sends it a microsecond later. Once parked, the thread is woken by
    /// such an ack and must then stay up for its idle ticks: it used to park again at once
    /// (the ack it was woken for had already left), and then every message of a ping-pong
    /// woke it, a futex call in the middle of each hop on a CPU another process was busy on.
    /// efa's 8-byte `fi_rdm_pingpong` spent 36 % of its time in round trips over twice the
    /// median.
    #[test]
    fn a_wake_keeps_the_thread_up_for_its_idle_ticks() {
        // The thread starts; with nothing kept it parks after its idle ticks.
        register(Arc::new(AtomicBool::new(false)), Weak::new());
        std::thread::sleep(TICK * (IDLE_TICKS + 10));
        let (w0, t0) = (wakes(), Instant::now());
        let mut calls = 0u64;
        while t0.elapsed() < Duration::from_millis(60) {
            kept();
            calls += 1;
            std::thread::sleep(Duration::from_micros(20));
        }
        let (n, ms) = (wakes() - w0, t0.elapsed().as_millis() as u64);
        // After a wake the thread ticks at least IDLE_TICKS × TICK (20 ms) before it parks
        // again, whatever else this process runs (other tests' endpoints may keep it up for
        // good, and then nothing wakes it). Parking again at once, it was woken 554 times.
        let awake_ms = (TICK * IDLE_TICKS).as_millis() as u64;
        assert!(
            n <= ms / awake_ms + 2,
            "{n} wakes in {ms} ms for {calls} kept acks"
        );
    }
}
