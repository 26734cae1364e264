//! `fi_getinfo` (fi_getinfo(3), abi-reference §5).
//!
//! Two halves:
//! - [`util_getinfo`]: what a provider calls on its static entries — the hint matching of
//!   upstream's utility code (§5 items 2–3) and the adjustment of the entries that match (item 4).
//! - [`getinfo`]: the provider-independent part — version check, `FI_PROV_ATTR_ONLY`, which
//!   providers are asked (`FI_PROVIDER`, hints `prov_name`), stamping of `prov_name`,
//!   `prov_version`, `api_version`, name filters and order.
//!
//! ## Deliberate choices for programs written against libfabric 1.x
//!
//! Upstream 2.x changed three hint rules; programs built against 1.x (Debian's 1.17: its
//! `fi_info`, `fi_pingpong`, Open MPI 4.1; they pass their API version, 1.x, to `fi_getinfo`)
//! may still use the old ones. The rule applied follows the API version the caller passes, so
//! each program gets the behaviour of the library it was written for:
//! - `threading`: below API 2.0 the 1.x ranking SAFE < FID < ENDPOINT < COMPLETION < DOMAIN <
//!   UNSPEC applies, so `FI_THREAD_FID`/`FI_THREAD_ENDPOINT` hints match `FI_THREAD_SAFE`
//!   providers (and are echoed in the answer) as they did in 1.x; from 2.0 on they match
//!   nothing, as in upstream 2.x (fi_domain(3): deprecated).
//! - `comp_order` and `total_buffered_recv`: below API 2.0 a hint must be a subset of / not
//!   larger than what the provider states (1.x); from 2.0 on a hint must be 0, and the answer
//!   carries 0 (fi_endpoint(3): "provided for version 1 compatibility and should be set to 0").
//! - `control_progress`: from 2.0 on only `progress` is compared (2.x); below 2.0 a provider
//!   that states a control progress model is also compared on it.
//!
//! Capability bits 45, 46 and 48 meant other things before 2.0 (abi-reference §3): callers below
//! API 2.0 are neither offered nor granted them.

use std::borrow::Cow;
use std::sync::{Once, OnceLock};

use super::info::{DomainAttr, EpAttr, FabricAttr, Info};
use super::log::{Level, NameFilter, Subsys};
use super::provider::InfoProvider;
use super::{Errno, Result, params};
use crate::abi::compat::CAPS_REUSED_IN_2_0;
use crate::abi::consts::*;

// ---- capability sets (fi_getinfo(3) "CAPABILITIES": primary and secondary caps) ----

const MSG_DIRECTION_CAPS: u64 = FI_SEND | FI_RECV;
const RMA_DIRECTION_CAPS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

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
const SECONDARY_RX_CAPS: u64 =
    FI_MULTI_RECV | FI_TRIGGER | FI_RMA_PMEM | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR;
const DOMAIN_PRIMARY_CAPS: u64 = FI_AV_USER_ID | FI_PEER;
const DOMAIN_SECONDARY_CAPS: u64 = FI_SHARED_AV | FI_REMOTE_COMM | FI_LOCAL_COMM;

const PRIMARY_CAPS: u64 = PRIMARY_TX_CAPS | PRIMARY_RX_CAPS | DOMAIN_PRIMARY_CAPS;
const SECONDARY_CAPS: u64 = SECONDARY_TX_CAPS | SECONDARY_RX_CAPS | DOMAIN_SECONDARY_CAPS;

/// Receive-side caps that a transmit attribute may carry without asking anything of it.
const IGNORED_TX_CAPS: u64 = FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RECV
    | FI_DIRECTED_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_RMA_EVENT
    | FI_SOURCE_ERR;
/// Transmit-side caps that a receive attribute may carry without asking anything of it.
const IGNORED_RX_CAPS: u64 =
    FI_READ | FI_WRITE | FI_SEND | FI_FENCE | FI_MULTICAST | FI_NAMED_RX_CTX;

/// fi_domain(3) legacy registration modes, as bits of `mr_mode`.
const MR_BASIC: i32 = FI_MR_BASIC as i32;
const MR_SCALABLE: i32 = FI_MR_SCALABLE as i32;
const MR_LEGACY: i32 = MR_BASIC | MR_SCALABLE;
const MR_LOCAL: i32 = FI_MR_LOCAL as i32;
const MR_HMEM: i32 = FI_MR_HMEM as i32;
/// The `mr_mode` bits that only matter for the target of remote RMA.
const MR_RMA_TARGET: i32 = (FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_RMA_EVENT) as i32;

const V1_5: u32 = fi_version(1, 5);
const V1_20: u32 = fi_version(1, 20);
const V2_0: u32 = fi_version(2, 0);
const V2_5: u32 = fi_version(2, 5);

/// Whether `caps` make the endpoint a target of remote RMA or atomics.
fn rma_target_allowed(caps: u64) -> bool {
    if caps & (FI_RMA | FI_ATOMIC) == 0 {
        return false;
    }
    caps & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 || caps & (FI_READ | FI_WRITE) == 0
}

/// The largest tag of a `mem_tag_format`: as many bits as its highest set bit.
fn max_tag(format: u64) -> u64 {
    match format {
        0 => 0,
        f => u64::MAX >> f.leading_zeros(),
    }
}

// ---- ranks of the domain models (higher: asks less of the provider) ----

fn thread_rank(t: u32, api: u32) -> i32 {
    if api < V2_0 {
        match t {
            FI_THREAD_SAFE => 1,
            FI_THREAD_FID => 2,
            FI_THREAD_ENDPOINT => 3,
            FI_THREAD_COMPLETION => 4,
            FI_THREAD_DOMAIN => 5,
            FI_THREAD_UNSPEC => 6,
            _ => -1,
        }
    } else {
        match t {
            FI_THREAD_SAFE => 1,
            FI_THREAD_COMPLETION => 2,
            FI_THREAD_DOMAIN => 3,
            FI_THREAD_UNSPEC => 4,
            _ => -1,
        }
    }
}

fn progress_rank(p: u32) -> i32 {
    match p {
        FI_PROGRESS_AUTO => 1,
        FI_PROGRESS_MANUAL => 2,
        FI_PROGRESS_CONTROL_UNIFIED => 3,
        FI_PROGRESS_UNSPEC => 4,
        _ => -1,
    }
}

fn rm_rank(r: u32) -> i32 {
    match r {
        FI_RM_ENABLED => 1,
        FI_RM_DISABLED => 2,
        FI_RM_UNSPEC => 3,
        _ => -1,
    }
}

// ---- address formats (fi_getinfo(3) addr_format: FI_SOCKADDR and FI_SOCKADDR_IP are families) ----

fn is_sockaddr(f: u32) -> bool {
    matches!(
        f,
        FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 | FI_SOCKADDR_IB
    )
}

fn is_ipaddr(f: u32) -> bool {
    matches!(
        f,
        FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6
    )
}

