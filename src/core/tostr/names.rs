//! The names `fi_tostr` prints (fi_fabric(3) "fi_tostr", abi-reference §4): the flags of each
//! flag set, in the order libfabric 2.6 prints them, and the values of each enumeration
//! (`Unknown` for one not listed).

use crate::abi::consts::*;

macro_rules! named {
    ($($c:ident),* $(,)?) => { &[$(($c as u64, stringify!($c))),*] };
}

pub(super) const CAPS: &[(u64, &str)] = named![
    FI_MSG,
    FI_RMA,
    FI_TAGGED,
    FI_ATOMIC,
    FI_MULTICAST,
    FI_COLLECTIVE,
    FI_READ,
    FI_WRITE,
    FI_RECV,
    FI_SEND,
    FI_REMOTE_READ,
    FI_REMOTE_WRITE,
    FI_MULTI_RECV,
    FI_REMOTE_CQ_DATA,
    FI_TRIGGER,
    FI_FENCE,
    FI_RMA_PMEM,
    FI_SOURCE_ERR,
    FI_LOCAL_COMM,
    FI_REMOTE_COMM,
    FI_SHARED_AV,
    FI_RMA_EVENT,
    FI_SOURCE,
    FI_NAMED_RX_CTX,
    FI_DIRECTED_RECV,
    FI_AV_USER_ID,
    FI_PEER,
    FI_HMEM,
];

pub(super) const OP_FLAGS: &[(u64, &str)] = named![
    FI_MULTICAST,
    FI_MULTI_RECV,
    FI_REMOTE_CQ_DATA,
    FI_MORE,
    FI_PEEK,
    FI_TRIGGER,
    FI_FENCE,
    FI_COMPLETION,
    FI_INJECT,
    FI_INJECT_COMPLETE,
    FI_TRANSMIT_COMPLETE,
    FI_DELIVERY_COMPLETE,
    FI_MATCH_COMPLETE,
    FI_AFFINITY,
    FI_CLAIM,
    FI_DISCARD,
];

pub(super) const MSG_ORDER: &[(u64, &str)] = named![
    FI_ORDER_RAR,
    FI_ORDER_RAW,
    FI_ORDER_RAS,
    FI_ORDER_WAR,
    FI_ORDER_WAW,
    FI_ORDER_WAS,
    FI_ORDER_SAR,
    FI_ORDER_SAW,
    FI_ORDER_SAS,
    FI_ORDER_RMA_RAR,
    FI_ORDER_RMA_RAW,
    FI_ORDER_RMA_WAR,
    FI_ORDER_RMA_WAW,
    FI_ORDER_ATOMIC_RAR,
    FI_ORDER_ATOMIC_RAW,
    FI_ORDER_ATOMIC_WAR,
    FI_ORDER_ATOMIC_WAW,
];

pub(super) const MODE: &[(u64, &str)] = named![
    FI_CONTEXT,
    FI_MSG_PREFIX,
    FI_ASYNC_IOV,
    FI_RX_CQ_DATA,
    FI_LOCAL_MR,
    FI_CONTEXT2,
];

pub(super) const MR_MODE: &[(u64, &str)] = named![
    FI_MR_BASIC,
    FI_MR_SCALABLE,
    FI_MR_LOCAL,
    FI_MR_RAW,
    FI_MR_VIRT_ADDR,
    FI_MR_ALLOCATED,
    FI_MR_PROV_KEY,
    FI_MR_MMU_NOTIFY,
    FI_MR_RMA_EVENT,
    FI_MR_ENDPOINT,
    FI_MR_HMEM,
    FI_MR_COLLECTIVE,
];

pub(super) const CQ_EVENT_FLAGS: &[(u64, &str)] = named![
    FI_SEND,
    FI_RECV,
    FI_RMA,
    FI_ATOMIC,
    FI_MSG,
    FI_TAGGED,
    FI_READ,
    FI_WRITE,
    FI_REMOTE_READ,
    FI_REMOTE_WRITE,
    FI_REMOTE_CQ_DATA,
    FI_MULTI_RECV,
    FI_MORE,
    FI_CLAIM,
];

