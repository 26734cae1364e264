//! The efa provider's RDM tests (`common/efa_cases.rs`) with local peers through shm, as by
//! default (FI_EFA_ENABLE_SHM_TRANSFER=1): the hidden shm endpoint, the receive queue it shares
//! with the efa endpoint, and the MR keys it checks against the efa domain's registrations.

mod common;

const SHM_TRANSFER: &str = "1";
const RDM_DOMAIN: &str = "srd_lo-rdm";
const DEVICE_WAIT_FD: bool = true;
fn device_setup() {}
include!("common/efa_cases.rs");

/// A send or RMA to a local peer whose route is known is checked by shm, which holds our
/// limits (`open_peer_endpoint`): on a device whose MTU makes our inject size smaller than
/// shm's own, an inject past ours still fails with FI_EMSGSIZE, and one at it arrives whole;
/// an RMA with more than our one remote iov is refused.
#[test]
fn an_inject_through_shm_is_held_to_our_inject_size() {
    use fabric::prov::efa::device::sim::{SimDevice, SimNet};
    use fabric::prov::efa::srd::Config;
    use fabric::prov::efa::{EfaDomain, inject_size};

    init();
    let (domain, info) = domain_of(&EFA, &rdm_hints(), on_rdm_domain);
    let efa = domain
        .as_any()
        .and_then(|d| d.downcast_ref::<EfaDomain>())
        .expect("an efa domain");
    let net = SimNet::new(Default::default());
    let mtu = 1400;
    let node = || {
        let dev = SimDevice::open(&net, mtu, Config::default());
        let ep = efa.endpoint_on(&info, Box::new(dev)).expect("endpoint");
        Node::with_endpoint(&domain, &info, ep)
    };
    let (a, b) = (node(), node());
    let ab = a.insert_hex(&b.name_hex());
    b.insert_hex(&a.name_hex());
    let limit = inject_size(mtu);
    assert!(limit < 4096, "our inject size ({limit}) is below shm's");
    let data_sent = || {
        a.ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .map(|e| e.device_stats().data_sent)
            .unwrap()
    };

    // The first send learns the route; the ones after it take the known one.
    for (round, len) in [(0u8, 8), (1, limit), (2, limit)] {
        let (src, sv) = buf(len);
        src.copy_from_slice(&pattern(len, round));
        let (dst, dv) = buf(len);
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 2, 0), false)
            .unwrap();
        let call = if round == 0 {
            Call::Plain
        } else {
            Call::Inject
        };
        let sv = [sv];
        let op = MsgOp {
            call,
            ..msg(&sv, ab, 0, 1, 0)
        };
        a.retry(|| a.ep.send(&op, false)).unwrap();
        src.fill(0xee);
        let r = wait_ok(&b, &a);
        assert_eq!((r.op_context, r.len), (2, len), "round {round}");
        assert!(dst == &pattern(len, round)[..], "data of round {round}");
    }
    assert_eq!(data_sent(), 0, "the peer was reached through shm");
    for len in [limit + 1, 4096] {
        let (_big, bigv) = buf(len);
        let bigv = [bigv];
        let op = MsgOp {
            call: Call::Inject,
            ..msg(&bigv, ab, 0, 1, 0)
        };
        assert_eq!(
            a.ep.send(&op, false),
            Err(Errno::MSGSIZE),
            "fi_inject of {len}"
        );
        let flagged = msg(&bigv, ab, 0, 1, FI_INJECT);
        assert_eq!(
            a.ep.send(&flagged, true),
            Err(Errno::MSGSIZE),
            "FI_INJECT on a {len}-byte tagged send"
        );
    }

    // Injected writes: the first learns the route, the second takes it; then the limits.
    let (target, tv) = buf(8192);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let rma_at = |len: usize| fabric::abi::types::fi_rma_iov {
        addr: target.as_ptr() as u64,
        len,
        key: mr.key(),
    };
    for round in 0..2u8 {
        let (src, sv) = buf(limit);
        src.copy_from_slice(&pattern(limit, 10 + round));
        let (sv, rma) = ([sv], [rma_at(limit)]);
        let op = fabric::util::ep::RmaOp {
            call: Call::Inject,
            ..rma_op(&sv, ab, &rma, 0)
        };
        a.retry(|| a.ep.write(&op)).unwrap();
        src.fill(0xee);
        let t = Instant::now();
        while target[..limit] != pattern(limit, 10 + round)[..] {
            b.cq.progress();
            a.cq.progress();
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "injected write {round}"
            );
        }
    }
    for len in [limit + 1, 4096] {
        let (_big, bigv) = buf(len);
        let (bigv, rma) = ([bigv], [rma_at(len)]);
        let op = fabric::util::ep::RmaOp {
            call: Call::Inject,
            ..rma_op(&bigv, ab, &rma, 0)
        };
        assert_eq!(
            a.ep.write(&op),
            Err(Errno::MSGSIZE),
            "fi_inject_write of {len}"
        );
    }
    let (_two, twov) = buf(16);
    let twov = [twov];
    let halves = [rma_at(8), rma_at(8)];
    assert_eq!(
        a.ep.write(&rma_op(&twov, ab, &halves, 3)),
        Err(Errno::INVAL),
        "two remote iovs (our rma_iov_limit is 1)"
    );
    assert_eq!(data_sent(), 0, "the writes went through shm");
}
