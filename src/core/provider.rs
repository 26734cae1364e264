//! What `fi_getinfo` needs from a provider. Opening objects is `util::Provider`'s job.

use super::{Info, Result};

/// A provider as discovery sees it (fi_provider(7): name, version, getinfo).
pub trait InfoProvider: Send + Sync {
    /// Lower-case name as it appears in `prov_name` and `FI_PROVIDER` (`"efa"`, `"shm"`).
    fn name(&self) -> &'static str;

    /// Provider version, `FI_VERSION(maj, min)` style.
    fn version(&self) -> u32;

    /// The entries this provider offers for `hints` (already checked by `core::getinfo`'s
    /// generic rules: the provider applies the ones that depend on itself: addresses, node and
    /// service, device selection). Returns `Errno::NODATA` when nothing matches.
    fn getinfo(
        &self,
        version: u32,
        node: Option<&str>,
        service: Option<&str>,
        flags: u64,
        hints: Option<&Info>,
    ) -> Result<Vec<Info>>;

    /// Hidden providers (upstream's `OFI_GETINFO_HIDDEN`) are usable by other providers but not
    /// listed by `fi_getinfo`.
    fn hidden(&self) -> bool {
        false
    }
}
