//! Tests of `getinfo`: hint matching attribute by attribute, answers per API version, address
//! hints, `FI_PROVIDER` and name filters, provider order and skipped providers.

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
                h.domain_attr.mr_mode = (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
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
                h.domain_attr.mr_mode = (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
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
