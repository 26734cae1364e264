//! `fi_tostr` text (fi_fabric(3) "fi_tostr", abi-reference §4): every `FI_TYPE_*` in the shape
//! libfabric 2.6 prints it — YAML-ish blocks indented by four spaces, flag sets as `[ A, B ]`
//! (empty: `[  ]`), enumerations by name or `Unknown`, pointers as glibc's `%p` (`(nil)`),
//! addresses as `fi_<format>://…`.
//!
//! The text is built in a caller-sized byte buffer ([`Buf`]) with the C library's truncation:
//! like the C implementation, each piece is appended with `snprintf` limits, so a short buffer
//! holds the same prefix upstream would put there.
//!
//! One deliberate difference: `FI_THREAD_FID` and `FI_THREAD_ENDPOINT` print by name (2.6 says
//! `Unknown`), because `fi_getinfo` answers callers below API 2.0 with them (see `getinfo`).
//!
//! The flag and value names are in `names.rs`, the text of addresses in `addr.rs`.

mod addr;
mod names;

pub use addr::{ntop6, straddr, straddr_len};
use names::*;

use super::info::{Info, Nic};
use super::log::{LEVEL_NAMES, SUBSYS_NAMES};
use crate::abi::consts::*;
use crate::abi::types::{
    fi_cntr_attr, fi_cq_attr, fi_cq_err_entry, fi_domain_attr, fi_ep_attr, fi_fabric_attr,
    fi_mr_attr, fi_rx_attr, fi_tx_attr, fid_domain, fid_fabric,
};

/// The indentation step.
const TAB: &str = "    ";

/// The size of `fi_tostr`'s buffer.
pub const TOSTR_BUF_LEN: usize = 8192;

/// A C string under construction in a fixed buffer: the text ends at the first NUL.
pub struct Buf<'a> {
    data: &'a mut [u8],
}

impl<'a> Buf<'a> {
    /// Wraps `data` as it is (its current text, if any, is kept).
    pub fn new(data: &'a mut [u8]) -> Buf<'a> {
        Buf { data }
    }

    /// The buffer size.
    pub fn cap(&self) -> usize {
        self.data.len()
    }

    /// Length of the text (`strnlen`).
    pub fn len(&self) -> usize {
        self.data
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.data.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the text.
    pub fn clear(&mut self) {
        if let Some(b) = self.data.first_mut() {
            *b = 0;
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.data[..self.len()]
    }

    /// The start of the buffer (for a C `tostr` operation that appends in place).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.data.as_mut_ptr()
    }

    /// `snprintf(text_end, room, "%s", s)`: at most `room - 1` bytes and a NUL.
    fn put(&mut self, s: &[u8], room: usize) {
        if room == 0 {
            return;
        }
        let at = self.len();
        let n = s.len().min(room - 1);
        self.data[at..at + n].copy_from_slice(&s[..n]);
        self.data[at + n] = 0;
    }

    /// Appends like the library's formatted append: the text never grows past `cap - 2`.
    pub fn cat_bytes(&mut self, s: &[u8]) {
        let room = self.cap().saturating_sub(1).saturating_sub(self.len());
        self.put(s, room);
    }

    pub fn cat(&mut self, s: &str) {
        self.cat_bytes(s.as_bytes());
    }

    /// Appends an address text, which may use one byte more than [`Buf::cat`].
    pub fn cat_addr(&mut self, s: &[u8]) {
        let room = self.cap().saturating_sub(self.len());
        self.put(s, room);
    }

    /// Drops a trailing `", "` of the whole text.
    pub fn remove_comma(&mut self) {
        let n = self.len();
        if n >= 2 && &self.data[n - 2..n] == b", " {
            self.data[n - 2] = 0;
        }
    }

    /// The first `cap` bytes as a buffer of their own (what a C `tostr` operation receives).
    pub fn prefix(&mut self, cap: usize) -> Buf<'_> {
        let cap = cap.min(self.data.len());
        Buf {
            data: &mut self.data[..cap],
        }
    }
}

/// Formats into a fresh `fi_tostr`-sized buffer.
pub fn to_string(f: impl FnOnce(&mut Buf)) -> String {
    let mut data = vec![0u8; TOSTR_BUF_LEN];
    let mut b = Buf::new(&mut data);
    f(&mut b);
    String::from_utf8_lossy(b.as_bytes()).into_owned()
}

/// glibc's `%p`.
pub fn ptr_text(p: usize) -> String {
    if p == 0 {
        "(nil)".to_string()
    } else {
        format!("{p:#x}")
    }
}

// ---- flag sets ----

fn flags(buf: &mut Buf, v: u64, table: &[(u64, &str)]) {
    for (bit, name) in table {
        if v & bit != 0 {
            buf.cat(name);
            buf.cat(", ");
        }
    }
    buf.remove_comma();
}

/// `[ A, B ]` (the flags of `table` set in `v`) and a newline.
fn flag_line(buf: &mut Buf, prefix: &str, key: &str, v: u64, table: &[(u64, &str)]) {
    buf.cat(&format!("{prefix}{key}: [ "));
    flags(buf, v, table);
    buf.cat(" ]\n");
}

// ---- objects reached through C (handles, NICs) ----

/// What the C side knows about an object named by a pointer: whether it has a `tostr`
/// operation, which then appends its own text (fi_fabric(3): `fi_tostr` of `FI_TYPE_FID`).
pub trait FidText {
    /// Appends `fid`'s own text to `buf` if it has a `tostr` operation (returns false if not).
    fn tostr(&mut self, buf: &mut Buf, fid: usize) -> bool;
}

/// For objects only known by address.
pub struct NoFidText;

impl FidText for NoFidText {
    fn tostr(&mut self, _buf: &mut Buf, _fid: usize) -> bool {
        false
    }
}

fn fid_line(buf: &mut Buf, label: &str, fid: usize, fids: &mut dyn FidText) {
    if fid == 0 || !fids.tostr(buf, fid) {
        buf.cat(&format!("{label}{}\n", ptr_text(fid)));
    }
}

// ---- views of the C structures that hold strings or pointers ----

/// An address as `fi_info` holds it: where it is, and enough of its bytes.
#[derive(Clone, Copy, Debug)]
pub struct AddrView<'a> {
    pub ptr: usize,
    pub bytes: &'a [u8],
}

