//! Registered memory moved onto transparent huge pages, off the registration path.
//!
//! A peer's copies into and out of memory opened to it (shm's cross-memory attach, the
//! software SRD device's receives) pin and walk it page by page in the kernel; on 2 MiB pages,
//! a 512th of the pages. fi_rma_bw's traffic at 1 MiB both ways, pinned, 7–12 interleaved
//! runs, medians (upstream shm 2.5.1 in the same minutes): shm writes 4,377 → 8,717 MB/s
//! (5,151), reads 4,222 → 7,893 (4,632); efa with local peers through shm, writes 4,309 →
//! 7,118; efa over the software SRD on loopback, writes 3,040 → 3,468 (near vCPUs).
//!
//! The kernel's collapse copies each block (0.25–5 ms per 2 MiB here, from run to run; the
//! copy, `copy_mc`, half of it): 16 GiB could hold `fi_mr_reg`, which upstream returns from at
//! once, for 20 s. So a
//! process's first 256 MiB are moved inside `fi_mr_reg` and the rest by one thread per
//! process, which works through the registrations block by block, first registered first, and
//! stops at a region's next block once it is closed. The first registrations are a program's
//! communication buffers, in use at once: collapsed on the thread while fi_rma_bw's 1 MiB
//! writes both ways ran (efa, local peers through shm, 126 MiB registered), 5,675 MB/s against
//! 9,308 with the collapse inside `fi_mr_reg` (4 pinned rounds, medians).
//! Only memory opened to peers (`FI_REMOTE_READ`/`FI_REMOTE_WRITE`) is queued: local send and
//! receive buffers gained nothing (tagged 1 MiB over shm: 12,625 and 12,879 MB/s without and
//! with).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, OnceLock, Weak};

use crate::abi::consts::*;
use crate::util::mr::Mr;

/// A registration's ranges waiting for the thread.
struct Job {
    mr: Weak<Mr>,
    ranges: Vec<(usize, usize)>,
}

struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    /// Signalled when a job is queued, and when the thread has finished one (`wait_idle`).
    changed: Condvar,
    /// Jobs queued and not finished.
    pending: AtomicUsize,
    /// The process that started the thread: a forked child has no such thread (and its copy
    /// of the queue may have been taken mid-update), so it queues nothing.
    owner: OnceLock<u32>,
}

static QUEUE: LazyLock<Queue> = LazyLock::new(|| Queue {
    jobs: Mutex::new(VecDeque::new()),
    changed: Condvar::new(),
    pending: AtomicUsize::new(0),
    owner: OnceLock::new(),
});

/// How much of its registrations' memory a process moves inside `fi_mr_reg` before the rest goes
/// to the thread: at most some 0.6 s of registration time in a process's life here.
const SYNC_BYTES: usize = 256 << 20;

/// What is left of `SYNC_BYTES`.
static SYNC_LEFT: AtomicUsize = AtomicUsize::new(SYNC_BYTES);

/// Moves `mr`'s host memory onto huge pages where it is resident, if it is opened to peers:
/// the first `SYNC_BYTES` of the process's registrations now, the rest on the thread. See the
/// module's notes.
pub fn collapse_onto_huge_pages(mr: &Arc<Mr>) {
    collapse_with(mr, &SYNC_LEFT)
}

fn collapse_with(mr: &Arc<Mr>, sync_left: &AtomicUsize) {
    if mr.access() & (FI_REMOTE_READ | FI_REMOTE_WRITE) == 0 {
        return;
    }
    let Some(huge) = crate::sys::pages::transparent_huge_page_size() else {
        return;
    };
    let mut rest = Vec::new();
    for v in mr.iov() {
        let (addr, end) = (v.addr(), v.addr().saturating_add(v.len()));
        let had = sync_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                Some(left.saturating_sub(v.len()))
            })
            .unwrap_or(0);
        // Cut at a block's edge: below it now, from it on the thread.
        let cut = (addr + had.min(v.len())) & !(huge - 1);
        if cut > addr {
            crate::sys::pages::collapse_resident(addr, cut - addr, || true);
        }
        let from = cut.max(addr);
        if end.saturating_sub(from.next_multiple_of(huge)) >= huge {
            rest.push((from, end - from));
        }
    }
    if !rest.is_empty() {
        queue(mr, rest);
    }
}

/// Hands `ranges` of `mr` to the thread (started by the first call).
fn queue(mr: &Arc<Mr>, ranges: Vec<(usize, usize)>) {
    let q = &*QUEUE;
    let owner = *q.owner.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("fabric-hugepages".into())
            .spawn(run);
        // Without the thread nothing is queued: the memory stays on its pages.
        if spawned.is_ok() {
            std::process::id()
        } else {
            0
        }
    });
    if owner != std::process::id() {
        return;
    }
    q.pending.fetch_add(1, Ordering::AcqRel);
    q.jobs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back(Job {
            mr: Arc::downgrade(mr),
            ranges,
        });
    q.changed.notify_all();
}

