//! Waiting on file descriptors: eventfd, epoll, poll.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{Errno, Result};

/// Blocks until one of `fds` is readable or `timeout_ms` passes (negative: forever). With no fds,
/// sleeps for the timeout (at most 1 ms when negative, so callers keep polling).
pub fn wait_readable(fds: &[RawFd], timeout_ms: i32) {
    if fds.is_empty() {
        let ms = if timeout_ms < 0 { 1 } else { timeout_ms.min(1) } as u64;
        std::thread::sleep(std::time::Duration::from_micros(ms * 1000 / 4 + 50));
        return;
    }
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs that poll may write into.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
}

/// A Linux eventfd used as a level-triggered doorbell.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> Result<EventFd> {
        // SAFETY: eventfd has no memory preconditions; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Errno::last_os());
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the fd readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our own eventfd; failure (counter
        // saturated) leaves it readable anyway.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Makes the fd unreadable again; returns whether it was signalled.
    pub fn drain(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64 from our own nonblocking eventfd.
        let r = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        r == 8
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// An epoll set: its own fd is readable when any member is (what `FI_GETWAIT` hands out).
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> Result<Epoll> {
        // SAFETY: no memory preconditions; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(Errno::last_os());
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adds `fd` for readability; adding twice is not an error.
    pub fn add(&self, fd: RawFd) -> Result<()> {
        self.add_token(fd, fd as u64)
    }

    /// Adds `fd` for readability, reported with `token` (`wait_tokens`); adding twice is not
    /// an error.
    pub fn add_token(&self, fd: RawFd, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(Errno::last_os());
        }
        Ok(())
    }

    pub fn remove(&self, fd: RawFd) {
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer on current kernels; a null is allowed.
        unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Watches `fd` for readability once (`EPOLLONESHOT`), reported with `token`: the first
    /// time it is readable, from now on (readable already counts), one event; then nothing until
    /// it is watched again.
    pub fn watch_once(&self, fd: RawFd, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
            u64: token,
        };
        for op in [libc::EPOLL_CTL_MOD, libc::EPOLL_CTL_ADD] {
            // SAFETY: `ev` is a valid epoll_event for the duration of the call.
            if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } == 0 {
                return Ok(());
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
                break;
            }
        }
        Err(Errno::last_os())
    }

    /// Waits for members to be readable; writes the tokens of those that are (as given to
    /// `watch_once`, or the fd for `add`) into `out` and returns how many.
    pub fn wait_tokens(&self, out: &mut [u64], timeout_ms: i32) -> usize {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 16];
        let max = out.len().min(ev.len());
        // SAFETY: `ev` is a valid array of at least `max` events for the kernel to fill.
        let n = unsafe {
            libc::epoll_wait(self.0.as_raw_fd(), ev.as_mut_ptr(), max as i32, timeout_ms)
        };
        let n = n.max(0) as usize;
        for (o, e) in out.iter_mut().zip(&ev[..n]) {
            *o = e.u64;
        }
        n
    }

    /// Waits until a member is readable; returns whether one was.
    pub fn wait(&self, timeout_ms: i32) -> bool {
        self.wait_tokens(&mut [0; 8], timeout_ms) > 0
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventfd_in_epoll() {
        let e = EventFd::new().unwrap();
        let p = Epoll::new().unwrap();
        p.add(e.raw()).unwrap();
        p.add(e.raw()).unwrap();
        assert!(!p.wait(0));
        e.signal();
        assert!(p.wait(0));
        assert!(e.drain());
        assert!(!p.wait(0));
        assert!(!e.drain());
    }

    #[test]
    fn watched_once_reports_once_until_watched_again() {
        let e = EventFd::new().unwrap();
        let p = Epoll::new().unwrap();
        let mut out = [0u64; 4];
        p.watch_once(e.raw(), 77).unwrap();
        assert_eq!(p.wait_tokens(&mut out, 0), 0);
        e.signal();
        assert_eq!(p.wait_tokens(&mut out, 0), 1);
        assert_eq!(out[0], 77);
        // Still readable, but reported once.
        assert_eq!(p.wait_tokens(&mut out, 0), 0);
        // Watching again a member that is readable already reports it at once.
        p.watch_once(e.raw(), 78).unwrap();
        assert_eq!(p.wait_tokens(&mut out, 0), 1);
        assert_eq!(out[0], 78);
        assert!(e.drain());
        p.watch_once(e.raw(), 79).unwrap();
        assert_eq!(p.wait_tokens(&mut out, 0), 0);
    }

    #[test]
    fn a_timer_set_again_forgets_its_past_expiry() {
        let t = TimerFd::new().unwrap();
        let p = Epoll::new().unwrap();
        p.add_token(t.raw(), 5).unwrap();
        let mut out = [0u64; 4];
        assert_eq!(p.wait_tokens(&mut out, 0), 0, "not armed");
        t.arm(0);
        assert_eq!(p.wait_tokens(&mut out, 1000), 1, "due at once");
        assert_eq!(out[0], 5);
        // Set again before its expiry was read: the expiry is gone, the new deadline stands.
        t.arm(60_000_000_000);
        assert_eq!(p.wait_tokens(&mut out, 0), 0);
        assert!(!t.drain());
        t.arm(1);
        assert_eq!(p.wait_tokens(&mut out, 1000), 1);
        assert!(t.drain());
        assert_eq!(p.wait_tokens(&mut out, 0), 0, "read");
    }

    #[test]
    fn a_timer_set_for_a_moment_of_the_monotonic_clock() {
        let t = TimerFd::new().unwrap();
        let p = Epoll::new().unwrap();
        p.add_token(t.raw(), 6).unwrap();
        let mut out = [0u64; 4];
        let now = crate::sys::os::monotonic_ns();
        t.arm_at(now + 60_000_000_000);
        assert_eq!(p.wait_tokens(&mut out, 0), 0, "a minute ahead");
        t.arm_at(now + 5_000_000);
        assert_eq!(p.wait_tokens(&mut out, 1000), 1, "5 ms ahead");
        assert!(crate::sys::os::monotonic_ns() >= now + 5_000_000);
        assert!(t.drain());
        t.arm_at(now);
        assert_eq!(
            p.wait_tokens(&mut out, 1000),
            1,
            "a moment past is due at once"
        );
        // Disarmed before its expiry was read: nothing is left to read.
        t.disarm();
        assert_eq!(p.wait_tokens(&mut out, 0), 0);
        assert!(!t.drain());
        t.arm_at(0);
        assert_eq!(
            p.wait_tokens(&mut out, 1000),
            1,
            "zero counts as a moment past"
        );
    }
}

