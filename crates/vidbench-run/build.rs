//! Stamps the binary with the commit it was built from (VIDBENCH_BUILD_COMMIT,
//! "-dirty" appended when tracked files had changes), which every results
//! directory records beside the commit of the checkout it ran in: a build
//! copied aside for long experiments and the tree edited meanwhile differ.
//! "unknown" outside a git checkout of this workspace (a source tarball).
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("--no-optional-locks").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    // Only this workspace's own repository (not one a tarball was unpacked into).
    let ours = git(&["rev-parse", "--show-toplevel"]).and_then(|t| PathBuf::from(t).canonicalize().ok()).is_some_and(|t| t == workspace);
    let stamp = match ours.then(|| git(&["rev-parse", "HEAD"])).flatten() {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            format!("{commit}{}", if dirty { "-dirty" } else { "" })
        }
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=VIDBENCH_BUILD_COMMIT={stamp}");
    // Stamp again when HEAD moves (commit, amend, reset, checkout: its reflog),
    // a branch moves, the index changes, or a source file of the build does.
    if let (Some(git_dir), Some(common)) = (git(&["rev-parse", "--absolute-git-dir"]), git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])) {
        let common = PathBuf::from(common);
        for p in [Path::new(&git_dir).join("HEAD"), Path::new(&git_dir).join("index"), Path::new(&git_dir).join("logs/HEAD"), common.join("packed-refs"), common.join("refs/heads")] {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    for p in ["crates", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(p).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
