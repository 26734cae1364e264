//! The EFA RDM protocol v4 (efa-reference §1–§7): reliable datagram messaging, tagged
//! messaging, emulated RMA and atomics over a device that offers unordered reliable datagrams.

mod ack_timer;
mod ctrl;
mod ep;
mod local;
mod longread;
mod peer;
pub mod pkt;
mod placement;
mod progress;
mod quiet;
mod rma;
mod runt;
mod rx;
mod target;
mod tx;

pub use ep::RdmEndpoint;

pub(crate) use super::{atomic_count, inject_size, max_atomic_bytes};
use crate::abi::consts::*;
use crate::core::{Errno, Result};

fn put_u64(v: u64, val: &mut [u8], needed: &mut usize) -> Result<usize> {
    *needed = 8;
    if val.len() < 8 {
        return Err(Errno::TOOSMALL);
    }
    val[..8].copy_from_slice(&v.to_ne_bytes());
    Ok(8)
}

fn put_bool(v: bool, val: &mut [u8], needed: &mut usize) -> Result<usize> {
    *needed = 1;
    if val.is_empty() {
        return Err(Errno::TOOSMALL);
    }
    val[0] = u8::from(v);
    Ok(1)
}

/// fi_getopt(3) and fi_efa(7) options.
fn getopt(
    ep: &RdmEndpoint,
    level: i32,
    name: i32,
    val: &mut [u8],
    needed: &mut usize,
) -> Result<usize> {
    if level != FI_OPT_ENDPOINT {
        return Err(Errno::NOPROTOOPT);
    }
    let g = ep.lock();
    match name {
        FI_OPT_MIN_MULTI_RECV => put_u64(g.rxq.lock().min_multi_recv() as u64, val, needed),
        FI_OPT_MAX_MSG_SIZE | FI_OPT_MAX_TAGGED_SIZE | FI_OPT_MAX_RMA_SIZE => {
            put_u64(usize::MAX as u64, val, needed)
        }
        FI_OPT_MAX_ATOMIC_SIZE => put_u64(max_atomic_bytes(g.mtu) as u64, val, needed),
        FI_OPT_INJECT_MSG_SIZE
        | FI_OPT_INJECT_TAGGED_SIZE
        | FI_OPT_INJECT_RMA_SIZE
        | FI_OPT_INJECT_ATOMIC_SIZE => put_u64(inject_size(g.mtu) as u64, val, needed),
        FI_OPT_EFA_RNR_RETRY => put_u64(u64::from(g.rnr_retry), val, needed),
        // fi_efa(7): emulated unless the device does it (and device RDMA is in use); atomics
        // are always emulated (§5). Device RDMA is used with peers that do it too.
        FI_OPT_EFA_EMULATED_READ => put_bool(!g.rdma.rdma_read, val, needed),
        FI_OPT_EFA_EMULATED_WRITE => put_bool(!g.rdma.rdma_write, val, needed),
        FI_OPT_EFA_EMULATED_ATOMICS => put_bool(true, val, needed),
        FI_OPT_EFA_USE_DEVICE_RDMA => put_bool(g.rdma.rdma_read, val, needed),
        _ => Err(Errno::NOPROTOOPT),
    }
}

fn setopt(ep: &RdmEndpoint, level: i32, name: i32, val: &[u8]) -> Result<()> {
    if level != FI_OPT_ENDPOINT {
        return Err(Errno::NOPROTOOPT);
    }
    let size = || -> Result<usize> {
        let v: [u8; 8] = val.try_into().map_err(|_| Errno::INVAL)?;
        Ok(usize::from_ne_bytes(v))
    };
    let flag = || -> Result<bool> { val.first().map(|&b| b != 0).ok_or(Errno::INVAL) };
    let mut g = ep.lock();
    match name {
        FI_OPT_MIN_MULTI_RECV => {
            g.rxq.lock().set_min_multi_recv(size()?);
            Ok(())
        }
        FI_OPT_EFA_RNR_RETRY => {
            // Only before fi_enable: it is a queue-pair attribute (fi_efa(7)).
            if g.enabled {
                return Err(Errno::OPBADSTATE);
            }
            let v = size()?;
            let v = u32::try_from(v).map_err(|_| Errno::INVAL)?.min(7);
            g.rnr_retry = v;
            g.dev.set_rnr_retry(v);
            Ok(())
        }
        // fi_endpoint(3), as upstream efa: with no CUDA library and device initialised the
        // option cannot be set either way (-FI_EINVAL); -FI_EOPNOTSUPP (false without
        // peer-to-peer) needs CUDA first. This library has no CUDA interface.
        FI_OPT_CUDA_API_PERMITTED => {
            if val.len() != 1 {
                return Err(Errno::INVAL);
            }
            crate::fi_warn!(
                crate::prov::efa::PROV_NAME,
                crate::core::log::Subsys::EpCtrl,
                "FI_OPT_CUDA_API_PERMITTED cannot be set: no CUDA library or device is available"
            );
            Err(Errno::INVAL)
        }
        // fi_endpoint(3): whether local peers may be reached through shared memory (shm);
        // decided when the endpoint is enabled.
        FI_OPT_SHARED_MEMORY_PERMITTED => {
            // A C bool; asking for shm while FI_EFA_ENABLE_SHM_TRANSFER=0 is refused, as upstream.
            if val.len() != 1 {
                return Err(Errno::INVAL);
            }
            let permitted = flag()?;
            if g.enabled {
                return Err(Errno::OPBADSTATE);
            }
            if permitted && !crate::prov::efa::shm_transfer_enabled() {
                return Err(Errno::INVAL);
            }
            ep.shm_permitted
                .store(permitted, std::sync::atomic::Ordering::Release);
            Ok(())
        }
        FI_OPT_EFA_USE_DEVICE_RDMA => {
            // Only a device with RDMA read can be asked to use it (as upstream: the software
            // device has none, an EFA device says so in its efadv caps). Before fi_enable:
            // the handshake advertises it.
            let on = flag()?;
            if on && !g.dev.caps().rdma_read {
                return Err(Errno::OPNOTSUPP);
            }
            if g.enabled {
                return Err(Errno::OPBADSTATE);
            }
            g.rdma = if on {
                g.dev.caps()
            } else {
                crate::prov::efa::device::DeviceCaps::default()
            };
            Ok(())
        }
        FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES
        | FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES => {
            // In-order delivery of 128-byte-aligned data is a hardware property we lack.
            if flag()? {
                Err(Errno::OPNOTSUPP)
            } else {
                Ok(())
            }
        }
        FI_OPT_EFA_HOMOGENEOUS_PEERS => {
            flag()?;
            Ok(())
        }
        FI_OPT_MAX_MSG_SIZE | FI_OPT_MAX_TAGGED_SIZE | FI_OPT_MAX_RMA_SIZE => {
            size()?;
            Ok(())
        }
        FI_OPT_MAX_ATOMIC_SIZE => {
            if size()? > max_atomic_bytes(g.mtu) {
                Err(Errno::INVAL)
            } else {
                Ok(())
            }
        }
        FI_OPT_INJECT_MSG_SIZE
        | FI_OPT_INJECT_TAGGED_SIZE
        | FI_OPT_INJECT_RMA_SIZE
        | FI_OPT_INJECT_ATOMIC_SIZE => {
            if size()? > inject_size(g.mtu) {
                Err(Errno::INVAL)
            } else {
                Ok(())
            }
        }
        _ => Err(Errno::NOPROTOOPT),
    }
}
