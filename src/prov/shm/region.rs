//! An endpoint's shared-memory region: the only part of the shm provider that touches shared
//! memory directly.
//!
//! Layout (offsets from the start; every process maps the region at its own address):
//!
//! | part | what | written by |
//! | --- | --- | --- |
//! | header | magic, version, owner uid/pid, state, sizes, a random token | owner |
//! | ring | a bounded multi-producer queue of fixed-size command slots | peers push, owner pops |
//! | bounce buffers | `BOUNCE_BUFS` buffers of `BOUNCE_SIZE` bytes with a state word each | owner fills, peers read and release |
//!
//! Peers may be buggy or hostile: everything read from a region is bounds-checked before use,
//! and nothing in it is ever turned into a reference or an index without a check.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use crate::core::{Errno, Result};
use crate::sys::shm::ShmMap;

pub const MAGIC: u64 = u64::from_le_bytes(*b"fabricSM");
pub const VERSION: u32 = 5;
/// Command slots in the ring (a power of two).
pub const RING_SLOTS: usize = 1024;
/// Bytes of one slot: an 8-byte sequence word and the command.
pub const SLOT_SIZE: usize = 320;
/// Bytes of a command.
pub const CMD_SIZE: usize = SLOT_SIZE - 8;
/// Bytes of a command read before the length of the rest is known (its header).
pub const CMD_PREFIX: usize = 48;
/// Bounce buffers for data that cannot be copied across processes in one step (inject, results,
/// and the segmented path used when cross-memory attach is unavailable). Enough that buffers
/// taken in turn (`Region::buf_lease`) are reused only after a peer's cache let go of them
/// (256 × 4 KiB is a 1 MiB L2); the region is sparse, so buffers never filled cost nothing.
pub const BOUNCE_BUFS: usize = 256;
pub const BOUNCE_SIZE: usize = 64 * 1024;

/// How far ahead of the slot it fills a producer prefetches the next ones, and
/// the owner the ones it will pop: the line of a slot was last written on the other side, and
/// waiting for it was most of the time of a push and of a pop of a small message.
const PUSH_AHEAD: u64 = 8;
const POP_AHEAD: u64 = 4;

const HEADER_SIZE: usize = 256;
const RING_CTL_OFF: usize = HEADER_SIZE;
const RING_OFF: usize = RING_CTL_OFF + 128;
const BUF_STATE_OFF: usize = RING_OFF + RING_SLOTS * SLOT_SIZE;
const BUF_OFF: usize = BUF_STATE_OFF + BOUNCE_BUFS * 64;
pub const REGION_SIZE: usize = BUF_OFF + BOUNCE_BUFS * BOUNCE_SIZE;

pub const STATE_READY: u32 = 1;
pub const STATE_CLOSED: u32 = 2;

const BUF_FREE: u32 = 0;
/// A lent buffer's state: odd, and different for each lending (`BufLease`), so that the
/// owner can take back a lease that nobody released without freeing a later one.
const BUF_USED: u32 = 1;

/// The first `HEADER_SIZE` bytes. Its fields keep their offsets in every layout version
/// (`VERSION` counts changes of what follows it), so that a sweep can judge a region left by
/// another build by its owner fields (`sweepable`).
#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    uid: AtomicU32,
    pid: AtomicU32,
    state: AtomicU32,
    token: AtomicU64,
    /// The owner's address of the region (for the cross-memory-attach probe).
    base: AtomicU64,
    size: AtomicU64,
    /// When the owner closed the region with bounce buffers lent (seconds since the epoch).
    closed_at: AtomicU64,
    /// The owner's pid namespace (`sys::os::pid_namespace`): its pid means nothing elsewhere.
    pidns: AtomicU64,
}

