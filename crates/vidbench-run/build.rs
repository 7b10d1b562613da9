//! Stamps the binary with the commit it was built from (VIDBENCH_BUILD_COMMIT,
//! "-dirty" appended when tracked files had changes), which every results
//! directory records beside the commit of the checkout it ran in: a build
//! copied aside for long experiments and the tree edited meanwhile differ.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!("cargo:rustc-env=VIDBENCH_BUILD_COMMIT={commit}{}", if dirty { "-dirty" } else { "" });
    // A new commit or a change to the index (git add, commit, checkout) re-stamps.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={dir}/{f}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
