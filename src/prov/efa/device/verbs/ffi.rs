//! rdma-core's C types, as far as the hardware device uses them, and the one table of
//! function pointers every verbs call goes through ([`Verbs`]).
//!
//! The structs mirror Debian's `infiniband/verbs.h` and `infiniband/efadv.h` (rdma-core 44,
//! package `libibverbs-dev`); `tests/verbs_layout.rs` compiles a probe against those headers
//! and checks every size and offset here. Handles (context, PD, MR, CQ, QP, AH) are opaque
//! to the device: only the table's functions look inside them, so the same device code runs
//! over libibverbs ([`load`]) and over the in-process emulated NIC (`emul`), whose handles
//! are plain numbers.
//!
//! Much of the verbs API is `static inline` in verbs.h (ibv_post_recv, ibv_wr_*,
//! ibv_start_poll and friends, efadv_wc_read_sgid): there is no symbol to `dlsym`. Those
//! calls go through function pointers stored in the context, QP and CQ structs, which the
//! `hw_*` functions below follow exactly as the inline functions do.

use core::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

// ---- opaque handles ----

/// `struct ibv_device` (only ever passed back to libibverbs).
pub enum IbvDevice {}
/// `struct ibv_context`.
pub enum Ctx {}
/// `struct ibv_pd`.
pub enum Pd {}
/// `struct ibv_mr`.
pub enum Mr {}
/// `struct ibv_cq_ex` (created by `efadv_create_cq`).
pub enum Cq {}
/// `struct ibv_qp` of an SRD QP created by `efadv_create_qp_ex` (also its `ibv_qp_ex`).
pub enum Qp {}
/// `struct ibv_ah`.
pub enum Ah {}

// ---- constants (verbs.h, efadv.h) ----

pub const IBV_QPT_DRIVER: u32 = 0xff;
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_SEND_SIGNALED: u32 = 1 << 1;
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
pub const IBV_WC_GENERAL_ERR: u32 = 21;
pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_RECV: u32 = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = 129;
pub const IBV_WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
pub const IBV_WC_EX_WITH_IMM: u64 = 1 << 1;
pub const IBV_WC_EX_WITH_SRC_QP: u64 = 1 << 3;
pub const IBV_WC_EX_WITH_SLID: u64 = 1 << 4;
pub const IBV_PORT_ACTIVE: u32 = 4;
pub const IBV_PORT_DOWN: u32 = 1;
pub const EFADV_QP_DRIVER_TYPE_SRD: u32 = 0;
pub const EFADV_DEVICE_ATTR_CAPS_RDMA_READ: u32 = 1 << 0;
pub const EFADV_DEVICE_ATTR_CAPS_RNR_RETRY: u32 = 1 << 1;
pub const EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID: u32 = 1 << 2;
/// Newer than Debian's efadv.h (rdma-core 45 adds it): device RDMA write.
pub const EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE: u32 = 1 << 3;
/// Newer than Debian's efadv.h (rdma-core 44 lacks it; the value is rdma-core's later
/// efadv.h, efadv_query_device(3)): a QP may take writes with immediate data without a
/// posted receive.
pub const EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV: u32 = 1 << 4;
pub const EFADV_WC_EX_WITH_SGID: u64 = 1 << 0;
/// `efadv_mr_attr.ic_id_validity` bits (rdma-core 49's efadv.h, newer than Debian's): the
/// same bits as `FI_EFA_MR_ATTR_*` of fi_ext_efa.h.
pub const EFADV_MR_ATTR_VALIDITY_RECV_IC_ID: u16 = 1 << 0;
pub const EFADV_MR_ATTR_VALIDITY_RDMA_READ_IC_ID: u16 = 1 << 1;
pub const EFADV_MR_ATTR_VALIDITY_RDMA_RECV_IC_ID: u16 = 1 << 2;
/// `slid` of a receive completion whose sender has no address handle here (EFA reports the
/// AH number there, this value when unknown; the GID is then read with
/// `efadv_wc_read_sgid`).
pub const EFA_AHN_UNKNOWN: u32 = 0xffff;

/// EFA completion statuses (`vendor_err`, efa-reference §6): the ones the device tells
/// apart. The RDM layer reports them as `prov_errno`.
pub mod efa_status {
    /// The local buffer is not covered by a registration of the QP's PD with that lkey.
    pub const LOCAL_ERROR_INVALID_LKEY: u32 = 5;
    pub const LOCAL_ERROR_BAD_LENGTH: u32 = 6;
    /// RDMA to a remote range its rkey does not cover (or allow): "remote bad address".
    pub const REMOTE_ERROR_BAD_ADDRESS: u32 = 7;
    pub const REMOTE_ERROR_BAD_DEST_QPN: u32 = 9;
    pub const REMOTE_ERROR_RNR: u32 = 10;
    pub const REMOTE_ERROR_BAD_LENGTH: u32 = 11;
    pub const LOCAL_ERROR_UNRESP_REMOTE: u32 = 13;
    pub const LOCAL_ERROR_UNREACH_REMOTE: u32 = 15;
}

