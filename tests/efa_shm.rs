//! The efa provider's RDM tests (`common/efa_cases.rs`) with local peers through shm, as by
//! default (FI_EFA_ENABLE_SHM_TRANSFER=1): the hidden shm endpoint, the receive queue it shares
//! with the efa endpoint, and the MR keys it checks against the efa domain's registrations.

mod common;

const SHM_TRANSFER: &str = "1";
const RDM_DOMAIN: &str = "srd_lo-rdm";
const DEVICE_WAIT_FD: bool = true;
fn device_setup() {}
include!("common/efa_cases.rs");
