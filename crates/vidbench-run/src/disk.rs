//! The emulated disk of one run, as a guard.
//!
//! The disk is `vidbench disk mount` run as a separate process, in its own
//! process group and outside every memory cgroup of the run (its memory is not
//! the server's), in the foreground so that the driver owns it. Counters are
//! read with `vidbench disk stat MOUNT --json` before and after the load; the
//! trace, when asked for, is written by the disk process itself. Unmounting asks
//! `vidbench disk unmount`, then signals the process, and as a last resort
//! detaches the mount with `fusermount3 -u -z` or a lazy umount: a run never
//! leaves a mount behind. In block mode the same command releases the
//! filesystem, the loop device and the image server, the mount process does
//! so on SIGTERM (and on its parent's death), and its reaper when it is
//! killed; unmounting checks that the loop device let go of the image.

use crate::interrupt::{self, Interrupted};
use crate::process::{tail, Child, Spawn};
use anyhow::{bail, Context};
use libception::launch::{self, Readiness};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub use crate::experiment::{FillOrder, FsKind, FsSize, Scheduler};

/// How to mount.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiskOptions {
    pub library: PathBuf,
    pub preset: String,
    pub read_ahead_kb: u32,
    /// FUSE mode's largest request (absent in block mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_kb: Option<u32>,
    /// Block mode (`--block`) and its settings; `None`: FUSE mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockOptions>,
    pub trace: Option<PathBuf>,
    pub extra_args: Vec<String>,
}

/// Block mode's settings; `None` leaves the disk's default.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct BlockOptions {
    pub fs: FsKind,
    pub fs_size: Option<FsSize>,
    pub fs_slack_pct: Option<u32>,
    pub fill_order: Option<FillOrder>,
    pub fill_seed: Option<u64>,
    /// Shared by every run of an experiment, so all read the same image.
    pub image_cache: Option<PathBuf>,
    /// The image file itself (`--image`): a resumed experiment's, which an
    /// older builder version may have made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<PathBuf>,
    pub scheduler: Option<Scheduler>,
    pub max_sectors_kb: Option<u32>,
    pub nr_requests: Option<u32>,
}