#[derive(Clone, Copy, Debug)]
pub struct DomainView<'a> {
    pub attr: &'a fi_domain_attr,
    pub name: Option<&'a [u8]>,
}

#[derive(Clone, Copy, Debug)]
pub struct FabricView<'a> {
    pub attr: &'a fi_fabric_attr,
    pub name: Option<&'a [u8]>,
    pub prov_name: Option<&'a [u8]>,
}

/// The NIC of an `fi_info`.
#[derive(Clone, Copy, Debug)]
pub enum NicView<'a> {
    Null,
    /// A C `fid_nic`, printed by its own `tostr` operation.
    Fid(usize),
    /// A NIC described in Rust.
    Decoded(&'a Nic),
}

/// An `fi_info` to print; `None` attributes are NULL pointers.
#[derive(Clone, Copy, Debug)]
pub struct InfoView<'a> {
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: Option<AddrView<'a>>,
    pub dest_addr: Option<AddrView<'a>>,
    pub handle: usize,
    pub tx_attr: Option<&'a fi_tx_attr>,
    pub rx_attr: Option<&'a fi_rx_attr>,
    pub ep_attr: Option<&'a fi_ep_attr>,
    pub domain_attr: Option<DomainView<'a>>,
    pub fabric_attr: Option<FabricView<'a>>,
    pub nic: NicView<'a>,
}

#[derive(Clone, Copy, Debug)]
pub struct AvAttrView<'a> {
    pub type_: u32,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: Option<&'a [u8]>,
    pub flags: u64,
}

/// `%s` of a C string (NULL prints `(null)`).
fn c_str(s: Option<&[u8]>) -> &[u8] {
    s.unwrap_or(b"(null)")
}

// ---- the structures ----

pub fn tx_attr(buf: &mut Buf, attr: Option<&fi_tx_attr>, prefix: &str) {
    let Some(a) = attr else {
        buf.cat(&format!("{prefix}fi_tx_attr: (null)\n"));
        return;
    };
    let p = format!("{prefix}{TAB}");
    buf.cat(&format!("{prefix}fi_tx_attr:\n"));
    flag_line(buf, &p, "caps", a.caps, CAPS);
    flag_line(buf, &p, "mode", a.mode, MODE);
    flag_line(buf, &p, "op_flags", a.op_flags, OP_FLAGS);
    flag_line(buf, &p, "msg_order", a.msg_order, MSG_ORDER);
    buf.cat(&format!("{p}inject_size: {}\n", a.inject_size));
    buf.cat(&format!("{p}size: {}\n", a.size));
    buf.cat(&format!("{p}iov_limit: {}\n", a.iov_limit));
    buf.cat(&format!("{p}rma_iov_limit: {}\n", a.rma_iov_limit));
    buf.cat(&format!("{p}tclass: {:#x}\n", a.tclass));
}

