//! Loop devices and their block-layer queue: attach, detach, knobs, counters.
//!
//! Attaching goes through util-linux `losetup --find --show` (it allocates a
//! free device with LOOP_CTL_GET_FREE and configures it atomically with
//! LOOP_CONFIGURE, retrying when another process takes the same device), so
//! concurrent mounts by other users of the machine never collide. Everything
//! else is sysfs: `/sys/block/loopN/queue/*` for the knobs a user sets on
//! `/dev/sdX`, `/sys/block/loopN/{stat,inflight}` for the block layer's own
//! counters, `loop/backing_file` to recognise our devices.

use anyhow::{bail, Context};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An attached loop device, e.g. `loop3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopDev {
    pub name: String,
}

impl LoopDev {
    pub fn dev_path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/{}", self.name))
    }

    pub fn sys(&self) -> PathBuf {
        PathBuf::from(format!("/sys/block/{}", self.name))
    }

    /// `/dev/loopN` -> LoopDev, if it names a loop device.
    pub fn from_dev_path(path: &str) -> Option<LoopDev> {
        let name = path.strip_prefix("/dev/")?;
        (name.starts_with("loop") && name[4..].chars().all(|c| c.is_ascii_digit()) && name.len() > 4).then(|| LoopDev { name: name.to_owned() })
    }

    /// The file behind the device, if it is attached.
    pub fn backing_file(&self) -> Option<PathBuf> {
        let text = std::fs::read_to_string(self.sys().join("loop/backing_file")).ok()?;
        let t = text.trim_end_matches('\n');
        (!t.is_empty()).then(|| PathBuf::from(t.trim_end_matches(" (deleted)")))
    }

    /// `(st_dev, st_ino)` of the file the device is attached to, from the
    /// kernel (LOOP_GET_STATUS64). Unlike `backing_file`, it still names the
    /// file once the filesystem holding it was lazily unmounted (the path then
    /// reads as if from that filesystem's root).
    pub fn backing_inode(&self) -> Option<(u64, u64)> {
        /// `struct loop_info64` of <linux/loop.h>.
        #[repr(C)]
        struct LoopInfo64 {
            lo_device: u64,
            lo_inode: u64,
            lo_rdevice: u64,
            lo_offset: u64,
            lo_sizelimit: u64,
            lo_number: u32,
            lo_encrypt_type: u32,
            lo_encrypt_key_size: u32,
            lo_flags: u32,
            lo_file_name: [u8; 64],
            lo_crypt_name: [u8; 64],
            lo_encrypt_key: [u8; 32],
            lo_init: [u64; 2],
        }
        const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(self.dev_path()).ok()?;
        // SAFETY: all-zero bytes are a valid LoopInfo64 (integers and arrays).
        let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl fills a struct loop_info64, which LoopInfo64 mirrors.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), LOOP_GET_STATUS64, &mut info as *mut LoopInfo64) };
        (rc == 0).then_some((info.lo_device, info.lo_inode))
    }

    /// `MAJ:MIN` of the device.
    pub fn dev_numbers(&self) -> anyhow::Result<(u32, u32)> {
        let text = std::fs::read_to_string(self.sys().join("dev")).with_context(|| format!("reading {}/dev", self.sys().display()))?;
        let (a, b) = text.trim().split_once(':').context("malformed dev file")?;
        Ok((a.parse()?, b.parse()?))
    }
}

/// Checks that this machine can attach loop devices, with what to do if not.
pub fn check_support() -> anyhow::Result<()> {
    if !Path::new("/dev/loop-control").exists() {
        bail!("block mode needs loop devices, but /dev/loop-control is missing: load the loop module (`modprobe loop`), or run without --block (FUSE mode)");
    }
    if which("losetup").is_none() {
        bail!("block mode needs `losetup` (Debian package util-linux/mount); install it or run without --block");
    }
    Ok(())
}

/// Finds a program on PATH (and the sbin directories, which a non-login root
/// shell may lack).
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].iter().map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Attaches `file` to a free loop device with direct I/O.
pub fn attach(file: &Path, read_only: bool) -> anyhow::Result<LoopDev> {
    let mut cmd = Command::new(which("losetup").unwrap_or_else(|| "losetup".into()));
    cmd.args(["--find", "--show", "--direct-io=on", "--sector-size", "512"]);
    if read_only {
        cmd.arg("--read-only");
    }
    cmd.arg(file);
    let out = cmd.output().with_context(|| format!("running losetup to attach {}", file.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if !out.status.success() {
        if stderr.contains("could not find any free loop device") || stderr.contains("failed to set up loop device") || stderr.contains("No such device") {
            bail!("no free loop device could be set up for {} (`losetup -a` lists the devices in use: detach unused ones with `losetup -d /dev/loopN`; check that /dev/loopN nodes exist, or raise the loop module's max_loop): {stderr}", file.display());
        }
        bail!("losetup could not attach {}: {stderr}", file.display());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dev = LoopDev::from_dev_path(stdout.trim()).with_context(|| format!("losetup printed {:?}, not a loop device", stdout.trim()))?;
    let dio = std::fs::read_to_string(dev.sys().join("loop/dio")).unwrap_or_default();
    if dio.trim() != "1" {
        let _ = detach(&dev);
        bail!("{} over {} did not get direct I/O (loop/dio = {:?}): the drive would be behind a second page cache; the backing file must support O_DIRECT", dev.name, file.display(), dio.trim());
    }
    Ok(dev)
}

/// Detaches a loop device (the kernel finishes it once its last user closes it).
pub fn detach(dev: &LoopDev) -> anyhow::Result<()> {
    let out = Command::new(which("losetup").unwrap_or_else(|| "losetup".into()))
        .arg("--detach")
        .arg(dev.dev_path())
        .output()
        .with_context(|| format!("running losetup --detach {}", dev.dev_path().display()))?;
    if !out.status.success() {
        bail!("losetup --detach {}: {}", dev.dev_path().display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Queue settings of paper 000 section 6.5, as a user sets them on /dev/sdX.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueueSettings {
    pub scheduler: Option<String>,
    pub read_ahead_kb: Option<u32>,
    pub max_sectors_kb: Option<u32>,
    pub nr_requests: Option<u32>,
    pub rotational: bool,
}

fn write_knob(dev: &LoopDev, knob: &str, value: &str) -> anyhow::Result<()> {
    let path = dev.sys().join("queue").join(knob);
    std::fs::write(&path, format!("{value}\n")).with_context(|| format!("setting {knob} of {}: writing {value:?} to {}", dev.name, path.display()))
}

/// Reads a queue knob as text.
pub fn read_knob(dev: &LoopDev, knob: &str) -> anyhow::Result<String> {
    let path = dev.sys().join("queue").join(knob);
    Ok(std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?.trim().to_owned())
}

/// Applies the settings and reads them back; refuses values the kernel
/// changed or rejected, naming the limit. A `max_sectors_kb` above what the
/// path below takes whole (the loop device's `max_hw_sectors_kb`, and
/// `backing_max_kb`, the largest read the image server takes) sets the
/// device to that cap and is returned: the drive joins the pieces up to it
/// (docs/disk.md, "max_sectors_kb").
pub fn apply(dev: &LoopDev, s: &QueueSettings, backing_max_kb: u32) -> anyhow::Result<Option<u32>> {
    write_knob(dev, "rotational", if s.rotational { "1" } else { "0" })?;
    // A loop device keeps its queue settings across detach and attach: set
    // every knob, to the kernel's default for a fresh disk when not asked.
    // Switching the scheduler (through none) also resets nr_requests to the
    // scheduler's default.
    let sched = s.scheduler.clone().unwrap_or_else(|| "mq-deadline".into());
    let available = read_knob(dev, "scheduler")?;
    let names: Vec<&str> = available.split_whitespace().map(|n| n.trim_matches(['[', ']'])).collect();
    if !names.contains(&sched.as_str()) {
        bail!("I/O scheduler {sched:?} is not available for {} (the kernel offers: {}); load its module (`modprobe {}`) or choose another", dev.name, names.join(" "), sched.replace('-', "_"));
    }
    write_knob(dev, "scheduler", "none")?;
    write_knob(dev, "scheduler", &sched)?;
    if let Some(n) = s.nr_requests {
        write_knob(dev, "nr_requests", &n.to_string())?;
        let now = read_knob(dev, "nr_requests")?;
        if now != n.to_string() {
            bail!("nr_requests of {} is {now} after writing {n}", dev.name);
        }
    }
    let hw: u32 = read_knob(dev, "max_hw_sectors_kb")?.parse().context("parsing max_hw_sectors_kb")?;
    // The kernel's default for a new disk: min(max_hw_sectors_kb, 1280 KiB).
    let max_sectors_kb = s.max_sectors_kb.or(Some(hw.min(1280)));
    let whole = hw.min(backing_max_kb);
    let join_kb = max_sectors_kb.filter(|&kb| kb > whole);
    if let Some(kb) = max_sectors_kb.map(|kb| kb.min(whole)) {
        write_knob(dev, "max_sectors_kb", &kb.to_string())?;
        let now = read_knob(dev, "max_sectors_kb")?;
        if now != kb.to_string() {
            bail!("max_sectors_kb of {} is {now} after writing {kb}", dev.name);
        }
    }
    if let Some(kb) = s.read_ahead_kb.or(Some(128)) {
        write_knob(dev, "read_ahead_kb", &kb.to_string())?;
        let now = read_knob(dev, "read_ahead_kb")?;
        if now != kb.to_string() {
            bail!("read_ahead_kb of {} is {now} after writing {kb}", dev.name);
        }
    }
    Ok(join_kb)
}

/// The effective queue settings, for the record.
pub fn current(dev: &LoopDev) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for k in ["scheduler", "read_ahead_kb", "max_sectors_kb", "max_hw_sectors_kb", "nr_requests", "rotational", "logical_block_size"] {
        m.insert(k.into(), read_knob(dev, k).map(serde_json::Value::from).unwrap_or(serde_json::Value::Null));
    }
    serde_json::Value::Object(m)
}

/// The block layer's counters of a device (Documentation/block/stat.rst),
/// reads only (the device is read-only) and the queue's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct BlockStat {
    pub device: String,
    /// Completed read requests, after merging.
    pub reads: u64,
    /// Reads merged into a request already queued.
    pub read_merges: u64,
    pub read_sectors: u64,
    /// Sum of the time each read spent from submission to completion, ms.
    pub read_ticks_ms: u64,
    /// Requests in flight now (from `inflight`, reads).
    pub in_flight: u64,
    /// Time the device had at least one request in flight, ms.
    pub io_ticks_ms: u64,
    /// Weighted time in queue (sum over requests of their time in flight), ms.
    pub time_in_queue_ms: u64,
}

/// Parses `/sys/block/X/stat` and `inflight`.
pub fn block_stat(dev: &LoopDev) -> anyhow::Result<BlockStat> {
    let path = dev.sys().join("stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut s = parse_stat(&text).with_context(|| format!("parsing {}", path.display()))?;
    s.device = dev.name.clone();
    if let Ok(inflight) = std::fs::read_to_string(dev.sys().join("inflight")) {
        s.in_flight = inflight.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(s.in_flight);
    }
    Ok(s)
}

fn parse_stat(text: &str) -> Option<BlockStat> {
    let f: Vec<u64> = text.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
    if f.len() < 11 {
        return None;
    }
    Some(BlockStat {
        device: String::new(),
        reads: f[0],
        read_merges: f[1],
        read_sectors: f[2],
        read_ticks_ms: f[3],
        in_flight: f[8],
        io_ticks_ms: f[9],
        time_in_queue_ms: f[10],
    })
}

impl BlockStat {
    /// `self - earlier`, counters only (in_flight stays the current value).
    pub fn since(&self, earlier: &BlockStat) -> BlockStat {
        BlockStat {
            device: self.device.clone(),
            reads: self.reads.saturating_sub(earlier.reads),
            read_merges: self.read_merges.saturating_sub(earlier.read_merges),
            read_sectors: self.read_sectors.saturating_sub(earlier.read_sectors),
            read_ticks_ms: self.read_ticks_ms.saturating_sub(earlier.read_ticks_ms),
            in_flight: self.in_flight,
            io_ticks_ms: self.io_ticks_ms.saturating_sub(earlier.io_ticks_ms),
            time_in_queue_ms: self.time_in_queue_ms.saturating_sub(earlier.time_in_queue_ms),
        }
    }

    /// iostat figures over `seconds`.
    pub fn rates(&self, seconds: f64) -> serde_json::Value {
        let secs = seconds.max(1e-9);
        let per = |x: u64| if self.reads == 0 { 0.0 } else { x as f64 / self.reads as f64 };
        serde_json::json!({
            "reads_per_s": self.reads as f64 / secs,
            "merges_per_s": self.read_merges as f64 / secs,
            "merge_pct": if self.reads + self.read_merges == 0 { 0.0 } else { 100.0 * self.read_merges as f64 / (self.reads + self.read_merges) as f64 },
            "mb_per_s": self.read_sectors as f64 * 512.0 / secs / 1e6,
            "avg_request_kib": per(self.read_sectors) * 512.0 / 1024.0,
            "avg_await_ms": per(self.read_ticks_ms),
            "avg_queue_depth": self.time_in_queue_ms as f64 / 1000.0 / secs,
            "util_pct": (self.io_ticks_ms as f64 / 10.0 / secs).min(100.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse() {
        let line = "    1893     1055   335906     5120        0        0        0        0        3     5464     5120        0        0        0        0        0        0\n";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.reads, s.read_merges, s.read_sectors, s.read_ticks_ms, s.in_flight, s.io_ticks_ms, s.time_in_queue_ms), (1893, 1055, 335906, 5120, 3, 5464, 5120));
        assert!(parse_stat("1 2 3").is_none());
        let r = s.rates(1.0);
        assert!((r["avg_request_kib"].as_f64().unwrap() - 335906.0 * 0.5 / 1893.0).abs() < 1e-9);
    }

    #[test]
    fn loop_names() {
        assert_eq!(LoopDev::from_dev_path("/dev/loop12").unwrap().name, "loop12");
        assert!(LoopDev::from_dev_path("/dev/loop").is_none());
        assert!(LoopDev::from_dev_path("/dev/sda").is_none());
        assert!(LoopDev::from_dev_path("/dev/loop1p1").is_none());
    }
}
