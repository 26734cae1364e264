//! Progress: one pass takes commands off our ring and hands each to its handler (in the file
//! of its concern), then pushes segments and checks peers' liveness.

use std::time::Duration;

use super::{Inner, ShmEndpoint};
use crate::prov::shm::cmd::*;
use crate::prov::shm::region::{CMD_SIZE, RING_SLOTS};

/// Commands handled per progress call.
const PROGRESS_BATCH: usize = 64;

/// How often peers of waiting operations are checked for liveness.
const LIVENESS_PERIOD: Duration = Duration::from_millis(100);
/// Progress passes between two looks at the clock for the liveness check.
const LIVENESS_EVERY: u32 = 64;

impl ShmEndpoint {
    pub(super) fn progress_locked(&self, g: &mut Inner) {
        // Borrowed per use, not cloned: this runs on every CQ poll, and an `Arc` clone and drop
        // are two locked instructions, each waiting for our stores to peers' rings to drain.
        match g.region.as_deref() {
            Some(r) => r.release_consumed(),
            None => return,
        }
        // Arrivals report their sender's index as the AV has it now.
        g.sync_av();
        if !g.outbox.is_empty() {
            g.flush_outbox();
        }
        let busy = self.take_commands(g, PROGRESS_BATCH) > 0;
        self.push_segments(g);
        if busy {
            // Not a loop over both: that built an array and an iterator in memory, some 30
            // instructions of every poll that found a command (callgrind).
            if let Some(cq) = &g.rx_cq {
                cq.keep_spinning();
            }
            if let Some(cq) = &g.tx_cq {
                cq.keep_spinning();
            }
        }
        // The clock is read on every LIVENESS_EVERY-th pass: under a stream of small
        // operations, reading it on every pass was a tenth of the time.
        g.passes = g.passes.wrapping_add(1);
        if (!g.tx_ops.is_empty() || !g.rx_ops.is_empty()) && g.passes.is_multiple_of(LIVENESS_EVERY)
        {
            self.check_liveness_due(g);
        }
    }

    /// Checks peers' liveness if `LIVENESS_PERIOD` has passed since the last check.
    pub(super) fn check_liveness_due(&self, g: &mut Inner) {
        let now = crate::sys::os::coarse_clock_ms();
        if now.wrapping_sub(g.last_liveness_ms) >= LIVENESS_PERIOD.as_millis() as u64 {
            g.last_liveness_ms = now;
            self.check_liveness(g);
        }
    }

    /// Handles every command in our ring now, up to a ring's worth (`check_liveness`).
    pub(super) fn drain_ring(&self, g: &mut Inner) {
        self.take_commands(g, RING_SLOTS);
    }

    /// Takes up to `max` commands off our ring and handles them; returns how many.
    fn take_commands(&self, g: &mut Inner, max: usize) -> usize {
        // Commands are taken straight into `c`; past what each one used, it holds bytes of an
        // earlier one, which no handler reads (see `Region::pop`).
        if !g.region.as_deref().is_some_and(|r| r.has_command()) {
            return 0;
        }
        // Kept between passes (`Inner::cmd_scratch`): clearing a new one's 312 bytes took
        // some 30 instructions of every pass that found a command (callgrind).
        let mut c = g
            .cmd_scratch
            .take()
            .unwrap_or_else(|| Box::new(Cmd::new(0, 0)));
        let mut n = 0;
        while n < max
            && g.region
                .as_deref()
                .is_some_and(|r| r.pop(c.as_bytes_mut(), Cmd::wire_len))
        {
            self.handle(g, &c);
            n += 1;
        }
        g.cmd_scratch = Some(c);
        n
    }

    /// (Inlined, and `handle_msg` into it: a call per layer was some 15 instructions of every
    /// small message, callgrind.)
    #[inline(always)]
    fn handle(&self, g: &mut Inner, c: &Cmd) {
        if c.op == OP_CONNECT {
            self.handle_connect(g, c);
            return;
        }
        let Some(p) = g.by_token.get(c.sender) else {
            g.dropped += 1;
            return;
        };
        match c.op {
            OP_MSG => self.handle_msg(g, p, c),
            OP_WRITE => self.handle_write(g, p, c),
            OP_READ => self.handle_read(g, p, c),
            OP_ATOMIC => self.handle_atomic(g, p, c),
            OP_ACK => self.handle_ack(g, p, c),
            OP_GO => self.handle_go(g, p, c),
            OP_DATA => self.handle_data(g, p, c),
            OP_CLEARED => self.handle_cleared(g, p, c),
            OP_COPIED => self.handle_copied(g, c),
            OP_PART => self.handle_part(g, p, c),
            OP_SHARE => self.handle_share(g, p, c),
            OP_SHARED => self.handle_shared(g, p, c),
            _ => g.dropped += 1,
        }
    }

    /// Runs one raw command through the handlers as if a peer had pushed it into our ring
    /// (the fuzz target `shm_commands` drives hostile input through here).
    #[doc(hidden)]
    pub fn handle_raw(&self, raw: &[u8; CMD_SIZE]) {
        let c = Cmd::decode(raw);
        let mut g = self.lock();
        self.handle(&mut g, &c);
    }
}