pub fn rx_attr(buf: &mut Buf, attr: Option<&fi_rx_attr>, prefix: &str) {
    let Some(a) = attr else {
        buf.cat(&format!("{prefix}fi_rx_attr: (null)\n"));
        return;
    };
    let p = format!("{prefix}{TAB}");
    buf.cat(&format!("{prefix}fi_rx_attr:\n"));
    flag_line(buf, &p, "caps", a.caps, CAPS);
    flag_line(buf, &p, "mode", a.mode, MODE);
    flag_line(buf, &p, "op_flags", a.op_flags, OP_FLAGS);
    flag_line(buf, &p, "msg_order", a.msg_order, MSG_ORDER);
    buf.cat(&format!("{p}size: {}\n", a.size));
    buf.cat(&format!("{p}iov_limit: {}\n", a.iov_limit));
}

fn ctx_cnt(n: usize) -> String {
    if n == FI_SHARED_CONTEXT {
        "FI_SHARED_CONTEXT".to_string()
    } else {
        n.to_string()
    }
}

pub fn ep_attr(buf: &mut Buf, attr: Option<&fi_ep_attr>, prefix: &str) {
    let Some(a) = attr else {
        buf.cat(&format!("{prefix}fi_ep_attr: (null)\n"));
        return;
    };
    let p = format!("{prefix}{TAB}");
    buf.cat(&format!("{prefix}fi_ep_attr:\n"));
    buf.cat(&format!(
        "{p}type: {}\n",
        name_of(i64::from(a.type_ as i32), EP_TYPES)
    ));
    buf.cat(&format!(
        "{p}protocol: {}\n",
        name_of(i64::from(a.protocol), PROTOCOLS)
    ));
    buf.cat(&format!(
        "{p}protocol_version: {}\n",
        a.protocol_version as i32
    ));
    buf.cat(&format!("{p}max_msg_size: {}\n", a.max_msg_size));
    buf.cat(&format!("{p}msg_prefix_size: {}\n", a.msg_prefix_size));
    buf.cat(&format!(
        "{p}max_order_raw_size: {}\n",
        a.max_order_raw_size
    ));
    buf.cat(&format!(
        "{p}max_order_war_size: {}\n",
        a.max_order_war_size
    ));
    buf.cat(&format!(
        "{p}max_order_waw_size: {}\n",
        a.max_order_waw_size
    ));
    buf.cat(&format!("{p}mem_tag_format: 0x{:016x}\n", a.mem_tag_format));
    buf.cat(&format!("{p}tx_ctx_cnt: {}\n", ctx_cnt(a.tx_ctx_cnt)));
    buf.cat(&format!("{p}rx_ctx_cnt: {}\n", ctx_cnt(a.rx_ctx_cnt)));
    buf.cat(&format!("{p}auth_key_size: {}\n", a.auth_key_size));
}

pub fn domain_attr(buf: &mut Buf, attr: Option<DomainView<'_>>, prefix: &str) {
    let Some(DomainView { attr: a, name }) = attr else {
        buf.cat(&format!("{prefix}fi_domain_attr: (null)\n"));
        return;
    };
    let p = format!("{prefix}{TAB}");
    buf.cat(&format!("{prefix}fi_domain_attr:\n"));
    buf.cat(&format!("{p}domain: {}\n", ptr_text(a.domain as usize)));
    buf.cat(&format!("{p}name: "));
    buf.cat_bytes(c_str(name));
    buf.cat("\n");
    buf.cat(&format!(
        "{p}threading: {}\n",
        name_of(i64::from(a.threading as i32), THREADING)
    ));
    buf.cat(&format!(
        "{p}progress: {}\n",
        name_of(i64::from(a.progress as i32), PROGRESS)
    ));
    buf.cat(&format!(
        "{p}resource_mgmt: {}\n",
        name_of(i64::from(a.resource_mgmt as i32), RESOURCE_MGMT)
    ));
    buf.cat(&format!(
        "{p}av_type: {}\n",
        name_of(i64::from(a.av_type as i32), AV_TYPES)
    ));
    flag_line(buf, &p, "mr_mode", a.mr_mode as u32 as u64, MR_MODE);
    for (k, v) in [
        ("mr_key_size", a.mr_key_size),
        ("cq_data_size", a.cq_data_size),
        ("cq_cnt", a.cq_cnt),
        ("ep_cnt", a.ep_cnt),
        ("tx_ctx_cnt", a.tx_ctx_cnt),
        ("rx_ctx_cnt", a.rx_ctx_cnt),
        ("max_ep_tx_ctx", a.max_ep_tx_ctx),
        ("max_ep_rx_ctx", a.max_ep_rx_ctx),
        ("max_ep_stx_ctx", a.max_ep_stx_ctx),
        ("max_ep_srx_ctx", a.max_ep_srx_ctx),
        ("cntr_cnt", a.cntr_cnt),
        ("mr_iov_limit", a.mr_iov_limit),
    ] {
        buf.cat(&format!("{p}{k}: {v}\n"));
    }
    flag_line(buf, &p, "caps", a.caps, CAPS);
    flag_line(buf, &p, "mode", a.mode, MODE);
    buf.cat(&format!("{p}auth_key_size: {}\n", a.auth_key_size));
    buf.cat(&format!("{p}max_err_data: {}\n", a.max_err_data));
    buf.cat(&format!("{p}mr_cnt: {}\n", a.mr_cnt));
    buf.cat(&format!("{p}tclass: {:#x}\n", a.tclass));
    buf.cat(&format!("{p}max_ep_auth_key: {}\n", a.max_ep_auth_key));
    buf.cat(&format!("{p}max_group_id: {}\n", a.max_group_id));
    buf.cat(&format!("{p}max_cntr_value: {}\n", a.max_cntr_value));
    buf.cat(&format!(
        "{p}max_err_cntr_value: {}\n",
        a.max_err_cntr_value
    ));
}

