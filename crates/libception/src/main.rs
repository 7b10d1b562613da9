//! `libception`: the Reception daemon and its CLI (`daemon`, `stat`, `fetch`,
//! `run`). Argument parsing and logging set-up here, the other subcommands in
//! `cli/`; the daemon itself is the library's.

mod cli;

use anyhow::{Context, Result};
use clap::{ArgAction, Parser, Subcommand};
use cli::run::RunOptions;
use libception::parse_size;
use libception::DaemonConfig;
use libception_proto::{AdaptiveParams, BitrateScale, Mode, ParamError, Prefetch};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `--queue-order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum QueueOrderArg {
    Fifo,
    Position,
}

/// `--reply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ReplyArg {
    Range,
    Read,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PromoteArg {
    Off,
    On,
    Auto,
}

#[derive(Parser, Debug)]
#[command(
    name = "libception",
    version,
    about = "Reception: serializes and prefetches disk reads for programs run under the Deception shim",
    long_about = "Reception, the daemon half of Libception. Programs run with libdeception.so in \
LD_PRELOAD ask it to fetch file ranges that are not in the page cache; it reads them one at a \
time per physical disk, extended to the prefetch size, so that many small interleaved reads \
become a few long sequential ones. See libception(1)."
)]
struct Cli {
    /// More log output: -v debug, -vv trace (default: info for the daemon)
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// Log level or filter (error, warn, info, debug, trace, or a tracing filter); overrides -v
    #[arg(long, value_name = "LEVEL", global = true, env = "LIBCEPTION_LOG")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the daemon in the foreground until SIGTERM or SIGINT
    Daemon {
        /// Socket path
        #[arg(long, env = "LIBCEPTION_SOCKET", default_value = libception_proto::SOCKET_DEFAULT)]
        socket: PathBuf,
        /// Permissions of the socket file, in octal
        #[arg(long, value_name = "OCTAL", default_value = "0660", value_parser = parse_mode)]
        socket_mode: u32,
        /// Group owning the socket file (name or number); clients in it may connect with mode 0660
        #[arg(long, value_name = "GROUP", value_parser = parse_group)]
        socket_group: Option<u32>,
        /// Accept only clients with this uid (name or number); repeatable; with --allow-gid, either list admits
        #[arg(long = "allow-uid", value_name = "USER", value_parser = parse_user)]
        allow_uids: Vec<u32>,
        /// Accept only clients with this primary gid (name or number); repeatable
        #[arg(long = "allow-gid", value_name = "GROUP", value_parser = parse_group)]
        allow_gids: Vec<u32>,
        /// Tell this user (name or number) what is resident in any file it reads, e.g. the web server's user; repeatable. Others learn residency only of files they own or opened for writing
        #[arg(long = "trust-uid", value_name = "USER", value_parser = parse_user)]
        trust_uids: Vec<u32>,
        /// Tell members of this group (primary or supplementary) what is resident in any file they read; repeatable
        #[arg(long = "trust-gid", value_name = "GROUP", value_parser = parse_group)]
        trust_gids: Vec<u32>,
        /// Also serve files on this filesystem type although it has no block device (e.g. fuse, tmpfs; as in /proc/self/mountinfo, `fuse` covers `fuse.*`); repeatable. Default: block-device-backed filesystems only
        #[arg(long = "allow-fs", value_name = "TYPE")]
        allow_fs: Vec<String>,
        #[command(flatten)]
        limits: LimitArgs,
        /// One disk worker thread per physical disk (default: one worker for all disks)
        #[arg(long)]
        per_disk: bool,
        /// Read each range a second time from the page cache (never from the disk) so that its pages start on the active LRU list, where they outlive the short inactive list of kernels since 4.7 until a stream uses them: `on` (`--promote` alone), `off`, or `auto`: from the first window in which the prefetched bytes found evicted before their stream asked for them reach 5 % of the bytes requested (docs/daemon.md, "Promotion")
        #[arg(long, value_enum, value_name = "WHEN", num_args = 0..=1, default_value_t = PromoteArg::Off, default_missing_value = "on")]
        promote: PromoteArg,
        /// With `--promote auto`: the shortest window over which evictions before use are measured [default: 60]
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
        promote_window: Option<u64>,
        /// In which order each disk's queued reads are taken: `fifo` (as they came, paper 000's Reception) or `position` (next on the disk after the previous read, sweeping upwards; the drive sees one read at a time and cannot reorder them itself) (docs/daemon.md, "Queue order")
        #[arg(long, value_enum, default_value_t = QueueOrderArg::Fifo)]
        queue_order: QueueOrderArg,
        /// With `--queue-order position`: a read that has waited this long is taken next whatever its place
        #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
        queue_max_wait_ms: u64,
        /// When a client waiting on a read is answered: `read`, when the whole read is done (paper 000's Reception), or `range`, as soon as the range it asked for is read (the read goes on to the prefetch size meanwhile, and the client's thread stops waiting for the rest) (docs/daemon.md, "When a waiting client is answered")
        #[arg(long, value_enum, default_value_t = ReplyArg::Read)]
        reply: ReplyArg,
        #[command(flatten)]
        prefetch: PrefetchArgs,
        /// Largest single read, however long the requested range (at least the prefetch size)
        #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size_arg)]
        max_read: u64,
        /// Serve Prometheus text metrics at http://ADDR/metrics (e.g. 127.0.0.1:9477)
        #[arg(long, value_name = "ADDR")]
        prometheus: Option<SocketAddr>,
    },
    /// Print the daemon's counters
    Stat {
        /// Socket path of the daemon
        #[arg(long, env = "LIBCEPTION_SOCKET", default_value = libception_proto::SOCKET_DEFAULT)]
        socket: PathBuf,
        /// Print the raw JSON document (format in docs/daemon.md)
        #[arg(long)]
        json: bool,
        /// Refresh every SECS seconds until interrupted
        #[arg(long, value_name = "SECS")]
        watch: Option<f64>,
    },
    /// Ask the daemon to make file ranges resident (or, with --check, whether they are)
    Fetch {
        /// Socket path of the daemon
        #[arg(long, env = "LIBCEPTION_SOCKET", default_value = libception_proto::SOCKET_DEFAULT)]
        socket: PathBuf,
        /// Byte offset of the range in each file
        #[arg(long, default_value = "0", value_parser = parse_size_arg)]
        offset: u64,
        /// Length of the range (default: one page; the daemon extends it by its prefetch size)
        #[arg(long, default_value = "4096", value_parser = parse_size_arg)]
        length: u64,
        /// Only report residency (LCP_OP_CHECK); no I/O
        #[arg(long)]
        check: bool,
        /// Read exactly the range, without prefetch (LCP_REQ_NO_PREFETCH)
        #[arg(long)]
        no_prefetch: bool,
        /// posix_fadvise(RANDOM) on each descriptor first, so kernel readahead adds nothing to the daemon's read
        #[arg(long)]
        fadvise_random: bool,
        /// One JSON object per file instead of text
        #[arg(long)]
        json: bool,
        /// Seconds to wait for each reply
        #[arg(long, default_value = "60")]
        timeout: f64,
        /// Files to fetch, one request each, in order
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run a program under the Deception shim
    Run {
        /// Shim mode: full, serialize, prefetch, track or off (LIBCEPTION_MODE)
        #[arg(long, default_value = "full", value_parser = shim_mode_parser())]
        mode: Mode,
        /// Read-ahead of prefetch mode (LIBCEPTION_PREFETCH, in bytes); also the started daemon's --prefetch
        #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
        prefetch: Option<u64>,
        /// Daemon socket (LIBCEPTION_SOCKET); with --start-daemon, where to start it
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Start a private daemon for the program and stop it afterwards
        #[arg(long)]
        start_daemon: bool,
        /// The started daemon uses one worker per disk
        #[arg(long, requires = "start_daemon")]
        per_disk: bool,
        /// Path of libdeception.so (default: LIBCEPTION_SHIM, then next to this binary)
        #[arg(long, value_name = "PATH")]
        shim: Option<PathBuf>,
        /// How long the shim waits for a reply before going straight to libc (LIBCEPTION_TIMEOUT_MS)
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// How long the shim keeps waiting while the daemon answers the program's other threads (LIBCEPTION_PATIENCE_MS)
        #[arg(long, value_name = "MS")]
        patience_ms: Option<u64>,
        /// Where the shim writes its JSON counters at exit, in every mode but off (LIBCEPTION_STATS)
        #[arg(long, value_name = "FILE")]
        stats: Option<PathBuf>,
        /// Also rewrite the --stats file while the program runs, at most this often (LIBCEPTION_STATS_INTERVAL_MS)
        #[arg(long, value_name = "MS", requires = "stats", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        stats_interval_ms: Option<u64>,
        /// The program and its arguments
        #[arg(required = true, last = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
}

/// What one client (uid), and all of them, may take (libception::Limits).
#[derive(clap::Args, Debug)]
struct LimitArgs {
    /// Most client connections open at once
    #[arg(long, value_name = "N", default_value_t = libception::Limits::default().max_connections)]
    max_connections: usize,
    /// Most connections of one uid (root and --trust-uid/--trust-gid peers: only --max-connections)
    #[arg(long, value_name = "N", default_value_t = libception::Limits::default().max_connections_per_uid)]
    max_connections_per_uid: usize,
    /// Most reads one uid may have queued or in flight; more FETCHes are refused with EAGAIN
    #[arg(long, value_name = "N", default_value_t = libception::Limits::default().max_queued_per_uid)]
    max_queued_per_uid: u64,
    /// Most planned bytes in one uid's queued reads; more FETCHes are refused with EAGAIN
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size_arg)]
    max_queued_bytes_per_uid: u64,
    /// Most reads queued or in flight for all uids together; more FETCHes are refused with EAGAIN
    #[arg(long, value_name = "N", default_value_t = libception::Limits::default().max_queued)]
    max_queued: u64,
    /// Most planned bytes in the queued reads of all uids together; more FETCHes are refused with EAGAIN
    #[arg(long, value_name = "SIZE", default_value = "8G", value_parser = parse_size_arg)]
    max_queued_bytes: u64,
    /// Longest range a CHECK examines; longer ones are answered "not resident"
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size_arg)]
    max_check: u64,
}

