//! A provider that records calls and moves data through memory, to exercise the C boundary
//! (`src/ffi`) without a transport: send copies into a shared queue that the same endpoint's
//! receives drain.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use fabric::abi::consts::*;
use fabric::core::{Errno, Info, Result};
use fabric::sys::mem::{IoVec, gather, iov_len, scatter};
use fabric::util::av::{AddrCodec, Av, AvAttr};
use fabric::util::cq::{Cq, CqEntry};
use fabric::util::ep::{AtomicKind, MsgOp, OpFlags};
use fabric::util::mr::{Mr, MrMap, MrRequest};
use fabric::util::provider::AtomicAttr;
use fabric::util::{Bind, Domain, Endpoint, Fabric, Progress};

pub struct MockFabric;

impl Fabric for MockFabric {
    fn domain(&self, _info: &Info) -> Result<Arc<dyn Domain>> {
        Ok(Arc::new(MockDomain {
            mr: MrMap::new(FI_MR_PROV_KEY as i32, 8),
        }))
    }
    fn name(&self) -> &str {
        "mock"
    }
}

pub struct MockDomain {
    mr: MrMap,
}

pub struct Codec;

impl AddrCodec for Codec {
    fn addr_format(&self) -> u32 {
        FI_ADDR_EFA
    }
    fn addrlen(&self) -> Option<usize> {
        Some(8)
    }
    fn canonical(&self, a: &[u8]) -> Result<Vec<u8>> {
        if a.len() == 8 {
            Ok(a.to_vec())
        } else {
            Err(Errno::INVAL)
        }
    }
    fn straddr(&self, a: &[u8]) -> String {
        format!(
            "mock://{}",
            u64::from_le_bytes(a.try_into().unwrap_or([0; 8]))
        )
    }
}

impl Domain for MockDomain {
    fn endpoint(&self, info: &Info) -> Result<Arc<dyn Endpoint>> {
        if info.ep_attr.type_ != FI_EP_RDM && info.ep_attr.type_ != FI_EP_UNSPEC {
            return Err(Errno::INVAL);
        }
        Ok(Arc::new_cyclic(|me| MockEp {
            me: me.clone(),
            flags: OpFlags::new(0, 0),
            state: Mutex::new(EpState::default()),
        }))
    }
    fn av_open(&self, attr: &AvAttr) -> Result<Arc<Av>> {
        Av::new(attr, Arc::new(Codec))
    }
    fn mr_reg(&self, req: &MrRequest) -> Result<Arc<Mr>> {
        self.mr.register(req)
    }
    fn query_atomic(
        &self,
        datatype: u32,
        op: u32,
        _kind: AtomicKind,
        _flags: u64,
    ) -> Result<AtomicAttr> {
        if datatype == FI_UINT64 && op == FI_SUM {
            Ok(AtomicAttr { count: 1, size: 8 })
        } else {
            Err(Errno::OPNOTSUPP)
        }
    }
    fn mr_mode(&self) -> i32 {
        FI_MR_PROV_KEY as i32
    }
}

#[derive(Default)]
struct EpState {
    enabled: bool,
    tx_cq: Option<Arc<Cq>>,
    rx_cq: Option<Arc<Cq>>,
    av: Option<Arc<Av>>,
    /// Sent messages not yet received.
    wire: VecDeque<Vec<u8>>,
    /// Posted receives (buffers, context).
    recvs: VecDeque<(Vec<IoVec>, usize)>,
}

pub struct MockEp {
    me: Weak<MockEp>,
    flags: OpFlags,
    state: Mutex<EpState>,
}

impl MockEp {
    fn deliver(st: &mut EpState) {
        while !st.wire.is_empty() && !st.recvs.is_empty() {
            let (Some(data), Some((iov, ctx))) = (st.wire.pop_front(), st.recvs.pop_front()) else {
                break;
            };
            let n = scatter(&iov, 0, &data);
            if let Some(cq) = &st.rx_cq {
                cq.push(CqEntry {
                    op_context: ctx,
                    flags: FI_RECV | FI_MSG,
                    len: n,
                    src_addr: FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        }
    }
}

impl Progress for MockEp {
    fn progress(&self) {
        let mut st = self.state.lock().unwrap();
        Self::deliver(&mut st);
    }
}

impl Endpoint for MockEp {
    fn bind(&self, target: Bind, flags: u64) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        match target {
            Bind::Cq(cq) => {
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                    return Err(Errno::BADFLAGS);
                }
                let me: Weak<dyn Progress> = self.me.clone();
                cq.add_source(me);
                if flags & FI_TRANSMIT != 0 {
                    st.tx_cq = Some(cq.clone());
                }
                if flags & FI_RECV != 0 {
                    st.rx_cq = Some(cq);
                }
                self.flags.set_selective(
                    flags & FI_SELECTIVE_COMPLETION != 0 && flags & FI_TRANSMIT != 0,
                    false,
                );
                Ok(())
            }
            Bind::Av(av) => {
                st.av = Some(av);
                Ok(())
            }
            _ => Err(Errno::NOSYS),
        }
    }
    fn enable(&self) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if st.av.is_none() || st.tx_cq.is_none() || st.rx_cq.is_none() {
            return Err(Errno::NOCQ);
        }
        st.enabled = true;
        Ok(())
    }
    fn getname(&self) -> Result<Vec<u8>> {
        Ok(7u64.to_le_bytes().to_vec())
    }
    fn send(&self, op: &MsgOp<'_>, _tagged: bool) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if !st.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if op.iov.len() > 4 {
            return Err(Errno::INVAL);
        }
        st.av.as_ref().ok_or(Errno::NOAV)?.lookup(op.addr)?;
        let mut data = vec![0; iov_len(op.iov)];
        gather(op.iov, 0, &mut data);
        st.wire.push_back(data);
        let flags = self.flags.resolve_tx(op.call, op.flags);
        if flags & FI_COMPLETION != 0
            && let Some(cq) = &st.tx_cq
        {
            cq.push(CqEntry {
                op_context: op.context,
                flags: FI_SEND | FI_MSG,
                ..Default::default()
            });
        }
        Ok(())
    }
    fn recv(&self, op: &MsgOp<'_>, _tagged: bool) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if !st.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if op.iov.len() > 4 {
            return Err(Errno::INVAL);
        }
        st.recvs.push_back((op.iov.to_vec(), op.context));
        Ok(())
    }
}
