//! Logging as upstream does it (abi-reference §4): `FI_LOG_LEVEL`, `FI_LOG_PROV`,
//! `FI_LOG_SUBSYS`, `FI_LOG_LOCATION`; nothing is written unless `FI_LOG_LEVEL` is set.
//!
//! Lines look like `libfabric:<pid>:<unix time>::<prov>:<subsys>:<func>():<line><<level>> msg`.

use std::fmt;
use std::io::Write;
use std::sync::{LazyLock, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum Level {
    Warn = 0,
    Trace = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Warn => "warn",
            Level::Trace => "trace",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    pub fn from_u32(v: u32) -> Option<Level> {
        Some(match v {
            0 => Level::Warn,
            1 => Level::Trace,
            2 => Level::Info,
            3 => Level::Debug,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Subsys {
    Core = 0,
    Fabric = 1,
    Domain = 2,
    EpCtrl = 3,
    EpData = 4,
    Av = 5,
    Cq = 6,
    Eq = 7,
    Mr = 8,
    Cntr = 9,
}

pub const SUBSYS_NAMES: [&str; 10] = ["core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr"];

impl Subsys {
    pub fn name(self) -> &'static str {
        SUBSYS_NAMES[self as usize]
    }
}

/// A comma list with optional leading `^` (negation of the whole list), as `FI_PROVIDER`.
#[derive(Clone, Debug, Default)]
pub struct NameFilter {
    negated: bool,
    names: Vec<String>,
}

impl NameFilter {
    pub fn parse(spec: Option<&str>) -> NameFilter {
        let Some(spec) = spec else {
            return NameFilter::default();
        };
        let (negated, list) = match spec.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, spec),
        };
        let names = list.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
        NameFilter { negated, names }
    }

    /// Whether the filter was given at all.
    pub fn is_set(&self) -> bool {
        self.negated || !self.names.is_empty()
    }

    pub fn is_negated(&self) -> bool {
        self.negated
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// An unset filter passes everything.
    pub fn passes(&self, name: &str) -> bool {
        if !self.is_set() {
            return true;
        }
        self.contains(name) != self.negated
    }
}

struct Config {
    /// Highest level written; None: logging off.
    level: Option<Level>,
    prov: NameFilter,
    subsys: NameFilter,
    sink: Mutex<Box<dyn Write + Send>>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

static CONFIG: LazyLock<Config> = LazyLock::new(|| {
    let level = env("FI_LOG_LEVEL").map(|s| match s.to_ascii_lowercase().as_str() {
        "trace" => Level::Trace,
        "info" => Level::Info,
        "debug" => Level::Debug,
        _ => Level::Warn,
    });
    let sink: Box<dyn Write + Send> = match env("FI_LOG_LOCATION").as_deref() {
        None | Some("stderr") | Some("") => Box::new(std::io::stderr()),
        Some("stdout") => Box::new(std::io::stdout()),
        Some(path) => open_log_file(path).unwrap_or_else(|| Box::new(std::io::stderr())),
    };
    Config {
        level,
        prov: NameFilter::parse(env("FI_LOG_PROV").as_deref()),
        subsys: NameFilter::parse(env("FI_LOG_SUBSYS").as_deref()),
        sink: Mutex::new(sink),
    }
});

/// `FI_LOG_LOCATION` naming a directory writes `ofi_<pid>.log` in it; a file must not exist yet.
fn open_log_file(path: &str) -> Option<Box<dyn Write + Send>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mode = env("FI_LOG_LOCATION_MODE").and_then(|m| u32::from_str_radix(m.trim_start_matches("0o"), 8).ok());
    let target = if std::path::Path::new(path).is_dir() {
        std::path::Path::new(path).join(format!("ofi_{}.log", std::process::id()))
    } else {
        std::path::PathBuf::from(path)
    };
    let f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode.unwrap_or(0o600)).open(target).ok()?;
    Some(Box::new(f))
}

/// `FI_LOG_INTERVAL`: minimum milliseconds between rate-limited lines (`fi_log_ready`).
pub fn interval_ms() -> u64 {
    static INTERVAL: LazyLock<u64> =
        LazyLock::new(|| env("FI_LOG_INTERVAL").map(|v| super::params::parse_long(&v).max(0) as u64).unwrap_or(2000));
    *INTERVAL
}

pub fn enabled(prov: &str, level: Level, subsys: Subsys) -> bool {
    let c = &*CONFIG;
    match c.level {
        Some(max) if level <= max => c.prov.passes(prov) && c.subsys.passes(subsys.name()),
        _ => false,
    }
}

/// Writes one line (the caller checked `enabled`).
pub fn write(prov: &str, level: Level, subsys: Subsys, func: &str, line: u32, msg: fmt::Arguments<'_>) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let text = format!(
        "libfabric:{}:{}::{}:{}:{}():{}<{}> {}",
        std::process::id(),
        now,
        prov,
        subsys.name(),
        func,
        line,
        level.name(),
        msg
    );
    let mut sink = CONFIG.sink.lock().unwrap_or_else(|e| e.into_inner());
    let _ = if text.ends_with('\n') { sink.write_all(text.as_bytes()) } else { writeln!(sink, "{text}") };
}

/// `fi_warn!(prov, Subsys::X, "fmt", args)`: log at warn level if enabled.
#[macro_export]
macro_rules! fi_log_at {
    ($level:expr, $prov:expr, $subsys:expr, $($arg:tt)*) => {
        if $crate::core::log::enabled($prov, $level, $subsys) {
            $crate::core::log::write($prov, $level, $subsys, module_path!().rsplit("::").next().unwrap_or(""), line!(), format_args!($($arg)*));
        }
    };
}
#[macro_export]
macro_rules! fi_warn { ($prov:expr, $subsys:expr, $($arg:tt)*) => { $crate::fi_log_at!($crate::core::log::Level::Warn, $prov, $subsys, $($arg)*) }; }
#[macro_export]
macro_rules! fi_info { ($prov:expr, $subsys:expr, $($arg:tt)*) => { $crate::fi_log_at!($crate::core::log::Level::Info, $prov, $subsys, $($arg)*) }; }
#[macro_export]
macro_rules! fi_dbg { ($prov:expr, $subsys:expr, $($arg:tt)*) => { $crate::fi_log_at!($crate::core::log::Level::Debug, $prov, $subsys, $($arg)*) }; }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_filters() {
        let f = NameFilter::parse(Some("efa,SHM"));
        assert!(f.passes("shm") && f.passes("efa") && !f.passes("tcp"));
        let f = NameFilter::parse(Some("^efa,shm"));
        assert!(!f.passes("shm") && !f.passes("efa") && f.passes("tcp"));
        assert!(NameFilter::parse(None).passes("anything"));
    }
}
