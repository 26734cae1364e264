//! A process-level test harness: one endpoint with its CQ, AV and counters, opened through the
//! provider's Rust interface, and a line protocol over stdin/stdout with a child process that
//! re-runs the same test binary in another role.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::abi::consts::*;
use fabric::core::{Errno, Info};
use fabric::sys::mem::IoVec;
use fabric::util::av::{Av, AvAttr};
use fabric::util::cntr::{Cntr, CntrAttr};
use fabric::util::cq::{Cq, CqAttr, CqEntry, CqErrEntry};
use fabric::util::ep::{Call, MsgOp, RmaOp};
use fabric::util::mr::{Mr, MrRequest};
use fabric::util::{Bind, Domain, Endpoint, Provider};

/// The domain of the first getinfo entry `pick` accepts, and that entry.
pub fn domain_of(
    prov: &dyn Provider,
    hints: &Info,
    pick: impl Fn(&Info) -> bool,
) -> (Arc<dyn Domain>, Info) {
    let info = prov
        .getinfo(fi_version(2, 6), None, None, 0, Some(hints))
        .expect("getinfo")
        .into_iter()
        .find(|i| pick(i))
        .expect("no matching getinfo entry");
    let fabric = prov.fabric(&info.fabric_attr).expect("fabric");
    (fabric.domain(&info).expect("domain"), info)
}

/// efa's loopback software-SRD domain with local shm off, keys as efa asks of applications
/// (provider keys, virtual addresses), and its info: for tests that give endpoints devices of
/// their own.
pub fn loopback_domain(caps: u64) -> (Arc<dyn Domain>, Info) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: runs once, before the test binary's tests read the environment (each opens
        // its domain first, and the Once blocks the others until it is done).
        unsafe { std::env::set_var("FI_EFA_ENABLE_SHM_TRANSFER", "0") };
    });
    let mut hints = Info {
        caps,
        ..Default::default()
    };
    hints.domain_attr.mr_mode = (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
    domain_of(&fabric::prov::efa::EFA, &hints, |i| {
        i.domain_attr.name.as_deref() == Some("srd_lo-rdm")
    })
}

/// A node's CQ (4096 tagged entries), AV, and its two completion counters.
fn queues(domain: &Arc<dyn Domain>) -> (Arc<Cq>, Arc<Av>, Arc<Cntr>, Arc<Cntr>) {
    let cq = Cq::new(&CqAttr {
        size: 4096,
        flags: 0,
        format: FI_CQ_FORMAT_TAGGED,
        wait_obj: FI_WAIT_UNSPEC,
        wait_cond: 0,
    })
    .unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let counter = || {
        Cntr::new(&CntrAttr {
            events: FI_CNTR_EVENTS_COMP,
            wait_obj: FI_WAIT_UNSPEC,
            flags: 0,
        })
        .unwrap()
    };
    (cq, av, counter(), counter())
}

/// A buffer that outlives every operation of a test.
pub fn buf(n: usize) -> (&'static mut [u8], IoVec) {
    let s: &'static mut [u8] = Box::leak(vec![0u8; n].into_boxed_slice());
    // SAFETY: the slice is leaked, so it stays valid for the rest of the process.
    let v = unsafe { IoVec::new(s.as_mut_ptr(), s.len()) };
    (s, v)
}

pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub struct Node {
    pub domain: Arc<dyn Domain>,
    pub ep: Arc<dyn Endpoint>,
    pub cq: Arc<Cq>,
    pub av: Arc<Av>,
    pub cntr: Arc<Cntr>,
    pub rcntr: Arc<Cntr>,
    pub info: Info,
}

impl Node {
    /// Opens an endpoint of `prov` for `hints`-like caps.
    pub fn open(prov: &dyn Provider, caps: u64) -> Node {
        Self::open_where(prov, caps, |_| true)
    }

