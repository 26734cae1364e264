//! Tests of `tostr`: flag sets, enumerations, attribute blocks, addresses, whole `fi_info`
//! texts and NULLs, against the text libfabric 2.6 prints; truncation in short buffers.

use super::*;
use crate::core::info::{BusAttr, DeviceAttr, EpAttr, LinkAttr};

fn text(datatype: u32, v: Value<'_>) -> String {
    to_string(|b| tostr(b, datatype, v, &mut NoFidText))
}

fn int(datatype: u32, v: i32) -> String {
    text(datatype, Value::Int(v))
}

// Expected strings: unchanged formats are what Debian's libfabric 1.17 prints for the same
// data; changed ones follow libfabric 2.6 (abi-reference §4).

#[test]
fn flag_sets() {
    let all_caps = FI_MSG
        | FI_RMA
        | FI_TAGGED
        | FI_ATOMIC
        | FI_MULTICAST
        | FI_COLLECTIVE
        | FI_READ
        | FI_WRITE
        | FI_RECV
        | FI_SEND
        | FI_REMOTE_READ
        | FI_REMOTE_WRITE
        | FI_MULTI_RECV
        | FI_REMOTE_CQ_DATA
        | FI_TRIGGER
        | FI_FENCE
        | FI_RMA_PMEM
        | FI_SOURCE_ERR
        | FI_LOCAL_COMM
        | FI_REMOTE_COMM
        | FI_SHARED_AV
        | FI_RMA_EVENT
        | FI_SOURCE
        | FI_NAMED_RX_CTX
        | FI_DIRECTED_RECV
        | FI_AV_USER_ID
        | FI_PEER
        | FI_HMEM;
    // 2.6 adds FI_AV_USER_ID and FI_PEER; bits it has no name for print nothing.
    let want = "FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_MULTICAST, FI_COLLECTIVE, FI_READ, \
                FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_MULTI_RECV, \
                FI_REMOTE_CQ_DATA, FI_TRIGGER, FI_FENCE, FI_RMA_PMEM, FI_SOURCE_ERR, \
                FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV, FI_RMA_EVENT, FI_SOURCE, \
                FI_NAMED_RX_CTX, FI_DIRECTED_RECV, FI_AV_USER_ID, FI_PEER, FI_HMEM";
    assert_eq!(text(FI_TYPE_CAPS, Value::U64(all_caps)), want);
    assert_eq!(text(FI_TYPE_CAPS, Value::U64(!0)), want);
    assert_eq!(text(FI_TYPE_CAPS, Value::U64(0)), "");
    assert_eq!(
        text(FI_TYPE_OP_FLAGS, Value::U64(!0)),
        "FI_MULTICAST, FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_MORE, FI_PEEK, FI_TRIGGER, \
         FI_FENCE, FI_COMPLETION, FI_INJECT, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, \
         FI_DELIVERY_COMPLETE, FI_MATCH_COMPLETE, FI_AFFINITY, FI_CLAIM, FI_DISCARD"
    );
    assert_eq!(
        text(FI_TYPE_MSG_ORDER, Value::U64(!0)),
        "FI_ORDER_RAR, FI_ORDER_RAW, FI_ORDER_RAS, FI_ORDER_WAR, FI_ORDER_WAW, \
         FI_ORDER_WAS, FI_ORDER_SAR, FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_RMA_RAR, \
         FI_ORDER_RMA_RAW, FI_ORDER_RMA_WAR, FI_ORDER_RMA_WAW, FI_ORDER_ATOMIC_RAR, \
         FI_ORDER_ATOMIC_RAW, FI_ORDER_ATOMIC_WAR, FI_ORDER_ATOMIC_WAW"
    );
    // 2.6 no longer names 1.x's FI_NOTIFY_FLAGS_ONLY, FI_RESTRICTED_COMP, FI_BUFFERED_RECV.
    assert_eq!(
        text(FI_TYPE_MODE, Value::U64(!0)),
        "FI_CONTEXT, FI_MSG_PREFIX, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_LOCAL_MR, FI_CONTEXT2"
    );
    assert_eq!(
        text(FI_TYPE_CQ_EVENT_FLAGS, Value::U64(!0)),
        "FI_SEND, FI_RECV, FI_RMA, FI_ATOMIC, FI_MSG, FI_TAGGED, FI_READ, FI_WRITE, \
         FI_REMOTE_READ, FI_REMOTE_WRITE, FI_REMOTE_CQ_DATA, FI_MULTI_RECV, FI_MORE, FI_CLAIM"
    );
    assert_eq!(
        int(FI_TYPE_MR_MODE, !0),
        "FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_LOCAL, FI_MR_RAW, FI_MR_VIRT_ADDR, \
         FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, \
         FI_MR_ENDPOINT, FI_MR_HMEM, FI_MR_COLLECTIVE"
    );
}