// ---- structs ----

/// `union ibv_gid` (16 bytes, aligned as its `__be64` view is).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

impl Default for IbvDeviceAttr {
    fn default() -> Self {
        IbvDeviceAttr {
            fw_ver: [0; 64],
            node_guid: 0,
            sys_image_guid: 0,
            max_mr_size: 0,
            page_size_cap: 0,
            vendor_id: 0,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: 0,
            max_qp_wr: 0,
            device_cap_flags: 0,
            max_sge: 0,
            max_sge_rd: 0,
            max_cq: 0,
            max_cqe: 0,
            max_mr: 0,
            max_pd: 0,
            max_qp_rd_atom: 0,
            max_ee_rd_atom: 0,
            max_res_rd_atom: 0,
            max_qp_init_rd_atom: 0,
            max_ee_init_rd_atom: 0,
            atomic_cap: 0,
            max_ee: 0,
            max_rdd: 0,
            max_mw: 0,
            max_raw_ipv6_qp: 0,
            max_raw_ethy_qp: 0,
            max_mcast_grp: 0,
            max_mcast_qp_attach: 0,
            max_total_mcast_qp_attach: 0,
            max_ah: 0,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: 0,
            max_srq_wr: 0,
            max_srq_sge: 0,
            max_pkeys: 0,
            local_ca_ack_delay: 0,
            phys_port_cnt: 0,
        }
    }
}

/// `struct ibv_port_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvPortAttr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct IbvPd {
    pub context: *mut Ctx,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    pub context: *mut Ctx,
    pub pd: *mut Pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_rx_hash_conf`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvRxHashConf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvQpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut Cq,
    pub recv_cq: *mut Cq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut Pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: IbvRxHashConf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

impl Default for IbvQpInitAttrEx {
    fn default() -> Self {
        let null = core::ptr::null_mut();
        IbvQpInitAttrEx {
            qp_context: null,
            send_cq: core::ptr::null_mut(),
            recv_cq: core::ptr::null_mut(),
            srq: null,
            cap: IbvQpCap::default(),
            qp_type: 0,
            sq_sig_all: 0,
            comp_mask: 0,
            pd: core::ptr::null_mut(),
            xrcd: null,
            create_flags: 0,
            max_tso_header: 0,
            rwq_ind_tbl: null,
            rx_hash_conf: IbvRxHashConf {
                rx_hash_function: 0,
                rx_hash_key_len: 0,
                rx_hash_key: core::ptr::null_mut(),
                rx_hash_fields_mask: 0,
            },
            source_qpn: 0,
            send_ops_flags: 0,
        }
    }
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvQpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvCqInitAttrEx {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut c_void,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut Pd,
}

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvPollCqAttr {
    pub comp_mask: u32,
}

/// `struct efadv_device_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct EfadvDeviceAttr {
    pub comp_mask: u64,
    pub max_sq_wr: u32,
    pub max_rq_wr: u32,
    pub max_sq_sge: u16,
    pub max_rq_sge: u16,
    pub inline_buf_size: u16,
    pub reserved: [u8; 2],
    pub device_caps: u32,
    pub max_rdma_size: u32,
}

/// `struct efadv_qp_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct EfadvQpInitAttr {
    pub comp_mask: u64,
    pub driver_qp_type: u32,
    pub reserved: [u8; 4],
}

/// `struct efadv_cq_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct EfadvCqInitAttr {
    pub comp_mask: u64,
    pub wc_flags: u64,
}

/// `struct efadv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct EfadvAhAttr {
    pub comp_mask: u64,
    pub ahn: u16,
    pub reserved: [u8; 6],
}

/// `struct efadv_mr_attr` (rdma-core 49 and later: not in Debian's efadv.h, so the layout probe
/// cannot check it; efadv_query_mr(3) gives it as four u16 after a u64).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EfadvMrAttr {
    pub comp_mask: u64,
    pub ic_id_validity: u16,
    pub recv_ic_id: u16,
    pub rdma_read_ic_id: u16,
    pub rdma_recv_ic_id: u16,
}

/// `struct efadv_cq`: the SGID reader behind the inline `efadv_wc_read_sgid`.
#[repr(C)]
pub struct EfadvCq {
    pub comp_mask: u64,
    pub wc_read_sgid: unsafe extern "C" fn(*mut EfadvCq, *mut IbvGid) -> c_int,
}

