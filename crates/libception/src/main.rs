//! `libception`: the Reception daemon and its CLI (`daemon`, `stat`, `run`).
//! Argument parsing and logging set-up only; the work is in the library.

use anyhow::{Context, Result};
use clap::{ArgAction, Parser, Subcommand};
use libception::cli_run::{self, RunOptions};
use libception::daemon::{self, DaemonConfig};
use libception::size::parse_size;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

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
        /// One disk worker thread per physical disk (default: one worker for all disks)
        #[arg(long)]
        per_disk: bool,
        /// Bytes each read is extended to (K, M, G suffixes; 0 = serialize only)
        #[arg(long, value_name = "SIZE", default_value = "2M", value_parser = parse_size_arg)]
        prefetch: u64,
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
        #[arg(long, default_value = "full", value_parser = clap::builder::PossibleValuesParser::new(cli_run::MODES))]
        mode: String,
        /// Prefetch size (LIBCEPTION_PREFETCH, in bytes; also the started daemon's --prefetch)
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
        /// Where the shim writes its JSON counters at exit in track mode (LIBCEPTION_STATS)
        #[arg(long, value_name = "FILE")]
        stats: Option<PathBuf>,
        /// The program and its arguments
        #[arg(required = true, last = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
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
    if let Ok(n) = s.parse() {
        return Ok(n);
    }
    match nix::unistd::User::from_name(s) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        _ => Err(format!("no user named {s:?}")),
    }
}

fn parse_group(s: &str) -> Result<u32, String> {
    if let Ok(n) = s.parse() {
        return Ok(n);
    }
    match nix::unistd::Group::from_name(s) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => Err(format!("no group named {s:?}")),
    }
}

fn init_logging(cli: &Cli, default: &str) {
    let filter = match (&cli.log_level, cli.verbose) {
        (Some(l), _) => l.clone(),
        (None, 0) => default.to_string(),
        (None, 1) => "debug".to_string(),
        (None, _) => "trace".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("libception: bad log level {filter:?} ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

fn main() {
    let cli = Cli::parse();
    let result: Result<i32> = match &cli.command {
        Command::Daemon { socket, socket_mode, socket_group, allow_uids, allow_gids, per_disk, prefetch, max_read, prometheus } => {
            init_logging(&cli, "info");
            daemon::run(DaemonConfig {
                socket: socket.clone(),
                socket_mode: *socket_mode,
                socket_group: *socket_group,
                allow_uids: allow_uids.clone(),
                allow_gids: allow_gids.clone(),
                per_disk: *per_disk,
                prefetch: *prefetch,
                max_read: *max_read,
                prometheus: *prometheus,
            })
            .map(|()| 0)
        }
        Command::Stat { socket, json, watch } => {
            init_logging(&cli, "warn");
            libception::cli_stat::run(socket, *json, *watch).map(|()| 0)
        }
        Command::Fetch { socket, offset, length, check, no_prefetch, fadvise_random, json, timeout, files } => {
            init_logging(&cli, "warn");
            libception::cli_fetch::run(&libception::cli_fetch::FetchOptions {
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
        Command::Run { mode, prefetch, socket, start_daemon, per_disk, shim, timeout_ms, stats, command } => {
            init_logging(&cli, "warn");
            cli_run::run(RunOptions {
                mode: mode.clone(),
                prefetch: *prefetch,
                socket: socket.clone(),
                start_daemon: *start_daemon,
                per_disk: *per_disk,
                shim: shim.clone(),
                timeout_ms: *timeout_ms,
                stats_file: stats.clone(),
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