#[test]
fn enumerations() {
    let list = |t: u32, n: i32| (0..n).map(|v| int(t, v)).collect::<Vec<_>>();
    assert_eq!(
        list(FI_TYPE_EP_TYPE, 6),
        [
            "FI_EP_UNSPEC",
            "FI_EP_MSG",
            "FI_EP_DGRAM",
            "FI_EP_RDM",
            "Unknown",
            "Unknown"
        ]
    );
    assert_eq!(int(FI_TYPE_EP_TYPE, -1), "Unknown");
    let formats: Vec<String> = (0..19u32)
        .map(|v| text(FI_TYPE_ADDR_FORMAT, Value::U32(v)))
        .collect();
    assert_eq!(
        formats,
        [
            "FI_FORMAT_UNSPEC",
            "FI_SOCKADDR",
            "FI_SOCKADDR_IN",
            "FI_SOCKADDR_IN6",
            "FI_SOCKADDR_IB",
            "Unknown",
            "Unknown",
            "Unknown",
            "FI_ADDR_MLX",
            "FI_ADDR_STR",
            "FI_ADDR_PSMX2",
            "FI_ADDR_IB_UD",
            "FI_ADDR_EFA",
            "FI_ADDR_PSMX3",
            "FI_ADDR_OPX",
            "FI_ADDR_CXI",
            "FI_ADDR_UCX",
            "FI_SOCKADDR_IP",
            "Unknown"
        ]
    );
    assert_eq!(
        list(FI_TYPE_THREADING, 7),
        [
            "FI_THREAD_UNSPEC",
            "FI_THREAD_SAFE",
            "FI_THREAD_FID",
            "FI_THREAD_DOMAIN",
            "FI_THREAD_COMPLETION",
            "FI_THREAD_ENDPOINT",
            "Unknown"
        ]
    );
    assert_eq!(
        list(FI_TYPE_PROGRESS, 5),
        [
            "FI_PROGRESS_UNSPEC",
            "FI_PROGRESS_AUTO",
            "FI_PROGRESS_MANUAL",
            "FI_PROGRESS_CONTROL_UNIFIED",
            "Unknown"
        ]
    );
    let protos: Vec<String> = [0u32, 4, 5, 7, 16, 20, 25, 26, 31, 32]
        .iter()
        .map(|&v| text(FI_TYPE_PROTOCOL, Value::U32(v)))
        .collect();
    assert_eq!(
        protos,
        [
            "FI_PROTO_UNSPEC",
            "Unknown",
            "FI_PROTO_UDP",
            "Unknown",
            "FI_PROTO_SHM",
            "FI_PROTO_EFA",
            "FI_PROTO_XNET",
            "Unknown",
            "FI_PROTO_LNX",
            "Unknown"
        ]
    );
    assert_eq!(
        list(FI_TYPE_AV_TYPE, 4),
        ["FI_AV_UNSPEC", "FI_AV_MAP", "FI_AV_TABLE", "Unknown"]
    );
    let types = list(FI_TYPE_ATOMIC_TYPE, 17);
    assert_eq!(types[0], "FI_INT8");
    assert_eq!(types[13], "FI_LONG_DOUBLE_COMPLEX");
    assert_eq!(types[15], "FI_UINT128");
    assert_eq!(
        types[16], "Unknown",
        "FI_FLOAT16 has no name in 2.6's table"
    );
    let ops = list(FI_TYPE_ATOMIC_OP, 20);
    assert_eq!(ops[10], "FI_ATOMIC_READ");
    assert_eq!(ops[18], "FI_MSWAP");
    assert_eq!(ops[19], "Unknown", "FI_DIFF has no name in 2.6's table");
    assert_eq!(
        list(FI_TYPE_EQ_EVENT, 8),
        [
            "FI_NOTIFY",
            "FI_CONNREQ",
            "FI_CONNECTED",
            "FI_SHUTDOWN",
            "FI_MR_COMPLETE",
            "FI_AV_COMPLETE",
            "FI_JOIN_COMPLETE",
            "Unknown"
        ]
    );
    assert_eq!(int(FI_TYPE_OP_TYPE, 0), "FI_OP_RECV");
    assert_eq!(int(FI_TYPE_OP_TYPE, 10), "FI_OP_CNTR_ADD");
    assert_eq!(int(FI_TYPE_OP_TYPE, 11), "Unknown");
    assert_eq!(int(FI_TYPE_COLLECTIVE_OP, 8), "FI_GATHER");
    assert_eq!(int(FI_TYPE_COLLECTIVE_OP, 9), "Unknown");
    assert_eq!(int(FI_TYPE_HMEM_IFACE, 5), "FI_HMEM_SYNAPSEAI");
    assert_eq!(int(FI_TYPE_HMEM_IFACE, 6), "Unknown");
    assert_eq!(int(FI_TYPE_CQ_FORMAT, 4), "FI_CQ_FORMAT_TAGGED");
    assert_eq!(
        list(FI_TYPE_LOG_LEVEL, 5),
        ["warn", "trace", "info", "debug", "Unknown"]
    );
    assert_eq!(int(FI_TYPE_LOG_SUBSYS, 9), "cntr");
    assert_eq!(int(FI_TYPE_LOG_SUBSYS, 10), "Unknown");
    assert_eq!(int(FI_TYPE_LOG_SUBSYS, -3), "Unknown");
    assert_eq!(int(FI_TYPE_CQ_WAIT_COND, 1), "FI_CQ_COND_THRESHOLD");
    assert_eq!(
        list(FI_TYPE_WAIT_OBJ, 8),
        [
            "FI_WAIT_NONE",
            "FI_WAIT_UNSPEC",
            "FI_WAIT_SET",
            "FI_WAIT_FD",
            "FI_WAIT_MUTEX_COND",
            "FI_WAIT_YIELD",
            "FI_WAIT_POLLFD",
            "Unknown"
        ]
    );
    assert_eq!(text(FI_TYPE_VERSION, Value::Nothing), "2.6.0");
    assert_eq!(text(36, Value::Nothing), "Unknown type");
    assert_eq!(text(9999, Value::Int(0)), "Unknown type");
}

