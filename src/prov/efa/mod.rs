//! The efa provider (fi_efa(7)): EFA's RDM protocol (v4) over a device layer, and the DGRAM
//! endpoint straight on the device.
//!
//! Devices are EFA NICs through rdma-core ([`device::verbs`], named as verbs names them, e.g.
//! `efa0`), listed first, and the software SRD over UDP ([`device::udp`]), one per usable
//! interface, named `srd_<interface>`; `fi_getinfo` lists, per device, an RDM entry (domain
//! `<dev>-rdm`) and a DGRAM entry (`<dev>-dgrm`), as upstream does for each EFA NIC
//! (efa-reference §10). Upstream's third entry, `efa-direct`, needs device RDMA and is not
//! offered yet.

pub mod device;
pub mod dgram;
pub mod rdm;
pub mod srd;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::abi::consts::*;
use crate::core::info::{
    BusAttr, DeviceAttr, DomainAttr, EpAttr, FabricAttr, Info, LinkAttr, Nic, RxAttr, TxAttr,
};
use crate::core::params::{ParamType, define, get_bool, knob_bool, knob_int, knob_size, knob_str};
use crate::core::provider::InfoProvider;
use crate::core::{Errno, Result};
use crate::prov::shm::{ShmDomain, ShmProvider};
use crate::util::av::{AddrCodec, Av, AvAttr};
use crate::util::ep::AtomicKind;
use crate::util::mr::{Mr, MrMap, MrRequest};
use crate::util::provider::AtomicAttr;
use crate::util::{Domain, Endpoint, Fabric, Provider};
use device::udp::{DeviceConfig, UdpDevice, UdpDeviceInfo};
use device::verbs::{HwContext, HwDeviceInfo, VerbsDevice};
use device::{EFA_ADDR_LEN, EfaAddr};

pub const PROV_NAME: &str = "efa";
pub const PROV_VERSION: u32 = fi_version(206, 0);
/// Largest `fi_inject` payload (efa-reference §10: capped at 4096).
pub const INJECT_SIZE: usize = 4096;
/// The largest REQ header: base 24 + raw address 40 + CQ data 8 + 4 RMA iovs (§10).
const MAX_REQ_HDR: usize = 168;
const RDM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_READ
    | FI_WRITE
    | FI_SEND
    | FI_RECV
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_SOURCE
    | FI_MULTI_RECV
    | FI_DIRECTED_RECV
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
const DGRAM_CAPS: u64 = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
/// `msg_prefix_size` when FI_MSG_PREFIX is granted: upstream's RDM value (its packet entry,
/// eager header and raw address, efa-reference §3) and the DGRAM GRH space.
const RDM_MSG_PREFIX_SIZE: usize = 176;
const DGRAM_MSG_PREFIX_SIZE: usize = 40;

/// Provider parameters (efa-reference §9), read when a domain opens.
#[derive(Debug, Clone)]
pub struct Knobs {
    pub tx_size: usize,
    pub rx_size: usize,
    pub max_medium: usize,
    pub tx_min_credits: usize,
    pub recvwin: usize,
    pub timeout_interval_us: u64,
    pub max_timeout_us: u64,
    /// `FI_EFA_USE_DEVICE_RDMA`: device RDMA where the device has it (fi_efa(7)).
    pub use_device_rdma: bool,
    /// `FI_EFA_INTER_MIN_READ_MESSAGE_SIZE`: messages from this size on go by long read
    /// where both sides' devices read.
    pub min_read_msg: usize,
    /// `FI_EFA_INTER_MIN_READ_WRITE_SIZE`: writes from this size on go by long read where
    /// both devices read but not both write.
    pub min_read_write: usize,
    /// `FI_EFA_RUNT_SIZE`: bytes of a long-read message sent in packets ahead of the
    /// receiver's reads (runt read, `rdm::runt`); 0, as upstream for host memory: none.
    pub runt_size: usize,
}

impl Knobs {
    pub fn load() -> Knobs {
        let p = PROV_NAME;
        let nz = |v: usize, d: usize| if v == 0 { d } else { v };
        Knobs {
            tx_size: nz(
                knob_size(p, "tx_size", "RDM transmit context size (0: device)", 0),
                TX_SIZE,
            ),
            rx_size: nz(
                knob_size(p, "rx_size", "RDM receive context size (0: device)", 0),
                RX_SIZE,
            ),
            max_medium: knob_size(
                p,
                "inter_max_medium_message_size",
                "Largest message sent with the medium protocol",
                65536,
            ),
            tx_min_credits: knob_size(
                p,
                "tx_min_credits",
                "Packets a long-CTS sender asks for, and a CTS window in packets",
                32,
            )
            .max(1),
            recvwin: knob_size(
                p,
                "recvwin_size",
                "Reorder window per peer, in messages",
                16384,
            )
            .max(16),
            timeout_interval_us: knob_int(
                p,
                "timeout_interval",
                "First RNR back-off in microseconds (0: random 40-120)",
                0,
            )
            .max(0) as u64,
            max_timeout_us: knob_int(
                p,
                "max_timeout",
                "Longest RNR back-off in microseconds",
                1_000_000,
            )
            .clamp(1, i64::from(i32::MAX / 2)) as u64,
            use_device_rdma: knob_bool(
                p,
                "use_device_rdma",
                "Use the device's RDMA read and write where it has them (fi_read, fi_write)",
                true,
            ),
            min_read_msg: knob_size(
                p,
                "inter_min_read_message_size",
                "Smallest message sent with the long-read protocol (device RDMA read)",
                1 << 20,
            )
            .max(1),
            min_read_write: knob_size(
                p,
                "inter_min_read_write_size",
                "Smallest write sent with the long-read protocol where devices read but do not \
                 both write",
                65536,
            )
            .max(1),
            runt_size: knob_size(
                p,
                "runt_size",
                "Bytes of a long-read message sent in packets ahead of the receiver's reads \
                 (runt read; 0: none)",
                0,
            ),
        }
    }
}

pub const TX_SIZE: usize = 4096;
pub const RX_SIZE: usize = 8192;

/// Defines every efa parameter up front (upstream defines them when the provider loads), so
/// that `fi_getparams` / `fi_info -e` list them before any domain opens.
pub fn define_params() {
    let _ = Knobs::load();
    let _ = shm_transfer_enabled();
    let _ = device_knobs();
    let _ = use_huge_page();
    let _ = mr_huge_pages();
}

/// Whether the application asked for fork support (`FI_EFA_FORK_SAFE`, or rdma-core's
/// `RDMAV_FORK_SAFE` set): registered memory then stays on normal pages.
fn fork_safe() -> bool {
    knob_bool(
        PROV_NAME,
        "fork_safe",
        "The application forks: make registered memory fork-safe (turns huge pages off)",
        false,
    ) || std::env::var_os("RDMAV_FORK_SAFE").is_some()
}

