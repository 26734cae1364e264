//! Constants of the public headers (values of libfabric 2.6; abi-reference §3 lists the
//! 1.17 → 2.x differences, kept in `compat`).

pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
pub const fn fi_major(version: u32) -> u32 {
    version >> 16
}
pub const fn fi_minor(version: u32) -> u32 {
    version & 0xffff
}

pub const FI_MAJOR_VERSION: u32 = 2;
pub const FI_MINOR_VERSION: u32 = 6;
pub const FI_REVISION_VERSION: u32 = 0;
/// The API version this library implements.
pub const FI_VERSION_CURRENT: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);

pub const FI_NAME_MAX: usize = 64;
pub const FI_ATOMIC_OP_LAST: u32 = 19;
pub const FI_DATATYPE_LAST: u32 = 14;

// ---- capability and operation flags (fabric.h) ----
pub const FI_MSG: u64 = 1 << 1;
pub const FI_RMA: u64 = 1 << 2;
pub const FI_TAGGED: u64 = 1 << 3;
pub const FI_ATOMIC: u64 = 1 << 4;
pub const FI_MULTICAST: u64 = 1 << 5;
pub const FI_COLLECTIVE: u64 = 1 << 6;
pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_TRANSMIT: u64 = FI_SEND;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_MULTI_RECV: u64 = 1 << 16;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_MORE: u64 = 1 << 18;
pub const FI_PEEK: u64 = 1 << 19;
pub const FI_TRIGGER: u64 = 1 << 20;
pub const FI_FENCE: u64 = 1 << 21;
pub const FI_COMPLETION: u64 = 1 << 24;
pub const FI_EVENT: u64 = FI_COMPLETION;
pub const FI_INJECT: u64 = 1 << 25;
pub const FI_INJECT_COMPLETE: u64 = 1 << 26;
pub const FI_TRANSMIT_COMPLETE: u64 = 1 << 27;
pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
pub const FI_AFFINITY: u64 = 1 << 29;
pub const FI_COMMIT_COMPLETE: u64 = 1 << 30;
pub const FI_MATCH_COMPLETE: u64 = 1 << 31;
pub const FI_RESCAN: u64 = 1 << 35;
pub const FI_PEER_TRANSFER: u64 = 1 << 36;
pub const FI_MR_DMABUF: u64 = 1 << 40;
pub const FI_AV_USER_ID: u64 = 1 << 41;
pub const FI_MR_SINGLE_USE: u64 = 1 << 41;
pub const FI_FIREWALL_ADDR: u64 = 1 << 42;
pub const FI_PEER: u64 = 1 << 43;
pub const FI_TAGGED_DIRECTED_RECV: u64 = 1 << 45;
pub const FI_TAGGED_MULTI_RECV: u64 = 1 << 46;
pub const FI_HMEM_HOST_ALLOC: u64 = 1 << 45;
pub const FI_HMEM_DEVICE_ONLY: u64 = 1 << 46;
pub const FI_HMEM: u64 = 1 << 47;
pub const FI_EXACT_DIRECTED_RECV: u64 = 1 << 48;
pub const FI_RMA_PMEM: u64 = 1 << 49;
pub const FI_SOURCE_ERR: u64 = 1 << 50;
pub const FI_LOCAL_COMM: u64 = 1 << 51;
pub const FI_REMOTE_COMM: u64 = 1 << 52;
pub const FI_SHARED_AV: u64 = 1 << 53;
pub const FI_PROV_ATTR_ONLY: u64 = 1 << 54;
pub const FI_NUMERICHOST: u64 = 1 << 55;
pub const FI_RMA_EVENT: u64 = 1 << 56;
pub const FI_SOURCE: u64 = 1 << 57;
pub const FI_NAMED_RX_CTX: u64 = 1 << 58;
pub const FI_DIRECTED_RECV: u64 = 1 << 59;
pub const FI_CLAIM: u64 = 1 << 59;
pub const FI_DISCARD: u64 = 1 << 58;
pub const FI_AUTH_KEY: u64 = 1 << 57;
/// fi_bind(): completions only for operations that ask for one.
pub const FI_SELECTIVE_COMPLETION: u64 = 1 << 59;
/// fi_domain.h flags.
pub const FI_SYMMETRIC: u64 = 1 << 59;
pub const FI_SYNC_ERR: u64 = 1 << 58;
pub const FI_UNIVERSE: u64 = 1 << 57;
/// fi_atomic.h CQ flags.
pub const FI_FETCH_ATOMIC: u64 = 1 << 58;
pub const FI_COMPARE_ATOMIC: u64 = 1 << 59;

