//! The `#[repr(C)]` mirrors of rdma-core's structs (`device::verbs::ffi`) against Debian's
//! `infiniband/verbs.h` and `infiniband/efadv.h` (package libibverbs-dev): a C probe,
//! generated here from the same list the Rust side is measured with, prints every size,
//! offset and constant; each must equal Rust's. The hardware device calls the inline verbs
//! (ibv_post_recv, ibv_wr_*, ibv_start_poll…) through function pointers at these offsets, so a
//! wrong one would jump into the weeds on a real NIC, where the emulated one cannot tell.

use core::mem::{offset_of, size_of};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use fabric::prov::efa::device::verbs::ffi::*;

const HEADERS: &str = "/usr/include/infiniband/efadv.h";

/// (key, Rust value, C expression).
type Item = (String, u64, String);

macro_rules! layout {
    ($v:ident, $t:ty, $c:literal, [$($f:ident),* $(,)?]) => {{
        $v.push((format!("size {}", $c), size_of::<$t>() as u64, format!("sizeof({})", $c)));
        $($v.push((
            format!("offset {}.{}", $c, stringify!($f)),
            offset_of!($t, $f) as u64,
            format!("offsetof({}, {})", $c, stringify!($f)),
        ));)*
    }};
}

macro_rules! consts {
    ($v:ident, [$($k:ident),* $(,)?]) => {{
        $($v.push((
            format!("const {}", stringify!($k)),
            $k as u64,
            format!("(unsigned long long){}", stringify!($k)),
        ));)*
    }};
}