/// `FI_EFA_MR_HUGE_PAGES` (ours; default on unless fork support is asked for): memory registered
/// on the software devices moves onto transparent huge pages where it is resident
/// (`util::huge_pages`); an EFA NIC pins it at once, so there it stays as it is.
fn mr_huge_pages() -> bool {
    static ON: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        knob_bool(
            PROV_NAME,
            "mr_huge_pages",
            "Move registered memory that is resident onto transparent huge pages (faster \
             copies by the kernel and by local peers; default: on unless FI_EFA_FORK_SAFE / \
             RDMAV_FORK_SAFE)",
            true,
        ) && !fork_safe()
    });
    *ON
}

/// `FI_EFA_USE_HUGE_PAGE` (efa-reference §9): the hardware device's registered pools come
/// from huge pages where the system has them reserved (else from normal pages). On by
/// default, off when fork support is asked for (`FI_EFA_FORK_SAFE`, or rdma-core's
/// `RDMAV_FORK_SAFE` set), which wins over an explicit on: upstream does not combine them
/// either. Read when an endpoint opens its device.
pub fn use_huge_page() -> bool {
    let fork_safe = fork_safe();
    let _ = define(
        Some(PROV_NAME),
        "use_huge_page",
        ParamType::Bool,
        "Allocate the device's registered packet buffers from huge pages when there are \
         some (default: on unless FI_EFA_FORK_SAFE / RDMAV_FORK_SAFE)",
    );
    huge_pages_chosen(get_bool(Some(PROV_NAME), "use_huge_page").ok(), fork_safe)
}

/// Huge pages or not, from `FI_EFA_USE_HUGE_PAGE` (if set) and whether fork support is on.
fn huge_pages_chosen(use_huge_page: Option<bool>, fork_safe: bool) -> bool {
    if fork_safe && use_huge_page == Some(true) {
        crate::fi_warn!(
            PROV_NAME,
            crate::core::log::Subsys::Core,
            "FI_EFA_USE_HUGE_PAGE=1 with fork support (FI_EFA_FORK_SAFE / RDMAV_FORK_SAFE): \
             huge pages stay off"
        );
    }
    use_huge_page.unwrap_or(true) && !fork_safe
}

/// A device of this host: an EFA NIC through rdma-core, or the software SRD over an
/// interface.
#[derive(Debug, Clone)]
pub enum DevInfo {
    Hw(HwDeviceInfo),
    Soft(UdpDeviceInfo),
}

impl DevInfo {
    /// `efa0`, `srd_eth0`: the domains are `<name>-rdm` and `<name>-dgrm`.
    pub fn name(&self) -> &str {
        match self {
            DevInfo::Hw(d) => &d.name,
            DevInfo::Soft(d) => &d.name,
        }
    }

    /// Largest datagram payload.
    pub fn mtu(&self) -> usize {
        match self {
            DevInfo::Hw(d) => d.mtu,
            DevInfo::Soft(d) => d.mtu,
        }
    }

    pub fn gid(&self) -> [u8; 16] {
        match self {
            DevInfo::Hw(d) => d.gid,
            DevInfo::Soft(d) => EfaAddr::gid_of(d.iface.addr),
        }
    }
}

/// The devices (`FI_EFA_IFACE`, `FI_EFA_MTU_SIZE` select and shape them): EFA NICs first
/// (efa-reference §10), then the software SRD devices. Discovered once, as
/// upstream builds its device list when the provider loads, and again when the settings change
/// or `fi_getinfo` passes `FI_RESCAN`: discovery costs system calls per interface, which made
/// every `fi_getinfo` take ~100 µs.
fn devices(rescan: bool) -> Vec<DevInfo> {
    type Cache = Option<((Option<String>, usize, usize), Vec<DevInfo>)>;
    static CACHE: Mutex<Cache> = Mutex::new(None);
    let knobs = device_knobs();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    match &*cache {
        Some((k, list)) if !rescan && *k == knobs => list.clone(),
        _ => {
            let (iface, mtu, fragments) = &knobs;
            let mtu = (*mtu > 0).then_some(*mtu);
            let mut list: Vec<DevInfo> = device::verbs::discover(iface.as_deref(), mtu)
                .into_iter()
                .map(DevInfo::Hw)
                .collect();
            list.extend(
                device::udp::discover(iface.as_deref(), *fragments, mtu)
                    .into_iter()
                    .map(DevInfo::Soft),
            );
            *cache = Some((knobs, list.clone()));
            list
        }
    }
}

/// `FI_EFA_IFACE`, `FI_EFA_MTU_SIZE` (0: the interface's MTU) and `FI_EFA_UDP_FRAGMENTS`.
fn device_knobs() -> (Option<String>, usize, usize) {
    let iface = knob_str(
        PROV_NAME,
        "iface",
        "Comma-separated interfaces (or srd_<if>) to use",
    );
    let mtu = knob_size(
        PROV_NAME,
        "mtu_size",
        "Largest packet payload (0: the interface's)",
        0,
    );
    // Ours (upstream's efa has no software device): 1 turns fragmentation off.
    let fragments = knob_size(
        PROV_NAME,
        "udp_fragments",
        "Most link-sized UDP datagrams one packet of the software SRD device spans on a \
         small-MTU link (1: none)",
        device::fragment::DEFAULT_COUNT,
    );
    (iface, mtu, fragments)
}

/// The next RNR back-off, in µs, after one of `prev_us` (0: none yet), efa-reference §6: the
/// first is `interval_us` (`FI_EFA_TIMEOUT_INTERVAL`) or, when that is 0, `jitter_us` (random,
/// 40–120 µs); each later one doubles, up to `max_us` (`FI_EFA_MAX_TIMEOUT`). The SRD transport
/// and the RDM layer each back off from a peer by it.
pub fn rnr_backoff_us(prev_us: u64, interval_us: u64, max_us: u64, jitter_us: u64) -> u64 {
    match prev_us {
        0 if interval_us > 0 => interval_us,
        0 => jitter_us,
        _ => (prev_us * 2).min(max_us.max(1)),
    }
}

/// A random first RNR back-off: 40–120 µs, as upstream efa draws it (efa-reference §6).
pub fn rnr_jitter_us(random: u64) -> u64 {
    40 + random % 81
}

/// Largest injected payload on a device of this MTU: an injected message fits one packet with
/// the largest REQ header, up to 4096 (§10). `tx_attr.inject_size` and the endpoint's limit.
pub fn inject_size(mtu: usize) -> usize {
    mtu.saturating_sub(MAX_REQ_HDR).min(INJECT_SIZE)
}

/// Largest atomic operand in bytes: operand and compare data share one packet (§5).
pub fn max_atomic_bytes(mtu: usize) -> usize {
    mtu.saturating_sub(MAX_REQ_HDR + 4) / 2
}

/// Largest element count of one atomic call (fi_atomicvalid(3)).
pub fn atomic_count(kind: AtomicKind, datatype: u32, op: u32, mtu: usize) -> Result<usize> {
    if !crate::util::atomic::valid(kind, datatype, op) {
        return Err(Errno::OPNOTSUPP);
    }
    let size = crate::util::atomic::datatype_size(datatype).ok_or(Errno::OPNOTSUPP)?;
    Ok(max_atomic_bytes(mtu) / size)
}

