//! `fi_getinfo` rules that do not depend on the provider (fi_getinfo(3), abi-reference §5):
//! [`util_getinfo`] matches a provider's static entries against hints and adjusts the survivors;
//! [`getinfo`] asks every provider, applies `FI_PROVIDER` and the name filters, and stamps the
//! results.

use super::info::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use super::log::{NameFilter, Subsys};
use super::provider::InfoProvider;
use super::{Errno, Result};
use crate::abi::consts::*;

// ---- capability groups (fi_getinfo(3): primary vs secondary capabilities) ----

const PRIMARY_TX_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_ATOMIC
    | FI_MULTICAST
    | FI_READ
    | FI_WRITE
    | FI_SEND
    | FI_COLLECTIVE
    | FI_NAMED_RX_CTX
    | FI_HMEM;
const SECONDARY_TX_CAPS: u64 = FI_TRIGGER | FI_FENCE | FI_RMA_PMEM;
const PRIMARY_RX_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_ATOMIC
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RECV
    | FI_DIRECTED_RECV
    | FI_COLLECTIVE
    | FI_HMEM;
const SECONDARY_RX_CAPS: u64 = FI_MULTI_RECV | FI_TRIGGER | FI_RMA_PMEM | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR;
const DOMAIN_PRIMARY_CAPS: u64 = FI_AV_USER_ID | FI_PEER;
const DOMAIN_SECONDARY_CAPS: u64 = FI_SHARED_AV | FI_REMOTE_COMM | FI_LOCAL_COMM;
const PRIMARY_CAPS: u64 = PRIMARY_TX_CAPS | PRIMARY_RX_CAPS | DOMAIN_PRIMARY_CAPS;
const SECONDARY_CAPS: u64 = SECONDARY_TX_CAPS | SECONDARY_RX_CAPS | DOMAIN_SECONDARY_CAPS;
const MSG_DIRECTION_CAPS: u64 = FI_SEND | FI_RECV;
const RMA_DIRECTION_CAPS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Receive-side caps that older applications also put in tx attributes, and vice versa.
const IGNORED_TX_CAPS: u64 = FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RECV
    | FI_DIRECTED_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_RMA_EVENT
    | FI_SOURCE_ERR;
const IGNORED_RX_CAPS: u64 = FI_READ | FI_WRITE | FI_SEND | FI_FENCE | FI_MULTICAST | FI_NAMED_RX_CTX;
/// MR modes that only matter for a target of remote memory access.
const MR_MODE_RMA_TARGET: i32 = (FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_RMA_EVENT) as i32;
const MR_BASIC: i32 = FI_MR_BASIC as i32;
const MR_SCALABLE: i32 = FI_MR_SCALABLE as i32;

const PROV: &str = "core";

fn reject(why: std::fmt::Arguments<'_>) -> Result<()> {
    crate::fi_info!(PROV, Subsys::Core, "{why}");
    Err(Errno::NODATA)
}

macro_rules! require {
    ($cond:expr, $($why:tt)*) => {
        if !$cond {
            return reject(format_args!($($why)*));
        }
    };
}

// ---- ranks ----

/// Threading models by parallelism (2.x ranking; lower = more parallel). `None`: unknown.
fn thread_level(t: u32, api_version: u32) -> Option<u8> {
    if api_version < fi_version(2, 0) {
        // 1.x ranked FI_THREAD_FID and FI_THREAD_ENDPOINT between SAFE and COMPLETION; 2.x
        // dropped them. Binaries built for 1.x (Open MPI 4.1, Debian's tools) still pass them.
        return Some(match t {
            FI_THREAD_SAFE => 1,
            FI_THREAD_FID => 2,
            FI_THREAD_ENDPOINT => 3,
            FI_THREAD_COMPLETION => 4,
            FI_THREAD_DOMAIN => 5,
            FI_THREAD_UNSPEC => 6,
            _ => return None,
        });
    }
    Some(match t {
        FI_THREAD_SAFE => 1,
        FI_THREAD_COMPLETION => 2,
        FI_THREAD_DOMAIN => 3,
        FI_THREAD_UNSPEC => 4,
        _ => return None,
    })
}

fn progress_level(p: u32) -> Option<u8> {
    Some(match p {
        FI_PROGRESS_AUTO => 1,
        FI_PROGRESS_MANUAL => 2,
        FI_PROGRESS_CONTROL_UNIFIED => 3,
        FI_PROGRESS_UNSPEC => 4,
        _ => return None,
    })
}

fn rm_level(r: u32) -> Option<u8> {
    Some(match r {
        FI_RM_ENABLED => 1,
        FI_RM_DISABLED => 2,
        FI_RM_UNSPEC => 3,
        _ => return None,
    })
}

/// `hint` may be asked of a provider offering `prov` when it is at least as restrictive.
fn rank_ok(hint: Option<u8>, prov: Option<u8>) -> bool {
    match (hint, prov) {
        (Some(h), Some(p)) => h >= p,
        _ => false,
    }
}

// ---- addresses ----

fn is_sockaddr(f: u32) -> bool {
    matches!(f, FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 | FI_SOCKADDR_IB)
}
fn is_ipaddr(f: u32) -> bool {
    matches!(f, FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6)
}

