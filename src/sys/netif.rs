//! Network interfaces: names, addresses, MTU, state (getifaddrs(3), SIOCGIFMTU), and what
//! sysfs says of the hardware under them (`/sys/class/net/<if>/{device,speed,operstate}`).

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub name: String,
    pub addr: IpAddr,
    pub mtu: usize,
    pub up: bool,
    pub loopback: bool,
}

/// A PCI function's address: domain, bus, device, function (`DDDD:BB:DD.F`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PciAddr {
    pub domain: u16,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl PciAddr {
    /// One path component in the kernel's form, `0000:00:03.0` (hexadecimal fields).
    pub fn parse(s: &str) -> Option<PciAddr> {
        let (domain, rest) = s.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |t: &str, max: usize| {
            (!t.is_empty() && t.len() <= max && t.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(t, 16).ok())
                .flatten()
        };
        Some(PciAddr {
            domain: u16::try_from(hex(domain, 4)?).ok()?,
            bus: u8::try_from(hex(bus, 2)?).ok()?,
            device: u8::try_from(hex(device, 2)?).ok().filter(|&d| d < 32)?,
            function: u8::try_from(hex(function, 1)?).ok().filter(|&f| f < 8)?,
        })
    }

    /// The PCI function a device path sits on: the last component of the resolved
    /// `/sys/class/net/<if>/device` that is a PCI address. A virtio NIC's device is the virtio
    /// device (`.../0000:00:03.0/virtio2`), its PCI function is the component above it; behind
    /// bridges the path lists each bridge, the device's own function last.
    pub fn of_device_path(path: &str) -> Option<PciAddr> {
        if !path.starts_with("/sys/devices/pci") {
            return None;
        }
        path.rsplit('/').find_map(PciAddr::parse)
    }
}

/// Link state as `operstate` tells it (RFC 2863 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Up,
    Down,
    Unknown,
}

/// What sysfs says of an interface's hardware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// The PCI function under the interface (None: virtual, e.g. loopback, veth, bridges).
    pub pci: Option<PciAddr>,
    /// Link speed in bits per second; 0 when the driver does not know it.
    pub speed_bps: u64,
    pub state: LinkState,
}

/// `/sys/class/net/<if>/speed` (Mb/s) in bits per second: `-1` (virtio and other drivers
/// that do not know), anything unreadable or unparsable is 0.
pub fn parse_speed(text: &str) -> u64 {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|&m| m > 0)
        .map_or(0, |m| (m as u64).saturating_mul(1_000_000))
}

/// `/sys/class/net/<if>/operstate`. Loopback and some virtual drivers report `unknown` while
/// they carry traffic; then the interface flags decide (`running`: IFF_UP and IFF_RUNNING).
pub fn parse_operstate(text: &str, running: bool) -> LinkState {
    match text.trim() {
        "up" => LinkState::Up,
        "down" | "lowerlayerdown" | "notpresent" => LinkState::Down,
        _ if running => LinkState::Up,
        _ => LinkState::Unknown,
    }
}

/// What `/sys/class/net/<name>` says of an interface; `running` is used when its operstate
/// is `unknown`. An interface name with a `/` or `..` is refused (unknown link).
pub fn link_info(name: &str, running: bool) -> LinkInfo {
    let unknown = LinkInfo {
        pci: None,
        speed_bps: 0,
        state: if running {
            LinkState::Up
        } else {
            LinkState::Unknown
        },
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return unknown;
    }
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    LinkInfo {
        pci: std::fs::canonicalize(dir.join("device"))
            .ok()
            .and_then(|p| p.to_str().and_then(PciAddr::of_device_path)),
        speed_bps: read("speed").as_deref().map_or(0, parse_speed),
        state: read("operstate")
            .as_deref()
            .map_or(unknown.state, |t| parse_operstate(t, running)),
    }
}

/// The PCI function of an RDMA device (`/sys/class/infiniband/<name>/device`), as `link_info`
/// finds an interface's.
pub fn ib_device_pci(name: &str) -> Option<PciAddr> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let dev = std::path::Path::new("/sys/class/infiniband")
        .join(name)
        .join("device");
    std::fs::canonicalize(dev)
        .ok()
        .and_then(|p| p.to_str().and_then(PciAddr::of_device_path))
}