/// `struct ibv_context_ops`: only `post_send` and `post_recv` are called (the inline
/// `ibv_post_send`/`ibv_post_recv`); the rest are placeholders of the right size.
#[repr(C)]
pub struct IbvContextOps {
    pub _before_post_srq_recv: [*mut c_void; 20],
    pub post_srq_recv: *mut c_void,
    pub _compat_qp: [*mut c_void; 4],
    pub post_send: *mut c_void,
    pub post_recv: unsafe extern "C" fn(*mut Qp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int,
    pub _after: [*mut c_void; 5],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: IbvContextOps,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut Pd,
    pub send_cq: *mut Cq,
    pub recv_cq: *mut Cq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

type QpFn = unsafe extern "C" fn(*mut IbvQpEx);

/// `struct ibv_qp_ex`: the extended send API (`ibv_wr_*` are inline calls through it).
#[repr(C)]
pub struct IbvQpEx {
    pub qp_base: IbvQp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: u32,
    pub wr_atomic_cmp_swp: *mut c_void,
    pub wr_atomic_fetch_add: *mut c_void,
    pub wr_bind_mw: *mut c_void,
    pub wr_local_inv: *mut c_void,
    pub wr_rdma_read: unsafe extern "C" fn(*mut IbvQpEx, u32, u64),
    pub wr_rdma_write: unsafe extern "C" fn(*mut IbvQpEx, u32, u64),
    pub wr_rdma_write_imm: unsafe extern "C" fn(*mut IbvQpEx, u32, u64, u32),
    pub wr_send: QpFn,
    pub wr_send_imm: unsafe extern "C" fn(*mut IbvQpEx, u32),
    pub wr_send_inv: *mut c_void,
    pub wr_send_tso: *mut c_void,
    pub wr_set_ud_addr: unsafe extern "C" fn(*mut IbvQpEx, *mut Ah, u32, u32),
    pub wr_set_xrc_srqn: *mut c_void,
    pub wr_set_inline_data: *mut c_void,
    pub wr_set_inline_data_list: *mut c_void,
    pub wr_set_sge: *mut c_void,
    pub wr_set_sge_list: unsafe extern "C" fn(*mut IbvQpEx, usize, *const IbvSge),
    pub wr_start: QpFn,
    pub wr_complete: unsafe extern "C" fn(*mut IbvQpEx) -> c_int,
    pub wr_abort: QpFn,
    pub wr_atomic_write: *mut c_void,
}

type CqRead32 = unsafe extern "C" fn(*mut IbvCqEx) -> u32;

/// `struct ibv_cq_ex`: polling (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`,
/// `ibv_wc_read_*` are inline calls through it).
#[repr(C)]
pub struct IbvCqEx {
    pub context: *mut IbvContext,
    pub channel: *mut c_void,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    pub status: u32,
    pub wr_id: u64,
    pub start_poll: unsafe extern "C" fn(*mut IbvCqEx, *mut IbvPollCqAttr) -> c_int,
    pub next_poll: unsafe extern "C" fn(*mut IbvCqEx) -> c_int,
    pub end_poll: unsafe extern "C" fn(*mut IbvCqEx),
    pub read_opcode: CqRead32,
    pub read_vendor_err: CqRead32,
    pub read_byte_len: CqRead32,
    pub read_imm_data: CqRead32,
    pub read_qp_num: CqRead32,
    pub read_src_qp: CqRead32,
    pub read_wc_flags: CqRead32,
    pub read_slid: CqRead32,
    pub read_sl: *mut c_void,
    pub read_dlid_path_bits: *mut c_void,
    pub read_completion_ts: *mut c_void,
    pub read_cvlan: *mut c_void,
    pub read_flow_tag: *mut c_void,
    pub read_tm_info: *mut c_void,
    pub read_completion_wallclock_ns: *mut c_void,
}

/// One work completion, read in full by [`Verbs::wc`] between start/next and end of a poll.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub vendor_err: u32,
    pub opcode: u32,
    pub byte_len: u32,
    pub src_qp: u32,
    /// The sender's address handle number on EFA ([`EFA_AHN_UNKNOWN`] when none here).
    pub slid: u32,
    /// The immediate data of an RDMA write with immediate (host order).
    pub imm: u32,
}

/// The RDMA operation of a work request built with [`Verbs::wr_rdma`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaKind {
    /// `ibv_wr_rdma_read`: remote memory into the local SGEs.
    Read,
    /// `ibv_wr_rdma_write`: the local SGEs into remote memory, unseen by the target's CQ.
    Write,
    /// `ibv_wr_rdma_write_imm`: as `Write`, then a receive completion at the target carrying
    /// the immediate (host order here; the table converts to the wire's big-endian).
    WriteImm(u32),
}