/// `major.minor` of a version (each printed as a C `int`).
fn version_text(v: u32) -> String {
    format!("{}.{}", fi_major(v) as i32, fi_minor(v) as i32)
}

pub fn fabric_attr(buf: &mut Buf, attr: Option<FabricView<'_>>, prefix: &str) {
    let Some(FabricView {
        attr: a,
        name,
        prov_name,
    }) = attr
    else {
        buf.cat(&format!("{prefix}fi_fabric_attr: (null)\n"));
        return;
    };
    let p = format!("{prefix}{TAB}");
    buf.cat(&format!("{prefix}fi_fabric_attr:\n"));
    buf.cat(&format!("{p}name: "));
    buf.cat_bytes(c_str(name));
    buf.cat("\n");
    buf.cat(&format!("{p}prov_name: "));
    buf.cat_bytes(c_str(prov_name));
    buf.cat("\n");
    buf.cat(&format!(
        "{p}prov_version: {}\n",
        version_text(a.prov_version)
    ));
    buf.cat(&format!(
        "{p}api_version: {}\n",
        version_text(a.api_version)
    ));
}

fn addr(buf: &mut Buf, format: u32, a: Option<AddrView<'_>>) {
    match a {
        None => buf.cat("(null)"),
        Some(a) => {
            if let Some(t) = straddr(format, a.bytes, a.ptr) {
                buf.cat_addr(&t);
            }
        }
    }
}

/// The `nic:` block of a NIC (what the NIC's `tostr` operation appends).
pub fn nic(buf: &mut Buf, n: &Nic) {
    let (p2, p3, p4) = (TAB.repeat(2), TAB.repeat(3), TAB.repeat(4));
    buf.cat(&format!("{TAB}nic:\n"));
    match &n.device {
        None => buf.cat(&format!("{p2}fi_device_attr: (null)\n")),
        Some(d) => {
            buf.cat(&format!("{p2}fi_device_attr:\n"));
            for (k, v) in [
                ("name", &d.name),
                ("device_id", &d.device_id),
                ("device_version", &d.device_version),
                ("vendor_id", &d.vendor_id),
                ("driver", &d.driver),
                ("firmware", &d.firmware),
            ] {
                buf.cat(&format!("{p3}{k}: "));
                buf.cat_bytes(c_str(v.as_deref().map(str::as_bytes)));
                buf.cat("\n");
            }
        }
    }
    match &n.bus {
        None => buf.cat(&format!("{p2}fi_bus_attr: (null)\n")),
        Some(b) => {
            buf.cat(&format!("{p2}fi_bus_attr:\n"));
            buf.cat(&format!(
                "{p3}bus_type: {}\n",
                name_of(i64::from(b.bus_type as i32), BUS_TYPES)
            ));
            if b.bus_type == FI_BUS_PCI {
                buf.cat(&format!("{p3}fi_pci_attr:\n"));
                buf.cat(&format!("{p4}domain_id: {}\n", b.pci_domain_id));
                buf.cat(&format!("{p4}bus_id: {}\n", b.pci_bus_id));
                buf.cat(&format!("{p4}device_id: {}\n", b.pci_device_id));
                buf.cat(&format!("{p4}function_id: {}\n", b.pci_function_id));
            }
        }
    }
    match &n.link {
        None => buf.cat(&format!("{p2}fi_link_attr: (null)\n")),
        Some(l) => {
            buf.cat(&format!("{p2}fi_link_attr:\n"));
            buf.cat(&format!("{p3}address: "));
            buf.cat_bytes(c_str(l.address.as_deref().map(str::as_bytes)));
            buf.cat("\n");
            buf.cat(&format!("{p3}mtu: {}\n", l.mtu));
            buf.cat(&format!("{p3}speed: {}\n", l.speed));
            buf.cat(&format!(
                "{p3}state: {}\n",
                name_of(i64::from(l.state as i32), LINK_STATES)
            ));
            buf.cat(&format!("{p3}network_type: "));
            buf.cat_bytes(c_str(l.network_type.as_deref().map(str::as_bytes)));
            buf.cat("\n");
        }
    }
}