/// `fi_cq_strerror` text for efa's provider error numbers (EFA completion statuses and the
/// provider's own 4096+ codes, efa-reference §6).
pub fn prov_strerror(prov_errno: i32) -> Option<&'static str> {
    Some(match prov_errno {
        3 => "Message too long for the device (local length error)",
        10 => "Receiver not ready (RNR retries exhausted)",
        13 => "Unresponsive remote: the peer stopped answering",
        15 => "Remote unreachable",
        5 => "Invalid local key: the buffer is not registered with the device",
        7 => "Remote address or key invalid (device RDMA refused by the target's NIC)",
        4097 => "Remote refused the access (bad key, bounds or permissions)",
        4098 => "Packet from an unknown or spoofed sender",
        _ => return None,
    })
}

/// Provider error number for a remote refusal.
pub const PROV_ERR_REMOTE_ACCESS: i32 = 4097;

/// `FI_ADDR_EFA` addresses: 32 raw bytes.
pub struct EfaAddrCodec;

impl AddrCodec for EfaAddrCodec {
    fn addr_format(&self) -> u32 {
        FI_ADDR_EFA
    }
    fn addrlen(&self) -> Option<usize> {
        Some(EFA_ADDR_LEN)
    }
    fn canonical(&self, addr: &[u8]) -> Result<Vec<u8>> {
        let a = EfaAddr::from_bytes(addr).ok_or(Errno::INVAL)?;
        Ok(a.to_bytes().to_vec())
    }
    fn straddr(&self, addr: &[u8]) -> String {
        EfaAddr::from_bytes(addr).map_or_else(String::new, |a| a.straddr())
    }
    fn resolve(&self, node: &str, service: &str) -> Result<Vec<u8>> {
        Ok(parse_node(Some(node), Some(service))?.to_bytes().to_vec())
    }
}

/// `node` (an IP address or GID text) and `service` (a QPN) as an address.
fn parse_node(node: Option<&str>, service: Option<&str>) -> Result<EfaAddr> {
    let mut a = EfaAddr::default();
    if let Some(n) = node {
        let ip: IpAddr = n
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| Errno::INVAL)?;
        a.gid = EfaAddr::gid_of(ip);
    }
    if let Some(s) = service {
        a.qpn = s.parse().map_err(|_| Errno::INVAL)?;
    }
    Ok(a)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Rdm,
    Dgram,
}

impl Kind {
    fn suffix(self) -> &'static str {
        match self {
            Kind::Rdm => "-rdm",
            Kind::Dgram => "-dgrm",
        }
    }
}

/// The NIC of a device (fi_nic(3)), described as upstream efa describes an EFA device, from
/// the interface the software device sits on:
///
/// - `device_attr.name` is NULL. Upstream fills it with the verbs device name, and consumers
///   take it as one: aws-ofi-nccl's AWS platform opens `/sys/class/infiniband/<name>/node_guid`
///   for any non-NULL name and fails its init when the file is missing, while a NULL name is
///   its "no NIC details" case (a GUID from the node and device index, the domain name as the
///   device's name). The software device is no InfiniBand device, and fi_nic(3) sets fields
///   that do not apply to NULL; the device is named by `domain_attr.name` (`srd_<if>-rdm`).
///   Upstream's non-verbs providers (tcp, shm) give no NIC at all.
/// - `bus_attr`: `FI_BUS_UNKNOWN` unless `FI_EFA_NIC_PCI` asks for the interface's PCI function
///   (sysfs `device`, as upstream reads the EFA device's; still unknown on loopback). Off by
///   default because MPICH places NICs by asking its hwloc for that PCI device and asserts
///   when it is missing, which it is in builds whose hwloc has no PCI discovery (PyPI's
///   mpich 5.0.2 aborts in `MPI_Init` with two efa domains listed); the software device
///   is not that PCI function's queue pair anyway. NCCL's plugin reads it for `pciPath`.
/// - `link_attr`: the device MTU (upstream: the port's largest message), the interface's speed
///   in bits/s (0 when the driver does not say), its operstate.
fn nic(dev: &UdpDeviceInfo, pci: bool) -> Nic {
    use crate::sys::netif::LinkState;
    Nic {
        device: Some(DeviceAttr {
            name: None,
            device_id: Some("0xefa0".into()),
            device_version: Some("0".into()),
            vendor_id: Some("0x1d0f".into()),
            driver: Some("srd-udp".into()),
            firmware: Some(env!("CARGO_PKG_VERSION").into()),
        }),
        bus: Some(pci_bus(dev.link.pci.filter(|_| pci))),
        link: Some(LinkAttr {
            address: Some(format!(
                "EFA-{}",
                EfaAddr {
                    gid: EfaAddr::gid_of(dev.iface.addr),
                    ..Default::default()
                }
                .gid_text()
            )),
            mtu: dev.mtu,
            speed: usize::try_from(dev.link.speed_bps).unwrap_or(usize::MAX),
            state: match dev.link.state {
                LinkState::Up => FI_LINK_UP,
                LinkState::Down => FI_LINK_DOWN,
                LinkState::Unknown => FI_LINK_UNKNOWN,
            },
            network_type: Some("Ethernet".into()),
        }),
    }
}

/// `fi_bus_attr` of a PCI function, or of an unknown bus.
fn pci_bus(pci: Option<crate::sys::netif::PciAddr>) -> BusAttr {
    match pci {
        Some(p) => BusAttr {
            bus_type: FI_BUS_PCI,
            pci_domain_id: p.domain,
            pci_bus_id: p.bus,
            pci_device_id: p.device,
            pci_function_id: p.function,
        },
        None => BusAttr {
            bus_type: FI_BUS_UNSPEC,
            ..Default::default()
        },
    }
}

/// The NIC of an EFA device, as upstream describes it: the verbs device name, vendor part,
/// its PCI function (sysfs `device`; NCCL's plugin places GPUs by it), the port's MTU, speed
/// and state.
fn hw_nic(dev: &HwDeviceInfo) -> Nic {
    Nic {
        device: Some(DeviceAttr {
            name: Some(dev.name.clone()),
            device_id: Some(format!("0x{:x}", dev.vendor_part_id)),
            device_version: Some("0".into()),
            vendor_id: Some("0x1d0f".into()),
            driver: Some("efa".into()),
            firmware: None,
        }),
        bus: Some(pci_bus(dev.pci)),
        link: Some(LinkAttr {
            address: Some(format!(
                "EFA-{}",
                EfaAddr {
                    gid: dev.gid,
                    ..Default::default()
                }
                .gid_text()
            )),
            mtu: dev.mtu,
            speed: usize::try_from(dev.speed_bps).unwrap_or(usize::MAX),
            state: if dev.up { FI_LINK_UP } else { FI_LINK_DOWN },
            network_type: Some("Ethernet".into()),
        }),
    }
}

