//! Run-time parameters (fi_provider(3) `fi_param_define`/`fi_param_get`, abi-reference §4).
//!
//! Every parameter is an environment variable `FI_<NAME>` (core) or `FI_<PROV>_<NAME>`
//! (provider), upper-cased. A value may also come from `libfabric.conf` in the configuration
//! directory (`NAME=value` lines): it is used when the variable is unset, or always when
//! `FI_PREFER_SYSCONFIG` is true.

use std::ffi::CString;
use std::sync::{LazyLock, Mutex, Once};

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
    /// The help text (`"<prov>: "` prefixed for provider parameters).
    pub help: String,
    /// The defining provider (None: the core).
    pub prov: Option<String>,
    /// The name as defined (`"log_level"`).
    pub short: String,
}

static DEFINED: Mutex<Vec<Param>> = Mutex::new(Vec::new());

fn is_core(prov: Option<&str>) -> Option<&str> {
    match prov {
        Some(p) if !p.is_empty() && p != "core" => Some(p),
        _ => None,
    }
}

/// `FI_<PROV>_<NAME>` or `FI_<NAME>`.
pub fn env_name(prov: Option<&str>, name: &str) -> String {
    match is_core(prov) {
        Some(p) => format!("FI_{p}_{name}").to_ascii_uppercase(),
        None => format!("FI_{name}").to_ascii_uppercase(),
    }
}

/// Defines a parameter. An empty name or help text is `INVAL` (fi_provider(3)). Defining the
/// same (provider, name) again succeeds and keeps the first definition (upstream lists the
/// duplicate a second time; one entry is enough for `fi_getparams`).
pub fn define(prov: Option<&str>, name: &str, type_: ParamType, help: &str) -> Result<()> {
    if name.is_empty() || help.is_empty() {
        return Err(Errno::INVAL);
    }
    let prov = is_core(prov);
    let mut defined = DEFINED.lock().unwrap_or_else(|e| e.into_inner());
    if defined
        .iter()
        .any(|p| p.prov.as_deref() == prov && p.short == name)
    {
        return Ok(());
    }
    let help = match prov {
        Some(p) => format!("{p}: {help}"),
        None => help.to_string(),
    };
    defined.push(Param {
        name: env_name(prov, name),
        type_,
        help,
        prov: prov.map(str::to_string),
        short: name.to_string(),
    });
    Ok(())
}