/// Mode bits.
pub const FI_CONTEXT: u64 = 1 << 59;
pub const FI_MSG_PREFIX: u64 = 1 << 58;
pub const FI_ASYNC_IOV: u64 = 1 << 57;
pub const FI_RX_CQ_DATA: u64 = 1 << 56;
pub const FI_LOCAL_MR: u64 = 1 << 55;
pub const FI_CONTEXT2: u64 = 1 << 52;

// ---- address formats ----
pub const FI_FORMAT_UNSPEC: u32 = 0;
pub const FI_SOCKADDR: u32 = 1;
pub const FI_SOCKADDR_IN: u32 = 2;
pub const FI_SOCKADDR_IN6: u32 = 3;
pub const FI_SOCKADDR_IB: u32 = 4;
pub const FI_ADDR_PSMX: u32 = 5;
pub const FI_ADDR_GNI: u32 = 6;
pub const FI_ADDR_BGQ: u32 = 7;
pub const FI_ADDR_MLX: u32 = 8;
pub const FI_ADDR_STR: u32 = 9;
pub const FI_ADDR_PSMX2: u32 = 10;
pub const FI_ADDR_IB_UD: u32 = 11;
pub const FI_ADDR_EFA: u32 = 12;
pub const FI_ADDR_PSMX3: u32 = 13;
pub const FI_ADDR_OPX: u32 = 14;
pub const FI_ADDR_CXI: u32 = 15;
pub const FI_ADDR_UCX: u32 = 16;
pub const FI_SOCKADDR_IP: u32 = 17;

pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;
pub const FI_SHARED_CONTEXT: usize = usize::MAX;
pub const FI_AV_AUTH_KEY: usize = usize::MAX;

// ---- enums ----
pub const FI_AV_UNSPEC: u32 = 0;
pub const FI_AV_MAP: u32 = 1;
pub const FI_AV_TABLE: u32 = 2;

pub const FI_MR_UNSPEC: u32 = 0;
pub const FI_MR_BASIC: u32 = 1 << 0;
pub const FI_MR_SCALABLE: u32 = 1 << 1;
pub const FI_MR_LOCAL: u32 = 1 << 2;
pub const FI_MR_RAW: u32 = 1 << 3;
pub const FI_MR_VIRT_ADDR: u32 = 1 << 4;
pub const FI_MR_ALLOCATED: u32 = 1 << 5;
pub const FI_MR_PROV_KEY: u32 = 1 << 6;
pub const FI_MR_MMU_NOTIFY: u32 = 1 << 7;
pub const FI_MR_RMA_EVENT: u32 = 1 << 8;
pub const FI_MR_ENDPOINT: u32 = 1 << 9;
pub const FI_MR_HMEM: u32 = 1 << 10;
pub const FI_MR_COLLECTIVE: u32 = 1 << 11;

pub const FI_PROGRESS_UNSPEC: u32 = 0;
pub const FI_PROGRESS_AUTO: u32 = 1;
pub const FI_PROGRESS_MANUAL: u32 = 2;
pub const FI_PROGRESS_CONTROL_UNIFIED: u32 = 3;

pub const FI_THREAD_UNSPEC: u32 = 0;
pub const FI_THREAD_SAFE: u32 = 1;
pub const FI_THREAD_FID: u32 = 2;
pub const FI_THREAD_DOMAIN: u32 = 3;
pub const FI_THREAD_COMPLETION: u32 = 4;
pub const FI_THREAD_ENDPOINT: u32 = 5;

pub const FI_RM_UNSPEC: u32 = 0;
pub const FI_RM_DISABLED: u32 = 1;
pub const FI_RM_ENABLED: u32 = 2;