/// Whether a provider entry of format `prov` can serve a request for format `user`.
pub fn addr_format_ok(prov: u32, user: u32) -> bool {
    if prov == FI_FORMAT_UNSPEC || user == FI_FORMAT_UNSPEC {
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

// ---- matching (abi-reference §5 items 2 and 3) ----

/// Why an entry does not match (logged at info level).
type Check = core::result::Result<(), &'static str>;

fn require(ok: bool, why: &'static str) -> Check {
    if ok { Ok(()) } else { Err(why) }
}

fn subset(want: u64, have: u64) -> bool {
    want & !have == 0
}

/// The mode bits the provider entry requires of this caller: its `mode`, plus `FI_LOCAL_MR` when
/// it needs local registration and the caller cannot say so with `FI_MR_LOCAL` (API < 1.5, or
/// hints without it).
fn required_mode(api: u32, user: &Info, prov: &Info) -> u64 {
    if (api < V1_5 || user.domain_attr.mr_mode & MR_LOCAL == 0)
        && prov.domain_attr.mr_mode & MR_LOCAL != 0
    {
        prov.mode | FI_LOCAL_MR
    } else {
        prov.mode
    }
}

/// The registration modes the provider needs, less those the requested caps make irrelevant
/// (`FI_MR_HMEM` without `FI_HMEM`; the RMA-target bits without remote RMA).
fn mr_mode_for_caps(caps: u64, mut mode: i32) -> i32 {
    if caps & FI_HMEM == 0 {
        mode &= !MR_HMEM;
    }
    if !rma_target_allowed(caps) {
        if mode & (MR_LOCAL | MR_HMEM) == 0 {
            return 0;
        }
        mode &= !MR_RMA_TARGET;
    }
    mode & !MR_LEGACY
}

/// fi_domain(3) "MR Modes" (abi-reference §5 item 3).
fn check_mr_mode(api: u32, prov_mode: i32, user: &Info) -> Check {
    let user_mode = user.domain_attr.mr_mode;
    require(
        prov_mode & MR_LOCAL == 0 || user.mode & FI_LOCAL_MR != 0 || user_mode & MR_LOCAL != 0,
        "provider needs local registration",
    )?;
    let ok = if api < V1_5 {
        // Before 1.5 mr_mode was an enum: UNSPEC, BASIC or SCALABLE.
        match user_mode {
            0 => prov_mode & MR_LEGACY != 0,
            MR_BASIC => prov_mode & MR_BASIC != 0,
            MR_SCALABLE => prov_mode & MR_SCALABLE != 0,
            _ => false,
        }
    } else if user_mode & MR_BASIC != 0 {
        user_mode == MR_BASIC && prov_mode & MR_BASIC != 0
    } else if user_mode & MR_SCALABLE != 0 {
        user_mode == MR_SCALABLE && prov_mode & MR_SCALABLE != 0
    } else {
        let needed = mr_mode_for_caps(user.caps, prov_mode);
        user_mode == 0 || user_mode & needed == needed
    };
    require(ok, "memory registration mode not supported")
}

fn check_fabric_attr(prov: &FabricAttr, user: &FabricAttr) -> Check {
    if let (Some(p), Some(u)) = (&prov.prov_name, &user.prov_name) {
        require(
            u.to_ascii_lowercase().contains(&p.to_ascii_lowercase()),
            "other provider requested",
        )?;
    }
    // An entry that states no version does not constrain it.
    require(
        prov.prov_version == 0 || user.prov_version <= prov.prov_version,
        "provider version too old",
    )?;
    require(user.api_version >= prov.api_version, "api version too old")
}

fn check_domain_attr(api: u32, prov: &DomainAttr, user_info: &Info) -> Check {
    let user = &user_info.domain_attr;
    require(
        thread_rank(user.threading, api) >= thread_rank(prov.threading, api),
        "threading model",
    )?;
    require(
        progress_rank(user.progress) >= progress_rank(prov.progress),
        "progress model",
    )?;
    if api < V2_0 && prov.control_progress != FI_PROGRESS_UNSPEC {
        require(
            progress_rank(user.control_progress) >= progress_rank(prov.control_progress),
            "control progress model",
        )?;
    }
    require(
        rm_rank(user.resource_mgmt) >= rm_rank(prov.resource_mgmt),
        "resource management",
    )?;
    require(
        prov.av_type == FI_AV_UNSPEC
            || user.av_type == FI_AV_UNSPEC
            || prov.av_type == user.av_type,
        "av type",
    )?;
    require(user.cq_data_size <= prov.cq_data_size, "cq data size")?;
    check_mr_mode(api, prov.mr_mode, user_info)?;
    if api < V1_5 {
        return Ok(());
    }
    require(user.cntr_cnt <= prov.cntr_cnt, "counter count")?;
    require(user.mr_iov_limit <= prov.mr_iov_limit, "mr iov limit")?;
    require(subset(user.caps, prov.caps), "domain caps")?;
    require(user.mode & prov.mode == prov.mode, "domain mode")?;
    require(user.max_err_data <= prov.max_err_data, "max err data")?;
    require(user.mr_cnt <= prov.mr_cnt, "mr count")?;
    let (ukey, pkey) = (key_len(&user.auth_key), key_len(&prov.auth_key));
    require(ukey == 0 || ukey == pkey, "domain auth key size")?;
    if api >= V1_20 {
        require(
            user.max_ep_auth_key <= prov.max_ep_auth_key,
            "max ep auth keys",
        )?;
    }
    if api >= V2_5 {
        require(
            prov.max_cntr_value == 0 || user.max_cntr_value <= prov.max_cntr_value,
            "max counter value",
        )?;
        require(
            prov.max_err_cntr_value == 0 || user.max_err_cntr_value <= prov.max_err_cntr_value,
            "max error counter value",
        )?;
    }
    Ok(())
}

fn key_len(k: &Option<Vec<u8>>) -> usize {
    k.as_ref().map_or(0, Vec::len)
}

fn check_ep_type(prov: &EpAttr, user: &EpAttr) -> Check {
    require(
        user.type_ == FI_EP_UNSPEC || prov.type_ == FI_EP_UNSPEC || user.type_ == prov.type_,
        "endpoint type",
    )
}

/// Context counts: at most the domain's per-endpoint maximum; `FI_SHARED_CONTEXT` needs shared
/// contexts; an entry that requires shared contexts needs a caller that asks for them.
fn check_ctx_cnt(user: usize, prov_ep: usize, max: usize, max_shared: usize) -> Check {
    if user > max {
        require(
            user == FI_SHARED_CONTEXT && max_shared != 0,
            "context count",
        )
    } else {
        require(
            user != 0 || prov_ep != FI_SHARED_CONTEXT,
            "provider needs shared contexts",
        )
    }
}

fn check_ep_attr(prov_info: &Info, user_info: &Info) -> Check {
    let (prov, user) = (&prov_info.ep_attr, &user_info.ep_attr);
    let dom = &prov_info.domain_attr;
    check_ep_type(prov, user)?;
    require(
        user.protocol == FI_PROTO_UNSPEC || user.protocol == prov.protocol,
        "protocol",
    )?;
    require(
        user.protocol_version == 0 || user.protocol_version <= prov.protocol_version,
        "protocol version",
    )?;
    require(user.max_msg_size <= prov.max_msg_size, "max msg size")?;
    check_ctx_cnt(
        user.tx_ctx_cnt,
        prov.tx_ctx_cnt,
        dom.max_ep_tx_ctx,
        dom.max_ep_stx_ctx,
    )?;
    check_ctx_cnt(
        user.rx_ctx_cnt,
        prov.rx_ctx_cnt,
        dom.max_ep_rx_ctx,
        dom.max_ep_srx_ctx,
    )?;
    if user_info.caps & (FI_RMA | FI_ATOMIC) != 0 {
        require(
            user.max_order_raw_size <= prov.max_order_raw_size,
            "max order raw size",
        )?;
        require(
            user.max_order_war_size <= prov.max_order_war_size,
            "max order war size",
        )?;
        require(
            user.max_order_waw_size <= prov.max_order_waw_size,
            "max order waw size",
        )?;
    }
    let (ukey, pkey) = (key_len(&user.auth_key), key_len(&prov.auth_key));
    require(ukey == 0 || ukey == pkey, "endpoint auth key size")?;
    if user_info.caps & FI_TAGGED != 0 && user.mem_tag_format != 0 {
        require(
            max_tag(user.mem_tag_format) <= max_tag(prov.mem_tag_format),
            "tag format",
        )?;
    }
    Ok(())
}

/// The 1.x completion-order and buffered-receive rules, or 2.x's "must be 0".
fn check_legacy_order(api: u32, user_comp: u64, prov_comp: u64) -> Check {
    if api < V2_0 {
        require(subset(user_comp, prov_comp), "completion order")
    } else {
        require(user_comp == 0, "completion order (deprecated, must be 0)")
    }
}

fn check_rx_attr(api: u32, prov_info: &Info, user_info: &Info) -> Check {
    let (prov, user) = (&prov_info.rx_attr, &user_info.rx_attr);
    require(subset(user.caps & !IGNORED_RX_CAPS, prov.caps), "rx caps")?;
    let mode = if user.mode != 0 {
        user.mode
    } else {
        user_info.mode
    };
    require(mode & prov.mode == prov.mode, "rx mode")?;
    require(subset(user.op_flags, prov.op_flags), "rx op flags")?;
    require(subset(user.msg_order, prov.msg_order), "rx msg order")?;
    check_legacy_order(api, user.comp_order, prov.comp_order)?;
    if api < V2_0 {
        require(
            user.total_buffered_recv <= prov.total_buffered_recv,
            "total buffered recv",
        )?;
    } else {
        require(
            user.total_buffered_recv == 0,
            "total buffered recv (deprecated, must be 0)",
        )?;
    }
    require(user.size <= prov.size, "rx size")?;
    require(user.iov_limit <= prov.iov_limit, "rx iov limit")
}

fn check_tx_attr(api: u32, prov_info: &Info, user_info: &Info) -> Check {
    let (prov, user) = (&prov_info.tx_attr, &user_info.tx_attr);
    require(subset(user.caps & !IGNORED_TX_CAPS, prov.caps), "tx caps")?;
    let mode = if user.mode != 0 {
        user.mode
    } else {
        user_info.mode
    };
    require(mode & prov.mode == prov.mode, "tx mode")?;
    require(subset(user.op_flags, prov.op_flags), "tx op flags")?;
    require(subset(user.msg_order, prov.msg_order), "tx msg order")?;
    check_legacy_order(api, user.comp_order, prov.comp_order)?;
    require(user.inject_size <= prov.inject_size, "inject size")?;
    require(user.size <= prov.size, "tx size")?;
    require(user.iov_limit <= prov.iov_limit, "tx iov limit")?;
    require(user.rma_iov_limit <= prov.rma_iov_limit, "rma iov limit")
}

/// Whether the provider entry `prov` satisfies `hints` at API `api` (abi-reference §5 item 2).
fn check_info(prov: &Info, api: u32, hints: Option<&Info>) -> Check {
    let Some(user) = hints else {
        return Ok(());
    };
    check_ep_type(&prov.ep_attr, &user.ep_attr)?;
    require(subset(user.caps, prov.caps), "capabilities")?;
    let mode = required_mode(api, user, prov);
    require(user.mode & mode == mode, "mode bits the provider needs")?;
    require(
        addr_format_ok(prov.addr_format, user.addr_format),
        "address format",
    )?;
    check_fabric_attr(&prov.fabric_attr, &user.fabric_attr)?;
    check_domain_attr(api, &prov.domain_attr, user)?;
    check_ep_attr(prov, user)?;
    check_rx_attr(api, prov, user)?;
    check_tx_attr(api, prov, user)
}

// ---- adjustment (abi-reference §5 item 4) ----

/// The caps an answer carries: the requested primary caps (all the entry's when none were
/// requested) plus the entry's secondary caps (`FI_SOURCE` only if requested), with the
/// message/RMA direction bits filled in when none was given.
fn caps_for(info_caps: u64, hint_caps: u64, attr_caps: u64) -> u64 {
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

/// The answer's top-level caps; remote RMA access is dropped when the caller did not accept the
/// registration modes an RMA target needs.
fn info_caps(prov: &Info, user: Option<&Info>, api: u32) -> u64 {
    let Some(user) = user else {
        return prov.caps;
    };
    let caps = caps_for(prov.caps, user.caps, prov.caps);
    let prov_mode = prov.domain_attr.mr_mode;
    if !rma_target_allowed(caps) || prov_mode & MR_RMA_TARGET == 0 {
        return caps;
    }
    let user_mode = user.domain_attr.mr_mode;
    if (api < V1_5 && user_mode == 0)
        || user_mode == MR_BASIC
        || user_mode & prov_mode & MR_RMA_TARGET == prov_mode & MR_RMA_TARGET
    {
        caps
    } else {
        caps & !(FI_REMOTE_WRITE | FI_REMOTE_READ)
    }
}

fn alter_domain_attr(attr: &mut DomainAttr, hints: Option<&DomainAttr>, caps: u64, api: u32) {
    let hint_mr = hints.map_or(0, |h| h.mr_mode);
    if hint_mr & MR_LEGACY != 0 {
        attr.mr_mode = hint_mr;
    } else if api < V1_5 {
        attr.mr_mode = if attr.mr_mode != 0 && attr.mr_mode != MR_SCALABLE {
            MR_BASIC
        } else {
            MR_SCALABLE
        };
    } else {
        attr.mr_mode &= !MR_LEGACY;
        if hints.is_some() && hint_mr & attr.mr_mode != attr.mr_mode {
            attr.mr_mode = mr_mode_for_caps(caps, attr.mr_mode & hint_mr);
        }
    }
    attr.caps = caps_for(caps, hints.map_or(0, |h| h.caps), attr.caps);
    if attr.max_cntr_value == 0 {
        attr.max_cntr_value = u64::MAX;
    }
    if attr.max_err_cntr_value == 0 {
        attr.max_err_cntr_value = u64::MAX;
    }
    let Some(h) = hints else { return };
    if h.threading != 0 {
        attr.threading = h.threading;
    }
    if h.progress != 0 {
        attr.progress = h.progress;
        attr.control_progress = h.progress;
    } else if api < V2_0 && h.control_progress != 0 {
        attr.control_progress = h.control_progress;
    }
    if h.av_type != 0 {
        attr.av_type = h.av_type;
    }
    if h.max_ep_auth_key != 0 {
        attr.max_ep_auth_key = h.max_ep_auth_key;
    }
    if h.auth_key.is_some() {
        attr.auth_key = h.auth_key.clone();
    }
}

fn alter_ep_attr(attr: &mut EpAttr, hints: Option<&EpAttr>, caps: u64) {
    let Some(h) = hints else { return };
    if caps & (FI_RMA | FI_ATOMIC) != 0 {
        if h.max_order_raw_size != 0 {
            attr.max_order_raw_size = h.max_order_raw_size;
        }
        if h.max_order_war_size != 0 {
            attr.max_order_war_size = h.max_order_war_size;
        }
        if h.max_order_waw_size != 0 {
            attr.max_order_waw_size = h.max_order_waw_size;
        }
    }
    if h.tx_ctx_cnt != 0 {
        attr.tx_ctx_cnt = h.tx_ctx_cnt;
    }
    if h.rx_ctx_cnt != 0 {
        attr.rx_ctx_cnt = h.rx_ctx_cnt;
    }
    if h.auth_key.is_some() {
        attr.auth_key = h.auth_key.clone();
    }
}

/// fi_getinfo(3) output rules for one matching entry.
fn alter_info(info: &mut Info, hints: Option<&Info>, api: u32) {
    // Before the domain attributes change: the check reads the entry's own mr_mode.
    info.caps = info_caps(info, hints, api);
    let hint_legacy_mr = hints.is_some_and(|h| h.domain_attr.mr_mode & MR_LEGACY != 0);
    if info.domain_attr.mr_mode & MR_LOCAL != 0 && (api < V1_5 || hint_legacy_mr) {
        info.mode |= FI_LOCAL_MR;
    }
    if let Some(h) = hints {
        info.handle = h.handle;
    }
    let caps = info.caps;
    alter_domain_attr(
        &mut info.domain_attr,
        hints.map(|h| &h.domain_attr),
        caps,
        api,
    );
    alter_ep_attr(&mut info.ep_attr, hints.map(|h| &h.ep_attr), caps);

    let rx = &mut info.rx_attr;
    rx.caps = caps_for(caps, hints.map_or(0, |h| h.rx_attr.caps), rx.caps);
    let tx = &mut info.tx_attr;
    tx.caps = caps_for(caps, hints.map_or(0, |h| h.tx_attr.caps), tx.caps);
    if let Some(h) = hints {
        let (hr, ht) = (&h.rx_attr, &h.tx_attr);
        let rx = &mut info.rx_attr;
        rx.op_flags = hr.op_flags;
        if api < V2_0 {
            rx.total_buffered_recv = hr.total_buffered_recv;
        }
        if hr.size != 0 {
            rx.size = hr.size;
        }
        if hr.iov_limit != 0 {
            rx.iov_limit = hr.iov_limit;
        }
        let tx = &mut info.tx_attr;
        tx.op_flags = ht.op_flags;
        if ht.inject_size != 0 {
            tx.inject_size = ht.inject_size;
        }
        if ht.size != 0 {
            tx.size = ht.size;
        }
        if ht.iov_limit != 0 {
            tx.iov_limit = ht.iov_limit;
        }
        if ht.rma_iov_limit != 0 {
            tx.rma_iov_limit = ht.rma_iov_limit;
        }
    }
    if api >= V2_0 {
        // Deprecated in 2.0: a 2.x caller reads (and may hand back as hints) 0.
        info.tx_attr.comp_order = 0;
        info.rx_attr.comp_order = 0;
        info.rx_attr.total_buffered_recv = 0;
    }
}

/// An entry as a caller of API `api` may see it: below 2.0 the reused capability bits are
/// withheld (they meant something else then).
fn entry_for_api(prov: &Info, api: u32) -> Cow<'_, Info> {
    let reused = CAPS_REUSED_IN_2_0;
    let touches =
        (prov.caps | prov.tx_attr.caps | prov.rx_attr.caps | prov.domain_attr.caps) & reused != 0;
    if api >= V2_0 || !touches {
        return Cow::Borrowed(prov);
    }
    let mut p = prov.clone();
    p.caps &= !reused;
    p.tx_attr.caps &= !reused;
    p.rx_attr.caps &= !reused;
    p.domain_attr.caps &= !reused;
    Cow::Owned(p)
}

/// What a provider's `InfoProvider::getinfo` calls on its static entries: every entry that
/// satisfies `hints` at API `api_version`, adjusted to the hints (fi_getinfo(3); abi-reference §5
/// items 2–4), in the entries' order. `Errno::NODATA` when none matches.
///
/// Entries should state `fabric_attr.prov_version` (0 means "any") and may state
/// `comp_order`/`total_buffered_recv` for 1.x callers (2.x callers see 0). Addresses, `node`,
/// `service` and `FI_SOURCE` are the provider's to handle (see [`hint_addresses`]).
pub fn util_getinfo(
    prov_infos: &[Info],
    api_version: u32,
    hints: Option<&Info>,
) -> Result<Vec<Info>> {
    let mut out = Vec::new();
    for prov in prov_infos {
        let prov = entry_for_api(prov, api_version);
        if let Err(why) = check_info(&prov, api_version, hints) {
            let name = prov.fabric_attr.prov_name.as_deref().unwrap_or("core");
            crate::fi_info!(name, Subsys::Core, "entry skipped: {why}");
            continue;
        }
        let mut info = prov.into_owned();
        alter_info(&mut info, hints, api_version);
        out.push(info);
    }
    if out.is_empty() {
        Err(Errno::NODATA)
    } else {
        Ok(out)
    }
}

/// The addresses an answer takes from the hints (fi_getinfo(3) `src_addr`/`dest_addr`): with
/// `FI_SOURCE` the hints' destination; otherwise the hints' source, and their destination unless
/// `node`/`service` named one. The format follows a copied address. Resolving `node` and
/// `service` is the provider's own business.
pub fn hint_addresses(info: &mut Info, hints: Option<&Info>, flags: u64, node_or_service: bool) {
    let Some(h) = hints else { return };
    let copy_dest = if flags & FI_SOURCE != 0 {
        h.dest_addr.is_some()
    } else {
        if let Some(src) = &h.src_addr {
            info.src_addr = Some(src.clone());
            info.addr_format = h.addr_format;
        }
        !node_or_service && h.dest_addr.is_some()
    };
    if copy_dest {
        info.dest_addr = h.dest_addr.clone();
        info.addr_format = h.addr_format;
    }
}

// ---- fi_getinfo ----

/// `FI_PROVIDER`, read once (as the library's initialisation does).
fn provider_filter() -> &'static NameFilter {
    static FILTER: OnceLock<NameFilter> = OnceLock::new();
    FILTER.get_or_init(|| {
        params::define_core();
        NameFilter::parse(params::get_str(None, "provider").ok().as_deref())
    })
}

/// Warns (once per process) about `FI_PROVIDER` names that are no provider of this library.
pub fn check_provider_filter(known: &[&str]) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for line in unknown_provider_warnings(provider_filter(), known) {
            crate::fi_warn!("core", Subsys::Core, "{line}");
        }
    });
}

