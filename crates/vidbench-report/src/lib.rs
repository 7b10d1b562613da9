//! Report: Markdown tables and SVG figures made only from raw results.
//!
//! Placeholder until issue #5 lands: the command line is wired into the
//! `vidbench` binary, the implementation is not.

pub mod cli {
    /// Arguments of `vidbench report`.
    #[derive(Debug, clap::Args)]
    pub struct Args {
        /// Everything after the subcommand (not parsed yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        pub rest: Vec<String>,
    }

    /// Runs `vidbench report`.
    pub fn run(_args: Args) -> anyhow::Result<()> {
        anyhow::bail!("vidbench report is not implemented yet (issue #5)")
    }
}