pub const FI_ORDER_NONE: u64 = 0;
pub const FI_ORDER_RAR: u64 = 1 << 0;
pub const FI_ORDER_RAW: u64 = 1 << 1;
pub const FI_ORDER_RAS: u64 = 1 << 2;
pub const FI_ORDER_WAR: u64 = 1 << 3;
pub const FI_ORDER_WAW: u64 = 1 << 4;
pub const FI_ORDER_WAS: u64 = 1 << 5;
pub const FI_ORDER_SAR: u64 = 1 << 6;
pub const FI_ORDER_SAW: u64 = 1 << 7;
pub const FI_ORDER_SAS: u64 = 1 << 8;
pub const FI_ORDER_STRICT: u64 = 0x1ff;
pub const FI_ORDER_DATA: u64 = 1 << 16;
pub const FI_ORDER_RMA_RAR: u64 = 1 << 32;
pub const FI_ORDER_RMA_RAW: u64 = 1 << 33;
pub const FI_ORDER_RMA_WAR: u64 = 1 << 34;
pub const FI_ORDER_RMA_WAW: u64 = 1 << 35;
pub const FI_ORDER_ATOMIC_RAR: u64 = 1 << 36;
pub const FI_ORDER_ATOMIC_RAW: u64 = 1 << 37;
pub const FI_ORDER_ATOMIC_WAR: u64 = 1 << 38;
pub const FI_ORDER_ATOMIC_WAW: u64 = 1 << 39;

pub const FI_EP_UNSPEC: u32 = 0;
pub const FI_EP_MSG: u32 = 1;
pub const FI_EP_DGRAM: u32 = 2;
pub const FI_EP_RDM: u32 = 3;
/// 1.x only: `FI_EP_SOCK_STREAM`, `FI_EP_SOCK_DGRAM`.
pub const FI_EP_SOCK_STREAM_1_X: u32 = 4;
pub const FI_EP_SOCK_DGRAM_1_X: u32 = 5;

pub const FI_PROTO_UNSPEC: u32 = 0;
pub const FI_PROTO_RDMA_CM_IB_RC: u32 = 1;
pub const FI_PROTO_IWARP: u32 = 2;
pub const FI_PROTO_IB_UD: u32 = 3;
pub const FI_PROTO_PSMX: u32 = 4;
pub const FI_PROTO_UDP: u32 = 5;
pub const FI_PROTO_SOCK_TCP: u32 = 6;
pub const FI_PROTO_MXM: u32 = 7;
pub const FI_PROTO_IWARP_RDM: u32 = 8;
pub const FI_PROTO_IB_RDM: u32 = 9;
pub const FI_PROTO_GNI: u32 = 10;
pub const FI_PROTO_RXM: u32 = 11;
pub const FI_PROTO_RXD: u32 = 12;
pub const FI_PROTO_MLX: u32 = 13;
pub const FI_PROTO_NETWORKDIRECT: u32 = 14;
pub const FI_PROTO_PSMX2: u32 = 15;
pub const FI_PROTO_SHM: u32 = 16;
pub const FI_PROTO_MRAIL: u32 = 17;
pub const FI_PROTO_RSTREAM: u32 = 18;
pub const FI_PROTO_RDMA_CM_IB_XRC: u32 = 19;
pub const FI_PROTO_EFA: u32 = 20;
pub const FI_PROTO_PSMX3: u32 = 21;
pub const FI_PROTO_RXM_TCP: u32 = 22;
pub const FI_PROTO_OPX: u32 = 23;
pub const FI_PROTO_CXI: u32 = 24;
pub const FI_PROTO_XNET: u32 = 25;
pub const FI_PROTO_COLL: u32 = 26;
pub const FI_PROTO_UCX: u32 = 27;
pub const FI_PROTO_SM2: u32 = 28;
pub const FI_PROTO_CXI_RNR: u32 = 29;
pub const FI_PROTO_LPP: u32 = 30;
pub const FI_PROTO_LNX: u32 = 31;

pub const FI_TAG_BITS: u64 = 0;
pub const FI_TAG_MPI: u64 = 1;
pub const FI_TAG_CCL: u64 = 2;
pub const FI_TAG_MAX_FORMAT: u64 = 1 << 16;