/// Whether an application asking for `user` can use a provider whose format is `prov`.
pub fn valid_addr_format(prov: u32, user: u32) -> bool {
    if user == FI_FORMAT_UNSPEC || prov == FI_FORMAT_UNSPEC {
        return true;
    }
    match prov {
        FI_SOCKADDR => is_sockaddr(user),
        FI_SOCKADDR_IP => is_ipaddr(user),
        FI_SOCKADDR_IN => matches!(user, FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN),
        FI_SOCKADDR_IN6 => matches!(user, FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN6),
        FI_SOCKADDR_IB => matches!(user, FI_SOCKADDR | FI_SOCKADDR_IB),
        _ => prov == user,
    }
}

// ---- memory registration modes ----

/// Whether `caps` make the endpoint a target of remote memory access.
fn rma_target_allowed(caps: u64) -> bool {
    if caps & (FI_RMA | FI_ATOMIC) == 0 {
        return false;
    }
    if caps & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
        return true;
    }
    caps & (FI_READ | FI_WRITE) == 0
}

/// The provider's mr_mode bits that matter for `caps` (no HMEM bit without FI_HMEM, no RMA-target
/// bits without remote access), without the legacy BASIC/SCALABLE bits.
fn cap_mr_mode(caps: u64, mut mr_mode: i32) -> i32 {
    if caps & FI_HMEM == 0 {
        mr_mode &= !(FI_MR_HMEM as i32);
    }
    if !rma_target_allowed(caps) {
        if mr_mode & (FI_MR_LOCAL | FI_MR_HMEM) as i32 == 0 {
            return 0;
        }
        mr_mode &= !MR_MODE_RMA_TARGET;
    }
    mr_mode & !(MR_BASIC | MR_SCALABLE)
}

/// fi_mr(3): the provider's required modes must be in the hint (1.5+), or for older callers the
/// hint is the old enum (UNSPEC/BASIC/SCALABLE).
fn check_mr_mode(api_version: u32, prov_mode: i32, user: &Info) -> Result<()> {
    let user_mode = user.domain_attr.mr_mode;
    require!(
        prov_mode & FI_MR_LOCAL as i32 == 0 || user.mode & FI_LOCAL_MR != 0 || user_mode & FI_MR_LOCAL as i32 != 0,
        "provider needs FI_MR_LOCAL"
    );
    if api_version < fi_version(1, 5) {
        let ok = match user_mode {
            0 => prov_mode & (MR_BASIC | MR_SCALABLE) != 0,
            MR_BASIC => prov_mode & MR_BASIC != 0,
            MR_SCALABLE => prov_mode & MR_SCALABLE != 0,
            _ => false,
        };
        require!(ok, "memory registration mode {user_mode:#x} not offered (api < 1.5)");
    } else if user_mode & MR_BASIC != 0 {
        require!(user_mode & !MR_BASIC == 0 && prov_mode & MR_BASIC != 0, "FI_MR_BASIC not offered");
    } else if user_mode & MR_SCALABLE != 0 {
        require!(user_mode & !MR_SCALABLE == 0 && prov_mode & MR_SCALABLE != 0, "FI_MR_SCALABLE not offered");
    } else {
        let needed = cap_mr_mode(user.caps, prov_mode);
        require!(user_mode == 0 || user_mode & needed == needed, "mr_mode {user_mode:#x} lacks {needed:#x}");
    }
    Ok(())
}

/// The largest tag a `mem_tag_format` can carry.
fn max_tag(format: u64) -> u64 {
    if format == 0 { 0 } else { u64::MAX >> format.leading_zeros() }
}

// ---- per-attribute checks (ofi_check_info and friends) ----

fn check_fabric(prov: &FabricAttr, user: &FabricAttr) -> Result<()> {
    if let (Some(p), Some(u)) = (&prov.prov_name, &user.prov_name) {
        require!(u.to_ascii_lowercase().contains(&p.to_ascii_lowercase()), "provider {u} requested");
    }
    require!(user.prov_version <= prov.prov_version, "provider version {:#x} too new", user.prov_version);
    require!(user.api_version >= prov.api_version, "api version {:#x} too old", user.api_version);
    Ok(())
}

fn check_domain(api_version: u32, prov: &DomainAttr, user_info: &Info) -> Result<()> {
    let user = &user_info.domain_attr;
    require!(
        rank_ok(thread_level(user.threading, api_version), thread_level(prov.threading, api_version)),
        "threading {} not offered",
        user.threading
    );
    require!(
        rank_ok(progress_level(user.progress), progress_level(prov.progress)),
        "progress {} not offered",
        user.progress
    );
    require!(rank_ok(rm_level(user.resource_mgmt), rm_level(prov.resource_mgmt)), "resource management not offered");
    require!(
        prov.av_type == FI_AV_UNSPEC || user.av_type == FI_AV_UNSPEC || prov.av_type == user.av_type,
        "av_type {} not offered",
        user.av_type
    );
    require!(user.cq_data_size <= prov.cq_data_size, "cq_data_size {} too large", user.cq_data_size);
    check_mr_mode(api_version, prov.mr_mode, user_info)?;
    if api_version < fi_version(1, 5) {
        return Ok(());
    }
    require!(user.cntr_cnt <= prov.cntr_cnt, "cntr_cnt too large");
    require!(user.mr_iov_limit <= prov.mr_iov_limit, "mr_iov_limit too large");
    require!(user.caps & !prov.caps == 0, "domain caps {:#x} not offered", user.caps & !prov.caps);
    require!(user.mode & prov.mode == prov.mode, "required domain mode missing");
    require!(user.max_err_data <= prov.max_err_data, "max_err_data too large");
    require!(user.mr_cnt <= prov.mr_cnt, "mr_cnt too large");
    let key_len = user.auth_key.as_ref().map_or(0, Vec::len);
    require!(key_len == 0, "authorization keys are not offered");
    if api_version >= fi_version(1, 20) {
        require!(user.max_ep_auth_key <= prov.max_ep_auth_key, "max_ep_auth_key too large");
    }
    if api_version >= fi_version(2, 5) {
        require!(prov.max_cntr_value == 0 || user.max_cntr_value <= prov.max_cntr_value, "max_cntr_value too large");
        require!(
            prov.max_err_cntr_value == 0 || user.max_err_cntr_value <= prov.max_err_cntr_value,
            "max_err_cntr_value too large"
        );
    }
    Ok(())
}

