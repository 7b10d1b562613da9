//! The one way Libception's and vidbench's binaries log: `tracing` events to
//! stderr, filtered by `--log-level`, `-v`/`-vv` or `RUST_LOG`, coloured only
//! on a terminal.

use std::io::IsTerminal;

/// Installs the subscriber. `level` (a filter such as `debug` or
/// `info,fuser=error`) wins over `verbose` (1: debug, 2 or more: trace), which
/// wins over `RUST_LOG`, which wins over `default`. A filter that does not
/// parse is reported once and replaced by `default`.
pub fn init(program: &str, level: Option<&str>, verbose: u8, default: &str) {
    let filter = match (level, verbose) {
        (Some(level), _) => level.to_owned(),
        (None, 1) => "debug".to_owned(),
        (None, 2..) => "trace".to_owned(),
        (None, 0) => std::env::var("RUST_LOG").ok().filter(|f| !f.is_empty()).unwrap_or_else(|| default.to_owned()),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("{program}: bad log level {filter:?} ({e}); using {default}");
        tracing_subscriber::EnvFilter::new(default)
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}
