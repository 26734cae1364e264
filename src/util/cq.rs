//! Completion queues (fi_cq(3)).
//!
//! Entries are kept in one queue in completion order, errors included: `read` returns entries up
//! to the first error and then `-FI_EAVAIL`; `readerr` takes that error. Nothing is ever dropped:
//! the queue grows past the requested size rather than lose a completion (providers bound what
//! they have in flight by their tx/rx sizes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use super::progress::{Progress, Sources};
use super::wait::WaitObj;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::sys::lock::{SpinGuard, SpinLock};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqEntry {
    pub op_context: usize,
    pub flags: u64,
    pub len: usize,
    pub buf: usize,
    pub data: u64,
    pub tag: u64,
    /// Source `fi_addr_t` for `fi_cq_readfrom` (`FI_ADDR_NOTAVAIL` when unknown).
    pub src_addr: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CqErrEntry {
    pub op_context: usize,
    pub flags: u64,
    pub len: usize,
    pub buf: usize,
    pub data: u64,
    pub tag: u64,
    /// Bytes that did not fit (FI_ETRUNC).
    pub olen: usize,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
    pub src_addr: u64,
}

impl CqErrEntry {
    pub fn new(op_context: usize, flags: u64, err: Errno) -> CqErrEntry {
        CqErrEntry {
            op_context,
            flags,
            err: err.0,
            src_addr: FI_ADDR_NOTAVAIL,
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqAttr {
    pub size: usize,
    pub flags: u64,
    pub format: u32,
    pub wait_obj: u32,
    pub wait_cond: u32,
}

/// A place in the queue's order: a completion, or the turn of the next error entry (held
/// apart, in `Entries::errs`). Without a box in it, a slot needs no drop: emptying the queue
/// (`push_back_at_front_if_empty`) is then a store, not a call (18 instructions per
/// completion, callgrind).
#[derive(Clone, Copy)]
enum Slot {
    Ok(CqEntry),
    Err,
}

/// The queue: completions and error turns in order, and the error entries in theirs.
struct Entries {
    slots: VecDeque<Slot>,
    errs: VecDeque<CqErrEntry>,
}

/// A text for provider error numbers (`fi_cq_strerror`).
pub type ProvStrerror = fn(prov_errno: i32) -> Option<&'static str>;

pub struct Cq {
    attr: CqAttr,
    /// A `SpinLock`: every completion and every read that finds one takes it.
    queue: SpinLock<Entries>,
    /// How many entries `queue` held when it was last changed: an empty poll, the common case
    /// of `fi_cq_read` in a loop, reads this instead of taking the lock (two locked
    /// instructions).
    queued: AtomicUsize,
    /// When the reads that found nothing began (`spin_clock` nanoseconds; 0: the last read
    /// found something; `YIELDING`: past `SPIN_BEFORE_YIELD`): see `spun`.
    empty_since: AtomicU64,
    /// Empty reads since the clock was last read, or, once yielding, since the last yield
    /// (see `spun`).
    empty_reads: AtomicU32,
    /// Once yielding: every how many empty reads one yields (a power of two, see `spun`).
    yield_every: AtomicU32,
    sources: Sources,
    signaled: AtomicBool,
    wait: Option<WaitObj>,
    prov_strerror: RwLock<Option<ProvStrerror>>,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("attr", &self.attr)
            .finish_non_exhaustive()
    }
}

/// How long `Cq::read` spins before it starts yielding the CPU.
const SPIN_BEFORE_YIELD: std::time::Duration = std::time::Duration::from_micros(50);

/// How many empty reads pass between two looks at the clock (`Cq::spun`).
const CLOCK_EVERY: u32 = 32;
/// `Cq::empty_since` once the reads have spun `SPIN_BEFORE_YIELD`.
const YIELDING: u64 = u64::MAX;
/// A yield shorter than this gave the CPU to no one: nothing else wanted to run.
const FRUITLESS_YIELD_NS: u64 = 5_000;
/// At most every how many empty reads a reader whose yields are fruitless yields.
const MAX_YIELD_EVERY: u32 = 256;

/// Every how many empty reads a yielding reader yields next, after a yield that took `took_ns`
/// with one every `every` (`Cq::yield_sometimes`).
fn next_yield_every(every: u32, took_ns: u64) -> u32 {
    if took_ns < FRUITLESS_YIELD_NS {
        every.saturating_mul(2).min(MAX_YIELD_EVERY)
    } else {
        1
    }
}

/// Monotonic nanoseconds since the first call, never 0.
fn spin_clock() -> u64 {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let base = BASE.get_or_init(std::time::Instant::now);
    base.elapsed().as_nanos() as u64 + 1
}

impl Cq {
    /// fi_cq_open(3): `size` 0 picks a default; format UNSPEC becomes CONTEXT.
    pub fn new(attr: &CqAttr) -> Result<Arc<Cq>> {
        Self::new_serial(attr, false)
    }

    /// `new` for a domain whose application serializes every call into it (`serial`:
    /// `Domain::serialized`): the queue's lock then takes no locked instruction (`sys::lock`).
    pub fn new_serial(attr: &CqAttr, serial: bool) -> Result<Arc<Cq>> {
        let mut attr = *attr;
        if attr.format == FI_CQ_FORMAT_UNSPEC {
            attr.format = FI_CQ_FORMAT_CONTEXT;
        }
        if attr.format > FI_CQ_FORMAT_TAGGED {
            return Err(Errno::NOSYS);
        }
        if attr.size == 0 {
            attr.size = 1024;
        }
        let wait = WaitObj::for_attr(attr.wait_obj)?;
        Ok(Arc::new(Cq {
            attr,
            queue: SpinLock::new_serial(
                Entries {
                    slots: VecDeque::with_capacity(attr.size.min(1 << 16)),
                    errs: VecDeque::new(),
                },
                serial,
            ),
            queued: AtomicUsize::new(0),
            empty_since: AtomicU64::new(0),
            empty_reads: AtomicU32::new(0),
            yield_every: AtomicU32::new(1),
            sources: Sources::default(),
            signaled: AtomicBool::new(false),
            wait,
            prov_strerror: RwLock::new(None),
        }))
    }

    pub fn attr(&self) -> &CqAttr {
        &self.attr
    }

    pub fn format(&self) -> u32 {
        self.attr.format
    }

    pub fn wait(&self) -> Option<&WaitObj> {
        self.wait.as_ref()
    }

    /// Registers an endpoint whose progress this CQ drives (on bind).
    pub fn add_source(&self, source: Weak<dyn Progress>) {
        self.sources.add(source, |p| {
            if let (Some(w), Some(fd)) = (&self.wait, p.wait_fd()) {
                let _ = w.add_fd(fd);
            }
        });
    }

    /// Whether blocking on the wait fd is safe: every source can wake it.
    pub fn waitable(&self) -> bool {
        self.sources
            .live()
            .iter()
            .all(|p| p.wait_fd().is_some() && p.wait_fd_complete())
    }

    pub fn set_prov_strerror(&self, f: ProvStrerror) {
        *self
            .prov_strerror
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    pub fn prov_strerror(&self, prov_errno: i32) -> Option<&'static str> {
        let f = *self.prov_strerror.read().unwrap_or_else(|e| e.into_inner());
        f.and_then(|f| f(prov_errno))
    }

    /// Runs progress of every bound endpoint.
    #[inline]
    pub fn progress(&self) {
        self.sources.progress_all();
    }

    fn lock(&self) -> SpinGuard<'_, Entries> {
        self.queue.lock()
    }

    /// Adds a completion (provider side). Inlined, so that the caller's fields are stored
    /// straight into the queue's slot: a `CqEntry` built on the caller's stack and copied here
    /// with 16-byte loads over its 8-byte stores stalled on store forwarding (perf: half the
    /// time of this function under an 8-byte message stream).
    #[inline(always)]
    pub fn push(&self, e: CqEntry) {
        let mut q = self.lock();
        super::push_back_at_front_if_empty(&mut q.slots, Slot::Ok(e));
        self.queued.store(q.slots.len(), Ordering::Release);
        drop(q);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// Adds an error completion (provider side).
    pub fn push_err(&self, e: CqErrEntry) {
        let mut q = self.lock();
        q.errs.push_back(e);
        super::push_back_at_front_if_empty(&mut q.slots, Slot::Err);
        self.queued.store(q.slots.len(), Ordering::Release);
        drop(q);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// Entries waiting to be read (errors included).
    pub fn len(&self) -> usize {
        self.lock().slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// fi_cq_read(3): progress, then hand up to `max` entries to `sink` in order. `AGAIN` when
    /// empty, `AVAIL` when the next entry is an error.
    pub fn read(&self, max: usize, sink: impl FnMut(&CqEntry)) -> Result<usize> {
        self.progress();
        let r = self.take(max, sink);
        // An error entry waiting (`AVAIL`) is something found, not an empty read.
        self.spun(r == Err(Errno::AGAIN));
        r
    }

    /// After reads have found nothing for `SPIN_BEFORE_YIELD`, further empty reads give up the
    /// CPU (`sched_yield`; how often: `yield_sometimes`): the completion it waits for needs
    /// another thread (a peer endpoint's, maybe in another process) to run, and with more
    /// spinning threads than cores a reader that keeps its whole time slice delays that thread
    /// by as much (fabtests' `fi_rdm_bw_mt -n 32` on two cores: every 1 MiB rendezvous waited
    /// tens of milliseconds).
    /// Without other runnable threads the yield returns at once.
    ///
    /// The clock is read once every `CLOCK_EVERY` empty reads: a read costs about as much as
    /// the rest of an empty poll, and it made up a third of a spinning reader's time
    /// (`perf`, 8-byte ping-pong over shm), lengthening the loop that notices a completion.
    /// The counters are plain loads and stores: two threads reading one CQ at once may lose
    /// a count, which only moves the next clock read.
    fn spun(&self, empty: bool) {
        let since = self.empty_since.load(Ordering::Relaxed);
        if !empty {
            if since != 0 {
                self.empty_since.store(0, Ordering::Relaxed);
                self.empty_reads.store(0, Ordering::Relaxed);
            }
            return;
        }
        if since == YIELDING {
            self.yield_sometimes();
            return;
        }
        // The first look comes CLOCK_EVERY reads in as well: a source that keeps making
        // progress (`keep_spinning`) restarts the count often.
        let n = self.empty_reads.load(Ordering::Relaxed).wrapping_add(1);
        self.empty_reads.store(n, Ordering::Relaxed);
        if !n.is_multiple_of(CLOCK_EVERY) {
            return;
        }
        let now = spin_clock();
        if since == 0 {
            self.empty_since.store(now, Ordering::Relaxed);
        } else if now.saturating_sub(since) >= SPIN_BEFORE_YIELD.as_nanos() as u64 {
            self.empty_since.store(YIELDING, Ordering::Relaxed);
            self.yield_every.store(1, Ordering::Relaxed);
            self.empty_reads.store(0, Ordering::Relaxed);
            self.yield_sometimes();
        }
    }

    /// A yielding reader's empty read: yields on every `yield_every`-th one. A yield that
    /// returns at once found nothing else to run (a program polling this CQ between other
    /// work, a sender's CQ that injects complete nothing into: each such read was a
    /// `sched_yield` system call, 0.3–0.5 µs here), so the next comes twice as many reads
    /// later, up to `MAX_YIELD_EVERY`; one that gave the CPU away (the thread a completion
    /// waits for ran) makes every read yield again.
    #[cold]
    fn yield_sometimes(&self) {
        let every = self.yield_every.load(Ordering::Relaxed);
        let n = self.empty_reads.load(Ordering::Relaxed).wrapping_add(1);
        if n < every {
            self.empty_reads.store(n, Ordering::Relaxed);
            return;
        }
        self.empty_reads.store(0, Ordering::Relaxed);
        let before = spin_clock();
        std::thread::yield_now();
        let took = spin_clock().saturating_sub(before);
        self.yield_every
            .store(next_yield_every(every, took), Ordering::Relaxed);
    }

    /// A source bound to this CQ made progress (handled a peer's commands): reads that find
    /// nothing are not waiting on a thread that cannot run, so they spin again from the start
    /// (`spun`). A stream of injected operations completes nothing and reads the CQ only to
    /// progress; without this every such read gave up the CPU once 50 µs had passed.
    pub fn keep_spinning(&self) {
        if self.empty_since.load(Ordering::Relaxed) != 0 {
            self.empty_since.store(0, Ordering::Relaxed);
            self.empty_reads.store(0, Ordering::Relaxed);
        }
    }

    /// Like `read` without running progress. The empty check is inlined into the caller: an
    /// empty poll made a call for it, and built the sink's closure for nothing (some 20 of an
    /// empty poll's 160 instructions, callgrind).
    #[inline(always)]
    pub fn take(&self, max: usize, sink: impl FnMut(&CqEntry)) -> Result<usize> {
        // An entry pushed just after this load is found by the next read, as if this one had
        // come a moment earlier.
        if self.queued.load(Ordering::Acquire) == 0 {
            return Err(Errno::AGAIN);
        }
        self.take_queued(max, sink)
    }

    fn take_queued(&self, max: usize, mut sink: impl FnMut(&CqEntry)) -> Result<usize> {
        let mut q = self.lock();
        let mut n = 0;
        while n < max {
            match q.slots.front() {
                Some(Slot::Ok(e)) => {
                    sink(e);
                    q.slots.pop_front();
                    n += 1;
                }
                Some(Slot::Err) if n == 0 => return Err(Errno::AVAIL),
                _ => break,
            }
        }
        self.queued.store(q.slots.len(), Ordering::Release);
        if n == 0 { Err(Errno::AGAIN) } else { Ok(n) }
    }

    /// fi_cq_readerr(3): the first pending error, if it is at the head of the queue.
    pub fn readerr(&self) -> Result<CqErrEntry> {
        let mut q = self.lock();
        if let Some(Slot::Err) = q.slots.front()
            && let Some(e) = q.errs.pop_front()
        {
            q.slots.pop_front();
            self.queued.store(q.slots.len(), Ordering::Release);
            return Ok(e);
        }
        Err(Errno::AGAIN)
    }

    /// fi_cq_sread(3): blocks until at least `threshold` entries (1 without a condition), a
    /// signal, or `timeout_ms` (negative: forever). Returns what `read` would.
    pub fn sread(
        &self,
        max: usize,
        threshold: usize,
        timeout_ms: i32,
        sink: impl FnMut(&CqEntry),
    ) -> Result<usize> {
        if self.attr.wait_obj == FI_WAIT_NONE {
            return Err(Errno::NOSYS);
        }
        let deadline =
            (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        let threshold = threshold.clamp(1, max.max(1));
        let mut spins = 0u32;
        loop {
            self.progress();
            {
                let q = self.lock();
                let ready =
                    q.slots.len() >= threshold || matches!(q.slots.front(), Some(Slot::Err));
                drop(q);
                if ready {
                    return self.take(max, sink);
                }
            }
            if self.signaled.swap(false, Ordering::AcqRel) {
                return Err(Errno::AGAIN);
            }
            if let Some(d) = deadline
                && Instant::now() >= d
            {
                return Err(Errno::AGAIN);
            }
            spins = spins.saturating_add(1);
            self.idle(spins, deadline);
        }
    }

    /// Waits a little between polls: spin first (latency), then block on the sources' fds.
    fn idle(&self, spins: u32, deadline: Option<Instant>) {
        if spins < 64 {
            std::hint::spin_loop();
            return;
        }
        if spins < 256 {
            std::thread::yield_now();
            return;
        }
        let fds = self.sources.wait_fds();
        let mut ms = 1;
        if let Some(d) = deadline {
            ms = ms.min(d.saturating_duration_since(Instant::now()).as_millis() as i32);
        }
        crate::sys::poll::wait_readable(&fds, ms);
    }

    /// fi_cq_signal(3): wakes a blocked `sread`.
    pub fn signal(&self) {
        self.signaled.store(true, Ordering::Release);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr() -> CqAttr {
        CqAttr {
            size: 4,
            flags: 0,
            format: FI_CQ_FORMAT_TAGGED,
            wait_obj: FI_WAIT_UNSPEC,
            wait_cond: 0,
        }
    }

    /// Yields that give the CPU to no one come ever fewer reads apart, up to a bound; one that
    /// gave it away brings back a yield on every read.
    #[test]
    fn fruitless_yields_back_off() {
        let mut every = 1;
        for expect in [2, 4, 8, 16, 32, 64, 128, 256, 256] {
            every = next_yield_every(every, 400);
            assert_eq!(every, expect);
        }
        assert_eq!(next_yield_every(every, 2_000_000), 1);
    }

    /// Without a wait object (epoll and eventfd), for what does not wait: Miri runs these.
    fn attr_no_wait() -> CqAttr {
        CqAttr {
            wait_obj: FI_WAIT_NONE,
            ..attr()
        }
    }

    #[test]
    fn errors_keep_their_place() {
        let cq = Cq::new(&attr_no_wait()).unwrap();
        cq.push(CqEntry {
            op_context: 1,
            ..Default::default()
        });
        cq.push_err(CqErrEntry::new(2, FI_RECV, Errno::TRUNC));
        cq.push(CqEntry {
            op_context: 3,
            ..Default::default()
        });
        let mut got = vec![];
        assert_eq!(cq.read(8, |e| got.push(e.op_context)), Ok(1));
        assert_eq!(cq.read(8, |e| got.push(e.op_context)), Err(Errno::AVAIL));
        let e = cq.readerr().unwrap();
        assert_eq!((e.op_context, e.err), (2, Errno::TRUNC.0));
        assert_eq!(cq.readerr(), Err(Errno::AGAIN));
        assert_eq!(cq.read(8, |e| got.push(e.op_context)), Ok(1));
        assert_eq!(got, [1, 3]);
        assert_eq!(cq.read(8, |_| {}), Err(Errno::AGAIN));
    }

    #[test]
    fn errors_are_read_in_their_order_between_completions() {
        let cq = Cq::new(&attr_no_wait()).unwrap();
        let ok = |c| CqEntry {
            op_context: c,
            ..Default::default()
        };
        cq.push_err(CqErrEntry::new(1, FI_RECV, Errno::TRUNC));
        cq.push(ok(2));
        cq.push_err(CqErrEntry::new(3, FI_SEND, Errno::CANCELED));
        cq.push_err(CqErrEntry::new(4, FI_SEND, Errno::IO));
        cq.push(ok(5));
        let mut got = vec![];
        let mut sink = |e: &CqEntry| got.push(e.op_context);
        assert_eq!(cq.read(8, &mut sink), Err(Errno::AVAIL));
        assert_eq!(
            cq.readerr().map(|e| (e.op_context, e.err)),
            Ok((1, Errno::TRUNC.0))
        );
        assert_eq!(cq.read(8, &mut sink), Ok(1));
        assert_eq!(cq.readerr().map(|e| e.op_context), Ok(3));
        assert_eq!(cq.read(8, &mut sink), Err(Errno::AVAIL));
        assert_eq!(
            cq.readerr().map(|e| (e.op_context, e.err)),
            Ok((4, Errno::IO.0))
        );
        assert_eq!(cq.readerr(), Err(Errno::AGAIN));
        assert_eq!(cq.read(8, &mut sink), Ok(1));
        assert_eq!(got, [2, 5]);
        assert_eq!(cq.len(), 0);
    }

    #[test]
    fn nothing_is_dropped_past_the_size() {
        let cq = Cq::new(&attr_no_wait()).unwrap();
        for i in 0..100 {
            cq.push(CqEntry {
                op_context: i,
                ..Default::default()
            });
        }
        let mut n = 0;
        while let Ok(k) = cq.read(7, |e| {
            assert_eq!(e.op_context, n);
            n += 1;
        }) {
            assert!(k <= 7);
        }
        assert_eq!(n, 100);
    }

    #[test]
    #[cfg_attr(miri, ignore = "epoll and eventfd (wait objects)")]
    fn sread_times_out_and_signals() {
        let cq = Cq::new(&attr()).unwrap();
        let t = Instant::now();
        assert_eq!(cq.sread(1, 1, 30, |_| {}), Err(Errno::AGAIN));
        assert!(t.elapsed() >= Duration::from_millis(30));
        cq.signal();
        assert_eq!(cq.sread(1, 1, -1, |_| {}), Err(Errno::AGAIN));
    }
}