/// The core's parameters, in the order `fi_info -e` lists them (abi-reference §4). Several only
/// exist so that configurations written for upstream are accepted; their help says so.
const CORE_PARAMS: &[(&str, ParamType, &str)] = &[
    (
        "prefer_sysconfig",
        ParamType::Bool,
        "Let values in libfabric.conf win over the environment (default: no)",
    ),
    (
        "log_interval",
        ParamType::Int,
        "Minimum milliseconds between two rate-limited log lines (default: 2000)",
    ),
    (
        "log_level",
        ParamType::String,
        "Most verbose level logged: warn, trace, info or debug (default: none)",
    ),
    (
        "log_prov",
        ParamType::String,
        "Providers to log, comma-separated, ^ to exclude instead (default: all)",
    ),
    (
        "log_subsys",
        ParamType::String,
        "Subsystems to log, comma-separated, ^ to exclude instead (default: all)",
    ),
    (
        "log_location",
        ParamType::String,
        "Where log lines go: stderr, stdout, a new file, or a directory for ofi_<pid>.log (default: stderr)",
    ),
    (
        "log_location_mode",
        ParamType::Int,
        "Permissions of a log file created by log_location (default: 0600)",
    ),
    (
        "hook",
        ParamType::String,
        "Hooking providers to stack on top (accepted; this library has none)",
    ),
    (
        "hmem",
        ParamType::String,
        "Device memory interfaces to enable, ';'-separated (accepted; only system memory is supported)",
    ),
    (
        "hmem_disable_p2p",
        ParamType::Bool,
        "Forbid peer-to-peer transfers with device memory (accepted; no device memory support)",
    ),
    (
        "mr_cache_max_size",
        ParamType::SizeT,
        "Bytes the registration cache may hold (accepted; this library keeps no registration cache)",
    ),
    (
        "mr_cache_max_count",
        ParamType::SizeT,
        "Regions the registration cache may hold (accepted; this library keeps no registration cache)",
    ),
    (
        "mr_cache_monitor",
        ParamType::String,
        "Memory monitor of the registration cache (accepted; this library keeps no registration cache)",
    ),
    (
        "mr_cuda_cache_monitor_enabled",
        ParamType::Bool,
        "CUDA memory monitor of the registration cache (accepted; no effect here)",
    ),
    (
        "mr_rocr_cache_monitor_enabled",
        ParamType::Bool,
        "ROCr memory monitor of the registration cache (accepted; no effect here)",
    ),
    (
        "mr_ze_cache_monitor_enabled",
        ParamType::Bool,
        "Level Zero memory monitor of the registration cache (accepted; no effect here)",
    ),
    (
        "provider",
        ParamType::String,
        "Providers to use, comma-separated, ^ to exclude instead (default: all)",
    ),
    (
        "fork_unsafe",
        ParamType::Bool,
        "Promise that the process does not fork while transfers are set up (default: no)",
    ),
    (
        "universe_size",
        ParamType::SizeT,
        "Expected number of peer processes, a sizing hint for providers",
    ),
    (
        "av_remove_cleanup",
        ParamType::Bool,
        "Release a peer's resources when its address is removed from an AV (default: no)",
    ),
    (
        "offload_coll_provider",
        ParamType::String,
        "Collective offload provider (accepted; none is available)",
    ),
    (
        "provider_path",
        ParamType::String,
        "Directories of loadable providers (accepted; providers are built in)",
    ),
];

/// Defines the core parameters (once per process), as the library's initialisation does.
pub fn define_core() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (name, t, help) in CORE_PARAMS {
            let _ = define(None, name, *t, help);
        }
    });
}

/// The configuration file upstream reads (`$(sysconfdir)/libfabric.conf`); the build sets
/// `FABRIC_SYSCONFDIR` to `$(PREFIX)/etc`.
pub fn conf_path() -> String {
    let dir = option_env!("FABRIC_SYSCONFDIR").unwrap_or("/usr/local/etc");
    format!("{dir}/libfabric.conf")
}

/// `NAME=value` lines of a configuration file: the name is everything before the first `=`, the
/// value everything after it, less the line end; lines without `=` are ignored. The first entry
/// for a name wins.
pub fn parse_conf(text: &str) -> Vec<(String, CString)> {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once('=')?;
            let value = CString::new(value.trim_end_matches('\r')).ok()?;
            Some((name.to_string(), value))
        })
        .collect()
}

static CONF: LazyLock<Vec<(String, CString)>> = LazyLock::new(|| {
    std::fs::read_to_string(conf_path())
        .map(|t| parse_conf(&t))
        .unwrap_or_default()
});

fn conf_value(env: &str) -> Option<&'static CString> {
    CONF.iter().find(|(n, _)| n == env).map(|(_, v)| v)
}

fn prefer_sysconfig() -> bool {
    static PREFER: LazyLock<bool> = LazyLock::new(|| {
        define_core();
        get_bool(None, "prefer_sysconfig").unwrap_or(false)
    });
    *PREFER
}

/// Where a parameter's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// The environment variable (whose name is the parameter's).
    Env(String),
    /// `libfabric.conf`; the text lives as long as the process.
    Conf(&'static CString),
}

impl Value {
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Value::Env(s) => s.as_str().into(),
            Value::Conf(c) => c.to_string_lossy(),
        }
    }
}

/// A defined parameter: `NOENT` if never defined (name compared exactly, as defined).
pub fn lookup(prov: Option<&str>, name: &str) -> Result<Param> {
    let prov = is_core(prov);
    let defined = DEFINED.lock().unwrap_or_else(|e| e.into_inner());
    defined
        .iter()
        .find(|p| p.prov.as_deref() == prov && p.short == name)
        .cloned()
        .ok_or(Errno::NOENT)
}

