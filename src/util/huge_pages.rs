//! Registered memory moved onto transparent huge pages, within a budget per process.
//!
//! A peer's copies into and out of memory opened to it (shm's cross-memory attach, the
//! software SRD device's receives) pin and walk it page by page in the kernel; on 2 MiB pages,
//! a 512th of the pages. fi_rma_bw's traffic at 1 MiB both ways, pinned, 7–12 interleaved
//! runs, medians (upstream shm 2.5.1 in the same minutes): shm writes 4,377 → 8,717 MB/s
//! (5,151), reads 4,222 → 7,893 (4,632); efa with local peers through shm, writes 4,309 →
//! 7,118; efa over the software SRD on loopback, writes 3,040 → 3,468 (near vCPUs).
//!
//! The kernel's collapse copies each block (0.25–5 ms per 2 MiB here, from run to run; the
//! copy, `copy_mc`, half of it), inside `fi_mr_reg`, which upstream returns from at once: 16 GiB
//! would hold it for 20 s. So a process moves at most `BUDGET` of its registrations, the first
//! ones (a program's communication buffers), and leaves the rest on their pages. Not on a
//! thread: a collapse there runs while the buffers are in use and takes the CPU from the
//! program's own work (`make bench`'s sweep, whose small sizes run first: shm writes both ways
//! at 512 B fell from 2,502 to 256 MB/s while the thread moved the rest of its 1 GiB; efa
//! with local peers through shm at 1 MiB, 9,308 against 5,675 MB/s with a 126 MiB buffer).
//! Only memory opened to peers (`FI_REMOTE_READ`/`FI_REMOTE_WRITE`) is moved: local send and
//! receive buffers gained nothing (tagged 1 MiB over shm: 12,625 and 12,879 MB/s without and
//! with).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::consts::*;
use crate::util::mr::Mr;

/// How much of its registrations' memory a process moves: at most some 2.5 s of registration
/// time in its life here (about 0.15 s at the usual 0.3 ms a block), enough for fabtests'
/// largest buffers (fi_rma_bw to 8 MiB: two areas of 64 slots, 1 GiB).
const BUDGET: usize = 1 << 30;

/// What is left of `BUDGET`.
static LEFT: AtomicUsize = AtomicUsize::new(BUDGET);

/// Moves `mr`'s host memory onto huge pages where it is resident, if it is opened to peers,
/// while the process's budget lasts. See the module's notes.
pub fn collapse_onto_huge_pages(mr: &Mr) {
    collapse_with(mr, &LEFT)
}

fn collapse_with(mr: &Mr, left: &AtomicUsize) {
    if mr.access() & (FI_REMOTE_READ | FI_REMOTE_WRITE) == 0 {
        return;
    }
    let Some(huge) = crate::sys::pages::transparent_huge_page_size() else {
        return;
    };
    for v in mr.iov() {
        let addr = v.addr();
        let had = left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                Some(l.saturating_sub(v.len()))
            })
            .unwrap_or(0);
        // The budget ends at a block's edge.
        let end = (addr + had.min(v.len())) & !(huge - 1);
        if end > addr {
            crate::sys::pages::collapse_resident(addr, end - addr);
        }
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

    /// `iov` registered in `map` with `access` under `key`.
    fn register(map: &MrMap, iov: IoVec, access: u64, key: u64) -> std::sync::Arc<Mr> {
        map.register(&MrRequest {
            iov: vec![iov],
            access,
            requested_key: key,
            ..Default::default()
        })
        .unwrap()
    }

    /// A registration opened to peers is moved onto huge pages; one that is not (send and
    /// receive buffers) is left on its pages. (That the bytes stay and nothing is populated:
    /// `sys::pages`' test.) The kernel merges neighbouring mappings, so each check compares its
    /// mapping's huge bytes before and after.
    #[test]
    fn memory_opened_to_peers_moves_to_huge_pages() {
        let _alone = crate::sys::pages::COLLAPSING.lock();
        // Whether this kernel collapses at all (6.1 on, THP not `never`).
        let probe = memory(1, 1);
        let collapses = collapse_resident(probe.addr(), probe.len()) > 0;
        let map = MrMap::new(0, 8);

        let local = memory(3, 3);
        let before = anon_huge_bytes(local.addr());
        let sendrecv = register(&map, local, FI_SEND | FI_RECV, 2);
        collapse_with(&sendrecv, &AtomicUsize::new(BUDGET));
        assert_eq!(
            anon_huge_bytes(local.addr()),
            before,
            "send/recv memory stays"
        );

        let opened = memory(3, 2);
        let before = anon_huge_bytes(opened.addr());
        let rma = register(&map, opened, FI_REMOTE_WRITE | FI_REMOTE_READ, 1);
        collapse_with(&rma, &AtomicUsize::new(BUDGET));
        let moved = anon_huge_bytes(opened.addr()) - before;
        if collapses {
            assert_eq!(moved, 2 * HUGE, "the two filled blocks");
        } else {
            assert_eq!(moved, 0);
        }
    }

    /// The budget ends at a block's edge, and memory past it stays on its pages.
    #[test]
    fn memory_past_the_budget_stays() {
        let _alone = crate::sys::pages::COLLAPSING.lock();
        let probe = memory(1, 1);
        if collapse_resident(probe.addr(), probe.len()) == 0 {
            return; // this kernel does not collapse: the other test checks nothing moves
        }
        let map = MrMap::new(0, 8);
        let opened = memory(3, 3);
        let before = anon_huge_bytes(opened.addr());
        let rma = register(&map, opened, FI_REMOTE_READ, 3);
        // Two blocks and a half of budget: two blocks move, the third stays.
        let left = AtomicUsize::new(5 * HUGE / 2);
        collapse_with(&rma, &left);
        assert_eq!(left.load(Ordering::Relaxed), 0);
        assert_eq!(anon_huge_bytes(opened.addr()) - before, 2 * HUGE);
        // Spent: nothing more moves.
        let again = memory(1, 1);
        let more = register(&map, again, FI_REMOTE_WRITE, 4);
        let before = anon_huge_bytes(again.addr());
        collapse_with(&more, &left);
        assert_eq!(anon_huge_bytes(again.addr()), before);
    }
}