impl DiskOptions {
    /// The arguments of `vidbench disk mount` (after `vidbench`).
    pub fn mount_args(&self, mount: &Path) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "disk".into(),
            "mount".into(),
            mount.display().to_string(),
            "--library".into(),
            self.library.display().to_string(),
            "--preset".into(),
            self.preset.clone(),
            "--read-ahead-kb".into(),
            self.read_ahead_kb.to_string(),
        ];
        let mut flag = |name: &str, value: String| {
            args.push(name.into());
            args.push(value);
        };
        if let Some(kb) = self.max_request_kb {
            flag("--max-request-kb", kb.to_string());
        }
        if let Some(b) = &self.block {
            flag("--fs", b.fs.name().into());
            if let Some(v) = b.fs_size {
                flag("--fs-size", v.name().into());
            }
            if let Some(v) = b.fs_slack_pct {
                flag("--fs-slack-pct", v.to_string());
            }
            if let Some(v) = b.fill_order {
                flag("--fill-order", v.name().into());
            }
            if let Some(v) = b.fill_seed {
                flag("--seed", v.to_string());
            }
            if let Some(v) = &b.image_cache {
                flag("--image-cache", v.display().to_string());
            }
            if let Some(v) = &b.image {
                flag("--image", v.display().to_string());
            }
            if let Some(v) = b.scheduler {
                flag("--scheduler", v.name().into());
            }
            if let Some(v) = b.max_sectors_kb {
                flag("--max-sectors-kb", v.to_string());
            }
            if let Some(v) = b.nr_requests {
                flag("--nr-requests", v.to_string());
            }
        }
        if let Some(t) = &self.trace {
            flag("--trace", t.display().to_string());
        }
        if self.block.is_some() {
            args.push("--block".into());
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// A mounted emulated disk; unmounted on drop.
pub struct Disk {
    pub mount: PathBuf,
    vidbench: PathBuf,
    child: Option<Child>,
    log: PathBuf,
    /// The command line used, for setup.json.
    pub command: Vec<String>,
    /// Block mode: the loop device and the image file behind it, to check at
    /// unmount that the device was released.
    loop_device: Option<(String, String)>,
}

/// Whether `path` is a mount point now (from /proc/self/mounts).
pub fn is_mounted(path: &Path) -> bool {
    let want = path.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mounts")
        .map(|t| t.lines().any(|l| l.split_whitespace().nth(1) == Some(want.as_str())))
        .unwrap_or(false)
}

/// The backing file of loop device `dev` (`loop0`), if it is attached.
fn loop_backing(dev: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/block/{dev}/loop/backing_file")).ok().map(|s| s.trim().to_owned())
}

/// Releases a disk left mounted at `path` by a driver that is gone: first as
/// `vidbench disk unmount` does (in block mode: the filesystem, the loop
/// device, the image server, and the mount process), then by force.
pub fn release_stale(vidbench: &Path, path: &Path) {
    let _ = Command::new(vidbench)
        .args(["disk", "unmount", "--wait-s", "20"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if is_mounted(path) {
        force_unmount(path);
    }
}

/// Detaches a mount left behind (e.g. by a driver that was killed). On a
/// block mount (ext4/xfs) `fusermount3` does nothing and the lazy umount2
/// does; the loop device is then released by the mount process when it is
/// signalled, or by its reaper when it is gone.
pub fn force_unmount(path: &Path) {
    let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(path).stderr(Stdio::null()).status();
    if is_mounted(path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}

impl Disk {
    pub fn mount(vidbench: &Path, mount: &Path, opts: &DiskOptions, log: &Path) -> anyhow::Result<Disk> {
        std::fs::create_dir_all(mount).with_context(|| format!("cannot create mount point {}", mount.display()))?;
        if is_mounted(mount) {
            force_unmount(mount);
        }
        let args = opts.mount_args(mount);
        let out = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let mut command = Command::new(vidbench);
        command.args(&args).stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        let child = Child::spawn(Spawn {
            name: "vidbench disk mount",
            command,
            attach: None,
            stop_signal: libc::SIGTERM,
            death_signal: libc::SIGTERM,
        })?;
        let mut command_line = vec![vidbench.display().to_string()];
        command_line.extend(args);
        let mut disk = Disk { mount: mount.to_owned(), vidbench: vidbench.to_owned(), child: Some(child), log: log.to_owned(), command: command_line, loop_device: None };
        let child = disk.child.as_mut().expect("just started");
        // A first block mount builds the image (minutes at paper scale) and
        // logs its progress: wait while the log grows.
        let log_len = || std::fs::metadata(log).map_or(0, |m| m.len());
        let readiness = wait_while_progressing(QUIET_LIMIT, log_len, |window| {
            launch::wait_ready(window, Duration::from_millis(50), || child.exited(), || {
                interrupt::check()?;
                Ok::<_, Interrupted>(is_mounted(mount) && read_stats(vidbench, mount).is_ok())
            })
        })?;
        match readiness {
            Readiness::Ready => {
                let stats = disk.stats()?;
                let block = &stats["config"]["block"];
                if let (Some(dev), Some(image)) = (block["device"]["device"].as_str(), block["image_server"].as_str()) {
                    disk.loop_device = Some((dev.to_owned(), image.to_owned()));
                }
                Ok(disk)
            }
            Readiness::Exited(status) => {
                bail!("vidbench disk mount exited ({status}) before the disk was mounted; its log {}:\n{}", log.display(), tail(log, 20))
            }
            Readiness::TimedOut => bail!(
                "the emulated disk did not appear at {} and its log said nothing new for {} s; its log {}:\n{}",
                mount.display(),
                QUIET_LIMIT.as_secs(),
                log.display(),
                tail(log, 20)
            ),
        }
    }

    /// The disk's counters as JSON (`vidbench disk stat --json`).
    pub fn stats(&self) -> anyhow::Result<serde_json::Value> {
        read_stats(&self.vidbench, &self.mount)
    }

    /// Unmounts and waits for the disk process to exit.
    pub fn unmount(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        // `disk unmount` waits for the disk process to exit, which needs us to
        // reap it: run the command in the background while we wait for our child.
        let asked = Command::new(&self.vidbench)
            .args(["disk", "unmount", "--wait-s", "20"])
            .arg(&self.mount)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let exited = child.wait_timeout(Duration::from_secs(20)).is_some();
        let asked_ok = match asked {
            Ok(mut c) => c.wait().map(|s| s.success()).unwrap_or(false),
            Err(_) => false,
        };
        let clean = exited && asked_ok;
        if !clean {
            child.stop(Duration::from_secs(10));
        } else {
            child.stop(Duration::from_secs(1));
        }
        if is_mounted(&self.mount) {
            force_unmount(&self.mount);
        }
        if is_mounted(&self.mount) {
            bail!("{} is still mounted after unmounting (log {})", self.mount.display(), self.log.display());
        }
        if let Some((dev, image)) = &self.loop_device {
            if loop_backing(dev).as_deref() == Some(image.as_str()) {
                bail!("/dev/{dev} is still attached to {image} after unmounting {} (log {}); `losetup -d /dev/{dev}` releases it", self.mount.display(), self.log.display());
            }
        }
        if !clean {
            bail!("the emulated disk at {} did not unmount cleanly; it was stopped by signal (log {})", self.mount.display(), self.log.display());
        }
        Ok(())
    }
}

/// The drives of a run (`[disk] count`): one mount each, unmounted on drop.
pub struct Disks {
    pub drives: Vec<Disk>,
}

impl Disks {
    /// Mounts a drive at each of `mounts` with `opts`; drive K > 0 logs to
    /// `log` with `-dK` before its extension. A failed mount unmounts the
    /// drives mounted before it.
    pub fn mount(vidbench: &Path, mounts: &[PathBuf], opts: &DiskOptions, log: &Path) -> anyhow::Result<Disks> {
        let mut drives = Vec::with_capacity(mounts.len());
        for (k, mount) in mounts.iter().enumerate() {
            let log = match k {
                0 => log.to_owned(),
                _ => log.with_file_name(format!(
                    "{}-d{k}.{}",
                    log.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default(),
                    log.extension().map(|s| s.to_string_lossy()).unwrap_or_default()
                )),
            };
            drives.push(Disk::mount(vidbench, mount, opts, &log)?);
        }
        Ok(Disks { drives })
    }

    /// The drives' processes (`vidbench disk mount`), in drive order.
    pub fn pids(&self) -> Vec<i32> {
        self.drives.iter().filter_map(|d| d.child.as_ref().map(Child::pid)).collect()
    }

    /// The first drive's command line (the others differ in the mount point only).
    pub fn command(&self) -> &[String] {
        &self.drives[0].command
    }

    /// Each drive's `vidbench disk stat --json`, in drive order.
    pub fn each_stats(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        self.drives.iter().map(Disk::stats).collect()
    }

    /// All drives' counters as one document (see [`merge_stats`]).
    pub fn stats(&self) -> anyhow::Result<serde_json::Value> {
        Ok(merge_stats(self.each_stats()?))
    }

    /// Unmounts every drive; the first error after trying them all.
    pub fn unmount(&mut self) -> anyhow::Result<()> {
        let mut first = Ok(());
        for d in &mut self.drives {
            if let Err(e) = d.unmount() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

/// One drive's `vidbench disk stat --json` as it is. Several drives: the
/// first's document with every number of `total.counters` and
/// `block_layer.counters` summed over the drives (reads, bytes, busy time:
/// what the samples and the windows take), and each drive's own document
/// under `drives`.
pub fn merge_stats(mut all: Vec<serde_json::Value>) -> serde_json::Value {
    use serde_json::Value;
    if all.len() == 1 {
        return all.pop().expect("one");
    }
    let mut merged = all.first().cloned().unwrap_or(Value::Null);
    for section in ["/total/counters", "/block_layer/counters"] {
        let Some(counters) = merged.pointer_mut(section).and_then(Value::as_object_mut) else { continue };
        for (key, value) in counters.iter_mut() {
            let each: Vec<Option<&Value>> = all.iter().map(|d| d.pointer(&format!("{section}/{key}"))).collect();
            if let Some(ints) = each.iter().map(|v| v.and_then(Value::as_u64)).collect::<Option<Vec<u64>>>() {
                *value = Value::from(ints.iter().sum::<u64>());
            } else if let Some(floats) = each.iter().map(|v| v.and_then(Value::as_f64)).collect::<Option<Vec<f64>>>() {
                *value = Value::from(floats.iter().sum::<f64>());
            }
        }
    }
    merged["drives"] = Value::Array(all);
    merged
}

/// The mount point of each of `count` drives under the run's mount
/// directory `mnt`, which is the servers' document root: `mnt` itself for
/// one drive (paths `/v/...`), `mnt/d0`, `mnt/d1`, ... for several (paths
/// `/d0/v/...`).
pub fn drive_mounts(mnt: &Path, count: u32) -> Vec<PathBuf> {
    match count {
        0 | 1 => vec![mnt.to_owned()],
        n => (0..n).map(|k| mnt.join(format!("d{k}"))).collect(),
    }
}

/// The URL path of library file `path` (`/v/00042.mp4`) with `count` drives:
/// unchanged for one; else under the drive that serves it, a seeded draw per
/// file (FNV-1a of the path and `seed`, then splitmix64), so that each file
/// is read from one drive only, as paper 000 section 7 divided its videos.
pub fn path_on_drive(path: &str, count: u32, seed: u64) -> String {
    if count <= 1 {
        return path.to_owned();
    }
    // The file, not the request: a query string does not move it.
    let file = path.split('?').next().unwrap_or(path);
    let mut z = vidbench_disk::block::image::fnv1a(file.as_bytes()) ^ seed;
    // splitmix64's finalizer: every bit of the hash moves the draw.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    format!("/d{}/{}", z % count as u64, path.trim_start_matches('/'))
}

/// `vidbench disk stat --json MOUNT`, run with the `vidbench` binary at `vidbench`.
fn read_stats(vidbench: &Path, mount: &Path) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(vidbench)
        .args(["disk", "stat", "--json"])
        .arg(mount)
        .stdin(Stdio::null())
        .output()
        .context("cannot run vidbench disk stat")?;
    if !out.status.success() {
        bail!("vidbench disk stat {} failed: {}", mount.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout).context("vidbench disk stat --json did not print JSON")
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Err(e) = self.unmount() {
            tracing::warn!("{e:#}");
        }
    }
}

/// How long a mount may be silent (no new line in its log) before it counts
/// as hung.
const QUIET_LIMIT: Duration = Duration::from_secs(60);

/// Calls `attempt(window)` until it is not `TimedOut`, or until a window
/// passes in which `progress()` did not change.
fn wait_while_progressing<E>(
    window: Duration,
    progress: impl Fn() -> u64,
    mut attempt: impl FnMut(Duration) -> Result<Readiness, E>,
) -> Result<Readiness, E> {
    let mut seen = progress();
    loop {
        match attempt(window)? {
            Readiness::TimedOut => {
                let now = progress();
                if now == seen {
                    return Ok(Readiness::TimedOut);
                }
                seen = now;
            }
            other => return Ok(other),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn several_drives_sum_their_counters_and_keep_each_document() {
        use super::merge_stats;
        use serde_json::json;
        let drive = |reads: u64, busy: f64, dev: &str| {
            json!({"uptime_s": 5.0, "total": {"counters": {"reads": reads, "bytes": reads * 4096, "busy_ns": busy}},
                   "block_layer": {"counters": {"device": dev, "reads": reads, "read_sectors": reads * 8}}})
        };
        let one = drive(3, 1.5, "loop0");
        assert_eq!(merge_stats(vec![one.clone()]), one, "one drive: its document unchanged");
        let m = merge_stats(vec![drive(3, 1.5, "loop0"), drive(5, 2.0, "loop1")]);
        assert_eq!(m["total"]["counters"]["reads"], json!(8));
        assert_eq!(m["total"]["counters"]["bytes"], json!(8 * 4096));
        assert_eq!(m["total"]["counters"]["busy_ns"], json!(3.5));
        assert_eq!(m["block_layer"]["counters"]["read_sectors"], json!(64));
        assert_eq!(m["block_layer"]["counters"]["device"], json!("loop0"), "text is the first drive's");
        assert_eq!(m["uptime_s"], json!(5.0));
        assert_eq!(m["drives"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn each_file_is_served_from_one_drive_drawn_by_seed() {
        use super::{drive_mounts, path_on_drive};
        use std::path::Path;
        assert_eq!(path_on_drive("/v/00042.mp4", 1, 7), "/v/00042.mp4");
        assert_eq!(drive_mounts(Path::new("/r/mnt"), 1), [Path::new("/r/mnt")]);
        assert_eq!(drive_mounts(Path::new("/r/mnt"), 2), [Path::new("/r/mnt/d0"), Path::new("/r/mnt/d1")]);
        let paths: Vec<String> = (0..2000).map(|i| format!("/v/{i:05}.mp4")).collect();
        let on = |seed| paths.iter().map(|p| path_on_drive(p, 2, seed)).collect::<Vec<_>>();
        let a = on(1);
        assert_eq!(a, on(1), "the same seed, the same division");
        assert_ne!(a, on(2), "another seed, another division");
        let q = path_on_drive("/v/00042.mp4?start=10", 2, 1);
        assert_eq!(q.split('?').next().unwrap(), path_on_drive("/v/00042.mp4", 2, 1), "a query string keeps the file's drive");
        for (p, q) in paths.iter().zip(&a) {
            assert!(q == &format!("/d0{p}") || q == &format!("/d1{p}"), "{q}");
        }
        let d0 = a.iter().filter(|q| q.starts_with("/d0/")).count();
        assert!((900..1100).contains(&d0), "about half the files on each drive: {d0} of 2000 on d0");
    }

    #[test]
    fn a_mount_is_waited_for_while_its_log_grows_and_given_up_when_it_stops() {
        use super::{wait_while_progressing, Readiness};
        use std::cell::Cell;
        use std::time::Duration;
        // The log grows during the first three windows, then the mount is ready.
        let len = Cell::new(0u64);
        let mut calls = 0;
        let r = wait_while_progressing(Duration::ZERO, || len.get(), |_| {
            calls += 1;
            len.set(len.get() + 10);
            Ok::<_, ()>(if calls < 4 { Readiness::TimedOut } else { Readiness::Ready })
        });
        assert!(matches!(r, Ok(Readiness::Ready)) && calls == 4);
        // A log that stops growing: one silent window and it is given up.
        let mut calls = 0;
        let r = wait_while_progressing(Duration::ZERO, || 7, |_| {
            calls += 1;
            Ok::<_, ()>(Readiness::TimedOut)
        });
        assert!(matches!(r, Ok(Readiness::TimedOut)) && calls == 1);
    }

    use super::*;

    fn options() -> DiskOptions {
        DiskOptions {
            library: "/w/library.json".into(),
            preset: "wd-red-1tb".into(),
            read_ahead_kb: 2048,
            max_request_kb: Some(1024),
            block: None,
            trace: Some("/r/disk-trace.csv".into()),
            extra_args: vec!["--uid".into(), "0".into()],
        }
    }

    #[test]
    fn fuse_mode_mounts_as_before() {
        assert_eq!(
            options().mount_args(Path::new("/r/mnt")).join(" "),
            "disk mount /r/mnt --library /w/library.json --preset wd-red-1tb --read-ahead-kb 2048 --max-request-kb 1024 --trace /r/disk-trace.csv --uid 0"
        );
    }

    #[test]
    fn block_mode_passes_every_setting_given_and_no_fuse_one() {
        let mut o = options();
        o.max_request_kb = None;
        o.block = Some(BlockOptions { fs: FsKind::Ext4, ..Default::default() });
        assert_eq!(
            o.mount_args(Path::new("/r/mnt")).join(" "),
            "disk mount /r/mnt --library /w/library.json --preset wd-red-1tb --read-ahead-kb 2048 --fs ext4 --trace /r/disk-trace.csv --block --uid 0",
            "unset settings are the disk's defaults"
        );
        o.block = Some(BlockOptions {
            fs: FsKind::Xfs,
            fs_size: Some(FsSize::Packed),
            fs_slack_pct: Some(20),
            fill_order: Some(FillOrder::Shuffled),
            fill_seed: Some(7),
            image_cache: Some("/cache".into()),
            image: Some("/cache/old.vbimg".into()),
            scheduler: Some(Scheduler::MqDeadline),
            max_sectors_kb: Some(1280),
            nr_requests: Some(64),
        });
        o.trace = None;
        assert_eq!(
            o.mount_args(Path::new("/r/mnt"))[9..].join(" "),
            "--fs xfs --fs-size packed --fs-slack-pct 20 --fill-order shuffled --seed 7 --image-cache /cache --image /cache/old.vbimg --scheduler mq-deadline --max-sectors-kb 1280 --nr-requests 64 --block --uid 0"
        );
    }
}