/// The value of a defined parameter: `NOENT` if never defined, `NODATA` if set nowhere.
pub fn value(prov: Option<&str>, name: &str) -> Result<(Param, Value)> {
    let p = lookup(prov, name)?;
    let env = std::env::var(&p.name).ok();
    let use_conf = env.is_none() || (p.short != "prefer_sysconfig" && prefer_sysconfig());
    let v = match (use_conf.then(|| conf_value(&p.name)).flatten(), env) {
        (Some(c), _) => Value::Conf(c),
        (None, Some(e)) => Value::Env(e),
        (None, None) => return Err(Errno::NODATA),
    };
    Ok((p, v))
}

/// The raw text of a defined parameter: `NOENT` if never defined, `NODATA` if unset.
pub fn get_raw(prov: Option<&str>, name: &str) -> Result<(ParamType, String)> {
    value(prov, name).map(|(p, v)| (p.type_, v.text().into_owned()))
}

/// `strtol(s, NULL, 0)`: leading blanks, a sign, `0x` hex or leading-`0` octal or decimal,
/// trailing text ignored, saturating at the `long` range.
pub fn parse_long(s: &str) -> i64 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let b = t.as_bytes();
    let (radix, digits) =
        if b.len() > 2 && b[0] == b'0' && (b[1] | 0x20) == b'x' && b[2].is_ascii_hexdigit() {
            (16, &t[2..])
        } else if b.first() == Some(&b'0') {
            (8, t)
        } else {
            (10, t)
        };
    let mut v: i128 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        v = (v * i128::from(radix) + i128::from(d)).min(i128::from(i64::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// fi_param_get(3) booleans: `0`, `1`, and (any case) `false`/`true`, `no`/`yes`, `off`/`on`.
pub fn parse_bool(s: &str) -> Result<bool> {
    match s {
        "1" => return Ok(true),
        "0" => return Ok(false),
        _ => {}
    }
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Ok(true),
        "false" | "no" | "off" => Ok(false),
        _ => Err(Errno::INVAL),
    }
}

pub fn get_str(prov: Option<&str>, name: &str) -> Result<String> {
    get_raw(prov, name).map(|(_, v)| v)
}

/// An `int` parameter's value: the `long` truncated to `int`, as the C assignment does.
pub fn to_int(s: &str) -> i32 {
    parse_long(s) as i32
}

/// A `size_t` parameter's value: negative values wrap, as the C conversion does.
pub fn to_size(s: &str) -> usize {
    parse_long(s) as usize
}

pub fn get_int(prov: Option<&str>, name: &str) -> Result<i64> {
    get_raw(prov, name).map(|(_, v)| i64::from(to_int(&v)))
}

pub fn get_size(prov: Option<&str>, name: &str) -> Result<usize> {
    get_raw(prov, name).map(|(_, v)| to_size(&v))
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
    fn names() {
        assert_eq!(
            env_name(Some("efa"), "tx_min_credits"),
            "FI_EFA_TX_MIN_CREDITS"
        );
        assert_eq!(env_name(None, "log_level"), "FI_LOG_LEVEL");
        assert_eq!(env_name(Some("core"), "log_level"), "FI_LOG_LEVEL");
    }

    #[test]
    fn strtol() {
        for (s, v) in [
            ("0x10", 16),
            ("0X1f", 31),
            ("010", 8),
            ("0600", 384),
            ("600", 600),
            ("-42abc", -42),
            ("  +7", 7),
            ("0x", 0),
            ("0xg", 0),
            ("09", 0),
            ("", 0),
            ("abc", 0),
            ("-1", -1),
            ("99999999999999999999", i64::MAX),
            ("-99999999999999999999", i64::MIN),
        ] {
            assert_eq!(parse_long(s), v, "{s:?}");
        }
    }

    #[test]
    fn booleans() {
        for s in ["1", "true", "TRUE", "Yes", "on"] {
            assert_eq!(parse_bool(s), Ok(true), "{s}");
        }
        for s in ["0", "false", "No", "OFF"] {
            assert_eq!(parse_bool(s), Ok(false), "{s}");
        }
        for s in ["y", "n", " 1", "2", "", "nope"] {
            assert_eq!(parse_bool(s), Err(Errno::INVAL), "{s:?}");
        }
    }

    #[test]
    fn undefined_and_unset() {
        assert_eq!(
            get_raw(Some("testprov"), "never_defined"),
            Err(Errno::NOENT)
        );
        define(Some("testprov"), "unset_knob", ParamType::Int, "x").unwrap();
        define(Some("testprov"), "unset_knob", ParamType::Int, "x").unwrap();
        assert_eq!(
            list()
                .iter()
                .filter(|p| p.name == "FI_TESTPROV_UNSET_KNOB")
                .count(),
            1
        );
        assert_eq!(get_int(Some("testprov"), "unset_knob"), Err(Errno::NODATA));
        // Names are matched as defined.
        assert_eq!(get_int(Some("testprov"), "UNSET_KNOB"), Err(Errno::NOENT));
        assert_eq!(
            define(Some("testprov"), "nohelp", ParamType::Int, ""),
            Err(Errno::INVAL)
        );
        assert_eq!(define(None, "", ParamType::Int, "h"), Err(Errno::INVAL));
    }

    #[test]
    fn provider_help_is_prefixed() {
        define(Some("helpprov"), "depth", ParamType::SizeT, "queue depth").unwrap();
        let p = lookup(Some("helpprov"), "depth").unwrap();
        assert_eq!(p.help, "helpprov: queue depth");
        assert_eq!(p.name, "FI_HELPPROV_DEPTH");
    }

    #[test]
    fn conversions() {
        assert_eq!(to_int("4294967297"), 1, "truncated to int");
        assert_eq!(to_int("-5"), -5);
        assert_eq!(to_size("-1"), usize::MAX);
        assert_eq!(to_size("0x100"), 256);
    }

    #[test]
    fn core_parameters_in_order() {
        define_core();
        let names: Vec<String> = list()
            .into_iter()
            .filter(|p| p.prov.is_none())
            .map(|p| p.name)
            .collect();
        let expected = [
            "FI_PREFER_SYSCONFIG",
            "FI_LOG_INTERVAL",
            "FI_LOG_LEVEL",
            "FI_LOG_PROV",
            "FI_LOG_SUBSYS",
            "FI_LOG_LOCATION",
            "FI_LOG_LOCATION_MODE",
            "FI_HOOK",
            "FI_HMEM",
            "FI_HMEM_DISABLE_P2P",
            "FI_MR_CACHE_MAX_SIZE",
            "FI_MR_CACHE_MAX_COUNT",
            "FI_MR_CACHE_MONITOR",
            "FI_MR_CUDA_CACHE_MONITOR_ENABLED",
            "FI_MR_ROCR_CACHE_MONITOR_ENABLED",
            "FI_MR_ZE_CACHE_MONITOR_ENABLED",
            "FI_PROVIDER",
            "FI_FORK_UNSAFE",
            "FI_UNIVERSE_SIZE",
            "FI_AV_REMOVE_CLEANUP",
            "FI_OFFLOAD_COLL_PROVIDER",
            "FI_PROVIDER_PATH",
        ];
        assert_eq!(&names[..expected.len()], expected);
    }

    #[test]
    fn conf_lines() {
        let c = parse_conf("FI_LOG_LEVEL=debug\n# comment\nFI_HMEM=\nFI_X=a=b\r\nnoequals\n");
        let got: Vec<(&str, &str)> = c
            .iter()
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [("FI_LOG_LEVEL", "debug"), ("FI_HMEM", ""), ("FI_X", "a=b")]
        );
        assert!(conf_path().ends_with("/libfabric.conf"));
    }
}