fn static_info(di: &DevInfo, kind: Kind) -> Info {
    let mtu = di.mtu();
    let rdm = kind == Kind::Rdm;
    let caps = if rdm { RDM_CAPS } else { DGRAM_CAPS };
    let order = if rdm {
        FI_ORDER_SAS
            | FI_ORDER_ATOMIC_RAR
            | FI_ORDER_ATOMIC_RAW
            | FI_ORDER_ATOMIC_WAR
            | FI_ORDER_ATOMIC_WAW
    } else {
        0
    };
    // DGRAM sends inline what the device takes inline (§10); the software device has none.
    let inject = match (rdm, di) {
        (true, _) => inject_size(mtu),
        (false, DevInfo::Hw(d)) => d.inline_size,
        (false, DevInfo::Soft(_)) => 0,
    };
    let src = EfaAddr {
        gid: di.gid(),
        ..Default::default()
    };
    let atomic = max_atomic_bytes(mtu);
    Info {
        caps,
        mode: 0,
        addr_format: FI_ADDR_EFA,
        src_addr: Some(src.to_bytes().to_vec()),
        tx_attr: TxAttr {
            // Domain-level caps (FI_LOCAL_COMM, FI_REMOTE_COMM) are not transmit or receive
            // caps: fabtests' getinfo_test rejects them in tx_attr/rx_attr.
            caps: caps
                & !(FI_RECV
                    | FI_REMOTE_READ
                    | FI_REMOTE_WRITE
                    | FI_SOURCE
                    | FI_MULTI_RECV
                    | FI_DIRECTED_RECV
                    | FI_LOCAL_COMM
                    | FI_REMOTE_COMM),
            op_flags: if rdm {
                FI_INJECT | FI_COMPLETION | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE
            } else {
                FI_TRANSMIT_COMPLETE
            },
            msg_order: order,
            inject_size: inject,
            size: if rdm { TX_SIZE } else { 1024 },
            iov_limit: if rdm { 4 } else { 1 },
            rma_iov_limit: if rdm { 1 } else { 0 },
            ..Default::default()
        },
        rx_attr: RxAttr {
            caps: caps & !(FI_SEND | FI_READ | FI_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM),
            op_flags: if rdm {
                FI_COMPLETION | FI_MULTI_RECV
            } else {
                0
            },
            msg_order: order,
            size: if rdm { RX_SIZE } else { 1024 },
            iov_limit: if rdm { 4 } else { 1 },
            ..Default::default()
        },
        ep_attr: EpAttr {
            type_: if rdm { FI_EP_RDM } else { FI_EP_DGRAM },
            protocol: FI_PROTO_EFA,
            protocol_version: if rdm { 4 } else { 1 },
            max_msg_size: if rdm { u64::MAX as usize } else { mtu },
            max_order_raw_size: if rdm { atomic } else { 0 },
            max_order_war_size: if rdm { atomic } else { 0 },
            max_order_waw_size: if rdm { atomic } else { 0 },
            mem_tag_format: if rdm { 0xAAAA_AAAA_AAAA_AAAA } else { 0 },
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..Default::default()
        },
        domain_attr: DomainAttr {
            name: Some(format!("{}{}", di.name(), kind.suffix())),
            // fi_domain(3): local and remote communication are domain capabilities.
            caps: FI_LOCAL_COMM | FI_REMOTE_COMM,
            threading: if rdm {
                FI_THREAD_SAFE
            } else {
                FI_THREAD_DOMAIN
            },
            control_progress: FI_PROGRESS_AUTO,
            progress: if rdm {
                FI_PROGRESS_MANUAL
            } else {
                FI_PROGRESS_AUTO
            },
            resource_mgmt: if rdm { FI_RM_ENABLED } else { FI_RM_DISABLED },
            // Any AV type matches (upstream's prov info says FI_AV_UNSPEC); an RDM entry then
            // says FI_AV_TABLE, the only one efa implements (FI_AV_MAP, deprecated in 2.x, is
            // served as a table: Open MPI 4.1 asks for it).
            av_type: FI_AV_UNSPEC,
            mr_mode: (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32,
            mr_key_size: 4,
            cq_data_size: if rdm { 4 } else { 0 },
            cq_cnt: 1 << 10,
            ep_cnt: 1 << 10,
            tx_ctx_cnt: 1 << 10,
            rx_ctx_cnt: 1 << 10,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            cntr_cnt: 1 << 10,
            mr_iov_limit: 1,
            mr_cnt: 1 << 16,
            ..Default::default()
        },
        fabric_attr: FabricAttr {
            name: Some(fabric_name(di).into()),
            prov_name: Some(PROV_NAME.into()),
            prov_version: PROV_VERSION,
            ..Default::default()
        },
        nic: Some(match di {
            DevInfo::Hw(d) => hw_nic(d),
            DevInfo::Soft(d) => nic(d, nic_pci_enabled()),
        }),
        ..Default::default()
    }
}

/// The fabric of a loopback device: not the network of the other devices (fi_fabric(3): a
/// fabric is the resources that reach one network), since it reaches no other host.
pub const LOOPBACK_FABRIC: &str = "efa-loopback";

/// The fabric an entry of device `dev` names: `efa` (the network its peers are on), or
/// [`LOOPBACK_FABRIC`]. Applications that spread a host's processes over the entries that
/// look alike must not take loopback for another NIC of the same network: Open MPI 4.1
/// (opal common_ofi) groups entries by fabric name and attributes, and with jumbo frames,
/// where efa's loopback and Ethernet entries had the same attributes, put every second rank
/// of a host on loopback, where no other host reaches it and where, every host's loopback
/// address being the same, peers on other hosts looked local (tests/cluster, MTU 9000).
fn fabric_name(di: &DevInfo) -> &'static str {
    if matches!(di, DevInfo::Soft(d) if d.iface.loopback) {
        LOOPBACK_FABRIC
    } else {
        PROV_NAME
    }
}

/// Whether the device of info `i` can reach `dest`: loopback destinations only from a
/// loopback device, which reaches no other host (only addresses of this one, `local`).
fn reaches(i: &Info, dest: &EfaAddr, local: &[[u8; 16]]) -> bool {
    let Some(own) = i.src_addr.as_deref().and_then(EfaAddr::from_bytes) else {
        return false;
    };
    match (own.ip().is_loopback(), dest.ip().is_loopback()) {
        (_, true) => own.ip().is_loopback(),
        (true, false) => local.contains(&dest.gid),
        (false, false) => true,
    }
}

pub struct EfaProvider;

pub static EFA: EfaProvider = EfaProvider;

