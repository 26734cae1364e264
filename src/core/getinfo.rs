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
mod tests;
