//! Address text (fi_av(3) `fi_av_straddr`, and the addresses `fi_tostr` prints):
//! `fi_<format>://…` for every `FI_FORMAT_*`/`FI_ADDR_*`, IPv6 as the C library's
//! `inet_ntop` writes it.

use super::ptr_text;
use crate::abi::consts::*;

/// How many bytes of an address of `format` [`straddr`] reads, given its first two bytes (the
/// socket address family, host order) where the format is a socket address. `None`: the address
/// is a NUL-terminated string (`FI_ADDR_STR`).
pub fn straddr_len(format: u32, family: u16) -> Option<usize> {
    const INET: u16 = libc::AF_INET as u16;
    const INET6: u16 = libc::AF_INET6 as u16;
    const IB: u16 = 27; // AF_IB
    Some(match (format, family) {
        (FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN, INET) => 8,
        (FI_SOCKADDR_IN, INET6) => 20,
        (FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN6, INET6) => 24,
        (FI_SOCKADDR_IN6, INET) => 12,
        (FI_SOCKADDR, IB) | (FI_SOCKADDR_IB, _) => 48,
        (FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6, _) => 2,
        (FI_ADDR_EFA, _) => 24,
        (FI_ADDR_IB_UD, _) => 27,
        (FI_ADDR_PSMX2, _) => 16,
        (FI_ADDR_PSMX3, _) => 32,
        (FI_ADDR_OPX, _) => 8,
        (FI_ADDR_CXI, _) => 4,
        (FI_ADDR_STR, _) => return None,
        _ => 0,
    })
}

fn u16_ne(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u16_be(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_ne(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn u64_ne(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

fn u64_be(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// An IPv4 address in dotted decimal.
fn ntop4(b: &[u8]) -> String {
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

/// An IPv6 address as the C library's `inet_ntop` writes it: lower-case hex groups, the first
/// longest run of two or more zero groups as `::`, and the last 32 bits in dotted decimal for
/// IPv4-compatible (`::a.b.c.d`) and IPv4-mapped (`::ffff:a.b.c.d`) addresses.
pub fn ntop6(b: &[u8]) -> String {
    let w: Vec<u16> = (0..8).map(|i| u16_be(b, 2 * i)).collect();
    let (mut best, mut cur) = ((0usize, 0usize), (0usize, 0usize));
    for (i, &x) in w.iter().enumerate() {
        if x == 0 {
            if cur.1 == 0 {
                cur.0 = i;
            }
            cur.1 += 1;
            if cur.1 > best.1 {
                best = cur;
            }
        } else {
            cur.1 = 0;
        }
    }
    let run = (best.1 >= 2).then_some(best);
    let mut s = String::new();
    let mut i = 0;
    while i < 8 {
        if let Some((base, len)) = run
            && i >= base
            && i < base + len
        {
            if i == base {
                s.push(':');
            }
            i += 1;
            continue;
        }
        if i != 0 {
            s.push(':');
        }
        if i == 6
            && let Some((0, len)) = run
            && (len == 6 || (len == 5 && w[5] == 0xffff))
        {
            s.push_str(&ntop4(&b[12..16]));
            return s;
        }
        s.push_str(&format!("{:x}", w[i]));
        i += 1;
    }
    if let Some((base, len)) = run
        && base + len == 8
    {
        s.push(':');
    }
    s
}

/// The `fi_<format>://` text of an address (what `fi_av_straddr` and `fi_tostr` print), or None
/// where the C library prints nothing (unknown format, unknown socket family, short data).
/// `bytes` holds at least [`straddr_len`] bytes; `ptr` is the address's location (printed by
/// the formats that have no text of their own).
pub fn straddr(format: u32, bytes: &[u8], ptr: usize) -> Option<Vec<u8>> {
    let family = if bytes.len() >= 2 {
        u16_ne(bytes, 0)
    } else {
        0
    };
    match straddr_len(format, family) {
        Some(n) if bytes.len() < n => return None,
        _ => {}
    }
    const INET: u16 = libc::AF_INET as u16;
    const INET6: u16 = libc::AF_INET6 as u16;
    let sin = |b: &[u8]| -> Option<String> {
        let host = match u16_ne(b, 0) {
            INET => ntop4(&b[4..8]),
            INET6 => ntop6(&b[4..20]),
            _ => return None,
        };
        Some(format!("fi_sockaddr_in://{host}:{}", u16_be(b, 2)))
    };
    let sin6 = |b: &[u8]| -> Option<String> {
        let host = match u16_ne(b, 0) {
            INET => ntop4(&b[8..12]),
            INET6 => ntop6(&b[8..24]),
            _ => return None,
        };
        Some(format!("fi_sockaddr_in6://[{host}]:{}", u16_be(b, 2)))
    };
    let sib = |b: &[u8]| -> String {
        format!(
            "fi_sockaddr_ib://[{}]:0x{:x}:0x{:x}:0x{:x}",
            ntop6(&b[8..24]),
            u16_be(b, 2),
            (u64_be(b, 24) >> 16) & 0xfff,
            u64_be(b, 40) & 0xff
        )
    };
    let text = match format {
        FI_SOCKADDR => match family {
            INET => sin(bytes)?,
            INET6 => sin6(bytes)?,
            27 => sib(bytes),
            _ => return None,
        },
        FI_SOCKADDR_IP => match family {
            INET => sin(bytes)?,
            INET6 => sin6(bytes)?,
            _ => return None,
        },
        FI_SOCKADDR_IN => sin(bytes)?,
        FI_SOCKADDR_IN6 => sin6(bytes)?,
        FI_SOCKADDR_IB => sib(bytes),
        FI_ADDR_EFA => format!(
            "fi_addr_efa://[{}]:{}:{}",
            ntop6(&bytes[..16]),
            u16_ne(bytes, 16),
            u32_ne(bytes, 20)
        ),
        FI_ADDR_PSMX2 => format!(
            "fi_addr_psmx2://{:x}:{:x}",
            u64_ne(bytes, 0),
            u64_ne(bytes, 8)
        ),
        FI_ADDR_PSMX3 => format!(
            "fi_addr_psmx3://{:x}:{:x}:{:x}:{:x}",
            u64_ne(bytes, 0),
            u64_ne(bytes, 8),
            u64_ne(bytes, 16),
            u64_ne(bytes, 24)
        ),
        FI_ADDR_OPX => format!("fi_addr_opx://{:016x}", u64_ne(bytes, 0)),
        FI_ADDR_MLX => format!("fi_addr_mlx://{}", ptr_text(ptr)),
        FI_ADDR_UCX => format!("fi_addr_ucx://{}", ptr_text(ptr)),
        FI_ADDR_IB_UD => format!(
            "fi_addr_ib_ud://{}:{:x}/{:x}/{:x}/{:x}",
            ntop6(&bytes[..16]),
            u32_ne(bytes, 16),
            u16_ne(bytes, 20),
            u16_ne(bytes, 22),
            bytes[26]
        ),
        FI_ADDR_CXI => format!("fi_addr_cxi://0x{:08x}", u32_ne(bytes, 0)),
        FI_ADDR_STR => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            return Some(bytes[..end].to_vec());
        }
        _ => return None,
    };
    Some(text.into_bytes())
}