fn run() {
    let q = &*QUEUE;
    loop {
        let job = {
            let mut jobs = q.jobs.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                match jobs.pop_front() {
                    Some(j) => break j,
                    None => jobs = q.changed.wait(jobs).unwrap_or_else(|e| e.into_inner()),
                }
            }
        };
        for &(addr, len) in &job.ranges {
            crate::sys::pages::collapse_resident(addr, len, || job.mr.strong_count() > 0);
        }
        q.pending.fetch_sub(1, Ordering::AcqRel);
        // Taking the lock orders this with a `wait_idle` that has just read `pending`.
        drop(q.jobs.lock().unwrap_or_else(|e| e.into_inner()));
        q.changed.notify_all();
    }
}

/// Waits until every queued registration has been worked through.
#[cfg(test)]
pub fn wait_idle() {
    let q = &*QUEUE;
    let mut jobs = q.jobs.lock().unwrap_or_else(|e| e.into_inner());
    while q.pending.load(Ordering::Acquire) > 0 {
        jobs = q.changed.wait(jobs).unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::mem::IoVec;
    use crate::sys::pages::{anon_huge_bytes, collapse_resident};
    use crate::util::mr::{MrMap, MrRequest};

    const HUGE: usize = 2 << 20;

    /// `blocks` whole aligned 2 MiB blocks of heap memory (leaked: a test's), the first
    /// `filled` of them filled.
    fn memory(blocks: usize, filled: usize) -> IoVec {
        let s: &'static mut [u8] = Box::leak(vec![0u8; (blocks + 1) * HUGE].into_boxed_slice());
        let first = s.as_ptr().align_offset(HUGE);
        let s = &mut s[first..first + blocks * HUGE];
        s[..filled * HUGE].fill(7);
        IoVec::from_mut_slice(s)
    }

    /// A registration opened to peers is moved onto huge pages by the thread; one that is not
    /// (send and receive buffers) is left on its pages. (That the bytes stay and nothing is
    /// populated: `sys::pages`' test.) The kernel merges neighbouring mappings, so each check
    /// compares its mapping's huge bytes before and after.
    #[test]
    fn memory_opened_to_peers_moves_to_huge_pages_after_registration() {
        let _alone = crate::sys::pages::COLLAPSING.lock();
        // Whether this kernel collapses at all (6.1 on, THP not `never`).
        let probe = memory(1, 1);
        let collapses = collapse_resident(probe.addr(), probe.len(), || true) > 0;
        let map = MrMap::new(0, 8);

        let local = memory(3, 3);
        let before = anon_huge_bytes(local.addr());
        let sendrecv = map
            .register(&MrRequest {
                iov: vec![local],
                access: FI_SEND | FI_RECV,
                requested_key: 2,
                ..Default::default()
            })
            .unwrap();
        collapse_with(&sendrecv, &AtomicUsize::new(0));
        wait_idle();
        assert_eq!(
            anon_huge_bytes(local.addr()),
            before,
            "send/recv memory stays"
        );

        let opened = memory(3, 2);
        let before = anon_huge_bytes(opened.addr());
        let rma = map
            .register(&MrRequest {
                iov: vec![opened],
                access: FI_REMOTE_WRITE | FI_REMOTE_READ,
                requested_key: 1,
                ..Default::default()
            })
            .unwrap();
        collapse_with(&rma, &AtomicUsize::new(0));
        wait_idle();
        let moved = anon_huge_bytes(opened.addr()) - before;
        if collapses {
            assert_eq!(moved, 2 * HUGE, "the two filled blocks");
        } else {
            assert_eq!(moved, 0);
        }
    }

    /// The budget is spent inside the call, cut at a block's edge, and the rest of the range
    /// goes to the thread.
    #[test]
    fn the_first_bytes_move_at_once_and_the_rest_on_the_thread() {
        let _alone = crate::sys::pages::COLLAPSING.lock();
        let probe = memory(1, 1);
        if collapse_resident(probe.addr(), probe.len(), || true) == 0 {
            return; // this kernel does not collapse: the other test checks nothing moves
        }
        let map = MrMap::new(0, 8);
        let opened = memory(3, 3);
        let before = anon_huge_bytes(opened.addr());
        let rma = map
            .register(&MrRequest {
                iov: vec![opened],
                access: FI_REMOTE_READ,
                requested_key: 3,
                ..Default::default()
            })
            .unwrap();
        // Two blocks and a half of budget: two blocks now.
        let budget = AtomicUsize::new(5 * HUGE / 2);
        collapse_with(&rma, &budget);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
        assert!(anon_huge_bytes(opened.addr()) - before >= 2 * HUGE);
        wait_idle();
        assert_eq!(anon_huge_bytes(opened.addr()) - before, 3 * HUGE);
    }
}