impl LimitArgs {
    fn limits(&self) -> libception::Limits {
        libception::Limits {
            max_connections: self.max_connections,
            max_connections_per_uid: self.max_connections_per_uid,
            max_queued_per_uid: self.max_queued_per_uid,
            max_queued_bytes_per_uid: self.max_queued_bytes_per_uid,
            max_queued: self.max_queued,
            max_queued_bytes: self.max_queued_bytes,
            max_check: self.max_check,
        }
    }
}

/// `--prefetch` and the `--adaptive-*` parameters, which together make one
/// [`Prefetch`] (the flags [`Prefetch::daemon_args`] writes).
#[derive(clap::Args, Debug)]
struct PrefetchArgs {
    /// Bytes each read is extended to (K, M, G suffixes; 0 = serialize only), or `adaptive`: paper 001's controller (--adaptive-* options)
    #[arg(long, value_name = "SIZE|adaptive", default_value = "2M", value_parser = parse_prefetch)]
    prefetch: Prefetch,
    /// With a fixed --prefetch: a slower stream's size follows its estimated bitrate: sqrt, proportional, or a factor in (0, 1] such as 0.45 (paper 001 Fig 10); the fastest streams keep the size [default: none, one size for all]
    #[arg(long, value_name = "RULE", value_parser = parse_scale)]
    prefetch_scale: Option<BitrateScale>,
    #[command(flatten)]
    adaptive: AdaptiveArgs,
}

