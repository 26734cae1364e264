//! The C boundary with a mock provider: object lifecycle through the ops tables, and the
//! misuse matrix — every ops-table slot called with NULL, a closed object and an object of the
//! wrong class returns an error and crashes nothing. The matrix lists every slot of every table
//! and checks the list against the table's size, so a new slot cannot be forgotten.
#![allow(unsafe_code)]

mod common;

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr::{null, null_mut};
use std::sync::Arc;

use common::mock::MockFabric;
use fabric::abi::consts::*;
use fabric::abi::ops::*;
use fabric::abi::types::*;
use fabric::core::Info;
use fabric::ffi::info::{free_info, info_to_c};

/// An opened set of objects: fabric → domain → cq, av, ep (bound, enabled).
struct Objects {
    fabric: *mut fid_fabric,
    domain: *mut fid_domain,
    cq: *mut fid_cq,
    av: *mut fid_av,
    ep: *mut fid_ep,
}

fn rdm_info() -> *mut fi_info {
    let mut i = Info {
        caps: FI_MSG,
        ..Default::default()
    };
    i.ep_attr.type_ = FI_EP_RDM;
    info_to_c(&i)
}

fn open_all() -> Objects {
    // SAFETY: test: every pointer comes from the library and is used as fi_*(3) describes.
    unsafe {
        let fabric =
            fabric::ffi::domain::fabric_to_c(Arc::new(MockFabric), fi_version(1, 21), null_mut());
        let info = rdm_info();
        let mut domain = null_mut();
        assert_eq!(
            ((*(*fabric).ops).domain.unwrap())(fabric, info, &mut domain, null_mut()),
            0
        );
        let mut cq = null_mut();
        let mut cq_attr = fi_cq_attr {
            size: 16,
            flags: 0,
            format: FI_CQ_FORMAT_MSG,
            wait_obj: FI_WAIT_UNSPEC,
            signaling_vector: 0,
            wait_cond: 0,
            wait_set: null_mut(),
        };
        assert_eq!(
            ((*(*domain).ops).cq_open.unwrap())(domain, &mut cq_attr, &mut cq, null_mut()),
            0
        );
        let mut av = null_mut();
        let mut av_attr = fi_av_attr {
            type_: FI_AV_TABLE,
            rx_ctx_bits: 0,
            count: 4,
            ep_per_node: 0,
            name: null(),
            map_addr: null_mut(),
            flags: 0,
        };
        assert_eq!(
            ((*(*domain).ops).av_open.unwrap())(domain, &mut av_attr, &mut av, null_mut()),
            0
        );
        let mut ep = null_mut();
        assert_eq!(
            ((*(*domain).ops).endpoint.unwrap())(domain, info, &mut ep, null_mut()),
            0
        );
        free_info(info);
        let bind = (*(*ep).fid.ops).bind.unwrap();
        assert_eq!(
            bind(&mut (*ep).fid, &mut (*cq).fid, FI_TRANSMIT | FI_RECV),
            0
        );
        assert_eq!(bind(&mut (*ep).fid, &mut (*av).fid, 0), 0);
        assert_eq!(
            ((*(*ep).fid.ops).control.unwrap())(&mut (*ep).fid, FI_ENABLE, null_mut()),
            0
        );
        Objects {
            fabric,
            domain,
            cq,
            av,
            ep,
        }
    }
}

fn close(f: *mut fid) -> i32 {
    // SAFETY: test: `f` is one of our live objects.
    unsafe { ((*(*f).ops).close.unwrap())(f) }
}

fn close_all(o: &Objects) {
    // SAFETY: test: closing in dependency order.
    unsafe {
        assert_eq!(close(&mut (*o.ep).fid), 0);
        assert_eq!(close(&mut (*o.av).fid), 0);
        assert_eq!(close(&mut (*o.cq).fid), 0);
        assert_eq!(close(&mut (*o.domain).fid), 0);
        assert_eq!(close(&mut (*o.fabric).fid), 0);
    }
}

