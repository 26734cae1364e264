//! Logging as fi_log(3) / fi_provider(3) describe it (abi-reference §4).
//!
//! - `FI_LOG_LEVEL` = warn | trace | info | debug (case-insensitive; any other text means warn);
//!   unset: nothing is logged at all.
//! - `FI_LOG_PROV`, `FI_LOG_SUBSYS`: name filters (comma list, leading `^` negates the list).
//!   The provider filter applies to providers, never to the core.
//! - `FI_LOG_LOCATION` = stderr (default, also for an empty value) | stdout | a file that must not
//!   exist yet | a directory (the file `ofi_<pid>.log` in it); `FI_LOG_LOCATION_MODE` is the
//!   file mode (strtol base 0, default 0600). A location that cannot be opened falls back to
//!   stderr with a warning.
//! - `FI_LOG_INTERVAL`: milliseconds between rate-limited lines (`fi_log_ready`), default 2000.
//!
//! Lines look like `libfabric:<pid>:<unix time>:<prefix>:<prov>:<subsys>:<func>():<line><<level>> msg`
//! (the prefix is always empty here).
//!
//! An application may replace the three logging operations (`fi_open("logging")` + bind, see
//! `ffi::log`); the replacement is installed here as a [`LogSink`] so that the lines of the Rust
//! providers go through it too.

use std::fmt;
use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use super::params;
use crate::abi::consts::FI_LOG_PROV_FILTERED;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum Level {
    Warn = 0,
    Trace = 1,
    Info = 2,
    Debug = 3,
}

pub const LEVEL_NAMES: [&str; 4] = ["warn", "trace", "info", "debug"];

impl Level {
    pub fn name(self) -> &'static str {
        LEVEL_NAMES[self as usize]
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

    /// `FI_LOG_LEVEL` text: a level name (any case), anything else warn.
    pub fn parse(s: &str) -> Level {
        match s.to_ascii_lowercase().as_str() {
            "trace" => Level::Trace,
            "info" => Level::Info,
            "debug" => Level::Debug,
            _ => Level::Warn,
        }
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

pub const SUBSYS_NAMES: [&str; 10] = [
    "core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr",
];

impl Subsys {
    pub const ALL: [Subsys; 10] = [
        Subsys::Core,
        Subsys::Fabric,
        Subsys::Domain,
        Subsys::EpCtrl,
        Subsys::EpData,
        Subsys::Av,
        Subsys::Cq,
        Subsys::Eq,
        Subsys::Mr,
        Subsys::Cntr,
    ];

    pub fn name(self) -> &'static str {
        SUBSYS_NAMES[self as usize]
    }

    pub fn from_u32(v: u32) -> Option<Subsys> {
        Subsys::ALL.get(v as usize).copied()
    }
}

/// A name filter as `FI_PROVIDER`, `FI_LOG_PROV` and `FI_LOG_SUBSYS` take it: a comma-separated
/// list, the whole of it negated by a leading `^`. Names compare case-insensitively and are
/// taken verbatim (no trimming; an empty entry is a name that matches nothing), as fi_provider(7)
/// and fi_fabric(7) specify the variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameFilter {
    negated: bool,
    /// None: no filter was given.
    names: Option<Vec<String>>,
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
        NameFilter {
            negated,
            names: Some(list.split(',').map(str::to_string).collect()),
        }
    }

    /// Whether the filter was given at all.
    pub fn is_set(&self) -> bool {
        self.names.is_some()
    }

    pub fn is_negated(&self) -> bool {
        self.negated
    }

    pub fn names(&self) -> &[String] {
        self.names.as_deref().unwrap_or(&[])
    }

    /// An exact (case-insensitive) entry for `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.names().iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// Whether `name` survives the filter; an unset filter passes everything.
    pub fn passes(&self, name: &str) -> bool {
        if !self.is_set() {
            return true;
        }
        self.contains(name) != self.negated
    }

    /// `FI_PROVIDER` applied to a core provider at registration: a positive list keeps the
    /// providers it names, also through a layered entry (`tcp;ofi_rxm` keeps `tcp`); a negative
    /// list hides exactly the names it lists.
    pub fn keeps_provider(&self, name: &str) -> bool {
        if !self.is_set() {
            return true;
        }
        if self.contains(name) {
            return !self.negated;
        }
        if self.negated {
            return true;
        }
        self.names().iter().any(|n| layered_over(n, name))
    }

    /// `FI_PROVIDER` applied to the `prov_name` of a result: exact names, and an entry `tcp` also
    /// admits `tcp;ofi_rxm` (extra layering on top of what was asked for).
    pub fn keeps_result(&self, prov_name: &str) -> bool {
        if !self.is_set() {
            return true;
        }
        let named =
            self.contains(prov_name) || self.names().iter().any(|n| layered_over(prov_name, n));
        named != self.negated
    }
}