    /// Opens an endpoint on the first getinfo entry that `pick` accepts.
    pub fn open_where(prov: &dyn Provider, caps: u64, pick: impl Fn(&Info) -> bool) -> Node {
        let hints = Info {
            caps,
            ..Default::default()
        };
        Self::open_hints(prov, &hints, pick)
    }

    /// Opens an endpoint on the first entry for `hints` that `pick` accepts.
    pub fn open_hints(prov: &dyn Provider, hints: &Info, pick: impl Fn(&Info) -> bool) -> Node {
        Self::open_configured(prov, hints, pick, |_| ())
    }

    /// An endpoint made outside `fi_endpoint` (on a device of the test's choosing), with a CQ
    /// and AV of `domain` bound, enabled.
    pub fn with_endpoint(domain: &Arc<dyn Domain>, info: &Info, ep: Arc<dyn Endpoint>) -> Node {
        let (cq, av, cntr, rcntr) = queues(domain);
        ep.bind(Bind::Cq(cq.clone()), FI_TRANSMIT | FI_RECV)
            .unwrap();
        ep.bind(Bind::Av(av.clone()), 0).unwrap();
        ep.enable().unwrap();
        Node {
            domain: domain.clone(),
            ep,
            cq,
            av,
            cntr,
            rcntr,
            info: info.clone(),
        }
    }

    /// Like `open_hints`, with `configure` run on the endpoint before `fi_enable` (options).
    pub fn open_configured(
        prov: &dyn Provider,
        hints: &Info,
        pick: impl Fn(&Info) -> bool,
        configure: impl FnOnce(&dyn Endpoint),
    ) -> Node {
        let (domain, info) = domain_of(prov, hints, pick);
        let ep = domain.endpoint(&info).expect("endpoint");
        let (cq, av, cntr, rcntr) = queues(&domain);
        ep.bind(Bind::Cq(cq.clone()), FI_TRANSMIT | FI_RECV)
            .unwrap();
        ep.bind(Bind::Av(av.clone()), 0).unwrap();
        // Read and write counters where there is RMA (efa DGRAM refuses them).
        let rma = if info.caps & FI_RMA != 0 || info.caps == 0 {
            FI_READ | FI_WRITE
        } else {
            0
        };
        ep.bind(Bind::Cntr(cntr.clone()), FI_SEND | FI_RECV | rma)
            .unwrap();
        // Remote-access counters exist only with FI_RMA_EVENT (fi_cntr(3)).
        if info.caps & FI_RMA_EVENT != 0 {
            ep.bind(Bind::Cntr(rcntr.clone()), FI_REMOTE_READ | FI_REMOTE_WRITE)
                .unwrap();
        }
        configure(&*ep);
        ep.enable().unwrap();
        Node {
            domain,
            ep,
            cq,
            av,
            cntr,
            rcntr,
            info,
        }
    }