impl InfoProvider for EfaProvider {
    fn name(&self) -> &'static str {
        PROV_NAME
    }

    fn version(&self) -> u32 {
        PROV_VERSION
    }

    fn getinfo(
        &self,
        version: u32,
        node: Option<&str>,
        service: Option<&str>,
        flags: u64,
        hints: Option<&Info>,
    ) -> Result<Vec<Info>> {
        // FI_HMEM needs a device-memory interface (CUDA, ROCr, Level Zero, Neuron,
        // SynapseAI); this library has none, so, as upstream efa built without one, it is never
        // advertised and asking for it finds nothing. Host memory needs no capability
        // (registrations with FI_HMEM_SYSTEM work as they are).
        if hints.is_some_and(|h| (h.caps | h.tx_attr.caps | h.rx_attr.caps) & FI_HMEM != 0) {
            crate::fi_info!(
                PROV_NAME,
                crate::core::log::Subsys::Core,
                "FI_HMEM requested but no device-memory interface (CUDA, ROCr, Level Zero, \
                 Neuron, SynapseAI) is available: host memory only"
            );
            return Err(Errno::NODATA);
        }
        let devs = devices(flags & FI_RESCAN != 0);
        let mut all = Vec::new();
        for d in &devs {
            all.push(static_info(d, Kind::Rdm));
            all.push(static_info(d, Kind::Dgram));
        }
        if all.is_empty() {
            return Err(Errno::NODATA);
        }
        let named = if node.is_some() || service.is_some() {
            Some(parse_node(node, service)?)
        } else {
            None
        };
        // fi_getinfo(3): a source address (FI_SOURCE with a node, or hints->src_addr) keeps
        // only the device that owns it (efa-reference §10); a destination keeps the devices
        // that can reach it, the best first.
        let src = match (flags & FI_SOURCE != 0, named) {
            (true, Some(a)) if node.is_some() => Some(a),
            _ => hints
                .and_then(|h| h.src_addr.as_deref())
                .and_then(EfaAddr::from_bytes),
        };
        let dest = match (flags & FI_SOURCE == 0, named) {
            (true, Some(a)) if node.is_some() => Some(a),
            _ => hints
                .and_then(|h| h.dest_addr.as_deref())
                .and_then(EfaAddr::from_bytes),
        };
        if let Some(a) = src.filter(|a| !a.ip().is_unspecified()) {
            all.retain(|i| i.src_addr.as_deref().map(|s| &s[..16]) == Some(&a.gid[..]));
        }
        // As upstream: hints naming a PCI bus keep the devices on that bus.
        if let Some(b) = hints
            .and_then(|h| h.nic.as_ref())
            .and_then(|n| n.bus.as_ref())
            .filter(|b| b.bus_type == FI_BUS_PCI)
        {
            all.retain(|i| {
                i.nic
                    .as_ref()
                    .and_then(|n| n.bus.as_ref())
                    .is_some_and(|ib| ib.bus_type == FI_BUS_PCI && ib.pci_bus_id == b.pci_bus_id)
            });
        }
        if let Some(d) = dest.filter(|a| !a.ip().is_unspecified()) {
            let local: Vec<[u8; 16]> = devs.iter().map(DevInfo::gid).collect();
            all.retain(|i| reaches(i, &d, &local));
            // Stable: a device that owns the destination (the peer is on this host) first.
            all.sort_by_key(|i| i.src_addr.as_deref().map(|s| &s[..16]) != Some(&d.gid[..]));
        }
        if all.is_empty() {
            return Err(Errno::NODATA);
        }
        let mut list = crate::core::getinfo::util_getinfo(&all, version, hints)?;
        let hint_mr = hints.map_or(0, |h| h.domain_attr.mr_mode);
        for i in &mut list {
            if let Some(a) = named {
                if flags & FI_SOURCE != 0 {
                    if node.is_some() {
                        i.src_addr = Some(a.to_bytes().to_vec());
                    } else if let Some(s) = i.src_addr.as_mut() {
                        s[16..18].copy_from_slice(&a.qpn.to_le_bytes());
                    }
                } else {
                    i.dest_addr = Some(a.to_bytes().to_vec());
                }
            }
            if let Some(h) = hints {
                if let Some(s) = h.src_addr.clone() {
                    i.src_addr = Some(s);
                }
                if i.dest_addr.is_none()
                    && let Some(d) = h.dest_addr.clone()
                {
                    i.dest_addr = Some(d);
                }
            }
            // Asked for remote communication only: the info says so, and its endpoints keep
            // local peers on the device too (no shm), as upstream efa does.
            if hints.is_some_and(|h| h.caps & (FI_LOCAL_COMM | FI_REMOTE_COMM) == FI_REMOTE_COMM) {
                i.caps &= !FI_LOCAL_COMM;
            }
            if i.ep_attr.type_ == FI_EP_RDM {
                i.domain_attr.av_type = FI_AV_TABLE;
                // As upstream: the application's choice, enabled when it has none.
                if let Some(rm) = hints
                    .map(|h| h.domain_attr.resource_mgmt)
                    .filter(|&rm| rm != FI_RM_UNSPEC)
                {
                    i.domain_attr.resource_mgmt = rm;
                }
            }
            // FI_MSG_PREFIX when the application offers it (fi_getinfo(3); efa-reference §10):
            // upstream grants it on both endpoint types. The RDM prefix is upstream's size,
            // unused by the protocol here; the DGRAM one is where a UD device writes the GRH.
            if hints
                .is_some_and(|h| (h.mode | h.tx_attr.mode | h.rx_attr.mode) & FI_MSG_PREFIX != 0)
            {
                i.mode |= FI_MSG_PREFIX;
                i.tx_attr.mode |= FI_MSG_PREFIX;
                i.rx_attr.mode |= FI_MSG_PREFIX;
                i.ep_attr.msg_prefix_size = if i.ep_attr.type_ == FI_EP_RDM {
                    RDM_MSG_PREFIX_SIZE
                } else {
                    DGRAM_MSG_PREFIX_SIZE
                };
            }
            // FI_MR_LOCAL only when the application offers it (§10).
            if hint_mr & FI_MR_LOCAL as i32 != 0 && i.domain_attr.mr_mode != 0 {
                i.domain_attr.mr_mode |= FI_MR_LOCAL as i32;
            }
        }
        Ok(list)
    }
}

impl Provider for EfaProvider {
    fn fabric(&self, attr: &FabricAttr) -> Result<Arc<dyn Fabric>> {
        if attr
            .name
            .as_deref()
            .is_some_and(|n| n != PROV_NAME && n != LOOPBACK_FABRIC)
        {
            return Err(Errno::NODEV);
        }
        Ok(Arc::new(EfaFabric))
    }
}

pub struct EfaFabric;

