//! Providers: efa (EFA RDM protocol over a device layer) and shm (shared memory).

pub mod efa;
pub mod shm;

use crate::core::provider::InfoProvider;
use crate::util::Provider;

/// Every provider, in upstream's default order (efa before shm).
pub fn registry() -> &'static [&'static dyn Provider] {
    static REGISTRY: [&dyn Provider; 2] = [&efa::EFA, &shm::SHM];
    &REGISTRY
}

/// The providers as `fi_getinfo` sees them.
pub fn info_providers() -> Vec<&'static dyn InfoProvider> {
    registry().iter().map(|p| *p as &dyn InfoProvider).collect()
}

/// Defines every provider's parameters (for `fi_getparams` / `fi_info -e`).
pub fn define_params() {
    efa::define_params();
    shm::define_params();
}