/// The verbs calls of the hardware device: one table, filled from libibverbs and libefa
/// ([`load`]) or by tests with the emulated NIC (`emul::verbs`). Each entry has the C
/// function's shape, with the inline verbs of verbs.h as entries of their own; the
/// extended-QP and extended-CQ accessors take the QP or CQ handle.
pub struct Verbs {
    pub get_device_list: unsafe fn(*mut c_int) -> *mut *mut IbvDevice,
    pub free_device_list: unsafe fn(*mut *mut IbvDevice),
    pub get_device_name: unsafe fn(*mut IbvDevice) -> *const c_char,
    pub open_device: unsafe fn(*mut IbvDevice) -> *mut Ctx,
    pub close_device: unsafe fn(*mut Ctx) -> c_int,
    pub query_device: unsafe fn(*mut Ctx, *mut IbvDeviceAttr) -> c_int,
    /// `ibv_query_port` (port 1 is EFA's only port).
    pub query_port: unsafe fn(*mut Ctx, u8, *mut IbvPortAttr) -> c_int,
    pub query_gid: unsafe fn(*mut Ctx, u8, c_int, *mut IbvGid) -> c_int,
    pub efadv_query_device: unsafe fn(*mut Ctx, *mut EfadvDeviceAttr, u32) -> c_int,
    pub alloc_pd: unsafe fn(*mut Ctx) -> *mut Pd,
    pub dealloc_pd: unsafe fn(*mut Pd) -> c_int,
    pub reg_mr: unsafe fn(*mut Pd, *mut c_void, usize, c_int) -> *mut Mr,
    pub dereg_mr: unsafe fn(*mut Mr) -> c_int,
    /// `mr->lkey`, `mr->rkey`.
    pub mr_keys: unsafe fn(*mut Mr) -> (u32, u32),
    /// `efadv_query_mr` (`EOPNOTSUPP` where libefa is older than rdma-core 49 and lacks it).
    pub efadv_query_mr: unsafe fn(*mut Mr, *mut EfadvMrAttr, u32) -> c_int,
    pub efadv_create_cq:
        unsafe fn(*mut Ctx, *mut IbvCqInitAttrEx, *mut EfadvCqInitAttr, u32) -> *mut Cq,
    pub destroy_cq: unsafe fn(*mut Cq) -> c_int,
    pub efadv_create_qp_ex:
        unsafe fn(*mut Ctx, *mut IbvQpInitAttrEx, *mut EfadvQpInitAttr, u32) -> *mut Qp,
    pub modify_qp: unsafe fn(*mut Qp, *mut IbvQpAttr, c_int) -> c_int,
    pub destroy_qp: unsafe fn(*mut Qp) -> c_int,
    /// `qp->qp_num`.
    pub qp_num: unsafe fn(*mut Qp) -> u32,
    pub create_ah: unsafe fn(*mut Pd, *mut IbvAhAttr) -> *mut Ah,
    pub destroy_ah: unsafe fn(*mut Ah) -> c_int,
    pub efadv_query_ah: unsafe fn(*mut Ah, *mut EfadvAhAttr, u32) -> c_int,
    /// Inline `ibv_post_recv`.
    pub post_recv: unsafe fn(*mut Qp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int,
    /// Inline `ibv_wr_start`.
    pub wr_start: unsafe fn(*mut Qp),
    /// `qpx->wr_id = wr_id; qpx->wr_flags = flags;` then the inline `ibv_wr_send`, or
    /// `ibv_wr_send_imm` when `imm` is given (network byte order, as verbs takes it).
    pub wr_send: unsafe fn(*mut Qp, u64, u32, Option<u32>),
    /// `qpx->wr_id = wr_id; qpx->wr_flags = flags;` then the inline `ibv_wr_rdma_read`,
    /// `ibv_wr_rdma_write` or `ibv_wr_rdma_write_imm` with `rkey` and the remote address.
    pub wr_rdma: unsafe fn(*mut Qp, u64, u32, RdmaKind, u32, u64),
    /// Inline `ibv_wr_set_ud_addr`.
    pub wr_set_ud_addr: unsafe fn(*mut Qp, *mut Ah, u32, u32),
    /// Inline `ibv_wr_set_sge_list`.
    pub wr_set_sge_list: unsafe fn(*mut Qp, usize, *const IbvSge),
    /// Inline `ibv_wr_complete`.
    pub wr_complete: unsafe fn(*mut Qp) -> c_int,
    /// Inline `ibv_start_poll` (0, or ENOENT when the CQ is empty).
    pub start_poll: unsafe fn(*mut Cq) -> c_int,
    /// Inline `ibv_next_poll`.
    pub next_poll: unsafe fn(*mut Cq) -> c_int,
    /// Inline `ibv_end_poll`.
    pub end_poll: unsafe fn(*mut Cq),
    /// `cq->wr_id`, `cq->status` and the inline `ibv_wc_read_*` of the current completion.
    pub wc: unsafe fn(*mut Cq) -> Wc,
    /// Inline `efadv_wc_read_sgid` on `efadv_cq_from_ibv_cq_ex(cq)`: the sender's GID when
    /// its address handle is unknown here, else `-ENOENT`.
    pub wc_read_sgid: unsafe fn(*mut Cq, *mut IbvGid) -> c_int,
}

// ---- libibverbs and libefa, opened at run time ----

macro_rules! syms {
    (($ibv:ident, $efa:ident) $($field:ident: $lib:ident $sym:literal => $ty:ty;)*) => {
        /// The exported functions, as `dlsym` found them.
        struct Syms {
            $($field: $ty,)*
        }

        fn resolve(
            $ibv: &crate::sys::dl::Library,
            $efa: &crate::sys::dl::Library,
        ) -> Result<Syms, String> {
            Ok(Syms {
                $($field: {
                    let p = $lib.sym($sym)?;
                    // SAFETY: `p` is the non-null address of the named rdma-core function,
                    // whose C prototype (verbs.h / efadv.h) is the field's type; the library
                    // stays loaded for the life of the process.
                    unsafe { core::mem::transmute::<*mut c_void, $ty>(p) }
                },)*
            })
        }
    };
}

type CreateCq =
    unsafe extern "C" fn(*mut Ctx, *mut IbvCqInitAttrEx, *mut EfadvCqInitAttr, u32) -> *mut Cq;
type CreateQp =
    unsafe extern "C" fn(*mut Ctx, *mut IbvQpInitAttrEx, *mut EfadvQpInitAttr, u32) -> *mut Qp;

syms! {
    (ibv, efa)
    get_device_list: ibv "ibv_get_device_list" => unsafe extern "C" fn(*mut c_int) -> *mut *mut IbvDevice;
    free_device_list: ibv "ibv_free_device_list" => unsafe extern "C" fn(*mut *mut IbvDevice);
    get_device_name: ibv "ibv_get_device_name" => unsafe extern "C" fn(*mut IbvDevice) -> *const c_char;
    open_device: ibv "ibv_open_device" => unsafe extern "C" fn(*mut IbvDevice) -> *mut Ctx;
    close_device: ibv "ibv_close_device" => unsafe extern "C" fn(*mut Ctx) -> c_int;
    query_device: ibv "ibv_query_device" => unsafe extern "C" fn(*mut Ctx, *mut IbvDeviceAttr) -> c_int;
    query_port: ibv "ibv_query_port" => unsafe extern "C" fn(*mut Ctx, u8, *mut IbvPortAttr) -> c_int;
    query_gid: ibv "ibv_query_gid" => unsafe extern "C" fn(*mut Ctx, u8, c_int, *mut IbvGid) -> c_int;
    alloc_pd: ibv "ibv_alloc_pd" => unsafe extern "C" fn(*mut Ctx) -> *mut Pd;
    dealloc_pd: ibv "ibv_dealloc_pd" => unsafe extern "C" fn(*mut Pd) -> c_int;
    reg_mr: ibv "ibv_reg_mr" => unsafe extern "C" fn(*mut Pd, *mut c_void, usize, c_int) -> *mut Mr;
    dereg_mr: ibv "ibv_dereg_mr" => unsafe extern "C" fn(*mut Mr) -> c_int;
    destroy_cq: ibv "ibv_destroy_cq" => unsafe extern "C" fn(*mut Cq) -> c_int;
    modify_qp: ibv "ibv_modify_qp" => unsafe extern "C" fn(*mut Qp, *mut IbvQpAttr, c_int) -> c_int;
    destroy_qp: ibv "ibv_destroy_qp" => unsafe extern "C" fn(*mut Qp) -> c_int;
    qp_to_qp_ex: ibv "ibv_qp_to_qp_ex" => unsafe extern "C" fn(*mut Qp) -> *mut IbvQpEx;
    create_ah: ibv "ibv_create_ah" => unsafe extern "C" fn(*mut Pd, *mut IbvAhAttr) -> *mut Ah;
    destroy_ah: ibv "ibv_destroy_ah" => unsafe extern "C" fn(*mut Ah) -> c_int;
    efadv_query_device: efa "efadv_query_device" => unsafe extern "C" fn(*mut Ctx, *mut EfadvDeviceAttr, u32) -> c_int;
    efadv_create_cq: efa "efadv_create_cq" => CreateCq;
    efadv_cq_from_ibv_cq_ex: efa "efadv_cq_from_ibv_cq_ex" => unsafe extern "C" fn(*mut Cq) -> *mut EfadvCq;
    efadv_create_qp_ex: efa "efadv_create_qp_ex" => CreateQp;
    efadv_query_ah: efa "efadv_query_ah" => unsafe extern "C" fn(*mut Ah, *mut EfadvAhAttr, u32) -> c_int;
}

static SYMS: OnceLock<Result<Syms, String>> = OnceLock::new();

type QueryMr = unsafe extern "C" fn(*mut Mr, *mut EfadvMrAttr, u32) -> c_int;

/// `efadv_query_mr`, which only libefa of rdma-core 49 and later exports (set with `SYMS`).
static QUERY_MR: OnceLock<Option<QueryMr>> = OnceLock::new();

fn syms() -> &'static Syms {
    match SYMS.get() {
        Some(Ok(s)) => s,
        // The hardware table is handed out only after `load` succeeded.
        _ => unreachable!("verbs called before libibverbs was loaded"),
    }
}

