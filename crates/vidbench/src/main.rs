//! `vidbench`: one binary for the whole benchmark toolkit. Each subcommand lives
//! in its own crate; this file only dispatches.

use clap::{Parser, Subcommand};

/// Benchmark toolkit for HTTP streaming video servers on (emulated) hard disks.
#[derive(Parser)]
#[command(name = "vidbench", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The emulated hard disk: mount, unmount, stat, bench.
    Disk(vidbench_disk::cli::Args),
    /// Generate a video library and client sessions from a spec.
    Workload(vidbench_workload::cli::Args),
    /// Play sessions against an HTTP server.
    Load(vidbench_load::cli::Args),
    /// Run an experiment: find maximum failure-free rates.
    Run(vidbench_run::cli::Args),
    /// Write a Markdown report with figures from raw results.
    Report(vidbench_report::cli::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Disk(a) => vidbench_disk::cli::run(a),
        Command::Workload(a) => vidbench_workload::cli::run(a),
        Command::Load(a) => vidbench_load::cli::run(a),
        Command::Run(a) => vidbench_run::cli::run(a),
        Command::Report(a) => vidbench_report::cli::run(a),
    };
    if let Err(e) = result {
        eprintln!("vidbench: {e:#}");
        std::process::exit(1);
    }
}
