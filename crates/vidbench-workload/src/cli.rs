//! `vidbench workload`: `gen` writes a workload directory from a spec, `summary`
//! prints paper 003 Table 3 for an existing one, `check` validates a spec.

use crate::output::{self, JSONL_FILE, LIBRARY_FILE, SPEC_FILE, WARM_FILE, WSESSLOG_FILE};
use crate::spec::Spec;
use anyhow::{Context, Result};
use std::path::PathBuf;
use vidbench_library::{read_sessions, read_warm_list, Library};

/// Arguments of `vidbench workload`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Generate a library manifest, sessions (JSON lines and wsesslog), a warming
    /// list and a summary from a spec.
    Gen(GenArgs),
    /// Print paper 003 Table 3 for an existing workload directory.
    Summary(SummaryArgs),
    /// Validate a spec without writing anything.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// The workload spec (TOML), e.g. bench/specs/small.toml.
    pub spec: PathBuf,
    /// Output directory; must not exist unless --force.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Replace an existing output directory (only once the new one is complete).
    #[arg(long)]
    pub force: bool,
    /// Override the spec's top-level seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print only the output directory, not the summary.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// A directory written by `vidbench workload gen`.
    pub dir: PathBuf,
    /// Sessions file to use instead of DIR/sessions.jsonl (either format).
    #[arg(long)]
    pub sessions: Option<PathBuf>,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The workload spec (TOML).
    pub spec: PathBuf,
}

/// Runs `vidbench workload`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Gen(a) => gen(a),
        Command::Summary(a) => summary(a),
        Command::Check(a) => {
            let v = Spec::load(&a.spec)?;
            println!("{}: valid workload spec {:?}", a.spec.display(), v.spec.name);
            Ok(())
        }
    }
}

fn gen(args: GenArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("cannot read workload spec {}", args.spec.display()))?;
    let (mut validated, recorded) = Spec::parse_recorded(&text, &args.spec)?;
    if let Some(seed) = args.seed {
        validated.spec.seed = seed;
    }
    let workload = crate::generate(&validated);
    let summary = output::write_workload(&args.out, &recorded, &validated, &workload, args.force)?;
    if args.quiet {
        println!("{}", args.out.display());
    } else {
        println!("wrote {}\n", args.out.display());
        print!("{}", summary.to_markdown());
    }
    Ok(())
}

fn summary(args: SummaryArgs) -> Result<()> {
    let dir = &args.dir;
    let library = Library::load(&dir.join(LIBRARY_FILE))?;
    let sessions_path = match &args.sessions {
        Some(p) => p.clone(),
        None if dir.join(JSONL_FILE).exists() => dir.join(JSONL_FILE),
        None => dir.join(WSESSLOG_FILE),
    };
    let sessions = read_sessions(&sessions_path)?;
    let warm_path = dir.join(WARM_FILE);
    let warm = if warm_path.exists() { Some(read_warm_list(&warm_path)?) } else { None };
    let context = match std::fs::read_to_string(dir.join(SPEC_FILE)) {
        Ok(text) => output::context_of(&Spec::parse(&text, &dir.join(SPEC_FILE))?.spec),
        Err(_) => Default::default(),
    };
    let summary = crate::summarize(&library, &sessions, warm.as_deref(), &context)
        .map_err(|e| anyhow::anyhow!("{}: {e}", sessions_path.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.to_markdown());
    }
    Ok(())
}