impl Fabric for EfaFabric {
    fn domain(&self, info: &Info) -> Result<Arc<dyn Domain>> {
        let name = info.domain_attr.name.as_deref().ok_or(Errno::NODEV)?;
        let (dev_name, kind) = if let Some(d) = name.strip_suffix("-rdm") {
            (d, Kind::Rdm)
        } else if let Some(d) = name.strip_suffix("-dgrm") {
            (d, Kind::Dgram)
        } else {
            return Err(Errno::NODEV);
        };
        if info.ep_attr.type_ != 0
            && info.ep_attr.type_
                != if kind == Kind::Rdm {
                    FI_EP_RDM
                } else {
                    FI_EP_DGRAM
                }
        {
            return Err(Errno::INVAL);
        }
        let dev = devices(false)
            .into_iter()
            .find(|d| d.name() == dev_name)
            .ok_or(Errno::NODEV)?;
        // An EFA device is opened once per domain (context, PD, address handles).
        let hw = match &dev {
            DevInfo::Hw(d) => Some(HwContext::open(d)?),
            DevInfo::Soft(_) => None,
        };
        let mr_mode = info.domain_attr.mr_mode;
        Ok(Arc::new_cyclic(|me| EfaDomain {
            me: me.clone(),
            dev,
            hw,
            rdm: kind == Kind::Rdm,
            mr_map: Arc::new(MrMap::new(mr_mode, 4)),
            mr_mode,
            rm_enabled: info.domain_attr.resource_mgmt != FI_RM_DISABLED,
            knobs: Knobs::load(),
            shm: std::sync::OnceLock::new(),
            serialized: info.domain_attr.threading == FI_THREAD_DOMAIN,
        }))
    }

    fn name(&self) -> &str {
        PROV_NAME
    }

    fn supports_ops(&self, name: &str) -> bool {
        name == FI_EFA_FEATURE_OPS
    }
}

/// The feature names `FI_EFA_FEATURE_OPS` answers true for (fi_ext_efa.h); any other name,
/// NULL included, is false. Upstream defines one, `mixed_hmem_iov` (every descriptor of a
/// multi-iov request checked for its memory interface), and advertises it on its
/// `efa-direct` fabric only, not on `efa`: this library has the `efa` fabric and no device
/// memory, so it advertises none.
pub const FEATURES: &[&str] = &[];

/// `query` of `FI_EFA_FEATURE_OPS`.
pub fn has_feature(name: &str) -> bool {
    FEATURES.contains(&name)
}

pub struct EfaDomain {
    me: std::sync::Weak<EfaDomain>,
    pub dev: DevInfo,
    /// The open EFA device of a hardware domain.
    hw: Option<Arc<HwContext>>,
    rdm: bool,
    pub mr_map: Arc<MrMap>,
    mr_mode: i32,
    /// `resource_mgmt` is not `FI_RM_DISABLED` (the RDM endpoint's RNR handling).
    pub rm_enabled: bool,
    pub knobs: Knobs,
    /// The shm domain of the endpoints that carry our local peers, opened on first use.
    shm: std::sync::OnceLock<Arc<ShmDomain>>,
    /// `Domain::serialized`: the application asked for `FI_THREAD_DOMAIN`. Our own threads
    /// (`rdm::ack_timer`, `rdm::quiet`) touch only an endpoint's device, under the endpoint's
    /// lock, which stays a full one: never its CQs, counters, receive queue or shm endpoint.
    serialized: bool,
}

impl EfaDomain {
    /// The shm domain for local peers: it shares our registrations (keys work either way).
    pub fn shm_domain(&self) -> Arc<ShmDomain> {
        self.shm
            .get_or_init(|| {
                ShmProvider::peer_domain(self.mr_map.clone(), self.mr_mode, self.serialized)
            })
            .clone()
    }

    fn device_config(&self) -> DeviceConfig {
        DeviceConfig {
            timeout_interval_us: self.knobs.timeout_interval_us,
            max_timeout_us: self.knobs.max_timeout_us,
            ..DeviceConfig::default()
        }
    }

    /// Opens a queue pair: an SRD QP on an EFA device, or a UDP socket on the port named by
    /// the info's source address if any (a source without a service gets a fresh port).
    fn open_device(&self, info: &Info) -> Result<Box<dyn device::Device>> {
        let dev = match (&self.dev, &self.hw) {
            (DevInfo::Hw(_), Some(hw)) => {
                // The QPN is the device's to choose: a service in the source is not honoured.
                // rnr_retry 3 until FI_OPT_EFA_RNR_RETRY says otherwise (efa-reference §6).
                return VerbsDevice::open(hw, 3)
                    .map(|d| Box::new(d) as Box<dyn device::Device>)
                    .inspect_err(|e| {
                        crate::fi_warn!(
                            PROV_NAME,
                            crate::core::log::Subsys::EpCtrl,
                            "{}: cannot open an SRD queue pair: {}",
                            hw.info.name,
                            e
                        );
                    });
            }
            (DevInfo::Soft(d), _) => d,
            (DevInfo::Hw(_), None) => return Err(Errno::NODEV),
        };
        let port = info
            .src_addr
            .as_deref()
            .and_then(EfaAddr::from_bytes)
            .map_or(0, |a| a.qpn);
        UdpDevice::open(dev, port, &self.device_config())
            .map(|d| Box::new(d) as Box<dyn device::Device>)
            .inspect_err(|e| {
                crate::fi_warn!(
                    PROV_NAME,
                    crate::core::log::Subsys::EpCtrl,
                    "{}: cannot bind {}:{}: {}",
                    dev.name,
                    dev.iface.addr,
                    port,
                    e
                );
            })
    }
}

impl EfaDomain {
    /// fi_endpoint(3) on a device given by the caller instead of this domain's interface:
    /// tests run endpoints over the simulated device (`device::sim`), with any MTU.
    pub fn endpoint_on(
        &self,
        info: &Info,
        dev: Box<dyn device::Device>,
    ) -> Result<Arc<dyn Endpoint>> {
        self.endpoint_with(info, dev)
    }

    fn endpoint_with(
        &self,
        info: &Info,
        dev: Box<dyn device::Device>,
    ) -> Result<Arc<dyn Endpoint>> {
        let me = self.me.upgrade().ok_or(Errno::OPBADSTATE)?;
        let caps = if info.caps == 0 {
            if self.rdm { RDM_CAPS } else { DGRAM_CAPS }
        } else {
            info.caps
        };
        // The info of fi_endpoint says whether the application took prefix mode.
        let prefix = if (info.mode | info.tx_attr.mode | info.rx_attr.mode) & FI_MSG_PREFIX != 0 {
            info.ep_attr.msg_prefix_size
        } else {
            0
        };
        if self.rdm {
            if info.ep_attr.type_ != 0 && info.ep_attr.type_ != FI_EP_RDM {
                return Err(Errno::INVAL);
            }
            Ok(rdm::RdmEndpoint::new(
                me,
                caps,
                info.tx_attr.op_flags,
                info.rx_attr.op_flags,
                prefix,
                dev,
            ))
        } else {
            if info.ep_attr.type_ != 0 && info.ep_attr.type_ != FI_EP_DGRAM {
                return Err(Errno::INVAL);
            }
            Ok(dgram::DgramEndpoint::new(
                caps,
                info.tx_attr.op_flags,
                info.rx_attr.op_flags,
                prefix,
                dev,
            ))
        }
    }
}

