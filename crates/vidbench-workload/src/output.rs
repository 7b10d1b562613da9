//! Writing a generated workload to its output directory, all or nothing.
//!
//! Everything is written into a fresh sibling directory `.DIR.tmp-PID` and
//! renamed to `DIR` at the end, so a failure (bad spec, full disk, ^C) never
//! leaves a half-written workload where a run could pick it up. An existing `DIR`
//! is an error unless `force` is given; then it is replaced only after the new one
//! is complete.

use crate::generate::Workload;
use crate::spec::Validated;
use crate::summary::{summarize, Context, Summary};
use anyhow::{bail, Context as _, Result};
use std::path::{Path, PathBuf};
use vidbench_library::{write_sessions, write_warm_list, SessionFormat};

/// File names inside an output directory.
pub const LIBRARY_FILE: &str = "library.json";
pub const JSONL_FILE: &str = "sessions.jsonl";
pub const WSESSLOG_FILE: &str = "sessions.wsesslog";
pub const WARM_FILE: &str = "warm.txt";
pub const SUMMARY_JSON_FILE: &str = "summary.json";
pub const SUMMARY_MD_FILE: &str = "summary.md";
/// The spec exactly as given.
pub const SPEC_FILE: &str = "spec.toml";
/// The spec with every default written out.
pub const RESOLVED_SPEC_FILE: &str = "spec.resolved.toml";

/// Removes the temporary directory unless disarmed.
struct TempDir(Option<PathBuf>);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

fn sibling(out: &Path, tag: &str) -> Result<PathBuf> {
    let name = out
        .file_name()
        .with_context(|| format!("output directory {} has no name", out.display()))?
        .to_string_lossy();
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok(parent.join(format!(".{name}.{tag}-{}", std::process::id())))
}

/// The summary context a spec gives.
pub fn context_of(spec: &crate::spec::Spec) -> Context {
    Context { memory_limit_mib: spec.scaling.memory_limit_mib, nominal_rate_per_s: spec.sessions.nominal_rate_per_s }
}

/// Writes `workload` to `out` atomically; returns its summary.
pub fn write_workload(out: &Path, spec_text: &str, validated: &Validated, workload: &Workload, force: bool) -> Result<Summary> {
    if out.exists() && !force {
        bail!("output directory {} already exists (use --force to replace it)", out.display());
    }
    // --force replaces a workload, never anything else that happens to be there.
    if out.exists() && !(out.is_dir() && out.join(LIBRARY_FILE).is_file()) {
        bail!(
            "{} is not a generated workload (no {LIBRARY_FILE} in a directory): --force replaces only a workload; choose another --out or remove it yourself",
            out.display()
        );
    }
    let tmp = sibling(out, "tmp")?;
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("cannot remove stale {}", tmp.display()))?;
    }
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut guard = TempDir(Some(tmp.clone()));

    let summary = summarize(&workload.library, &workload.sessions, Some(&workload.warm), &context_of(&validated.spec))
        .map_err(anyhow::Error::msg)
        .context("the generated sessions do not match the generated library (a bug)")?;
    workload.library.validate().map_err(anyhow::Error::msg).context("the generated library is invalid (a bug)")?;
    workload.library.save(&tmp.join(LIBRARY_FILE))?;
    write_sessions(&tmp.join(JSONL_FILE), SessionFormat::JsonLines, &workload.sessions)?;
    write_sessions(&tmp.join(WSESSLOG_FILE), SessionFormat::Wsesslog, &workload.sessions)?;
    let header = format!(
        "warming set of workload {}: the {} chunks with the highest expected request count, most popular first\nPATH FIRST-LAST (inclusive byte range)",
        validated.spec.name,
        workload.warm.len()
    );
    write_warm_list(&tmp.join(WARM_FILE), &header, &workload.warm)?;
    let write = |name: &str, text: &str| {
        std::fs::write(tmp.join(name), text).with_context(|| format!("cannot write {}", tmp.join(name).display()))
    };
    write(SUMMARY_JSON_FILE, &(serde_json::to_string_pretty(&summary)? + "\n"))?;
    write(SUMMARY_MD_FILE, &summary.to_markdown())?;
    write(SPEC_FILE, spec_text)?;
    let resolved = toml::to_string(&validated.spec).context("cannot write the resolved spec")?;
    write(RESOLVED_SPEC_FILE, &format!("# {} with every default written out\n{resolved}", SPEC_FILE))?;

    if out.exists() {
        let old = sibling(out, "old")?;
        std::fs::rename(out, &old).with_context(|| format!("cannot move the old {} aside", out.display()))?;
        if let Err(e) = std::fs::rename(&tmp, out) {
            let _ = std::fs::rename(&old, out);
            return Err(e).with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()));
        }
        std::fs::remove_dir_all(&old).with_context(|| format!("cannot remove the old workload {}", old.display()))?;
    } else {
        std::fs::rename(&tmp, out).with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))?;
    }
    guard.0 = None;
    Ok(summary)
}