    pub fn name_hex(&self) -> String {
        self.ep
            .getname()
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub fn insert_hex(&self, hex: &str) -> u64 {
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        self.av.insert(&bytes, None).unwrap()
    }

    pub fn reg(&self, v: IoVec, access: u64, key: u64) -> Arc<Mr> {
        self.domain
            .mr_reg(&MrRequest {
                iov: vec![v],
                access,
                requested_key: key,
                ..Default::default()
            })
            .unwrap()
    }

    /// `data` copied into send buffers registered here (FI_SEND): one piece, or two split at
    /// a third of it when `two` (a source that is no single registration). The iov, and the
    /// registrations to keep alive.
    pub fn registered_source(&self, data: &[u8], two: bool) -> (Vec<IoVec>, Vec<Arc<Mr>>) {
        let cut = if two { data.len() / 3 } else { data.len() };
        let mut iov = Vec::new();
        let mut mrs = Vec::new();
        for part in [&data[..cut], &data[cut..]] {
            if part.is_empty() {
                continue;
            }
            let (s, v) = buf(part.len());
            s.copy_from_slice(part);
            mrs.push(self.reg(v, FI_SEND, 0));
            iov.push(v);
        }
        (iov, mrs)
    }

    /// Posts until the provider accepts (retrying on EAGAIN with progress).
    pub fn retry(&self, mut f: impl FnMut() -> Result<(), Errno>) -> Result<(), Errno> {
        let t = Instant::now();
        loop {
            match f() {
                Err(Errno::AGAIN) if t.elapsed() < Duration::from_secs(20) => {
                    self.cq.progress();
                }
                r => return r,
            }
        }
    }

    pub fn send(
        &self,
        iov: &[IoVec],
        dest: u64,
        tag: Option<u64>,
        ctx: usize,
        flags: u64,
        call: Call,
    ) -> Result<(), Errno> {
        self.retry(|| {
            let op = MsgOp {
                iov,
                desc: &[],
                addr: dest,
                context: ctx,
                data: 0,
                tag: tag.unwrap_or(0),
                ignore: 0,
                flags,
                call,
            };
            self.ep.send(&op, tag.is_some())
        })
    }

    /// A plain receive of one buffer from any source, tagged (exactly `tag`) when `tag` is
    /// given.
    pub fn recv_any(&self, dst: IoVec, tag: Option<u64>, ctx: usize) {
        self.recv(
            &[dst],
            FI_ADDR_UNSPEC,
            tag.map(|t| (t, 0)),
            ctx,
            0,
            Call::Plain,
        )
        .unwrap()
    }

    pub fn recv(
        &self,
        iov: &[IoVec],
        src: u64,
        tag: Option<(u64, u64)>,
        ctx: usize,
        flags: u64,
        call: Call,
    ) -> Result<(), Errno> {
        let (t, i) = tag.unwrap_or((0, 0));
        self.retry(|| {
            let op = MsgOp {
                iov,
                desc: &[],
                addr: src,
                context: ctx,
                data: 0,
                tag: t,
                ignore: i,
                flags,
                call,
            };
            self.ep.recv(&op, tag.is_some())
        })
    }

    pub fn rma(
        &self,
        iov: &[IoVec],
        dest: u64,
        rma: &[fi_rma_iov],
        read: bool,
        data: Option<u64>,
        ctx: usize,
    ) -> Result<(), Errno> {
        self.retry(|| {
            let op = RmaOp {
                iov,
                desc: &[],
                addr: dest,
                rma_iov: rma,
                context: ctx,
                data: data.unwrap_or(0),
                flags: if data.is_some() { FI_REMOTE_CQ_DATA } else { 0 },
                call: Call::Plain,
            };
            if read {
                self.ep.read(&op)
            } else {
                self.ep.write(&op)
            }
        })
    }

    /// Waits for the next completion (Ok) or error completion (Err), failing after `secs`.
    pub fn wait(&self, secs: u64) -> Result<CqEntry, CqErrEntry> {
        self.wait_while(secs, || {})
    }

    /// `wait`, driving `other` meanwhile (manual progress: a peer in this process that is not
    /// polled sends nothing and acknowledges nothing).
    pub fn wait_driving(&self, other: &Node, secs: u64) -> Result<CqEntry, CqErrEntry> {
        self.wait_while(secs, || other.cq.progress())
    }

    fn wait_while(&self, secs: u64, mut meanwhile: impl FnMut()) -> Result<CqEntry, CqErrEntry> {
        let t = Instant::now();
        loop {
            let mut got = None;
            match self.cq.read(1, |e| got = Some(*e)) {
                Ok(_) => return Ok(got.unwrap()),
                Err(Errno::AVAIL) => return Err(self.cq.readerr().unwrap()),
                Err(_) => {}
            }
            meanwhile();
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "no completion within {secs} s"
            );
        }
    }

    /// Waits for `n` successful completions and returns them.
    pub fn wait_n(&self, n: usize) -> Vec<CqEntry> {
        (0..n)
            .map(|_| {
                self.wait(30)
                    .unwrap_or_else(|e| panic!("error completion {e:?}"))
            })
            .collect()
    }
}

pub use fabric::abi::types::fi_rma_iov;

