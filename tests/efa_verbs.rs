//! The efa provider's RDM tests (`common/efa_cases.rs`) over the EFA hardware device
//! (`device::verbs`) on the emulated EFA NIC (`device::verbs::emul`, a test double installed
//! in place of rdma-core): discovery lists its domain `efa0-rdm` first, and every case runs
//! through the device's SRD QP, registered pools, address handles and extended CQ. Local
//! peers stay on the device (FI_EFA_ENABLE_SHM_TRANSFER=0): every emulated QP is on this
//! host.

mod common;

const SHM_TRANSFER: &str = "0";
const RDM_DOMAIN: &str = "efa0-rdm";
/// The hardware device has no wait fd yet (a completion channel comes with a later slice).
const DEVICE_WAIT_FD: bool = false;
fn device_setup() {
    fabric::prov::efa::device::verbs::emul::install();
}
include!("common/efa_cases.rs");

/// Discovery: the emulated device's domains come first, with its attributes (efa-reference
/// §10), then the software SRD devices.
#[test]
fn the_emulated_device_is_listed_first_with_its_attributes() {
    init();
    let list =
        fabric::core::provider::InfoProvider::getinfo(&EFA, fi_version(2, 0), None, None, 0, None)
            .unwrap();
    let names: Vec<&str> = list
        .iter()
        .map(|i| i.domain_attr.name.as_deref().unwrap())
        .collect();
    assert_eq!(&names[..2], ["efa0-rdm", "efa0-dgrm"], "{names:?}");
    assert!(
        names[2..].iter().all(|n| n.starts_with("srd_")),
        "{names:?}"
    );
    let (rdm, dgrm) = (&list[0], &list[1]);
    // FI_EFA_MTU_SIZE=8192 (init) lowers the port's 8928.
    let nic = rdm.nic.as_ref().unwrap();
    let link = nic.link.as_ref().unwrap();
    assert_eq!(link.mtu, 8192);
    assert_eq!(link.speed, 100_000_000_000);
    assert_eq!(link.state, FI_LINK_UP);
    let dev = nic.device.as_ref().unwrap();
    assert_eq!(dev.name.as_deref(), Some("efa0"));
    assert_eq!(dev.device_id.as_deref(), Some("0xefa1"));
    assert_eq!(rdm.tx_attr.inject_size, 4096);
    assert_eq!(dgrm.tx_attr.inject_size, 32, "the device's inline size");
    assert_eq!(dgrm.ep_attr.max_msg_size, 8192);
    let src =
        fabric::prov::efa::device::EfaAddr::from_bytes(rdm.src_addr.as_deref().unwrap()).unwrap();
    assert_eq!(src.gid, fabric::prov::efa::device::verbs::emul::GID);
}

/// FI_OPT_EFA_RNR_RETRY is a QP attribute: set before fi_enable (the device applies it when
/// the QP goes to RTS), refused after. FI_OPT_EFA_USE_DEVICE_RDMA = true is accepted: the
/// emulated device offers RDMA read in its efadv caps (the software device refuses it).
#[test]
fn queue_pair_options_follow_the_device() {
    let a = lo_node(CAPS, |ep| {
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &0usize.to_ne_bytes())
            .unwrap();
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &[1])
            .unwrap();
    });
    let mut out = [0u8; 8];
    let mut need = 0;
    a.ep.getopt(FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &mut out, &mut need)
        .unwrap();
    assert_eq!(u64::from_ne_bytes(out), 0);
    assert_eq!(
        a.ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &3usize.to_ne_bytes()),
        Err(Errno::OPBADSTATE)
    );
    // Messages still flow with no RNR retries (the receiver has buffers posted).
    let b = lo_node(CAPS, |_| ());
    let ab = a.insert_hex(&b.name_hex());
    b.insert_hex(&a.name_hex());
    exchange(&a, &b, ab, 3000, false, true, 3);
}
