//! The efa provider's RDM protocol between two endpoints of one process over the loopback
//! software-SRD device, local shm off (FI_EFA_ENABLE_SHM_TRANSFER=0). The MTU is lowered to 8 KiB (FI_EFA_MTU_SIZE) so that eager, medium
//! and long-CTS messages, eager and long-CTS writes, short and long reads all occur. Progress
//! is manual (efa-reference §5): every wait drives both endpoints.

mod common;

const SHM_TRANSFER: &str = "0";
const RDM_DOMAIN: &str = "srd_lo-rdm";
const DEVICE_WAIT_FD: bool = true;
fn device_setup() {}
include!("common/efa_cases.rs");

/// DGRAM in FI_MSG_PREFIX mode (efa-reference §10: 40 bytes, where a UD device puts the GRH):
/// data after the prefix on both sides, and a receive's length counts the prefix, as the
/// device's byte count does; without the mode, lengths are the message's.
#[test]
fn dgram_prefix_mode_leaves_the_front_of_each_buffer() {
    init();
    let lo = |i: &fabric::core::Info| i.domain_attr.name.as_deref() == Some("srd_lo-dgrm");
    for prefixed in [false, true] {
        let mut hints = fabric::core::Info {
            caps: FI_MSG,
            mode: if prefixed { FI_MSG_PREFIX } else { 0 },
            ..Default::default()
        };
        hints.ep_attr.type_ = FI_EP_DGRAM;
        let a = Node::open_hints(&EFA, &hints, lo);
        let b = Node::open_hints(&EFA, &hints, lo);
        let p = a.info.ep_attr.msg_prefix_size;
        assert_eq!(p, if prefixed { 40 } else { 0 });
        assert_eq!(a.info.mode & FI_MSG_PREFIX != 0, prefixed);
        let ab = a.insert_hex(&b.name_hex());
        let len = 1000;
        let (src, sv) = buf(p + len);
        src[p..].copy_from_slice(&pattern(len, 5));
        let (dst, dv) = buf(p + len);
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 2, 0), false)
            .unwrap();
        a.ep.send(&msg(&[sv], ab, 0, 1, 0), false).unwrap();
        let r = wait_ok(&b, &a);
        assert_eq!((r.op_context, r.len), (2, p + len));
        assert!(dst[p..] == pattern(len, 5)[..]);
        assert_eq!(wait_ok(&a, &b).op_context, 1);
        if prefixed {
            let (_, short) = buf(p - 1);
            assert_eq!(
                a.ep.send(&msg(&[short], ab, 0, 1, 0), false).unwrap_err(),
                Errno::INVAL
            );
        }
    }
}

/// The software device has no RDMA: every one-sided operation is emulated (fi_efa(7)'s
/// FI_OPT_EFA_EMULATED_* say so), device RDMA cannot be turned on, and registrations have no
/// device behind them (query_mr reports no valid interconnect id).
#[test]
fn the_software_device_emulates_every_one_sided_operation() {
    let (a, _b, _, _) = pair();
    for opt in [
        FI_OPT_EFA_EMULATED_READ,
        FI_OPT_EFA_EMULATED_WRITE,
        FI_OPT_EFA_EMULATED_ATOMICS,
    ] {
        let mut v = [0u8; 1];
        let mut need = 0;
        a.ep.getopt(FI_OPT_ENDPOINT, opt, &mut v, &mut need)
            .unwrap();
        assert_eq!(v[0], 1, "option {opt}");
    }
    assert_eq!(
        a.ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &[1]),
        Err(Errno::OPNOTSUPP)
    );
    let (_m, v) = buf(64);
    assert!(a.reg(v, FI_REMOTE_READ, 0).device().is_none());
}

/// Writes, reads and atomics are bounded as sends are: an application that posts without
/// polling is refused with FI_EAGAIN once the transmit queue (`fi_tx_size_left`) is full,
/// instead of having its operations queued without end, and everything taken completes, intact,
/// once it polls.
#[test]
fn a_full_transmit_queue_refuses_one_sided_operations_with_eagain() {
    let (a, b, ab, _) = pair();
    let (target, tv) = buf(64);
    let mr = b.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    let key = mr.key();
    let addr = target.as_ptr() as u64;
    let (src, sv) = buf(8);
    src.copy_from_slice(&7u64.to_ne_bytes());
    let (back, bv) = buf(8);
    let ioc = [fi_rma_ioc {
        addr: addr + 8,
        count: 1,
        key,
    }];
    type Post<'a> = Box<dyn Fn(usize) -> Result<(), Errno> + 'a>;
    let rma = [fi_rma_iov { addr, len: 8, key }];
    let posts: [(&str, Post); 3] = [
        (
            "write",
            Box::new(|ctx| a.ep.write(&rma_op(&[sv], ab, &rma, ctx))),
        ),
        (
            "read",
            Box::new(|ctx| a.ep.read(&rma_op(&[bv], ab, &rma, ctx))),
        ),
        (
            "atomic",
            Box::new(|ctx| {
                a.ep.atomic(&AtomicOp {
                    kind: AtomicKind::Write,
                    iov: &[sv],
                    desc: &[],
                    compare: &[],
                    compare_desc: &[],
                    result: &[],
                    result_desc: &[],
                    addr: ab,
                    rma_ioc: &ioc,
                    datatype: FI_UINT64,
                    op: FI_SUM,
                    context: ctx,
                    data: 0,
                    flags: 0,
                    call: Call::Plain,
                })
            }),
        ),
    ];
    for (what, post) in posts {
        let room = a.ep.tx_size_left().unwrap();
        assert!(room > 0, "{what}: an idle endpoint has room");
        let mut taken = 0;
        let refused = loop {
            match post(1000 + taken) {
                Ok(()) => taken += 1,
                Err(e) => break e,
            }
            assert!(
                taken <= room,
                "{what}: more taken than fi_tx_size_left said"
            );
        };
        assert_eq!(refused, Errno::AGAIN, "{what} past a full queue");
        assert!(
            taken > 0 && taken <= room,
            "{what}: {taken} taken of {room}"
        );
        assert_eq!(a.ep.tx_size_left().unwrap(), room - taken);
        for _ in 0..taken {
            let c = wait_ok(&a, &b);
            assert!(
                (1000..1000 + taken).contains(&c.op_context),
                "{what}: {c:?}"
            );
        }
        assert_eq!(
            a.ep.tx_size_left().unwrap(),
            room,
            "{what}: the queue drains"
        );
    }
    assert_eq!(u64::from_ne_bytes(target[..8].try_into().unwrap()), 7);
    assert_eq!(u64::from_ne_bytes(back[..].try_into().unwrap()), 7);
    // Every atomic added 7 once.
    assert_eq!(
        u64::from_ne_bytes(target[8..16].try_into().unwrap()) % 7,
        0,
        "atomic sums"
    );
    assert!(u64::from_ne_bytes(target[8..16].try_into().unwrap()) > 0);
}