/// A size, or `adaptive` with the default parameters (the `--adaptive-*`
/// flags are applied by [`PrefetchArgs::resolve`]).
fn parse_prefetch(s: &str) -> Result<Prefetch, String> {
    if s.trim().eq_ignore_ascii_case("adaptive") {
        return Ok(Prefetch::Adaptive(AdaptiveParams::default()));
    }
    parse_size(s).map(Prefetch::Fixed).map_err(|e| format!("{e}, or `adaptive`"))
}

impl PrefetchArgs {
    /// The prefetch setting, or why the flags do not make one.
    fn resolve(&self) -> Result<Prefetch, String> {
        match &self.prefetch {
            Prefetch::Fixed(_) if self.adaptive.any_given() => Err("--adaptive-* options need --prefetch adaptive".into()),
            Prefetch::Fixed(bytes) => Ok(Prefetch::Fixed(*bytes)),
            Prefetch::Adaptive(_) if self.prefetch_scale.is_some() => {
                Err("--prefetch-scale is for a fixed --prefetch SIZE; the adaptive controller takes --adaptive-scale".into())
            }
            Prefetch::Adaptive(_) => self.adaptive.params().map(Prefetch::Adaptive).map_err(|e| e.to_string()),
        }
    }

    /// The fixed size's scale rule (`None` unless --prefetch-scale).
    fn scale(&self) -> BitrateScale {
        self.prefetch_scale.unwrap_or(BitrateScale::None)
    }
}

