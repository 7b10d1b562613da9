//! Clean-up that survives the process: nothing a block mount sets up (FUSE
//! mounts, loop devices, filesystem mounts, runtime directories) outlives it.
//!
//! The mount process starts a *reaper* first: `vidbench disk block-reaper`, in
//! a session of its own (a Ctrl-C or a kill of the caller's process group does
//! not reach it), ignoring SIGINT/SIGTERM/SIGHUP, reading a pipe whose only
//! write end the mount process holds. Before creating a resource the mount
//! process writes `+<resource>` on the pipe, after releasing it `-<resource>`,
//! and `done` when it has cleaned up by itself. If the pipe reaches EOF
//! without `done` (the process was killed, even by SIGKILL, or panicked), the
//! reaper releases what is left, newest first, and exits.
//!
//! Releasing checks identity first, because names are reused: a mount point
//! is unmounted only if it still holds the recorded source, a loop device is
//! detached only if it is still backed by the recorded file.

use super::loopdev::{self, LoopDev};
use crate::sys;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// One thing to release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// A directory we created (removed with its content when empty of mounts).
    Dir(PathBuf),
    /// The image server's FUSE mount.
    Fuse(PathBuf),
    /// A loop device and the file it was attached to, with that file's
    /// `(st_dev, st_ino)` (absent in journals of older builds).
    Loop {
        dev: String,
        backing: PathBuf,
        #[serde(default)]
        inode: Option<(u64, u64)>,
    },
    /// A filesystem mount of `source` (e.g. /dev/loop3) at `at`.
    Mount { at: PathBuf, source: String },
}

/// Releases one resource if it is still ours; quiet when already gone.
pub fn release(r: &Resource) -> anyhow::Result<()> {
    match r {
        Resource::Dir(path) => {
            if path.exists() {
                remove_empty_tree(path).with_context(|| format!("removing the runtime directory {}", path.display()))?;
            }
            Ok(())
        }
        Resource::Fuse(path) => match sys::mount_at(path).ok().flatten() {
            // Lazily if the loop device still holds disk.img (files open on a
            // lazily unmounted filesystem): the server keeps answering until
            // the kernel lets the file go, then its session ends by itself.
            // Never abort the connection: those open files would get EIO.
            Some(m) if m.fstype.starts_with("fuse") && m.source == super::imagefs::FSNAME => unmount_block_fs(path).map(|_| ()),
            _ => Ok(()),
        },
        Resource::Loop { dev, backing, inode } => {
            let d = LoopDev { name: dev.clone() };
            // By inode first: after a lazy unmount of the image server (a
            // test's or an operator's `umount -l`) the path no longer matches,
            // and a device left attached would keep that server alive forever.
            let ours = match inode {
                Some(i) => d.backing_inode() == Some(*i),
                None => d.backing_file().as_deref() == Some(backing.as_path()),
            };
            if ours {
                loopdev::detach(&d)?;
            }
            Ok(())
        }
        Resource::Mount { at, source } => match sys::mount_at(at).ok().flatten() {
            Some(m) if &m.source == source => unmount_block_fs(at).map(|_| ()),
            _ => Ok(()),
        },
    }
}

/// Removes a tree of empty directories; never unlinks a file, so a mount
/// still inside (whose root is not empty) makes it fail instead of deleting
/// what the mount holds.
fn remove_empty_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_empty_tree(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

/// Unmounts a filesystem: plainly, or lazily if it is busy (open files keep
/// it alive until closed). Returns whether it had to be lazy.
pub fn unmount_block_fs(at: &Path) -> anyhow::Result<bool> {
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).context("mount point contains a NUL byte")?;
    // SAFETY: umount2 with a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(false);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EBUSY) {
        // SAFETY: as above.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
            return Ok(true);
        }
        anyhow::bail!("lazy unmount of {}: {}", at.display(), std::io::Error::last_os_error());
    }
    anyhow::bail!("unmounting {}: {err}", at.display())
}

/// The mount process's side: a journal of what exists, and the reaper.
pub struct Guard {
    pipe: Option<std::fs::File>,
    reaper: Option<Child>,
    live: Vec<Resource>,
}