#[test]
fn attribute_blocks() {
    let tx = fi_tx_attr {
        caps: FI_MSG | FI_SEND,
        mode: FI_CONTEXT,
        op_flags: FI_COMPLETION,
        msg_order: FI_ORDER_SAS,
        comp_order: FI_ORDER_STRICT,
        inject_size: 64,
        size: 1024,
        iov_limit: 4,
        rma_iov_limit: 1,
        tclass: 0x201,
    };
    assert_eq!(
        text(FI_TYPE_TX_ATTR, Value::TxAttr(&tx)),
        "fi_tx_attr:\n    caps: [ FI_MSG, FI_SEND ]\n    mode: [ FI_CONTEXT ]\n    \
         op_flags: [ FI_COMPLETION ]\n    msg_order: [ FI_ORDER_SAS ]\n    inject_size: 64\n    \
         size: 1024\n    iov_limit: 4\n    rma_iov_limit: 1\n    tclass: 0x201\n"
    );
    let rx = fi_rx_attr {
        caps: FI_MSG | FI_RECV,
        op_flags: FI_MULTI_RECV,
        comp_order: FI_ORDER_DATA,
        total_buffered_recv: 5,
        size: 512,
        iov_limit: 2,
        ..Default::default()
    };
    assert_eq!(
        text(FI_TYPE_RX_ATTR, Value::RxAttr(&rx)),
        "fi_rx_attr:\n    caps: [ FI_MSG, FI_RECV ]\n    mode: [  ]\n    \
         op_flags: [ FI_MULTI_RECV ]\n    msg_order: [  ]\n    size: 512\n    iov_limit: 2\n"
    );
    let ep = fi_ep_attr {
        type_: FI_EP_RDM,
        protocol: FI_PROTO_EFA,
        protocol_version: 4,
        max_msg_size: 1 << 20,
        msg_prefix_size: 0,
        max_order_raw_size: 8,
        max_order_war_size: 9,
        max_order_waw_size: 10,
        mem_tag_format: 0xaaaa,
        tx_ctx_cnt: FI_SHARED_CONTEXT,
        rx_ctx_cnt: 3,
        auth_key_size: 0,
        auth_key: core::ptr::null_mut(),
    };
    assert_eq!(
        text(FI_TYPE_EP_ATTR, Value::EpAttr(&ep)),
        "fi_ep_attr:\n    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n    protocol_version: 4\n    \
         max_msg_size: 1048576\n    msg_prefix_size: 0\n    max_order_raw_size: 8\n    \
         max_order_war_size: 9\n    max_order_waw_size: 10\n    \
         mem_tag_format: 0x000000000000aaaa\n    tx_ctx_cnt: FI_SHARED_CONTEXT\n    \
         rx_ctx_cnt: 3\n    auth_key_size: 0\n"
    );
    let mut d = parts(&Info::default()).domain;
    d.domain = 0x1234 as *mut _;
    d.threading = FI_THREAD_DOMAIN;
    d.control_progress = FI_PROGRESS_AUTO;
    d.progress = FI_PROGRESS_MANUAL;
    d.resource_mgmt = FI_RM_ENABLED;
    d.av_type = FI_AV_TABLE;
    d.mr_mode = (FI_MR_LOCAL | FI_MR_VIRT_ADDR) as i32;
    (d.mr_key_size, d.cq_data_size, d.cq_cnt, d.ep_cnt) = (8, 8, 1, 2);
    (d.tx_ctx_cnt, d.rx_ctx_cnt, d.max_ep_tx_ctx, d.max_ep_rx_ctx) = (3, 4, 5, 6);
    (
        d.max_ep_stx_ctx,
        d.max_ep_srx_ctx,
        d.cntr_cnt,
        d.mr_iov_limit,
    ) = (7, 8, 9, 10);
    d.caps = FI_LOCAL_COMM;
    (d.max_err_data, d.mr_cnt, d.tclass) = (11, 12, 0x100);
    (d.max_ep_auth_key, d.max_group_id) = (13, 14);
    (d.max_cntr_value, d.max_err_cntr_value) = (u64::MAX, 15);
    let dv = DomainView {
        attr: &d,
        name: Some(b"dom"),
    };
    assert_eq!(
        text(FI_TYPE_DOMAIN_ATTR, Value::DomainAttr(dv)),
        "fi_domain_attr:\n    domain: 0x1234\n    name: dom\n    threading: FI_THREAD_DOMAIN\n    \
         progress: FI_PROGRESS_MANUAL\n    resource_mgmt: FI_RM_ENABLED\n    \
         av_type: FI_AV_TABLE\n    mr_mode: [ FI_MR_LOCAL, FI_MR_VIRT_ADDR ]\n    \
         mr_key_size: 8\n    cq_data_size: 8\n    cq_cnt: 1\n    ep_cnt: 2\n    tx_ctx_cnt: 3\n    \
         rx_ctx_cnt: 4\n    max_ep_tx_ctx: 5\n    max_ep_rx_ctx: 6\n    max_ep_stx_ctx: 7\n    \
         max_ep_srx_ctx: 8\n    cntr_cnt: 9\n    mr_iov_limit: 10\n    caps: [ FI_LOCAL_COMM ]\n    \
         mode: [  ]\n    auth_key_size: 0\n    max_err_data: 11\n    mr_cnt: 12\n    tclass: 0x100\n    \
         max_ep_auth_key: 13\n    max_group_id: 14\n    max_cntr_value: 18446744073709551615\n    \
         max_err_cntr_value: 15\n"
    );
    let dv = DomainView {
        attr: &d,
        name: None,
    };
    assert!(text(FI_TYPE_DOMAIN_ATTR, Value::DomainAttr(dv)).contains("\n    name: (null)\n"));
    let mut f = parts(&Info::default()).fabric;
    f.prov_version = fi_version(117, 0);
    f.api_version = fi_version(1, 17);
    let fv = FabricView {
        attr: &f,
        name: Some(b"fab"),
        prov_name: Some(b"shm"),
    };
    assert_eq!(
        text(FI_TYPE_FABRIC_ATTR, Value::FabricAttr(fv)),
        "fi_fabric_attr:\n    name: fab\n    prov_name: shm\n    prov_version: 117.0\n    \
         api_version: 1.17\n"
    );
    let fv = FabricView {
        attr: &f,
        name: None,
        prov_name: None,
    };
    assert_eq!(
        text(FI_TYPE_FABRIC_ATTR, Value::FabricAttr(fv)),
        "fi_fabric_attr:\n    name: (null)\n    prov_name: (null)\n    prov_version: 117.0\n    \
         api_version: 1.17\n"
    );
}

