//! What a load run is asked to do ([`LoadConfig`]) and why it may refuse
//! ([`LoadError`]).
//!
//! The configuration is plain data so that the experiment driver can build it
//! directly; `vidbench load` builds it from its command line. Checks that need
//! the sessions (paths, ranges, files known to the library) happen in
//! [`crate::play`] before anything is sent.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use vidbench_library::Library;

/// The longest time a setting or a session file may give (a timeout, a
/// pace, a duration): 30 days. Longer is a typo, and far longer would
/// overflow the clock's arithmetic.
pub const MAX_SECONDS: f64 = 30.0 * 86400.0;

/// The lowest session rate taken: one every 1,000 s on average.
pub(crate) const MIN_RATE: f64 = 1e-3;

/// When the load client stops starting new sessions. Sessions already started
/// always run to their end (each request has a deadline, so that is bounded).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// Play every session of the list once.
    AllSessions,
    /// Stop starting sessions this many seconds after the run began.
    Duration(f64),
    /// Start at most this many sessions.
    Sessions(u64),
}

/// The receive buffer (`SO_RCVBUF`) asked for on each session's socket.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiveBuffer {
    /// Capped sessions get what a real client on their link would need in
    /// flight: the rate times [`ReceiveBuffer::AUTO_WINDOW_S`], clamped to
    /// [`ReceiveBuffer::AUTO_MIN`]..=[`ReceiveBuffer::AUTO_MAX`]; uncapped
    /// sessions keep the kernel's autotuning.
    Auto,
    /// This many bytes for every session (the kernel doubles it for its own
    /// bookkeeping, as `socket(7)` says).
    Bytes(u32),
}

impl ReceiveBuffer {
    /// Round trip the papers' links had (2 x 50 ms one-way delay).
    pub const AUTO_WINDOW_S: f64 = 0.1;
    pub const AUTO_MIN: u32 = 16 * 1024;
    pub const AUTO_MAX: u32 = 256 * 1024;

    /// The size to ask for a session capped at `rate_bps` (0 = uncapped);
    /// `None` leaves the socket's default.
    pub fn for_rate(self, rate_bps: u64) -> Option<u32> {
        match self {
            ReceiveBuffer::Bytes(b) => Some(b),
            ReceiveBuffer::Auto if rate_bps == 0 => None,
            ReceiveBuffer::Auto => {
                let window = rate_bps as f64 / 8.0 * Self::AUTO_WINDOW_S;
                Some((window as u32).clamp(Self::AUTO_MIN, Self::AUTO_MAX))
            }
        }
    }
}

/// Everything a load run needs besides the sessions.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// `http://host[:port][/prefix]`; the prefix is put before every request path.
    pub server: String,
    /// Offered session rate: session starts follow a Poisson process at this
    /// many sessions per second.
    pub rate: f64,
    pub stop: Stop,
    /// Directory for `requests.csv`, `sessions.csv`, `intervals.csv` and
    /// `summary.json`; created if missing, refused if it already holds results.
    pub out_dir: PathBuf,
    /// Check every received byte against the library's generated content.
    pub verify: Option<Library>,
    /// Replace every request's own deadline with this many seconds.
    pub timeout_override: Option<f64>,
    /// Seed of the arrival process: the same seed gives the same schedule.
    pub seed: u64,
    /// Length of the throughput samples (`intervals.csv`), seconds.
    pub interval_s: f64,
    pub receive_buffer: ReceiveBuffer,
    /// Stop starting sessions and end the active ones (recording them as
    /// `interrupted`) on Ctrl-C, then write the results as usual.
    pub handle_interrupt: bool,
    /// Where the sessions came from, for the summary only.
    pub sessions_source: Option<String>,
    /// The instant the run's times count from (default: when the load
    /// starts); a driver that samples other counters during the run passes
    /// its own so that both share one clock.
    pub epoch: Option<std::time::Instant>,
}

impl LoadConfig {
    /// A configuration with the defaults of `vidbench load`: play all
    /// sessions once, seed 1, 5-second samples, automatic receive buffers.
    pub fn new(server: impl Into<String>, rate: f64, out_dir: impl Into<PathBuf>) -> LoadConfig {
        LoadConfig {
            server: server.into(),
            rate,
            stop: Stop::AllSessions,
            out_dir: out_dir.into(),
            verify: None,
            timeout_override: None,
            seed: 1,
            interval_s: 5.0,
            receive_buffer: ReceiveBuffer::Auto,
            handle_interrupt: false,
            sessions_source: None,
            epoch: None,
        }
    }

