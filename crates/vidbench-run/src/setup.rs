//! The machine half of `setup.json`: what a reader needs to reproduce a run
//! (kernel, CPU, memory, the Debian versions of the servers and FUSE, the
//! source revision), gathered once per experiment.

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const PACKAGES: &[&str] = &["nginx-light", "nginx-common", "apache2", "apache2-bin", "lighttpd", "fuse3", "libfuse3-3", "libc6"];

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The kernel's socket buffer settings, which bound how far each server's
/// send buffer grows (and so how much each `sendfile` asks the disk for).
pub fn network() -> Value {
    let get = |p: &str| read(&format!("/proc/sys/net/{p}"));
    json!({
        "tcp_wmem": get("ipv4/tcp_wmem"),
        "tcp_rmem": get("ipv4/tcp_rmem"),
        "wmem_default": get("core/wmem_default"),
        "wmem_max": get("core/wmem_max"),
        "tcp_autocorking": get("ipv4/tcp_autocorking"),
        "tcp_notsent_lowat": get("ipv4/tcp_notsent_lowat"),
    })
}

/// The send buffers (`ss` skmem `tb`, bytes) of the established connections
/// on local `port`, as min / median / max and count; `None` without `ss` or
/// connections.
pub fn send_buffers(port: u16) -> Option<Value> {
    let out = run("ss", &["-tmnH", "state", "established", &format!("( sport = :{port} )")])?;
    let mut tb: Vec<u64> = out
        .split("tb")
        .skip(1)
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect();
    if tb.is_empty() {
        return None;
    }
    tb.sort_unstable();
    Some(json!({"connections": tb.len(), "min": tb[0], "median": tb[tb.len() / 2], "max": tb[tb.len() - 1]}))
}

/// Gathers the machine description. `source_dir` is inside the repository
/// (for the git revision).
pub fn machine(source_dir: &Path) -> Value {
    let mut packages = serde_json::Map::new();
    let mut args = vec!["-W", "-f", "${Package}\t${Version}\n"];
    args.extend_from_slice(PACKAGES);
    if let Some(out) = run("dpkg-query", &args) {
        for line in out.lines() {
            if let Some((p, v)) = line.split_once('\t') {
                if !v.is_empty() {
                    packages.insert(p.to_string(), v.into());
                }
            }
        }
    }
    let cpu_model = read("/proc/cpuinfo").and_then(|t| {
        t.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string())
    });
    let mem_total_kb = read("/proc/meminfo").and_then(|t| {
        t.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok())
    });
    let dir = source_dir.display().to_string();
    json!({
        "hostname": read("/proc/sys/kernel/hostname"),
        "kernel": read("/proc/sys/kernel/osrelease"),
        "kernel_version": read("/proc/version"),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu_model": cpu_model,
        "mem_total_kb": mem_total_kb,
        "os_release": read("/etc/os-release").and_then(|t| t.lines().find(|l| l.starts_with("PRETTY_NAME=")).map(|l| l.trim_start_matches("PRETTY_NAME=").trim_matches('"').to_string())),
        "fuse_max_pages_limit": read("/proc/sys/fs/fuse/max_pages_limit"),
        "packages": packages,
        "vidbench_version": env!("CARGO_PKG_VERSION"),
        // The commit the running vidbench was built from; `git_commit` is the
        // checkout the experiment file came from, which may have moved on.
        "vidbench_build": env!("VIDBENCH_BUILD_COMMIT"),
        "git_commit": run("git", &["-C", &dir, "rev-parse", "HEAD"]),
        "git_dirty": run("git", &["-C", &dir, "status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_machine_record_names_the_build_and_the_checkout() {
        let m = super::machine(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
        let build = m["vidbench_build"].as_str().unwrap();
        let commit = build.trim_end_matches("-dirty");
        assert!(commit == "unknown" || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())), "{build}");
        // Built from this checkout (tests build what they test), unless git is absent.
        if let Some(head) = m["git_commit"].as_str() {
            assert_eq!(commit, head, "the test binary was built from the checkout it runs in");
        }
    }
}
