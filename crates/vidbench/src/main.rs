//! `vidbench`: one binary for the whole benchmark toolkit. Each subcommand lives
//! in its own crate; this file dispatches and sets up logging once.
//!
//! Diagnostics (warnings, progress notes, what a long-running mount or load is
//! doing) go through `tracing` to stderr, as in `libception`; the level comes
//! from `--log-level`, else `-v`/`-vv`, else `RUST_LOG`, else info (fuser's
//! own messages only at error). What a
//! command is for (tables, `--check` output, summaries, the final error line)
//! is printed directly, so scripts that read it see no log format.

use clap::{ArgAction, Parser, Subcommand};

/// Benchmark toolkit for HTTP streaming video servers on (emulated) hard disks.
#[derive(Parser)]
#[command(name = "vidbench", version, about, propagate_version = true)]
struct Cli {
    /// More log output: -v debug, -vv trace (default: info)
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// Log level or filter (error, warn, info, debug, trace, or a tracing
    /// filter); overrides -v and RUST_LOG
    #[arg(long, value_name = "LEVEL", global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// The emulated hard disk: mount, unmount, stat, presets, model, bench, library.
    Disk(vidbench_disk::cli::Args),
    /// Generate a video library and client sessions from a spec.
    Workload(vidbench_workload::cli::Args),
    /// Play sessions against an HTTP server.
    Load(vidbench_load::cli::Args),
    /// Run an experiment: find maximum failure-free rates.
    Run(vidbench_run::cli::Args),
    /// Write a Markdown report with figures from raw results.
    Report(vidbench_report::cli::Args),
    /// DAMON's proactive reclaim: status, pause for a benchmark, release, recover.
    ProactiveReclaim(vidbench_run::reclaim::CliArgs),
}

/// Info for vidbench; fuser's own notes (unimplemented FUSE calls, its
/// mount and unmount steps) only when they are errors, unless asked for.
const DEFAULT_LOG_FILTER: &str = "info,fuser=error";

fn init_logging(cli: &Cli) {
    libception::logging::init("vidbench", cli.log_level.as_deref(), cli.verbose, DEFAULT_LOG_FILTER);
}

fn main() {
    let cli = Cli::parse();
    init_logging(&cli);
    let result = match cli.command {
        Command::Disk(a) => vidbench_disk::cli::run(a),
        Command::Workload(a) => vidbench_workload::cli::run(a),
        Command::Load(a) => vidbench_load::cli::run(a),
        Command::Run(a) => vidbench_run::cli::run(a),
        Command::Report(a) => vidbench_report::cli::run(a),
        Command::ProactiveReclaim(a) => vidbench_run::reclaim::cli(a),
    };
    if let Err(e) = result {
        eprintln!("vidbench: {e:#}");
        // 128 + SIGINT, as a shell reports a command Ctrl-C stopped: a queue
        // tells an interrupted experiment (resumable) from a failed one.
        let interrupted = e.downcast_ref::<vidbench_run::Interrupted>().is_some();
        std::process::exit(if interrupted { 130 } else { 1 });
    }
}