pub(super) const AV_FLAGS: &[(u64, &str)] = named![FI_EVENT, FI_READ, FI_SYMMETRIC];
pub(super) const CQ_FLAGS: &[(u64, &str)] = named![FI_AFFINITY];
pub(super) const MR_ACCESS: &[(u64, &str)] = named![
    FI_RECV,
    FI_SEND,
    FI_READ,
    FI_WRITE,
    FI_REMOTE_READ,
    FI_REMOTE_WRITE,
    FI_COLLECTIVE,
];

// ---- enumerations ----

pub(super) fn name_of(v: i64, table: &[(u32, &'static str)]) -> &'static str {
    table
        .iter()
        .find(|(c, _)| i64::from(*c) == v)
        .map_or("Unknown", |(_, n)| n)
}

macro_rules! names {
    ($($c:ident),* $(,)?) => { &[$(($c as u32, stringify!($c))),*] };
}

pub(super) const EP_TYPES: &[(u32, &str)] = names![FI_EP_UNSPEC, FI_EP_MSG, FI_EP_DGRAM, FI_EP_RDM];

pub(super) const ADDR_FORMATS: &[(u32, &str)] = names![
    FI_FORMAT_UNSPEC,
    FI_SOCKADDR,
    FI_SOCKADDR_IP,
    FI_SOCKADDR_IN,
    FI_SOCKADDR_IN6,
    FI_SOCKADDR_IB,
    FI_ADDR_PSMX2,
    FI_ADDR_MLX,
    FI_ADDR_UCX,
    FI_ADDR_STR,
    FI_ADDR_IB_UD,
    FI_ADDR_EFA,
    FI_ADDR_PSMX3,
    FI_ADDR_OPX,
    FI_ADDR_CXI,
];

pub(super) const PROGRESS: &[(u32, &str)] = names![
    FI_PROGRESS_UNSPEC,
    FI_PROGRESS_AUTO,
    FI_PROGRESS_MANUAL,
    FI_PROGRESS_CONTROL_UNIFIED,
];

pub(super) const THREADING: &[(u32, &str)] = names![
    FI_THREAD_UNSPEC,
    FI_THREAD_SAFE,
    FI_THREAD_DOMAIN,
    FI_THREAD_COMPLETION,
    FI_THREAD_FID,
    FI_THREAD_ENDPOINT,
];

pub(super) const PROTOCOLS: &[(u32, &str)] = names![
    FI_PROTO_UNSPEC,
    FI_PROTO_RDMA_CM_IB_RC,
    FI_PROTO_IWARP,
    FI_PROTO_IB_UD,
    FI_PROTO_PSMX2,
    FI_PROTO_UDP,
    FI_PROTO_SOCK_TCP,
    FI_PROTO_IB_RDM,
    FI_PROTO_IWARP_RDM,
    FI_PROTO_RXM,
    FI_PROTO_RXD,
    FI_PROTO_MLX,
    FI_PROTO_UCX,
    FI_PROTO_NETWORKDIRECT,
    FI_PROTO_SHM,
    FI_PROTO_RDMA_CM_IB_XRC,
    FI_PROTO_EFA,
    FI_PROTO_PSMX3,
    FI_PROTO_RXM_TCP,
    FI_PROTO_OPX,
    FI_PROTO_CXI,
    FI_PROTO_XNET,
    FI_PROTO_SM2,
    FI_PROTO_CXI_RNR,
    FI_PROTO_LPP,
    FI_PROTO_LNX,
];

pub(super) const RESOURCE_MGMT: &[(u32, &str)] =
    names![FI_RM_UNSPEC, FI_RM_DISABLED, FI_RM_ENABLED];
pub(super) const AV_TYPES: &[(u32, &str)] = names![FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE];

pub(super) const DATATYPES: &[(u32, &str)] = names![
    FI_INT8,
    FI_UINT8,
    FI_INT16,
    FI_UINT16,
    FI_INT32,
    FI_UINT32,
    FI_INT64,
    FI_UINT64,
    FI_INT128,
    FI_UINT128,
    FI_FLOAT,
    FI_DOUBLE,
    FI_FLOAT_COMPLEX,
    FI_DOUBLE_COMPLEX,
    FI_LONG_DOUBLE,
    FI_LONG_DOUBLE_COMPLEX,
];

pub(super) const ATOMIC_OPS: &[(u32, &str)] = names![
    FI_MIN,
    FI_MAX,
    FI_SUM,
    FI_PROD,
    FI_LOR,
    FI_LAND,
    FI_BOR,
    FI_BAND,
    FI_LXOR,
    FI_BXOR,
    FI_ATOMIC_READ,
    FI_ATOMIC_WRITE,
    FI_CSWAP,
    FI_CSWAP_NE,
    FI_CSWAP_LE,
    FI_CSWAP_LT,
    FI_CSWAP_GE,
    FI_CSWAP_GT,
    FI_MSWAP,
];

pub(super) const COLLECTIVE_OPS: &[(u32, &str)] = names![
    FI_BARRIER,
    FI_BROADCAST,
    FI_ALLTOALL,
    FI_ALLREDUCE,
    FI_ALLGATHER,
    FI_REDUCE_SCATTER,
    FI_REDUCE,
    FI_SCATTER,
    FI_GATHER,
];

pub(super) const EQ_EVENTS: &[(u32, &str)] = names![
    FI_NOTIFY,
    FI_CONNREQ,
    FI_CONNECTED,
    FI_SHUTDOWN,
    FI_MR_COMPLETE,
    FI_AV_COMPLETE,
    FI_JOIN_COMPLETE,
];

/// fi_trigger.h `enum fi_op_type`.
pub(super) const OP_TYPES: &[(u32, &str)] = &[
    (0, "FI_OP_RECV"),
    (1, "FI_OP_SEND"),
    (2, "FI_OP_TRECV"),
    (3, "FI_OP_TSEND"),
    (4, "FI_OP_READ"),
    (5, "FI_OP_WRITE"),
    (6, "FI_OP_ATOMIC"),
    (7, "FI_OP_FETCH_ATOMIC"),
    (8, "FI_OP_COMPARE_ATOMIC"),
    (9, "FI_OP_CNTR_SET"),
    (10, "FI_OP_CNTR_ADD"),
];

pub(super) const HMEM_IFACES: &[(u32, &str)] = names![
    FI_HMEM_SYSTEM,
    FI_HMEM_CUDA,
    FI_HMEM_ROCR,
    FI_HMEM_ZE,
    FI_HMEM_NEURON,
    FI_HMEM_SYNAPSEAI,
];

pub(super) const CQ_FORMATS: &[(u32, &str)] = names![
    FI_CQ_FORMAT_UNSPEC,
    FI_CQ_FORMAT_CONTEXT,
    FI_CQ_FORMAT_MSG,
    FI_CQ_FORMAT_DATA,
    FI_CQ_FORMAT_TAGGED,
];

pub(super) const WAIT_OBJS: &[(u32, &str)] = names![
    FI_WAIT_NONE,
    FI_WAIT_UNSPEC,
    FI_WAIT_SET,
    FI_WAIT_FD,
    FI_WAIT_MUTEX_COND,
    FI_WAIT_YIELD,
    FI_WAIT_POLLFD,
];

pub(super) const CQ_WAIT_CONDS: &[(u32, &str)] = names![FI_CQ_COND_NONE, FI_CQ_COND_THRESHOLD];
pub(super) const CNTR_EVENTS: &[(u32, &str)] = names![FI_CNTR_EVENTS_COMP, FI_CNTR_EVENTS_BYTES];
pub(super) const BUS_TYPES: &[(u32, &str)] = &[
    (FI_BUS_UNSPEC, "FI_BUS_UNKNOWN"),
    (FI_BUS_PCI, "FI_BUS_PCI"),
];
pub(super) const LINK_STATES: &[(u32, &str)] = names![FI_LINK_UNKNOWN, FI_LINK_DOWN, FI_LINK_UP];

pub(super) fn table_name(list: &[&'static str], v: i64) -> &'static str {
    usize::try_from(v)
        .ok()
        .and_then(|i| list.get(i))
        .copied()
        .unwrap_or("Unknown")
}