fn items() -> Vec<Item> {
    let mut v: Vec<Item> = Vec::new();
    layout!(v, IbvGid, "union ibv_gid", [raw]);
    layout!(
        v,
        IbvDeviceAttr,
        "struct ibv_device_attr",
        [
            fw_ver,
            node_guid,
            sys_image_guid,
            max_mr_size,
            page_size_cap,
            vendor_id,
            vendor_part_id,
            hw_ver,
            max_qp,
            max_qp_wr,
            device_cap_flags,
            max_sge,
            max_sge_rd,
            max_cq,
            max_cqe,
            max_mr,
            max_pd,
            max_qp_rd_atom,
            max_ee_rd_atom,
            max_res_rd_atom,
            max_qp_init_rd_atom,
            max_ee_init_rd_atom,
            atomic_cap,
            max_ee,
            max_rdd,
            max_mw,
            max_raw_ipv6_qp,
            max_raw_ethy_qp,
            max_mcast_grp,
            max_mcast_qp_attach,
            max_total_mcast_qp_attach,
            max_ah,
            max_fmr,
            max_map_per_fmr,
            max_srq,
            max_srq_wr,
            max_srq_sge,
            max_pkeys,
            local_ca_ack_delay,
            phys_port_cnt,
        ]
    );
    layout!(
        v,
        IbvPortAttr,
        "struct ibv_port_attr",
        [
            state,
            max_mtu,
            active_mtu,
            gid_tbl_len,
            port_cap_flags,
            max_msg_sz,
            bad_pkey_cntr,
            qkey_viol_cntr,
            pkey_tbl_len,
            lid,
            sm_lid,
            lmc,
            max_vl_num,
            sm_sl,
            subnet_timeout,
            init_type_reply,
            active_width,
            active_speed,
            phys_state,
            link_layer,
            flags,
            port_cap_flags2,
        ]
    );
    layout!(v, IbvPd, "struct ibv_pd", [context, handle]);
    layout!(
        v,
        IbvMr,
        "struct ibv_mr",
        [context, pd, addr, length, handle, lkey, rkey]
    );
    layout!(
        v,
        IbvGlobalRoute,
        "struct ibv_global_route",
        [dgid, flow_label, sgid_index, hop_limit, traffic_class,]
    );
    layout!(
        v,
        IbvAhAttr,
        "struct ibv_ah_attr",
        [
            grh,
            dlid,
            sl,
            src_path_bits,
            static_rate,
            is_global,
            port_num,
        ]
    );
    layout!(
        v,
        IbvQpCap,
        "struct ibv_qp_cap",
        [
            max_send_wr,
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data,
        ]
    );
    layout!(
        v,
        IbvRxHashConf,
        "struct ibv_rx_hash_conf",
        [
            rx_hash_function,
            rx_hash_key_len,
            rx_hash_key,
            rx_hash_fields_mask,
        ]
    );
    layout!(
        v,
        IbvQpInitAttrEx,
        "struct ibv_qp_init_attr_ex",
        [
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type,
            sq_sig_all,
            comp_mask,
            pd,
            xrcd,
            create_flags,
            max_tso_header,
            rwq_ind_tbl,
            rx_hash_conf,
            source_qpn,
            send_ops_flags,
        ]
    );
    layout!(
        v,
        IbvQpAttr,
        "struct ibv_qp_attr",
        [
            qp_state,
            cur_qp_state,
            path_mtu,
            path_mig_state,
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num,
            qp_access_flags,
            cap,
            ah_attr,
            alt_ah_attr,
            pkey_index,
            alt_pkey_index,
            en_sqd_async_notify,
            sq_draining,
            max_rd_atomic,
            max_dest_rd_atomic,
            min_rnr_timer,
            port_num,
            timeout,
            retry_cnt,
            rnr_retry,
            alt_port_num,
            alt_timeout,
            rate_limit,
        ]
    );
    layout!(v, IbvSge, "struct ibv_sge", [addr, length, lkey]);
    layout!(
        v,
        IbvRecvWr,
        "struct ibv_recv_wr",
        [wr_id, next, sg_list, num_sge]
    );
    layout!(
        v,
        IbvCqInitAttrEx,
        "struct ibv_cq_init_attr_ex",
        [
            cqe,
            cq_context,
            channel,
            comp_vector,
            wc_flags,
            comp_mask,
            flags,
            parent_domain,
        ]
    );
    layout!(v, IbvPollCqAttr, "struct ibv_poll_cq_attr", [comp_mask]);
    layout!(
        v,
        EfadvDeviceAttr,
        "struct efadv_device_attr",
        [
            comp_mask,
            max_sq_wr,
            max_rq_wr,
            max_sq_sge,
            max_rq_sge,
            inline_buf_size,
            reserved,
            device_caps,
            max_rdma_size,
        ]
    );
    layout!(
        v,
        EfadvQpInitAttr,
        "struct efadv_qp_init_attr",
        [comp_mask, driver_qp_type, reserved,]
    );
    layout!(
        v,
        EfadvCqInitAttr,
        "struct efadv_cq_init_attr",
        [comp_mask, wc_flags]
    );
    layout!(
        v,
        EfadvAhAttr,
        "struct efadv_ah_attr",
        [comp_mask, ahn, reserved]
    );
    layout!(v, EfadvCq, "struct efadv_cq", [comp_mask, wc_read_sgid]);
    layout!(
        v,
        IbvContextOps,
        "struct ibv_context_ops",
        [post_srq_recv, post_send, post_recv]
    );
    layout!(
        v,
        IbvContext,
        "struct ibv_context",
        [
            device,
            ops,
            cmd_fd,
            async_fd,
            num_comp_vectors,
            mutex,
            abi_compat,
        ]
    );
    layout!(
        v,
        IbvQp,
        "struct ibv_qp",
        [
            context,
            qp_context,
            pd,
            send_cq,
            recv_cq,
            srq,
            handle,
            qp_num,
            state,
            qp_type,
            mutex,
            cond,
            events_completed,
        ]
    );
    layout!(
        v,
        IbvQpEx,
        "struct ibv_qp_ex",
        [
            qp_base,
            comp_mask,
            wr_id,
            wr_flags,
            wr_atomic_cmp_swp,
            wr_atomic_fetch_add,
            wr_bind_mw,
            wr_local_inv,
            wr_rdma_read,
            wr_rdma_write,
            wr_rdma_write_imm,
            wr_send,
            wr_send_imm,
            wr_send_inv,
            wr_send_tso,
            wr_set_ud_addr,
            wr_set_xrc_srqn,
            wr_set_inline_data,
            wr_set_inline_data_list,
            wr_set_sge,
            wr_set_sge_list,
            wr_start,
            wr_complete,
            wr_abort,
            wr_atomic_write,
        ]
    );
    layout!(
        v,
        IbvCqEx,
        "struct ibv_cq_ex",
        [
            context,
            channel,
            cq_context,
            handle,
            cqe,
            mutex,
            cond,
            comp_events_completed,
            async_events_completed,
            comp_mask,
            status,
            wr_id,
            start_poll,
            next_poll,
            end_poll,
            read_opcode,
            read_vendor_err,
            read_byte_len,
            read_imm_data,
            read_qp_num,
            read_src_qp,
            read_wc_flags,
            read_slid,
            read_sl,
            read_dlid_path_bits,
            read_completion_ts,
            read_cvlan,
            read_flow_tag,
            read_tm_info,
            read_completion_wallclock_ns,
        ]
    );
    consts!(
        v,
        [
            IBV_QPT_DRIVER,
            IBV_QP_STATE,
            IBV_QP_PKEY_INDEX,
            IBV_QP_PORT,
            IBV_QP_QKEY,
            IBV_QP_RNR_RETRY,
            IBV_QP_SQ_PSN,
            IBV_QPS_RESET,
            IBV_QPS_INIT,
            IBV_QPS_RTR,
            IBV_QPS_RTS,
            IBV_QP_INIT_ATTR_PD,
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            IBV_QP_EX_WITH_RDMA_WRITE,
            IBV_QP_EX_WITH_SEND,
            IBV_QP_EX_WITH_SEND_WITH_IMM,
            IBV_QP_EX_WITH_RDMA_READ,
            IBV_SEND_SIGNALED,
            IBV_ACCESS_LOCAL_WRITE,
            IBV_ACCESS_REMOTE_WRITE,
            IBV_ACCESS_REMOTE_READ,
            IBV_WC_SUCCESS,
            IBV_WC_RNR_RETRY_EXC_ERR,
            IBV_WC_GENERAL_ERR,
            IBV_WC_SEND,
            IBV_WC_RECV,
            IBV_WC_EX_WITH_BYTE_LEN,
            IBV_WC_EX_WITH_SRC_QP,
            IBV_WC_EX_WITH_SLID,
            IBV_PORT_ACTIVE,
            IBV_PORT_DOWN,
            EFADV_QP_DRIVER_TYPE_SRD,
            EFADV_DEVICE_ATTR_CAPS_RDMA_READ,
            EFADV_DEVICE_ATTR_CAPS_RNR_RETRY,
            EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID,
            EFADV_WC_EX_WITH_SGID,
        ]
    );
    v
}

