//! `fi_tostr` formatting (abi-reference §4). Filled in by the tostr work.
