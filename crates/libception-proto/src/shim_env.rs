//! Rust mirror of `native/include/libception/shim.h`: the environment the
//! Deception shim reads, and [`ShimEnv`], the one place that builds it.
//!
//! The C header is the source of truth for the names and the modes
//! (`tests/layout_vs_c.rs` compiles a program against it and compares).
//! [`ShimEnv::vars`] sets only what the chosen mode reads, so that a variable
//! in a recorded setup always meant something to the shim that saw it.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// `LCP_ENV_*`: the names of the variables.
pub mod var {
    /// `LCP_ENV_MODE`.
    pub const MODE: &str = "LIBCEPTION_MODE";
    /// `LCP_ENV_SOCKET` (= `LCP_SOCKET_ENV`).
    pub const SOCKET: &str = crate::SOCKET_ENV;
    /// `LCP_ENV_TIMEOUT_MS`.
    pub const TIMEOUT_MS: &str = "LIBCEPTION_TIMEOUT_MS";
    /// `LCP_ENV_PATIENCE_MS`.
    pub const PATIENCE_MS: &str = "LIBCEPTION_PATIENCE_MS";
    /// `LCP_ENV_PREFETCH`.
    pub const PREFETCH: &str = "LIBCEPTION_PREFETCH";
    /// `LCP_ENV_MAX_REQUEST`.
    pub const MAX_REQUEST: &str = "LIBCEPTION_MAX_REQUEST";
    /// `LCP_ENV_STATS`.
    pub const STATS: &str = "LIBCEPTION_STATS";
    /// `LCP_ENV_STATS_INTERVAL_MS`.
    pub const STATS_INTERVAL_MS: &str = "LIBCEPTION_STATS_INTERVAL_MS";
    /// `LCP_ENV_WINDOW_MS`.
    pub const WINDOW_MS: &str = "LIBCEPTION_WINDOW_MS";
    /// `LCP_ENV_FORCE_CHECK`.
    pub const FORCE_CHECK: &str = "LIBCEPTION_FORCE_CHECK";
    /// `LCP_ENV_DAEMON_UID`: a daemon uid the shim trusts besides root.
    pub const DAEMON_UID: &str = "LIBCEPTION_DAEMON_UID";
    /// Every name, in the header's order.
    pub const ALL: [&str; 11] = [MODE, SOCKET, TIMEOUT_MS, PATIENCE_MS, PREFETCH, MAX_REQUEST, STATS, STATS_INTERVAL_MS, WINDOW_MS, FORCE_CHECK, DAEMON_UID];
}

/// `LCP_CONF_PATH`: the system-wide settings file, the only source of settings
/// in AT_SECURE (setuid) processes.
pub const CONF_PATH: &str = "/etc/libception/shim.conf";

/// `enum lcp_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u32)]
pub enum Mode {
    /// `LCP_MODE_OFF`: interpose nothing.
    Off = 0,
    /// `LCP_MODE_FULL`: the daemon serializes and prefetches.
    Full = 1,
    /// `LCP_MODE_SERIALIZE`: the daemon serializes, reads only the range.
    Serialize = 2,
    /// `LCP_MODE_PREFETCH`: no daemon, read ahead in-process.
    Prefetch = 3,
    /// `LCP_MODE_TRACK`: no change to I/O, statistics only.
    Track = 4,
}

impl Mode {
    /// Every mode, in the header's order.
    pub const ALL: [Mode; 5] = [Mode::Off, Mode::Full, Mode::Serialize, Mode::Prefetch, Mode::Track];

    /// `LCP_MODE_NAME_*`: the value of `LIBCEPTION_MODE`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Full => "full",
            Mode::Serialize => "serialize",
            Mode::Prefetch => "prefetch",
            Mode::Track => "track",
        }
    }

    /// Whether the shim talks to a daemon in this mode.
    pub fn needs_daemon(self) -> bool {
        matches!(self, Mode::Full | Mode::Serialize)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name the shim does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Libception mode {0:?}; one of off, full, serialize, prefetch, track")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    /// Case-insensitive, as the shim reads it.
    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        Mode::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(s.trim())).ok_or_else(|| UnknownMode(s.to_string()))
    }
}

