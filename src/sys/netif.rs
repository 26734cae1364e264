//! Network interfaces: names, addresses, MTU, state (getifaddrs(3), SIOCGIFMTU).

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
}