/// `FI_TYPE_INFO`.
pub fn info(buf: &mut Buf, i: &InfoView<'_>, fids: &mut dyn FidText) {
    buf.cat("fi_info:\n");
    flag_line(buf, TAB, "caps", i.caps, CAPS);
    flag_line(buf, TAB, "mode", i.mode, MODE);
    buf.cat(&format!(
        "{TAB}addr_format: {}\n",
        name_of(i64::from(i.addr_format), ADDR_FORMATS)
    ));
    buf.cat(&format!("{TAB}src_addrlen: {}\n", i.src_addrlen));
    buf.cat(&format!("{TAB}dest_addrlen: {}\n", i.dest_addrlen));
    buf.cat(&format!("{TAB}src_addr: "));
    addr(buf, i.addr_format, i.src_addr);
    buf.cat("\n");
    buf.cat(&format!("{TAB}dest_addr: "));
    addr(buf, i.addr_format, i.dest_addr);
    buf.cat("\n");
    fid_line(buf, &format!("{TAB}handle: "), i.handle, fids);
    tx_attr(buf, i.tx_attr, TAB);
    rx_attr(buf, i.rx_attr, TAB);
    ep_attr(buf, i.ep_attr, TAB);
    domain_attr(buf, i.domain_attr, TAB);
    fabric_attr(buf, i.fabric_attr, TAB);
    match i.nic {
        NicView::Null => buf.cat(&format!("{TAB}nic: (nil)\n")),
        NicView::Fid(f) => fid_line(buf, &format!("{TAB}nic: "), f, fids),
        NicView::Decoded(n) => {
            // A NIC's tostr receives the room left, counted from the start of the buffer.
            let room = buf.cap() - buf.len();
            nic(&mut buf.prefix(room), n);
        }
    }
}

pub fn av_attr(buf: &mut Buf, a: &AvAttrView<'_>) {
    buf.cat("fi_av_attr:\n");
    buf.cat(&format!(
        "{TAB}type: {}\n",
        name_of(i64::from(a.type_ as i32), AV_TYPES)
    ));
    buf.cat(&format!("{TAB}count: {}\n", a.count));
    buf.cat(&format!("{TAB}ep_per_node: {}\n", a.ep_per_node));
    buf.cat(&format!("{TAB}name: "));
    buf.cat_bytes(c_str(a.name));
    buf.cat("\n");
    flag_line(buf, TAB, "flags", a.flags, AV_FLAGS);
}

pub fn cq_attr(buf: &mut Buf, a: &fi_cq_attr) {
    buf.cat("fi_cq_attr:\n");
    buf.cat(&format!("{TAB}size: {}\n", a.size));
    flag_line(buf, TAB, "flags", a.flags, CQ_FLAGS);
    buf.cat(&format!(
        "{TAB}format: {}\n",
        name_of(i64::from(a.format as i32), CQ_FORMATS)
    ));
    buf.cat(&format!(
        "{TAB}wait_obj: {}\n",
        name_of(i64::from(a.wait_obj as i32), WAIT_OBJS)
    ));
    buf.cat(&format!("{TAB}signaling_vector: {}\n", a.signaling_vector));
    buf.cat(&format!(
        "{TAB}wait_cond: {}\n",
        name_of(i64::from(a.wait_cond as i32), CQ_WAIT_CONDS)
    ));
}

pub fn mr_attr(buf: &mut Buf, a: &fi_mr_attr) {
    buf.cat("fi_mr_attr:\n");
    buf.cat(&format!("{TAB}mr_iov: {}\n", ptr_text(a.mr_iov as usize)));
    buf.cat(&format!("{TAB}iov_count: {}\n", a.iov_count));
    flag_line(buf, TAB, "access", a.access, MR_ACCESS);
    buf.cat(&format!("{TAB}offset: {:#x}\n", a.offset));
    buf.cat(&format!("{TAB}requested_key: {:#x}\n", a.requested_key));
    buf.cat(&format!("{TAB}context: {}\n", ptr_text(a.context as usize)));
    buf.cat(&format!("{TAB}auth_key_size: {}\n", a.auth_key_size));
    buf.cat(&format!(
        "{TAB}iface: {}\n",
        name_of(i64::from(a.iface as i32), HMEM_IFACES)
    ));
}