impl Domain for EfaDomain {
    fn endpoint(&self, info: &Info) -> Result<Arc<dyn Endpoint>> {
        let dev = self.open_device(info)?;
        self.endpoint_with(info, dev)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn serialized(&self) -> bool {
        self.serialized
    }

    fn av_open(&self, attr: &AvAttr) -> Result<Arc<Av>> {
        // FI_AV_MAP is served as FI_AV_TABLE, as upstream efa does (fi_addr values are then
        // table indices, which FI_AV_MAP allows: they are opaque to the application).
        let mut attr = attr.clone();
        if attr.type_ == FI_AV_MAP {
            attr.type_ = FI_AV_TABLE;
        }
        Av::new(&attr, Arc::new(EfaAddrCodec))
    }

    fn mr_reg(&self, req: &MrRequest) -> Result<Arc<Mr>> {
        // mr_iov_limit is 1 (§10).
        if req.iov.len() > 1 {
            return Err(Errno::INVAL);
        }
        // On an EFA device the region is registered with the NIC too (`ibv_reg_mr`), and its
        // key is the rkey, which peers' device RDMA presents (FI_MR_PROV_KEY, as upstream).
        match (&self.hw, req.iov.first()) {
            (Some(hw), Some(mem)) if self.rdm && !mem.is_empty() && req.iface == FI_HMEM_SYSTEM => {
                if req.access & !crate::util::mr::MR_ACCESS != 0 {
                    return Err(Errno::INVAL);
                }
                // The NIC pins the pages now, and pinned pages cannot be collapsed later: the
                // memory stays on the pages it has (as upstream's).
                let reg = hw.reg_mr(*mem, req.access)?;
                let key = u64::from(reg.rkey);
                self.mr_map.register_device(req, key, Box::new(reg))
            }
            _ => {
                let mr = self.mr_map.register(req)?;
                if mr_huge_pages() {
                    crate::util::huge_pages::collapse_onto_huge_pages(&mr);
                }
                Ok(mr)
            }
        }
    }

    fn query_atomic(
        &self,
        datatype: u32,
        op: u32,
        kind: AtomicKind,
        flags: u64,
    ) -> Result<AtomicAttr> {
        if !self.rdm {
            return Err(Errno::NOSYS);
        }
        if flags & !(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED) != 0 || flags & FI_TAGGED != 0
        {
            return Err(Errno::BADFLAGS);
        }
        let count = atomic_count(kind, datatype, op, self.dev.mtu())?;
        let size = crate::util::atomic::datatype_size(datatype).ok_or(Errno::OPNOTSUPP)?;
        Ok(AtomicAttr { count, size })
    }

    fn mr_mode(&self) -> i32 {
        self.mr_mode
    }

    /// `fi_open_ops(domain, FI_EFA_DOMAIN_OPS)` (fi_efa(7)): `query_mr` answers from the
    /// region's device registration (none on the software devices: no valid id).
    fn supports_ops(&self, name: &str) -> bool {
        name == FI_EFA_DOMAIN_OPS
    }

    fn cq_data_size(&self) -> usize {
        if self.rdm { 4 } else { 0 }
    }
}

/// `FI_EFA_NIC_PCI` (ours): report the interface's PCI function in `fi_nic`'s bus
/// attributes ([`nic`] says why it is off by default).
fn nic_pci_enabled() -> bool {
    knob_bool(
        PROV_NAME,
        "nic_pci",
        "Report the PCI function under the interface in fi_nic's bus attributes",
        false,
    )
}

/// fi_efa(7) `FI_EFA_ENABLE_SHM_TRANSFER`: peers on this host are reached through shm
/// (`rdm/local.rs`); off, everything goes through the device.
pub fn shm_transfer_enabled() -> bool {
    knob_bool(
        PROV_NAME,
        "enable_shm_transfer",
        "Use the shm provider for peers on this host",
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FI_EFA_USE_HUGE_PAGE: on unless set off, and never with fork support (efa-reference §9).
    #[test]
    fn huge_pages_unless_off_or_fork_safe() {
        assert!(huge_pages_chosen(None, false));
        assert!(huge_pages_chosen(Some(true), false));
        assert!(!huge_pages_chosen(Some(false), false));
        assert!(!huge_pages_chosen(None, true));
        assert!(!huge_pages_chosen(Some(true), true));
    }

    /// fi_getinfo(3) / fi_domain(3): FI_LOCAL_COMM and FI_REMOTE_COMM are domain capabilities:
    /// in the info and domain caps, never in tx/rx caps (fabtests' getinfo_test checks both).
    #[test]
    fn communication_scope_is_a_domain_capability() {
        let dev = UdpDeviceInfo {
            name: "srd_lo".into(),
            iface: crate::sys::netif::Iface {
                name: "lo".into(),
                addr: "127.0.0.1".parse().unwrap(),
                mtu: 65536,
                up: true,
                loopback: true,
            },
            mtu: 8192,
            fragments: 1,
            link: crate::sys::netif::LinkInfo {
                pci: None,
                speed_bps: 0,
                state: crate::sys::netif::LinkState::Up,
            },
        };
        for kind in [Kind::Rdm, Kind::Dgram] {
            let i = static_info(&DevInfo::Soft(dev.clone()), kind);
            let scope = FI_LOCAL_COMM | FI_REMOTE_COMM;
            assert_eq!(i.caps & scope, scope);
            assert_eq!(i.domain_attr.caps & scope, scope);
            assert_eq!(i.tx_attr.caps & scope, 0);
            assert_eq!(i.rx_attr.caps & scope, 0);
        }
    }

    /// A loopback device is a fabric of its own: an application grouping the entries that
    /// look alike (Open MPI 4.1 spreads a host's ranks over them) never takes it for another
    /// NIC of the network, even where every other attribute matches (at MTU 9000).
    #[test]
    fn loopback_is_a_fabric_of_its_own() {
        let eth = dev_on(None, 0);
        let mut lo = dev_on(None, 0);
        lo.name = "srd_lo".into();
        lo.iface.name = "lo".into();
        lo.iface.addr = "127.0.0.1".parse().unwrap();
        lo.iface.loopback = true;
        let (eth, lo) = (DevInfo::Soft(eth), DevInfo::Soft(lo));
        for kind in [Kind::Rdm, Kind::Dgram] {
            let (e, l) = (static_info(&eth, kind), static_info(&lo, kind));
            assert_eq!(e.fabric_attr.name.as_deref(), Some(PROV_NAME));
            assert_eq!(l.fabric_attr.name.as_deref(), Some(LOOPBACK_FABRIC));
            assert_eq!(l.fabric_attr.prov_name.as_deref(), Some(PROV_NAME));
            // Both open.
            for i in [&e, &l] {
                assert!(Provider::fabric(&EFA, &i.fabric_attr).is_ok());
            }
        }
        let other = FabricAttr {
            name: Some("tcp".into()),
            ..Default::default()
        };
        assert!(Provider::fabric(&EFA, &other).is_err());
    }

    fn dev_on(pci: Option<crate::sys::netif::PciAddr>, speed_bps: u64) -> UdpDeviceInfo {
        use crate::sys::netif::{Iface, LinkInfo, LinkState};
        UdpDeviceInfo {
            name: "srd_eth0".into(),
            iface: Iface {
                name: "eth0".into(),
                addr: "192.0.2.2".parse().unwrap(),
                mtu: 1500,
                up: true,
                loopback: false,
            },
            mtu: 1348,
            fragments: 1,
            link: LinkInfo {
                pci,
                speed_bps,
                state: LinkState::Up,
            },
        }
    }

    /// fi_nic(3) as upstream efa fills it: the PCI function (when asked for) and speed of the
    /// interface under the device, no device name (module docs of `nic`).
    #[test]
    fn nic_describes_the_interface_under_the_device() {
        let pci = crate::sys::netif::PciAddr {
            domain: 0x12,
            bus: 0x34,
            device: 5,
            function: 6,
        };
        let n = nic(&dev_on(Some(pci), 25_000_000_000), true);
        let d = n.device.unwrap();
        assert_eq!(d.name, None);
        assert_eq!(d.vendor_id.as_deref(), Some("0x1d0f"));
        assert_eq!(
            n.bus,
            Some(BusAttr {
                bus_type: FI_BUS_PCI,
                pci_domain_id: 0x12,
                pci_bus_id: 0x34,
                pci_device_id: 5,
                pci_function_id: 6,
            })
        );
        let l = n.link.unwrap();
        assert_eq!(
            (l.mtu, l.speed, l.state),
            (1348, 25_000_000_000, FI_LINK_UP)
        );
        assert_eq!(l.address.as_deref(), Some("EFA-::ffff:192.0.2.2"));

        // Without FI_EFA_NIC_PCI the same interface has no bus attributes.
        let n = nic(&dev_on(Some(pci), 25_000_000_000), false);
        assert_eq!(n.bus.unwrap().bus_type, FI_BUS_UNSPEC);

        let n = nic(&dev_on(None, 0), true);
        assert_eq!(n.bus.unwrap().bus_type, FI_BUS_UNSPEC);
        assert_eq!(n.link.unwrap().speed, 0);
    }

    /// Host memory only: FI_HMEM is not offered, asked for in any of the caps.
    #[test]
    fn hmem_is_not_offered() {
        for set in [
            |h: &mut Info| h.caps = FI_MSG | FI_HMEM,
            |h: &mut Info| h.tx_attr.caps = FI_MSG | FI_HMEM,
            |h: &mut Info| h.rx_attr.caps = FI_MSG | FI_HMEM,
        ] {
            let mut h = Info::default();
            set(&mut h);
            assert_eq!(
                EFA.getinfo(fi_version(1, 18), None, None, 0, Some(&h))
                    .unwrap_err(),
                Errno::NODATA
            );
        }
        let list = EFA.getinfo(fi_version(1, 18), None, None, 0, None).unwrap();
        assert!(list.iter().all(|i| i.caps & FI_HMEM == 0));
    }

    /// `FI_EFA_FEATURE_OPS`: upstream's one feature is efa-direct's; nothing is true here.
    #[test]
    fn no_feature_is_advertised() {
        for f in ["mixed_hmem_iov", "", "MIXED_HMEM_IOV", "anything"] {
            assert!(!has_feature(f), "{f}");
        }
        assert!(EfaFabric.supports_ops(FI_EFA_FEATURE_OPS));
        assert!(!EfaFabric.supports_ops(FI_EFA_DOMAIN_OPS));
    }

    #[test]
    fn addresses_resolve_from_text() {
        let a = parse_node(Some("10.0.0.1"), Some("4791")).unwrap();
        assert_eq!(a.ip().to_string(), "10.0.0.1");
        assert_eq!(a.qpn, 4791);
        assert!(parse_node(Some("not-an-ip"), None).is_err());
        let c = EfaAddrCodec;
        let b = c.canonical(&a.to_bytes()).unwrap();
        assert_eq!(b.len(), 32);
        assert!(c.canonical(&[0u8; 16]).is_err());
        assert!(
            c.straddr(&b)
                .starts_with("fi_addr_efa://[::ffff:10.0.0.1]:4791:")
        );
    }

    /// fi_getinfo(3): a destination keeps the devices that can reach it, a source the device
    /// that owns it (fabtests' client passes its FI_SOURCE answer back in hints->src_addr).
    #[test]
    fn source_and_destination_choose_the_device() {
        let mut h = Info::default();
        h.ep_attr.type_ = FI_EP_RDM;
        let v = fi_version(2, 0);
        let to_lo = EFA
            .getinfo(v, Some("127.0.0.1"), Some("9228"), 0, Some(&h))
            .unwrap();
        assert!(!to_lo.is_empty());
        for i in &to_lo {
            assert!(i.domain_attr.name.as_deref().unwrap().starts_with("srd_lo"));
            let d = EfaAddr::from_bytes(i.dest_addr.as_deref().unwrap()).unwrap();
            assert_eq!(
                (d.ip().to_string().as_str(), d.qpn, d.qkey),
                ("127.0.0.1", 9228, 0)
            );
        }
        let src = EFA
            .getinfo(v, Some("127.0.0.1"), None, FI_SOURCE, Some(&h))
            .unwrap();
        let mut hs = h.clone();
        hs.src_addr = src[0].src_addr.clone();
        let both = EFA
            .getinfo(v, Some("127.0.0.1"), Some("9228"), 0, Some(&hs))
            .unwrap();
        assert!(both.iter().all(|i| i.src_addr == hs.src_addr));
        assert_eq!(both[0].domain_attr.name.as_deref(), Some("srd_lo-rdm"));
        // Every device owns its address: as a destination it comes first.
        for d in devices(false) {
            let node = EfaAddr {
                gid: d.gid(),
                ..Default::default()
            }
            .ip()
            .to_string();
            let l = EFA.getinfo(v, Some(&node), Some("1"), 0, Some(&h)).unwrap();
            assert_eq!(
                l[0].domain_attr.name.as_deref(),
                Some(format!("{}-rdm", d.name()).as_str()),
                "{node}"
            );
        }
    }

    #[test]
    fn av_map_hints_get_an_av_table() {
        // Open MPI 4.1's OFI MTL asks for FI_AV_MAP; upstream efa answers with FI_AV_TABLE.
        let mut h = Info::default();
        h.ep_attr.type_ = FI_EP_RDM;
        h.domain_attr.av_type = FI_AV_MAP;
        let l = EFA
            .getinfo(fi_version(1, 17), None, None, 0, Some(&h))
            .unwrap();
        assert!(!l.is_empty());
        assert!(l.iter().all(|i| i.domain_attr.av_type == FI_AV_TABLE));
    }

    #[test]
    fn atomic_limits_follow_the_mtu() {
        assert_eq!(max_atomic_bytes(1024), (1024 - 172) / 2);
        assert_eq!(
            atomic_count(AtomicKind::Write, FI_UINT64, FI_SUM, 1024).unwrap(),
            (1024 - 172) / 2 / 8
        );
        assert!(atomic_count(AtomicKind::Write, FI_UINT64, FI_CSWAP, 1024).is_err());
    }
}