/// A timerfd (timerfd_create(2)): readable once its deadline passes.
#[derive(Debug)]
pub struct TimerFd(OwnedFd);

impl TimerFd {
    pub fn new() -> Result<TimerFd> {
        // SAFETY: no memory preconditions; the result is checked.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(Errno::last_os());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Arms the timer `ns` nanoseconds from now (at least 1 ns); `None` disarms it.
    pub fn set(&self, ns: Option<u64>) {
        match ns {
            Some(ns) => self.arm(ns),
            None => self.settime(0, 0),
        }
    }

    /// Due `ns` nanoseconds from now (0 counts as 1: due at once), in one system call: setting
    /// a timer discards an expiry not yet read (timerfd_settime(2) restarts its count).
    pub fn arm(&self, ns: u64) {
        self.settime(0, ns.max(1));
    }

    /// Due when `CLOCK_MONOTONIC` reads `deadline_ns` (`sys::os::monotonic_ns`); a deadline
    /// already past is due at once.
    pub fn arm_at(&self, deadline_ns: u64) {
        self.settime(libc::TFD_TIMER_ABSTIME, deadline_ns.max(1));
    }

    pub fn disarm(&self) {
        self.settime(0, 0);
    }

    /// timerfd_settime(2) with no interval; a zero `ns` disarms.
    fn settime(&self, flags: libc::c_int, ns: u64) {
        let v = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as i64,
                tv_nsec: (ns % 1_000_000_000) as i64,
            },
        };
        // SAFETY: sets our own timerfd from a valid itimerspec; no old value is asked for.
        unsafe { libc::timerfd_settime(self.0.as_raw_fd(), flags, &v, core::ptr::null_mut()) };
    }

    /// Reads an expiry (the fd is no longer readable until the next); whether there was one.
    pub fn drain(&self) -> bool {
        let mut buf = 0u64;
        // SAFETY: reads at most 8 bytes into a u64 from our own nonblocking timerfd.
        let r = unsafe { libc::read(self.0.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
        r == 8
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
