//! The efa provider: EFA's RDM protocol (v4) over a device layer.

pub mod device;
pub mod rdm;
pub mod srd;
