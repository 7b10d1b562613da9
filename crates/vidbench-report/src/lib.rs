//! Report (`vidbench report RESULTS_DIR`): a Markdown report with SVG figures
//! made only from the raw results that `vidbench run` wrote.
//!
//! - [`data`]: reading a results directory (complete runs only).
//! - [`analysis`]: per-rate means and confidence intervals, the maximum
//!   failure-free rate, disk-trace sequences, sendfile latency histograms.
//! - [`figures`]: SVG line charts (plotters).
//! - [`render`]: the Markdown sections; a section with no data says so.

pub mod analysis;
pub mod data;
pub mod figures;
pub mod render;

pub mod cli {
    use std::path::PathBuf;

    /// Arguments of `vidbench report`.
    #[derive(Debug, clap::Args)]
    #[command(about = "Write a Markdown report with SVG figures from the raw results of `vidbench run`")]
    pub struct Args {
        /// Results directory written by `vidbench run --out`.
        pub results: PathBuf,
        /// The report file (default RESULTS/report.md); figures go to `figures/` beside it.
        #[arg(long)]
        pub out: Option<PathBuf>,
        /// Also print the per-rate comparison table (the quick start's table) on stdout.
        #[arg(long)]
        pub print_table: bool,
    }

    /// Runs `vidbench report`.
    pub fn run(args: Args) -> anyhow::Result<()> {
        let results = crate::data::Results::load(&args.results)?;
        let out = args.out.unwrap_or_else(|| args.results.join("report.md"));
        let figures = crate::render::write_report(&results, &out)?;
        eprintln!("vidbench report: wrote {} ({} runs, {figures} figures)", out.display(), results.runs.len());
        if args.print_table {
            print!("{}", crate::render::rate_table(&results));
        }
        Ok(())
    }
}