fn sockaddr_in(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut v = (libc::AF_INET as u16).to_ne_bytes().to_vec();
    v.extend(port.to_be_bytes());
    v.extend(ip);
    v.extend([0; 8]);
    v
}

fn sockaddr_in6(ip: [u8; 16], port: u16) -> Vec<u8> {
    let mut v = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
    v.extend(port.to_be_bytes());
    v.extend([0; 4]);
    v.extend(ip);
    v.extend([0; 4]);
    v
}

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

fn addr_text(format: u32, bytes: &[u8]) -> Option<String> {
    straddr(format, bytes, 0x5000).map(|b| String::from_utf8(b).unwrap())
}

#[test]
fn addresses() {
    let sin = sockaddr_in([10, 1, 2, 3], 4242);
    let sin6 = sockaddr_in6(v6("fe80::1:2"), 7);
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        addr_text(FI_SOCKADDR_IN, &sin),
        s("fi_sockaddr_in://10.1.2.3:4242")
    );
    assert_eq!(
        addr_text(FI_SOCKADDR_IN6, &sin6),
        s("fi_sockaddr_in6://[fe80::1:2]:7")
    );
    assert_eq!(
        addr_text(FI_SOCKADDR, &sin6),
        s("fi_sockaddr_in6://[fe80::1:2]:7")
    );
    assert_eq!(
        addr_text(FI_SOCKADDR_IP, &sin),
        s("fi_sockaddr_in://10.1.2.3:4242")
    );
    // The family decides how the bytes are read, whatever the format says (1.17 prints this).
    assert_eq!(
        addr_text(FI_SOCKADDR_IN, &sin6),
        s("fi_sockaddr_in://0:0:fe80:::7")
    );
    assert_eq!(addr_text(FI_SOCKADDR_IN, &[0; 16]), None, "no family");
    assert_eq!(
        addr_text(FI_SOCKADDR_IP, &[27, 0, 0, 0]),
        None,
        "AF_IB is no IP"
    );

    let mut efa = v6("fe80::4a1:2ff:fe03:405").to_vec();
    efa.extend(0x1234u16.to_ne_bytes());
    efa.extend([0, 0]);
    efa.extend(0x1234_5678u32.to_ne_bytes());
    efa.extend([0; 8]);
    assert_eq!(
        addr_text(FI_ADDR_EFA, &efa),
        s("fi_addr_efa://[fe80::4a1:2ff:fe03:405]:4660:305419896")
    );
    assert_eq!(addr_text(FI_ADDR_EFA, &efa[..20]), None, "short data");
    assert_eq!(
        addr_text(FI_ADDR_STR, b"fi_shm://123\0junk"),
        s("fi_shm://123")
    );
    assert_eq!(addr_text(FI_ADDR_STR, b"fi_shm://9"), s("fi_shm://9"));

    let mut psm = Vec::new();
    for w in [0x1122u64, 0x3344, 5, 6] {
        psm.extend(w.to_ne_bytes());
    }
    assert_eq!(
        addr_text(FI_ADDR_PSMX2, &psm),
        s("fi_addr_psmx2://1122:3344")
    );
    assert_eq!(
        addr_text(FI_ADDR_PSMX3, &psm),
        s("fi_addr_psmx3://1122:3344:5:6")
    );
    assert_eq!(
        addr_text(FI_ADDR_OPX, &psm),
        s("fi_addr_opx://0000000000001122")
    );
    assert_eq!(addr_text(FI_ADDR_CXI, &psm), s("fi_addr_cxi://0x00001122"));
    assert_eq!(addr_text(FI_ADDR_MLX, &[]), s("fi_addr_mlx://0x5000"));
    assert_eq!(addr_text(FI_ADDR_UCX, &[]), s("fi_addr_ucx://0x5000"));
    let ibud: Vec<u8> = (1..=32).collect();
    assert_eq!(
        addr_text(FI_ADDR_IB_UD, &ibud),
        s("fi_addr_ib_ud://102:304:506:708:90a:b0c:d0e:f10:14131211/1615/1817/1b")
    );
    let mut sib = vec![0u8; 48];
    sib[0] = 27;
    sib[2] = 0xff;
    sib[3] = 0xff;
    for i in 0..16 {
        sib[8 + i] = i as u8;
    }
    for i in 0..8 {
        sib[24 + i] = 0x10 + i as u8;
        sib[40 + i] = 0x20 + i as u8;
    }
    let want = s("fi_sockaddr_ib://[1:203:405:607:809:a0b:c0d:e0f]:0xffff:0x415:0x27");
    assert_eq!(addr_text(FI_SOCKADDR_IB, &sib), want);
    assert_eq!(addr_text(FI_SOCKADDR, &sib), want);
    // Formats 2.6 has no text for (1.17 still printed fi_addr_gni://).
    assert_eq!(addr_text(FI_ADDR_GNI, &sib), None);
    assert_eq!(addr_text(FI_ADDR_PSMX, &sib), None);
}

