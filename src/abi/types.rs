//! Public structs (fabric.h, fi_domain.h, fi_endpoint.h, fi_eq.h, fi_rma.h, fi_tagged.h,
//! fi_atomic.h, fi_cm.h, fi_collective.h), x86-64 layouts of libfabric 2.6.

use core::ffi::{c_char, c_int, c_void};

use super::ops::*;

pub type fi_addr_t = u64;
pub type fid_t = *mut fid;

/// `struct iovec` (sys/uio.h).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iovec {
    pub iov_base: *mut c_void,
    pub iov_len: usize,
}

/// Every object the API hands out starts with this header.
#[repr(C)]
#[derive(Debug)]
pub struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *const fi_ops,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fi_tx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fi_rx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ep_attr {
    pub type_: u32,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: u32,
    pub control_progress: u32,
    /// `data_progress` in 1.x, a union with `progress` in 2.x.
    pub progress: u32,
    pub resource_mgmt: u32,
    pub av_type: u32,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    pub max_ep_auth_key: usize,
    pub max_group_id: u32,
    pub max_cntr_value: u64,
    pub max_err_cntr_value: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fabric_attr {
    pub fabric: *mut fid_fabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr,
    pub rx_attr: *mut fi_rx_attr,
    pub ep_attr: *mut fi_ep_attr,
    pub domain_attr: *mut fi_domain_attr,
    pub fabric_attr: *mut fi_fabric_attr,
    pub nic: *mut fid_nic,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_device_attr {
    pub name: *mut c_char,
    pub device_id: *mut c_char,
    pub device_version: *mut c_char,
    pub vendor_id: *mut c_char,
    pub driver: *mut c_char,
    pub firmware: *mut c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fi_pci_attr {
    pub domain_id: u16,
    pub bus_id: u8,
    pub device_id: u8,
    pub function_id: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fi_bus_attr {
    pub bus_type: u32,
    /// `union { struct fi_pci_attr pci; } attr`
    pub pci: fi_pci_attr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_link_attr {
    pub address: *mut c_char,
    pub mtu: usize,
    pub speed: usize,
    pub state: u32,
    pub network_type: *mut c_char,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_nic {
    pub fid: fid,
    pub device_attr: *mut fi_device_attr,
    pub bus_attr: *mut fi_bus_attr,
    pub link_attr: *mut fi_link_attr,
    pub prov_attr: *mut c_void,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_fabric {
    pub fid: fid,
    pub ops: *const fi_ops_fabric,
    pub api_version: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_domain {
    pub fid: fid,
    pub ops: *const fi_ops_domain,
    pub mr: *const fi_ops_mr,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_ep {
    pub fid: fid,
    pub ops: *const fi_ops_ep,
    pub cm: *const fi_ops_cm,
    pub msg: *const fi_ops_msg,
    pub rma: *const fi_ops_rma,
    pub tagged: *const fi_ops_tagged,
    pub atomic: *const fi_ops_atomic,
    pub collective: *const fi_ops_collective,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_pep {
    pub fid: fid,
    pub ops: *const fi_ops_ep,
    pub cm: *const fi_ops_cm,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_stx {
    pub fid: fid,
    pub ops: *const fi_ops_ep,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_av {
    pub fid: fid,
    pub ops: *const fi_ops_av,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_av_set {
    pub fid: fid,
    pub ops: *const fi_ops_av_set,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_mr {
    pub fid: fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_mc {
    pub fid: fid,
    pub fi_addr: fi_addr_t,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_eq {
    pub fid: fid,
    pub ops: *const fi_ops_eq,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_cq {
    pub fid: fid,
    pub ops: *const fi_ops_cq,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_cntr {
    pub fid: fid,
    pub ops: *const fi_ops_cntr,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_wait {
    pub fid: fid,
    pub ops: *const fi_ops_wait,
}

#[repr(C)]
#[derive(Debug)]
pub struct fid_poll {
    pub fid: fid,
    pub ops: *const fi_ops_poll,
}

/// fi_ext.h: the object behind `fi_open(..., "logging", ...)`.
#[repr(C)]
#[derive(Debug)]
pub struct fid_logging {
    pub fid: fid,
    pub ops: *const fi_ops_log,
}

/// fi_profile.h (2.x).
#[repr(C)]
#[derive(Debug)]
pub struct fid_profile {
    pub fid: fid,
    pub ops: *const c_void,
}

/// The provider descriptor that `fi_log`/`fi_param_*` take (providers/fi_prov.h).
#[repr(C)]
#[derive(Debug)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: *const c_void,
    pub fabric: *const c_void,
    pub cleanup: *const c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_context {
    pub internal: [*mut c_void; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_context2 {
    pub internal: [*mut c_void; 8],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_alias {
    pub fid: *mut *mut fid,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fid_var {
    pub name: c_int,
    pub val: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_raw_attr {
    pub flags: u64,
    pub base_addr: *mut u64,
    pub raw_key: *mut u8,
    pub key_size: *mut usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_map_raw {
    pub flags: u64,
    pub base_addr: u64,
    pub raw_key: *mut u8,
    pub key_size: usize,
    pub key: *mut u64,
}

// ---- fi_domain.h ----

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_av_attr {
    pub type_: u32,
    pub rx_ctx_bits: c_int,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_av_set_attr {
    pub count: usize,
    pub start_addr: fi_addr_t,
    pub end_addr: fi_addr_t,
    pub stride: u64,
    pub comm_key_size: usize,
    pub comm_key: *mut u8,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_dmabuf {
    pub fd: c_int,
    pub offset: u64,
    pub len: usize,
    pub base_addr: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_auth_key {
    pub av: *mut fid_av,
    pub src_addr: fi_addr_t,
}

/// 112 bytes in 2.6; 1.17 callers hand in an 80-byte prefix (through `iface`/`device`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_attr {
    /// `union { const struct iovec *mr_iov; const struct fi_mr_dmabuf *dmabuf; }`
    pub mr_iov: *const iovec,
    pub iov_count: usize,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub context: *mut c_void,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
    pub iface: u32,
    /// `union { uint64_t reserved; int cuda; int ze; ... } device`
    pub device: u64,
    pub hmem_data: *mut c_void,
    pub page_size: usize,
    pub base_mr: *const fid_mr,
    pub sub_mr_cnt: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_modify {
    pub flags: u64,
    pub attr: fi_mr_attr,
}

// ---- fi_eq.h ----

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_attr {
    pub wait_obj: u32,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_poll_attr {
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_attr {
    pub size: usize,
    pub flags: u64,
    pub wait_obj: u32,
    pub signaling_vector: c_int,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_err_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

/// Followed by `uint8_t data[]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_cm_entry {
    pub fid: fid_t,
    pub info: *mut fi_info,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_entry {
    pub op_context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_msg_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_data_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

/// 88 bytes for api ≥ 1.20; see `compat` for the 72/80-byte prefixes older callers own.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
    pub src_addr: fi_addr_t,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_attr {
    pub size: usize,
    pub flags: u64,
    pub format: u32,
    pub wait_obj: u32,
    pub signaling_vector: c_int,
    pub wait_cond: u32,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cntr_attr {
    pub events: u32,
    pub wait_obj: u32,
    pub wait_set: *mut fid_wait,
    pub flags: u64,
}

// ---- fi_endpoint.h / fi_rma.h / fi_tagged.h / fi_atomic.h ----

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fi_rma_iov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fi_rma_ioc {
    pub addr: u64,
    pub count: usize,
    pub key: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_rma {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: usize,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_tagged {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ioc {
    pub addr: *mut c_void,
    pub count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: u32,
    pub op: u32,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_atomic_attr {
    pub count: usize,
    pub size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_attr {
    pub op: u32,
    pub datatype: u32,
    pub datatype_attr: fi_atomic_attr,
    pub max_members: usize,
    pub mode: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_collective {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub coll_addr: fi_addr_t,
    pub root_addr: fi_addr_t,
    pub coll: u32,
    pub datatype: u32,
    pub op: u32,
    pub context: *mut c_void,
}

/// One parameter as `fi_getparams` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_param {
    pub name: *const c_char,
    pub type_: u32,
    pub help_string: *const c_char,
    pub value: *const c_char,
}

// ---- fi_ext_efa.h ----

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_efa_mr_attr {
    pub ic_id_validity: u16,
    pub recv_ic_id: u16,
    pub rdma_read_ic_id: u16,
    pub rdma_recv_ic_id: u16,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    // Sizes the abi-reference notes measured on x86-64 (2.6 headers); abi-tests/ checks the rest.
    #[test]
    fn sizes_match_the_2_6_layouts() {
        assert_eq!(size_of::<fid>(), 24);
        assert_eq!(size_of::<fi_info>(), 120);
        assert_eq!(size_of::<fi_tx_attr>(), 80);
        assert_eq!(size_of::<fi_rx_attr>(), 64);
        assert_eq!(size_of::<fi_ep_attr>(), 96);
        assert_eq!(size_of::<fi_domain_attr>(), 224);
        assert_eq!(offset_of!(fi_domain_attr, tclass), 184);
        assert_eq!(offset_of!(fi_domain_attr, max_ep_auth_key), 192);
        assert_eq!(offset_of!(fi_domain_attr, max_group_id), 200);
        assert_eq!(offset_of!(fi_domain_attr, max_cntr_value), 208);
        assert_eq!(size_of::<fi_fabric_attr>(), 32);
        assert_eq!(size_of::<fid_fabric>(), 40);
        assert_eq!(size_of::<fid_domain>(), 40);
        assert_eq!(size_of::<fid_ep>(), 80);
        assert_eq!(size_of::<fid_mr>(), 40);
        assert_eq!(size_of::<fid_nic>(), 56);
        assert_eq!(size_of::<fi_cq_err_entry>(), 88);
        assert_eq!(offset_of!(fi_cq_err_entry, src_addr), 80);
        assert_eq!(size_of::<fi_eq_err_entry>(), 48);
        assert_eq!(size_of::<fi_mr_attr>(), 112);
        assert_eq!(size_of::<fi_msg>(), 48);
        assert_eq!(size_of::<fi_msg_rma>(), 64);
        assert_eq!(size_of::<fi_msg_tagged>(), 64);
        assert_eq!(size_of::<fi_msg_atomic>(), 72);
        assert_eq!(size_of::<fi_context>(), 32);
        assert_eq!(size_of::<fi_context2>(), 64);
        assert_eq!(size_of::<fi_cq_attr>(), 40);
        assert_eq!(size_of::<fi_eq_attr>(), 32);
        assert_eq!(size_of::<fi_cntr_attr>(), 24);
        assert_eq!(size_of::<fi_av_attr>(), 48);
        assert_eq!(size_of::<fi_bus_attr>(), 12);
    }
}
