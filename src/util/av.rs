//! Address vectors (fi_av(3)): a table from `fi_addr_t` to provider addresses, with the reverse
//! map that `FI_SOURCE` needs. The provider supplies the address format through [`AddrCodec`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::abi::consts::*;
use crate::core::{Errno, Result};

/// How a provider's addresses look.
pub trait AddrCodec: Send + Sync {
    fn addr_format(&self) -> u32;

    /// Bytes of one address in `fi_av_insert`'s packed array; `None` for `FI_ADDR_STR`, whose
    /// addresses are NUL-terminated strings packed one after another.
    fn addrlen(&self) -> Option<usize>;

    /// Checks an address and returns the form stored in the AV (used as the reverse-map key).
    fn canonical(&self, addr: &[u8]) -> Result<Vec<u8>>;

    /// `fi_av_straddr` text.
    fn straddr(&self, addr: &[u8]) -> String;

    /// `fi_av_insertsvc`/`insertsym`: the address of `node`/`service`.
    fn resolve(&self, _node: &str, _service: &str) -> Result<Vec<u8>> {
        Err(Errno::NOSYS)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AvAttr {
    pub type_: u32,
    pub count: usize,
    pub flags: u64,
    pub name: Option<String>,
    pub ep_per_node: usize,
    pub rx_ctx_bits: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    addr: Arc<[u8]>,
    /// What completions report as the source (`FI_AV_USER_ID`), else the fi_addr itself.
    user_id: u64,
}

#[derive(Default)]
struct Table {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    reverse: HashMap<Arc<[u8]>, u64>,
}

pub struct Av {
    attr: AvAttr,
    codec: Arc<dyn AddrCodec>,
    table: RwLock<Table>,
    /// Entries removed so far: endpoints that keep `fi_addr_t`s resolved (to their peers, as
    /// sources) look at it before trusting them, since a removed index may be given to another
    /// address by the next insert.
    removals: AtomicU64,
    /// Whether any entry was given a user id (`FI_AV_USER_ID`, fi_av_set_user_id): until one
    /// is, an arrival's source is its fi_addr, found without the table's lock.
    user_ids: AtomicBool,
}

impl std::fmt::Debug for Av {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Av")
            .field("attr", &self.attr)
            .finish_non_exhaustive()
    }
}

impl Av {
    /// fi_av_open(3). `FI_AV_UNSPEC` becomes `FI_AV_TABLE`.
    pub fn new(attr: &AvAttr, codec: Arc<dyn AddrCodec>) -> Result<Arc<Av>> {
        let mut attr = attr.clone();
        match attr.type_ {
            FI_AV_UNSPEC => attr.type_ = FI_AV_TABLE,
            FI_AV_MAP | FI_AV_TABLE => {}
            _ => return Err(Errno::INVAL),
        }
        if attr.rx_ctx_bits != 0 {
            return Err(Errno::NOSYS);
        }
        if attr.name.is_some() {
            // Named (shared) AVs are not offered.
            return Err(Errno::NOSYS);
        }
        let allowed = FI_EVENT | FI_READ | FI_SYMMETRIC;
        if attr.flags & !allowed != 0 {
            return Err(Errno::BADFLAGS);
        }
        if attr.flags & FI_EVENT != 0 {
            // Asynchronous inserts need an EQ; this library inserts synchronously.
            return Err(Errno::NOSYS);
        }
        Ok(Arc::new(Av {
            attr,
            codec,
            table: RwLock::new(Table::default()),
            removals: AtomicU64::new(0),
            user_ids: AtomicBool::new(false),
        }))
    }

    pub fn attr(&self) -> &AvAttr {
        &self.attr
    }

    pub fn codec(&self) -> &Arc<dyn AddrCodec> {
        &self.codec
    }

    /// Inserts one address; an address already present gets its existing `fi_addr` back.
    pub fn insert(&self, addr: &[u8], user_id: Option<u64>) -> Result<u64> {
        let key: Arc<[u8]> = self.codec.canonical(addr)?.into();
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if user_id.is_some() {
            // Set under the write lock: a reader that sees it false read no user id.
            self.user_ids.store(true, Ordering::Release);
        }
        if let Some(&fi) = t.reverse.get(&key) {
            if let Some(uid) = user_id
                && let Some(Some(e)) = t.entries.get_mut(fi as usize)
            {
                e.user_id = uid;
            }
            return Ok(fi);
        }
        let idx = match t.free.pop() {
            Some(i) => i,
            None => {
                t.entries.push(None);
                t.entries.len() - 1
            }
        };
        let fi = idx as u64;
        t.entries[idx] = Some(Entry {
            addr: key.clone(),
            user_id: user_id.unwrap_or(fi),
        });
        t.reverse.insert(key, fi);
        Ok(fi)
    }

