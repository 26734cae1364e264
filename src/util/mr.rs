//! Memory registration (fi_mr(3)): keys, regions, and the check every remote access goes through.

use crate::util::hash::U64Map;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::sys::mem::IoVec;

#[derive(Clone, Debug, Default)]
pub struct MrRequest {
    pub iov: Vec<IoVec>,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub flags: u64,
    pub context: usize,
    pub iface: u32,
    pub device: u64,
}

/// Access bits a registration may ask for.
pub const MR_ACCESS: u64 =
    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

/// A region's registration with a device (an EFA NIC: `ibv_reg_mr`), held by the region and
/// released when the region goes (its `Drop`).
pub trait DeviceMr: Send + Sync + std::fmt::Debug {
    /// fi_efa(7)'s `fi_efa_mr_attr` of the registration: `[ic_id_validity, recv_ic_id,
    /// rdma_read_ic_id, rdma_recv_ic_id]`.
    fn ic_ids(&self) -> [u16; 4];
}

#[derive(Debug)]
pub struct Mr {
    key: u64,
    /// The device registration behind the key, on a domain of a device that has them.
    device: Option<Box<dyn DeviceMr>>,
    iov: Vec<IoVec>,
    len: usize,
    access: u64,
    /// Offset-addressing base (`fi_mr_attr.offset`) when the domain has no `FI_MR_VIRT_ADDR`.
    offset: u64,
    virt_addr: bool,
    context: usize,
    /// `FI_MR_ENDPOINT` regions become usable at `fi_mr_enable`.
    enabled: AtomicBool,
    map: Weak<MapInner>,
}

impl Mr {
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The device registration, if the domain's device made one.
    pub fn device(&self) -> Option<&dyn DeviceMr> {
        self.device.as_deref()
    }

    pub fn iov(&self) -> &[IoVec] {
        &self.iov
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn access(&self) -> u64 {
        self.access
    }

    pub fn context(&self) -> usize {
        self.context
    }

    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// The logical start address remote peers use.
    pub fn base(&self) -> u64 {
        if self.virt_addr {
            self.iov.first().map_or(0, |v| v.addr() as u64)
        } else {
            self.offset
        }
    }

    /// Removes the key from its map (fi_close on the MR).
    pub fn deregister(&self) {
        if let Some(map) = self.map.upgrade() {
            let mut keys = map.keys.write().unwrap_or_else(|e| e.into_inner());
            if keys.remove(&self.key).is_some() {
                // Under the lock: a cache that saw the old count looked the key up before.
                map.removals.fetch_add(1, Ordering::Release);
            }
        }
    }

    /// The pieces of this region covering `[addr, addr+len)` in remote addressing.
    /// Appends them to `out`; None (and `out` possibly grown) if the range is not all inside
    /// the region.
    fn pieces_into(&self, addr: u64, len: usize, out: &mut Vec<IoVec>) -> Option<()> {
        let start = addr.checked_sub(self.base())?;
        let start = usize::try_from(start).ok()?;
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        let mut off = start;
        let mut left = len;
        for v in &self.iov {
            if left == 0 {
                break;
            }
            if off >= v.len() {
                off -= v.len();
                continue;
            }
            let n = (v.len() - off).min(left);
            out.push(v.sub(off, n)?);
            left -= n;
            off = 0;
        }
        Some(())
    }
}

#[derive(Debug, Default)]
struct MapInner {
    keys: RwLock<U64Map<Arc<Mr>>>,
    /// Keys removed so far: what an `MrCache` entry was looked up under stands while this
    /// has not moved.
    removals: AtomicU64,
}

/// The region under `key`, if it is enabled and grants `access`.
fn usable(keys: &U64Map<Arc<Mr>>, key: u64, access: u64) -> Result<&Mr> {
    let mr = keys.get(&key).ok_or(Errno::ACCES)?;
    if !mr.is_enabled() || mr.access & access != access {
        return Err(Errno::ACCES);
    }
    Ok(mr)
}

/// One target's memory of the last region its remote accesses named (`MrMap::verify_cached`):
/// a stream of small RMAs to one region checks each against it with one plain load instead
/// of taking the map's lock (two locked instructions per RMA). Only a region of one piece,
/// enabled, is kept; it holds no reference, so closing the region is not delayed.
#[derive(Debug, Default)]
pub struct MrCache {
    entry: Option<CachedMr>,
}

#[derive(Debug)]
struct CachedMr {
    key: u64,
    /// `MapInner::removals` when it was looked up.
    removals: u64,
    access: u64,
    base: u64,
    piece: IoVec,
}

/// A domain's registered regions by key.
#[derive(Debug)]
pub struct MrMap {
    mr_mode: i32,
    key_size: usize,
    inner: Arc<MapInner>,
}

impl MrMap {
    /// `key_size` bytes of key (`domain_attr.mr_key_size`, ≤ 8).
    pub fn new(mr_mode: i32, key_size: usize) -> MrMap {
        MrMap {
            mr_mode,
            key_size: key_size.clamp(1, 8),
            inner: Arc::default(),
        }
    }

