//! Experiment driver: finds the maximum failure-free rate of real servers.
//!
//! Placeholder until issue #5 lands: the command line is wired into the
//! `vidbench` binary, the implementation is not.

pub mod cli {
    /// Arguments of `vidbench run`.
    #[derive(Debug, clap::Args)]
    pub struct Args {
        /// Everything after the subcommand (not parsed yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        pub rest: Vec<String>,
    }

    /// Runs `vidbench run`.
    pub fn run(_args: Args) -> anyhow::Result<()> {
        anyhow::bail!("vidbench run is not implemented yet (issue #5)")
    }
}