    pub fn remove(&self, fi_addr: u64) -> Result<()> {
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let idx = usize::try_from(fi_addr).map_err(|_| Errno::INVAL)?;
        let Some(slot) = t.entries.get_mut(idx) else {
            return Err(Errno::INVAL);
        };
        let Some(e) = slot.take() else {
            return Err(Errno::INVAL);
        };
        t.reverse.remove(&e.addr);
        t.free.push(idx);
        self.removals.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// How many entries have been removed (see `removals`): while it is unchanged, what an
    /// endpoint resolved through this AV still holds.
    pub fn removals(&self) -> u64 {
        self.removals.load(Ordering::Acquire)
    }

    /// Whether entries were removed since `seen` was last brought up to date here (`seen`
    /// starts at 0), and brings it up to date: one atomic load.
    pub fn removed_since(&self, seen: &mut u64) -> bool {
        let n = self.removals();
        let changed = n != *seen;
        *seen = n;
        changed
    }

    /// The address stored at `fi_addr`.
    pub fn lookup(&self, fi_addr: u64) -> Result<Arc<[u8]>> {
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        let idx = usize::try_from(fi_addr).map_err(|_| Errno::INVAL)?;
        match t.entries.get(idx) {
            Some(Some(e)) => Ok(e.addr.clone()),
            _ => Err(Errno::INVAL),
        }
    }

    /// The entry inserted as `old` now stands for `new`, under the same `fi_addr`: a provider
    /// learned the full address of a peer that was inserted by a partial name (efa: by node and
    /// service, without the QKEY). Returns that `fi_addr`, or `None` when `old` is not in the
    /// AV or `new` already is (under its own `fi_addr`, which then stays the one arrivals
    /// report).
    pub fn resolve_entry(&self, old: &[u8], new: &[u8]) -> Option<u64> {
        let new: Arc<[u8]> = self.codec.canonical(new).ok()?.into();
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if t.reverse.contains_key(&new) {
            return None;
        }
        let fi = t.reverse.remove(old)?;
        if let Some(Some(e)) = t.entries.get_mut(fi as usize) {
            e.addr = new.clone();
        }
        t.reverse.insert(new, fi);
        Some(fi)
    }

    /// The `fi_addr` of an arrival's source `addr`; failing that, of the entry inserted as its
    /// `partial` name, which is resolved to `addr` on the way ([`Av::resolve_entry`]). The
    /// write lock is taken only when there is such an entry to resolve, so an arrival from a
    /// source nobody inserted costs one read lock, as [`Av::reverse`] does.
    pub fn reverse_resolving(&self, addr: &[u8], partial: Option<&[u8]>) -> Option<u64> {
        {
            let t = self.table.read().unwrap_or_else(|e| e.into_inner());
            if let Some(&fi) = t.reverse.get(addr) {
                return Some(fi);
            }
            if !partial.is_some_and(|p| t.reverse.contains_key(p)) {
                return None;
            }
        }
        self.resolve_entry(partial?, addr)
    }

    /// The `fi_addr` of an address (for `FI_SOURCE`), if inserted.
    pub fn reverse(&self, addr: &[u8]) -> Option<u64> {
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        t.reverse.get(addr).copied()
    }

    /// What a completion reports as the source of `fi_addr` (its user id, if one was set).
    pub fn source_id(&self, fi_addr: u64) -> u64 {
        // Endpoints ask with the fi_addr they hold for a peer, kept current with
        // `removed_since`; without user ids the answer is that fi_addr (one per arrival).
        if !self.user_ids.load(Ordering::Acquire) {
            return fi_addr;
        }
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        match t.entries.get(fi_addr as usize) {
            Some(Some(e)) => e.user_id,
            _ => FI_ADDR_NOTAVAIL,
        }
    }

    /// fi_av_set_user_id(3).
    pub fn set_user_id(&self, fi_addr: u64, user_id: u64) -> Result<()> {
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        self.user_ids.store(true, Ordering::Release);
        match t.entries.get_mut(fi_addr as usize) {
            Some(Some(e)) => {
                e.user_id = user_id;
                Ok(())
            }
            _ => Err(Errno::INVAL),
        }
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        t.entries.len() - t.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl AddrCodec for Fixed {
        fn addr_format(&self) -> u32 {
            FI_ADDR_EFA
        }
        fn addrlen(&self) -> Option<usize> {
            Some(4)
        }
        fn canonical(&self, a: &[u8]) -> Result<Vec<u8>> {
            if a.len() == 4 {
                Ok(a.to_vec())
            } else {
                Err(Errno::INVAL)
            }
        }
        fn straddr(&self, a: &[u8]) -> String {
            format!("{a:?}")
        }
    }

    #[test]
    fn a_partial_name_resolves_to_the_full_address() {
        let av = Av::new(&AvAttr::default(), Arc::new(Fixed)).unwrap();
        let named = av.insert(&[1, 2, 0, 0], None).unwrap();
        let other = av.insert(&[5, 6, 7, 8], None).unwrap();
        assert_eq!(av.resolve_entry(&[1, 2, 0, 0], &[1, 2, 3, 4]), Some(named));
        assert_eq!(&*av.lookup(named).unwrap(), &[1, 2, 3, 4]);
        assert_eq!(av.reverse(&[1, 2, 3, 4]), Some(named));
        assert_eq!(av.reverse(&[1, 2, 0, 0]), None);
        // Nothing to resolve, or the full address is another entry already: no change.
        assert_eq!(av.resolve_entry(&[1, 2, 0, 0], &[1, 2, 3, 4]), None);
        let again = av.insert(&[5, 6, 0, 0], None).unwrap();
        assert_eq!(av.resolve_entry(&[5, 6, 0, 0], &[5, 6, 7, 8]), None);
        assert_eq!(&*av.lookup(again).unwrap(), &[5, 6, 0, 0]);
        assert_eq!(av.reverse(&[5, 6, 7, 8]), Some(other));
        assert_eq!(av.resolve_entry(&[1, 2, 3, 4], &[1]), None, "bad address");
        // As an arrival's source: found as it is, or through the partial name it resolves.
        assert_eq!(av.reverse_resolving(&[5, 6, 7, 8], None), Some(other));
        let third = av.insert(&[9, 9, 0, 0], None).unwrap();
        assert_eq!(av.reverse_resolving(&[9, 9, 1, 1], None), None);
        assert_eq!(
            av.reverse_resolving(&[7, 7, 1, 1], Some(&[7, 7, 0, 0])),
            None
        );
        assert_eq!(
            av.reverse_resolving(&[9, 9, 1, 1], Some(&[9, 9, 0, 0])),
            Some(third)
        );
        assert_eq!(av.reverse(&[9, 9, 1, 1]), Some(third));
    }

    #[test]
    fn insert_lookup_remove_reuse() {
        let av = Av::new(&AvAttr::default(), Arc::new(Fixed)).unwrap();
        assert_eq!(av.attr().type_, FI_AV_TABLE);
        let a = av.insert(&[1, 2, 3, 4], None).unwrap();
        let b = av.insert(&[5, 6, 7, 8], Some(77)).unwrap();
        assert_eq!((a, b), (0, 1));
        assert_eq!(av.insert(&[1, 2, 3, 4], None).unwrap(), 0);
        assert_eq!(&*av.lookup(1).unwrap(), &[5, 6, 7, 8]);
        assert_eq!(av.reverse(&[5, 6, 7, 8]), Some(1));
        assert_eq!(av.source_id(1), 77);
        assert_eq!(av.insert(&[1], None), Err(Errno::INVAL));
        assert_eq!(av.removals(), 0);
        av.remove(0).unwrap();
        assert_eq!(av.remove(0), Err(Errno::INVAL));
        assert_eq!(av.removals(), 1, "a refused remove is not counted");
        let mut seen = 0;
        assert!(av.removed_since(&mut seen));
        assert!(!av.removed_since(&mut seen), "nothing removed since");
        assert_eq!(av.lookup(0), Err(Errno::INVAL));
        assert_eq!(av.lookup(u64::MAX), Err(Errno::INVAL));
        assert_eq!(av.insert(&[9, 9, 9, 9], None).unwrap(), 0);
        assert_eq!(av.len(), 2);
    }

    #[test]
    fn a_source_is_its_fi_addr_until_a_user_id_is_given() {
        let av = Av::new(&AvAttr::default(), Arc::new(Fixed)).unwrap();
        let a = av.insert(&[1, 2, 3, 4], None).unwrap();
        let b = av.insert(&[5, 6, 7, 8], None).unwrap();
        assert_eq!((av.source_id(a), av.source_id(b)), (a, b));
        av.set_user_id(b, 0xfeed).unwrap();
        assert_eq!((av.source_id(a), av.source_id(b)), (a, 0xfeed));
        // An insert with FI_AV_USER_ID into another AV switches it the same way.
        let av2 = Av::new(&AvAttr::default(), Arc::new(Fixed)).unwrap();
        let c = av2.insert(&[1, 2, 3, 4], None).unwrap();
        let d = av2.insert(&[5, 6, 7, 8], Some(9)).unwrap();
        assert_eq!((av2.source_id(c), av2.source_id(d)), (c, 9));
    }
}