fn check_ep_type(prov: &EpAttr, user: &EpAttr) -> Result<()> {
    require!(
        user.type_ == FI_EP_UNSPEC || prov.type_ == FI_EP_UNSPEC || user.type_ == prov.type_,
        "endpoint type {} not offered",
        user.type_
    );
    Ok(())
}

fn check_ep(prov_info: &Info, user_info: &Info) -> Result<()> {
    let (prov, user) = (&prov_info.ep_attr, &user_info.ep_attr);
    let dom = &prov_info.domain_attr;
    check_ep_type(prov, user)?;
    require!(
        user.protocol == FI_PROTO_UNSPEC || user.protocol == prov.protocol,
        "protocol {} not offered",
        user.protocol
    );
    require!(user.protocol_version <= prov.protocol_version, "protocol version too new");
    require!(user.max_msg_size <= prov.max_msg_size, "max_msg_size too large");
    if user.tx_ctx_cnt == FI_SHARED_CONTEXT {
        require!(dom.max_ep_stx_ctx != 0, "shared tx contexts not offered");
    } else {
        require!(user.tx_ctx_cnt <= dom.max_ep_tx_ctx, "tx_ctx_cnt too large");
    }
    if user.rx_ctx_cnt == FI_SHARED_CONTEXT {
        require!(dom.max_ep_srx_ctx != 0, "shared rx contexts not offered");
    } else {
        require!(user.rx_ctx_cnt <= dom.max_ep_rx_ctx, "rx_ctx_cnt too large");
    }
    if user_info.caps & (FI_RMA | FI_ATOMIC) != 0 {
        require!(user.max_order_raw_size <= prov.max_order_raw_size, "max_order_raw_size too large");
        require!(user.max_order_war_size <= prov.max_order_war_size, "max_order_war_size too large");
        require!(user.max_order_waw_size <= prov.max_order_waw_size, "max_order_waw_size too large");
    }
    require!(user.auth_key.as_ref().is_none_or(Vec::is_empty), "authorization keys are not offered");
    if user_info.caps & FI_TAGGED != 0 && user.mem_tag_format != 0 {
        require!(max_tag(user.mem_tag_format) <= max_tag(prov.mem_tag_format), "tag format too wide");
    }
    Ok(())
}

fn check_rx(prov: &RxAttr, user: &RxAttr, info_mode: u64) -> Result<()> {
    require!((user.caps & !IGNORED_RX_CAPS) & !prov.caps == 0, "rx caps {:#x} not offered", user.caps & !prov.caps);
    let mode = if user.mode != 0 { user.mode } else { info_mode };
    require!(mode & prov.mode == prov.mode, "required rx mode missing");
    require!(user.op_flags & !prov.op_flags == 0, "rx op_flags not offered");
    require!(user.msg_order & !prov.msg_order == 0, "rx msg_order not offered");
    // 2.x: comp_order and total_buffered_recv are gone; a hint must leave them 0.
    require!(user.comp_order == 0, "rx comp_order is not supported");
    require!(user.total_buffered_recv == 0, "total_buffered_recv is not supported");
    require!(user.size <= prov.size, "rx size too large");
    require!(user.iov_limit <= prov.iov_limit, "rx iov_limit too large");
    Ok(())
}

fn check_tx(prov: &TxAttr, user: &TxAttr, info_mode: u64) -> Result<()> {
    require!((user.caps & !IGNORED_TX_CAPS) & !prov.caps == 0, "tx caps {:#x} not offered", user.caps & !prov.caps);
    let mode = if user.mode != 0 { user.mode } else { info_mode };
    require!(mode & prov.mode == prov.mode, "required tx mode missing");
    require!(user.op_flags & !prov.op_flags == 0, "tx op_flags not offered");
    require!(user.msg_order & !prov.msg_order == 0, "tx msg_order not offered");
    require!(user.comp_order == 0, "tx comp_order is not supported");
    require!(user.inject_size <= prov.inject_size, "inject_size too large");
    require!(user.size <= prov.size, "tx size too large");
    require!(user.iov_limit <= prov.iov_limit, "tx iov_limit too large");
    require!(user.rma_iov_limit <= prov.rma_iov_limit, "rma_iov_limit too large");
    Ok(())
}