pub fn cntr_attr(buf: &mut Buf, a: &fi_cntr_attr) {
    buf.cat("fi_cntr_attr:\n");
    buf.cat(&format!(
        "{TAB}events: {}\n",
        name_of(i64::from(a.events as i32), CNTR_EVENTS)
    ));
    buf.cat(&format!(
        "{TAB}wait_obj: {}\n",
        name_of(i64::from(a.wait_obj as i32), WAIT_OBJS)
    ));
    buf.cat(&format!("{TAB}flags: {:#x}\n", a.flags));
}

pub fn cq_err_entry(buf: &mut Buf, e: &fi_cq_err_entry) {
    buf.cat("fi_cq_err_entry:\n");
    buf.cat(&format!(
        "{TAB}op_context: {}\n",
        ptr_text(e.op_context as usize)
    ));
    buf.cat(&format!("{TAB}flags: {:#x}\n", e.flags));
    buf.cat(&format!("{TAB}len: {}\n", e.len));
    buf.cat(&format!("{TAB}buf: {}\n", ptr_text(e.buf as usize)));
    buf.cat(&format!("{TAB}data: {}\n", e.data));
    buf.cat(&format!("{TAB}tag: {:#x}\n", e.tag));
    buf.cat(&format!("{TAB}olen: {}\n", e.olen));
    buf.cat(&format!("{TAB}err: {}\n", e.err));
    // 2.6 prints the `err` field under this key too; programs see that text.
    buf.cat(&format!("{TAB}prov_errno: {}\n", e.err));
    buf.cat(&format!(
        "{TAB}err_data: {}\n",
        ptr_text(e.err_data as usize)
    ));
    buf.cat(&format!("{TAB}err_data_size: {}\n", e.err_data_size));
}

// ---- fi_tostr dispatch ----

/// What the data pointer of each `FI_TYPE_*` points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Info,
    /// An `int` (a C enumeration).
    Int,
    U32,
    U64,
    TxAttr,
    RxAttr,
    EpAttr,
    DomainAttr,
    FabricAttr,
    /// The `struct fid` itself.
    Fid,
    AvAttr,
    CqAttr,
    MrAttr,
    CntrAttr,
    CqErrEntry,
    /// The data is not read (`FI_TYPE_VERSION`, unknown types).
    Nothing,
}

pub fn kind(datatype: u32) -> Kind {
    match datatype {
        FI_TYPE_INFO => Kind::Info,
        FI_TYPE_CAPS
        | FI_TYPE_OP_FLAGS
        | FI_TYPE_MSG_ORDER
        | FI_TYPE_MODE
        | FI_TYPE_CQ_EVENT_FLAGS => Kind::U64,
        FI_TYPE_ADDR_FORMAT | FI_TYPE_PROTOCOL => Kind::U32,
        FI_TYPE_EP_TYPE
        | FI_TYPE_THREADING
        | FI_TYPE_PROGRESS
        | FI_TYPE_AV_TYPE
        | FI_TYPE_ATOMIC_TYPE
        | FI_TYPE_ATOMIC_OP
        | FI_TYPE_EQ_EVENT
        | FI_TYPE_MR_MODE
        | FI_TYPE_OP_TYPE
        | FI_TYPE_COLLECTIVE_OP
        | FI_TYPE_HMEM_IFACE
        | FI_TYPE_CQ_FORMAT
        | FI_TYPE_LOG_LEVEL
        | FI_TYPE_LOG_SUBSYS
        | FI_TYPE_CQ_WAIT_COND
        | FI_TYPE_WAIT_OBJ => Kind::Int,
        FI_TYPE_TX_ATTR => Kind::TxAttr,
        FI_TYPE_RX_ATTR => Kind::RxAttr,
        FI_TYPE_EP_ATTR => Kind::EpAttr,
        FI_TYPE_DOMAIN_ATTR => Kind::DomainAttr,
        FI_TYPE_FABRIC_ATTR => Kind::FabricAttr,
        FI_TYPE_FID => Kind::Fid,
        FI_TYPE_AV_ATTR => Kind::AvAttr,
        FI_TYPE_CQ_ATTR => Kind::CqAttr,
        FI_TYPE_MR_ATTR => Kind::MrAttr,
        FI_TYPE_CNTR_ATTR => Kind::CntrAttr,
        FI_TYPE_CQ_ERR_ENTRY => Kind::CqErrEntry,
        _ => Kind::Nothing,
    }
}

