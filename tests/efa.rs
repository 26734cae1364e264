//! The efa provider's RDM protocol between two endpoints of one process over the loopback
//! software-SRD device, local shm off (FI_EFA_ENABLE_SHM_TRANSFER=0). The MTU is lowered to 8 KiB (FI_EFA_MTU_SIZE) so that eager, medium
//! and long-CTS messages, eager and long-CTS writes, short and long reads all occur. Progress
//! is manual (efa-reference §5): every wait drives both endpoints.

mod common;

const SHM_TRANSFER: &str = "0";
include!("common/efa_cases.rs");
