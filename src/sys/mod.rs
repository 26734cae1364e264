//! Platform: system calls and raw memory, behind safe interfaces. One of the few places where
//! `unsafe` is allowed; every block says why it is sound.
#![allow(unsafe_code)]

pub mod checksum;
pub mod cma;
pub mod dl;
pub mod lock;
pub mod long_double;
pub mod mem;
pub mod netif;
pub mod os;
pub mod pages;
pub mod poll;
pub mod random;
pub mod shm;
pub mod udp;