/// The decoded data of one `fi_tostr` call (the variant [`kind`] names).
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Info(&'a InfoView<'a>),
    Int(i32),
    U32(u32),
    U64(u64),
    TxAttr(&'a fi_tx_attr),
    RxAttr(&'a fi_rx_attr),
    EpAttr(&'a fi_ep_attr),
    DomainAttr(DomainView<'a>),
    FabricAttr(FabricView<'a>),
    Fid(usize),
    AvAttr(&'a AvAttrView<'a>),
    CqAttr(&'a fi_cq_attr),
    MrAttr(&'a fi_mr_attr),
    CntrAttr(&'a fi_cntr_attr),
    CqErrEntry(&'a fi_cq_err_entry),
    Nothing,
}

/// `fi_tostr_r`: clears `buf` and writes the text of `v` as `datatype`.
pub fn tostr(buf: &mut Buf, datatype: u32, v: Value<'_>, fids: &mut dyn FidText) {
    buf.clear();
    let int = |v: Value<'_>| match v {
        Value::Int(i) => i64::from(i),
        _ => -1,
    };
    let word = |v: Value<'_>| match v {
        Value::U64(x) => x,
        Value::U32(x) => u64::from(x),
        _ => 0,
    };
    match (datatype, v) {
        (FI_TYPE_INFO, Value::Info(i)) => info(buf, i, fids),
        (FI_TYPE_EP_TYPE, _) => buf.cat(name_of(int(v), EP_TYPES)),
        (FI_TYPE_CAPS, _) => flags(buf, word(v), CAPS),
        (FI_TYPE_OP_FLAGS, _) => flags(buf, word(v), OP_FLAGS),
        (FI_TYPE_ADDR_FORMAT, _) => buf.cat(name_of(word(v) as i64, ADDR_FORMATS)),
        (FI_TYPE_TX_ATTR, Value::TxAttr(a)) => tx_attr(buf, Some(a), ""),
        (FI_TYPE_RX_ATTR, Value::RxAttr(a)) => rx_attr(buf, Some(a), ""),
        (FI_TYPE_EP_ATTR, Value::EpAttr(a)) => ep_attr(buf, Some(a), ""),
        (FI_TYPE_DOMAIN_ATTR, Value::DomainAttr(a)) => domain_attr(buf, Some(a), ""),
        (FI_TYPE_FABRIC_ATTR, Value::FabricAttr(a)) => fabric_attr(buf, Some(a), ""),
        (FI_TYPE_THREADING, _) => buf.cat(name_of(int(v), THREADING)),
        (FI_TYPE_PROGRESS, _) => buf.cat(name_of(int(v), PROGRESS)),
        (FI_TYPE_PROTOCOL, _) => buf.cat(name_of(word(v) as i64, PROTOCOLS)),
        (FI_TYPE_MSG_ORDER, _) => flags(buf, word(v), MSG_ORDER),
        (FI_TYPE_MODE, _) => flags(buf, word(v), MODE),
        (FI_TYPE_AV_TYPE, _) => buf.cat(name_of(int(v), AV_TYPES)),
        (FI_TYPE_ATOMIC_TYPE, _) => buf.cat(name_of(int(v), DATATYPES)),
        (FI_TYPE_ATOMIC_OP, _) => buf.cat(name_of(int(v), ATOMIC_OPS)),
        (FI_TYPE_VERSION, _) => buf.cat(&format!(
            "{FI_MAJOR_VERSION}.{FI_MINOR_VERSION}.{FI_REVISION_VERSION}"
        )),
        (FI_TYPE_EQ_EVENT, _) => buf.cat(name_of(int(v), EQ_EVENTS)),
        (FI_TYPE_CQ_EVENT_FLAGS, _) => flags(buf, word(v), CQ_EVENT_FLAGS),
        // mr_mode was an enumeration before it became flags: read as an int.
        (FI_TYPE_MR_MODE, _) => flags(buf, int(v) as u32 as u64, MR_MODE),
        (FI_TYPE_OP_TYPE, _) => buf.cat(name_of(int(v), OP_TYPES)),
        (FI_TYPE_FID, Value::Fid(f)) => fid_line(buf, "fid: ", f, fids),
        (FI_TYPE_COLLECTIVE_OP, _) => buf.cat(name_of(int(v), COLLECTIVE_OPS)),
        (FI_TYPE_HMEM_IFACE, _) => buf.cat(name_of(int(v), HMEM_IFACES)),
        (FI_TYPE_CQ_FORMAT, _) => buf.cat(name_of(int(v), CQ_FORMATS)),
        (FI_TYPE_LOG_LEVEL, _) => buf.cat(table_name(&LEVEL_NAMES, int(v))),
        (FI_TYPE_LOG_SUBSYS, _) => buf.cat(table_name(&SUBSYS_NAMES, int(v))),
        (FI_TYPE_AV_ATTR, Value::AvAttr(a)) => av_attr(buf, a),
        (FI_TYPE_CQ_ATTR, Value::CqAttr(a)) => cq_attr(buf, a),
        (FI_TYPE_MR_ATTR, Value::MrAttr(a)) => mr_attr(buf, a),
        (FI_TYPE_CNTR_ATTR, Value::CntrAttr(a)) => cntr_attr(buf, a),
        (FI_TYPE_CQ_ERR_ENTRY, Value::CqErrEntry(e)) => cq_err_entry(buf, e),
        (FI_TYPE_CQ_WAIT_COND, _) => buf.cat(name_of(int(v), CQ_WAIT_CONDS)),
        (FI_TYPE_WAIT_OBJ, _) => buf.cat(name_of(int(v), WAIT_OBJS)),
        _ => buf.cat("Unknown type"),
    }
}

// ---- Rust-side conveniences ----

/// The C attribute structs an [`Info`] stands for (strings and pointers aside).
struct InfoParts {
    ep: fi_ep_attr,
    domain: fi_domain_attr,
    fabric: fi_fabric_attr,
}

fn parts(i: &Info) -> InfoParts {
    let e = &i.ep_attr;
    let d = &i.domain_attr;
    let f = &i.fabric_attr;
    InfoParts {
        ep: fi_ep_attr {
            type_: e.type_,
            protocol: e.protocol,
            protocol_version: e.protocol_version,
            max_msg_size: e.max_msg_size,
            msg_prefix_size: e.msg_prefix_size,
            max_order_raw_size: e.max_order_raw_size,
            max_order_war_size: e.max_order_war_size,
            max_order_waw_size: e.max_order_waw_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            auth_key_size: e.auth_key.as_ref().map_or(0, Vec::len),
            auth_key: core::ptr::null_mut(),
        },
        domain: fi_domain_attr {
            domain: d.domain as *mut fid_domain,
            name: core::ptr::null_mut(),
            threading: d.threading,
            control_progress: d.control_progress,
            progress: d.progress,
            resource_mgmt: d.resource_mgmt,
            av_type: d.av_type,
            mr_mode: d.mr_mode,
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            mr_iov_limit: d.mr_iov_limit,
            caps: d.caps,
            mode: d.mode,
            auth_key: core::ptr::null_mut(),
            auth_key_size: d.auth_key.as_ref().map_or(0, Vec::len),
            max_err_data: d.max_err_data,
            mr_cnt: d.mr_cnt,
            tclass: d.tclass,
            max_ep_auth_key: d.max_ep_auth_key,
            max_group_id: d.max_group_id,
            max_cntr_value: d.max_cntr_value,
            max_err_cntr_value: d.max_err_cntr_value,
        },
        fabric: fi_fabric_attr {
            fabric: f.fabric as *mut fid_fabric,
            name: core::ptr::null_mut(),
            prov_name: core::ptr::null_mut(),
            prov_version: f.prov_version,
            api_version: f.api_version,
        },
    }
}

/// The `fi_tostr(FI_TYPE_INFO)` text of an [`Info`] (its handle printed as an address).
pub fn info_to_string(i: &Info) -> String {
    let p = parts(i);
    fn addr(a: &Option<Vec<u8>>) -> Option<AddrView<'_>> {
        a.as_deref().map(|b| AddrView {
            ptr: b.as_ptr() as usize,
            bytes: b,
        })
    }
    let view = InfoView {
        caps: i.caps,
        mode: i.mode,
        addr_format: i.addr_format,
        src_addrlen: i.src_addr.as_ref().map_or(0, Vec::len),
        dest_addrlen: i.dest_addr.as_ref().map_or(0, Vec::len),
        src_addr: addr(&i.src_addr),
        dest_addr: addr(&i.dest_addr),
        handle: i.handle,
        tx_attr: Some(&i.tx_attr),
        rx_attr: Some(&i.rx_attr),
        ep_attr: Some(&p.ep),
        domain_attr: Some(DomainView {
            attr: &p.domain,
            name: i.domain_attr.name.as_deref().map(str::as_bytes),
        }),
        fabric_attr: Some(FabricView {
            attr: &p.fabric,
            name: i.fabric_attr.name.as_deref().map(str::as_bytes),
            prov_name: i.fabric_attr.prov_name.as_deref().map(str::as_bytes),
        }),
        nic: i.nic.as_ref().map_or(NicView::Null, NicView::Decoded),
    };
    to_string(|b| info(b, &view, &mut NoFidText))
}

#[cfg(test)]
mod tests;
