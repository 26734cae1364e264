//! The efa provider's RDM tests (`common/efa_cases.rs`) with local peers through shm, as by
//! default (FI_EFA_ENABLE_SHM_TRANSFER=1): the hidden shm endpoint, the receive queue it shares
//! with the efa endpoint, and the MR keys it checks against the efa domain's registrations.

mod common;

const SHM_TRANSFER: &str = "1";
include!("common/efa_cases.rs");
