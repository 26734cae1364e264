//! Run-time parameters (`fi_param_define`/`fi_param_get`, fi_provider(3)): every parameter is an
//! environment variable `FI_<NAME>` (core) or `FI_<PROV>_<NAME>` (provider), upper-cased.

use std::sync::Mutex;

use super::{Errno, Result};
use crate::abi::consts::{FI_PARAM_BOOL, FI_PARAM_INT, FI_PARAM_SIZE_T, FI_PARAM_STRING};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ParamType {
    String = FI_PARAM_STRING,
    Int = FI_PARAM_INT,
    Bool = FI_PARAM_BOOL,
    SizeT = FI_PARAM_SIZE_T,
}

impl ParamType {
    pub fn from_u32(v: u32) -> Option<ParamType> {
        Some(match v {
            FI_PARAM_STRING => ParamType::String,
            FI_PARAM_INT => ParamType::Int,
            FI_PARAM_BOOL => ParamType::Bool,
            FI_PARAM_SIZE_T => ParamType::SizeT,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The environment variable name.
    pub name: String,
    pub type_: ParamType,
    pub help: String,
}

static DEFINED: Mutex<Vec<Param>> = Mutex::new(Vec::new());

/// `FI_<PROV>_<NAME>` or `FI_<NAME>`.
pub fn env_name(prov: Option<&str>, name: &str) -> String {
    match prov {
        Some(p) if !p.is_empty() && p != "core" => format!("FI_{}_{}", p, name).to_ascii_uppercase(),
        _ => format!("FI_{}", name).to_ascii_uppercase(),
    }
}

/// Defines a parameter; defining the same name twice keeps the first (upstream returns
/// -FI_EALREADY; the C entry point reports that).
pub fn define(prov: Option<&str>, name: &str, type_: ParamType, help: &str) -> Result<()> {
    let env = env_name(prov, name);
    let mut defined = DEFINED.lock().unwrap_or_else(|e| e.into_inner());
    if defined.iter().any(|p| p.name == env) {
        return Err(Errno::ALREADY);
    }
    let help = match prov {
        Some(p) if !p.is_empty() && p != "core" => format!("{p}: {help}"),
        _ => help.to_string(),
    };
    defined.push(Param { name: env, type_, help });
    Ok(())
}

fn lookup(prov: Option<&str>, name: &str) -> Result<Param> {
    let env = env_name(prov, name);
    let defined = DEFINED.lock().unwrap_or_else(|e| e.into_inner());
    defined.iter().find(|p| p.name == env).cloned().ok_or(Errno::NOENT)
}

/// The raw string of a defined parameter: `NOENT` if never defined, `NODATA` if unset.
pub fn get_raw(prov: Option<&str>, name: &str) -> Result<(ParamType, String)> {
    let p = lookup(prov, name)?;
    let v = std::env::var(&p.name).map_err(|_| Errno::NODATA)?;
    Ok((p.type_, v))
}

/// strtol(…, 0) semantics: decimal, 0x hex, leading 0 octal; trailing junk ignored.
pub fn parse_long(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (radix, digits) = if let Some(r) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, r)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let v = i64::from_str_radix(&digits[..end], radix).unwrap_or(0);
    if neg { -v } else { v }
}

pub fn parse_bool(s: &str) -> Result<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Ok(true),
        "0" | "false" | "no" | "off" | "n" => Ok(false),
        _ => Err(Errno::INVAL),
    }
}

pub fn get_str(prov: Option<&str>, name: &str) -> Result<String> {
    get_raw(prov, name).map(|(_, v)| v)
}

pub fn get_int(prov: Option<&str>, name: &str) -> Result<i64> {
    get_raw(prov, name).map(|(_, v)| parse_long(&v))
}

pub fn get_size(prov: Option<&str>, name: &str) -> Result<usize> {
    get_raw(prov, name).map(|(_, v)| parse_long(&v).max(0) as usize)
}

pub fn get_bool(prov: Option<&str>, name: &str) -> Result<bool> {
    get_raw(prov, name).and_then(|(_, v)| parse_bool(&v))
}

/// Every defined parameter, in definition order.
pub fn list() -> Vec<Param> {
    DEFINED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Defines (once) and reads a provider parameter, falling back to `default` when unset or
/// malformed. For providers' own knobs.
pub fn knob_size(prov: &str, name: &str, help: &str, default: usize) -> usize {
    let _ = define(Some(prov), name, ParamType::SizeT, help);
    get_size(Some(prov), name).unwrap_or(default)
}

pub fn knob_int(prov: &str, name: &str, help: &str, default: i64) -> i64 {
    let _ = define(Some(prov), name, ParamType::Int, help);
    get_int(Some(prov), name).unwrap_or(default)
}

pub fn knob_bool(prov: &str, name: &str, help: &str, default: bool) -> bool {
    let _ = define(Some(prov), name, ParamType::Bool, help);
    get_bool(Some(prov), name).unwrap_or(default)
}

pub fn knob_str(prov: &str, name: &str, help: &str) -> Option<String> {
    let _ = define(Some(prov), name, ParamType::String, help);
    get_str(Some(prov), name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_parsing() {
        assert_eq!(env_name(Some("efa"), "tx_min_credits"), "FI_EFA_TX_MIN_CREDITS");
        assert_eq!(env_name(None, "log_level"), "FI_LOG_LEVEL");
        assert_eq!(parse_long("0x10"), 16);
        assert_eq!(parse_long("010"), 8);
        assert_eq!(parse_long("-42abc"), -42);
        assert_eq!(parse_bool("On"), Ok(true));
        assert_eq!(parse_bool("nope"), Err(Errno::INVAL));
    }

    #[test]
    fn undefined_and_unset() {
        assert_eq!(get_raw(Some("testprov"), "never_defined"), Err(Errno::NOENT));
        define(Some("testprov"), "unset_knob", ParamType::Int, "x").unwrap();
        assert_eq!(define(Some("testprov"), "unset_knob", ParamType::Int, "x"), Err(Errno::ALREADY));
        assert_eq!(get_int(Some("testprov"), "unset_knob"), Err(Errno::NODATA));
    }
}
