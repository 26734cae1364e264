//! Symbol versions of the entry points that exist in several layouts (abi-reference §1).
//!
//! The internal `fabric_*_1_N` functions are bound to `fi_*@FABRIC_1.N`, the newest as the
//! default (`@@`). Only the shared-library build carries these directives (feature
//! `versioned-symbols`, set by the Makefile): a plain executable link has no version nodes.

#[cfg(feature = "versioned-symbols")]
core::arch::global_asm!(
    ".symver fabric_getinfo_1_0, fi_getinfo@FABRIC_1.0",
    ".symver fabric_getinfo_1_1, fi_getinfo@FABRIC_1.1",
    ".symver fabric_getinfo_1_2, fi_getinfo@FABRIC_1.2",
    ".symver fabric_getinfo_1_3, fi_getinfo@FABRIC_1.3",
    ".symver fabric_getinfo_1_7, fi_getinfo@FABRIC_1.7",
    ".symver fabric_getinfo_1_8, fi_getinfo@FABRIC_1.8",
    ".symver fabric_getinfo_1_9, fi_getinfo@@FABRIC_1.9",
    ".symver fabric_freeinfo_1_0, fi_freeinfo@FABRIC_1.0",
    ".symver fabric_freeinfo_1_1, fi_freeinfo@FABRIC_1.1",
    ".symver fabric_freeinfo_1_2, fi_freeinfo@FABRIC_1.2",
    ".symver fabric_freeinfo_1_3, fi_freeinfo@FABRIC_1.3",
    ".symver fabric_freeinfo_1_7, fi_freeinfo@FABRIC_1.7",
    ".symver fabric_freeinfo_1_8, fi_freeinfo@FABRIC_1.8",
    ".symver fabric_freeinfo_1_9, fi_freeinfo@@FABRIC_1.9",
    ".symver fabric_dupinfo_1_0, fi_dupinfo@FABRIC_1.0",
    ".symver fabric_dupinfo_1_1, fi_dupinfo@FABRIC_1.1",
    ".symver fabric_dupinfo_1_2, fi_dupinfo@FABRIC_1.2",
    ".symver fabric_dupinfo_1_3, fi_dupinfo@FABRIC_1.3",
    ".symver fabric_dupinfo_1_7, fi_dupinfo@FABRIC_1.7",
    ".symver fabric_dupinfo_1_8, fi_dupinfo@FABRIC_1.8",
    ".symver fabric_dupinfo_1_9, fi_dupinfo@@FABRIC_1.9",
    ".symver fabric_fabric_1_0, fi_fabric@FABRIC_1.0",
    ".symver fabric_fabric_1_1, fi_fabric@@FABRIC_1.1",
);