/// How long a closed region whose owner died is kept for peers that still have to read
/// a bounce buffer of it, before a stale-region sweep removes it anyway.
const LINGER_SECS: u64 = 60;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One lending of one of our bounce buffers (`Region::buf_lease`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufLease {
    pub idx: u32,
    state: u32,
}

/// A mapped region (ours or a peer's).
#[derive(Debug)]
pub struct Region {
    map: ShmMap,
    name: String,
    owner: bool,
    /// Owner only: bounce buffers lent so far (each lending's state is told apart by it).
    leases: AtomicU32,
    /// Owner only: ring slots before this position are handed back to producers; slots from
    /// here to the head were popped and are handed back by `release_consumed`.
    released: AtomicU64,
    /// Owner only: where the search for a buffer taken in turn starts.
    next_in_turn: AtomicU32,
}

impl Region {
    /// Creates this endpoint's region `name` (owner-only permissions). A stale region of a dead
    /// process with the same name is removed first.
    pub fn create(name: &str, token: u64) -> Result<Region> {
        let map = match ShmMap::create(name, REGION_SIZE) {
            Ok(m) => m,
            Err(e) if e.0 == libc::EEXIST => {
                // Only a region whose owner process is dead may be replaced; one that is being
                // created (not yet readable) or belongs to a live process is in use.
                match Region::open(name) {
                    // A closed region may still linger for its peers (see `close`); whoever
                    // mapped it keeps its mapping when the name is taken over.
                    Ok(old) if old.stale() || old.state() == STATE_CLOSED => {}
                    _ => return Err(Errno::ADDRINUSE),
                }
                crate::sys::shm::unlink(name);
                ShmMap::create(name, REGION_SIZE)?
            }
            Err(e) => return Err(e),
        };
        let r = Region {
            map,
            name: name.to_string(),
            owner: true,
            leases: AtomicU32::new(0),
            released: AtomicU64::new(0),
            next_in_turn: AtomicU32::new(0),
        };
        let h = r.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.uid.store(crate::sys::os::uid(), Ordering::Relaxed);
        h.pid.store(crate::sys::os::pid(), Ordering::Relaxed);
        h.pidns
            .store(crate::sys::os::pid_namespace(), Ordering::Relaxed);
        h.token.store(token, Ordering::Relaxed);
        h.base.store(r.map.as_ptr() as u64, Ordering::Relaxed);
        h.size.store(REGION_SIZE as u64, Ordering::Relaxed);
        for i in 0..RING_SLOTS {
            r.slot_seq(i).store(i as u64, Ordering::Relaxed);
        }
        h.magic.store(MAGIC, Ordering::Relaxed);
        h.state.store(STATE_READY, Ordering::Release);
        Ok(r)
    }

    /// Maps a peer's region, checking owner, permissions, magic, version and size.
    pub fn open(name: &str) -> Result<Region> {
        let map = ShmMap::open(name, REGION_SIZE)?;
        let r = Region {
            map,
            name: name.to_string(),
            owner: false,
            leases: AtomicU32::new(0),
            released: AtomicU64::new(0),
            next_in_turn: AtomicU32::new(0),
        };
        let h = r.header();
        if h.magic.load(Ordering::Acquire) != MAGIC
            || h.version.load(Ordering::Relaxed) != VERSION
            || h.uid.load(Ordering::Relaxed) != crate::sys::os::uid()
            || h.size.load(Ordering::Relaxed) != REGION_SIZE as u64
        {
            return Err(Errno::PROTO);
        }
        Ok(r)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least REGION_SIZE bytes (checked at create/open), page
        // aligned, and the header is made of atomics, valid for any bit pattern.
        unsafe { &*self.map.as_ptr().cast::<Header>() }
    }

    pub fn token(&self) -> u64 {
        self.header().token.load(Ordering::Relaxed)
    }

    pub fn state(&self) -> u32 {
        self.header().state.load(Ordering::Acquire)
    }

    /// The owner's pid as this process sees it: None when the owner lives in another pid
    /// namespace (or has not written its pid yet), where the number names some other process
    /// or none. Such an owner is neither probed nor attached to (cross-memory attach).
    pub fn owner_pid(&self) -> Option<i32> {
        self.header().owner_pid()
    }

    /// Whether the region was left behind by a process that died (a region still being created
    /// has no pid yet and is not stale; one from another pid namespace cannot be judged here,
    /// and is left to its owner's close or to a sweep in its own namespace).
    pub fn stale(&self) -> bool {
        self.header().stale()
    }

    /// Whether the owner is gone: closed its endpoint, or its process exited (as far as can be
    /// told from this pid namespace).
    pub fn owner_gone(&self) -> bool {
        self.state() != STATE_READY || self.stale()
    }

    /// Closes the region (owner): peers see `STATE_CLOSED`, and the name is removed unless
    /// bounce buffers are still lent out. A message whose data waits in one of our bounce
    /// buffers has completed at the sender, and the receiver may not have mapped this region
    /// yet (the sender can close and exit right after sending): the name then lingers until the
    /// last of those buffers is released (`buf_release`) or, once this process is gone, until
    /// another process sweeps stale regions. Mappings stay valid after the name goes.
    pub fn close(&self) {
        if !self.owner || self.state() == STATE_CLOSED {
            return;
        }
        // SeqCst pairs with `buf_release`: either we see every buffer free, or the peer that
        // frees the last one sees the closed state (and removes the name).
        self.header().state.store(STATE_CLOSED, Ordering::SeqCst);
        if self.bufs_lent() {
            self.header().closed_at.store(now_secs(), Ordering::Relaxed);
        } else {
            crate::sys::shm::unlink(&self.name);
        }
    }

    /// Whether a sweep may remove this region: its owner is dead, and it is not a closed region
    /// still lingering for peers (see `close`).
    pub fn sweepable(&self) -> bool {
        let lingering = self.state() == STATE_CLOSED
            && self.bufs_lent()
            && now_secs().saturating_sub(self.header().closed_at.load(Ordering::Relaxed))
                < LINGER_SECS;
        self.header().owner_dead() && !lingering
    }

    /// Whether any bounce buffer is in use.
    pub fn bufs_lent(&self) -> bool {
        (0..BOUNCE_BUFS).any(|i| self.buf_state(i).load(Ordering::SeqCst) != BUF_FREE)
    }

    /// Removes the name of a closed peer region whose last lent buffer was just released,
    /// unless the name now belongs to a new region.
    fn unlink_lingering(&self) {
        if let Ok(r) = Region::open(&self.name)
            && r.token() == self.token()
        {
            crate::sys::shm::unlink(&self.name);
        }
    }

    // ---- the command ring: a bounded multi-producer queue (per-slot sequence numbers) ----

    fn ring_ctl(&self, i: usize) -> &AtomicU64 {
        // SAFETY: RING_CTL_OFF + 64*i (i < 2) lies inside the mapping; 8-aligned atomics.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(RING_CTL_OFF + 64 * i)
                .cast::<AtomicU64>()
        }
    }

    fn slot_seq(&self, i: usize) -> &AtomicU64 {
        // SAFETY: i < RING_SLOTS, so the slot lies inside the mapping; slots are 8-aligned.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(RING_OFF + (i % RING_SLOTS) * SLOT_SIZE)
                .cast::<AtomicU64>()
        }
    }

    fn slot_data(&self, i: usize) -> *mut u8 {
        // In bounds: the data follows the sequence word inside slot `i % RING_SLOTS`.
        self.map
            .as_ptr()
            .wrapping_add(RING_OFF + (i % RING_SLOTS) * SLOT_SIZE + 8)
    }

    /// Asks the core for the line of slot `i` that holds its sequence word (and a small
    /// command), with intent to write (`write`) or not (`sys::mem::prefetch_addr`). Issuing
    /// PREFETCHW itself for the write hint, where the processor has it, measured no different
    /// (8.50 against 8.54 M msg/s at 8 bytes).
    #[inline(always)]
    fn prefetch_slot(&self, i: usize, write: bool) {
        let p = self
            .map
            .as_ptr()
            .wrapping_add(RING_OFF + (i % RING_SLOTS) * SLOT_SIZE);
        crate::sys::mem::prefetch_addr(p.cast(), write);
    }

    /// Appends the first `used` bytes of a command (any process); the rest of the slot keeps
    /// stale bytes that the owner does not read. False when the ring is full.
    pub fn push(&self, cmd: &[u8; CMD_SIZE], used: usize) -> bool {
        let used = used.clamp(CMD_PREFIX, CMD_SIZE);
        let tail = self.ring_ctl(0);
        let mut pos = tail.load(Ordering::Relaxed);
        for _ in 0..64 {
            let seq = self.slot_seq(pos as usize).load(Ordering::Acquire);
            let dif = seq.wrapping_sub(pos) as i64;
            if dif == 0 {
                match tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: this producer owns slot `pos` until it publishes the sequence
                        // below; the destination lies inside the mapping (used <= CMD_SIZE).
                        unsafe {
                            core::ptr::copy_nonoverlapping(
                                cmd.as_ptr(),
                                self.slot_data(pos as usize),
                                used,
                            )
                        };
                        self.slot_seq(pos as usize)
                            .store(pos.wrapping_add(1), Ordering::Release);
                        self.prefetch_slot(pos.wrapping_add(PUSH_AHEAD) as usize, true);
                        return true;
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return false;
            } else {
                pos = tail.load(Ordering::Relaxed);
            }
        }
        false
    }

    /// Whether a command waits at the head of our ring (owner only).
    pub fn has_command(&self) -> bool {
        let pos = self.ring_ctl(1).load(Ordering::Relaxed);
        self.slot_seq(pos as usize).load(Ordering::Acquire) == pos.wrapping_add(1)
    }

    /// Takes the next command (owner only). False when empty. `used` tells, from the first
    /// `CMD_PREFIX` bytes, how many bytes of the command the producer wrote (a small message
    /// leaves most of its slot unused: copying only what it wrote keeps it to two cache lines);
    /// whatever it says, no more than the slot is read, and the bytes of `out` past it are
    /// left as they were.
    pub fn pop(
        &self,
        out: &mut [u8; CMD_SIZE],
        used: impl FnOnce(&[u8; CMD_SIZE]) -> usize,
    ) -> bool {
        debug_assert!(self.owner);
        let head = self.ring_ctl(1);
        let pos = head.load(Ordering::Relaxed);
        let seq = self.slot_seq(pos as usize).load(Ordering::Acquire);
        if seq != pos.wrapping_add(1) {
            return false;
        }
        let src = self.slot_data(pos as usize);
        // SAFETY: the producer published this slot (sequence pos+1, acquired above); the source
        // lies inside the mapping and `out` is a distinct local buffer.
        unsafe { core::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), CMD_PREFIX) };
        let n = used(out).clamp(CMD_PREFIX, CMD_SIZE);
        // SAFETY: as above; `CMD_PREFIX <= n <= CMD_SIZE` keeps both ranges inside the slot and
        // `out`.
        unsafe {
            crate::sys::mem::copy_bytes(
                src.wrapping_add(CMD_PREFIX),
                out.as_mut_ptr().add(CMD_PREFIX),
                n - CMD_PREFIX,
            )
        };
        head.store(pos.wrapping_add(1), Ordering::Relaxed);
        self.prefetch_slot(pos.wrapping_add(POP_AHEAD) as usize, false);
        true
    }

    /// Whether a poll would find nothing: no command waiting and no slot to hand back. Plain
    /// loads, no locked instruction: any thread of the owner may ask, and a stale answer only
    /// moves the work to the next poll.
    pub fn idle(&self) -> bool {
        let head = self.ring_ctl(1).load(Ordering::Relaxed);
        head == self.released.load(Ordering::Relaxed)
            && self.slot_seq(head as usize).load(Ordering::Acquire) != head.wrapping_add(1)
    }

    /// Hands the slots popped since the last call back to producers (owner only). Deferred
    /// from `pop` to the next poll: the store goes to a line the producer holds, and doing it
    /// while the command is being handled would make the next locked instruction (a lock's
    /// release, a reference count) wait for that line, delaying the answer to the command.
    pub fn release_consumed(&self) {
        debug_assert!(self.owner);
        let head = self.ring_ctl(1).load(Ordering::Relaxed);
        let mut pos = self.released.load(Ordering::Relaxed);
        if pos == head {
            return;
        }
        while pos != head {
            self.slot_seq(pos as usize)
                .store(pos.wrapping_add(RING_SLOTS as u64), Ordering::Release);
            pos = pos.wrapping_add(1);
        }
        self.released.store(head, Ordering::Relaxed);
    }

    // ---- bounce buffers: the owner fills them, a peer copies out and releases ----

    fn buf_state(&self, i: usize) -> &AtomicU32 {
        // SAFETY: i < BOUNCE_BUFS (callers check), so the word lies inside the mapping.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(BUF_STATE_OFF + i * 64)
                .cast::<AtomicU32>()
        }
    }

    fn buf_ptr(&self, i: usize) -> *mut u8 {
        self.map.as_ptr().wrapping_add(BUF_OFF + i * BOUNCE_SIZE)
    }

    /// Takes the lowest free bounce buffer (owner only).
    pub fn buf_alloc(&self) -> Option<u32> {
        self.buf_lease(false).map(|l| l.idx)
    }

    /// Takes a free bounce buffer (owner only), with what `buf_reclaim` needs to take it back
    /// should the peer it was lent to never release it: the lowest free one, or with
    /// `in_turn` the next free one after the last so taken.
    ///
    /// The lowest free one is usually the one the peer has just read and released. Refilling
    /// it is cheap while the peer is idle, and dear while the peer is busy copying too (it
    /// must give up each line of the buffer first). A buffer taken in turn has left the peer's
    /// cache by then, but is cold. `rdtsc` around the 4 KiB fill (ticks): one-way tagged sends
    /// 357–399 lowest free, 877–888 in turn; writes both ways 493–563 lowest free, 327–391 in
    /// turn. The endpoint asks for `in_turn` when its traffic goes both ways
    /// (`FillTurn` in `ep/tx.rs`).
    pub fn buf_lease(&self, in_turn: bool) -> Option<BufLease> {
        let start = if in_turn {
            self.next_in_turn.load(Ordering::Relaxed) as usize
        } else {
            0
        };
        for k in 0..BOUNCE_BUFS {
            let i = (start + k) % BOUNCE_BUFS;
            if self.buf_state(i).load(Ordering::Acquire) == BUF_FREE {
                let lease = self.leases.fetch_add(1, Ordering::Relaxed);
                let state = BUF_USED | (lease << 1);
                self.buf_state(i).store(state, Ordering::Relaxed);
                if in_turn {
                    self.next_in_turn
                        .store(((i + 1) % BOUNCE_BUFS) as u32, Ordering::Relaxed);
                }
                return Some(BufLease {
                    idx: i as u32,
                    state,
                });
            }
        }
        None
    }

    /// Returns a buffer to the owner (the owner after an aborted use, or the peer that read it).
    pub fn buf_release(&self, idx: u32) {
        if (idx as usize) < BOUNCE_BUFS {
            self.buf_state(idx as usize)
                .store(BUF_FREE, Ordering::SeqCst);
            if !self.owner && self.state() == STATE_CLOSED && !self.bufs_lent() {
                self.unlink_lingering();
            }
        }
    }

    /// Takes back a buffer we lent (owner only) unless it was released meanwhile: a peer that
    /// died holding it never will, one that released it before dying may have let us lend
    /// it again, and that later lending must stand.
    pub fn buf_reclaim(&self, lease: BufLease) {
        if (lease.idx as usize) < BOUNCE_BUFS {
            let _ = self.buf_state(lease.idx as usize).compare_exchange(
                lease.state,
                BUF_FREE,
                Ordering::SeqCst,
                Ordering::Relaxed,
            );
        }
    }

    /// Fills part of one of our bounce buffers (owner only). False if out of bounds.
    #[cfg(test)]
    pub fn buf_write(&self, idx: u32, off: usize, src: &[u8]) -> bool {
        let i = idx as usize;
        if i >= BOUNCE_BUFS || off.checked_add(src.len()).is_none_or(|e| e > BOUNCE_SIZE) {
            return false;
        }
        // SAFETY: bounds checked; the owner holds the buffer (state USED) while writing it.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.buf_ptr(i).add(off), src.len())
        };
        fence(Ordering::Release);
        true
    }

    /// Lets `f` fill the first `len` bytes of one of our bounce buffers (owner only), so that
    /// a sender gathers its iov straight into shared memory. False if out of bounds.
    pub fn buf_fill(&self, idx: u32, len: usize, f: impl FnOnce(&mut [u8])) -> bool {
        let i = idx as usize;
        if i >= BOUNCE_BUFS || len > BOUNCE_SIZE {
            return false;
        }
        // SAFETY: bounds checked; the owner holds the buffer (state USED) while writing it and
        // no peer reads it before the command naming it is in the peer's ring.
        let s = unsafe { core::slice::from_raw_parts_mut(self.buf_ptr(i), len) };
        f(s);
        fence(Ordering::Release);
        true
    }

    /// Runs `f` over bytes `[off, off+len)` of buffer `idx` (a peer reading what the owner put
    /// there, or the owner itself). None if out of bounds.
    pub fn buf_with<R>(
        &self,
        idx: u32,
        off: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let i = idx as usize;
        if i >= BOUNCE_BUFS || off.checked_add(len).is_none_or(|e| e > BOUNCE_SIZE) {
            return None;
        }
        fence(Ordering::Acquire);
        // SAFETY: bounds checked. The owner does not touch a buffer it handed out until it is
        // released; a hostile owner could, which yields wrong bytes but no unsoundness beyond the
        // copy itself (the slice lives only for `f`).
        let s = unsafe { core::slice::from_raw_parts(self.buf_ptr(i).add(off), len) };
        Some(f(s))
    }
}