pub const FI_TC_UNSPEC: u32 = 0;
pub const FI_TC_DSCP: u32 = 0x100;
pub const FI_TC_LABEL: u32 = 0x200;
pub const FI_TC_BEST_EFFORT: u32 = FI_TC_LABEL;
pub const FI_TC_LOW_LATENCY: u32 = 0x201;
pub const FI_TC_DEDICATED_ACCESS: u32 = 0x202;
pub const FI_TC_BULK_DATA: u32 = 0x203;
pub const FI_TC_SCAVENGER: u32 = 0x204;
pub const FI_TC_NETWORK_CTRL: u32 = 0x205;

pub const FI_BUS_UNSPEC: u32 = 0;
pub const FI_BUS_PCI: u32 = 1;
pub const FI_LINK_UNKNOWN: u32 = 0;
pub const FI_LINK_DOWN: u32 = 1;
pub const FI_LINK_UP: u32 = 2;

// ---- fid classes ----
pub const FI_CLASS_UNSPEC: usize = 0;
pub const FI_CLASS_FABRIC: usize = 1;
pub const FI_CLASS_DOMAIN: usize = 2;
pub const FI_CLASS_EP: usize = 3;
pub const FI_CLASS_SEP: usize = 4;
pub const FI_CLASS_RX_CTX: usize = 5;
pub const FI_CLASS_SRX_CTX: usize = 6;
pub const FI_CLASS_TX_CTX: usize = 7;
pub const FI_CLASS_STX_CTX: usize = 8;
pub const FI_CLASS_PEP: usize = 9;
pub const FI_CLASS_INTERFACE: usize = 10;
pub const FI_CLASS_AV: usize = 11;
pub const FI_CLASS_MR: usize = 12;
pub const FI_CLASS_EQ: usize = 13;
pub const FI_CLASS_CQ: usize = 14;
pub const FI_CLASS_CNTR: usize = 15;
pub const FI_CLASS_WAIT: usize = 16;
pub const FI_CLASS_POLL: usize = 17;
pub const FI_CLASS_CONNREQ: usize = 18;
pub const FI_CLASS_MC: usize = 19;
pub const FI_CLASS_NIC: usize = 20;
pub const FI_CLASS_AV_SET: usize = 21;
pub const FI_CLASS_MR_CACHE: usize = 22;
pub const FI_CLASS_MEM_MONITOR: usize = 23;
pub const FI_CLASS_PEER_CQ: usize = 24;
pub const FI_CLASS_PEER_SRX: usize = 25;
pub const FI_CLASS_LOG: usize = 26;
pub const FI_CLASS_PEER_AV: usize = 27;
pub const FI_CLASS_PEER_AV_SET: usize = 28;
pub const FI_CLASS_PEER_CNTR: usize = 29;
pub const FI_CLASS_PROFILE: usize = 30;

// ---- fi_control commands ----
pub const FI_GETFIDFLAG: i32 = 0;
pub const FI_SETFIDFLAG: i32 = 1;
pub const FI_GETOPSFLAG: i32 = 2;
pub const FI_SETOPSFLAG: i32 = 3;
pub const FI_ALIAS: i32 = 4;
pub const FI_GETWAIT: i32 = 5;
pub const FI_ENABLE: i32 = 6;
pub const FI_BACKLOG: i32 = 7;
pub const FI_GET_RAW_MR: i32 = 8;
pub const FI_MAP_RAW_MR: i32 = 9;
pub const FI_UNMAP_KEY: i32 = 10;
pub const FI_QUEUE_WORK: i32 = 11;
pub const FI_CANCEL_WORK: i32 = 12;
pub const FI_FLUSH_WORK: i32 = 13;
pub const FI_REFRESH: i32 = 14;
pub const FI_DUP: i32 = 15;
pub const FI_GETWAITOBJ: i32 = 16;
pub const FI_GET_VAL: i32 = 17;
pub const FI_SET_VAL: i32 = 18;
pub const FI_EXPORT_FID: i32 = 19;
pub const FI_GET_FD: i32 = 20;