/// Parameters of `--prefetch adaptive` (paper 001 Table 2 defaults).
#[derive(clap::Args, Debug, Default)]
struct AdaptiveArgs {
    /// Adaptive: initial prefetch size (skips the disk probe) [default: where transfer time = average seek time, probed; 2M without the probe]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_start: Option<u64>,
    /// Adaptive: smallest prefetch size [default: 512K]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_min: Option<u64>,
    /// Adaptive: largest prefetch size [default: 16M]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_max: Option<u64>,
    /// Adaptive: step between neighbouring sizes (step_size) [default: 512K]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_step: Option<u64>,
    /// Adaptive: measurement interval in seconds (adjust_interval) [default: 180]
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    adaptive_interval: Option<f64>,
    /// Adaptive: intervals after each change of size that are recorded but not scored [default: 1; 0 is paper 001's rule]
    #[arg(long, value_name = "N")]
    adaptive_settle: Option<u32>,
    /// Adaptive: score deflation at a minimum, fraction or percent (score_deflation_factor) [default: 5%]
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    adaptive_deflation: Option<f64>,
    /// Adaptive: busy fraction of the disk worker below which nothing is adjusted (adjust_busy) [default: 60%]
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    adaptive_busy: Option<f64>,
    /// Adaptive: prefetch-evicted share of requested bytes that triggers the eviction-time jump (adjust_evict) [default: 5%]
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    adaptive_evict: Option<f64>,
    /// Adaptive: largest change of the size in force per second (gradual change) [default: 16K]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_ramp_rate: Option<u64>,
    /// Adaptive: stream rate in bytes per second for the eviction-time jump [default: estimated from request timing]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_stream_rate: Option<u64>,
    /// Adaptive: how each stream's prefetch follows its estimated bitrate: sqrt, proportional or none [default: sqrt]
    #[arg(long, value_name = "RULE", value_parser = parse_scale)]
    adaptive_scale: Option<BitrateScale>,
    /// Adaptive: largest disk transaction, for the score's ms per transaction [default: 128K]
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    adaptive_transaction: Option<u64>,
    /// Adaptive: do not probe the disk for the start size (start at --adaptive-start or 2M)
    #[arg(long)]
    adaptive_no_probe: bool,
    /// Adaptive: seconds after which a prefetched range nobody came back to counts as wasted [default: 600]
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    adaptive_waste_after: Option<f64>,
    /// Adaptive: intervals kept in the stats history [default: 32]
    #[arg(long, value_name = "N")]
    adaptive_history: Option<usize>,
}

impl AdaptiveArgs {
    fn any_given(&self) -> bool {
        self.adaptive_start.is_some()
            || self.adaptive_min.is_some()
            || self.adaptive_max.is_some()
            || self.adaptive_step.is_some()
            || self.adaptive_interval.is_some()
            || self.adaptive_settle.is_some()
            || self.adaptive_deflation.is_some()
            || self.adaptive_busy.is_some()
            || self.adaptive_evict.is_some()
            || self.adaptive_ramp_rate.is_some()
            || self.adaptive_stream_rate.is_some()
            || self.adaptive_scale.is_some()
            || self.adaptive_transaction.is_some()
            || self.adaptive_no_probe
            || self.adaptive_waste_after.is_some()
            || self.adaptive_history.is_some()
    }

    fn params(&self) -> Result<AdaptiveParams, ParamError> {
        let d = AdaptiveParams::default();
        let p = AdaptiveParams {
            start: self.adaptive_start,
            probe: !self.adaptive_no_probe,
            min: self.adaptive_min.unwrap_or(d.min),
            max: self.adaptive_max.unwrap_or(d.max),
            step: self.adaptive_step.unwrap_or(d.step),
            interval: self.adaptive_interval.map(std::time::Duration::from_secs_f64).unwrap_or(d.interval),
            settle: self.adaptive_settle.unwrap_or(d.settle),
            deflation: self.adaptive_deflation.unwrap_or(d.deflation),
            busy: self.adaptive_busy.unwrap_or(d.busy),
            evict: self.adaptive_evict.unwrap_or(d.evict),
            ramp_rate: self.adaptive_ramp_rate.unwrap_or(d.ramp_rate),
            stream_rate: self.adaptive_stream_rate.map(|r| r as f64).or(d.stream_rate),
            scale: self.adaptive_scale.unwrap_or(d.scale),
            transaction: self.adaptive_transaction.unwrap_or(d.transaction),
            waste_after: self.adaptive_waste_after.map(std::time::Duration::from_secs_f64).unwrap_or(d.waste_after),
            history: self.adaptive_history.unwrap_or(d.history),
        };
        p.validate()?;
        Ok(p)
    }
}

