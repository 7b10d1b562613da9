//! `vidbench load`: the command line over [`crate::play`]. Logs a progress
//! line every sample interval (a `tracing` info event, on stderr) and prints
//! the summary on stdout at the end.

use crate::config::{LoadConfig, ReceiveBuffer, Stop};
use anyhow::Context;
use std::path::PathBuf;
use vidbench_library::{read_sessions, Library};

/// Arguments of `vidbench load`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub tool: Option<Tool>,
    /// Session file: JSON lines (.jsonl) or extended wsesslog. Sessions are
    /// started in file order; the run stops starting sessions at the end of
    /// the file (no wrap-around), or earlier with --duration / --sessions.
    #[arg(value_name = "SESSIONS", required = true)]
    pub session_file: Option<PathBuf>,
    /// Server URL, http://host:port[/prefix].
    #[arg(long, required = true)]
    pub server: Option<String>,
    /// Offered session rate: Poisson session starts per second.
    #[arg(long, required = true)]
    pub rate: Option<f64>,
    /// Stop starting sessions after this many seconds.
    #[arg(long, value_name = "SECONDS", conflicts_with = "session_count")]
    pub duration: Option<f64>,
    /// Start at most this many sessions.
    #[arg(long = "sessions", value_name = "N")]
    pub session_count: Option<u64>,
    /// Result directory (requests.csv, sessions.csv, intervals.csv, summary.json).
    #[arg(long, value_name = "RESULT_DIR", required = true)]
    pub out: Option<PathBuf>,
    /// Check every received byte against this library manifest's generated content.
    #[arg(long, value_name = "LIBRARY.json")]
    pub verify: Option<PathBuf>,
    /// Use this deadline (seconds) for every request instead of the session file's.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Seed of the Poisson arrival process.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Length of the throughput samples, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub interval: f64,
    /// SO_RCVBUF for every session in bytes (default: rate x 100 ms, 16-256 KiB,
    /// for capped sessions; kernel default for uncapped ones).
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<u32>,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Helper tools of `vidbench load`.
#[derive(Debug, clap::Subcommand)]
pub enum Tool {
    /// Write a library's files with their generated content into DIR (for
    /// serving a small library from a real filesystem).
    #[command(hide = true)]
    Materialize { library: PathBuf, dir: PathBuf },
}

/// The library's errors already print their io cause; keeping it as a source
/// too would print it twice in `vidbench: {error:#}`.
fn display_only(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Runs `vidbench load`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(Tool::Materialize { library, dir }) = args.tool {
        let library = Library::load(&library).map_err(display_only)?;
        let bytes = crate::materialize(&library, &dir)?;
        tracing::info!("wrote {} files, {bytes} bytes, under {}", library.files.len(), dir.display());
        return Ok(());
    }
    let (Some(session_file), Some(server), Some(rate), Some(out)) = (args.session_file, args.server, args.rate, args.out) else {
        anyhow::bail!("SESSIONS, --server, --rate and --out are required");
    };
    let sessions = read_sessions(&session_file).map_err(display_only)?;
    let mut config = LoadConfig::new(server, rate, out.clone());
    config.stop = match (args.duration, args.session_count) {
        (Some(d), _) => Stop::Duration(d),
        (None, Some(n)) => Stop::Sessions(n),
        (None, None) => Stop::AllSessions,
    };
    if let Some(path) = &args.verify {
        config.verify = Some(Library::load(path).map_err(display_only)?);
    }
    config.timeout_override = args.timeout;
    config.seed = args.seed;
    config.interval_s = args.interval;
    if let Some(bytes) = args.rcvbuf {
        config.receive_buffer = ReceiveBuffer::Bytes(bytes);
    }
    config.handle_interrupt = true;
    config.sessions_source = Some(session_file.display().to_string());
    let quiet = args.quiet;
    let mut show = |p: &crate::Progress| {
        if !quiet {
            tracing::info!("{p}");
        }
    };
    let summary = crate::play(config, sessions, &mut show)
        .with_context(|| format!("load run from {}", session_file.display()))?;
    print!("{}", summary.human());
    println!("results in {}", out.display());
    Ok(())
}