    pub fn mr_mode(&self) -> i32 {
        self.mr_mode
    }

    fn prov_key(&self) -> bool {
        self.mr_mode & (FI_MR_PROV_KEY as i32 | FI_MR_BASIC as i32) != 0
    }

    fn virt_addr(&self) -> bool {
        self.mr_mode & (FI_MR_VIRT_ADDR as i32 | FI_MR_BASIC as i32) != 0
    }

    pub fn register(&self, req: &MrRequest) -> Result<Arc<Mr>> {
        self.register_with(req, None)
    }

    /// `register` of a region the device registered too: with provider keys (`FI_MR_PROV_KEY`)
    /// the key is the device's (`key`, EFA's rkey), as remote peers address the device with it.
    pub fn register_device(
        &self,
        req: &MrRequest,
        key: u64,
        device: Box<dyn DeviceMr>,
    ) -> Result<Arc<Mr>> {
        self.register_with(req, Some((key, device)))
    }

    fn register_with(
        &self,
        req: &MrRequest,
        device: Option<(u64, Box<dyn DeviceMr>)>,
    ) -> Result<Arc<Mr>> {
        if req.access & !MR_ACCESS != 0 {
            return Err(Errno::INVAL);
        }
        // Host memory only: a device-memory interface fi_mr(3) names is not initialised
        // (-FI_ENOSYS, as upstream), a number past the last one is bad input.
        match req.iface {
            FI_HMEM_SYSTEM => {}
            FI_HMEM_CUDA..=FI_HMEM_SYNAPSEAI => return Err(Errno::NOSYS),
            _ => return Err(Errno::INVAL),
        }
        let len = req
            .iov
            .iter()
            .try_fold(0usize, |a, v| a.checked_add(v.len()))
            .ok_or(Errno::INVAL)?;
        let mut keys = self.inner.keys.write().unwrap_or_else(|e| e.into_inner());
        let (dev_key, device) = match device {
            Some((k, d)) => (Some(k), Some(d)),
            None => (None, None),
        };
        let key = if let Some(k) = dev_key.filter(|_| self.prov_key()) {
            // The device's keys are unique among its live registrations; a clash means a key
            // of another kind is in the map.
            if keys.contains_key(&k) {
                return Err(Errno::NOKEY);
            }
            k
        } else if self.prov_key() {
            // Unpredictable keys: a peer must not be able to guess another region's key.
            let mask = if self.key_size >= 8 {
                u64::MAX
            } else {
                (1u64 << (self.key_size * 8)) - 1
            };
            loop {
                let k = crate::sys::random::u64() & mask;
                if k != FI_KEY_NOTAVAIL & mask && !keys.contains_key(&k) {
                    break k;
                }
            }
        } else {
            if self.key_size < 8 && req.requested_key >> (self.key_size * 8) != 0 {
                return Err(Errno::NOKEY);
            }
            if keys.contains_key(&req.requested_key) {
                return Err(Errno::NOKEY);
            }
            req.requested_key
        };
        let mr = Arc::new(Mr {
            key,
            device,
            iov: req.iov.clone(),
            len,
            access: req.access,
            offset: req.offset,
            virt_addr: self.virt_addr(),
            context: req.context,
            enabled: AtomicBool::new(self.mr_mode & FI_MR_ENDPOINT as i32 == 0),
            map: Arc::downgrade(&self.inner),
        });
        keys.insert(key, mr.clone());
        Ok(mr)
    }

    /// Checks a remote access of `len` bytes at `addr` with `key` needing `access`
    /// (`FI_REMOTE_READ`/`FI_REMOTE_WRITE`) and returns the memory it covers.
    pub fn verify(&self, key: u64, addr: u64, len: usize, access: u64) -> Result<Vec<IoVec>> {
        let mut out = Vec::with_capacity(1);
        self.verify_into(key, addr, len, access, &mut out)?;
        Ok(out)
    }