fn parse_scale(s: &str) -> Result<BitrateScale, String> {
    s.parse()
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v < 1e9 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v / scale),
        _ => Err(format!("{s:?} is not a fraction (0.05) or a percentage (5%)")),
    }
}

/// A shim mode by name, listed with the others in `--help`.
fn shim_mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Mode::ALL.map(Mode::name)).try_map(|name| name.parse::<Mode>())
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn parse_mode(s: &str) -> Result<u32, String> {
    let m = u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|_| format!("{s:?} is not an octal mode like 0660"))?;
    if m > 0o7777 {
        return Err(format!("{s:?} is not a file mode (at most 7777)"));
    }
    Ok(m)
}

fn parse_user(s: &str) -> Result<u32, String> {
    parse_id(s, "user", |name| nix::unistd::User::from_name(name).ok().flatten().map(|u| u.uid.as_raw()))
}

fn parse_group(s: &str) -> Result<u32, String> {
    parse_id(s, "group", |name| nix::unistd::Group::from_name(name).ok().flatten().map(|g| g.gid.as_raw()))
}

/// A number, or a name looked up with `lookup`.
fn parse_id(s: &str, kind: &str, lookup: impl FnOnce(&str) -> Option<u32>) -> Result<u32, String> {
    match s.parse() {
        Ok(n) => Ok(n),
        Err(_) => lookup(s).ok_or_else(|| format!("no {kind} named {s:?}")),
    }
}

fn init_logging(cli: &Cli, default: &str) {
    libception::logging::init("libception", cli.log_level.as_deref(), cli.verbose, default);
}

