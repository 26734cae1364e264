//! The shm provider (fi_shm(7)): reliable messaging, RMA and atomics between processes of one
//! host through shared memory.
//!
//! Addresses are `FI_ADDR_STR` names as upstream uses them (`fi_shm://<pid>:<uid>:<n>` for
//! endpoints opened from getinfo's `fi_shm://<pid>`, anything else verbatim, settable with
//! `fi_setname`). An endpoint's region is the POSIX shm object [`region_name`] of its name.
//!
//! Rust API for other providers (efa's local peers): `ShmProvider::open_domain` gives a domain
//! without going through C; `ShmEndpoint` is a plain `util::Endpoint`, named with `setname`
//! before `enable`.

mod cmd;
mod ep;
mod region;

use std::sync::{Arc, LazyLock};

/// The command layout, for the fuzz harness (`crate::fuzzing`).
pub(crate) use cmd::{Cmd, OP_CONNECT};
pub use ep::{IdleHint, PeerMode, Pending, ShmEndpoint};
/// How many bounce buffers an endpoint lends (tests exhaust them).
pub use region::BOUNCE_BUFS;
pub use region::CMD_SIZE;

use crate::abi::consts::*;
use crate::core::info::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::core::provider::InfoProvider;
use crate::core::{Errno, Result};
use crate::util::av::{AddrCodec, Av, AvAttr};
use crate::util::ep::AtomicKind;
use crate::util::mr::{Mr, MrMap, MrRequest};
use crate::util::provider::AtomicAttr;
use crate::util::{Domain, Endpoint, Fabric, Provider};

pub const PROV_NAME: &str = "shm";
/// Provider version: follows the library (2.6).
pub const PROV_VERSION: u32 = fi_version(206, 0);
/// Longest endpoint name.
pub const NAME_MAX: usize = 200;
pub const TX_SIZE: usize = 1024;
pub const RX_SIZE: usize = 1024;

const TX_CAPS: u64 = FI_MSG | FI_SEND | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_ATOMIC;
const RX_CAPS: u64 = FI_SOURCE
    | FI_RMA_EVENT
    | FI_MSG
    | FI_RECV
    | FI_TAGGED
    | FI_RMA
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_ATOMIC
    | FI_DIRECTED_RECV
    | FI_MULTI_RECV;
const DOMAIN_CAPS: u64 = FI_LOCAL_COMM | FI_AV_USER_ID;
/// Everything an shm endpoint offers.
pub const SHM_CAPS: u64 = TX_CAPS | RX_CAPS | DOMAIN_CAPS;

/// The shm object of an endpoint named `name`: `/fabric_shm_<uid>_<name without scheme>`,
/// with characters outside `[A-Za-z0-9._:-]` replaced and a hash of the full name appended when
/// anything was replaced, so distinct names stay distinct.
/// Defines shm's parameters up front, for `fi_getparams` / `fi_info -e`.
pub fn define_params() {
    let _ = ep::cma_enabled();
    let _ = huge_pages_enabled();
}

/// The shared-memory object of the endpoint named `name`: the name made safe, after the
/// user's id, and a hash of the name unless it was safe as it was (`fi_shm://` names).
pub fn region_name(name: &str) -> String {
    let body = name.split_once("://").map_or(name, |(_, b)| b);
    let clean = clean_name(body);
    let mut out = format!("/{}", region_stem(&clean));
    if clean != body || !name.starts_with("fi_shm://") {
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        out.push_str(&format!("_{h:016x}"));
    }
    out
}

