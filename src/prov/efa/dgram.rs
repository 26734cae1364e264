//! The DGRAM endpoint (efa-reference §8: a thin path with no protocol): each send is one
//! unreliable datagram of at most the MTU, each receive takes one datagram. Datagrams that find
//! no posted receive are dropped, as on the wire.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::device::{self, Completion, Device, EfaAddr, HEADROOM};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::sys::mem::{gather, iov_len, scatter};
use crate::util::av::Av;
use crate::util::cntr::Cntr;
use crate::util::cq::{Cq, CqEntry, CqErrEntry};
use crate::util::ep::{MsgOp, OpFlags};
use crate::util::rxq::Recv;
use crate::util::{Bind, Endpoint, Progress};

/// Device receive buffers kept posted.
const RX_BUFS: usize = 256;

struct Inner {
    dev: Box<dyn Device>,
    mtu: usize,
    enabled: bool,
    av: Option<Arc<Av>>,
    tx_cq: Option<Arc<Cq>>,
    rx_cq: Option<Arc<Cq>>,
    send_cntr: Option<Arc<Cntr>>,
    recv_cntr: Option<Arc<Cntr>>,
    /// Receives posted by the application, in order.
    recvs: VecDeque<Recv>,
    /// Sends in the device: context, length, FI_COMPLETION.
    sends: crate::util::slab::Slab<(usize, usize, bool)>,
    posted: usize,
    comps: Vec<Completion>,
}

pub struct DgramEndpoint {
    me: Weak<DgramEndpoint>,
    caps: u64,
    flags: OpFlags,
    /// `msg_prefix_size` when the application took FI_MSG_PREFIX, else 0: the front of each
    /// buffer is left alone, and a receive reports the prefix in its length as a UD device
    /// counts the GRH it writes there.
    prefix: usize,
    wait_fd: Option<std::os::fd::RawFd>,
    inner: Mutex<Inner>,
}

