//! Core: what the library does on its own, with no C in sight: provider-independent
//! `fi_getinfo` logic, parameters, logging, error text, `fi_tostr`.
//!
//! `core` knows no C entry point (that is `ffi`) and no object machinery (that is `util`).

pub mod errno;
pub mod error;
pub mod getinfo;
pub mod info;
pub mod log;
pub mod params;
pub mod provider;
pub mod tostr;

pub use error::{Errno, Result};
pub use info::Info;