#[test]
fn lifecycle_and_data_through_the_ops_tables() {
    let o = open_all();
    // SAFETY: test: live objects, buffers outlive the operations (completions read below).
    unsafe {
        // Parents and bound objects refuse to close while in use.
        assert_eq!(close(&mut (*o.domain).fid), -FI_EBUSY);
        assert_eq!(close(&mut (*o.cq).fid), -FI_EBUSY);
        assert_eq!(close(&mut (*o.av).fid), -FI_EBUSY);
        assert_eq!(close(&mut (*o.fabric).fid), -FI_EBUSY);

        let peer = 42u64.to_le_bytes();
        let mut fi_addr = 0u64;
        assert_eq!(
            ((*(*o.av).ops).insert.unwrap())(
                o.av,
                peer.as_ptr().cast(),
                1,
                &mut fi_addr,
                0,
                null_mut()
            ),
            1
        );
        let mut name = [0u8; 64];
        let mut len = name.len();
        let s = ((*(*o.av).ops).straddr.unwrap())(
            o.av,
            peer.as_ptr().cast(),
            name.as_mut_ptr().cast(),
            &mut len,
        );
        assert_eq!(std::ffi::CStr::from_ptr(s).to_str().unwrap(), "mock://42");
        assert_eq!(len, "mock://42".len() + 1);

        let msg = (*o.ep).msg;
        let mut rbuf = [0u8; 16];
        let sbuf = *b"hello, fabric!!!";
        assert_eq!(
            ((*msg).recv.unwrap())(
                o.ep,
                rbuf.as_mut_ptr().cast(),
                16,
                null_mut(),
                FI_ADDR_UNSPEC,
                7 as *mut c_void
            ),
            0
        );
        assert_eq!(
            ((*msg).send.unwrap())(
                o.ep,
                sbuf.as_ptr().cast(),
                16,
                null_mut(),
                fi_addr,
                9 as *mut c_void
            ),
            0
        );
        // An unknown destination is refused, not sent.
        assert_eq!(
            ((*msg).send.unwrap())(o.ep, sbuf.as_ptr().cast(), 16, null_mut(), 99, null_mut()),
            -(FI_EINVAL as isize)
        );

        let mut entries = [fi_cq_msg_entry {
            op_context: null_mut(),
            flags: 0,
            len: 0,
        }; 4];
        let read = (*(*o.cq).ops).read.unwrap();
        let n = read(o.cq, entries.as_mut_ptr().cast(), 4);
        assert_eq!(n, 2);
        let ctxs: Vec<usize> = entries[..2].iter().map(|e| e.op_context as usize).collect();
        assert!(ctxs.contains(&7) && ctxs.contains(&9));
        let recv = entries[..2]
            .iter()
            .find(|e| e.op_context as usize == 7)
            .unwrap();
        assert_eq!((recv.len, recv.flags & FI_RECV), (16, FI_RECV));
        assert_eq!(&rbuf, &sbuf);
        assert_eq!(
            read(o.cq, entries.as_mut_ptr().cast(), 4),
            -(FI_EAGAIN as isize)
        );

        // fi_getname reports the needed size when the buffer is short.
        let mut small = [0u8; 2];
        let mut len = small.len();
        let getname = (*(*o.ep).cm).getname.unwrap();
        assert_eq!(
            getname(&mut (*o.ep).fid, small.as_mut_ptr().cast(), &mut len),
            -FI_ETOOSMALL
        );
        assert_eq!(len, 8);
    }
    close_all(&o);
}

#[test]
fn closed_objects_are_refused() {
    let o = open_all();
    let ep_fid = o.ep.cast::<fid>();
    close_all(&o);
    // The memory of a closed object may be reused by the allocator, so only what the poisoned
    // header guarantees right after close is checked: the class no longer matches.
    // SAFETY: test: reading the header of the just-closed object (still mapped, poisoned).
    let class = unsafe { (*ep_fid).fclass };
    assert_ne!(class, FI_CLASS_EP);
}

/// Calls one slot with a given object pointer and returns its result as i64 (0 for void/u64).
type Probe = unsafe fn(*mut c_void) -> i64;

macro_rules! probes {
    ($table:expr, $ty:ty, [$($slot:ident => |$o:ident, $f:ident| $call:expr),* $(,)?]) => {{
        let list: Vec<(&'static str, Probe)> = vec![$(
            (stringify!($slot), {
                unsafe fn probe($o: *mut c_void) -> i64 {
                    let $f = $table.$slot.unwrap();
                    // SAFETY: test: the probe passes the object under test and otherwise valid or
                    // NULL arguments; the slot must reject a bad object before touching them.
                    #[allow(clippy::macro_metavars_in_unsafe)]
                    unsafe { ({ $call }) as i64 }
                }
                probe as Probe
            })
        ),*];
        // Every member after `size` is listed: a new slot cannot be forgotten.
        assert_eq!(list.len(), (size_of::<$ty>() - size_of::<usize>()) / size_of::<usize>(), stringify!($ty));
        list
    }};
}

