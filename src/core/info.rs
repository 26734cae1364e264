//! `fi_info` as Rust values: what providers advertise, what hints ask for, what `fi_getinfo`
//! returns. The C entry points convert to and from the C lists (`ffi::info`); everything that
//! decides (matching, filtering, formatting) works on these.

pub use crate::abi::types::{fi_rx_attr as RxAttr, fi_tx_attr as TxAttr};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpAttr {
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
    pub auth_key: Option<Vec<u8>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAttr {
    /// An open `fid_domain` named by hints (the C pointer, kept opaque).
    pub domain: usize,
    pub name: Option<String>,
    pub threading: u32,
    pub control_progress: u32,
    pub progress: u32,
    pub resource_mgmt: u32,
    pub av_type: u32,
    pub mr_mode: i32,
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
    pub auth_key: Option<Vec<u8>>,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    pub max_ep_auth_key: usize,
    pub max_group_id: u32,
    pub max_cntr_value: u64,
    pub max_err_cntr_value: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricAttr {
    /// An open `fid_fabric` named by hints (the C pointer, kept opaque).
    pub fabric: usize,
    pub name: Option<String>,
    pub prov_name: Option<String>,
    pub prov_version: u32,
    pub api_version: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceAttr {
    pub name: Option<String>,
    pub device_id: Option<String>,
    pub device_version: Option<String>,
    pub vendor_id: Option<String>,
    pub driver: Option<String>,
    pub firmware: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BusAttr {
    pub bus_type: u32,
    pub pci_domain_id: u16,
    pub pci_bus_id: u8,
    pub pci_device_id: u8,
    pub pci_function_id: u8,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkAttr {
    pub address: Option<String>,
    pub mtu: usize,
    pub speed: usize,
    pub state: u32,
    pub network_type: Option<String>,
}

/// `struct fid_nic`: what the hardware (here: the software device) is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nic {
    pub device: Option<DeviceAttr>,
    pub bus: Option<BusAttr>,
    pub link: Option<LinkAttr>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addr: Option<Vec<u8>>,
    pub dest_addr: Option<Vec<u8>>,
    /// `fi_info.handle` (a `fid_t`, kept opaque).
    pub handle: usize,
    pub tx_attr: TxAttr,
    pub rx_attr: RxAttr,
    pub ep_attr: EpAttr,
    pub domain_attr: DomainAttr,
    pub fabric_attr: FabricAttr,
    pub nic: Option<Nic>,
}