#[test]
fn ipv6_text() {
    for (a, want) in [
        ("::", "::"),
        ("::1", "::1"),
        ("1::", "1::"),
        ("fe80::1:2", "fe80::1:2"),
        ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
        ("1:0:0:2:0:0:3:4", "1::2:0:0:3:4"),
        ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),
        ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
        ("::1.2.3.4", "::1.2.3.4"),
        ("::0.0.1.0", "::100"),
        ("::0.1.0.0", "::0.1.0.0"),
        ("::ffff:0:1.2.3.4", "::ffff:0:102:304"),
        ("0:0:0:0:0:ffff:0:0", "::ffff:0.0.0.0"),
        ("0:0:1::1", "0:0:1::1"),
        ("ABCD::EF01", "abcd::ef01"),
    ] {
        assert_eq!(ntop6(&v6(a)), want, "{a}");
    }
}

#[test]
fn buffer_limits() {
    let caps = Value::U64(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC);
    let mut small = [0xffu8; 16];
    let mut b = Buf::new(&mut small);
    tostr(&mut b, FI_TYPE_CAPS, caps, &mut NoFidText);
    assert_eq!(
        b.as_bytes(),
        b"FI_MSG, FI_RMA",
        "1.17 prints the same into 16 bytes"
    );
    let mut one = [0xffu8; 1];
    let mut b = Buf::new(&mut one);
    tostr(&mut b, FI_TYPE_CAPS, caps, &mut NoFidText);
    assert_eq!(b.as_bytes(), b"");

    // An fi_info into 40 bytes; an address may take the one byte more.
    let mut i = Info {
        addr_format: FI_ADDR_STR,
        ..Default::default()
    };
    let mut mid = [0u8; 40];
    let mut b = Buf::new(&mut mid);
    let s = info_to_string(&i);
    b.cat(&s);
    assert_eq!(b.len(), 38);
    i.src_addr = Some(b"fi_shm://1234567890\0".to_vec());
    let p = parts(&i);
    let view = InfoView {
        caps: 0,
        mode: 0,
        addr_format: FI_ADDR_STR,
        src_addrlen: 20,
        dest_addrlen: 0,
        src_addr: Some(AddrView {
            ptr: 1,
            bytes: i.src_addr.as_deref().unwrap(),
        }),
        dest_addr: None,
        handle: 0,
        tx_attr: None,
        rx_attr: None,
        ep_attr: Some(&p.ep),
        domain_attr: None,
        fabric_attr: None,
        nic: NicView::Null,
    };
    let mut mid = [0u8; 40];
    let mut b = Buf::new(&mut mid);
    tostr(&mut b, FI_TYPE_INFO, Value::Info(&view), &mut NoFidText);
    assert_eq!(b.as_bytes(), b"fi_info:\n    caps: [  ]\n    mode: [  ]f");
}