    /// `verify`, appending the memory to `out` instead of allocating a list (a target checks
    /// every RMA of a stream of small ones).
    pub fn verify_into(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        access: u64,
        out: &mut Vec<IoVec>,
    ) -> Result<()> {
        let keys = self.inner.keys.read().unwrap_or_else(|e| e.into_inner());
        let mr = usable(&keys, key, access)?;
        mr.pieces_into(addr, len, out).ok_or(Errno::ACCES)
    }

    /// `verify_into` through `cache`: the region comes from it while no key was removed from
    /// the map since it was looked up (a removed key, or a key registered again, moves the
    /// count), else from the map, and is then remembered.
    pub fn verify_cached(
        &self,
        cache: &mut MrCache,
        key: u64,
        addr: u64,
        len: usize,
        access: u64,
        out: &mut Vec<IoVec>,
    ) -> Result<()> {
        let removals = self.inner.removals.load(Ordering::Acquire);
        if let Some(c) = &cache.entry
            && c.key == key
            && c.removals == removals
        {
            if c.access & access != access {
                return Err(Errno::ACCES);
            }
            let start = addr
                .checked_sub(c.base)
                .and_then(|s| usize::try_from(s).ok())
                .ok_or(Errno::ACCES)?;
            if start.checked_add(len).is_none_or(|end| end > c.piece.len()) {
                return Err(Errno::ACCES);
            }
            if len > 0 {
                out.push(c.piece.sub(start, len).ok_or(Errno::ACCES)?);
            }
            return Ok(());
        }
        let keys = self.inner.keys.read().unwrap_or_else(|e| e.into_inner());
        let mr = usable(&keys, key, access)?;
        if let [piece] = mr.iov[..] {
            cache.entry = Some(CachedMr {
                key,
                removals,
                access: mr.access,
                base: mr.base(),
                piece,
            });
        }
        mr.pieces_into(addr, len, out).ok_or(Errno::ACCES)
    }

