//! The daemon is not a page-cache oracle (issue 13, CVE-2019-5489): a peer
//! that neither owns a file nor opened it for writing, and is not on the
//! operator's trust lists, learns nothing about what was resident from CHECK
//! or FETCH, yet its FETCHes are still served. Owners and trusted peers get
//! the truth. Clients of another uid are `libception fetch` run as `nobody`
//! (root only: the test needs to change uid).

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

#[derive(Debug, serde::Deserialize)]
struct Outcome {
    status: i32,
    resident: bool,
    read: bool,
    joined: bool,
    bytes_read: u64,
    resident_end: u64,
}

/// `libception fetch [--check]` as uid/gid `nobody`, on `file` passed as its
/// stdin and reopened through /dev/stdin (no directory traversal needed).
fn as_nobody(d: &Daemon, file: &Path, check: bool) -> Outcome {
    as_nobody_at(d, file, check, 0)
}

/// `as_nobody` for the 64 KiB at `offset`.
fn as_nobody_at(d: &Daemon, file: &Path, check: bool, offset: u64) -> Outcome {
    let mut cmd = Command::new(BIN);
    cmd.args(["fetch", "--json", "--fadvise-random", "--length", "64K", "--offset", &offset.to_string(), "--socket"]).arg(&d.socket);
    if check {
        cmd.arg("--check");
    }
    let out = cmd
        .arg("/dev/stdin")
        .stdin(std::fs::File::open(file).unwrap())
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("run libception fetch as nobody");
    assert!(out.status.success(), "fetch as nobody failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON outcome")
}

use std::os::unix::process::CommandExt;

/// A daemon whose socket `nobody` can reach.
fn open_daemon(extra: &[&str]) -> Daemon {
    let mut args = vec!["--prefetch", "1M"];
    args.extend_from_slice(extra);
    Daemon::start_for_all_uids(&args)
}

fn warm(path: &Path) {
    std::fs::read(path).unwrap();
}

fn foreign_file(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = make_file(dir, name, 4 * MIB);
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    p
}

#[test]
fn an_untrusted_reader_of_a_foreign_file_learns_nothing_but_is_served() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let daemon = open_daemon(&[]);

    let hot = foreign_file(dir.path(), "hot");
    warm(&hot);
    let check = as_nobody(&daemon, &hot, true);
    assert_eq!((check.status, check.resident), (0, false), "CHECK told a stranger what is resident: {check:?}");
    let fetch = as_nobody(&daemon, &hot, false);
    assert_eq!((fetch.status, fetch.resident, fetch.read, fetch.joined, fetch.bytes_read), (0, false, false, false, 0), "{fetch:?}");
    // Nor how far the resident run goes: no window ahead of the request.
    assert_eq!((check.resident_end, fetch.resident_end), (0, 0), "resident_end told a stranger: {check:?} {fetch:?}");

    let cold = foreign_file(dir.path(), "cold");
    evict(&cold);
    let fetch = as_nobody(&daemon, &cold, false);
    assert_eq!((fetch.status, fetch.resident, fetch.read, fetch.bytes_read, fetch.resident_end), (0, false, false, 0, 0), "{fetch:?}");
    assert_eq!(resident_prefix(&cold, 0, 4 * MIB), MIB, "the FETCH was served all the same (1 MiB prefetch)");

    let s = daemon.stats();
    assert_eq!(s.totals.residency_concealed, 3);
    // The owner learns the truth about its own file.
    std::os::unix::fs::chown(&hot, Some(NOBODY), Some(NOBODY)).unwrap();
    let check = as_nobody(&daemon, &hot, true);
    assert_eq!((check.status, check.resident), (0, true), "the owner is told: {check:?}");
}

#[test]
fn trusted_uids_and_gids_are_told_what_is_resident() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let hot = foreign_file(dir.path(), "hot");
    let cold = foreign_file(dir.path(), "cold");
    for flag in ["--trust-uid", "--trust-gid"] {
        let daemon = open_daemon(&[flag, &NOBODY.to_string()]);
        warm(&hot);
        let check = as_nobody(&daemon, &hot, true);
        assert_eq!((check.status, check.resident), (0, true), "{flag}: {check:?}");
        // How far the resident run goes, up to the prefetch size (1 MiB)
        // from the request's page: one answer covers a forward walk's window.
        assert_eq!(check.resident_end, MIB, "{flag}: {check:?}");
        let fetch = as_nobody_at(&daemon, &hot, false, 5000);
        assert_eq!((fetch.status, fetch.resident, fetch.resident_end), (0, true, 4096 + MIB), "{flag}: {fetch:?}");
        evict(&cold);
        let fetch = as_nobody(&daemon, &cold, false);
        assert_eq!((fetch.status, fetch.read, fetch.bytes_read, fetch.resident_end), (0, true, MIB, MIB), "{flag}: {fetch:?}");
        // Only what is resident: the run ends where the cache does.
        let fetch = as_nobody_at(&daemon, &cold, false, 64 * 1024);
        assert_eq!((fetch.status, fetch.resident, fetch.resident_end), (0, true, MIB), "{flag}: {fetch:?}");
        assert_eq!(daemon.stats().totals.residency_concealed, 0);
        assert!(daemon.log_text().contains("trusted=true"));
    }
}