// ---- fi_eq.h ----
pub const FI_WAIT_NONE: u32 = 0;
pub const FI_WAIT_UNSPEC: u32 = 1;
pub const FI_WAIT_SET: u32 = 2;
pub const FI_WAIT_FD: u32 = 3;
pub const FI_WAIT_MUTEX_COND: u32 = 4;
pub const FI_WAIT_YIELD: u32 = 5;
pub const FI_WAIT_POLLFD: u32 = 6;

pub const FI_NOTIFY: u32 = 0;
pub const FI_CONNREQ: u32 = 1;
pub const FI_CONNECTED: u32 = 2;
pub const FI_SHUTDOWN: u32 = 3;
pub const FI_MR_COMPLETE: u32 = 4;
pub const FI_AV_COMPLETE: u32 = 5;
pub const FI_JOIN_COMPLETE: u32 = 6;

pub const FI_CQ_FORMAT_UNSPEC: u32 = 0;
pub const FI_CQ_FORMAT_CONTEXT: u32 = 1;
pub const FI_CQ_FORMAT_MSG: u32 = 2;
pub const FI_CQ_FORMAT_DATA: u32 = 3;
pub const FI_CQ_FORMAT_TAGGED: u32 = 4;

pub const FI_CQ_COND_NONE: u32 = 0;
pub const FI_CQ_COND_THRESHOLD: u32 = 1;

pub const FI_CNTR_EVENTS_COMP: u32 = 0;
pub const FI_CNTR_EVENTS_BYTES: u32 = 1;

// ---- fi_endpoint.h options ----
pub const FI_OPT_ENDPOINT: i32 = 0;
pub const FI_OPT_MIN_MULTI_RECV: i32 = 0;
pub const FI_OPT_CM_DATA_SIZE: i32 = 1;
pub const FI_OPT_BUFFERED_MIN: i32 = 2;
pub const FI_OPT_BUFFERED_LIMIT: i32 = 3;
pub const FI_OPT_SEND_BUF_SIZE: i32 = 4;
pub const FI_OPT_RECV_BUF_SIZE: i32 = 5;
pub const FI_OPT_TX_SIZE: i32 = 6;
pub const FI_OPT_RX_SIZE: i32 = 7;
pub const FI_OPT_FI_HMEM_P2P: i32 = 8;
pub const FI_OPT_XPU_TRIGGER: i32 = 9;
pub const FI_OPT_CUDA_API_PERMITTED: i32 = 10;
pub const FI_OPT_SHARED_MEMORY_PERMITTED: i32 = 11;
pub const FI_OPT_MAX_MSG_SIZE: i32 = 12;
pub const FI_OPT_MAX_TAGGED_SIZE: i32 = 13;
pub const FI_OPT_MAX_RMA_SIZE: i32 = 14;
pub const FI_OPT_MAX_ATOMIC_SIZE: i32 = 15;
pub const FI_OPT_INJECT_MSG_SIZE: i32 = 16;
pub const FI_OPT_INJECT_TAGGED_SIZE: i32 = 17;
pub const FI_OPT_INJECT_RMA_SIZE: i32 = 18;
pub const FI_OPT_INJECT_ATOMIC_SIZE: i32 = 19;
pub const FI_OPT_FIREWALL_ADDR: i32 = 20;

pub const FI_HMEM_P2P_ENABLED: i32 = 0;
pub const FI_HMEM_P2P_REQUIRED: i32 = 1;
pub const FI_HMEM_P2P_PREFERRED: i32 = 2;
pub const FI_HMEM_P2P_DISABLED: i32 = 3;