#[test]
fn mirrors_match_debians_rdma_core_headers() {
    assert!(
        Path::new(HEADERS).exists(),
        "{HEADERS} is missing: install libibverbs-dev (`make deps`)"
    );
    let items = items();
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         #include <infiniband/efadv.h>\nint main(void) {\n",
    );
    for (key, _, expr) in &items {
        c += &format!("  printf(\"%s %llu\\n\", \"{key}\", (unsigned long long)({expr}));\n");
    }
    c += "  return 0;\n}\n";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("verbs_probe.c");
    let exe = dir.join("verbs_probe");
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args(["-w", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(
        st.success(),
        "the probe does not compile against rdma-core's headers"
    );
    let out = Command::new(&exe).output().expect("run the probe");
    assert!(out.status.success());
    let c_side: BTreeMap<String, u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let wrong: Vec<String> = items
        .iter()
        .filter(|(k, r, _)| c_side.get(k) != Some(r))
        .map(|(k, r, _)| format!("{k}: Rust {r}, C {:?}", c_side.get(k)))
        .collect();
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    assert!(items.len() > 250, "{} items checked", items.len());
}

/// EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE is newer than Debian's efadv.h: the next bit after the
/// ones it has.
#[test]
fn rdma_write_cap_is_the_bit_after_debians() {
    assert_eq!(
        EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE,
        EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID << 1
    );
}

/// EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV is newer still (rdma-core 44's efadv.h has
/// neither): the bit after RDMA write, as rdma-core's later headers define it.
#[test]
fn unsolicited_write_recv_cap_is_the_bit_after_rdma_write() {
    assert_eq!(
        EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV,
        EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE << 1
    );
}
