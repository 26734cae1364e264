//! Provider-independent `fi_getinfo` (abi-reference §5): which providers are asked, what is
//! stamped on their answers, how the list is filtered and ordered.

use super::info::Info;
use super::log::NameFilter;
use super::provider::InfoProvider;
use super::{Errno, Result};
use crate::abi::consts::*;

/// fi_getinfo(3) over `providers` (in default order).
pub fn getinfo(
    providers: &[&dyn InfoProvider],
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&Info>,
) -> Result<Vec<Info>> {
    if version > FI_VERSION_CURRENT {
        return Err(Errno::NOSYS);
    }
    let filter = NameFilter::parse(std::env::var("FI_PROVIDER").ok().as_deref());
    let mut out = Vec::new();
    if flags & FI_PROV_ATTR_ONLY != 0 {
        for p in providers.iter().filter(|p| !p.hidden()) {
            let mut i = Info::default();
            i.fabric_attr.prov_name = Some(p.name().to_string());
            i.fabric_attr.prov_version = p.version();
            i.fabric_attr.api_version = version;
            out.push(i);
        }
        return if out.is_empty() {
            Err(Errno::NODATA)
        } else {
            Ok(out)
        };
    }
    let wanted_prov = hints.and_then(|h| h.fabric_attr.prov_name.as_deref());
    for p in providers
        .iter()
        .filter(|p| !p.hidden() && filter.passes(p.name()))
    {
        if let Some(w) = wanted_prov
            && !w.split(';').any(|n| n.eq_ignore_ascii_case(p.name()))
        {
            continue;
        }
        let Ok(list) = p.getinfo(version, node, service, flags, hints) else {
            continue;
        };
        for mut i in list {
            i.fabric_attr.prov_name = Some(p.name().to_string());
            i.fabric_attr.prov_version = p.version();
            i.fabric_attr.api_version = version;
            out.push(i);
        }
    }
    if out.is_empty() {
        Err(Errno::NODATA)
    } else {
        Ok(out)
    }
}