/// fi_av_remove, then an insert that reuses the index (fi_av(3): removed addresses may be
/// reused): a send to the index goes to the new peer, a send to a removed index is refused,
/// and a message from the removed peer no longer reports its old index as its source. `a`,
/// `b` and `c` are three endpoints of this process, each with its own AV, none inserted yet.
pub fn removed_address_is_forgotten_and_its_index_reused(a: &Node, b: &Node, c: &Node) {
    let ab = a.insert_hex(&b.name_hex());
    let ba = b.insert_hex(&a.name_hex());
    let one = |from: &Node, to: &Node, dest: u64, seed: u8| {
        let (d, dv) = buf(100);
        let (s, sv) = buf(100);
        s.copy_from_slice(&pattern(100, seed));
        to.recv(&[dv], FI_ADDR_UNSPEC, None, 80, 0, Call::Plain)
            .unwrap();
        from.send(&[sv], dest, None, 81, 0, Call::Plain).unwrap();
        let r = to_ok(to.wait_driving(from, 30));
        assert!(d == &pattern(100, seed)[..]);
        assert_eq!(to_ok(from.wait_driving(to, 30)).op_context, 81);
        r
    };
    assert_eq!(one(b, a, ba, 1).src_addr, ab);
    one(a, b, ab, 2);
    a.av.remove(ab).unwrap();
    let (_s, sv) = buf(100);
    assert_eq!(
        a.send(&[sv], ab, None, 82, 0, Call::Plain),
        Err(Errno::INVAL),
        "a send to a removed address"
    );
    // b is no longer in a's AV: its messages have no source index.
    assert_eq!(one(b, a, ba, 3).src_addr, FI_ADDR_NOTAVAIL);
    let ac = a.insert_hex(&c.name_hex());
    assert_eq!(ac, ab, "the removed index is reused");
    one(a, c, ac, 4);
    assert_eq!(one(b, a, ba, 5).src_addr, FI_ADDR_NOTAVAIL);
    // Nothing reached b meanwhile.
    for _ in 0..100 {
        b.cq.progress();
    }
    let mut got = None;
    assert_eq!(
        b.cq.read(1, |e| got = Some(*e)),
        Err(Errno::AGAIN),
        "b got {got:?}"
    );
}

fn to_ok(r: Result<CqEntry, CqErrEntry>) -> CqEntry {
    r.unwrap_or_else(|e| panic!("error completion {e:?}"))
}

/// The parent's side of a multi-process test.
pub struct Peer {
    child: Child,
    to: ChildStdin,
    from: Option<BufReader<ChildStdout>>,
}

impl Peer {
    /// Re-runs this test binary's test `test` as a child with `FABRIC_TEST_ROLE=role`.
    pub fn spawn(test: &str, role: &str, env: &[(&str, &str)]) -> Peer {
        Self::spawn_under(&[], test, role, env)
    }

