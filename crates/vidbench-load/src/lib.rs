//! HTTP load client that plays video sessions against a real server.
//!
//! Placeholder until issue #4 lands: the command line is wired into the
//! `vidbench` binary, the implementation is not.

pub mod cli {
    /// Arguments of `vidbench load`.
    #[derive(Debug, clap::Args)]
    pub struct Args {
        /// Everything after the subcommand (not parsed yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        pub rest: Vec<String>,
    }

    /// Runs `vidbench load`.
    pub fn run(_args: Args) -> anyhow::Result<()> {
        anyhow::bail!("vidbench load is not implemented yet (issue #4)")
    }
}