/// Whether a provider entry satisfies the hints (upstream's `ofi_check_info`).
pub fn check_info(prov: &Info, api_version: u32, user: &Info) -> Result<()> {
    check_ep_type(&prov.ep_attr, &user.ep_attr)?;
    require!(user.caps & !prov.caps == 0, "caps {:#x} not offered", user.caps & !prov.caps);
    // A provider that needs FI_MR_LOCAL needs the old FI_LOCAL_MR mode bit from callers that do
    // not speak mr_mode bits.
    let mut prov_mode = prov.mode;
    if (api_version < fi_version(1, 5) || user.domain_attr.mr_mode & FI_MR_LOCAL as i32 == 0)
        && prov.domain_attr.mr_mode & FI_MR_LOCAL as i32 != 0
    {
        prov_mode |= FI_LOCAL_MR;
    }
    require!(user.mode & prov_mode == prov_mode, "required mode {:#x} missing", prov_mode & !user.mode);
    require!(valid_addr_format(prov.addr_format, user.addr_format), "address format {} not offered", user.addr_format);
    check_fabric(&prov.fabric_attr, &user.fabric_attr)?;
    check_domain(api_version, &prov.domain_attr, user)?;
    check_ep(prov, user)?;
    check_rx(&prov.rx_attr, &user.rx_attr, user.mode)?;
    check_tx(&prov.tx_attr, &user.tx_attr, user.mode)?;
    Ok(())
}

// ---- adjusting a matching entry (ofi_alter_info) ----

/// Primary caps from the hint (or the provider's when the hint has none), secondary caps from
/// the provider, FI_SOURCE only if asked, and direction bits filled in.
fn get_caps(info_caps: u64, hint_caps: u64, attr_caps: u64) -> u64 {
    let mut caps = if hint_caps == 0 {
        (info_caps & attr_caps & PRIMARY_CAPS) | (attr_caps & SECONDARY_CAPS)
    } else {
        let c = (hint_caps & PRIMARY_CAPS) | (attr_caps & SECONDARY_CAPS);
        (c & !FI_SOURCE) | (hint_caps & FI_SOURCE)
    };
    if caps & (FI_MSG | FI_TAGGED) != 0 && caps & MSG_DIRECTION_CAPS == 0 {
        caps |= attr_caps & MSG_DIRECTION_CAPS;
    }
    if caps & (FI_RMA | FI_ATOMIC) != 0 && caps & RMA_DIRECTION_CAPS == 0 {
        caps |= attr_caps & RMA_DIRECTION_CAPS;
    }
    caps
}

/// The caps of a returned entry: remote access is dropped when the caller did not accept the
/// registration modes a target needs.
fn info_caps(prov: &Info, user: Option<&Info>, api_version: u32) -> u64 {
    let Some(user) = user else { return prov.caps };
    let caps = get_caps(prov.caps, user.caps, prov.caps);
    let prov_mode = prov.domain_attr.mr_mode;
    if !rma_target_allowed(caps) || prov_mode & MR_MODE_RMA_TARGET == 0 {
        return caps;
    }
    let user_mode = user.domain_attr.mr_mode;
    if (api_version < fi_version(1, 5) && user_mode == 0)
        || user_mode == MR_BASIC
        || (user_mode & prov_mode & MR_MODE_RMA_TARGET) == (prov_mode & MR_MODE_RMA_TARGET)
    {
        return caps;
    }
    caps & !(FI_REMOTE_READ | FI_REMOTE_WRITE)
}