    /// Like `spawn`, the child started by the command `wrapper` (e.g. `unshare --pid --fork`).
    pub fn spawn_under(wrapper: &[&str], test: &str, role: &str, env: &[(&str, &str)]) -> Peer {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match wrapper {
            [] => Command::new(&exe),
            [w, rest @ ..] => {
                let mut c = Command::new(w);
                c.args(rest).arg(&exe);
                c
            }
        };
        cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("FABRIC_TEST_ROLE", role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let to = child.stdin.take().unwrap();
        let from = Some(BufReader::new(child.stdout.take().unwrap()));
        Peer { child, to, from }
    }

    pub fn send_line(&mut self, s: &str) {
        writeln!(self.to, "{s}").unwrap();
        self.to.flush().unwrap();
    }

    /// The next line the child printed with an `@` marker (test output has other lines).
    pub fn line(&mut self) -> String {
        let from = self.from.as_mut().expect("reader moved to a relay thread");
        read_marked(from).expect("child exited early")
    }

    pub fn wait(mut self) -> bool {
        self.child.wait().unwrap().success()
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_marked(from: &mut BufReader<ChildStdout>) -> Option<String> {
    loop {
        let mut s = String::new();
        if from.read_line(&mut s).ok()? == 0 {
            return None;
        }
        // The test harness may have printed "test name ... " on the same line first.
        if let Some(i) = s.find('@') {
            return Some(s[i + 1..].trim_end().to_string());
        }
    }
}

/// Runs the children until each has said `done`: `msg <text>` from one is forwarded to the
/// others, `sync` is a barrier answered with `go` once every child reached it.
pub fn relay(mut peers: Vec<Peer>) -> bool {
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<String>)>();
    for (i, p) in peers.iter_mut().enumerate() {
        let mut from = p.from.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            loop {
                let l = read_marked(&mut from);
                let end = l.is_none();
                let _ = tx.send((i, l));
                if end {
                    break;
                }
            }
        });
    }
    let n = peers.len();
    let mut synced = vec![false; n];
    let mut done = vec![false; n];
    while done.iter().any(|d| !d) {
        let (i, l) = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("children stalled");
        let Some(l) = l else {
            if !done[i] {
                eprintln!("child {i} exited before done");
                for p in peers {
                    p.kill();
                }
                return false;
            }
            continue;
        };
        if let Some(text) = l.strip_prefix("msg ") {
            for (j, p) in peers.iter_mut().enumerate() {
                if j != i {
                    p.send_line(text);
                }
            }
        } else if l == "sync" {
            synced[i] = true;
            if synced.iter().all(|s| *s) {
                synced.iter_mut().for_each(|s| *s = false);
                for p in peers.iter_mut() {
                    p.send_line("go");
                }
            }
        } else if l == "done" {
            done[i] = true;
        }
    }
    // Every child stays alive until all are done: a peer's memory may still be needed.
    for p in peers.iter_mut() {
        p.send_line("exit");
    }
    peers.into_iter().all(Peer::wait)
}

/// Lines from the parent, read by a background thread so that a child can keep making progress
/// (as a target of RMA must) while it waits.
fn stdin_lines() -> &'static std::sync::Mutex<std::sync::mpsc::Receiver<String>> {
    static LINES: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Receiver<String>>> =
        std::sync::OnceLock::new();
    LINES.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut s = String::new();
                if std::io::stdin().read_line(&mut s).unwrap_or(0) == 0 {
                    break;
                }
                if tx.send(s.trim_end().to_string()).is_err() {
                    break;
                }
            }
        });
        std::sync::Mutex::new(rx)
    })
}

/// The child's side: the next line from the parent.
pub fn child_line() -> String {
    stdin_lines()
        .lock()
        .unwrap()
        .recv()
        .expect("parent went away")
}

/// Like `child_line`, driving `node`'s progress while waiting.
pub fn child_line_progressing(node: &Node) -> String {
    let rx = stdin_lines().lock().unwrap();
    loop {
        match rx.try_recv() {
            Ok(l) => return l,
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                node.cq.progress();
                std::thread::yield_now();
            }
            Err(e) => panic!("parent went away: {e}"),
        }
    }
}

pub fn child_say(s: &str) {
    println!("@{s}");
    std::io::stdout().flush().unwrap();
}

/// Says this child is done and waits until every child is (so that its memory stays valid for
/// peers still working).
pub fn child_done() {
    child_say("done");
    while child_line() != "exit" {}
}

/// Sends `text` to the other children.
pub fn child_send(text: &str) {
    child_say(&format!("msg {text}"));
}

pub fn role() -> Option<String> {
    std::env::var("FABRIC_TEST_ROLE").ok()
}

/// A plain RMA operation on `iov` against the peer's `rma` at AV index `addr`.
pub fn rma_op<'a>(iov: &'a [IoVec], addr: u64, rma: &'a [fi_rma_iov], ctx: usize) -> RmaOp<'a> {
    RmaOp {
        iov,
        desc: &[],
        addr,
        rma_iov: rma,
        context: ctx,
        data: 0,
        flags: 0,
        call: Call::Plain,
    }
}