/// Whether `layered` is `<core>;<something>`.
fn layered_over(layered: &str, core: &str) -> bool {
    layered.len() > core.len()
        && layered.as_bytes()[core.len()] == b';'
        && layered[..core.len()].eq_ignore_ascii_case(core)
}

/// What an imported `fid_logging` replaces (fi_provider(3), `fi_import_log`): whether a line
/// is wanted, the rate limit, and the writing itself. `flags` carries `FI_LOG_PROV_FILTERED`.
pub trait LogSink: Send + Sync {
    fn enabled(&self, prov: &str, level: Level, subsys: Subsys, flags: u64) -> bool;
    fn ready(
        &self,
        prov: &str,
        level: Level,
        subsys: Subsys,
        flags: u64,
        showtime: &mut u64,
    ) -> bool;
    fn log(&self, prov: &str, level: Level, subsys: Subsys, func: &str, line: u32, msg: &str);
}

static SINK: RwLock<Option<Arc<dyn LogSink>>> = RwLock::new(None);

/// Installs (Some) or removes (None) the application's logging operations.
pub fn set_sink(sink: Option<Arc<dyn LogSink>>) {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = sink;
}

fn sink() -> Option<Arc<dyn LogSink>> {
    SINK.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Where lines go.
enum Location {
    Stderr,
    Stdout,
    File(std::fs::File),
}

impl Location {
    fn write_all(&mut self, b: &[u8]) {
        let _ = match self {
            Location::Stderr => std::io::stderr().write_all(b),
            Location::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(b).and_then(|()| out.flush())
            }
            Location::File(f) => f.write_all(b),
        };
    }
}

/// The logging configuration, read once from the parameters.
pub struct Config {
    /// Highest level written; None: logging off.
    level: Option<Level>,
    prov: NameFilter,
    subsys: NameFilter,
    interval_ms: i32,
    location: Mutex<Location>,
}

impl Config {
    /// The configuration `get` (a parameter lookup by core parameter name, e.g. `"log_level"`)
    /// describes; also returns the warning to log if the location could not be opened.
    fn build(get: &dyn Fn(&str) -> Option<String>) -> (Config, Option<String>) {
        let mode = get("log_location_mode")
            .map(|m| params::parse_long(&m) as i32 as u32)
            .unwrap_or(0o600);
        let (location, warning) = match get("log_location") {
            None => (Location::Stderr, None),
            Some(s) => match open_location(&s, mode) {
                Ok(l) => (l, None),
                Err(e) => (
                    Location::Stderr,
                    Some(format!(
                        "cannot open log location '{s}' ({e}); logging to stderr\n"
                    )),
                ),
            },
        };
        let config = Config {
            level: get("log_level").map(|s| Level::parse(&s)),
            prov: NameFilter::parse(get("log_prov").as_deref()),
            subsys: NameFilter::parse(get("log_subsys").as_deref()),
            interval_ms: get("log_interval").map_or(2000, |v| params::parse_long(&v) as i32),
            location: Mutex::new(location),
        };
        (config, warning)
    }

    /// The default test of fi_log_enabled: level and subsystem enabled, provider not filtered.
    fn enabled(&self, level: Level, subsys: Subsys, flags: u64) -> bool {
        flags & FI_LOG_PROV_FILTERED == 0
            && self.level.is_some_and(|max| level <= max)
            && self.subsys.passes(subsys.name())
    }
}