/// Adjusts a provider entry to the hints (upstream's `ofi_alter_info`).
pub fn alter_info(info: &mut Info, hints: Option<&Info>, api_version: u32) {
    info.caps = info_caps(info, hints, api_version);
    let hint_mr_mode = hints.map_or(0, |h| h.domain_attr.mr_mode);
    if info.domain_attr.mr_mode & FI_MR_LOCAL as i32 != 0
        && (api_version < fi_version(1, 5) || hint_mr_mode & (MR_BASIC | MR_SCALABLE) != 0)
    {
        info.mode |= FI_LOCAL_MR;
    }
    if let Some(h) = hints {
        info.handle = h.handle;
    }

    let d = &mut info.domain_attr;
    if hint_mr_mode & (MR_BASIC | MR_SCALABLE) != 0 {
        d.mr_mode = hint_mr_mode;
    } else if api_version < fi_version(1, 5) {
        d.mr_mode = if d.mr_mode != 0 && d.mr_mode != MR_SCALABLE { MR_BASIC } else { MR_SCALABLE };
    } else {
        d.mr_mode &= !(MR_BASIC | MR_SCALABLE);
        if hints.is_some() && hint_mr_mode & d.mr_mode != d.mr_mode {
            d.mr_mode = cap_mr_mode(info.caps, d.mr_mode & hint_mr_mode);
        }
    }
    d.caps = get_caps(info.caps, hints.map_or(0, |h| h.domain_attr.caps), d.caps);
    if d.max_cntr_value == 0 {
        d.max_cntr_value = u64::MAX;
    }
    if d.max_err_cntr_value == 0 {
        d.max_err_cntr_value = u64::MAX;
    }
    info.tx_attr.caps = get_caps(info.caps, hints.map_or(0, |h| h.tx_attr.caps), info.tx_attr.caps);
    info.rx_attr.caps = get_caps(info.caps, hints.map_or(0, |h| h.rx_attr.caps), info.rx_attr.caps);
    let Some(h) = hints else { return };

    let hd = &h.domain_attr;
    if hd.threading != 0 {
        d.threading = hd.threading;
    }
    if hd.progress != 0 {
        d.progress = hd.progress;
        d.control_progress = hd.progress;
    }
    if hd.av_type != 0 {
        d.av_type = hd.av_type;
    }
    if hd.max_ep_auth_key != 0 {
        d.max_ep_auth_key = hd.max_ep_auth_key;
    }

    let (e, he) = (&mut info.ep_attr, &h.ep_attr);
    if info.caps & (FI_RMA | FI_ATOMIC) != 0 {
        if he.max_order_raw_size != 0 {
            e.max_order_raw_size = he.max_order_raw_size;
        }
        if he.max_order_war_size != 0 {
            e.max_order_war_size = he.max_order_war_size;
        }
        if he.max_order_waw_size != 0 {
            e.max_order_waw_size = he.max_order_waw_size;
        }
    }
    if he.tx_ctx_cnt != 0 {
        e.tx_ctx_cnt = he.tx_ctx_cnt;
    }
    if he.rx_ctx_cnt != 0 {
        e.rx_ctx_cnt = he.rx_ctx_cnt;
    }

    let (r, hr) = (&mut info.rx_attr, &h.rx_attr);
    r.op_flags = hr.op_flags;
    if hr.size != 0 {
        r.size = hr.size;
    }
    if hr.iov_limit != 0 {
        r.iov_limit = hr.iov_limit;
    }
    let (t, ht) = (&mut info.tx_attr, &h.tx_attr);
    t.op_flags = ht.op_flags;
    if ht.inject_size != 0 {
        t.inject_size = ht.inject_size;
    }
    if ht.size != 0 {
        t.size = ht.size;
    }
    if ht.iov_limit != 0 {
        t.iov_limit = ht.iov_limit;
    }
    if ht.rma_iov_limit != 0 {
        t.rma_iov_limit = ht.rma_iov_limit;
    }
}

/// What a provider calls with its static entries: the ones that satisfy `hints`, adjusted to
/// them. `NODATA` when none does.
pub fn util_getinfo(prov_infos: &[Info], api_version: u32, hints: Option<&Info>) -> Result<Vec<Info>> {
    let mut out = Vec::new();
    for p in prov_infos {
        if let Some(h) = hints
            && check_info(p, api_version, h).is_err()
        {
            continue;
        }
        let mut i = p.clone();
        alter_info(&mut i, hints, api_version);
        out.push(i);
    }
    if out.is_empty() { Err(Errno::NODATA) } else { Ok(out) }
}

// ---- across providers ----

/// `FI_PROVIDER`, read once per call (fi_provider(7)).
fn provider_filter() -> NameFilter {
    NameFilter::parse(std::env::var("FI_PROVIDER").ok().as_deref())
}

/// Whether `name` (possibly `util;core` layered) passes a positive or negative name list.
fn name_passes(filter: &NameFilter, name: &str) -> bool {
    if !filter.is_set() {
        return true;
    }
    let hit = filter.contains(name) || name.split(';').any(|part| filter.contains(part) && !name.contains(';'));
    hit != filter.is_negated()
}

/// Whether the hint's `prov_name` (a `;` list, `^name` excludes) admits provider `name`.
fn hint_admits(hint: &str, name: &str) -> bool {
    let mut wanted = false;
    let mut any_positive = false;
    for part in hint.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(excluded) = part.strip_prefix('^') {
            if excluded.eq_ignore_ascii_case(name) {
                return false;
            }
        } else {
            any_positive = true;
            wanted |= part.eq_ignore_ascii_case(name);
        }
    }
    wanted || !any_positive
}