impl DgramEndpoint {
    pub fn new(
        caps: u64,
        tx_op_flags: u64,
        rx_op_flags: u64,
        prefix: usize,
        dev: Box<dyn Device>,
    ) -> Arc<DgramEndpoint> {
        let mtu = dev.mtu();
        let wait_fd = dev.wait_fd();
        Arc::new_cyclic(|me| DgramEndpoint {
            me: me.clone(),
            caps,
            flags: OpFlags::new(tx_op_flags, rx_op_flags),
            prefix,
            wait_fd,
            inner: Mutex::new(Inner {
                dev,
                mtu,
                enabled: false,
                av: None,
                tx_cq: None,
                rx_cq: None,
                send_cntr: None,
                recv_cntr: None,
                recvs: VecDeque::new(),
                sends: crate::util::slab::Slab::new(),
                posted: 0,
                comps: Vec::with_capacity(64),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn progress_locked(&self, g: &mut Inner) {
        if !g.enabled {
            return;
        }
        while g.posted < RX_BUFS {
            let b = vec![0u8; HEADROOM + g.mtu];
            match g.dev.post_recv(b, 0) {
                Ok(()) => g.posted += 1,
                Err(_) => break,
            }
        }
        let mut comps = core::mem::take(&mut g.comps);
        g.dev.poll(&mut comps, 64);
        // The latest run of datagrams (UDP GRO) the device handed up.
        let mut run = Vec::new();
        for c in comps.drain(..) {
            match c {
                Completion::Recv {
                    buf, off, len, src, ..
                } => {
                    g.posted -= 1;
                    self.deliver(g, src, &buf[off..off + len]);
                    if g.dev.post_recv(buf, 0).is_ok() {
                        g.posted += 1;
                    }
                }
                Completion::Run { buf } => device::next_run(&mut *g.dev, &mut run, buf),
                Completion::RecvInRun { off, len, src } => {
                    if let Some(d) = run.get(off..off + len) {
                        self.deliver(g, src, d);
                    }
                }
                Completion::RecvInPieces { pieces, src } => {
                    if let Some(at) = pieces.join(&mut run) {
                        self.deliver(g, src, &run[at]);
                    }
                }
                // DGRAM endpoints post no RDMA; a peer's RDMA write with data into a DGRAM
                // domain's memory is not a datagram: its receive goes back on the device.
                // DGRAM endpoints name no placements (`Device::poll_placed`): none completes.
                Completion::WriteData { buf, .. } | Completion::Placed { buf, .. } => {
                    g.posted -= 1;
                    if g.dev.post_recv(buf, 0).is_ok() {
                        g.posted += 1;
                    }
                }
                Completion::Rdma { .. } => {}
                Completion::Send { wr_id, status, .. } => {
                    let Some((context, len, completion)) = g.sends.remove(wr_id) else {
                        continue;
                    };
                    match status {
                        Ok(()) => {
                            if completion && let Some(cq) = &g.tx_cq {
                                cq.push(CqEntry {
                                    op_context: context,
                                    flags: FI_SEND | FI_MSG,
                                    len,
                                    src_addr: FI_ADDR_NOTAVAIL,
                                    ..Default::default()
                                });
                            }
                            if let Some(c) = &g.send_cntr {
                                c.complete(len);
                            }
                        }
                        Err(e) => {
                            if let Some(cq) = &g.tx_cq {
                                let mut ce = CqErrEntry::new(context, FI_SEND | FI_MSG, e.errno());
                                ce.prov_errno = e.prov_errno();
                                cq.push_err(ce);
                            }
                            if let Some(c) = &g.send_cntr {
                                c.fail();
                            }
                        }
                    }
                }
            }
        }
        if !run.is_empty() {
            g.dev.return_run(run);
        }
        g.comps = comps;
    }

    fn deliver(&self, g: &mut Inner, src: EfaAddr, data: &[u8]) {
        // A sender inserted by node and service (QKEY 0) is known by its full address from
        // its first datagram on (the `srd` module's docs).
        let src_fi = g
            .av
            .as_ref()
            .and_then(|av| av.reverse_resolving(&src.to_bytes(), Some(&src.unkeyed().to_bytes())))
            .unwrap_or(FI_ADDR_NOTAVAIL);
        let directed = self.caps & FI_DIRECTED_RECV != 0;
        let Some(i) = g
            .recvs
            .iter()
            .position(|r| r.matches(src_fi, 0, false, directed))
        else {
            return;
        };
        let Some(r) = g.recvs.remove(i) else { return };
        let got = scatter(r.iov(), self.prefix, data);
        let src_addr = match &g.av {
            Some(av) if src_fi != FI_ADDR_NOTAVAIL => av.source_id(src_fi),
            _ => FI_ADDR_NOTAVAIL,
        };
        let buf = r.iov().first().map_or(0, |v| v.addr());
        if let Some(cq) = &g.rx_cq {
            if got < data.len() {
                cq.push_err(CqErrEntry {
                    op_context: r.context,
                    flags: FI_RECV | FI_MSG,
                    len: self.prefix + got,
                    buf,
                    olen: data.len() - got,
                    err: Errno::TRUNC.0,
                    src_addr,
                    ..Default::default()
                });
            } else if r.flags & FI_COMPLETION != 0 {
                cq.push(CqEntry {
                    op_context: r.context,
                    flags: FI_RECV | FI_MSG,
                    len: self.prefix + got,
                    buf,
                    src_addr,
                    ..Default::default()
                });
            }
        }
        if let Some(c) = &g.recv_cntr {
            c.complete(got);
        }
    }
}

impl Progress for DgramEndpoint {
    fn progress(&self) {
        let Ok(mut g) = self.inner.try_lock() else {
            return;
        };
        self.progress_locked(&mut g);
    }

    /// Asked right before a wait on the fd (CQ and counter waits, `fi_trywait`): the device
    /// arms its timer then, so that a retransmission or the end of a back-off wakes the waiter.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        let fd = self.wait_fd?;
        if let Ok(mut g) = self.inner.try_lock() {
            g.dev.prepare_wait();
        }
        Some(fd)
    }
}

impl Endpoint for DgramEndpoint {
    fn bind(&self, target: Bind, flags: u64) -> Result<()> {
        let mut g = self.lock();
        if g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let me: Weak<dyn Progress> = self.me.clone();
        match target {
            Bind::Av(av) => {
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if av.codec().addr_format() != FI_ADDR_EFA {
                    return Err(Errno::INVAL);
                }
                g.av = Some(av);
            }
            Bind::Cq(cq) => {
                let (tx, rx) = self.flags.bind_cq(flags)?;
                cq.add_source(me);
                cq.set_prov_strerror(super::prov_strerror);
                if tx {
                    g.tx_cq = Some(cq.clone());
                }
                if rx {
                    g.rx_cq = Some(cq);
                }
            }
            Bind::Cntr(c) => {
                if flags & !(FI_SEND | FI_RECV) != 0 || flags == 0 {
                    return Err(Errno::BADFLAGS);
                }
                c.add_source(me);
                if flags & FI_SEND != 0 {
                    g.send_cntr = Some(c.clone());
                }
                if flags & FI_RECV != 0 {
                    g.recv_cntr = Some(c);
                }
            }
            Bind::Eq(_) => return Err(Errno::NOSYS),
        }
        Ok(())
    }

    fn enable(&self) -> Result<()> {
        let mut g = self.lock();
        if g.enabled {
            return Ok(());
        }
        if g.av.is_none() {
            return Err(Errno::NOAV);
        }
        if g.tx_cq.is_none() && g.rx_cq.is_none() {
            return Err(Errno::NOCQ);
        }
        g.enabled = true;
        self.progress_locked(&mut g);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.lock().dev.addr().to_bytes().to_vec())
    }

    fn tx_size_left(&self) -> Result<usize> {
        let g = self.lock();
        Ok(g.dev.max_send().saturating_sub(g.sends.len()))
    }

    fn rx_size_left(&self) -> Result<usize> {
        let g = self.lock();
        Ok(1024usize.saturating_sub(g.recvs.len()))
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let mut g = self.lock();
        let i = g
            .recvs
            .iter()
            .position(|r| r.context == context)
            .ok_or(Errno::NOENT)?;
        g.recvs.remove(i);
        if let Some(cq) = &g.rx_cq {
            cq.push_err(CqErrEntry::new(context, FI_RECV | FI_MSG, Errno::CANCELED));
        }
        Ok(())
    }

    fn recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if tagged {
            return Err(Errno::NOSYS);
        }
        if op.iov.len() > 1 || op.iov.first().map_or(0, |v| v.len()) < self.prefix {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_rx(op.call, op.flags);
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if g.recvs.len() >= 1024 {
            return Err(Errno::AGAIN);
        }
        let src = if self.caps & FI_DIRECTED_RECV != 0 {
            op.addr
        } else {
            FI_ADDR_UNSPEC
        };
        g.recvs
            .push_back(Recv::new(op.iov, src, 0, 0, op.context, flags));
        self.progress_locked(&mut g);
        Ok(())
    }

    fn send(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if tagged {
            return Err(Errno::NOSYS);
        }
        if op.iov.len() > 1 || op.iov.first().map_or(0, |v| v.len()) < self.prefix {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let len = iov_len(op.iov) - self.prefix;
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if len > g.mtu {
            return Err(Errno::MSGSIZE);
        }
        let av = g.av.clone().ok_or(Errno::NOAV)?;
        let dest = EfaAddr::from_bytes(&av.lookup(op.addr)?).ok_or(Errno::INVAL)?;
        let mut b = vec![0u8; HEADROOM + len];
        gather(op.iov, self.prefix, &mut b[HEADROOM..]);
        let inject = op.call == crate::util::ep::Call::Inject;
        let id = g
            .sends
            .insert((op.context, len, !inject && flags & FI_COMPLETION != 0));
        if let Err((e, _)) = g.dev.post_send_unreliable(dest, b, len, id) {
            g.sends.remove(id);
            self.progress_locked(&mut g);
            return Err(e);
        }
        self.progress_locked(&mut g);
        Ok(())
    }

    fn close(&self) -> Result<()> {
        self.lock().enabled = false;
        Ok(())
    }
}