/// The table over libibverbs and libefa, opened with `dlopen` on first use; the reason
/// when they cannot be (absent, broken, too old): the library then runs with software SRD
/// only.
pub fn load() -> Result<&'static Verbs, String> {
    match SYMS.get_or_init(open_libraries) {
        Ok(_) => Ok(&HW),
        Err(e) => Err(e.clone()),
    }
}

fn open_libraries() -> Result<Syms, String> {
    use crate::sys::dl::Library;
    let ibv = Library::open("libibverbs.so.1")?;
    let efa = Library::open("libefa.so.1")?;
    let s = resolve(&ibv, &efa)?;
    let query_mr = efa.sym("efadv_query_mr").ok().map(|p| {
        // SAFETY: the non-null address of efadv_query_mr, whose prototype (efadv_query_mr(3))
        // is `QueryMr`; the library stays loaded for the life of the process.
        unsafe { core::mem::transmute::<*mut c_void, QueryMr>(p) }
    });
    let _ = QUERY_MR.set(query_mr);
    // Kept open for the life of the process: the device's function pointers point into them.
    ibv.keep();
    efa.keep();
    Ok(s)
}

static HW: Verbs = Verbs {
    get_device_list: hw_get_device_list,
    free_device_list: hw_free_device_list,
    get_device_name: hw_get_device_name,
    open_device: hw_open_device,
    close_device: hw_close_device,
    query_device: hw_query_device,
    query_port: hw_query_port,
    query_gid: hw_query_gid,
    efadv_query_device: hw_efadv_query_device,
    alloc_pd: hw_alloc_pd,
    dealloc_pd: hw_dealloc_pd,
    reg_mr: hw_reg_mr,
    dereg_mr: hw_dereg_mr,
    mr_keys: hw_mr_keys,
    efadv_query_mr: hw_efadv_query_mr,
    efadv_create_cq: hw_efadv_create_cq,
    destroy_cq: hw_destroy_cq,
    efadv_create_qp_ex: hw_efadv_create_qp_ex,
    modify_qp: hw_modify_qp,
    destroy_qp: hw_destroy_qp,
    qp_num: hw_qp_num,
    create_ah: hw_create_ah,
    destroy_ah: hw_destroy_ah,
    efadv_query_ah: hw_efadv_query_ah,
    post_recv: hw_post_recv,
    wr_start: hw_wr_start,
    wr_send: hw_wr_send,
    wr_rdma: hw_wr_rdma,
    wr_set_ud_addr: hw_wr_set_ud_addr,
    wr_set_sge_list: hw_wr_set_sge_list,
    wr_complete: hw_wr_complete,
    start_poll: hw_start_poll,
    next_poll: hw_next_poll,
    end_poll: hw_end_poll,
    wc: hw_wc,
    wc_read_sgid: hw_wc_read_sgid,
};