fn shm_answer() -> Info {
    let mut i = Info {
        caps: FI_MSG | FI_TAGGED | FI_RECV | FI_SEND | FI_SOURCE,
        addr_format: FI_ADDR_STR,
        src_addr: Some(b"fi_shm://11562\0".to_vec()),
        dest_addr: Some(b"fi_shm://11562\0".to_vec()),
        ..Default::default()
    };
    i.tx_attr.caps = FI_MSG | FI_TAGGED | FI_SEND;
    i.tx_attr.msg_order = FI_ORDER_SAS;
    i.tx_attr.comp_order = FI_ORDER_STRICT;
    i.tx_attr.inject_size = 4096;
    i.tx_attr.size = 1024;
    i.tx_attr.iov_limit = 4;
    i.tx_attr.rma_iov_limit = 4;
    i.rx_attr.caps = FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE;
    i.rx_attr.msg_order = FI_ORDER_SAS;
    i.rx_attr.size = 1024;
    i.rx_attr.iov_limit = 4;
    i.ep_attr = EpAttr {
        type_: FI_EP_RDM,
        protocol: FI_PROTO_SHM,
        protocol_version: 1,
        max_msg_size: usize::MAX,
        max_order_raw_size: usize::MAX,
        max_order_war_size: usize::MAX,
        max_order_waw_size: usize::MAX,
        mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa,
        tx_ctx_cnt: 1,
        rx_ctx_cnt: 1,
        ..Default::default()
    };
    let d = &mut i.domain_attr;
    d.name = Some("shm".into());
    d.threading = FI_THREAD_SAFE;
    d.control_progress = FI_PROGRESS_AUTO;
    d.progress = FI_PROGRESS_MANUAL;
    d.resource_mgmt = FI_RM_ENABLED;
    (d.mr_key_size, d.cq_data_size, d.cq_cnt, d.ep_cnt) = (8, 8, 1024, 256);
    (d.tx_ctx_cnt, d.rx_ctx_cnt, d.max_ep_tx_ctx, d.max_ep_rx_ctx) = (1024, 1024, 1, 1);
    d.mr_iov_limit = 4;
    (d.max_cntr_value, d.max_err_cntr_value) = (u64::MAX, u64::MAX);
    i.fabric_attr.name = Some("shm".into());
    i.fabric_attr.prov_name = Some("shm".into());
    i.fabric_attr.prov_version = fi_version(206, 0);
    i.fabric_attr.api_version = fi_version(2, 6);
    i
}

const SHM_ANSWER: &str = "fi_info:
    caps: [ FI_MSG, FI_TAGGED, FI_RECV, FI_SEND, FI_SOURCE ]
    mode: [  ]
    addr_format: FI_ADDR_STR
    src_addrlen: 15
    dest_addrlen: 15
    src_addr: fi_shm://11562
    dest_addr: fi_shm://11562
    handle: (nil)
    fi_tx_attr:
        caps: [ FI_MSG, FI_TAGGED, FI_SEND ]
        mode: [  ]
        op_flags: [  ]
        msg_order: [ FI_ORDER_SAS ]
        inject_size: 4096
        size: 1024
        iov_limit: 4
        rma_iov_limit: 4
        tclass: 0x0
    fi_rx_attr:
        caps: [ FI_MSG, FI_TAGGED, FI_RECV, FI_SOURCE ]
        mode: [  ]
        op_flags: [  ]
        msg_order: [ FI_ORDER_SAS ]
        size: 1024
        iov_limit: 4
    fi_ep_attr:
        type: FI_EP_RDM
        protocol: FI_PROTO_SHM
        protocol_version: 1
        max_msg_size: 18446744073709551615
        msg_prefix_size: 0
        max_order_raw_size: 18446744073709551615
        max_order_war_size: 18446744073709551615
        max_order_waw_size: 18446744073709551615
        mem_tag_format: 0xaaaaaaaaaaaaaaaa
        tx_ctx_cnt: 1
        rx_ctx_cnt: 1
        auth_key_size: 0
    fi_domain_attr:
        domain: (nil)
        name: shm
        threading: FI_THREAD_SAFE
        progress: FI_PROGRESS_MANUAL
        resource_mgmt: FI_RM_ENABLED
        av_type: FI_AV_UNSPEC
        mr_mode: [  ]
        mr_key_size: 8
        cq_data_size: 8
        cq_cnt: 1024
        ep_cnt: 256
        tx_ctx_cnt: 1024
        rx_ctx_cnt: 1024
        max_ep_tx_ctx: 1
        max_ep_rx_ctx: 1
        max_ep_stx_ctx: 0
        max_ep_srx_ctx: 0
        cntr_cnt: 0
        mr_iov_limit: 4
        caps: [  ]
        mode: [  ]
        auth_key_size: 0
        max_err_data: 0
        mr_cnt: 0
        tclass: 0x0
        max_ep_auth_key: 0
        max_group_id: 0
        max_cntr_value: 18446744073709551615
        max_err_cntr_value: 18446744073709551615
    fi_fabric_attr:
        name: shm
        prov_name: shm
        prov_version: 206.0
        api_version: 2.6
    nic: (nil)