/// The warnings `FI_PROVIDER` deserves: one per name (layered names split on `;`) that is not
/// in `known`, with a suggestion when a known name is close.
pub fn unknown_provider_warnings(filter: &NameFilter, known: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for entry in filter.names() {
        for name in entry.split(';') {
            if known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
                continue;
            }
            let hint = known
                .iter()
                .find(|k| close_names(k, name))
                .map(|k| format!("; did you mean \"{k}\"?"))
                .unwrap_or_default();
            out.push(format!(
                "FI_PROVIDER names \"{name}\", which is not a provider of this library{hint}"
            ));
        }
    }
    out
}

/// Names within one edit (insertion, deletion or substitution) of each other, ignoring case.
fn close_names(a: &str, b: &str) -> bool {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.is_empty() || b.is_empty() || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (sa, sb) = (&a[prefix..], &b[prefix..]);
    match sa.len().cmp(&sb.len()) {
        std::cmp::Ordering::Equal => sa.get(1..) == sb.get(1..),
        std::cmp::Ordering::Greater => &sa[1..] == sb,
        std::cmp::Ordering::Less => sa == &sb[1..],
    }
}

fn has_util_prefix(name: &str) -> bool {
    name.len() >= 4 && name[..4].eq_ignore_ascii_case("ofi_")
}

/// Whether hints `prov_name` (split on `;`) lets the core provider `name` answer: trailing
/// `^name` entries exclude providers; of the rest, the provider a core provider must be is the
/// last name, or the first of a `ofi_<util>;<core>` pair (fi_getinfo(3) `prov_name`, fi_fabric(7)
/// layering).
fn layering_ok(name: &str, prov_vec: &[&str]) -> bool {
    let mut count = prov_vec.len();
    while count > 0 {
        let Some(excluded) = prov_vec[count - 1].strip_prefix('^') else {
            break;
        };
        if excluded.eq_ignore_ascii_case(name) {
            return false;
        }
        count -= 1;
    }
    if count == 0 {
        return true;
    }
    let wanted = if count == 2 && has_util_prefix(prov_vec[0]) && !has_util_prefix(prov_vec[1]) {
        prov_vec[0]
    } else {
        prov_vec[count - 1]
    };
    name.eq_ignore_ascii_case(wanted)
}

/// The name filters applied to the answers: `FI_PROVIDER`, hints `domain_attr.name` and
/// `fabric_attr.name` (exact, case-insensitive).
fn name_filter(filter: &NameFilter, hints: Option<&Info>, list: &mut Vec<Info>) {
    let dom = hints.and_then(|h| h.domain_attr.name.as_deref());
    let fab = hints.and_then(|h| h.fabric_attr.name.as_deref());
    let same = |want: Option<&str>, have: &Option<String>| match want {
        None => true,
        Some(w) => have.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(w)),
    };
    list.retain(|i| {
        filter.keeps_result(i.fabric_attr.prov_name.as_deref().unwrap_or(""))
            && same(dom, &i.domain_attr.name)
            && same(fab, &i.fabric_attr.name)
    });
}

/// Upstream's final order: RDM entries of `tcp` go just before the first RDM `tcp;ofi_rxm` entry
/// (at the end if there is none).
fn reorder(list: &mut Vec<Info>) {
    let is = |i: &Info, name: &str| {
        i.ep_attr.type_ == FI_EP_RDM
            && i.fabric_attr
                .prov_name
                .as_deref()
                .is_some_and(|p| p.eq_ignore_ascii_case(name))
    };
    if !list.iter().any(|i| is(i, "tcp")) {
        return;
    }
    let (moved, mut rest): (Vec<Info>, Vec<Info>) =
        std::mem::take(list).into_iter().partition(|i| is(i, "tcp"));
    let at = rest
        .iter()
        .position(|i| is(i, "tcp;ofi_rxm"))
        .unwrap_or(rest.len());
    rest.splice(at..at, moved);
    *list = rest;
}

/// fi_getinfo(3) over `providers` (in default order), with `FI_PROVIDER` from the environment
/// (or `libfabric.conf`).
pub fn getinfo(
    providers: &[&dyn InfoProvider],
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&Info>,
) -> Result<Vec<Info>> {
    let names: Vec<&str> = providers.iter().map(|p| p.name()).collect();
    check_provider_filter(&names);
    getinfo_filtered(
        provider_filter(),
        providers,
        version,
        node,
        service,
        flags,
        hints,
    )
}