// The exported functions: straight calls. Each `hw_*` is `unsafe fn` with the contract of
// the C function it calls (valid handles from this table, valid out-pointers).

unsafe fn hw_get_device_list(n: *mut c_int) -> *mut *mut IbvDevice {
    // SAFETY: the caller's contract is ibv_get_device_list(3)'s.
    unsafe { (syms().get_device_list)(n) }
}
unsafe fn hw_free_device_list(l: *mut *mut IbvDevice) {
    // SAFETY: as ibv_free_device_list(3).
    unsafe { (syms().free_device_list)(l) }
}
unsafe fn hw_get_device_name(d: *mut IbvDevice) -> *const c_char {
    // SAFETY: as ibv_get_device_name(3).
    unsafe { (syms().get_device_name)(d) }
}
unsafe fn hw_open_device(d: *mut IbvDevice) -> *mut Ctx {
    // SAFETY: as ibv_open_device(3).
    unsafe { (syms().open_device)(d) }
}
unsafe fn hw_close_device(c: *mut Ctx) -> c_int {
    // SAFETY: as ibv_close_device(3).
    unsafe { (syms().close_device)(c) }
}
unsafe fn hw_query_device(c: *mut Ctx, a: *mut IbvDeviceAttr) -> c_int {
    // SAFETY: as ibv_query_device(3).
    unsafe { (syms().query_device)(c, a) }
}
unsafe fn hw_query_port(c: *mut Ctx, port: u8, a: *mut IbvPortAttr) -> c_int {
    // What the inline ibv_query_port does on a context without the extended op: clear the
    // whole struct, then the exported (compat) symbol fills its leading part, which holds
    // every field read here (state, MTUs, max_msg_sz, width, speed).
    // SAFETY: `a` is valid for a whole ibv_port_attr (caller's contract).
    unsafe {
        a.write(IbvPortAttr::default());
        (syms().query_port)(c, port, a)
    }
}
unsafe fn hw_query_gid(c: *mut Ctx, port: u8, i: c_int, g: *mut IbvGid) -> c_int {
    // SAFETY: as ibv_query_gid(3).
    unsafe { (syms().query_gid)(c, port, i, g) }
}
unsafe fn hw_efadv_query_device(c: *mut Ctx, a: *mut EfadvDeviceAttr, len: u32) -> c_int {
    // SAFETY: as efadv_query_device(3).
    unsafe { (syms().efadv_query_device)(c, a, len) }
}
unsafe fn hw_alloc_pd(c: *mut Ctx) -> *mut Pd {
    // SAFETY: as ibv_alloc_pd(3).
    unsafe { (syms().alloc_pd)(c) }
}
unsafe fn hw_dealloc_pd(p: *mut Pd) -> c_int {
    // SAFETY: as ibv_dealloc_pd(3).
    unsafe { (syms().dealloc_pd)(p) }
}
unsafe fn hw_reg_mr(p: *mut Pd, addr: *mut c_void, len: usize, access: c_int) -> *mut Mr {
    // SAFETY: as ibv_reg_mr(3).
    unsafe { (syms().reg_mr)(p, addr, len, access) }
}
unsafe fn hw_dereg_mr(m: *mut Mr) -> c_int {
    // SAFETY: as ibv_dereg_mr(3).
    unsafe { (syms().dereg_mr)(m) }
}
unsafe fn hw_mr_keys(m: *mut Mr) -> (u32, u32) {
    // SAFETY: `m` is a live ibv_mr from ibv_reg_mr (caller's contract).
    let m = unsafe { &*(m as *const IbvMr) };
    (m.lkey, m.rkey)
}
unsafe fn hw_efadv_query_mr(m: *mut Mr, a: *mut EfadvMrAttr, len: u32) -> c_int {
    match QUERY_MR.get().copied().flatten() {
        // SAFETY: as efadv_query_mr(3).
        Some(f) => unsafe { f(m, a, len) },
        None => libc::EOPNOTSUPP,
    }
}
unsafe fn hw_efadv_create_cq(
    c: *mut Ctx,
    a: *mut IbvCqInitAttrEx,
    e: *mut EfadvCqInitAttr,
    len: u32,
) -> *mut Cq {
    // SAFETY: as efadv_create_cq(3).
    unsafe { (syms().efadv_create_cq)(c, a, e, len) }
}
unsafe fn hw_destroy_cq(c: *mut Cq) -> c_int {
    // SAFETY: as ibv_destroy_cq(3) (an ibv_cq_ex starts with its ibv_cq).
    unsafe { (syms().destroy_cq)(c) }
}
unsafe fn hw_efadv_create_qp_ex(
    c: *mut Ctx,
    a: *mut IbvQpInitAttrEx,
    e: *mut EfadvQpInitAttr,
    len: u32,
) -> *mut Qp {
    // SAFETY: as efadv_create_qp_ex(3).
    let qp = unsafe { (syms().efadv_create_qp_ex)(c, a, e, len) };
    if qp.is_null() {
        return qp;
    }
    // The QP handle doubles as its ibv_qp_ex (rdma-core keeps them at one address, a union):
    // checked once here, so the wr_* calls need not ask ibv_qp_to_qp_ex every time.
    // SAFETY: `qp` is the live QP just created with send ops flags (an extended QP).
    let qpx = unsafe { (syms().qp_to_qp_ex)(qp) };
    if qpx.cast::<Qp>() != qp {
        // SAFETY: destroying the QP just created, used by nobody else.
        unsafe { (syms().destroy_qp)(qp) };
        return core::ptr::null_mut();
    }
    qp
}
unsafe fn hw_modify_qp(q: *mut Qp, a: *mut IbvQpAttr, mask: c_int) -> c_int {
    // SAFETY: as ibv_modify_qp(3).
    unsafe { (syms().modify_qp)(q, a, mask) }
}
unsafe fn hw_destroy_qp(q: *mut Qp) -> c_int {
    // SAFETY: as ibv_destroy_qp(3).
    unsafe { (syms().destroy_qp)(q) }
}
unsafe fn hw_qp_num(q: *mut Qp) -> u32 {
    // SAFETY: `q` is a live ibv_qp (caller's contract).
    unsafe { (*(q as *const IbvQp)).qp_num }
}
unsafe fn hw_create_ah(p: *mut Pd, a: *mut IbvAhAttr) -> *mut Ah {
    // SAFETY: as ibv_create_ah(3).
    unsafe { (syms().create_ah)(p, a) }
}
unsafe fn hw_destroy_ah(a: *mut Ah) -> c_int {
    // SAFETY: as ibv_destroy_ah(3).
    unsafe { (syms().destroy_ah)(a) }
}
unsafe fn hw_efadv_query_ah(a: *mut Ah, at: *mut EfadvAhAttr, len: u32) -> c_int {
    // SAFETY: as efadv_query_ah(3).
    unsafe { (syms().efadv_query_ah)(a, at, len) }
}

