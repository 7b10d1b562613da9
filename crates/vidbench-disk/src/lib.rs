//! The emulated hard disk: a FUSE filesystem timed by a model of one drive.
//!
//! Placeholder until issue #3 lands: the command line is wired into the
//! `vidbench` binary, the implementation is not.

pub mod cli {
    /// Arguments of `vidbench disk`.
    #[derive(Debug, clap::Args)]
    pub struct Args {
        /// Everything after the subcommand (not parsed yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        pub rest: Vec<String>,
    }

    /// Runs `vidbench disk`.
    pub fn run(_args: Args) -> anyhow::Result<()> {
        anyhow::bail!("vidbench disk is not implemented yet (issue #3)")
    }
}