/// [`getinfo`] with an explicit `FI_PROVIDER` filter.
pub fn getinfo_filtered(
    filter: &NameFilter,
    providers: &[&dyn InfoProvider],
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&Info>,
) -> Result<Vec<Info>> {
    if version > FI_VERSION_CURRENT {
        crate::fi_warn!(
            "core",
            Subsys::Core,
            "requested API version is newer than the library"
        );
        return Err(Errno::NOSYS);
    }
    if flags == FI_PROV_ATTR_ONLY {
        // One entry per provider with only its name and version, whatever the filters.
        let out: Vec<Info> = providers
            .iter()
            .map(|p| {
                let mut i = Info::default();
                i.fabric_attr.prov_name = Some(p.name().to_string());
                i.fabric_attr.prov_version = p.version();
                i
            })
            .collect();
        return if out.is_empty() {
            Err(Errno::NODATA)
        } else {
            Ok(out)
        };
    }
    // fi_getinfo(3): FI_SOURCE says node/service name the source; without either there is
    // nothing to resolve. (Upstream lets every provider fail and reports ENODATA.)
    if flags & FI_SOURCE != 0 && node.is_none() && service.is_none() {
        return Err(Errno::INVAL);
    }
    let wanted = hints.and_then(|h| h.fabric_attr.prov_name.as_deref());
    let prov_vec: Vec<&str> = wanted.map(|w| w.split(';').collect()).unwrap_or_default();
    let mut out = Vec::new();
    for p in providers {
        if p.hidden() || !filter.keeps_provider(p.name()) || !layering_ok(p.name(), &prov_vec) {
            continue;
        }
        match p.getinfo(version, node, service, flags, hints) {
            Ok(list) if list.is_empty() => {
                crate::fi_warn!(
                    "core",
                    Subsys::Core,
                    "provider {} answered nothing",
                    p.name()
                );
            }
            Ok(list) => {
                for mut i in list {
                    i.fabric_attr.prov_name = Some(p.name().to_string());
                    i.fabric_attr.prov_version = p.version();
                    i.fabric_attr.api_version = version;
                    out.push(i);
                }
            }
            Err(e) => {
                let level = if wanted == Some(p.name()) {
                    Level::Warn
                } else {
                    Level::Info
                };
                crate::fi_log_at!(
                    level,
                    "core",
                    Subsys::Core,
                    "provider {} returned -{} ({})",
                    p.name(),
                    e.0,
                    e
                );
            }
        }
    }
    name_filter(filter, hints, &mut out);
    reorder(&mut out);
    if out.is_empty() {
        Err(Errno::NODATA)
    } else {
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const V1_0: u32 = fi_version(1, 0);
    const V1_4: u32 = fi_version(1, 4);
    const V1_17: u32 = fi_version(1, 17);
    const V1_21: u32 = fi_version(1, 21);
    const V2_6: u32 = fi_version(2, 6);

    /// A shared-memory-like static entry: thread safe, manual progress, legacy MR modes listed.
    fn shm_entry() -> Info {
        let mut i = Info {
            caps: FI_MSG
                | FI_TAGGED
                | FI_RMA
                | FI_ATOMIC
                | FI_READ
                | FI_WRITE
                | FI_SEND
                | FI_RECV
                | FI_REMOTE_READ
                | FI_REMOTE_WRITE
                | FI_MULTI_RECV
                | FI_SOURCE
                | FI_DIRECTED_RECV
                | FI_LOCAL_COMM
                | FI_HMEM,
            addr_format: FI_ADDR_STR,
            ..Default::default()
        };
        i.tx_attr.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND;
        i.tx_attr.op_flags = FI_COMPLETION | FI_INJECT_COMPLETE | FI_DELIVERY_COMPLETE;
        i.tx_attr.msg_order = FI_ORDER_SAS | FI_ORDER_RAW;
        i.tx_attr.inject_size = 4096;
        i.tx_attr.size = 1024;
        i.tx_attr.iov_limit = 4;
        i.tx_attr.rma_iov_limit = 4;
        i.rx_attr.caps = FI_MSG
            | FI_TAGGED
            | FI_RMA
            | FI_ATOMIC
            | FI_RECV
            | FI_REMOTE_READ
            | FI_REMOTE_WRITE
            | FI_MULTI_RECV
            | FI_SOURCE
            | FI_DIRECTED_RECV;
        i.rx_attr.op_flags = FI_COMPLETION | FI_MULTI_RECV;
        i.rx_attr.msg_order = FI_ORDER_SAS;
        i.rx_attr.comp_order = FI_ORDER_STRICT;
        i.rx_attr.size = 1024;
        i.rx_attr.iov_limit = 4;
        i.ep_attr = EpAttr {
            type_: FI_EP_RDM,
            protocol: FI_PROTO_SHM,
            protocol_version: 1,
            max_msg_size: 1 << 30,
            max_order_raw_size: 1 << 16,
            max_order_war_size: 1 << 16,
            max_order_waw_size: 1 << 16,
            mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..Default::default()
        };
        i.domain_attr = DomainAttr {
            name: Some("shm".into()),
            threading: FI_THREAD_SAFE,
            control_progress: FI_PROGRESS_AUTO,
            progress: FI_PROGRESS_MANUAL,
            resource_mgmt: FI_RM_ENABLED,
            av_type: FI_AV_UNSPEC,
            mr_mode: MR_BASIC | MR_SCALABLE | MR_HMEM,
            mr_key_size: 8,
            cq_data_size: 8,
            cq_cnt: 1024,
            ep_cnt: 256,
            tx_ctx_cnt: 1024,
            rx_ctx_cnt: 1024,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            cntr_cnt: 64,
            mr_iov_limit: 4,
            caps: FI_LOCAL_COMM,
            max_err_data: 64,
            mr_cnt: 4096,
            ..Default::default()
        };
        i.fabric_attr = FabricAttr {
            name: Some("shm".into()),
            prov_version: fi_version(206, 0),
            ..Default::default()
        };
        i
    }

    /// An EFA-like entry: needs local registration and the RMA-target modes, domain threading,
    /// FI_CONTEXT2 mode.
    fn efa_entry() -> Info {
        let mut i = shm_entry();
        i.caps &= !(FI_HMEM | FI_LOCAL_COMM);
        i.mode = FI_CONTEXT2;
        i.addr_format = FI_ADDR_EFA;
        i.ep_attr.protocol = FI_PROTO_EFA;
        i.domain_attr.name = Some("efa0-rdm".into());
        i.domain_attr.threading = FI_THREAD_DOMAIN;
        i.domain_attr.mr_mode =
            (FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
        i.domain_attr.caps = 0;
        i.rx_attr.comp_order = 0;
        i.fabric_attr.name = Some("efa".into());
        i
    }

    /// Hints as `fi_allocinfo` gives them.
    fn hints() -> Info {
        Info::default()
    }

    fn matches(entry: &Info, api: u32, h: &Info) -> bool {
        util_getinfo(std::slice::from_ref(entry), api, Some(h)).is_ok()
    }

    fn answer(entry: &Info, api: u32, h: Option<&Info>) -> Info {
        util_getinfo(std::slice::from_ref(entry), api, h)
            .expect("matches")
            .remove(0)
    }

    type Case = (&'static str, fn() -> Info, fn(&mut Info), u32, bool);

    fn run(cases: &[Case]) {
        for (name, entry, set, api, want) in cases {
            let mut h = hints();
            set(&mut h);
            assert_eq!(
                matches(&entry(), *api, &h),
                *want,
                "{name} at {}.{}",
                fi_major(*api),
                fi_minor(*api)
            );
        }
    }

    #[test]
    fn no_hints_match_everything() {
        let list = util_getinfo(&[shm_entry(), efa_entry()], V2_6, None).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].caps, shm_entry().caps);
        // The legacy mode bits are listed by the provider, never answered from 1.5 on.
        assert_eq!(list[0].domain_attr.mr_mode, MR_HMEM);
        assert_eq!(list[0].domain_attr.max_cntr_value, u64::MAX);
        assert_eq!(list[0].domain_attr.max_err_cntr_value, u64::MAX);
        assert_eq!(list[1].mode, FI_CONTEXT2, "no FI_LOCAL_MR from 1.5 on");
        // Before 1.5 the answer is BASIC or SCALABLE, and local registration is a mode bit.
        let old = answer(&efa_entry(), V1_4, None);
        assert_eq!(old.domain_attr.mr_mode, MR_BASIC);
        assert_eq!(old.mode, FI_CONTEXT2 | FI_LOCAL_MR);
        let mut scal = shm_entry();
        scal.domain_attr.mr_mode = MR_SCALABLE;
        assert_eq!(answer(&scal, V1_4, None).domain_attr.mr_mode, MR_SCALABLE);
    }

    #[test]
    fn nothing_matches_is_nodata() {
        let mut h = hints();
        h.ep_attr.type_ = FI_EP_MSG;
        assert_eq!(
            util_getinfo(&[shm_entry(), efa_entry()], V2_6, Some(&h)),
            Err(Errno::NODATA)
        );
        assert_eq!(util_getinfo(&[], V2_6, None), Err(Errno::NODATA));
    }

    #[test]
    fn only_matching_entries_in_order() {
        let mut dgram = shm_entry();
        dgram.ep_attr.type_ = FI_EP_DGRAM;
        dgram.domain_attr.name = Some("dgram".into());
        let entries = [shm_entry(), dgram, efa_entry()];
        let mut h = hints();
        h.ep_attr.type_ = FI_EP_RDM;
        h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
        let names: Vec<_> = util_getinfo(&entries, V2_6, Some(&h))
            .unwrap()
            .into_iter()
            .map(|i| i.domain_attr.name.unwrap())
            .collect();
        assert_eq!(names, ["shm", "efa0-rdm"]);
    }

    #[test]
    fn endpoint_type_caps_mode_and_address() {
        run(&[
            (
                "ep type RDM",
                shm_entry,
                |h| h.ep_attr.type_ = FI_EP_RDM,
                V2_6,
                true,
            ),
            (
                "ep type MSG",
                shm_entry,
                |h| h.ep_attr.type_ = FI_EP_MSG,
                V2_6,
                false,
            ),
            (
                "ep type UNSPEC",
                shm_entry,
                |h| h.ep_attr.type_ = FI_EP_UNSPEC,
                V2_6,
                true,
            ),
            (
                "entry of unspecified type",
                || {
                    let mut e = shm_entry();
                    e.ep_attr.type_ = FI_EP_UNSPEC;
                    e
                },
                |h| h.ep_attr.type_ = FI_EP_DGRAM,
                V2_6,
                true,
            ),
            (
                "caps subset",
                shm_entry,
                |h| h.caps = FI_MSG | FI_TAGGED,
                V2_6,
                true,
            ),
            (
                "caps not offered",
                shm_entry,
                |h| h.caps = FI_MSG | FI_COLLECTIVE,
                V2_6,
                false,
            ),
            (
                "required mode missing",
                efa_entry,
                |h| h.domain_attr.mr_mode = MR_LOCAL | FI_MR_ALLOCATED as i32,
                V2_6,
                false,
            ),
            (
                "required mode given",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2 | FI_CONTEXT;
                    h.domain_attr.mr_mode = MR_LOCAL | FI_MR_ALLOCATED as i32;
                },
                V2_6,
                true,
            ),
            (
                "address format exact",
                shm_entry,
                |h| h.addr_format = FI_ADDR_STR,
                V2_6,
                true,
            ),
            (
                "address format other",
                shm_entry,
                |h| h.addr_format = FI_SOCKADDR_IN,
                V2_6,
                false,
            ),
            (
                "address format unspec",
                shm_entry,
                |h| h.addr_format = FI_FORMAT_UNSPEC,
                V2_6,
                true,
            ),
        ]);
    }

    #[test]
    fn address_format_families() {
        let yes = [
            (FI_SOCKADDR_IN, FI_SOCKADDR),
            (FI_SOCKADDR_IN, FI_SOCKADDR_IP),
            (FI_SOCKADDR_IN6, FI_SOCKADDR_IP),
            (FI_SOCKADDR, FI_SOCKADDR_IB),
            (FI_SOCKADDR_IB, FI_SOCKADDR),
            (FI_SOCKADDR_IP, FI_SOCKADDR_IN6),
            (FI_ADDR_EFA, FI_ADDR_EFA),
            (FI_FORMAT_UNSPEC, FI_ADDR_EFA),
            (FI_ADDR_EFA, FI_FORMAT_UNSPEC),
        ];
        let no = [
            (FI_SOCKADDR_IN, FI_SOCKADDR_IN6),
            (FI_SOCKADDR_IN6, FI_SOCKADDR_IN),
            (FI_SOCKADDR_IP, FI_SOCKADDR_IB),
            (FI_SOCKADDR_IB, FI_SOCKADDR_IP),
            (FI_ADDR_EFA, FI_SOCKADDR),
            (FI_ADDR_STR, FI_ADDR_EFA),
        ];
        for (p, u) in yes {
            assert!(addr_format_ok(p, u), "{p} serves {u}");
        }
        for (p, u) in no {
            assert!(!addr_format_ok(p, u), "{p} does not serve {u}");
        }
    }

    #[test]
    fn fabric_attributes() {
        fn with_api() -> Info {
            let mut e = shm_entry();
            e.fabric_attr.api_version = fi_version(1, 10);
            e.fabric_attr.prov_name = Some("shm".into());
            e
        }
        run(&[
            (
                "same provider version",
                shm_entry,
                |h| h.fabric_attr.prov_version = fi_version(206, 0),
                V2_6,
                true,
            ),
            (
                "newer provider version",
                shm_entry,
                |h| h.fabric_attr.prov_version = fi_version(207, 0),
                V2_6,
                false,
            ),
            (
                "older api in hints",
                with_api,
                |h| h.fabric_attr.api_version = fi_version(1, 9),
                V2_6,
                false,
            ),
            (
                "same api in hints",
                with_api,
                |h| h.fabric_attr.api_version = fi_version(1, 10),
                V2_6,
                true,
            ),
            (
                "entry names itself",
                with_api,
                |h| {
                    h.fabric_attr.api_version = V2_6;
                    h.fabric_attr.prov_name = Some("SHM;ofi_rxm".into());
                },
                V2_6,
                true,
            ),
            (
                "entry names another",
                with_api,
                |h| {
                    h.fabric_attr.api_version = V2_6;
                    h.fabric_attr.prov_name = Some("efa".into());
                },
                V2_6,
                false,
            ),
        ]);
        // An entry without a version does not constrain it.
        let mut e = shm_entry();
        e.fabric_attr.prov_version = 0;
        let mut h = hints();
        h.fabric_attr.prov_version = 5;
        assert!(matches(&e, V2_6, &h));
    }

    #[test]
    fn threading_models() {
        run(&[
            (
                "safe of safe",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_SAFE,
                V2_6,
                true,
            ),
            (
                "domain of safe",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_DOMAIN,
                V2_6,
                true,
            ),
            (
                "completion of safe",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_COMPLETION,
                V2_6,
                true,
            ),
            (
                "safe of domain",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode = 0x7c;
                    h.domain_attr.threading = FI_THREAD_SAFE;
                },
                V2_6,
                false,
            ),
            (
                "completion of domain",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode = 0x7c;
                    h.domain_attr.threading = FI_THREAD_COMPLETION;
                },
                V2_6,
                false,
            ),
            (
                "domain of domain",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode = 0x7c;
                    h.domain_attr.threading = FI_THREAD_DOMAIN;
                },
                V2_6,
                true,
            ),
            // Deprecated models: 1.x rules below 2.0, rejected from 2.0 on.
            (
                "fid of safe, 1.17",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_FID,
                V1_17,
                true,
            ),
            (
                "endpoint of safe, 1.17",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_ENDPOINT,
                V1_17,
                true,
            ),
            (
                "fid of safe, 2.6",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_FID,
                V2_6,
                false,
            ),
            (
                "endpoint of safe, 2.6",
                shm_entry,
                |h| h.domain_attr.threading = FI_THREAD_ENDPOINT,
                V2_6,
                false,
            ),
            (
                "endpoint of domain, 1.17",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode = 0x7c;
                    h.domain_attr.threading = FI_THREAD_ENDPOINT;
                },
                V1_17,
                false,
            ),
            (
                "garbage model",
                shm_entry,
                |h| h.domain_attr.threading = 77,
                V2_6,
                false,
            ),
        ]);
        let mut h = hints();
        h.domain_attr.threading = FI_THREAD_FID;
        assert_eq!(
            answer(&shm_entry(), V1_17, Some(&h)).domain_attr.threading,
            FI_THREAD_FID,
            "the caller's model is echoed"
        );
    }

    #[test]
    fn progress_and_resource_models() {
        fn auto_entry() -> Info {
            let mut e = shm_entry();
            e.domain_attr.progress = FI_PROGRESS_AUTO;
            e.domain_attr.control_progress = FI_PROGRESS_MANUAL;
            e
        }
        fn rm_disabled() -> Info {
            let mut e = shm_entry();
            e.domain_attr.resource_mgmt = FI_RM_DISABLED;
            e
        }
        run(&[
            (
                "auto of manual",
                shm_entry,
                |h| h.domain_attr.progress = FI_PROGRESS_AUTO,
                V2_6,
                false,
            ),
            (
                "manual of manual",
                shm_entry,
                |h| h.domain_attr.progress = FI_PROGRESS_MANUAL,
                V2_6,
                true,
            ),
            (
                "unified of manual",
                shm_entry,
                |h| h.domain_attr.progress = FI_PROGRESS_CONTROL_UNIFIED,
                V2_6,
                true,
            ),
            (
                "manual of auto",
                auto_entry,
                |h| h.domain_attr.progress = FI_PROGRESS_MANUAL,
                V2_6,
                true,
            ),
            (
                "garbage progress",
                shm_entry,
                |h| h.domain_attr.progress = 9,
                V2_6,
                false,
            ),
            // control_progress: compared below 2.0 only.
            (
                "control auto of manual, 1.17",
                auto_entry,
                |h| h.domain_attr.control_progress = FI_PROGRESS_AUTO,
                V1_17,
                false,
            ),
            (
                "control auto of manual, 2.6",
                auto_entry,
                |h| h.domain_attr.control_progress = FI_PROGRESS_AUTO,
                V2_6,
                true,
            ),
            (
                "control manual of auto, 1.17",
                shm_entry,
                |h| h.domain_attr.control_progress = FI_PROGRESS_MANUAL,
                V1_17,
                true,
            ),
            (
                "rm disabled of enabled",
                shm_entry,
                |h| h.domain_attr.resource_mgmt = FI_RM_DISABLED,
                V2_6,
                true,
            ),
            (
                "rm enabled of disabled",
                rm_disabled,
                |h| h.domain_attr.resource_mgmt = FI_RM_ENABLED,
                V2_6,
                false,
            ),
            ("rm unspec of disabled", rm_disabled, |_| {}, V2_6, true),
        ]);
        // An entry that states no control progress does not constrain 1.x callers.
        let mut e = shm_entry();
        e.domain_attr.control_progress = 0;
        let mut h = hints();
        h.domain_attr.control_progress = FI_PROGRESS_AUTO;
        assert!(matches(&e, V1_17, &h));
    }

    #[test]
    fn av_type_cq_data_and_counts() {
        fn table() -> Info {
            let mut e = shm_entry();
            e.domain_attr.av_type = FI_AV_TABLE;
            e
        }
        run(&[
            (
                "map of unspec entry",
                shm_entry,
                |h| h.domain_attr.av_type = FI_AV_MAP,
                V2_6,
                true,
            ),
            (
                "map of table",
                table,
                |h| h.domain_attr.av_type = FI_AV_MAP,
                V2_6,
                false,
            ),
            (
                "table of table",
                table,
                |h| h.domain_attr.av_type = FI_AV_TABLE,
                V2_6,
                true,
            ),
            (
                "cq data 8",
                shm_entry,
                |h| h.domain_attr.cq_data_size = 8,
                V2_6,
                true,
            ),
            (
                "cq data 9",
                shm_entry,
                |h| h.domain_attr.cq_data_size = 9,
                V2_6,
                false,
            ),
            // Counts are compared from API 1.5 on.
            (
                "cntr_cnt over, 1.17",
                shm_entry,
                |h| h.domain_attr.cntr_cnt = 65,
                V1_17,
                false,
            ),
            (
                "cntr_cnt over, 1.4",
                shm_entry,
                |h| h.domain_attr.cntr_cnt = 65,
                V1_4,
                true,
            ),
            (
                "mr_iov_limit over",
                shm_entry,
                |h| h.domain_attr.mr_iov_limit = 5,
                V1_17,
                false,
            ),
            (
                "mr_cnt over",
                shm_entry,
                |h| h.domain_attr.mr_cnt = 4097,
                V1_17,
                false,
            ),
            (
                "max_err_data over",
                shm_entry,
                |h| h.domain_attr.max_err_data = 65,
                V1_17,
                false,
            ),
            (
                "domain caps offered",
                shm_entry,
                |h| h.domain_attr.caps = FI_LOCAL_COMM,
                V1_17,
                true,
            ),
            (
                "domain caps not offered",
                shm_entry,
                |h| h.domain_attr.caps = FI_SHARED_AV,
                V1_17,
                false,
            ),
            (
                "domain auth key size differs",
                shm_entry,
                |h| h.domain_attr.auth_key = Some(vec![1; 4]),
                V1_17,
                false,
            ),
            (
                "max_ep_auth_key over, 1.21",
                shm_entry,
                |h| h.domain_attr.max_ep_auth_key = 1,
                V1_21,
                false,
            ),
            (
                "max_ep_auth_key over, 1.17",
                shm_entry,
                |h| h.domain_attr.max_ep_auth_key = 1,
                V1_17,
                true,
            ),
            (
                "max_cntr_value, entry unlimited",
                shm_entry,
                |h| h.domain_attr.max_cntr_value = u64::MAX,
                V2_6,
                true,
            ),
        ]);
        let mut e = shm_entry();
        e.domain_attr.mode = FI_RX_CQ_DATA;
        e.domain_attr.max_cntr_value = 1000;
        let mut h = hints();
        assert!(!matches(&e, V1_17, &h), "domain mode required");
        h.domain_attr.mode = FI_RX_CQ_DATA;
        assert!(matches(&e, V1_17, &h));
        assert!(
            matches(&e, V1_4, &hints()),
            "domain mode not compared before 1.5"
        );
        h.domain_attr.max_cntr_value = 1001;
        assert!(!matches(&e, V2_6, &h));
        assert!(
            matches(&e, V1_21, &h),
            "max_cntr_value compared from 2.5 on"
        );
    }

    #[test]
    fn memory_registration_modes() {
        fn efa_legacy() -> Info {
            let mut e = efa_entry();
            e.domain_attr.mr_mode |= MR_BASIC;
            e
        }
        let all = (FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
        let _ = all;
        run(&[
            // Before 1.5: an enum.
            ("unspec of legacy entry, 1.4", shm_entry, |_| {}, V1_4, true),
            (
                "basic of legacy entry, 1.4",
                shm_entry,
                |h| h.domain_attr.mr_mode = MR_BASIC,
                V1_4,
                true,
            ),
            (
                "scalable of legacy entry, 1.4",
                shm_entry,
                |h| h.domain_attr.mr_mode = MR_SCALABLE,
                V1_4,
                true,
            ),
            (
                "bits are no enum value, 1.4",
                shm_entry,
                |h| h.domain_attr.mr_mode = MR_LOCAL,
                V1_4,
                false,
            ),
            (
                "unspec of modern entry, 1.4",
                efa_entry,
                |h| h.mode = FI_CONTEXT2 | FI_LOCAL_MR,
                V1_4,
                false,
            ),
            (
                "basic of entry listing basic, 1.4",
                efa_legacy,
                |h| {
                    h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
                    h.domain_attr.mr_mode = MR_BASIC;
                },
                V1_4,
                true,
            ),
            (
                "basic without FI_LOCAL_MR, 1.4",
                efa_legacy,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode = MR_BASIC;
                },
                V1_4,
                false,
            ),
            (
                "scalable of entry listing basic only, 1.4",
                efa_legacy,
                |h| {
                    h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
                    h.domain_attr.mr_mode = MR_SCALABLE;
                },
                V1_4,
                false,
            ),
            // From 1.5: BASIC/SCALABLE alone and listed, else bits.
            (
                "basic alone, 1.17",
                shm_entry,
                |h| h.domain_attr.mr_mode = MR_BASIC,
                V1_17,
                true,
            ),
            (
                "basic with bits, 1.17",
                shm_entry,
                |h| h.domain_attr.mr_mode = MR_BASIC | MR_LOCAL,
                V1_17,
                false,
            ),
            (
                "scalable not listed, 1.17",
                efa_legacy,
                |h| {
                    h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
                    h.domain_attr.mr_mode = MR_SCALABLE;
                },
                V1_17,
                false,
            ),
            (
                "all bits, 1.17",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode = 0x7c;
                },
                V1_17,
                true,
            ),
            (
                "local+allocated for plain messaging",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.caps = FI_MSG;
                    h.domain_attr.mr_mode = (FI_MR_LOCAL | FI_MR_ALLOCATED) as i32;
                },
                V1_17,
                true,
            ),
            (
                "local only for plain messaging",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.caps = FI_MSG;
                    h.domain_attr.mr_mode = MR_LOCAL;
                },
                V1_17,
                false,
            ),
            (
                "rma target needs the target bits",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.caps = FI_RMA;
                    h.domain_attr.mr_mode = (FI_MR_LOCAL | FI_MR_ALLOCATED) as i32;
                },
                V1_17,
                false,
            ),
            (
                "rma initiator does not",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.caps = FI_RMA | FI_READ | FI_WRITE;
                    h.domain_attr.mr_mode = (FI_MR_LOCAL | FI_MR_ALLOCATED) as i32;
                },
                V1_17,
                true,
            ),
            (
                "local needed, neither bit nor mode",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2;
                    h.domain_attr.mr_mode =
                        (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
                },
                V1_17,
                false,
            ),
            // FI_LOCAL_MR stands in for FI_MR_LOCAL only when no bits are given at all.
            (
                "local needed, FI_LOCAL_MR mode and other bits",
                efa_entry,
                |h| {
                    h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
                    h.domain_attr.mr_mode =
                        (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
                },
                V1_17,
                false,
            ),
            (
                "unspec with FI_LOCAL_MR, 1.17",
                efa_entry,
                |h| h.mode = FI_CONTEXT2 | FI_LOCAL_MR,
                V1_17,
                true,
            ),
            // FI_MR_HMEM only matters with FI_HMEM.
            (
                "hmem bit without FI_HMEM",
                shm_entry,
                |h| h.domain_attr.mr_mode = FI_MR_VIRT_ADDR as i32,
                V1_17,
                true,
            ),
            (
                "hmem bit with FI_HMEM",
                shm_entry,
                |h| {
                    h.caps = FI_MSG | FI_HMEM;
                    h.domain_attr.mr_mode = FI_MR_VIRT_ADDR as i32;
                },
                V1_17,
                false,
            ),
            (
                "hmem bit given",
                shm_entry,
                |h| {
                    h.caps = FI_MSG | FI_HMEM;
                    h.domain_attr.mr_mode = MR_HMEM;
                },
                V1_17,
                true,
            ),
            // What Debian's fi_info asks: every mode but the legacy ones.
            (
                "fi_info's ~3",
                efa_entry,
                |h| {
                    h.mode = !0;
                    h.domain_attr.mr_mode = !3;
                },
                V1_17,
                true,
            ),
        ]);
    }

    #[test]
    fn memory_registration_answers() {
        let mut h = hints();
        h.mode = FI_CONTEXT2;
        h.caps = FI_MSG;
        h.domain_attr.mr_mode = (FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_RMA_EVENT) as i32;
        let a = answer(&efa_entry(), V1_17, Some(&h));
        assert_eq!(
            a.domain_attr.mr_mode,
            (FI_MR_LOCAL | FI_MR_ALLOCATED) as i32
        );
        assert_eq!(a.mode, FI_CONTEXT2);

        h.domain_attr.mr_mode = 0x7c;
        h.caps = 0;
        let a = answer(&efa_entry(), V1_17, Some(&h));
        assert_eq!(a.domain_attr.mr_mode, efa_entry().domain_attr.mr_mode);

        // Legacy hints are echoed; FI_LOCAL_MR then says what they cannot.
        let mut e = efa_entry();
        e.domain_attr.mr_mode |= MR_BASIC;
        let mut h = hints();
        h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
        h.domain_attr.mr_mode = MR_BASIC;
        let a = answer(&e, V1_17, Some(&h));
        assert_eq!(a.domain_attr.mr_mode, MR_BASIC);
        assert_eq!(a.mode, FI_CONTEXT2 | FI_LOCAL_MR);
        let a = answer(&shm_entry(), V1_4, Some(&hints()));
        assert_eq!(
            a.domain_attr.mr_mode, MR_BASIC,
            "abi-reference: shm v1.4 hint 0 -> 0x1"
        );

        // A caller that leaves mr_mode unspecified cannot be an RMA target of a provider that
        // needs the target modes.
        let mut h = hints();
        h.mode = FI_CONTEXT2 | FI_LOCAL_MR;
        h.caps = FI_RMA;
        let a = answer(&efa_entry(), V1_17, Some(&h));
        assert_eq!(a.caps & (FI_REMOTE_READ | FI_REMOTE_WRITE), 0);
        assert_eq!(a.caps & (FI_READ | FI_WRITE), FI_READ | FI_WRITE);
        // ... but it can before 1.5, where 0 meant "either legacy mode".
        let mut e = efa_entry();
        e.domain_attr.mr_mode |= MR_BASIC;
        let a = answer(&e, V1_4, Some(&h));
        assert_eq!(
            a.caps & (FI_REMOTE_READ | FI_REMOTE_WRITE),
            FI_REMOTE_READ | FI_REMOTE_WRITE
        );
    }

    #[test]
    fn endpoint_attributes() {
        fn shared_tx() -> Info {
            let mut e = shm_entry();
            e.domain_attr.max_ep_stx_ctx = 1;
            e
        }
        fn needs_shared() -> Info {
            let mut e = shared_tx();
            e.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT;
            e
        }
        fn narrow_tags() -> Info {
            let mut e = shm_entry();
            e.ep_attr.mem_tag_format = 0x0000_ffff_ffff_ffff;
            e
        }
        run(&[
            (
                "protocol same",
                shm_entry,
                |h| h.ep_attr.protocol = FI_PROTO_SHM,
                V2_6,
                true,
            ),
            (
                "protocol other",
                shm_entry,
                |h| h.ep_attr.protocol = FI_PROTO_EFA,
                V2_6,
                false,
            ),
            (
                "protocol version over",
                shm_entry,
                |h| h.ep_attr.protocol_version = 2,
                V2_6,
                false,
            ),
            (
                "max_msg_size over",
                shm_entry,
                |h| h.ep_attr.max_msg_size = (1 << 30) + 1,
                V2_6,
                false,
            ),
            (
                "tx_ctx_cnt 1",
                shm_entry,
                |h| h.ep_attr.tx_ctx_cnt = 1,
                V2_6,
                true,
            ),
            (
                "tx_ctx_cnt 2",
                shm_entry,
                |h| h.ep_attr.tx_ctx_cnt = 2,
                V2_6,
                false,
            ),
            (
                "rx_ctx_cnt 2",
                shm_entry,
                |h| h.ep_attr.rx_ctx_cnt = 2,
                V2_6,
                false,
            ),
            (
                "shared tx without stx",
                shm_entry,
                |h| h.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT,
                V2_6,
                false,
            ),
            (
                "shared rx without srx",
                shm_entry,
                |h| h.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT,
                V2_6,
                false,
            ),
            (
                "shared tx with stx",
                shared_tx,
                |h| h.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT,
                V2_6,
                true,
            ),
            (
                "entry needs shared, caller silent",
                needs_shared,
                |_| {},
                V2_6,
                false,
            ),
            (
                "entry needs shared, caller asks",
                needs_shared,
                |h| h.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT,
                V2_6,
                true,
            ),
            (
                "order size over without rma",
                shm_entry,
                |h| h.ep_attr.max_order_raw_size = 1 << 20,
                V2_6,
                true,
            ),
            (
                "raw order size over with rma",
                shm_entry,
                |h| {
                    h.caps = FI_RMA;
                    h.ep_attr.max_order_raw_size = 1 << 20;
                },
                V2_6,
                false,
            ),
            (
                "war order size over with atomics",
                shm_entry,
                |h| {
                    h.caps = FI_ATOMIC;
                    h.ep_attr.max_order_war_size = 1 << 20;
                },
                V2_6,
                false,
            ),
            (
                "waw order size over with rma",
                shm_entry,
                |h| {
                    h.caps = FI_RMA;
                    h.ep_attr.max_order_waw_size = 1 << 20;
                },
                V2_6,
                false,
            ),
            (
                "ep auth key size differs",
                shm_entry,
                |h| h.ep_attr.auth_key = Some(vec![0; 8]),
                V2_6,
                false,
            ),
            (
                "64 tag bits of 64",
                shm_entry,
                |h| {
                    h.caps = FI_TAGGED;
                    h.ep_attr.mem_tag_format = u64::MAX;
                },
                V2_6,
                true,
            ),
            (
                "64 tag bits of 48",
                narrow_tags,
                |h| {
                    h.caps = FI_TAGGED;
                    h.ep_attr.mem_tag_format = u64::MAX;
                },
                V2_6,
                false,
            ),
            (
                "tag bits without FI_TAGGED",
                narrow_tags,
                |h| h.ep_attr.mem_tag_format = u64::MAX,
                V2_6,
                true,
            ),
            (
                "FI_TAG_MPI format",
                narrow_tags,
                |h| {
                    h.caps = FI_TAGGED;
                    h.ep_attr.mem_tag_format = FI_TAG_MPI;
                },
                V2_6,
                true,
            ),
        ]);
    }

    #[test]
    fn transmit_and_receive_attributes() {
        fn buffered() -> Info {
            let mut e = shm_entry();
            e.rx_attr.total_buffered_recv = 65536;
            e.rx_attr.mode = FI_CONTEXT;
            e
        }
        run(&[
            (
                "rx caps offered",
                shm_entry,
                |h| h.rx_attr.caps = FI_MSG | FI_RECV,
                V2_6,
                true,
            ),
            (
                "rx caps with tx-only bits",
                shm_entry,
                |h| h.rx_attr.caps = FI_MSG | FI_SEND | FI_READ,
                V2_6,
                true,
            ),
            (
                "rx caps not offered",
                shm_entry,
                |h| h.rx_attr.caps = FI_COLLECTIVE,
                V2_6,
                false,
            ),
            (
                "rx op flags not offered",
                shm_entry,
                |h| h.rx_attr.op_flags = FI_INJECT,
                V2_6,
                false,
            ),
            (
                "rx msg order not offered",
                shm_entry,
                |h| h.rx_attr.msg_order = FI_ORDER_RAW,
                V2_6,
                false,
            ),
            (
                "rx size over",
                shm_entry,
                |h| h.rx_attr.size = 1025,
                V2_6,
                false,
            ),
            (
                "rx iov over",
                shm_entry,
                |h| h.rx_attr.iov_limit = 5,
                V2_6,
                false,
            ),
            (
                "rx mode from info mode",
                buffered,
                |h| h.mode = FI_CONTEXT,
                V2_6,
                true,
            ),
            ("rx mode missing", buffered, |_| {}, V2_6, false),
            (
                "rx mode given in rx",
                buffered,
                |h| h.rx_attr.mode = FI_CONTEXT,
                V2_6,
                true,
            ),
            (
                "tx caps offered",
                shm_entry,
                |h| h.tx_attr.caps = FI_TAGGED | FI_SEND,
                V2_6,
                true,
            ),
            (
                "tx caps with rx-only bits",
                shm_entry,
                |h| h.tx_attr.caps = FI_MSG | FI_RECV | FI_MULTI_RECV,
                V2_6,
                true,
            ),
            (
                "tx caps not offered",
                shm_entry,
                |h| h.tx_attr.caps = FI_MULTICAST | FI_COLLECTIVE,
                V2_6,
                false,
            ),
            (
                "tx op flags offered",
                shm_entry,
                |h| h.tx_attr.op_flags = FI_DELIVERY_COMPLETE,
                V2_6,
                true,
            ),
            (
                "tx op flags not offered",
                shm_entry,
                |h| h.tx_attr.op_flags = FI_COMMIT_COMPLETE,
                V2_6,
                false,
            ),
            (
                "tx msg order not offered",
                shm_entry,
                |h| h.tx_attr.msg_order = FI_ORDER_WAW,
                V2_6,
                false,
            ),
            (
                "inject over",
                shm_entry,
                |h| h.tx_attr.inject_size = 4097,
                V2_6,
                false,
            ),
            (
                "tx size over",
                shm_entry,
                |h| h.tx_attr.size = 1025,
                V2_6,
                false,
            ),
            (
                "tx iov over",
                shm_entry,
                |h| h.tx_attr.iov_limit = 5,
                V2_6,
                false,
            ),
            (
                "rma iov over",
                shm_entry,
                |h| h.tx_attr.rma_iov_limit = 5,
                V2_6,
                false,
            ),
            // Deprecated fields: the 1.x rules below 2.0, zero from 2.0 on.
            (
                "rx comp_order strict, 1.17",
                shm_entry,
                |h| h.rx_attr.comp_order = FI_ORDER_STRICT,
                V1_17,
                true,
            ),
            (
                "rx comp_order strict, 2.6",
                shm_entry,
                |h| h.rx_attr.comp_order = FI_ORDER_STRICT,
                V2_6,
                false,
            ),
            (
                "rx comp_order data, 1.17",
                shm_entry,
                |h| h.rx_attr.comp_order = FI_ORDER_DATA,
                V1_17,
                false,
            ),
            (
                "tx comp_order strict, 1.17",
                shm_entry,
                |h| h.tx_attr.comp_order = FI_ORDER_STRICT,
                V1_17,
                false,
            ),
            (
                "tx comp_order none, 2.6",
                shm_entry,
                |h| h.tx_attr.comp_order = FI_ORDER_NONE,
                V2_6,
                true,
            ),
            (
                "buffered recv within, 1.17",
                buffered,
                |h| {
                    h.mode = FI_CONTEXT;
                    h.rx_attr.total_buffered_recv = 4096;
                },
                V1_17,
                true,
            ),
            (
                "buffered recv over, 1.17",
                buffered,
                |h| {
                    h.mode = FI_CONTEXT;
                    h.rx_attr.total_buffered_recv = 65537;
                },
                V1_17,
                false,
            ),
            (
                "buffered recv, 2.6",
                buffered,
                |h| {
                    h.mode = FI_CONTEXT;
                    h.rx_attr.total_buffered_recv = 4096;
                },
                V2_6,
                false,
            ),
        ]);
    }

    #[test]
    fn answers_follow_the_hints() {
        let mut h = hints();
        h.caps = FI_MSG;
        h.handle = 0xdead0;
        h.domain_attr.threading = FI_THREAD_DOMAIN;
        h.domain_attr.progress = FI_PROGRESS_AUTO;
        h.domain_attr.av_type = FI_AV_TABLE;
        h.domain_attr.max_ep_auth_key = 0;
        h.tx_attr.op_flags = FI_DELIVERY_COMPLETE;
        h.tx_attr.inject_size = 64;
        h.tx_attr.size = 16;
        h.tx_attr.iov_limit = 2;
        h.tx_attr.rma_iov_limit = 1;
        h.rx_attr.size = 32;
        h.rx_attr.iov_limit = 1;
        let mut e = shm_entry();
        e.domain_attr.progress = FI_PROGRESS_AUTO;
        let a = answer(&e, V2_6, Some(&h));
        // Primary caps requested, secondary caps of the entry (no FI_SOURCE unless asked),
        // direction bits filled in.
        assert_eq!(
            a.caps,
            FI_MSG | FI_SEND | FI_RECV | FI_MULTI_RECV | FI_LOCAL_COMM
        );
        assert_eq!(a.tx_attr.caps, FI_MSG | FI_SEND);
        // An attribute without requested caps keeps its own secondary caps (FI_SOURCE too).
        assert_eq!(a.rx_attr.caps, FI_MSG | FI_RECV | FI_MULTI_RECV | FI_SOURCE);
        assert_eq!(a.domain_attr.caps, FI_LOCAL_COMM);
        assert_eq!(a.handle, 0xdead0);
        assert_eq!(a.domain_attr.threading, FI_THREAD_DOMAIN);
        assert_eq!(a.domain_attr.progress, FI_PROGRESS_AUTO);
        assert_eq!(a.domain_attr.control_progress, FI_PROGRESS_AUTO);
        assert_eq!(a.domain_attr.av_type, FI_AV_TABLE);
        assert_eq!(a.tx_attr.op_flags, FI_DELIVERY_COMPLETE);
        assert_eq!(
            a.rx_attr.op_flags, 0,
            "op_flags are the caller's, even when 0"
        );
        assert_eq!(
            (
                a.tx_attr.inject_size,
                a.tx_attr.size,
                a.tx_attr.iov_limit,
                a.tx_attr.rma_iov_limit
            ),
            (64, 16, 2, 1)
        );
        assert_eq!((a.rx_attr.size, a.rx_attr.iov_limit), (32, 1));
        assert_eq!(a.rx_attr.comp_order, 0, "2.x callers see 0");

        h.caps = FI_MSG | FI_SOURCE;
        assert_ne!(answer(&e, V2_6, Some(&h)).caps & FI_SOURCE, 0);
        h.caps = FI_RMA;
        h.domain_attr.mr_mode = 0;
        let a = answer(&e, V2_6, Some(&h));
        assert_eq!(
            a.caps & !SECONDARY_CAPS,
            FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE
        );

        // 1.x callers keep the entry's completion order and get their buffered-receive size.
        let mut h = hints();
        h.rx_attr.total_buffered_recv = 0;
        let a = answer(&shm_entry(), V1_17, Some(&h));
        assert_eq!(a.rx_attr.comp_order, FI_ORDER_STRICT);

        // Endpoint adjustments and auth keys.
        let mut h = hints();
        h.caps = FI_RMA | FI_MSG;
        h.ep_attr.max_order_raw_size = 128;
        h.ep_attr.tx_ctx_cnt = 1;
        let a = answer(&shm_entry(), V2_6, Some(&h));
        assert_eq!(a.ep_attr.max_order_raw_size, 128);
        assert_eq!(a.ep_attr.max_order_war_size, 1 << 16);
        let mut e = shm_entry();
        e.domain_attr.auth_key = Some(vec![7; 4]);
        e.ep_attr.auth_key = Some(vec![7; 2]);
        let mut h = hints();
        h.domain_attr.auth_key = Some(vec![1, 2, 3, 4]);
        h.ep_attr.auth_key = Some(vec![5, 6]);
        let a = answer(&e, V2_6, Some(&h));
        assert_eq!(a.domain_attr.auth_key, Some(vec![1, 2, 3, 4]));
        assert_eq!(a.ep_attr.auth_key, Some(vec![5, 6]));
    }

    #[test]
    fn caps_reused_by_2_0_are_withheld_from_1_x() {
        let mut e = shm_entry();
        e.caps |= FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV;
        e.rx_attr.caps |= FI_TAGGED_DIRECTED_RECV;
        assert_eq!(answer(&e, V1_17, None).caps & CAPS_REUSED_IN_2_0, 0);
        assert_eq!(answer(&e, V1_17, None).rx_attr.caps & CAPS_REUSED_IN_2_0, 0);
        assert_ne!(answer(&e, V2_6, None).caps & FI_TAGGED_DIRECTED_RECV, 0);
        // 1.17's FI_VARIABLE_MSG (bit 48) is not 2.x's FI_EXACT_DIRECTED_RECV.
        let mut h = hints();
        h.caps = FI_MSG | (1 << 48);
        assert!(!matches(&e, V1_17, &h));
        assert!(matches(&e, V2_6, &h));
    }

    #[test]
    fn addresses_from_hints() {
        let mut h = hints();
        h.addr_format = FI_ADDR_STR;
        h.src_addr = Some(b"src\0".to_vec());
        h.dest_addr = Some(b"dst\0".to_vec());
        let mut i = shm_entry();
        i.addr_format = FI_FORMAT_UNSPEC;
        hint_addresses(&mut i, Some(&h), 0, false);
        assert_eq!(i.src_addr.as_deref(), Some(&b"src\0"[..]));
        assert_eq!(i.dest_addr.as_deref(), Some(&b"dst\0"[..]));
        assert_eq!(i.addr_format, FI_ADDR_STR);

        let mut i = shm_entry();
        hint_addresses(&mut i, Some(&h), 0, true);
        assert!(i.dest_addr.is_none(), "node/service name the destination");
        assert!(i.src_addr.is_some());

        let mut i = shm_entry();
        hint_addresses(&mut i, Some(&h), FI_SOURCE, true);
        assert!(
            i.src_addr.is_none(),
            "FI_SOURCE: node/service name the source"
        );
        assert!(i.dest_addr.is_some());

        let mut i = shm_entry();
        hint_addresses(&mut i, None, 0, false);
        assert_eq!(i, shm_entry());
    }

    // ---- fi_getinfo over providers ----

    struct Fake {
        name: &'static str,
        entries: Vec<Info>,
        hidden: bool,
        fail: Option<Errno>,
        calls: AtomicUsize,
    }

    impl Fake {
        fn new(name: &'static str, entries: Vec<Info>) -> Fake {
            Fake {
                name,
                entries,
                hidden: false,
                fail: None,
                calls: AtomicUsize::new(0),
            }
        }
    }

    impl InfoProvider for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        fn version(&self) -> u32 {
            fi_version(206, 1)
        }
        fn getinfo(
            &self,
            version: u32,
            _node: Option<&str>,
            _service: Option<&str>,
            _flags: u64,
            hints: Option<&Info>,
        ) -> Result<Vec<Info>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(e) = self.fail {
                return Err(e);
            }
            util_getinfo(&self.entries, version, hints)
        }
        fn hidden(&self) -> bool {
            self.hidden
        }
    }

    fn entry_named(prov: &str, domain: &str, ep: u32) -> Info {
        let mut e = shm_entry();
        e.fabric_attr.name = Some(prov.into());
        e.domain_attr.name = Some(domain.into());
        e.ep_attr.type_ = ep;
        e
    }

    fn two() -> (Fake, Fake) {
        (
            Fake::new(
                "efa",
                vec![
                    entry_named("efa", "efa0-rdm", FI_EP_RDM),
                    entry_named("efa", "efa0-dgrm", FI_EP_DGRAM),
                ],
            ),
            Fake::new("shm", vec![entry_named("shm", "shm", FI_EP_RDM)]),
        )
    }

    fn run_gi(
        filter: Option<&str>,
        provs: &[&dyn InfoProvider],
        version: u32,
        flags: u64,
        hints: Option<&Info>,
    ) -> Result<Vec<(String, String)>> {
        getinfo_filtered(
            &NameFilter::parse(filter),
            provs,
            version,
            None,
            Some("1"),
            flags,
            hints,
        )
        .map(|l| {
            l.into_iter()
                .map(|i| {
                    (
                        i.fabric_attr.prov_name.unwrap_or_default(),
                        i.domain_attr.name.unwrap_or_default(),
                    )
                })
                .collect()
        })
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn versions() {
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        assert_eq!(
            run_gi(None, &provs, fi_version(2, 7), 0, None),
            Err(Errno::NOSYS)
        );
        assert_eq!(
            run_gi(None, &provs, fi_version(3, 0), 0, None),
            Err(Errno::NOSYS)
        );
        for v in [V1_0, V1_4, V1_17, V1_21, V2_6] {
            assert!(run_gi(None, &provs, v, 0, None).is_ok(), "{v:x}");
        }
    }

    #[test]
    fn stamping_and_order() {
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        let list =
            getinfo_filtered(&NameFilter::default(), &provs, V1_17, None, None, 0, None).unwrap();
        assert_eq!(list.len(), 3);
        for (i, prov) in list.iter().zip(["efa", "efa", "shm"]) {
            assert_eq!(i.fabric_attr.prov_name.as_deref(), Some(prov));
            assert_eq!(i.fabric_attr.prov_version, fi_version(206, 1));
            assert_eq!(i.fabric_attr.api_version, V1_17);
        }
        assert_eq!(list[0].domain_attr.name.as_deref(), Some("efa0-rdm"));
        assert_eq!(list[1].domain_attr.name.as_deref(), Some("efa0-dgrm"));
        assert_eq!(run_gi(None, &[], V2_6, 0, None), Err(Errno::NODATA));
    }

    #[test]
    fn prov_attr_only() {
        let (efa, mut shm) = two();
        shm.hidden = true;
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        // Every provider, hidden or filtered out, with its name and version only.
        let list = getinfo_filtered(
            &NameFilter::parse(Some("efa")),
            &provs,
            V1_17,
            None,
            None,
            FI_PROV_ATTR_ONLY,
            None,
        )
        .unwrap();
        let names: Vec<_> = list
            .iter()
            .map(|i| i.fabric_attr.prov_name.clone().unwrap())
            .collect();
        assert_eq!(names, ["efa", "shm"]);
        assert_eq!(list[1].fabric_attr.prov_version, fi_version(206, 1));
        assert_eq!(list[1].fabric_attr.api_version, 0);
        assert_eq!(list[1].domain_attr, DomainAttr::default());
        assert_eq!(
            efa.calls.load(Ordering::SeqCst),
            0,
            "providers are not asked"
        );
        assert_eq!(
            getinfo_filtered(
                &NameFilter::default(),
                &[],
                V1_17,
                None,
                None,
                FI_PROV_ATTR_ONLY,
                None
            ),
            Err(Errno::NODATA)
        );
        // Only the exact flag value means "attributes only".
        assert_eq!(
            getinfo_filtered(
                &NameFilter::default(),
                &provs,
                V1_17,
                None,
                None,
                FI_PROV_ATTR_ONLY | FI_SOURCE,
                None
            ),
            Err(Errno::INVAL)
        );
    }

    #[test]
    fn source_needs_node_or_service() {
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        let f = NameFilter::default();
        assert_eq!(
            getinfo_filtered(&f, &provs, V2_6, None, None, FI_SOURCE, None),
            Err(Errno::INVAL)
        );
        assert!(getinfo_filtered(&f, &provs, V2_6, Some("host"), None, FI_SOURCE, None).is_ok());
        assert!(getinfo_filtered(&f, &provs, V2_6, None, Some("7"), FI_SOURCE, None).is_ok());
        assert!(getinfo_filtered(&f, &provs, V2_6, None, None, 0, None).is_ok());
    }

    #[test]
    fn fi_provider_filter() {
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        let all = pairs(&[("efa", "efa0-rdm"), ("efa", "efa0-dgrm"), ("shm", "shm")]);
        assert_eq!(run_gi(None, &provs, V2_6, 0, None).unwrap(), all);
        assert_eq!(
            run_gi(Some("shm"), &provs, V2_6, 0, None).unwrap(),
            pairs(&[("shm", "shm")])
        );
        assert_eq!(run_gi(Some("SHM,efa"), &provs, V2_6, 0, None).unwrap(), all);
        assert_eq!(
            run_gi(Some("^shm"), &provs, V2_6, 0, None).unwrap(),
            pairs(&[("efa", "efa0-rdm"), ("efa", "efa0-dgrm")])
        );
        assert_eq!(
            run_gi(Some("^shm,efa"), &provs, V2_6, 0, None),
            Err(Errno::NODATA)
        );
        // A layered name keeps its core provider registered, but only layered answers pass.
        assert_eq!(
            run_gi(Some("shm;ofi_rxm"), &provs, V2_6, 0, None),
            Err(Errno::NODATA)
        );
        assert_eq!(
            run_gi(Some("ofi_rxm"), &provs, V2_6, 0, None),
            Err(Errno::NODATA)
        );
        assert_eq!(run_gi(Some(""), &provs, V2_6, 0, None), Err(Errno::NODATA));
        assert_eq!(
            run_gi(Some("shm "), &provs, V2_6, 0, None),
            Err(Errno::NODATA)
        );
        assert_eq!(
            shm.calls.load(Ordering::SeqCst),
            4,
            "filtered providers are not asked"
        );
    }

    #[test]
    fn hints_prov_name() {
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        let with = |name: &str| {
            let mut h = hints();
            h.fabric_attr.prov_name = Some(name.into());
            run_gi(None, &provs, V2_6, 0, Some(&h))
        };
        assert_eq!(with("shm").unwrap(), pairs(&[("shm", "shm")]));
        assert_eq!(with("EFA").unwrap().len(), 2);
        assert_eq!(with("^efa").unwrap(), pairs(&[("shm", "shm")]));
        assert_eq!(with("shm;^efa").unwrap(), pairs(&[("shm", "shm")]));
        assert_eq!(with("efa;^efa"), Err(Errno::NODATA));
        assert_eq!(with("^efa;^shm"), Err(Errno::NODATA));
        assert_eq!(
            with("ofi_rxm;shm"),
            Err(Errno::NODATA),
            "util over core: the util answers"
        );
        assert_eq!(with("shm;ofi_rxm"), Err(Errno::NODATA));
        assert_eq!(with("tcp"), Err(Errno::NODATA));
        assert_eq!(with(""), Err(Errno::NODATA));
        assert_eq!(
            with("a;b;shm").unwrap(),
            pairs(&[("shm", "shm")]),
            "the last name"
        );
    }

    #[test]
    fn domain_and_fabric_name_filters() {
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        let mut h = hints();
        h.domain_attr.name = Some("EFA0-RDM".into());
        assert_eq!(
            run_gi(None, &provs, V2_6, 0, Some(&h)).unwrap(),
            pairs(&[("efa", "efa0-rdm")])
        );
        h.domain_attr.name = Some("efa0".into());
        assert_eq!(
            run_gi(None, &provs, V2_6, 0, Some(&h)),
            Err(Errno::NODATA),
            "no prefix match"
        );
        let mut h = hints();
        h.fabric_attr.name = Some("Shm".into());
        assert_eq!(
            run_gi(None, &provs, V2_6, 0, Some(&h)).unwrap(),
            pairs(&[("shm", "shm")])
        );
        h.fabric_attr.name = Some("nope".into());
        assert_eq!(run_gi(None, &provs, V2_6, 0, Some(&h)), Err(Errno::NODATA));
    }

    #[test]
    fn failing_and_hidden_providers_are_skipped() {
        let (mut efa, mut shm) = two();
        efa.fail = Some(Errno::NOMEM);
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        assert_eq!(
            run_gi(None, &provs, V2_6, 0, None).unwrap(),
            pairs(&[("shm", "shm")])
        );
        shm.hidden = true;
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        assert_eq!(run_gi(None, &provs, V2_6, 0, None), Err(Errno::NODATA));
        assert_eq!(shm.calls.load(Ordering::SeqCst), 1);
        let mut h = hints();
        h.ep_attr.type_ = FI_EP_MSG;
        let (efa, shm) = two();
        let provs: [&dyn InfoProvider; 2] = [&efa, &shm];
        assert_eq!(run_gi(None, &provs, V2_6, 0, Some(&h)), Err(Errno::NODATA));
    }

    #[test]
    fn tcp_before_rxm_over_tcp() {
        let mk = |p: &str, d: &str, ep: u32| {
            let mut i = entry_named(p, d, ep);
            i.fabric_attr.prov_name = Some(p.into());
            i
        };
        let mut list = vec![
            mk("tcp;ofi_rxm", "a", FI_EP_RDM),
            mk("shm", "b", FI_EP_RDM),
            mk("tcp;ofi_rxm", "c", FI_EP_RDM),
            mk("tcp", "d", FI_EP_MSG),
            mk("tcp", "e", FI_EP_RDM),
        ];
        reorder(&mut list);
        let got: Vec<_> = list
            .iter()
            .map(|i| i.domain_attr.name.clone().unwrap())
            .collect();
        assert_eq!(got, ["e", "a", "b", "c", "d"]);
        let mut list = vec![mk("shm", "b", FI_EP_RDM), mk("tcp", "e", FI_EP_RDM)];
        reorder(&mut list);
        let got: Vec<_> = list
            .iter()
            .map(|i| i.domain_attr.name.clone().unwrap())
            .collect();
        assert_eq!(got, ["b", "e"]);
    }

    #[test]
    fn unknown_provider_names_are_warned_about() {
        let known = ["efa", "shm"];
        assert!(unknown_provider_warnings(&NameFilter::parse(Some("efa,shm")), &known).is_empty());
        assert!(unknown_provider_warnings(&NameFilter::parse(None), &known).is_empty());
        let w = unknown_provider_warnings(&NameFilter::parse(Some("shmx")), &known);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("\"shmx\"") && w[0].contains("did you mean \"shm\""),
            "{w:?}"
        );
        let w = unknown_provider_warnings(&NameFilter::parse(Some("^efa;ofi_rxm,tcp")), &known);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("ofi_rxm") && !w[0].contains("did you mean"));
        assert!(w[1].contains("\"tcp\""));
        assert!(close_names("efa", "EFX"));
        assert!(close_names("shm", "sm"));
        assert!(!close_names("shm", "tcp"));
    }

    #[test]
    fn helpers() {
        assert_eq!(max_tag(0), 0);
        assert_eq!(max_tag(1), 1);
        assert_eq!(max_tag(0xaaaa_aaaa_aaaa_aaaa), u64::MAX);
        assert_eq!(max_tag(0x0000_ffff_0000_0000), (1 << 48) - 1);
        assert!(rma_target_allowed(FI_RMA));
        assert!(rma_target_allowed(FI_RMA | FI_READ | FI_REMOTE_READ));
        assert!(!rma_target_allowed(FI_RMA | FI_READ));
        assert!(!rma_target_allowed(FI_MSG | FI_REMOTE_READ));
        assert!(layering_ok("shm", &[]));
        assert!(layering_ok("shm", &["^efa"]));
        assert!(!layering_ok("shm", &["efa"]));
        assert!(!layering_ok("shm", &["ofi_rxm", "^tcp"]));
    }
}
