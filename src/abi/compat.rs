//! Older layouts that compat symbols and older API versions hand in (abi-reference §1, §6).
//!
//! Every public struct only ever grew at its end, so an older layout is a prefix of the current
//! one: what matters is how many bytes of it the caller owns. These sizes are those prefixes.

/// The symbol-version nodes that carry a distinct `fi_info` family layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbiNode {
    V1_0,
    V1_1,
    V1_2,
    V1_3,
    V1_7,
    V1_8,
    V1_9,
}

/// Bytes of each `fi_info` family struct that a caller bound to `node` owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InfoLayout {
    pub info: usize,
    pub tx_attr: usize,
    pub rx_attr: usize,
    pub ep_attr: usize,
    pub domain_attr: usize,
    pub fabric_attr: usize,
}

impl AbiNode {
    pub const fn layout(self) -> InfoLayout {
        let (info, tx_attr, ep_attr, domain_attr) = match self {
            AbiNode::V1_0 => (112, 72, 80, 120),
            AbiNode::V1_1 => (112, 72, 96, 184),
            AbiNode::V1_2 => (120, 72, 96, 184),
            AbiNode::V1_3 => (120, 80, 96, 192),
            AbiNode::V1_7 => (120, 80, 96, 200),
            AbiNode::V1_8 => (120, 80, 96, 208),
            AbiNode::V1_9 => (120, 80, 96, 224),
        };
        InfoLayout {
            info,
            tx_attr,
            rx_attr: 64,
            ep_attr,
            domain_attr,
            fabric_attr: 32,
        }
    }
}

/// `fi_cq_err_entry` bytes owned by a caller of a given API version: no `err_data_size`
/// before 1.5, no `src_addr` before 1.20.
pub const fn cq_err_entry_size(api_version: u32) -> usize {
    if api_version < super::fi_version(1, 5) {
        72
    } else if api_version < super::fi_version(1, 20) {
        80
    } else {
        88
    }
}

/// `fi_mr_attr` bytes a caller of a given API version filled in: `auth_key*` from 1.5,
/// `iface`/`device` from 1.9, `hmem_data` 1.19, `page_size` 1.22, `base_mr`/`sub_mr_cnt` 2.0.
pub const fn mr_attr_size(api_version: u32) -> usize {
    if api_version < super::fi_version(1, 5) {
        48
    } else if api_version < super::fi_version(1, 9) {
        64
    } else if api_version < super::fi_version(1, 19) {
        80
    } else if api_version < super::fi_version(1, 22) {
        88
    } else if api_version < super::fi_version(2, 0) {
        96
    } else {
        112
    }
}

/// 1.17's cap bits at 45/46 (`FI_HMEM_HOST_ALLOC`/`DEVICE_ONLY` caps then) and 48
/// (`FI_VARIABLE_MSG`) are reused by 2.x; callers below 2.0 never mean the 2.x meaning.
pub const CAPS_REUSED_IN_2_0: u64 = (1 << 45) | (1 << 46) | (1 << 48);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::fi_version;
    use crate::abi::types::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn current_node_is_the_full_layout() {
        let l = AbiNode::V1_9.layout();
        assert_eq!(l.info, size_of::<fi_info>());
        assert_eq!(l.tx_attr, size_of::<fi_tx_attr>());
        assert_eq!(l.rx_attr, size_of::<fi_rx_attr>());
        assert_eq!(l.ep_attr, size_of::<fi_ep_attr>());
        assert_eq!(l.domain_attr, size_of::<fi_domain_attr>());
        assert_eq!(l.fabric_attr, size_of::<fi_fabric_attr>());
    }

    #[test]
    fn old_layouts_end_where_fields_were_appended() {
        assert_eq!(AbiNode::V1_0.layout().info, offset_of!(fi_info, nic));
        assert_eq!(
            AbiNode::V1_2.layout().tx_attr,
            offset_of!(fi_tx_attr, tclass)
        );
        assert_eq!(
            AbiNode::V1_0.layout().ep_attr,
            offset_of!(fi_ep_attr, auth_key_size)
        );
        assert_eq!(
            AbiNode::V1_0.layout().domain_attr,
            offset_of!(fi_domain_attr, cntr_cnt)
        );
        assert_eq!(
            AbiNode::V1_2.layout().domain_attr,
            offset_of!(fi_domain_attr, tclass)
        );
        assert_eq!(
            AbiNode::V1_3.layout().domain_attr,
            offset_of!(fi_domain_attr, max_ep_auth_key)
        );
        assert_eq!(
            AbiNode::V1_7.layout().domain_attr,
            offset_of!(fi_domain_attr, max_group_id)
        );
        assert_eq!(
            AbiNode::V1_8.layout().domain_attr,
            offset_of!(fi_domain_attr, max_cntr_value)
        );
        assert_eq!(
            cq_err_entry_size(fi_version(1, 4)),
            offset_of!(fi_cq_err_entry, err_data_size)
        );
        assert_eq!(
            cq_err_entry_size(fi_version(1, 17)),
            offset_of!(fi_cq_err_entry, src_addr)
        );
        assert_eq!(
            mr_attr_size(fi_version(1, 17)),
            offset_of!(fi_mr_attr, hmem_data)
        );
    }
}