// ---- fi_ext.h / fi_ext_efa.h ----
pub const FI_PROV_SPECIFIC_EFA: i32 = 0xefa << 16;
pub const FI_PROV_SPECIFIC_TCP: i32 = 0x7cb << 16;
pub const FI_OPT_EFA_RNR_RETRY: i32 = -FI_PROV_SPECIFIC_EFA;
pub const FI_OPT_EFA_EMULATED_READ: i32 = FI_OPT_EFA_RNR_RETRY + 1;
pub const FI_OPT_EFA_EMULATED_WRITE: i32 = FI_OPT_EFA_RNR_RETRY + 2;
pub const FI_OPT_EFA_EMULATED_ATOMICS: i32 = FI_OPT_EFA_RNR_RETRY + 3;
pub const FI_OPT_EFA_USE_DEVICE_RDMA: i32 = FI_OPT_EFA_RNR_RETRY + 4;
pub const FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES: i32 = FI_OPT_EFA_RNR_RETRY + 5;
pub const FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES: i32 = FI_OPT_EFA_RNR_RETRY + 6;
pub const FI_OPT_EFA_HOMOGENEOUS_PEERS: i32 = FI_OPT_EFA_RNR_RETRY + 7;
pub const FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV: i32 = FI_OPT_EFA_RNR_RETRY + 8;
pub const FI_EFA_DOMAIN_OPS: &str = "efa domain ops";
pub const FI_EFA_FEATURE_OPS: &str = "efa feature ops";
pub const FI_EFA_MR_ATTR_RECV_IC_ID: u16 = 1 << 0;
pub const FI_EFA_MR_ATTR_RDMA_READ_IC_ID: u16 = 1 << 1;
pub const FI_EFA_MR_ATTR_RDMA_RECV_IC_ID: u16 = 1 << 2;
pub const FI_LOG_PROV_FILTERED: u64 = 1 << 0;

// ---- fi_domain.h: hmem, atomics, collectives ----
pub const FI_HMEM_SYSTEM: u32 = 0;
pub const FI_HMEM_CUDA: u32 = 1;
pub const FI_HMEM_ROCR: u32 = 2;
pub const FI_HMEM_ZE: u32 = 3;
pub const FI_HMEM_NEURON: u32 = 4;
pub const FI_HMEM_SYNAPSEAI: u32 = 5;

pub const FI_COLLECTIVE_OFFSET: u32 = 256;

pub const FI_INT8: u32 = 0;
pub const FI_UINT8: u32 = 1;
pub const FI_INT16: u32 = 2;
pub const FI_UINT16: u32 = 3;
pub const FI_INT32: u32 = 4;
pub const FI_UINT32: u32 = 5;
pub const FI_INT64: u32 = 6;
pub const FI_UINT64: u32 = 7;
pub const FI_FLOAT: u32 = 8;
pub const FI_DOUBLE: u32 = 9;
pub const FI_FLOAT_COMPLEX: u32 = 10;
pub const FI_DOUBLE_COMPLEX: u32 = 11;
pub const FI_LONG_DOUBLE: u32 = 12;
pub const FI_LONG_DOUBLE_COMPLEX: u32 = 13;
pub const FI_INT128: u32 = 14;
pub const FI_UINT128: u32 = 15;
pub const FI_FLOAT16: u32 = 16;
pub const FI_BFLOAT16: u32 = 17;
pub const FI_FLOAT8_E4M3: u32 = 18;
pub const FI_FLOAT8_E5M2: u32 = 19;
pub const FI_VOID: u32 = FI_COLLECTIVE_OFFSET;

pub const FI_MIN: u32 = 0;
pub const FI_MAX: u32 = 1;
pub const FI_SUM: u32 = 2;
pub const FI_PROD: u32 = 3;
pub const FI_LOR: u32 = 4;
pub const FI_LAND: u32 = 5;
pub const FI_BOR: u32 = 6;
pub const FI_BAND: u32 = 7;
pub const FI_LXOR: u32 = 8;
pub const FI_BXOR: u32 = 9;
pub const FI_ATOMIC_READ: u32 = 10;
pub const FI_ATOMIC_WRITE: u32 = 11;
pub const FI_CSWAP: u32 = 12;
pub const FI_CSWAP_NE: u32 = 13;
pub const FI_CSWAP_LE: u32 = 14;
pub const FI_CSWAP_LT: u32 = 15;
pub const FI_CSWAP_GE: u32 = 16;
pub const FI_CSWAP_GT: u32 = 17;
pub const FI_MSWAP: u32 = 18;
pub const FI_DIFF: u32 = 19;
pub const FI_NOOP: u32 = FI_COLLECTIVE_OFFSET;