    /// The region registered under `key`.
    pub fn get(&self, key: u64) -> Option<Arc<Mr>> {
        self.inner
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.inner
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(n: usize) -> IoVec {
        IoVec::from_mut_slice(Box::leak(vec![0u8; n].into_boxed_slice()))
    }

    #[test]
    fn offset_addressing_and_checks() {
        let map = MrMap::new(0, 8);
        let b = buf(100);
        let req = MrRequest {
            iov: vec![b],
            access: FI_REMOTE_WRITE,
            offset: 1000,
            requested_key: 5,
            ..Default::default()
        };
        let mr = map.register(&req).unwrap();
        assert_eq!(mr.key(), 5);
        assert_eq!(map.register(&req).unwrap_err(), Errno::NOKEY);
        let p = map.verify(5, 1010, 90, FI_REMOTE_WRITE).unwrap();
        assert_eq!(p[0].addr(), b.addr() + 10);
        assert_eq!(map.verify(5, 1010, 91, FI_REMOTE_WRITE), Err(Errno::ACCES));
        assert_eq!(map.verify(5, 999, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
        assert_eq!(map.verify(5, 1000, 1, FI_REMOTE_READ), Err(Errno::ACCES));
        assert_eq!(map.verify(6, 1000, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
        assert_eq!(
            map.verify(5, u64::MAX, 2, FI_REMOTE_WRITE),
            Err(Errno::ACCES)
        );
        mr.deregister();
        assert_eq!(map.verify(5, 1010, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
    }

    /// A target's cache of the last region answers as the map does, and forgets the region
    /// once any key is removed: a closed key is refused, a key registered again names its new
    /// memory.
    #[test]
    fn the_cache_answers_as_the_map_and_forgets_closed_regions() {
        let map = MrMap::new(0, 8);
        let (a, b) = (buf(100), buf(100));
        let req = |iov, key, access| MrRequest {
            iov: vec![iov],
            access,
            offset: 1000,
            requested_key: key,
            ..Default::default()
        };
        let mr = map.register(&req(a, 5, FI_REMOTE_WRITE)).unwrap();
        let other = map.register(&req(b, 6, FI_REMOTE_READ)).unwrap();
        let mut cache = MrCache::default();
        let mut check = |key, addr, len, access| {
            let mut out = Vec::new();
            let r = map.verify_cached(&mut cache, key, addr, len, access, &mut out);
            assert_eq!(
                r.map(|()| out.clone()),
                map.verify(key, addr, len, access),
                "cached and uncached differ: key {key} at {addr}+{len}"
            );
            r.map(|()| out)
        };
        for _ in 0..2 {
            // The first round fills the cache, the second answers from it.
            assert_eq!(
                check(5, 1010, 90, FI_REMOTE_WRITE).unwrap()[0].addr(),
                a.addr() + 10
            );
            assert_eq!(check(5, 1000, 0, FI_REMOTE_WRITE).unwrap(), vec![]);
            assert_eq!(check(5, 1010, 91, FI_REMOTE_WRITE), Err(Errno::ACCES));
            assert_eq!(check(5, 999, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
            assert_eq!(check(5, u64::MAX, 2, FI_REMOTE_WRITE), Err(Errno::ACCES));
            assert_eq!(check(5, 1000, 1, FI_REMOTE_READ), Err(Errno::ACCES));
            assert_eq!(check(7, 1000, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
        }
        // Another region's lookup replaces the cached one.
        assert_eq!(
            check(6, 1000, 4, FI_REMOTE_READ).unwrap()[0].addr(),
            b.addr()
        );
        assert!(check(5, 1000, 4, FI_REMOTE_WRITE).is_ok());
        mr.deregister();
        assert_eq!(check(5, 1010, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
        // Key 5 again, now over b: the old memory is never named again.
        let again = map.register(&req(b, 5, FI_REMOTE_WRITE)).unwrap();
        assert_eq!(
            check(5, 1010, 1, FI_REMOTE_WRITE).unwrap()[0].addr(),
            b.addr() + 10
        );
        // Removing an unrelated key makes the cache look again, with the same answer.
        other.deregister();
        assert_eq!(
            check(5, 1010, 1, FI_REMOTE_WRITE).unwrap()[0].addr(),
            b.addr() + 10
        );
        again.deregister();
    }

    /// fi_mr(3): host memory registers with `FI_HMEM_SYSTEM`; a device-memory interface has
    /// no library here (-FI_ENOSYS, as upstream efa answers for an uninitialised one); a
    /// number past the last interface is bad input.
    #[test]
    fn only_system_memory_registers() {
        let map = MrMap::new(0, 8);
        let b = buf(64);
        let req = |iface, key| MrRequest {
            iov: vec![b],
            access: FI_REMOTE_WRITE,
            requested_key: key,
            iface,
            ..Default::default()
        };
        let mr = map.register(&req(FI_HMEM_SYSTEM, 1)).unwrap();
        assert!(map.verify(1, 0, 64, FI_REMOTE_WRITE).is_ok());
        mr.deregister();
        for iface in [
            FI_HMEM_CUDA,
            FI_HMEM_ROCR,
            FI_HMEM_ZE,
            FI_HMEM_NEURON,
            FI_HMEM_SYNAPSEAI,
        ] {
            assert_eq!(map.register(&req(iface, 2)).unwrap_err(), Errno::NOSYS);
        }
        for iface in [FI_HMEM_SYNAPSEAI + 1, u32::MAX] {
            assert_eq!(map.register(&req(iface, 2)).unwrap_err(), Errno::INVAL);
        }
        assert_eq!(map.verify(2, 0, 1, FI_REMOTE_WRITE), Err(Errno::ACCES));
    }

    #[test]
    fn virtual_addresses_and_provider_keys() {
        let map = MrMap::new((FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) as i32, 4);
        let (a, b) = (buf(10), buf(20));
        let req = MrRequest {
            iov: vec![a, b],
            access: FI_REMOTE_READ,
            requested_key: 1,
            ..Default::default()
        };
        let mr = map.register(&req).unwrap();
        assert!(mr.key() <= u32::MAX as u64);
        let keys: std::collections::HashSet<u64> =
            (0..64).map(|_| map.register(&req).unwrap().key()).collect();
        assert!(keys.len() > 60, "provider keys must not repeat a pattern");
        let p = map
            .verify(mr.key(), a.addr() as u64 + 5, 10, FI_REMOTE_READ)
            .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].len(), p[1].len()), (5, 5));
        assert_eq!(p[1].addr(), b.addr());
    }
}