/// What a process started under the shim is told. Fields a mode does not read
/// are left out of [`vars`](ShimEnv::vars) whatever they hold.
#[derive(Debug, Clone, PartialEq)]
pub struct ShimEnv {
    /// The shim library, put first in `LD_PRELOAD`.
    pub shim: PathBuf,
    pub mode: Mode,
    /// Daemon socket (full, serialize); unset: the shim's default path.
    pub socket: Option<PathBuf>,
    /// In-process read-ahead in bytes (prefetch mode).
    pub prefetch: Option<u64>,
    /// Bound on one daemon round trip (full, serialize).
    pub timeout_ms: Option<u64>,
    /// The bound stretched while the daemon answers other threads (full, serialize).
    pub patience_ms: Option<u64>,
    /// Statistics file written at exit, `%p` = pid (every mode but off).
    pub stats: Option<PathBuf>,
    /// Also rewrite the statistics file while running, at most this often
    /// (with `stats`; unset: at exit only).
    pub stats_interval_ms: Option<u64>,
}

impl ShimEnv {
    /// A shim in `mode` with every optional setting at the shim's default.
    pub fn new(shim: impl Into<PathBuf>, mode: Mode) -> ShimEnv {
        ShimEnv { shim: shim.into(), mode, socket: None, prefetch: None, timeout_ms: None, patience_ms: None, stats: None, stats_interval_ms: None }
    }

    /// The variables to set: `LD_PRELOAD` with the shim first and
    /// `existing_preload` kept after it, then the `LIBCEPTION_*` variables the
    /// mode reads.
    pub fn vars(&self, existing_preload: Option<OsString>) -> Vec<(&'static str, OsString)> {
        let mut preload = OsString::from(self.shim.as_os_str());
        if let Some(old) = existing_preload.filter(|o| !o.is_empty()) {
            preload.push(":");
            preload.push(old);
        }
        let mut vars = vec![("LD_PRELOAD", preload), (var::MODE, self.mode.name().into())];
        if self.mode.needs_daemon() {
            if let Some(s) = &self.socket {
                vars.push((var::SOCKET, s.into()));
            }
            if let Some(t) = self.timeout_ms {
                vars.push((var::TIMEOUT_MS, t.to_string().into()));
            }
            if let Some(p) = self.patience_ms {
                vars.push((var::PATIENCE_MS, p.to_string().into()));
            }
        }
        if self.mode == Mode::Prefetch {
            if let Some(p) = self.prefetch {
                vars.push((var::PREFETCH, p.to_string().into()));
            }
        }
        if self.mode != Mode::Off {
            if let Some(s) = &self.stats {
                vars.push((var::STATS, s.into()));
                if let Some(i) = self.stats_interval_ms {
                    vars.push((var::STATS_INTERVAL_MS, i.to_string().into()));
                }
            }
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(env: &ShimEnv) -> Vec<&'static str> {
        env.vars(None).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn modes_parse_by_name_in_any_case() {
        for m in Mode::ALL {
            assert_eq!(m.name().to_uppercase().parse::<Mode>(), Ok(m));
        }
        assert!("fast".parse::<Mode>().unwrap_err().to_string().contains("\"fast\""));
    }

    #[test]
    fn only_what_the_mode_reads_is_set() {
        let full = ShimEnv {
            socket: Some("/s".into()),
            prefetch: Some(4096),
            timeout_ms: Some(10),
            patience_ms: Some(100),
            stats: Some("/st".into()),
            stats_interval_ms: Some(1000),
            ..ShimEnv::new("/lib.so", Mode::Full)
        };
        assert_eq!(names(&full), ["LD_PRELOAD", var::MODE, var::SOCKET, var::TIMEOUT_MS, var::PATIENCE_MS, var::STATS, var::STATS_INTERVAL_MS]);
        let prefetch = ShimEnv { mode: Mode::Prefetch, ..full.clone() };
        assert_eq!(names(&prefetch), ["LD_PRELOAD", var::MODE, var::PREFETCH, var::STATS, var::STATS_INTERVAL_MS]);
        // An interval without a file means nothing to the shim.
        let no_file = ShimEnv { stats: None, ..full.clone() };
        assert!(!names(&no_file).contains(&var::STATS_INTERVAL_MS));
        let off = ShimEnv { mode: Mode::Off, ..full };
        assert_eq!(names(&off), ["LD_PRELOAD", var::MODE]);
    }

    #[test]
    fn preload_is_prepended_never_replaced() {
        let env = ShimEnv::new("/x/libdeception.so", Mode::Track);
        let preload = |old: Option<&str>| env.vars(old.map(OsString::from)).remove(0).1;
        assert_eq!(preload(None), "/x/libdeception.so");
        assert_eq!(preload(Some("")), "/x/libdeception.so");
        assert_eq!(preload(Some("/a.so:/b.so")), "/x/libdeception.so:/a.so:/b.so");
    }
}