";

#[test]
fn whole_info() {
    assert_eq!(info_to_string(&shm_answer()), SHM_ANSWER);
    // A socket address, everything else zero.
    let i = Info {
        addr_format: FI_SOCKADDR_IN,
        src_addr: Some(sockaddr_in([10, 1, 2, 3], 4242)),
        ..Default::default()
    };
    let t = info_to_string(&i);
    assert!(t.contains(
        "    addr_format: FI_SOCKADDR_IN\n    src_addrlen: 16\n    dest_addrlen: 0\n    \
         src_addr: fi_sockaddr_in://10.1.2.3:4242\n    dest_addr: (null)\n    handle: (nil)\n"
    ));
    assert!(t.contains("        domain: (nil)\n        name: (null)\n"));
    assert!(t.ends_with("        prov_version: 0.0\n        api_version: 0.0\n    nic: (nil)\n"));
    // An address format 2.6 cannot print leaves the value empty.
    let i = Info {
        addr_format: FI_ADDR_GNI,
        src_addr: Some(vec![1; 16]),
        ..Default::default()
    };
    assert!(info_to_string(&i).contains("\n    src_addr: \n    dest_addr: (null)\n"));
}

#[test]
fn null_attributes_and_handles() {
    struct Named;
    impl FidText for Named {
        fn tostr(&mut self, buf: &mut Buf, fid: usize) -> bool {
            if fid == 0x77 {
                buf.cat("    handle: a pep\n");
                true
            } else {
                false
            }
        }
    }
    let mut view = InfoView {
        caps: 0,
        mode: 0,
        addr_format: 0,
        src_addrlen: 3,
        dest_addrlen: 0,
        src_addr: None,
        dest_addr: None,
        handle: 0x77,
        tx_attr: None,
        rx_attr: None,
        ep_attr: None,
        domain_attr: None,
        fabric_attr: None,
        nic: NicView::Fid(0x88),
    };
    let t = to_string(|b| tostr(b, FI_TYPE_INFO, Value::Info(&view), &mut Named));
    assert_eq!(
        t,
        "fi_info:\n    caps: [  ]\n    mode: [  ]\n    addr_format: FI_FORMAT_UNSPEC\n    \
         src_addrlen: 3\n    dest_addrlen: 0\n    src_addr: (null)\n    dest_addr: (null)\n    \
         handle: a pep\n    fi_tx_attr: (null)\n    fi_rx_attr: (null)\n    fi_ep_attr: (null)\n    \
         fi_domain_attr: (null)\n    fi_fabric_attr: (null)\n    nic: 0x88\n"
    );
    view.handle = 0x99;
    let t = to_string(|b| tostr(b, FI_TYPE_INFO, Value::Info(&view), &mut Named));
    assert!(t.contains("    handle: 0x99\n"));
    assert_eq!(
        to_string(|b| tostr(b, FI_TYPE_FID, Value::Fid(0xabc), &mut NoFidText)),
        "fid: 0xabc\n"
    );
}

#[test]
fn nic_block() {
    let i = Info {
        nic: Some(Nic {
            device: Some(DeviceAttr {
                name: Some("efa0".into()),
                device_id: Some("0xefa0".into()),
                device_version: None,
                vendor_id: Some("0x1d0f".into()),
                driver: Some("efa".into()),
                firmware: Some("1.0".into()),
            }),
            bus: Some(BusAttr {
                bus_type: FI_BUS_PCI,
                pci_domain_id: 1,
                pci_bus_id: 2,
                pci_device_id: 3,
                pci_function_id: 4,
            }),
            link: Some(LinkAttr {
                address: Some("fe80::1".into()),
                mtu: 8928,
                speed: 100_000_000_000,
                state: FI_LINK_UP,
                network_type: Some("Ethernet".into()),
            }),
        }),
        ..Default::default()
    };
    let t = info_to_string(&i);
    let block = &t[t.find("    nic:").unwrap()..];
    assert_eq!(
        block,
        "    nic:
        fi_device_attr:
            name: efa0
            device_id: 0xefa0
            device_version: (null)
            vendor_id: 0x1d0f
            driver: efa
            firmware: 1.0
        fi_bus_attr:
            bus_type: FI_BUS_PCI
            fi_pci_attr:
                domain_id: 1
                bus_id: 2
                device_id: 3
                function_id: 4
        fi_link_attr:
            address: fe80::1
            mtu: 8928
            speed: 100000000000
            state: FI_LINK_UP
            network_type: Ethernet
"
    );
    let n = Nic {
        bus: Some(BusAttr::default()),
        ..Default::default()
    };
    assert_eq!(
        to_string(|b| nic(b, &n)),
        "    nic:\n        fi_device_attr: (null)\n        fi_bus_attr:\n            \
         bus_type: FI_BUS_UNKNOWN\n        fi_link_attr: (null)\n"
    );
}