fn main() {
    let cli = Cli::parse();
    let result: Result<i32> = match &cli.command {
        Command::Daemon { socket, socket_mode, socket_group, allow_uids, allow_gids, trust_uids, trust_gids, allow_fs, limits, per_disk, promote, promote_window, queue_order, queue_max_wait_ms, reply, prefetch, max_read, prometheus } => {
            init_logging(&cli, "info");
            if promote_window.is_some() && !matches!(promote, PromoteArg::Auto) {
                eprintln!("libception: --promote-window applies to --promote auto only");
                std::process::exit(2);
            }
            let prefetch_args = prefetch;
            let prefetch = prefetch_args.resolve().unwrap_or_else(|e| {
                eprintln!("libception: {e}");
                std::process::exit(2);
            });
            libception::run_daemon(DaemonConfig {
                socket: socket.clone(),
                socket_mode: *socket_mode,
                socket_group: *socket_group,
                allow_uids: allow_uids.clone(),
                allow_gids: allow_gids.clone(),
                trust: libception::Trust { uids: trust_uids.clone(), gids: trust_gids.clone() },
                allow_fs: allow_fs.clone(),
                limits: limits.limits(),
                per_disk: *per_disk,
                promote: match promote {
                    PromoteArg::Off => libception::PromoteMode::Off,
                    PromoteArg::On => libception::PromoteMode::On,
                    PromoteArg::Auto => libception::PromoteMode::Auto,
                },
                promote_window: std::time::Duration::from_secs(promote_window.unwrap_or(60)),
                queue_order: match queue_order {
                    QueueOrderArg::Fifo => libception::QueueOrder::Fifo,
                    QueueOrderArg::Position => libception::QueueOrder::Position { max_wait: std::time::Duration::from_millis(*queue_max_wait_ms) },
                },
                reply: match reply {
                    ReplyArg::Range => libception::ReplyWhen::Range,
                    ReplyArg::Read => libception::ReplyWhen::Read,
                },
                prefetch_scale: prefetch_args.scale(),
                prefetch,
                max_read: *max_read,
                prometheus: *prometheus,
            })
            .map(|()| 0)
        }
        Command::Stat { socket, json, watch } => {
            init_logging(&cli, "warn");
            cli::stat::run(socket, *json, *watch).map(|()| 0)
        }
        Command::Fetch { socket, offset, length, check, no_prefetch, fadvise_random, json, timeout, files } => {
            init_logging(&cli, "warn");
            cli::fetch::run(&cli::fetch::FetchOptions {
                socket: socket.clone(),
                files: files.clone(),
                offset: *offset,
                length: *length,
                check: *check,
                no_prefetch: *no_prefetch,
                fadvise_random: *fadvise_random,
                json: *json,
                timeout: std::time::Duration::from_secs_f64(timeout.max(0.001)),
            })
        }
        Command::Run { mode, prefetch, socket, start_daemon, per_disk, shim, timeout_ms, patience_ms, stats, stats_interval_ms, command } => {
            init_logging(&cli, "warn");
            cli::run::run(RunOptions {
                mode: *mode,
                prefetch: *prefetch,
                socket: socket.clone(),
                start_daemon: *start_daemon,
                per_disk: *per_disk,
                shim: shim.clone(),
                timeout_ms: *timeout_ms,
                patience_ms: *patience_ms,
                stats_file: stats.clone(),
                stats_interval_ms: *stats_interval_ms,
                daemon_log_level: cli.log_level.clone().unwrap_or_else(|| "warn".into()),
                command: command.clone(),
            })
            .context("libception run")
        }
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("libception: {e:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    /// What `libception daemon` makes of the flags [`Prefetch::daemon_args`]
    /// writes: the two sides of the daemon's command line cannot drift.
    fn parsed_back(prefetch: &Prefetch) -> Prefetch {
        let args = libception::launch::daemon_args(Path::new("/run/x.sock"), prefetch, &["33"]);
        let cli = Cli::try_parse_from(std::iter::once("libception".to_string()).chain(args)).expect("the daemon parses its own flags");
        match cli.command {
            Command::Daemon { prefetch, .. } => prefetch.resolve().expect("a valid setting"),
            other => panic!("not the daemon: {other:?}"),
        }
    }

    #[test]
    fn prefetch_flags_parse_back_to_the_same_setting() {
        let every_parameter_changed = AdaptiveParams {
            start: Some(3 << 20),
            probe: false,
            min: 1 << 20,
            max: 8 << 20,
            step: 256 << 10,
            interval: Duration::from_secs(30),
            settle: 2,
            deflation: 0.1,
            busy: 0.5,
            evict: 0.25,
            ramp_rate: 64 << 10,
            stream_rate: Some(125_000.0),
            scale: BitrateScale::Proportional,
            transaction: 1 << 20,
            waste_after: Duration::from_millis(90_500),
            history: 7,
        };
        for prefetch in [
            Prefetch::Fixed(0),
            Prefetch::DEFAULT,
            Prefetch::Fixed(12345 << 10),
            Prefetch::Adaptive(AdaptiveParams::default()),
            Prefetch::Adaptive(every_parameter_changed),
        ] {
            assert_eq!(parsed_back(&prefetch), prefetch, "{:?}", prefetch.daemon_args());
        }
    }

    #[test]
    fn adaptive_flags_need_adaptive_prefetch() {
        let cli = Cli::try_parse_from(["libception", "daemon", "--prefetch", "1M", "--adaptive-busy", "50%"]).unwrap();
        let Command::Daemon { prefetch, .. } = cli.command else { panic!() };
        assert_eq!(prefetch.resolve().unwrap_err(), "--adaptive-* options need --prefetch adaptive");
    }

    #[test]
    fn a_fixed_size_takes_a_scale_and_the_adaptive_controller_its_own() {
        let scale_of = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).unwrap();
            let Command::Daemon { prefetch, .. } = cli.command else { panic!() };
            prefetch.resolve().map(|p| (p, prefetch.scale()))
        };
        assert_eq!(scale_of(&["libception", "daemon", "--prefetch", "6M"]), Ok((Prefetch::Fixed(6 << 20), BitrateScale::None)));
        assert_eq!(scale_of(&["libception", "daemon", "--prefetch", "6M", "--prefetch-scale", "0.45"]), Ok((Prefetch::Fixed(6 << 20), BitrateScale::Factor(450))));
        assert_eq!(scale_of(&["libception", "daemon", "--prefetch-scale", "sqrt"]), Ok((Prefetch::DEFAULT, BitrateScale::Sqrt)));
        assert!(scale_of(&["libception", "daemon", "--prefetch", "adaptive", "--prefetch-scale", "0.45"]).unwrap_err().contains("--adaptive-scale"));
        let err = Cli::try_parse_from(["libception", "daemon", "--prefetch-scale", "2"]).unwrap_err().to_string();
        assert!(err.contains("a factor in (0, 1]"), "{err}");
    }
}