/// (table name, class its slots expect, its slots).
type Table = (&'static str, usize, Vec<(&'static str, Probe)>);

fn matrix() -> Vec<Table> {
    use fabric::ffi::{av::AV_OPS, domain::*, ep::*, mr::MR_OPS, queues::*};
    vec![
        (
            "fi_ops_fabric",
            FI_CLASS_FABRIC,
            probes!(FABRIC_OPS, fi_ops_fabric, [
                domain => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                passive_ep => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                eq_open => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                wait_open => |o, f| f(o.cast(), null_mut(), &mut null_mut()),
                trywait => |o, f| f(o.cast(), null_mut(), 0),
                domain2 => |o, f| f(o.cast(), null_mut(), &mut null_mut(), 0, null_mut()),
            ]),
        ),
        (
            "fi_ops_domain",
            FI_CLASS_DOMAIN,
            probes!(DOMAIN_OPS, fi_ops_domain, [
                av_open => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                cq_open => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                endpoint => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                scalable_ep => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                cntr_open => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                poll_open => |o, f| f(o.cast(), null_mut(), &mut null_mut()),
                stx_ctx => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                srx_ctx => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                query_atomic => |o, f| f(o.cast(), FI_UINT64, FI_SUM, null_mut(), 0),
                query_collective => |o, f| f(o.cast(), 0, null_mut(), 0),
                endpoint2 => |o, f| f(o.cast(), null_mut(), &mut null_mut(), 0, null_mut()),
            ]),
        ),
        (
            "fi_ops_mr",
            FI_CLASS_DOMAIN,
            probes!(MR_OPS, fi_ops_mr, [
                reg => |o, f| f(o.cast(), null(), 0, 0, 0, 0, 0, &mut null_mut(), null_mut()),
                regv => |o, f| f(o.cast(), null(), 0, 0, 0, 0, 0, &mut null_mut(), null_mut()),
                regattr => |o, f| f(o.cast(), null(), 0, &mut null_mut()),
            ]),
        ),
        (
            "fi_ops_av",
            FI_CLASS_AV,
            probes!(AV_OPS, fi_ops_av, [
                insert => |o, f| f(o.cast(), null(), 0, null_mut(), 0, null_mut()),
                insertsvc => |o, f| f(o.cast(), c"h".as_ptr(), c"1".as_ptr(), null_mut(), 0, null_mut()),
                insertsym => |o, f| f(o.cast(), c"h".as_ptr(), 1, c"1".as_ptr(), 1, null_mut(), 0, null_mut()),
                remove => |o, f| f(o.cast(), null_mut(), 0, 0),
                lookup => |o, f| f(o.cast(), 0, null_mut(), &mut 0),
                straddr => |o, f| if f(o.cast(), [0u8; 8].as_ptr().cast(), null_mut(), &mut 0).is_null() { -1 } else { 0 },
                av_set => |o, f| f(o.cast(), null_mut(), &mut null_mut(), null_mut()),
                insert_auth_key => |o, f| f(o.cast(), null(), 0, null_mut(), 0),
                lookup_auth_key => |o, f| f(o.cast(), 0, null_mut(), &mut 0),
                set_user_id => |o, f| f(o.cast(), 0, 0, 0),
            ]),
        ),
        (
            "fi_ops_ep",
            FI_CLASS_EP,
            probes!(EP_OPS, fi_ops_ep, [
                cancel => |o, f| f(o.cast(), null_mut()),
                getopt => |o, f| f(o.cast(), 0, 0, null_mut(), &mut 0),
                setopt => |o, f| f(o.cast(), 0, 0, null(), 0),
                tx_ctx => |o, f| f(o.cast(), 0, null_mut(), &mut null_mut(), null_mut()),
                rx_ctx => |o, f| f(o.cast(), 0, null_mut(), &mut null_mut(), null_mut()),
                rx_size_left => |o, f| f(o.cast()),
                tx_size_left => |o, f| f(o.cast()),
            ]),
        ),
        (
            "fi_ops_cm",
            FI_CLASS_EP,
            probes!(CM_OPS, fi_ops_cm, [
                setname => |o, f| f(o.cast(), null_mut(), 0),
                getname => |o, f| f(o.cast(), null_mut(), &mut 0),
                getpeer => |o, f| f(o.cast(), null_mut(), &mut 0),
                connect => |o, f| f(o.cast(), null(), null(), 0),
                listen => |o, f| f(o.cast(), ),
                accept => |o, f| f(o.cast(), null(), 0),
                reject => |o, f| f(o.cast(), null_mut(), null(), 0),
                shutdown => |o, f| f(o.cast(), 0),
                join => |o, f| f(o.cast(), null(), 0, &mut null_mut(), null_mut()),
            ]),
        ),
        (
            "fi_ops_msg",
            FI_CLASS_EP,
            probes!(MSG_OPS, fi_ops_msg, [
                recv => |o, f| f(o.cast(), null_mut(), 0, null_mut(), 0, null_mut()),
                recvv => |o, f| f(o.cast(), null(), null_mut(), 0, 0, null_mut()),
                recvmsg => |o, f| f(o.cast(), null(), 0),
                send => |o, f| f(o.cast(), null(), 0, null_mut(), 0, null_mut()),
                sendv => |o, f| f(o.cast(), null(), null_mut(), 0, 0, null_mut()),
                sendmsg => |o, f| f(o.cast(), null(), 0),
                inject => |o, f| f(o.cast(), null(), 0, 0),
                senddata => |o, f| f(o.cast(), null(), 0, null_mut(), 0, 0, null_mut()),
                injectdata => |o, f| f(o.cast(), null(), 0, 0, 0),
            ]),
        ),
        (
            "fi_ops_tagged",
            FI_CLASS_EP,
            probes!(TAGGED_OPS, fi_ops_tagged, [
                recv => |o, f| f(o.cast(), null_mut(), 0, null_mut(), 0, 0, 0, null_mut()),
                recvv => |o, f| f(o.cast(), null(), null_mut(), 0, 0, 0, 0, null_mut()),
                recvmsg => |o, f| f(o.cast(), null(), 0),
                send => |o, f| f(o.cast(), null(), 0, null_mut(), 0, 0, null_mut()),
                sendv => |o, f| f(o.cast(), null(), null_mut(), 0, 0, 0, null_mut()),
                sendmsg => |o, f| f(o.cast(), null(), 0),
                inject => |o, f| f(o.cast(), null(), 0, 0, 0),
                senddata => |o, f| f(o.cast(), null(), 0, null_mut(), 0, 0, 0, null_mut()),
                injectdata => |o, f| f(o.cast(), null(), 0, 0, 0, 0),
            ]),
        ),
        (
            "fi_ops_rma",
            FI_CLASS_EP,
            probes!(RMA_OPS, fi_ops_rma, [
                read => |o, f| f(o.cast(), null_mut(), 0, null_mut(), 0, 0, 0, null_mut()),
                readv => |o, f| f(o.cast(), null(), null_mut(), 0, 0, 0, 0, null_mut()),
                readmsg => |o, f| f(o.cast(), null(), 0),
                write => |o, f| f(o.cast(), null(), 0, null_mut(), 0, 0, 0, null_mut()),
                writev => |o, f| f(o.cast(), null(), null_mut(), 0, 0, 0, 0, null_mut()),
                writemsg => |o, f| f(o.cast(), null(), 0),
                inject => |o, f| f(o.cast(), null(), 0, 0, 0, 0),
                writedata => |o, f| f(o.cast(), null(), 0, null_mut(), 0, 0, 0, 0, null_mut()),
                injectdata => |o, f| f(o.cast(), null(), 0, 0, 0, 0, 0),
            ]),
        ),
        (
            "fi_ops_atomic",
            FI_CLASS_EP,
            probes!(ATOMIC_OPS, fi_ops_atomic, [
                write => |o, f| f(o.cast(), null(), 0, null_mut(), 0, 0, 0, FI_UINT64, FI_SUM, null_mut()),
                writev => |o, f| f(o.cast(), null(), null_mut(), 0, 0, 0, 0, FI_UINT64, FI_SUM, null_mut()),
                writemsg => |o, f| f(o.cast(), null(), 0),
                inject => |o, f| f(o.cast(), null(), 0, 0, 0, 0, FI_UINT64, FI_SUM),
                readwrite => |o, f| f(o.cast(), null(), 0, null_mut(), null_mut(), null_mut(), 0, 0, 0, FI_UINT64, FI_SUM, null_mut()),
                readwritev => |o, f| f(o.cast(), null(), null_mut(), 0, null_mut(), null_mut(), 0, 0, 0, 0, FI_UINT64, FI_SUM, null_mut()),
                readwritemsg => |o, f| f(o.cast(), null(), null_mut(), null_mut(), 0, 0),
                compwrite => |o, f| f(o.cast(), null(), 0, null_mut(), null(), null_mut(), null_mut(), null_mut(), 0, 0, 0, FI_UINT64, FI_CSWAP, null_mut()),
                compwritev => |o, f| f(o.cast(), null(), null_mut(), 0, null(), null_mut(), 0, null_mut(), null_mut(), 0, 0, 0, 0, FI_UINT64, FI_CSWAP, null_mut()),
                compwritemsg => |o, f| f(o.cast(), null(), null(), null_mut(), 0, null_mut(), null_mut(), 0, 0),
                writevalid => |o, f| f(o.cast(), FI_UINT64, FI_SUM, &mut 0),
                readwritevalid => |o, f| f(o.cast(), FI_UINT64, FI_SUM, &mut 0),
                compwritevalid => |o, f| f(o.cast(), FI_UINT64, FI_CSWAP, &mut 0),
            ]),
        ),
        (
            "fi_ops_cq",
            FI_CLASS_CQ,
            probes!(CQ_OPS, fi_ops_cq, [
                read => |o, f| f(o.cast(), null_mut(), 0),
                readfrom => |o, f| f(o.cast(), null_mut(), 0, null_mut()),
                readerr => |o, f| f(o.cast(), null_mut(), 0),
                sread => |o, f| f(o.cast(), null_mut(), 0, null(), 0),
                sreadfrom => |o, f| f(o.cast(), null_mut(), 0, null_mut(), null(), 0),
                signal => |o, f| f(o.cast()),
                strerror => |o, f| if f(o.cast(), 0, null(), null_mut(), 0).is_null() { -1 } else { 0 },
            ]),
        ),
        (
            "fi_ops_eq",
            FI_CLASS_EQ,
            probes!(EQ_OPS, fi_ops_eq, [
                read => |o, f| f(o.cast(), null_mut(), null_mut(), 0, 0),
                readerr => |o, f| f(o.cast(), null_mut(), 0),
                write => |o, f| f(o.cast(), 0, null(), 0, 0),
                sread => |o, f| f(o.cast(), null_mut(), null_mut(), 0, 0, 0),
                strerror => |o, f| if f(o.cast(), 0, null(), null_mut(), 0).is_null() { -1 } else { 0 },
            ]),
        ),
        (
            "fi_ops_cntr",
            FI_CLASS_CNTR,
            probes!(CNTR_OPS, fi_ops_cntr, [
                // No error path in the C API: a refused counter reads as 0.
                read => |o, f| if f(o.cast()) == 0 { -1 } else { 0 },
                readerr => |o, f| if f(o.cast()) == 0 { -1 } else { 0 },
                add => |o, f| f(o.cast(), 1),
                set => |o, f| f(o.cast(), 1),
                wait => |o, f| f(o.cast(), 1, 0),
                adderr => |o, f| f(o.cast(), 1),
                seterr => |o, f| f(o.cast(), 1),
            ]),
        ),
    ]
}