    pub(crate) fn check(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::InvalidConfig(m));
        if !(self.rate.is_finite() && self.rate >= MIN_RATE) {
            return bad(format!("the session rate must be a number of sessions/s of at least {MIN_RATE}, not {}", self.rate));
        }
        match self.stop {
            Stop::Duration(d) if !(d.is_finite() && d > 0.0 && d <= MAX_SECONDS) => {
                return bad(format!("the duration must be a positive number of seconds up to {MAX_SECONDS} (30 days), not {d}"))
            }
            Stop::Sessions(0) => return bad("the session count must be at least 1".into()),
            _ => {}
        }
        if let Some(t) = self.timeout_override {
            if !(t.is_finite() && t > 0.0 && t <= MAX_SECONDS) {
                return bad(format!("the timeout must be a positive number of seconds up to {MAX_SECONDS}, not {t}"));
            }
        }
        if !(self.interval_s.is_finite() && (0.1..=MAX_SECONDS).contains(&self.interval_s)) {
            return bad(format!("the sample interval must be from 0.1 s to {MAX_SECONDS} s, not {}", self.interval_s));
        }
        if let ReceiveBuffer::Bytes(b) = self.receive_buffer {
            if b < 1024 {
                return bad(format!("a receive buffer of {b} bytes is too small (at least 1024)"));
            }
        }
        Ok(())
    }
}

/// The server as the client uses it: where to connect and what to send.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub addr: SocketAddr,
    /// Value of the `Host` header.
    pub host_header: String,
    /// Path prefix without a trailing `/` (empty for none).
    pub prefix: String,
}

impl Server {
    /// Parses and resolves `http://host[:port][/prefix]`.
    pub fn resolve(url: &str) -> Result<Server, LoadError> {
        let bad = |reason: &str| LoadError::BadServerUrl { url: url.to_owned(), reason: reason.to_owned() };
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if parsed.scheme() != "http" {
            return Err(bad("only http:// servers are supported"));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(bad("the server URL may not have a query or fragment"));
        }
        let host = parsed.host_str().ok_or_else(|| bad("the URL has no host"))?.to_owned();
        let port = parsed.port_or_known_default().unwrap_or(80);
        let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
        let addr = (lookup_host, port)
            .to_socket_addrs()
            .map_err(|error| LoadError::Resolve { host: host.clone(), error })?
            .next()
            .ok_or_else(|| LoadError::Resolve {
                host: host.clone(),
                error: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
            })?;
        let host_header = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        };
        let prefix = parsed.path().trim_end_matches('/').to_owned();
        Ok(Server { addr, host_header, prefix })
    }
}

/// Why a load run could not be done. Failures of individual sessions are not
/// errors: they are results, counted in the summary.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("invalid load configuration: {0}")]
    InvalidConfig(String),
    #[error("bad server URL {url:?}: {reason}")]
    BadServerUrl { url: String, reason: String },
    // The io errors are part of the message, not a `source`, so that error
    // chains (anyhow's `{:#}`) do not print them twice.
    #[error("cannot resolve server host {host:?}: {error}")]
    Resolve { host: String, error: std::io::Error },
    #[error("the server at {addr} ({url}) is unreachable: {error}; is it running and listening there?")]
    Unreachable { url: String, addr: SocketAddr, error: std::io::Error },
    /// A session file that cannot be read; the message names the file and line.
    #[error(transparent)]
    Sessions(#[from] vidbench_library::SessionIoError),
    #[error("session {session}, request {request}: {message}")]
    BadSession { session: u64, request: usize, message: String },
    #[error("there are no sessions to play")]
    NoSessions,
    #[error("result directory {path}: {message}")]
    OutputDir { path: PathBuf, message: String },
    #[error("cannot write {path}: {error}")]
    Output { path: PathBuf, error: std::io::Error },
    #[error("cannot start the load client's event loop: {0}")]
    Runtime(std::io::Error),
}