#[test]
fn other_structures() {
    let av = AvAttrView {
        type_: FI_AV_TABLE,
        count: 64,
        ep_per_node: 2,
        name: None,
        flags: FI_EVENT | FI_SYMMETRIC,
    };
    assert_eq!(
        text(FI_TYPE_AV_ATTR, Value::AvAttr(&av)),
        "fi_av_attr:\n    type: FI_AV_TABLE\n    count: 64\n    ep_per_node: 2\n    \
         name: (null)\n    flags: [ FI_EVENT, FI_SYMMETRIC ]\n"
    );
    let cq = fi_cq_attr {
        size: 128,
        flags: FI_AFFINITY,
        format: FI_CQ_FORMAT_TAGGED,
        wait_obj: FI_WAIT_FD,
        signaling_vector: -1,
        wait_cond: FI_CQ_COND_NONE,
        wait_set: core::ptr::null_mut(),
    };
    assert_eq!(
        text(FI_TYPE_CQ_ATTR, Value::CqAttr(&cq)),
        "fi_cq_attr:\n    size: 128\n    flags: [ FI_AFFINITY ]\n    format: FI_CQ_FORMAT_TAGGED\n    \
         wait_obj: FI_WAIT_FD\n    signaling_vector: -1\n    wait_cond: FI_CQ_COND_NONE\n"
    );
    let cntr = fi_cntr_attr {
        events: FI_CNTR_EVENTS_BYTES,
        wait_obj: FI_WAIT_NONE,
        wait_set: core::ptr::null_mut(),
        flags: 0,
    };
    assert_eq!(
        text(FI_TYPE_CNTR_ATTR, Value::CntrAttr(&cntr)),
        "fi_cntr_attr:\n    events: FI_CNTR_EVENTS_BYTES\n    wait_obj: FI_WAIT_NONE\n    flags: 0x0\n"
    );
    let mr = fi_mr_attr {
        mr_iov: core::ptr::null(),
        iov_count: 1,
        access: FI_SEND | FI_REMOTE_WRITE,
        offset: 0x1000,
        requested_key: 0,
        context: 0x10 as *mut _,
        auth_key_size: 0,
        auth_key: core::ptr::null_mut(),
        iface: FI_HMEM_CUDA,
        device: 0,
        hmem_data: core::ptr::null_mut(),
        page_size: 0,
        base_mr: core::ptr::null(),
        sub_mr_cnt: 0,
    };
    assert_eq!(
        text(FI_TYPE_MR_ATTR, Value::MrAttr(&mr)),
        "fi_mr_attr:\n    mr_iov: (nil)\n    iov_count: 1\n    access: [ FI_SEND, FI_REMOTE_WRITE ]\n    \
         offset: 0x1000\n    requested_key: 0x0\n    context: 0x10\n    auth_key_size: 0\n    \
         iface: FI_HMEM_CUDA\n"
    );
    let e = fi_cq_err_entry {
        op_context: core::ptr::null_mut(),
        flags: FI_RECV | FI_MSG,
        len: 5,
        buf: core::ptr::null_mut(),
        data: 9,
        tag: 0xff,
        olen: 3,
        err: 265,
        prov_errno: -7,
        err_data: core::ptr::null_mut(),
        err_data_size: 0,
        src_addr: 0,
    };
    assert_eq!(
        text(FI_TYPE_CQ_ERR_ENTRY, Value::CqErrEntry(&e)),
        "fi_cq_err_entry:\n    op_context: (nil)\n    flags: 0x402\n    len: 5\n    buf: (nil)\n    \
         data: 9\n    tag: 0xff\n    olen: 3\n    err: 265\n    prov_errno: 265\n    \
         err_data: (nil)\n    err_data_size: 0\n"
    );
}

#[test]
fn kinds() {
    assert_eq!(kind(FI_TYPE_INFO), Kind::Info);
    assert_eq!(kind(FI_TYPE_CAPS), Kind::U64);
    assert_eq!(kind(FI_TYPE_PROTOCOL), Kind::U32);
    assert_eq!(kind(FI_TYPE_MR_MODE), Kind::Int);
    assert_eq!(kind(FI_TYPE_WAIT_OBJ), Kind::Int);
    assert_eq!(kind(FI_TYPE_CQ_ERR_ENTRY), Kind::CqErrEntry);
    assert_eq!(kind(FI_TYPE_VERSION), Kind::Nothing);
    assert_eq!(kind(36), Kind::Nothing);
}