pub const FI_BARRIER: u32 = 0;
pub const FI_BROADCAST: u32 = 1;
pub const FI_ALLTOALL: u32 = 2;
pub const FI_ALLREDUCE: u32 = 3;
pub const FI_ALLGATHER: u32 = 4;
pub const FI_REDUCE_SCATTER: u32 = 5;
pub const FI_REDUCE: u32 = 6;
pub const FI_SCATTER: u32 = 7;
pub const FI_GATHER: u32 = 8;

// ---- fi_tostr types ----
pub const FI_TYPE_INFO: u32 = 0;
pub const FI_TYPE_EP_TYPE: u32 = 1;
pub const FI_TYPE_CAPS: u32 = 2;
pub const FI_TYPE_OP_FLAGS: u32 = 3;
pub const FI_TYPE_ADDR_FORMAT: u32 = 4;
pub const FI_TYPE_TX_ATTR: u32 = 5;
pub const FI_TYPE_RX_ATTR: u32 = 6;
pub const FI_TYPE_EP_ATTR: u32 = 7;
pub const FI_TYPE_DOMAIN_ATTR: u32 = 8;
pub const FI_TYPE_FABRIC_ATTR: u32 = 9;
pub const FI_TYPE_THREADING: u32 = 10;
pub const FI_TYPE_PROGRESS: u32 = 11;
pub const FI_TYPE_PROTOCOL: u32 = 12;
pub const FI_TYPE_MSG_ORDER: u32 = 13;
pub const FI_TYPE_MODE: u32 = 14;
pub const FI_TYPE_AV_TYPE: u32 = 15;
pub const FI_TYPE_ATOMIC_TYPE: u32 = 16;
pub const FI_TYPE_ATOMIC_OP: u32 = 17;
pub const FI_TYPE_VERSION: u32 = 18;
pub const FI_TYPE_EQ_EVENT: u32 = 19;
pub const FI_TYPE_CQ_EVENT_FLAGS: u32 = 20;
pub const FI_TYPE_MR_MODE: u32 = 21;
pub const FI_TYPE_OP_TYPE: u32 = 22;
pub const FI_TYPE_FID: u32 = 23;
pub const FI_TYPE_COLLECTIVE_OP: u32 = 24;
pub const FI_TYPE_HMEM_IFACE: u32 = 25;
pub const FI_TYPE_CQ_FORMAT: u32 = 26;
pub const FI_TYPE_LOG_LEVEL: u32 = 27;
pub const FI_TYPE_LOG_SUBSYS: u32 = 28;
pub const FI_TYPE_AV_ATTR: u32 = 29;
pub const FI_TYPE_CQ_ATTR: u32 = 30;
pub const FI_TYPE_MR_ATTR: u32 = 31;
pub const FI_TYPE_CNTR_ATTR: u32 = 32;
pub const FI_TYPE_CQ_ERR_ENTRY: u32 = 33;
pub const FI_TYPE_CQ_WAIT_COND: u32 = 34;
pub const FI_TYPE_WAIT_OBJ: u32 = 35;

// ---- parameters and logging ----
pub const FI_PARAM_STRING: u32 = 0;
pub const FI_PARAM_INT: u32 = 1;
pub const FI_PARAM_BOOL: u32 = 2;
pub const FI_PARAM_SIZE_T: u32 = 3;

pub const FI_LOG_WARN: u32 = 0;
pub const FI_LOG_TRACE: u32 = 1;
pub const FI_LOG_INFO: u32 = 2;
pub const FI_LOG_DEBUG: u32 = 3;

pub const FI_LOG_CORE: u32 = 0;
pub const FI_LOG_FABRIC: u32 = 1;
pub const FI_LOG_DOMAIN: u32 = 2;
pub const FI_LOG_EP_CTRL: u32 = 3;
pub const FI_LOG_EP_DATA: u32 = 4;
pub const FI_LOG_AV: u32 = 5;
pub const FI_LOG_CQ: u32 = 6;
pub const FI_LOG_EQ: u32 = 7;
pub const FI_LOG_MR: u32 = 8;
pub const FI_LOG_CNTR: u32 = 9;
pub const FI_LOG_SUBSYS_MAX: u32 = 10;