/// fi_getinfo(3) over `providers` (in default order).
pub fn getinfo(
    providers: &[&dyn InfoProvider],
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&Info>,
) -> Result<Vec<Info>> {
    if version > FI_VERSION_CURRENT {
        return Err(Errno::NOSYS);
    }
    let visible = providers.iter().filter(|p| !p.hidden());
    if flags & FI_PROV_ATTR_ONLY != 0 {
        // fi_info -l: one entry per provider, whatever FI_PROVIDER says (as upstream).
        let out: Vec<Info> = visible
            .map(|p| {
                let mut i = Info::default();
                i.fabric_attr.prov_name = Some(p.name().to_string());
                i.fabric_attr.prov_version = p.version();
                i.fabric_attr.api_version = version;
                i
            })
            .collect();
        return if out.is_empty() { Err(Errno::NODATA) } else { Ok(out) };
    }
    if flags & FI_SOURCE != 0 && node.is_none() && service.is_none() {
        return Err(Errno::INVAL);
    }
    let filter = provider_filter();
    for unknown in filter
        .names()
        .iter()
        .filter(|n| !providers.iter().any(|p| n.split(';').any(|x| x.eq_ignore_ascii_case(p.name()))))
    {
        crate::fi_warn!(PROV, Subsys::Core, "provider {unknown} is unknown");
    }
    let mut out = Vec::new();
    for p in visible {
        if !name_passes(&filter, p.name()) {
            continue;
        }
        if let Some(h) = hints.and_then(|h| h.fabric_attr.prov_name.as_deref())
            && !hint_admits(h, p.name())
        {
            continue;
        }
        if let Some(h) = hints
            && h.fabric_attr.api_version > version
        {
            continue;
        }
        let list = match p.getinfo(version, node, service, flags, hints) {
            Ok(l) => l,
            Err(e) => {
                crate::fi_info!(PROV, Subsys::Core, "fi_getinfo: provider {} returned -{} ({e})", p.name(), e.0);
                continue;
            }
        };
        for mut i in list {
            if let Some(h) = hints {
                if let Some(d) = &h.domain_attr.name
                    && !i.domain_attr.name.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(d))
                {
                    continue;
                }
                if let Some(f) = &h.fabric_attr.name
                    && !i.fabric_attr.name.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(f))
                {
                    continue;
                }
            }
            i.fabric_attr.prov_name = Some(p.name().to_string());
            i.fabric_attr.prov_version = p.version();
            i.fabric_attr.api_version = version;
            out.push(i);
        }
    }
    if out.is_empty() { Err(Errno::NODATA) } else { Ok(out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry like an RDM provider's: SAFE/MANUAL, PROV_KEY|VIRT_ADDR|ALLOCATED plus legacy
    /// BASIC, FI_CONTEXT-free, tags, RMA and atomics.
    fn rdm() -> Info {
        let mut i = Info {
            caps: FI_MSG
                | FI_TAGGED
                | FI_RMA
                | FI_ATOMIC
                | FI_SEND
                | FI_RECV
                | FI_READ
                | FI_WRITE
                | FI_REMOTE_READ
                | FI_REMOTE_WRITE
                | FI_SOURCE
                | FI_MULTI_RECV
                | FI_DIRECTED_RECV
                | FI_LOCAL_COMM
                | FI_REMOTE_COMM,
            addr_format: FI_ADDR_EFA,
            ..Default::default()
        };
        i.tx_attr = TxAttr {
            caps: i.caps & (PRIMARY_TX_CAPS | SECONDARY_TX_CAPS),
            op_flags: FI_INJECT | FI_COMPLETION | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE,
            msg_order: FI_ORDER_SAS,
            inject_size: 4096,
            size: 1024,
            iov_limit: 4,
            rma_iov_limit: 1,
            ..Default::default()
        };
        i.rx_attr = RxAttr {
            caps: i.caps & (PRIMARY_RX_CAPS | SECONDARY_RX_CAPS),
            op_flags: FI_COMPLETION | FI_MULTI_RECV,
            msg_order: FI_ORDER_SAS,
            size: 1024,
            iov_limit: 4,
            ..Default::default()
        };
        i.ep_attr = EpAttr {
            type_: FI_EP_RDM,
            protocol: FI_PROTO_EFA,
            protocol_version: 4,
            max_msg_size: usize::MAX,
            mem_tag_format: 0xAAAA_AAAA_AAAA_AAAA,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            max_order_raw_size: 8000,
            max_order_war_size: 8000,
            max_order_waw_size: 8000,
            ..Default::default()
        };
        i.domain_attr = DomainAttr {
            name: Some("dev-rdm".into()),
            threading: FI_THREAD_SAFE,
            control_progress: FI_PROGRESS_MANUAL,
            progress: FI_PROGRESS_MANUAL,
            resource_mgmt: FI_RM_ENABLED,
            av_type: FI_AV_TABLE,
            mr_mode: (FI_MR_BASIC | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32,
            mr_key_size: 4,
            cq_data_size: 4,
            cq_cnt: 64,
            ep_cnt: 64,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            cntr_cnt: 64,
            mr_iov_limit: 1,
            caps: FI_LOCAL_COMM | FI_REMOTE_COMM,
            mr_cnt: 65536,
            ..Default::default()
        };
        i.fabric_attr = FabricAttr { name: Some("efa".into()), prov_name: Some("efa".into()), ..Default::default() };
        i
    }

    fn v(maj: u32, min: u32) -> u32 {
        fi_version(maj, min)
    }

    fn hints(f: impl FnOnce(&mut Info)) -> Info {
        let mut h = Info::default();
        f(&mut h);
        h
    }

    fn matches(api: u32, h: &Info) -> bool {
        util_getinfo(&[rdm()], api, Some(h)).is_ok()
    }

    #[test]
    fn no_hints_return_everything_adjusted() {
        let r = util_getinfo(&[rdm()], v(2, 6), None).unwrap();
        assert_eq!(r.len(), 1);
        // Legacy bits are stripped for 1.5+ callers; counters default to their maximum.
        assert_eq!(r[0].domain_attr.mr_mode, (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32);
        assert_eq!(r[0].domain_attr.max_cntr_value, u64::MAX);
        // Old callers get the old enum.
        let r = util_getinfo(&[rdm()], v(1, 4), None).unwrap();
        assert_eq!(r[0].domain_attr.mr_mode, MR_BASIC);
    }

    #[test]
    fn ep_type_caps_mode_and_format() {
        assert!(matches(v(2, 6), &hints(|h| h.ep_attr.type_ = FI_EP_RDM)));
        assert!(!matches(v(2, 6), &hints(|h| h.ep_attr.type_ = FI_EP_MSG)));
        assert!(matches(v(2, 6), &hints(|h| h.caps = FI_TAGGED | FI_RMA)));
        assert!(!matches(v(2, 6), &hints(|h| h.caps = FI_COLLECTIVE)));
        assert!(matches(v(2, 6), &hints(|h| h.addr_format = FI_ADDR_EFA)));
        assert!(!matches(v(2, 6), &hints(|h| h.addr_format = FI_SOCKADDR_IN)));
        let mut p = rdm();
        p.mode = FI_CONTEXT;
        assert!(util_getinfo(&[p.clone()], v(2, 6), Some(&hints(|_| {}))).is_err());
        assert!(util_getinfo(&[p], v(2, 6), Some(&hints(|h| h.mode = FI_CONTEXT | FI_CONTEXT2))).is_ok());
    }

    #[test]
    fn threading_progress_and_resource_ranks() {
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.threading = FI_THREAD_DOMAIN)));
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.threading = FI_THREAD_SAFE)));
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.threading = FI_THREAD_COMPLETION)));
        // 2.x dropped FID and ENDPOINT; 1.x callers may still ask for them.
        assert!(!matches(v(2, 6), &hints(|h| h.domain_attr.threading = FI_THREAD_ENDPOINT)));
        assert!(matches(v(1, 17), &hints(|h| h.domain_attr.threading = FI_THREAD_ENDPOINT)));
        assert!(matches(v(1, 17), &hints(|h| h.domain_attr.threading = FI_THREAD_FID)));
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.progress = FI_PROGRESS_MANUAL)));
        assert!(!matches(v(2, 6), &hints(|h| h.domain_attr.progress = FI_PROGRESS_AUTO)));
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.resource_mgmt = FI_RM_DISABLED)));
        assert!(!matches(v(2, 6), &hints(|h| h.domain_attr.av_type = FI_AV_MAP)));
        assert!(!matches(v(2, 6), &hints(|h| h.domain_attr.cq_data_size = 8)));
        let r = util_getinfo(&[rdm()], v(2, 6), Some(&hints(|h| h.domain_attr.threading = FI_THREAD_DOMAIN))).unwrap();
        assert_eq!(r[0].domain_attr.threading, FI_THREAD_DOMAIN);
    }

    #[test]
    fn mr_mode_rules() {
        // 1.5+: required bits must be in a non-zero hint; 0 accepts anything.
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.mr_mode = 0)));
        let all = (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL) as i32;
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.mr_mode = all)));
        assert!(!matches(
            v(2, 6),
            &hints(|h| {
                h.caps = FI_RMA;
                h.domain_attr.mr_mode = FI_MR_LOCAL as i32;
            })
        ));
        // Without remote access the RMA-target bits are not required.
        assert!(matches(
            v(2, 6),
            &hints(|h| {
                h.caps = FI_MSG;
                h.domain_attr.mr_mode = FI_MR_ALLOCATED as i32;
            })
        ));
        // Legacy modes: BASIC alone is accepted (provider lists it), SCALABLE is not.
        assert!(matches(v(2, 6), &hints(|h| h.domain_attr.mr_mode = MR_BASIC)));
        assert!(!matches(v(2, 6), &hints(|h| h.domain_attr.mr_mode = MR_SCALABLE)));
        assert!(!matches(v(2, 6), &hints(|h| h.domain_attr.mr_mode = MR_BASIC | FI_MR_LOCAL as i32)));
        assert!(matches(v(1, 4), &hints(|h| h.domain_attr.mr_mode = 0)));
        assert!(!matches(v(1, 4), &hints(|h| h.domain_attr.mr_mode = MR_SCALABLE)));
        // Without caps in the hint no RMA-target mode is required, and remote access is dropped
        // from the answer when the hint did not accept those modes.
        let r = util_getinfo(
            &[rdm()],
            v(2, 6),
            Some(&hints(|h| h.domain_attr.mr_mode = (FI_MR_LOCAL | FI_MR_ALLOCATED) as i32)),
        )
        .unwrap();
        assert_eq!(r[0].caps & (FI_REMOTE_READ | FI_REMOTE_WRITE), 0);
        let r = util_getinfo(
            &[rdm()],
            v(2, 6),
            Some(&hints(|h| {
                h.caps = FI_MSG | FI_RMA;
                h.domain_attr.mr_mode = all;
            })),
        )
        .unwrap();
        assert_ne!(r[0].caps & FI_REMOTE_WRITE, 0);
    }

    #[test]
    fn attribute_limits() {
        assert!(!matches(v(2, 6), &hints(|h| h.tx_attr.inject_size = 4097)));
        assert!(!matches(v(2, 6), &hints(|h| h.tx_attr.iov_limit = 5)));
        assert!(!matches(v(2, 6), &hints(|h| h.rx_attr.comp_order = FI_ORDER_STRICT)));
        assert!(!matches(v(2, 6), &hints(|h| h.rx_attr.total_buffered_recv = 1)));
        assert!(!matches(v(2, 6), &hints(|h| h.tx_attr.msg_order = FI_ORDER_RAW)));
        assert!(matches(v(2, 6), &hints(|h| h.tx_attr.msg_order = FI_ORDER_SAS)));
        assert!(!matches(v(2, 6), &hints(|h| h.ep_attr.protocol = FI_PROTO_SHM)));
        assert!(!matches(v(2, 6), &hints(|h| h.ep_attr.tx_ctx_cnt = 2)));
        assert!(!matches(v(2, 6), &hints(|h| h.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT)));
        let mut narrow = rdm();
        narrow.ep_attr.mem_tag_format = 0x0000_FFFF_FFFF_FFFF;
        let wide = hints(|h| {
            h.caps = FI_TAGGED;
            h.ep_attr.mem_tag_format = u64::MAX;
        });
        assert!(util_getinfo(&[narrow], v(2, 6), Some(&wide)).is_err());
        assert!(matches(v(2, 6), &wide));
        assert!(!matches(v(2, 6), &hints(|h| h.fabric_attr.prov_name = Some("shm".into()))));
        assert!(matches(v(2, 6), &hints(|h| h.fabric_attr.prov_name = Some("ofi_rxm;EFA".into()))));
        // Hinted limits replace the provider's.
        let r = util_getinfo(&[rdm()], v(2, 6), Some(&hints(|h| h.tx_attr.size = 16))).unwrap();
        assert_eq!(r[0].tx_attr.size, 16);
    }

    #[test]
    fn caps_follow_the_hint() {
        let r = util_getinfo(&[rdm()], v(2, 6), Some(&hints(|h| h.caps = FI_TAGGED))).unwrap();
        // Direction bits are filled in; FI_SOURCE only when asked; secondary caps stay.
        assert_eq!(r[0].caps & (FI_TAGGED | FI_SEND | FI_RECV), FI_TAGGED | FI_SEND | FI_RECV);
        assert_eq!(r[0].caps & (FI_MSG | FI_RMA | FI_SOURCE), 0);
        assert_ne!(r[0].caps & FI_MULTI_RECV, 0);
        let r = util_getinfo(&[rdm()], v(2, 6), Some(&hints(|h| h.caps = FI_MSG | FI_SOURCE))).unwrap();
        assert_ne!(r[0].caps & FI_SOURCE, 0);
    }

    struct Fake(&'static str, bool);
    impl InfoProvider for Fake {
        fn name(&self) -> &'static str {
            self.0
        }
        fn version(&self) -> u32 {
            fi_version(1, 0)
        }
        fn getinfo(
            &self,
            version: u32,
            _n: Option<&str>,
            _s: Option<&str>,
            _f: u64,
            h: Option<&Info>,
        ) -> Result<Vec<Info>> {
            let mut i = rdm();
            i.fabric_attr.prov_name = Some(self.0.into());
            i.domain_attr.name = Some(format!("{}-dom", self.0));
            util_getinfo(&[i], version, h)
        }
        fn hidden(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn provider_filters_and_stamps() {
        let (a, b, hidden) = (Fake("efa", false), Fake("shm", false), Fake("secret", true));
        let provs: [&dyn InfoProvider; 3] = [&a, &b, &hidden];
        let all = getinfo(&provs, v(1, 21), None, None, 0, None).unwrap();
        let names: Vec<_> = all.iter().map(|i| i.fabric_attr.prov_name.clone().unwrap()).collect();
        assert_eq!(names, ["efa", "shm"]);
        assert!(all.iter().all(|i| i.fabric_attr.api_version == v(1, 21) && i.fabric_attr.prov_version == v(1, 0)));
        let only =
            getinfo(&provs, v(1, 21), None, None, 0, Some(&hints(|h| h.fabric_attr.prov_name = Some("shm".into()))))
                .unwrap();
        assert_eq!(only.len(), 1);
        let dom =
            getinfo(&provs, v(1, 21), None, None, 0, Some(&hints(|h| h.domain_attr.name = Some("EFA-DOM".into()))))
                .unwrap();
        assert_eq!(dom[0].fabric_attr.prov_name.as_deref(), Some("efa"));
        assert_eq!(getinfo(&provs, v(2, 7), None, None, 0, None), Err(Errno::NOSYS));
        assert_eq!(getinfo(&provs, v(2, 6), None, None, FI_SOURCE, None), Err(Errno::INVAL));
        let attr_only = getinfo(&provs, v(2, 6), None, None, FI_PROV_ATTR_ONLY, None).unwrap();
        assert_eq!(attr_only.len(), 2);
        assert_eq!(
            getinfo(&provs, v(2, 6), None, None, 0, Some(&hints(|h| h.domain_attr.name = Some("none".into())))),
            Err(Errno::NODATA)
        );
    }

    #[test]
    fn name_lists() {
        let f = NameFilter::parse(Some("tcp"));
        assert!(name_passes(&f, "tcp"));
        assert!(!name_passes(&f, "shm"));
        let f = NameFilter::parse(Some("^shm"));
        assert!(name_passes(&f, "efa") && !name_passes(&f, "shm"));
        assert!(hint_admits("efa", "EFA"));
        assert!(hint_admits("ofi_rxm;efa", "efa"));
        assert!(!hint_admits("efa;^efa", "efa"));
        assert!(hint_admits("^shm", "efa"));
        assert!(!hint_admits("^shm", "shm"));
    }
}
