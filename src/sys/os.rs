//! Small process-level OS services.

use std::ffi::CString;

/// The C library's text for an `errno` value.
pub fn errno_text(errnum: i32) -> CString {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length; the XSI `strerror_r` (what the libc crate
    // binds) writes a NUL-terminated string of at most `buf.len()` bytes into it.
    let r = unsafe { libc::strerror_r(errnum, buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    if r != 0 || end == 0 {
        return CString::new(format!("Unknown error {errnum}")).unwrap_or_default();
    }
    CString::new(&buf[..end]).unwrap_or_default()
}

/// This process's id.
pub fn pid() -> u32 {
    std::process::id()
}

/// This process's pid namespace (the inode of `/proc/self/ns/pid`), or 0 when it cannot be
/// read. A pid means a process only inside its namespace: processes that share `/dev/shm`
/// from different namespaces (containers, `unshare --pid`) must not probe or attach to each
/// other by pid.
pub fn pid_namespace() -> u64 {
    static NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
    })
}

/// The initial pid namespace's inode (`PROC_PID_INIT_INO`, linux/proc_ns.h). A process in it
/// sees every process of the host in /proc.
const INIT_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// Whether this process is in the initial pid namespace (sees every process of the host).
pub fn in_initial_pid_namespace() -> bool {
    pid_namespace() == INIT_PID_NAMESPACE
}

/// Whether process `pid` of pid namespace `ns` (a `pid_namespace` value) exists, when this
/// process can tell: in its own namespace always; in another only from the initial namespace,
/// by a scan of /proc (proc(5): `NSpid` in `status` lists a process's pid in each namespace
/// from ours inward, and `ns/pid` names its own), so for rare sweeps, not for data paths.
/// None when it cannot tell.
pub fn process_alive_in(ns: u64, pid: u32) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    if ns == pid_namespace() {
        return Some(pid != 0 && process_alive(pid as i32));
    }
    if !in_initial_pid_namespace() || ns == 0 || pid == 0 {
        return None;
    }
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // Exited since the listing: not the one.
        let Ok(status) = std::fs::read_to_string(format!("/proc/{p}/status")) else {
            continue;
        };
        // No `NSpid` (before Linux 4.1): nothing to tell namespaces apart by.
        let pids = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
        let mut pids = pids.split_whitespace();
        let depth = pids.clone().count();
        // Only a process of a nested namespace, with that pid in its own, may be the owner
        // (whose namespace is then read: a check other users' processes may refuse).
        if depth < 2 || pids.next_back().and_then(|v| v.parse::<u32>().ok()) != Some(pid) {
            continue;
        }
        match std::fs::metadata(format!("/proc/{p}/ns/pid")) {
            Ok(m) if m.ino() == ns => return Some(true),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return None,
        }
    }
    Some(false)
}

/// Whether process `pid` exists (signal 0 probe; EPERM means it exists under another user).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 performs only the existence and permission check.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The real user id.
pub fn uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

/// The host name, for `FI_ADDR_STR`-style names and logs.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length; gethostname NUL-terminates on success.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return String::from("localhost");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Nanoseconds of `CLOCK_MONOTONIC` (the clock `Instant` reads), as one integer: a data path
/// that reads the time on every poll compares and adds plain `u64`s, where `Instant`'s
/// `elapsed` and `duration_since` normalise a seconds-and-nanoseconds pair each time (about 90
/// instructions a reading, callgrind, efa's empty poll over UDP).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on every Linux, so
    // the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Milliseconds of `CLOCK_MONOTONIC_COARSE`: updated once per scheduler tick (1–4 ms) and read
/// from the vDSO's data page without reading the hardware clock, so that a period of tens of
/// milliseconds can be checked on every poll of a data path at the cost of a load.
pub fn coarse_clock_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_COARSE exists on every Linux
    // since 2.6.32, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}