// ---- fi_errno.h: FI_E* are the errno values, plus the libfabric range ----
pub const FI_SUCCESS: i32 = 0;
pub const FI_EPERM: i32 = libc::EPERM;
pub const FI_ENOENT: i32 = libc::ENOENT;
pub const FI_EINTR: i32 = libc::EINTR;
pub const FI_EIO: i32 = libc::EIO;
pub const FI_E2BIG: i32 = libc::E2BIG;
pub const FI_EBADF: i32 = libc::EBADF;
pub const FI_EAGAIN: i32 = libc::EAGAIN;
pub const FI_ENOMEM: i32 = libc::ENOMEM;
pub const FI_EACCES: i32 = libc::EACCES;
pub const FI_EFAULT: i32 = libc::EFAULT;
pub const FI_EBUSY: i32 = libc::EBUSY;
pub const FI_ENODEV: i32 = libc::ENODEV;
pub const FI_EINVAL: i32 = libc::EINVAL;
pub const FI_EMFILE: i32 = libc::EMFILE;
pub const FI_ENOSPC: i32 = libc::ENOSPC;
pub const FI_ENOSYS: i32 = libc::ENOSYS;
pub const FI_EWOULDBLOCK: i32 = libc::EWOULDBLOCK;
pub const FI_ENOMSG: i32 = libc::ENOMSG;
pub const FI_ENODATA: i32 = libc::ENODATA;
pub const FI_EOVERFLOW: i32 = libc::EOVERFLOW;
pub const FI_EMSGSIZE: i32 = libc::EMSGSIZE;
pub const FI_ENOPROTOOPT: i32 = libc::ENOPROTOOPT;
pub const FI_EOPNOTSUPP: i32 = libc::EOPNOTSUPP;
pub const FI_EADDRINUSE: i32 = libc::EADDRINUSE;
pub const FI_EADDRNOTAVAIL: i32 = libc::EADDRNOTAVAIL;
pub const FI_ENETDOWN: i32 = libc::ENETDOWN;
pub const FI_ENETUNREACH: i32 = libc::ENETUNREACH;
pub const FI_ECONNABORTED: i32 = libc::ECONNABORTED;
pub const FI_ECONNRESET: i32 = libc::ECONNRESET;
pub const FI_ENOBUFS: i32 = libc::ENOBUFS;
pub const FI_EISCONN: i32 = libc::EISCONN;
pub const FI_ENOTCONN: i32 = libc::ENOTCONN;
pub const FI_ESHUTDOWN: i32 = libc::ESHUTDOWN;
pub const FI_ETIMEDOUT: i32 = libc::ETIMEDOUT;
pub const FI_ECONNREFUSED: i32 = libc::ECONNREFUSED;
pub const FI_EHOSTDOWN: i32 = libc::EHOSTDOWN;
pub const FI_EHOSTUNREACH: i32 = libc::EHOSTUNREACH;
pub const FI_EALREADY: i32 = libc::EALREADY;
pub const FI_EINPROGRESS: i32 = libc::EINPROGRESS;
pub const FI_EREMOTEIO: i32 = libc::EREMOTEIO;
pub const FI_EPROTO: i32 = libc::EPROTO;
pub const FI_ECANCELED: i32 = libc::ECANCELED;
pub const FI_EKEYREJECTED: i32 = libc::EKEYREJECTED;

pub const FI_ERRNO_OFFSET: i32 = 256;
pub const FI_EOTHER: i32 = 256;
pub const FI_ETOOSMALL: i32 = 257;
pub const FI_EOPBADSTATE: i32 = 258;
pub const FI_EAVAIL: i32 = 259;
pub const FI_EBADFLAGS: i32 = 260;
pub const FI_ENOEQ: i32 = 261;
pub const FI_EDOMAIN: i32 = 262;
pub const FI_ENOCQ: i32 = 263;
pub const FI_ECRC: i32 = 264;
pub const FI_ETRUNC: i32 = 265;
pub const FI_ENOKEY: i32 = 266;
pub const FI_ENOAV: i32 = 267;
pub const FI_EOVERRUN: i32 = 268;
pub const FI_ENORX: i32 = 269;
pub const FI_ENOMR: i32 = 270;
pub const FI_EFIREWALLADDR: i32 = 271;
pub const FI_ERRNO_MAX: i32 = 272;