/// `FI_LOG_LOCATION` (abi-reference §4): stderr, stdout, a new file, or `ofi_<pid>.log` in a
/// directory; files are created exclusively with `mode`.
fn open_location(spec: &str, mode: u32) -> std::io::Result<Location> {
    use std::os::unix::fs::OpenOptionsExt;
    match spec {
        "" | "stderr" => return Ok(Location::Stderr),
        "stdout" => return Ok(Location::Stdout),
        _ => {}
    }
    let path = std::path::Path::new(spec);
    let target = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => path.join(format!("ofi_{}.log", std::process::id())),
        Ok(_) => path.to_path_buf(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(e),
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(target)?;
    Ok(Location::File(f))
}

static CONFIG: LazyLock<Config> = LazyLock::new(|| {
    params::define_core();
    let (config, warning) = Config::build(&|name| params::get_str(None, name).ok());
    if let Some(w) = warning
        && config.enabled(Level::Warn, Subsys::Core, 0)
    {
        let line = format_line("core", Level::Warn, Subsys::Core, "log_init", line!(), &w);
        config
            .location
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(line.as_bytes());
    }
    config
});

/// Reads the configuration now (the library's initialisation does this once).
pub fn init() {
    LazyLock::force(&CONFIG);
}

/// `FI_LOG_INTERVAL` in milliseconds.
pub fn interval_ms() -> u64 {
    CONFIG.interval_ms.max(0) as u64
}

/// The `flags` a provider's lines carry: `FI_LOG_PROV_FILTERED` when `FI_LOG_PROV` excludes the
/// provider. The core is never filtered by provider.
pub fn prov_flags(prov: &str) -> u64 {
    if prov != "core" && !CONFIG.prov.passes(prov) {
        FI_LOG_PROV_FILTERED
    } else {
        0
    }
}

/// The library's own `enabled` operation (what an import replaces).
pub fn default_enabled(level: Level, subsys: Subsys, flags: u64) -> bool {
    CONFIG.enabled(level, subsys, flags)
}

/// The library's own `ready` operation: enabled, and the rate limit allows another line.
/// `enabled` is the current enabled operation (possibly the application's).
pub fn default_ready(enabled: bool, showtime: &mut u64) -> bool {
    if !enabled {
        return false;
    }
    let now = now_ms();
    if now >= *showtime {
        *showtime = now.wrapping_add(CONFIG.interval_ms as i64 as u64);
        return true;
    }
    false
}

/// The library's own `log` operation: one line to the log location, `msg` verbatim.
pub fn default_log(prov: &str, level: Level, subsys: Subsys, func: &str, line: u32, msg: &str) {
    let text = format_line(prov, level, subsys, func, line, msg);
    CONFIG
        .location
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .write_all(text.as_bytes());
}

fn format_line(
    prov: &str,
    level: Level,
    subsys: Subsys,
    func: &str,
    line: u32,
    msg: &str,
) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "libfabric:{}:{}:{}:{}:{}:{}():{}<{}> {}",
        std::process::id(),
        now,
        "",
        prov,
        subsys.name(),
        func,
        line,
        level.name(),
        msg
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether a line of `prov` at `level` in `subsys` is wanted (through the application's
/// operations if it imported some).
pub fn enabled(prov: &str, level: Level, subsys: Subsys) -> bool {
    let flags = prov_flags(prov);
    match sink() {
        Some(s) => s.enabled(prov, level, subsys, flags),
        None => default_enabled(level, subsys, flags),
    }
}

/// `fi_log_ready`: enabled and not rate-limited (`showtime` holds the next allowed time, ms).
pub fn ready(prov: &str, level: Level, subsys: Subsys, showtime: &mut u64) -> bool {
    let flags = prov_flags(prov);
    match sink() {
        Some(s) => s.ready(prov, level, subsys, flags, showtime),
        None => default_ready(default_enabled(level, subsys, flags), showtime),
    }
}

/// Writes one line (the caller checked `enabled`); a newline is added if `msg` lacks one.
pub fn write(
    prov: &str,
    level: Level,
    subsys: Subsys,
    func: &str,
    line: u32,
    msg: fmt::Arguments<'_>,
) {
    let mut text = msg.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    match sink() {
        Some(s) => s.log(prov, level, subsys, func, line, &text),
        None => default_log(prov, level, subsys, func, line, &text),
    }
}

/// `fi_log_at!(level, prov, Subsys::X, "fmt", args)`: log if enabled.
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
macro_rules! fi_trace { ($prov:expr, $subsys:expr, $($arg:tt)*) => { $crate::fi_log_at!($crate::core::log::Level::Trace, $prov, $subsys, $($arg)*) }; }
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
        assert!(!NameFilter::parse(None).is_set());
    }

    #[test]
    fn filter_entries_are_verbatim() {
        // No trimming: " efa" is not "efa".
        let f = NameFilter::parse(Some("shm, efa"));
        assert!(f.passes("shm") && !f.passes("efa"));
        // An empty value is a filter naming nothing: everything is excluded.
        let f = NameFilter::parse(Some(""));
        assert!(f.is_set() && !f.passes("shm") && !f.keeps_provider("efa"));
        // "^" alone excludes nothing.
        let f = NameFilter::parse(Some("^"));
        assert!(f.is_negated() && f.passes("shm"));
    }

    #[test]
    fn provider_filters_and_layering() {
        let f = NameFilter::parse(Some("tcp"));
        assert!(f.keeps_provider("tcp") && !f.keeps_provider("shm"));
        assert!(f.keeps_result("tcp") && f.keeps_result("TCP;ofi_rxm"));
        assert!(!f.keeps_result("ofi_rxm") && !f.keeps_result("tcpx"));

        let f = NameFilter::parse(Some("tcp;ofi_rxm"));
        assert!(
            f.keeps_provider("tcp"),
            "a layered entry keeps its core provider"
        );
        assert!(!f.keeps_result("tcp") && f.keeps_result("tcp;ofi_rxm"));

        let f = NameFilter::parse(Some("ofi_rxm"));
        assert!(!f.keeps_provider("tcp") && !f.keeps_result("tcp;ofi_rxm"));

        let f = NameFilter::parse(Some("^tcp;ofi_rxm"));
        assert!(
            f.keeps_provider("tcp"),
            "a negated layered entry does not hide the core"
        );
        assert!(f.keeps_result("tcp") && !f.keeps_result("tcp;ofi_rxm"));

        let f = NameFilter::parse(Some("^shm"));
        assert!(!f.keeps_provider("shm") && f.keeps_provider("efa"));
        assert!(!f.keeps_result("shm") && !f.keeps_result("shm;ofi_rxm") && f.keeps_result("efa"));
    }

    #[test]
    fn levels_and_subsystems() {
        assert_eq!(Level::parse("DEBUG"), Level::Debug);
        assert_eq!(
            Level::parse("error"),
            Level::Warn,
            "runfabtests sets 'error'"
        );
        assert_eq!(Level::parse(""), Level::Warn);
        assert_eq!(Subsys::from_u32(4), Some(Subsys::EpData));
        assert_eq!(Subsys::from_u32(10), None);
        assert_eq!(Level::from_u32(4), None);
    }

    fn config(vars: &[(&str, &str)]) -> (Config, Option<String>) {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::build(&move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn unset_level_logs_nothing() {
        let (c, w) = config(&[]);
        assert!(w.is_none());
        assert!(!c.enabled(Level::Warn, Subsys::Core, 0));
        assert_eq!(c.interval_ms, 2000);
    }

    #[test]
    fn level_mask_and_filters() {
        let (c, _) = config(&[("log_level", "Info"), ("log_subsys", "^cq")]);
        assert!(c.enabled(Level::Warn, Subsys::Core, 0));
        assert!(c.enabled(Level::Info, Subsys::Mr, 0));
        assert!(!c.enabled(Level::Debug, Subsys::Mr, 0));
        assert!(!c.enabled(Level::Warn, Subsys::Cq, 0));
        assert!(!c.enabled(Level::Warn, Subsys::Core, FI_LOG_PROV_FILTERED));
        let (c, _) = config(&[("log_level", "warn"), ("log_interval", "0x10")]);
        assert!(!c.enabled(Level::Trace, Subsys::Core, 0));
        assert_eq!(c.interval_ms, 16);
    }

    #[test]
    fn locations() {
        let dir = std::env::temp_dir().join(format!("fabric-logtest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.to_str().unwrap();

        // A directory: ofi_<pid>.log inside it, created with the requested mode.
        let (c, w) = config(&[("log_location", d), ("log_location_mode", "0640")]);
        assert!(w.is_none());
        assert!(matches!(*c.location.lock().unwrap(), Location::File(_)));
        let file = dir.join(format!("ofi_{}.log", std::process::id()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o022, 0o640 & !0o022, "mode 0640 (less the umask)");

        // The same file again: it exists, so the location falls back to stderr with a warning.
        let (c, w) = config(&[("log_location", file.to_str().unwrap())]);
        assert!(matches!(*c.location.lock().unwrap(), Location::Stderr));
        assert!(w.unwrap().contains("stderr"));

        // A new file is written to; a line has upstream's shape.
        let path = dir.join("new.log");
        let (c, _) = config(&[("log_location", path.to_str().unwrap())]);
        let line = format_line("efa", Level::Warn, Subsys::Cq, "poll", 12, "hello\n");
        c.location.lock().unwrap().write_all(line.as_bytes());
        let text = std::fs::read_to_string(&path).unwrap();
        let fields: Vec<&str> = text.splitn(8, ':').collect();
        assert_eq!(fields[0], "libfabric");
        assert_eq!(fields[1], std::process::id().to_string());
        assert!(fields[2].parse::<u64>().is_ok());
        assert_eq!(fields[3], "");
        assert_eq!(&fields[4..7], ["efa", "cq", "poll()"]);
        assert_eq!(fields[7], "12<warn> hello\n");

        for (spec, stdout) in [("stdout", true), ("stderr", false), ("", false)] {
            let (c, w) = config(&[("log_location", spec)]);
            assert!(w.is_none());
            let l = c.location.lock().unwrap();
            assert_eq!(matches!(*l, Location::Stdout), stdout);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rate_limit() {
        let mut showtime = 0;
        assert!(default_ready(true, &mut showtime));
        assert!(showtime >= now_ms());
        assert!(!default_ready(true, &mut showtime), "within the interval");
        let mut showtime = 0;
        assert!(!default_ready(false, &mut showtime));
        assert_eq!(showtime, 0);
    }

    #[test]
    fn core_is_never_provider_filtered() {
        assert_eq!(prov_flags("core"), 0);
    }
}