fn mtu_of(name: &str) -> usize {
    // SAFETY: a plain datagram socket used only for the ioctl, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return 1500;
    }
    // SAFETY: an all-zero ifreq is valid; the name is copied in bounded and NUL-terminated.
    let mut req: libc::ifreq = unsafe { core::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the name and writes the mtu member of `req`.
    let r = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    if r != 0 {
        return 1500;
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds the MTU.
    let m = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(m).unwrap_or(1500)
}

/// Every interface address (one entry per interface and address family: IPv4 first, then a
/// global IPv6 address when the interface has no IPv4 one).
pub fn interfaces() -> Vec<Iface> {
    let mut head: *mut libc::ifaddrs = core::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut v4: Vec<Iface> = Vec::new();
    let mut v6: Vec<Iface> = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned; entries stay valid until freeifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: non-null NUL-terminated name from getifaddrs.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0
            && ifa.ifa_flags & libc::IFF_RUNNING as u32 != 0;
        let loopback = ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
        // SAFETY: ifa_addr is non-null; its family tells the concrete type.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let addr = match family {
            libc::AF_INET => {
                // SAFETY: AF_INET: a sockaddr_in.
                let a = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
                IpAddr::V4(Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()))
            }
            libc::AF_INET6 => {
                // SAFETY: AF_INET6: a sockaddr_in6.
                let a = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in6>() };
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                // Link-local addresses need a scope id that the EFA address has no room for.
                if ip.segments()[0] & 0xffc0 == 0xfe80 {
                    continue;
                }
                IpAddr::V6(ip)
            }
            _ => continue,
        };
        let mtu = mtu_of(&name);
        let entry = Iface {
            name,
            addr,
            mtu,
            up,
            loopback,
        };
        if addr.is_ipv4() {
            if !v4.iter().any(|i| i.name == entry.name) {
                v4.push(entry);
            }
        } else if !v6.iter().any(|i| i.name == entry.name) {
            v6.push(entry);
        }
    }
    // SAFETY: frees the list obtained above, once.
    unsafe { libc::freeifaddrs(head) };
    for e in v6 {
        if !v4.iter().any(|i| i.name == e.name) {
            v4.push(e);
        }
    }
    v4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed() {
        let l = interfaces();
        let lo = l.iter().find(|i| i.loopback).expect("a loopback interface");
        assert!(lo.up);
        assert!(lo.mtu >= 1500);
        assert!(lo.addr.is_loopback());
    }

    #[test]
    fn pci_addresses_parse() {
        assert_eq!(
            PciAddr::parse("0000:00:03.0"),
            Some(PciAddr {
                domain: 0,
                bus: 0,
                device: 3,
                function: 0
            })
        );
        assert_eq!(
            PciAddr::parse("10de:a1:1f.7"),
            Some(PciAddr {
                domain: 0x10de,
                bus: 0xa1,
                device: 0x1f,
                function: 7
            })
        );
        for bad in [
            "",
            "virtio2",
            "pci0000:00",
            "0000:00:03",
            "0000:00:20.0",
            "0000:00:03.8",
            "00000:00:03.0",
            "0000:100:03.0",
            "0000:0g:03.0",
            "0000:00:03.0x",
            ":00:03.0",
        ] {
            assert_eq!(PciAddr::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn device_paths_lead_to_their_pci_function() {
        let f = |d, b, dev, func| {
            Some(PciAddr {
                domain: d,
                bus: b,
                device: dev,
                function: func,
            })
        };
        // virtio-net: the net device sits on a virtio device on a PCI function.
        assert_eq!(
            PciAddr::of_device_path("/sys/devices/pci0000:00/0000:00:03.0/virtio2"),
            f(0, 0, 3, 0)
        );
        // ENA / a NIC behind a bridge: the device's own function is the last one.
        assert_eq!(
            PciAddr::of_device_path("/sys/devices/pci0000:00/0000:00:01.0/0000:05:00.1"),
            f(0, 5, 0, 1)
        );
        assert_eq!(
            PciAddr::of_device_path("/sys/devices/pci0001:10/0001:10:00.0"),
            f(1, 0x10, 0, 0)
        );
        // Not on PCI.
        assert_eq!(PciAddr::of_device_path("/sys/devices/virtual/net/lo"), None);
        assert_eq!(
            PciAddr::of_device_path("/sys/devices/platform/soc/1c30000.ethernet"),
            None
        );
    }

    #[test]
    fn speed_is_in_bits_per_second() {
        assert_eq!(parse_speed("10000\n"), 10_000_000_000);
        assert_eq!(parse_speed("100"), 100_000_000);
        assert_eq!(parse_speed("-1\n"), 0);
        assert_eq!(parse_speed("0"), 0);
        assert_eq!(parse_speed(""), 0);
        assert_eq!(parse_speed("fast"), 0);
    }

    #[test]
    fn operstate_names() {
        assert_eq!(parse_operstate("up\n", false), LinkState::Up);
        assert_eq!(parse_operstate("down\n", true), LinkState::Down);
        assert_eq!(parse_operstate("lowerlayerdown", true), LinkState::Down);
        assert_eq!(parse_operstate("notpresent", true), LinkState::Down);
        assert_eq!(parse_operstate("unknown\n", true), LinkState::Up);
        assert_eq!(parse_operstate("unknown\n", false), LinkState::Unknown);
        assert_eq!(parse_operstate("dormant", false), LinkState::Unknown);
    }

    #[test]
    fn loopback_has_no_pci_function_and_every_pci_nic_has_one() {
        for i in interfaces() {
            let l = link_info(&i.name, i.up);
            if i.loopback {
                assert_eq!(l.pci, None);
                assert_eq!(l.speed_bps, 0);
                assert_eq!(l.state, LinkState::Up, "a listed loopback is up");
            }
            let real = std::fs::canonicalize(format!("/sys/class/net/{}/device", i.name))
                .ok()
                .and_then(|p| p.to_str().map(str::to_string));
            if let Some(p) = real.filter(|p| p.starts_with("/sys/devices/pci")) {
                assert!(l.pci.is_some(), "{}: {p}", i.name);
            }
        }
        let none = link_info("../lo", true);
        assert_eq!((none.pci, none.speed_bps), (None, 0));
        assert_eq!(link_info("no-such-if0", false).state, LinkState::Unknown);
    }
}