// The inline functions of verbs.h / efadv.h: through the pointers in the structs.

unsafe fn hw_post_recv(q: *mut Qp, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int {
    // SAFETY: ibv_post_recv is `qp->context->ops.post_recv(qp, wr, bad)`; `q` is a live QP
    // whose context libibverbs filled.
    unsafe {
        let ctx = (*(q as *const IbvQp)).context;
        ((*ctx).ops.post_recv)(q, wr, bad)
    }
}
unsafe fn hw_wr_start(q: *mut Qp) {
    let x = q as *mut IbvQpEx;
    // SAFETY: `q` is an extended QP (checked at creation to be its own ibv_qp_ex).
    unsafe { ((*x).wr_start)(x) }
}
unsafe fn hw_wr_send(q: *mut Qp, wr_id: u64, flags: u32, imm: Option<u32>) {
    let x = q as *mut IbvQpEx;
    // SAFETY: as hw_wr_start; wr_id and wr_flags are plain fields the caller sets before
    // the builder call (ibv_wr_post(3)).
    unsafe {
        (*x).wr_id = wr_id;
        (*x).wr_flags = flags;
        match imm {
            Some(i) => ((*x).wr_send_imm)(x, i),
            None => ((*x).wr_send)(x),
        }
    }
}
unsafe fn hw_wr_rdma(q: *mut Qp, wr_id: u64, flags: u32, kind: RdmaKind, rkey: u32, raddr: u64) {
    let x = q as *mut IbvQpEx;
    // SAFETY: as hw_wr_send; the QP was created with the RDMA send ops flags of the device's
    // caps (VerbsDevice::open), so the builder pointers are set.
    unsafe {
        (*x).wr_id = wr_id;
        (*x).wr_flags = flags;
        match kind {
            RdmaKind::Read => ((*x).wr_rdma_read)(x, rkey, raddr),
            RdmaKind::Write => ((*x).wr_rdma_write)(x, rkey, raddr),
            RdmaKind::WriteImm(imm) => ((*x).wr_rdma_write_imm)(x, rkey, raddr, imm.to_be()),
        }
    }
}
unsafe fn hw_wr_set_ud_addr(q: *mut Qp, ah: *mut Ah, qpn: u32, qkey: u32) {
    let x = q as *mut IbvQpEx;
    // SAFETY: as hw_wr_start.
    unsafe { ((*x).wr_set_ud_addr)(x, ah, qpn, qkey) }
}
unsafe fn hw_wr_set_sge_list(q: *mut Qp, n: usize, sge: *const IbvSge) {
    let x = q as *mut IbvQpEx;
    // SAFETY: as hw_wr_start; `sge` points to `n` entries.
    unsafe { ((*x).wr_set_sge_list)(x, n, sge) }
}
unsafe fn hw_wr_complete(q: *mut Qp) -> c_int {
    let x = q as *mut IbvQpEx;
    // SAFETY: as hw_wr_start.
    unsafe { ((*x).wr_complete)(x) }
}
unsafe fn hw_start_poll(c: *mut Cq) -> c_int {
    let x = c as *mut IbvCqEx;
    let mut attr = IbvPollCqAttr::default();
    // SAFETY: `c` is a live ibv_cq_ex from efadv_create_cq.
    unsafe { ((*x).start_poll)(x, &mut attr) }
}
unsafe fn hw_next_poll(c: *mut Cq) -> c_int {
    let x = c as *mut IbvCqEx;
    // SAFETY: as hw_start_poll, inside a poll.
    unsafe { ((*x).next_poll)(x) }
}
unsafe fn hw_end_poll(c: *mut Cq) {
    let x = c as *mut IbvCqEx;
    // SAFETY: as hw_start_poll, inside a poll.
    unsafe { ((*x).end_poll)(x) }
}
unsafe fn hw_wc(c: *mut Cq) -> Wc {
    let x = c as *mut IbvCqEx;
    // SAFETY: as hw_start_poll, on the current completion; the CQ was created with the
    // byte-length, source-QP and SLID fields (wc_flags), so those readers are set.
    unsafe {
        // Of a failed completion only wr_id, status and vendor_err are defined (ibv_poll_cq(3)).
        let ok = (*x).status == IBV_WC_SUCCESS;
        let opcode = if ok { ((*x).read_opcode)(x) } else { 0 };
        let recv = ok && opcode & IBV_WC_RECV != 0;
        let imm = ok && opcode == IBV_WC_RECV_RDMA_WITH_IMM;
        Wc {
            wr_id: (*x).wr_id,
            status: (*x).status,
            vendor_err: if ok { 0 } else { ((*x).read_vendor_err)(x) },
            opcode,
            byte_len: if recv { ((*x).read_byte_len)(x) } else { 0 },
            src_qp: if recv { ((*x).read_src_qp)(x) } else { 0 },
            slid: if recv { ((*x).read_slid)(x) } else { 0 },
            // The CQ was created with IBV_WC_EX_WITH_IMM; verbs gives it big-endian.
            imm: if imm {
                u32::from_be(((*x).read_imm_data)(x))
            } else {
                0
            },
        }
    }
}
unsafe fn hw_wc_read_sgid(c: *mut Cq, gid: *mut IbvGid) -> c_int {
    // SAFETY: as hw_start_poll; efadv_cq_from_ibv_cq_ex gives the CQ's efadv view (NULL
    // if the CQ was not created by efadv_create_cq, which ours always is).
    unsafe {
        let e = (syms().efadv_cq_from_ibv_cq_ex)(c);
        if e.is_null() {
            return -libc::ENOENT;
        }
        ((*e).wc_read_sgid)(e, gid)
    }
}