fn clean_name(body: &str) -> String {
    body.chars()
        .take(160)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn region_stem(clean: &str) -> String {
    format!("fabric_shm_{}_{}", crate::sys::os::uid(), clean)
}

/// The names of this user's live endpoints (their region exists, is ready and its owner
/// runs) that begin with `prefix`, a scheme and the start of a name made only of safe
/// characters (`efa://<gid>:<qpn>:`): how a peer known by part of its name is found on this
/// host.
pub fn live_names(prefix: &str) -> Vec<String> {
    let Some((scheme, body)) = prefix.split_once("://") else {
        return Vec::new();
    };
    if clean_name(body) != body {
        return Vec::new();
    }
    let stem = region_stem(body);
    crate::sys::shm::names()
        .into_iter()
        .filter_map(|object| {
            // `<stem><rest of the name>_<hash>`: the hash is of the whole name, so the
            // candidate is checked by naming its region again.
            let rest = object.strip_prefix(&stem)?;
            let (tail, _hash) = rest.rsplit_once('_')?;
            let name = format!("{scheme}://{body}{tail}");
            (region_name(&name) == format!("/{object}")).then_some(name)
        })
        .filter(|name| region::Region::open(&region_name(name)).is_ok_and(|r| !r.owner_gone()))
        .collect()
}

/// `fi_av_insert` addresses: NUL-terminated strings.
struct ShmAddr;

impl AddrCodec for ShmAddr {
    fn addr_format(&self) -> u32 {
        FI_ADDR_STR
    }
    fn addrlen(&self) -> Option<usize> {
        None
    }
    fn canonical(&self, addr: &[u8]) -> Result<Vec<u8>> {
        let s = addr.split(|&b| b == 0).next().unwrap_or(&[]);
        if s.is_empty() || s.len() > NAME_MAX || std::str::from_utf8(s).is_err() {
            return Err(Errno::INVAL);
        }
        Ok(s.to_vec())
    }
    fn straddr(&self, addr: &[u8]) -> String {
        String::from_utf8_lossy(addr.split(|&b| b == 0).next().unwrap_or(&[])).into_owned()
    }
    fn resolve(&self, node: &str, service: &str) -> Result<Vec<u8>> {
        Ok(format!("fi_ns://{node}:{service}").into_bytes())
    }
}

/// Largest element count one atomic call may carry for `datatype` (fi_atomicvalid(3)).
pub fn atomic_count(kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
    if !crate::util::atomic::valid(kind, datatype, op) {
        return Err(Errno::OPNOTSUPP);
    }
    let size = crate::util::atomic::datatype_size(datatype).ok_or(Errno::OPNOTSUPP)?;
    Ok(region::BOUNCE_SIZE / 2 / size)
}

fn static_info() -> Info {
    let caps = SHM_CAPS;
    Info {
        caps,
        addr_format: FI_ADDR_STR,
        tx_attr: TxAttr {
            caps: TX_CAPS,
            op_flags: FI_COMPLETION
                | FI_INJECT_COMPLETE
                | FI_TRANSMIT_COMPLETE
                | FI_DELIVERY_COMPLETE,
            msg_order: FI_ORDER_SAS
                | FI_ORDER_RAR
                | FI_ORDER_RAW
                | FI_ORDER_WAR
                | FI_ORDER_WAW
                | FI_ORDER_ATOMIC_RAR
                | FI_ORDER_ATOMIC_RAW
                | FI_ORDER_ATOMIC_WAR
                | FI_ORDER_ATOMIC_WAW,
            inject_size: ep::INJECT_SIZE,
            size: TX_SIZE,
            iov_limit: 4,
            rma_iov_limit: 4,
            ..Default::default()
        },
        rx_attr: RxAttr {
            caps: RX_CAPS,
            op_flags: FI_COMPLETION | FI_MULTI_RECV,
            msg_order: FI_ORDER_SAS
                | FI_ORDER_RAR
                | FI_ORDER_RAW
                | FI_ORDER_WAR
                | FI_ORDER_WAW
                | FI_ORDER_ATOMIC_RAR
                | FI_ORDER_ATOMIC_RAW
                | FI_ORDER_ATOMIC_WAR
                | FI_ORDER_ATOMIC_WAW,
            size: RX_SIZE,
            iov_limit: 4,
            ..Default::default()
        },
        ep_attr: EpAttr {
            type_: FI_EP_RDM,
            protocol: FI_PROTO_SHM,
            protocol_version: 1,
            max_msg_size: usize::MAX,
            max_order_raw_size: usize::MAX,
            max_order_war_size: usize::MAX,
            max_order_waw_size: usize::MAX,
            mem_tag_format: 0xAAAA_AAAA_AAAA_AAAA,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..Default::default()
        },
        domain_attr: DomainAttr {
            name: Some("shm".into()),
            threading: FI_THREAD_SAFE,
            control_progress: FI_PROGRESS_AUTO,
            progress: FI_PROGRESS_MANUAL,
            resource_mgmt: FI_RM_ENABLED,
            av_type: FI_AV_UNSPEC,
            mr_mode: (FI_MR_BASIC | FI_MR_SCALABLE) as i32,
            mr_key_size: 8,
            cq_data_size: 8,
            cq_cnt: 1 << 10,
            ep_cnt: 256,
            tx_ctx_cnt: 1 << 10,
            rx_ctx_cnt: 1 << 10,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            cntr_cnt: 1 << 10,
            mr_iov_limit: 4,
            caps: DOMAIN_CAPS,
            mr_cnt: 1 << 16,
            ..Default::default()
        },
        fabric_attr: FabricAttr {
            name: Some("shm".into()),
            prov_name: Some(PROV_NAME.into()),
            prov_version: PROV_VERSION,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The getinfo address of `node`/`service` (upstream's forms).
fn resolve_addr(node: Option<&str>, service: Option<&str>) -> Vec<u8> {
    let s = match (node, service) {
        (Some(n), Some(s)) => format!("fi_ns://{n}:{s}"),
        (None, Some(s)) => format!("fi_ns://{s}"),
        (Some(n), None) => format!("fi_shm://{n}"),
        (None, None) => format!("fi_shm://{}", std::process::id()),
    };
    let mut v = s.into_bytes();
    v.push(0);
    v
}

pub struct ShmProvider;

pub static SHM: ShmProvider = ShmProvider;

/// Whether `FI_SHM_MR_HUGE_PAGES` (default on) lets a registration move the registered memory
/// onto transparent huge pages (`util::huge_pages`).
fn huge_pages_enabled() -> bool {
    static ON: LazyLock<bool> = LazyLock::new(|| {
        crate::core::params::knob_bool(
            PROV_NAME,
            "mr_huge_pages",
            "Move registered memory that is resident onto transparent huge pages (faster \
             cross-memory copies)",
            true,
        )
    });
    *ON
}

/// Removes regions left behind by processes of ours that died (once per process).
fn clean_stale_regions() {
    static DONE: LazyLock<()> = LazyLock::new(|| {
        let prefix = format!("fabric_shm_{}_", crate::sys::os::uid());
        for name in crate::sys::shm::list(&prefix) {
            if region::sweepable(&name) {
                crate::sys::shm::unlink(&name);
            }
        }
    });
    LazyLock::force(&DONE);
}

impl InfoProvider for ShmProvider {
    fn name(&self) -> &'static str {
        PROV_NAME
    }

    fn version(&self) -> u32 {
        PROV_VERSION
    }

    fn getinfo(
        &self,
        version: u32,
        node: Option<&str>,
        service: Option<&str>,
        flags: u64,
        hints: Option<&Info>,
    ) -> Result<Vec<Info>> {
        // Shared memory cannot reach other hosts: the entry offers FI_LOCAL_COMM only, so hints
        // asking for FI_REMOTE_COMM find nothing here (fi_getinfo(3) caps rule).
        let mut list = crate::core::getinfo::util_getinfo(&[static_info()], version, hints)?;
        let hint_mr = hints.map(|h| h.domain_attr.mr_mode);
        for i in &mut list {
            if flags & FI_SOURCE != 0 {
                i.src_addr = Some(resolve_addr(node, service));
            } else {
                if i.dest_addr.is_none() && (node.is_some() || service.is_some()) {
                    i.dest_addr = Some(resolve_addr(node, service));
                }
                if let Some(h) = hints.and_then(|h| h.src_addr.clone()) {
                    i.src_addr = Some(h);
                }
                if i.src_addr.is_none() {
                    i.src_addr = Some(resolve_addr(None, None));
                }
            }
            if let Some(h) = hints.and_then(|h| h.dest_addr.clone())
                && i.dest_addr.is_none()
            {
                i.dest_addr = Some(h);
            }
            // Virtual-address RMA when the application accepts it (or did not say).
            if hint_mr.is_none_or(|m| m & FI_MR_VIRT_ADDR as i32 != 0)
                && version >= fi_version(1, 5)
            {
                i.domain_attr.mr_mode |= FI_MR_VIRT_ADDR as i32;
            }
        }
        Ok(list)
    }
}

impl Provider for ShmProvider {
    fn fabric(&self, attr: &FabricAttr) -> Result<Arc<dyn Fabric>> {
        if attr.name.as_deref().is_some_and(|n| n != "shm") {
            return Err(Errno::NODEV);
        }
        clean_stale_regions();
        Ok(Arc::new(ShmFabric))
    }
}

pub struct ShmFabric;

impl Fabric for ShmFabric {
    fn domain(&self, info: &Info) -> Result<Arc<dyn Domain>> {
        Ok(ShmProvider::open_domain(info)?)
    }

    fn name(&self) -> &str {
        "shm"
    }
}

impl ShmProvider {
    /// A domain for `info` (mr_mode decides addressing and keys).
    pub fn open_domain(info: &Info) -> Result<Arc<ShmDomain>> {
        if info.domain_attr.name.as_deref().is_some_and(|n| n != "shm") {
            return Err(Errno::NODEV);
        }
        let mr_mode = info.domain_attr.mr_mode;
        // shm runs no thread of its own: progress is the application's calls.
        let serialized = info.domain_attr.threading == FI_THREAD_DOMAIN;
        Ok(Self::domain_with(
            Arc::new(MrMap::new(mr_mode, 8)),
            mr_mode,
            serialized,
        ))
    }

    /// The domain of the shm endpoints that carry another provider's local peers (peer mode):
    /// it checks remote accesses against that provider's registrations, so the keys the
    /// application exchanged work through either path. `serialized` when that provider's
    /// domain is: its application serializes its calls and no thread of the provider's calls
    /// into these endpoints.
    pub fn peer_domain(mr_map: Arc<MrMap>, mr_mode: i32, serialized: bool) -> Arc<ShmDomain> {
        Self::domain_with(mr_map, mr_mode, serialized)
    }

    fn domain_with(mr_map: Arc<MrMap>, mr_mode: i32, serialized: bool) -> Arc<ShmDomain> {
        Arc::new_cyclic(|me| ShmDomain {
            me: me.clone(),
            mr_map,
            mr_mode,
            serialized,
        })
    }
}

pub struct ShmDomain {
    me: std::sync::Weak<ShmDomain>,
    mr_map: Arc<MrMap>,
    mr_mode: i32,
    /// `Domain::serialized`: the application asked for `FI_THREAD_DOMAIN`.
    pub(crate) serialized: bool,
}

impl ShmDomain {
    pub fn open_endpoint(&self, info: &Info) -> Result<Arc<ShmEndpoint>> {
        ShmEndpoint::new(self.me.upgrade().ok_or(Errno::OPBADSTATE)?, info)
    }

    /// An endpoint in peer mode (see [`PeerMode`]).
    pub fn open_peer_endpoint(
        &self,
        caps: u64,
        op_flags: (u64, u64),
        name: String,
        rxq: crate::util::rxq::SharedRxQueue<Pending>,
        mode: PeerMode,
        inject_limit: usize,
    ) -> Result<Arc<ShmEndpoint>> {
        let me = self.me.upgrade().ok_or(Errno::OPBADSTATE)?;
        Ok(ShmEndpoint::new_peer(
            me,
            caps,
            op_flags,
            name,
            rxq,
            mode,
            inject_limit,
        ))
    }
}

impl Domain for ShmDomain {
    fn endpoint(&self, info: &Info) -> Result<Arc<dyn Endpoint>> {
        Ok(self.open_endpoint(info)?)
    }

    fn serialized(&self) -> bool {
        self.serialized
    }

    fn av_open(&self, attr: &AvAttr) -> Result<Arc<Av>> {
        Av::new(attr, Arc::new(ShmAddr))
    }

    fn mr_reg(&self, req: &MrRequest) -> Result<Arc<Mr>> {
        if req.iov.len() > 4 {
            return Err(Errno::INVAL);
        }
        let mr = self.mr_map.register(req)?;
        if huge_pages_enabled() {
            crate::util::huge_pages::collapse_onto_huge_pages(&mr);
        }
        Ok(mr)
    }

    fn query_atomic(
        &self,
        datatype: u32,
        op: u32,
        kind: AtomicKind,
        flags: u64,
    ) -> Result<AtomicAttr> {
        if flags & !(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED) != 0 || flags & FI_TAGGED != 0
        {
            return Err(Errno::BADFLAGS);
        }
        let count = atomic_count(kind, datatype, op)?;
        let size = crate::util::atomic::datatype_size(datatype).ok_or(Errno::OPNOTSUPP)?;
        Ok(AtomicAttr { count, size })
    }

    fn mr_mode(&self) -> i32 {
        self.mr_mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_names_are_distinct_and_safe() {
        let a = region_name("fi_shm://12:0:3");
        assert!(a.starts_with("/fabric_shm_") && a.ends_with("_12:0:3"));
        let b = region_name("fi_shm://a/b");
        let c = region_name("fi_shm://a_b");
        assert_ne!(b, c);
        assert!(!b[1..].contains('/'));
    }

    /// Only a domain whose application serializes every call (`FI_THREAD_DOMAIN`) drops its
    /// queues' locked instructions; a peer domain does when the provider above it says so.
    #[test]
    fn only_thread_domain_domains_are_serialized() {
        for (threading, serialized) in [
            (FI_THREAD_DOMAIN, true),
            (FI_THREAD_SAFE, false),
            (FI_THREAD_COMPLETION, false),
            (FI_THREAD_ENDPOINT, false),
            (FI_THREAD_UNSPEC, false),
        ] {
            let mut info = Info::default();
            info.domain_attr.threading = threading;
            let d = ShmProvider::open_domain(&info).unwrap();
            assert_eq!(Domain::serialized(&*d), serialized, "threading {threading}");
        }
        for serialized in [false, true] {
            let peer = ShmProvider::peer_domain(Arc::new(MrMap::new(0, 8)), 0, serialized);
            assert_eq!(Domain::serialized(&*peer), serialized);
        }
    }

    #[test]
    fn getinfo_refuses_remote_communication() {
        let mut h = Info {
            caps: FI_MSG | FI_REMOTE_COMM,
            ..Default::default()
        };
        assert_eq!(
            SHM.getinfo(fi_version(1, 17), None, None, 0, Some(&h)),
            Err(Errno::NODATA)
        );
        h.caps = FI_MSG;
        let l = SHM
            .getinfo(fi_version(1, 17), None, None, 0, Some(&h))
            .unwrap();
        assert_eq!(l[0].addr_format, FI_ADDR_STR);
        assert!(l[0].src_addr.as_ref().unwrap().starts_with(b"fi_shm://"));
        let l = SHM
            .getinfo(fi_version(2, 6), Some("x"), Some("9"), FI_SOURCE, None)
            .unwrap();
        assert_eq!(l[0].src_addr.as_deref(), Some(&b"fi_ns://x:9\0"[..]));
    }
}
