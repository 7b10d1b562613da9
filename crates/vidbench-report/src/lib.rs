//! Report (`vidbench report RESULTS_DIR`): a Markdown report with SVG figures
//! made only from the raw results that `vidbench run` wrote.
//!
//! The `vidbench` binary calls [`cli::run`] with [`cli::Args`]; a program can
//! load [`Results`] and call [`write_report`] or [`rate_table`] itself, and
//! [`read_trace`], [`sequences`], [`bytes_cdf`] and [`positionings`] analyse a disk trace.
//!
//! The report reads every results file as JSON values, not as vidbench-run's
//! types, so that results of an older build still report (it depends on
//! vidbench-run for nothing; statistics come from vidbench-stats).
//!
//! Inside (private modules):
//! - `data`: reading a results directory (complete runs only).
//! - `analysis`: per-rate means and confidence intervals, the maximum
//!   failure-free rate, disk-trace sequences, sendfile latency histograms.
//! - `figures`: SVG line charts (plotters).
//! - `render`: the Markdown sections; a section with no data says so.
//! - `laio`: figures of liblaio's benchmarks (a directory of
//!   `native/bench/laio/run*`, reported by the same command).

mod analysis;
mod data;
mod figures;
mod laio;
mod render;

pub use analysis::{bytes_cdf, positionings, read_trace, sequences, Positionings, Preceded, TraceRequest};
pub use data::{controller_intervals, delivered_mb_s_over_time, ControllerInterval, DiskDelta, RateKey, Results, Run, Unscored};
pub use laio::{is_bench_dir as is_laio_bench_dir, write_figures as write_laio_figures};
pub use render::{rate_table, write_report, write_trace_windows};

pub mod cli {
    use std::path::PathBuf;

    /// Arguments of `vidbench report`.
    #[derive(Debug, clap::Args)]
    #[command(about = "Write a Markdown report with SVG figures from the raw results of `vidbench run` (or the figures of a liblaio benchmark's results)")]
    pub struct Args {
        /// Results directory written by `vidbench run --out`, or by one of
        /// native/bench/laio/run, run-openstat, run-httpd (figures only:
        /// their NOTES.md is the scripts' own).
        pub results: PathBuf,
        /// The report file (default RESULTS/report.md); figures go to `figures/` beside it.
        #[arg(long)]
        pub out: Option<PathBuf>,
        /// Also print the per-rate comparison table (the quick start's table) on stdout.
        #[arg(long)]
        pub print_table: bool,
        /// Also write, beside each whole disk trace the report draws from,
        /// `disk-trace-window.csv.gz` with only the requests of the window it
        /// uses: a record that keeps those instead of the traces reports the same.
        #[arg(long)]
        pub trace_windows: bool,
    }

    /// Runs `vidbench report`.
    pub fn run(args: Args) -> anyhow::Result<()> {
        if crate::laio::is_bench_dir(&args.results) {
            if args.out.is_some() || args.print_table || args.trace_windows {
                anyhow::bail!("{} holds a liblaio benchmark's results: --out, --print-table and --trace-windows apply only to `vidbench run` results (its figures go to figures/ beside its NOTES.md)", args.results.display());
            }
            for f in crate::laio::write_figures(&args.results)? {
                tracing::info!("wrote {}", f.display());
            }
            return Ok(());
        }
        let results = crate::data::Results::load(&args.results)?;
        if args.trace_windows {
            for f in crate::render::write_trace_windows(&results)? {
                tracing::info!("wrote {}", f.display());
            }
        }
        let out = args.out.unwrap_or_else(|| args.results.join("report.md"));
        let figures = crate::render::write_report(&results, &out)?;
        tracing::info!("wrote {} ({} runs, {figures} figures)", out.display(), results.runs.len());
        if args.print_table {
            // A reader that leaves early (`--print-table | head`) is not an error.
            match std::io::Write::write_all(&mut std::io::stdout().lock(), crate::render::rate_table(&results).as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }
}