impl Header {
    fn owner_pid(&self) -> Option<i32> {
        let (ours, theirs) = (
            crate::sys::os::pid_namespace(),
            self.pidns.load(Ordering::Relaxed),
        );
        let pid = self.pid.load(Ordering::Relaxed);
        (pid != 0 && (ours == theirs || ours == 0 || theirs == 0)).then_some(pid as i32)
    }

    /// Whether the owner process is known to be dead, for a sweep: by its pid in our own pid
    /// namespace, and from the initial namespace also in another one (a container or an
    /// `unshare --pid` job sharing /dev/shm, whose regions nobody else could ever judge).
    fn owner_dead(&self) -> bool {
        // A region being created has no pid yet: not dead.
        let pid = self.pid.load(Ordering::Relaxed);
        pid != 0
            && (self.stale()
                || crate::sys::os::process_alive_in(self.pidns.load(Ordering::Relaxed), pid)
                    == Some(false))
    }

    /// `Region::stale`: the owner's pid names no process of our namespace.
    fn stale(&self) -> bool {
        self.owner_pid()
            .is_some_and(|pid| !crate::sys::os::process_alive(pid))
    }
}

/// Whether a sweep may remove region `name` (one of ours by its name): `Region::sweepable`
/// for this build's regions; one of another layout version (a build before or after this
/// one, which `Region::open` refuses) is judged by its header alone, and goes when its owner
/// is dead: no peer of this build can map it to need it lingering.
pub fn sweepable(name: &str) -> bool {
    match Region::open(name) {
        Ok(r) => r.sweepable(),
        Err(Errno::PROTO) => {
            let Ok(map) = ShmMap::open(name, HEADER_SIZE) else {
                return false;
            };
            // SAFETY: the mapping is at least HEADER_SIZE bytes and page aligned, and the
            // header is made of atomics, valid for any bit pattern.
            let h = unsafe { &*map.as_ptr().cast::<Header>() };
            h.magic.load(Ordering::Acquire) == MAGIC
                && h.uid.load(Ordering::Relaxed) == crate::sys::os::uid()
                && h.owner_dead()
        }
        Err(_) => false,
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> String {
        format!(
            "/fabric-shm-test-{}-{}",
            std::process::id(),
            crate::sys::random::u32()
        )
    }

    #[test]
    fn ring_order_full_and_empty() {
        let n = name();
        let owner = Region::create(&n, 7).unwrap();
        let peer = Region::open(&n).unwrap();
        assert_eq!(peer.token(), 7);
        let mut cmd = [0u8; CMD_SIZE];
        let mut out = [0u8; CMD_SIZE];
        assert!(!owner.pop(&mut out, |_| CMD_SIZE));
        for i in 0..RING_SLOTS {
            cmd[..8].copy_from_slice(&(i as u64).to_le_bytes());
            assert!(peer.push(&cmd, CMD_SIZE));
        }
        assert!(!peer.push(&cmd, CMD_SIZE), "ring must report full");
        for i in 0..RING_SLOTS {
            assert!(owner.pop(&mut out, |_| CMD_SIZE));
            assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), i as u64);
        }
        assert!(!owner.pop(&mut out, |_| CMD_SIZE));
        // Popped slots go back to producers only when released.
        assert!(
            !peer.push(&cmd, CMD_SIZE),
            "popped slots are not free before release"
        );
        owner.release_consumed();
        assert!(peer.push(&cmd, CMD_SIZE));
    }

    #[test]
    fn only_the_used_part_of_a_command_is_copied() {
        let n = name();
        let owner = Region::create(&n, 8).unwrap();
        let peer = Region::open(&n).unwrap();
        let mut cmd = [0xabu8; CMD_SIZE];
        // The producer writes the prefix and 8 bytes; the consumer learns that from the prefix.
        cmd[0] = 8;
        assert!(peer.push(&cmd, CMD_PREFIX + 8));
        let mut out = [0u8; CMD_SIZE];
        assert!(owner.pop(&mut out, |b| CMD_PREFIX + usize::from(b[0])));
        assert!(out[1..CMD_PREFIX + 8].iter().all(|&b| b == 0xab));
        assert!(
            out[CMD_PREFIX + 8..].iter().all(|&b| b == 0),
            "past the used part: untouched"
        );
        // A length past the slot is bounded by it.
        owner.release_consumed();
        assert!(peer.push(&cmd, usize::MAX));
        assert!(owner.pop(&mut out, |_| usize::MAX));
        assert!(out[1..].iter().all(|&b| b == 0xab));
    }

    /// A pid is judged only inside the pid namespace it belongs to: an owner from another
    /// namespace (a container sharing /dev/shm) is never probed, swept or attached to by it.
    #[test]
    fn an_owner_in_another_pid_namespace_is_not_judged_by_its_pid() {
        let n = name();
        let owner = Region::create(&n, 5).unwrap();
        let peer = Region::open(&n).unwrap();
        assert_eq!(peer.owner_pid(), Some(std::process::id() as i32));
        assert!(!peer.stale() && !peer.owner_gone());
        // A pid no process of this namespace has: stale, gone.
        let unused = i32::MAX as u32;
        owner.header().pid.store(unused, Ordering::Relaxed);
        assert!(peer.stale() && peer.owner_gone());
        // The same pid from another namespace: unknown here, so neither.
        let ours = crate::sys::os::pid_namespace();
        assert_ne!(ours, 0, "/proc/self/ns/pid is readable here");
        owner.header().pidns.store(ours + 1, Ordering::Relaxed);
        assert_eq!(peer.owner_pid(), None);
        assert!(!peer.stale() && !peer.owner_gone());
        // Taking the name over requires a stale or closed region: this one is neither.
        assert_eq!(Region::create(&n, 6).unwrap_err(), Errno::ADDRINUSE);
        // Closing still tells peers in every namespace.
        owner.close();
        assert!(peer.owner_gone());
    }

    /// A sweep removes a region of another layout version (a build before or after this one)
    /// whose owner died, judged by the header alone, and keeps one whose owner lives.
    #[test]
    fn a_sweep_judges_regions_of_other_versions_by_their_header() {
        let n = name();
        let owner = Region::create(&n, 8).unwrap();
        let h = owner.header();
        h.version.store(VERSION - 1, Ordering::Relaxed);
        assert_eq!(Region::open(&n).unwrap_err(), Errno::PROTO);
        assert!(!sweepable(&n), "its owner is alive");
        h.pid.store(i32::MAX as u32, Ordering::Relaxed);
        assert!(sweepable(&n), "its owner is dead");
        // Not ours (another magic): never.
        h.magic.store(MAGIC ^ 1, Ordering::Relaxed);
        assert!(!sweepable(&n));
        h.magic.store(MAGIC, Ordering::Relaxed);
        h.version.store(VERSION, Ordering::Relaxed);
        h.pid.store(std::process::id(), Ordering::Relaxed);
    }

    /// From the initial pid namespace a sweep also judges an owner of another namespace, by
    /// the processes of that namespace: one that no process is in holds no live owner.
    #[test]
    fn a_sweep_from_the_initial_namespace_judges_owners_of_others() {
        let ours = crate::sys::os::pid_namespace();
        let n = name();
        let owner = Region::create(&n, 9).unwrap();
        let peer = Region::open(&n).unwrap();
        assert!(!peer.sweepable(), "its owner is alive");
        // Our own pid, as the process of our namespace it is.
        assert_eq!(
            crate::sys::os::process_alive_in(ours, std::process::id()),
            Some(true)
        );
        // A namespace no process is in (an inode no namespace has).
        owner
            .header()
            .pidns
            .store(ours ^ 0x8000_0000, Ordering::Relaxed);
        assert_eq!(peer.owner_pid(), None);
        let initial = crate::sys::os::in_initial_pid_namespace();
        assert_eq!(peer.sweepable(), initial);
        if initial {
            // And a process that lives there: PID 1 of the initial namespace, seen from it.
            assert_eq!(crate::sys::os::process_alive_in(ours, 1), Some(true));
        }
        owner.header().pidns.store(ours, Ordering::Relaxed);
    }

    #[test]
    fn closed_region_lingers_while_buffers_are_lent() {
        // Nothing lent: the name goes at close.
        let n = name();
        let owner = Region::create(&n, 3).unwrap();
        owner.close();
        assert_eq!(Region::open(&n).unwrap_err(), Errno::NOENT);
        // A buffer lent to a peer that has not mapped the region yet: the name stays until
        // that peer released the buffer.
        let n = name();
        let owner = Region::create(&n, 4).unwrap();
        let b = owner.buf_alloc().unwrap();
        assert!(owner.buf_write(b, 0, b"late"));
        owner.close();
        drop(owner);
        let peer = Region::open(&n).expect("a closed region with lent buffers lingers");
        assert_eq!(peer.state(), STATE_CLOSED);
        assert!(!peer.sweepable(), "its owner is alive");
        assert_eq!(peer.buf_with(b, 0, 4, |s| s.to_vec()).unwrap(), b"late");
        peer.buf_release(b);
        assert_eq!(Region::open(&n).unwrap_err(), Errno::NOENT);
        // A closed region's name may be taken by a new owner at once.
        let n = name();
        let owner = Region::create(&n, 5).unwrap();
        owner.buf_alloc().unwrap();
        owner.close();
        let again = Region::create(&n, 6).unwrap();
        assert_eq!(again.token(), 6);
    }

    #[test]
    fn a_lease_is_reclaimed_only_while_nobody_released_it() {
        let n = name();
        let owner = Region::create(&n, 1).unwrap();
        let peer = Region::open(&n).unwrap();
        // Lent and never released (its peer died holding it): taken back.
        let held = owner.buf_lease(false).unwrap();
        owner.buf_reclaim(held);
        assert!(!owner.bufs_lent());
        // Released by the peer and lent again: the old lease no longer frees it.
        let first = owner.buf_lease(false).unwrap();
        peer.buf_release(first.idx);
        let again = owner.buf_lease(false).unwrap();
        assert_eq!(again.idx, first.idx, "the lowest free buffer is lent first");
        assert_ne!(again, first);
        owner.buf_reclaim(first);
        let next = owner.buf_lease(false).unwrap();
        assert_ne!(next.idx, again.idx, "the later lending stands");
        owner.buf_reclaim(again);
        owner.buf_reclaim(next);
        assert!(!owner.bufs_lent());
        assert_eq!(owner.buf_alloc(), Some(again.idx));
        // Nothing lent at the end, or the closed region's name would outlive the test.
        peer.buf_release(again.idx);
    }

    #[test]
    fn buffers_taken_in_turn_wrap_and_pass_over_those_lent() {
        let n = name();
        let owner = Region::create(&n, 1).unwrap();
        let peer = Region::open(&n).unwrap();
        // Each one taken in turn, released at once, is followed by the next, around the end.
        let mut taken = Vec::new();
        for _ in 0..BOUNCE_BUFS + 2 {
            let b = owner.buf_lease(true).unwrap().idx;
            taken.push(b);
            peer.buf_release(b);
        }
        let expected: Vec<u32> = (0..BOUNCE_BUFS as u32).chain([0, 1]).collect();
        assert_eq!(taken, expected);
        // The lowest free one is taken wherever the turn is.
        let small = owner.buf_alloc().unwrap();
        assert_eq!(small, 0);
        // In turn, buffers still lent are passed over: once round, 0 (small) and 2 are.
        let held = owner.buf_lease(true).unwrap().idx;
        assert_eq!(held, 2);
        let round: Vec<u32> = (0..BOUNCE_BUFS - 1)
            .map(|_| {
                let b = owner.buf_lease(true).unwrap().idx;
                peer.buf_release(b);
                b
            })
            .collect();
        let expected: Vec<u32> = (3..BOUNCE_BUFS as u32).chain([1, 3]).collect();
        assert_eq!(round, expected);
        for b in [small, held] {
            peer.buf_release(b);
        }
        assert!(!owner.bufs_lent());
    }

    #[test]
    fn bounce_buffers_and_checks() {
        let n = name();
        let owner = Region::create(&n, 1).unwrap();
        let peer = Region::open(&n).unwrap();
        let b = owner.buf_alloc().unwrap();
        assert!(owner.buf_write(b, 10, b"hello"));
        assert!(!owner.buf_write(b, BOUNCE_SIZE - 2, b"hello"));
        assert_eq!(peer.buf_with(b, 10, 5, |s| s.to_vec()).unwrap(), b"hello");
        assert!(peer.buf_with(b, 0, BOUNCE_SIZE + 1, |_| ()).is_none());
        assert!(peer.buf_with(BOUNCE_BUFS as u32, 0, 1, |_| ()).is_none());
        let all: Vec<u32> = std::iter::from_fn(|| owner.buf_alloc()).collect();
        assert_eq!(all.len(), BOUNCE_BUFS - 1);
        peer.buf_release(b);
        assert_eq!(owner.buf_alloc(), Some(b));
        // A second owner for the same live name is refused; a dead one's region is replaced.
        assert_eq!(Region::create(&n, 2).unwrap_err(), Errno::ADDRINUSE);
        owner.header().pid.store(i32::MAX as u32, Ordering::Relaxed);
        assert!(owner.stale());
        core::mem::forget(owner);
        let again = Region::create(&n, 3).unwrap();
        assert_eq!(Region::open(&n).unwrap().token(), 3);
        drop(again);
        assert!(Region::open(&n).is_err());
    }
}