#[test]
fn every_slot_refuses_null_garbage_and_wrong_class_objects() {
    let o = open_all();
    // An object of every class, to pass where another class is expected.
    let objects: Vec<(usize, *mut c_void)> = {
        vec![
            (FI_CLASS_FABRIC, o.fabric.cast()),
            (FI_CLASS_DOMAIN, o.domain.cast()),
            (FI_CLASS_CQ, o.cq.cast()),
            (FI_CLASS_AV, o.av.cast()),
            (FI_CLASS_EP, o.ep.cast()),
        ]
    };
    // A fid-shaped block of garbage that claims to be of each class but carries no ops of ours.
    let mut garbage = [0xA5u8; 128];
    let mut tried = 0;
    for (table, class, slots) in matrix() {
        for (slot, probe) in slots {
            // SAFETY: test: each probe must refuse the bad object before using any argument.
            unsafe {
                assert!(probe(null_mut()) < 0, "{table}.{slot} accepted NULL");
                for &(c, obj) in &objects {
                    if c != class {
                        assert!(
                            probe(obj) < 0,
                            "{table}.{slot} accepted an object of class {c}"
                        );
                    }
                }
                let g = garbage.as_mut_ptr().cast::<fid>();
                (*g).fclass = class;
                assert!(
                    probe(g.cast()) < 0,
                    "{table}.{slot} accepted a foreign object"
                );
            }
            tried += 1;
        }
    }
    assert!(tried > 100, "{tried} slots probed");
    close_all(&o);
}