impl Guard {
    /// Starts the reaper (the same executable, `disk block-reaper`).
    pub fn start(mountpoint: &Path) -> anyhow::Result<Guard> {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().context("finding the vidbench executable for the clean-up process")?;
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills two descriptors; both are close-on-exec, so no
        // other child (losetup, mkfs, ...) inherits the write end.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            anyhow::bail!("creating the clean-up pipe: {}", std::io::Error::last_os_error());
        }
        // SAFETY: we own both fresh descriptors.
        let (read, write) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
        let mut cmd = Command::new(exe);
        cmd.args(["disk", "block-reaper", "--for"]).arg(mountpoint).stdin(Stdio::from(read)).stdout(Stdio::null());
        // SAFETY: setsid and close_range are async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                // Inherit nothing but stdio: a descriptor kept open here (a
                // daemonizing parent's ready pipe, say) would outlive us.
                libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
                Ok(())
            });
        }
        let reaper = cmd.spawn().context("starting the clean-up process (vidbench disk block-reaper)")?;
        Ok(Guard { pipe: Some(write), reaper: Some(reaper), live: Vec::new() })
    }

    fn send(&mut self, line: &str) {
        if let Some(p) = &mut self.pipe {
            // A dead reaper only loses the safety net; the caller still cleans up.
            let _ = p.write_all(line.as_bytes());
        }
    }

    /// Records a resource about to be created (record first: a crash between
    /// creating and recording would leak it; releasing what does not exist is
    /// harmless).
    pub fn add(&mut self, r: Resource) {
        let line = format!("+{}\n", serde_json::to_string(&r).expect("serializes"));
        self.send(&line);
        self.live.push(r);
    }

    /// Releases one resource now.
    pub fn release(&mut self, r: &Resource) -> anyhow::Result<()> {
        release(r)?;
        let line = format!("-{}\n", serde_json::to_string(r).expect("serializes"));
        self.send(&line);
        self.live.retain(|x| x != r);
        Ok(())
    }

    /// Releases everything recorded after `r`, newest first (what was built
    /// on top of it must go before it can).
    pub fn release_newer_than(&mut self, r: &Resource) -> anyhow::Result<()> {
        while let Some(last) = self.live.last().cloned() {
            if &last == r || !self.live.contains(r) {
                break;
            }
            self.release(&last)?;
        }
        Ok(())
    }

    /// Releases everything, newest first; returns the first error (after
    /// trying the rest). The reaper is told it is not needed only when all
    /// went well.
    pub fn release_all(&mut self) -> anyhow::Result<()> {
        let mut first_err = None;
        while let Some(r) = self.live.last().cloned() {
            if let Err(e) = self.release(&r) {
                tracing::warn!("clean-up: {e:#}");
                first_err.get_or_insert(e);
                self.live.pop();
            }
        }
        if first_err.is_none() {
            self.send("done\n");
        }
        self.pipe = None;
        if let Some(mut child) = self.reaper.take() {
            let _ = child.wait();
        }
        match first_err {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.pipe.is_some() {
            let _ = self.release_all();
        }
    }
}

/// The reaper process: reads the journal on stdin; on EOF without `done`,
/// releases what is left.
pub fn run_reaper() -> anyhow::Result<()> {
    // SAFETY: ignoring signals is always sound.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let stdin = std::io::stdin();
    let mut live: Vec<Resource> = Vec::new();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line == "done" {
            return Ok(());
        }
        let (sign, rest) = line.split_at(1.min(line.len()));
        let Ok(r) = serde_json::from_str::<Resource>(rest) else { continue };
        match sign {
            "+" => live.push(r),
            "-" => live.retain(|x| x != &r),
            _ => {}
        }
    }
    if live.is_empty() {
        return Ok(());
    }
    tracing::warn!("block-reaper: the mount process ended without cleaning up; releasing {} resources", live.len());
    // The process is gone: its FUSE server no longer answers. Release the
    // filesystem and the loop device first (lazily), then the FUSE mount,
    // whose connection is aborted so that pending I/O fails instead of hanging.
    while let Some(r) = live.pop() {
        if let Err(e) = release(&r) {
            tracing::warn!("block-reaper: {e:#}");
        }
    }
    Ok(())
}

/// `(st_dev, st_ino)` of a file, as LOOP_GET_STATUS64 reports a loop device's backing file.
pub fn image_inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}
