//! The start-up disk probe of the adaptive controller (paper 001 section 7):
//! the start size is the size whose transfer time equals the average seek
//! time (Li et al.). Before a disk worker's first read, a few timed reads
//! measure both: small reads at offsets spread over the target, in an order
//! that alternates between its halves so that consecutive reads are far
//! apart, give the access time (seek + rotation); two reads of 16 MiB and
//! 1 MiB, each after a seek, give the transfer rate from the
//! difference of their times (the per-read costs, an access and any lost
//! revolution between the pieces a large read is split into, cancel); and
//! `start = access time x transfer rate`. On a target with room for them
//! (a device, or a file of 576 MiB or more) three such pairs are timed and
//! the median rate taken: one pair once gave a rate 1.6 times too low (69.5
//! against 114.5 MB/s on the same emulated drive, slowed by whatever else
//! ran when the first request came; not measured).
//!
//! The target is the whole disk when the worker's disk is one block device
//! the daemon can open read-only (`/dev/NAME`, checked against
//! `/sys/block/NAME/dev`): O_DIRECT reads at offsets spread over the device
//! give the disk-wide average seek, what the paper means. Otherwise (FUSE and
//! other anonymous devices, a queue over several disks, no permission) it is
//! the file in hand, whose seeks span only that file: on a disk much larger
//! than the file the start is an underestimate that the gradient descent then
//! corrects. File offsets already in the page cache are skipped (a cached read
//! times memory, not the disk), and the pages the probe read are dropped from
//! it afterwards; with too few uncached offsets, a cached transfer range, or
//! timings that make no sense, the probe gives no size and the controller
//! keeps its default start. The probe reads about 51 MiB once per worker
//! (17 MiB on a small file; about 0.6 s on a 5,400 rpm disk). Limits also
//! in docs/daemon.md.

use super::snapshot::ProbeSource;
use crate::residency;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Small reads timed for the access time, and their size.
const ACCESS_READS: u64 = 6;
const ACCESS_BYTES: usize = 4096;
/// The two reads timed for the transfer rate: the smaller, and the largest
/// the larger may be (an eighth of the target at most, so that it fits
/// between the access reads around the middle: they are a sixth of the
/// target apart).
const SMALL_TRANSFER: u64 = 1 << 20;
const LARGE_TRANSFER: u64 = 16 << 20;
/// Transfer pairs timed where the target has room (see `transfer_centers`);
/// the rate is their median.
const TRANSFER_PAIRS: u64 = 3;
/// The larger transfer read must be at least this (the difference of the two
/// then spans 3 MiB), so targets under eight times this give no measurement.
const MIN_LARGE_TRANSFER: u64 = 4 << 20;
const MIN_FILE: u64 = 8 * MIN_LARGE_TRANSFER;
/// Offsets and buffers of O_DIRECT reads are aligned to this (at least any
/// device's logical block size).
const DIRECT_ALIGN: usize = 4096;

/// What the probe measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeResult {
    /// Mean time of the small reads (seek + rotation + overhead).
    pub access: Duration,
    /// Bytes per second the disk streams once a read is under way.
    pub transfer_bps: f64,
    /// `access x transfer_bps`: the start size.
    pub start_bytes: u64,
    pub source: ProbeSource,
}

/// The transfer rate from two timed reads of different sizes, each after a
/// seek: the extra bytes of the larger over its extra time. `None` unless the
/// larger read is both larger and slower (a large read no slower than a small
/// one came from a cache).
pub fn transfer_rate(small: (Duration, u64), large: (Duration, u64)) -> Option<f64> {
    let extra_time = large.0.checked_sub(small.0).filter(|t| !t.is_zero())?;
    let extra_bytes = large.1.checked_sub(small.1).filter(|&b| b > 0)?;
    Some(extra_bytes as f64 / extra_time.as_secs_f64())
}

/// The start size from the access time and the transfer rate, if they make
/// sense.
pub fn start_from(access: Duration, transfer_bps: f64) -> Option<ProbeResult> {
    if access.is_zero() || !(transfer_bps.is_finite() && transfer_bps > 0.0) {
        return None;
    }
    let start_bytes = (access.as_secs_f64() * transfer_bps) as u64;
    Some(ProbeResult { access, transfer_bps, start_bytes, source: ProbeSource::File })
}

/// What the probe reads: its size, which ranges are worth timing, and a
/// timed read.
trait Target {
    fn size(&self) -> u64;
    /// `[at, at + len)` is not in the page cache (a read of it reaches the disk).
    fn uncached(&self, at: u64, len: u64) -> bool;
    /// Reads `len` bytes at `at`; how long it took (`None`: failed or short).
    fn timed_read(&mut self, at: u64, len: usize) -> Option<Duration>;
}

/// The access reads' offsets, in reading order: spread over `span`, page
/// aligned, alternating between its halves (0, 3, 1, 4, 2, 5 of 6) so that
/// each seek crosses about a third or more of the span, as a random one does
/// on average.
fn access_offsets(span: u64) -> Vec<u64> {
    let half = ACCESS_READS.div_ceil(2);
    (0..ACCESS_READS)
        .map(|k| if k % 2 == 0 { k / 2 } else { half + k / 2 })
        .map(|i| (span / ACCESS_READS * i + span / (2 * ACCESS_READS)) & !4095)
        .collect()
}

fn measure(t: &mut dyn Target) -> Option<ProbeResult> {
    let size = t.size();
    if size < MIN_FILE {
        return None;
    }
    let mut times = Vec::new();
    for at in access_offsets(size - SMALL_TRANSFER) {
        if !t.uncached(at, ACCESS_BYTES as u64) {
            continue;
        }
        times.push(t.timed_read(at, ACCESS_BYTES)?);
    }
    if times.len() < 3 {
        return None;
    }
    let access = times.iter().sum::<Duration>() / times.len() as u32;
    // The transfer reads: each large one around the middle of the target (a
    // disk's middle zone streams at about its average rate; its outer edge
    // is twice as fast as its inner one), between the access reads at 5/12
    // and 7/12, then a small one near an end (the start, or a sixth from
    // either end), away from the access reads. Each read begins with a seek
    // of about half the target, so the accesses of a pair cost about the same
    // and cancel in the difference.
    let large = LARGE_TRANSFER.min((size / 8) & !(SMALL_TRANSFER - 1));
    let centers = transfer_centers(size, large);
    let large_ats: Vec<u64> = centers.iter().map(|&c| (c - large / 2) & !4095).collect();
    let clear = |at: u64| large_ats.iter().all(|&l| at + SMALL_TRANSFER <= l || at >= l + large);
    let mut smalls = [0, size / 6, size - size / 6].map(|at| at & !4095).into_iter();
    let mut rates = Vec::new();
    for &large_at in &large_ats {
        if !t.uncached(large_at, large) {
            // A cached middle would time memory: no pair there.
            continue;
        }
        let Some(small_at) = smalls.by_ref().find(|&at| clear(at) && t.uncached(at, SMALL_TRANSFER)) else { break };
        let large_time = t.timed_read(large_at, large as usize)?;
        let small_time = t.timed_read(small_at, SMALL_TRANSFER as usize)?;
        rates.extend(transfer_rate((small_time, SMALL_TRANSFER), (large_time, large)));
    }
    start_from(access, median(&mut rates)?)
}

/// Where the large transfer reads are centred: three, 1/18 of the target
/// apart around its middle, where they clear the access reads at 5/12 and
/// 7/12 (targets of 36 large reads or more); else one in the middle.
fn transfer_centers(size: u64, large: u64) -> Vec<u64> {
    if size / 36 >= large {
        (0..TRANSFER_PAIRS).map(|i| size / 2 - size / 18 + i * (size / 18)).collect()
    } else {
        vec![size / 2]
    }
}

/// The median of `v` (of two, their mean); `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A file read through the page cache.
struct FileTarget<'a> {
    file: &'a File,
    size: u64,
    buf: Vec<u8>,
    /// The ranges read, every one uncached before: dropped from the page
    /// cache again afterwards (the probe's pages would otherwise stay
    /// charged to the daemon's memory for nothing).
    read: Vec<(u64, u64)>,
}

impl Target for FileTarget<'_> {
    fn size(&self) -> u64 {
        self.size
    }

    fn uncached(&self, at: u64, len: u64) -> bool {
        residency::none_resident(self.file.as_fd(), at, at + len).unwrap_or(false)
    }

    fn timed_read(&mut self, at: u64, len: usize) -> Option<Duration> {
        self.read.push((at, len as u64));
        let t = Instant::now();
        let n = self.file.read_at(&mut self.buf[..len], at).ok()?;
        (n == len).then(|| t.elapsed())
    }
}

impl Drop for FileTarget<'_> {
    fn drop(&mut self) {
        for &(at, len) in &self.read {
            // SAFETY: plain advice on a valid descriptor; failure only leaves pages cached.
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), at as libc::off_t, len as libc::off_t, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

/// A block device (or any file) opened with O_DIRECT: nothing is cached.
struct DirectTarget {
    file: File,
    size: u64,
    /// Large enough to hold an aligned `LARGE_TRANSFER` window.
    buf: Vec<u8>,
}

impl Target for DirectTarget {
    fn size(&self) -> u64 {
        self.size
    }

    fn uncached(&self, _at: u64, _len: u64) -> bool {
        true
    }

    fn timed_read(&mut self, at: u64, len: usize) -> Option<Duration> {
        let skip = self.buf.as_ptr().align_offset(DIRECT_ALIGN);
        let window = self.buf.get_mut(skip..skip + len)?;
        let t = Instant::now();
        let n = self.file.read_at(window, at).ok()?;
        (n == len).then(|| t.elapsed())
    }
}

/// Times reads on `file` (see the module comment); `None` when the file
/// cannot give a measurement.
pub fn run(file: &File) -> Option<ProbeResult> {
    let size = file.metadata().ok()?.len();
    measure(&mut FileTarget { file, size, buf: vec![0u8; LARGE_TRANSFER as usize], read: Vec::new() })
}

/// Times O_DIRECT reads spread over the device (or file) at `path`, opened
/// read-only; `None` when it cannot be opened that way or gives no measurement.
pub fn run_direct(path: &Path) -> Option<ProbeResult> {
    let mut file = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).ok()?;
    // A block device's metadata has no length; its end does.
    let size = file.seek(SeekFrom::End(0)).ok()?;
    let mut target = DirectTarget { file, size, buf: vec![0u8; LARGE_TRANSFER as usize + DIRECT_ALIGN] };
    measure(&mut target).map(|r| ProbeResult { source: ProbeSource::Device, ..r })
}

/// The device node of the disk queue `disk` (a queue name of
/// [`crate::disks`]): `dev_root/NAME`, if it is a block device with the
/// number sysfs gives for `NAME` under `sys_root`. `None` for anonymous
/// devices, queues over several disks and anything that does not match.
pub fn device_node(sys_root: &Path, dev_root: &Path, disk: &str) -> Option<PathBuf> {
    if disk.is_empty() || disk.contains(['/', '+']) || disk.starts_with('.') {
        return None;
    }
    let number = std::fs::read_to_string(sys_root.join("block").join(disk).join("dev")).ok()?;
    let (major, minor) = number.trim().split_once(':')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    let node = dev_root.join(disk);
    let meta = std::fs::metadata(&node).ok()?;
    (meta.file_type().is_block_device() && meta.rdev() == libc::makedev(major, minor)).then_some(node)
}

/// The probe for a worker whose disk is `disk` and whose first read is on
/// `file`: the whole device when it can be opened, else the file.
pub fn run_for(disk: &str, file: &File) -> Option<ProbeResult> {
    device_node(Path::new("/sys"), Path::new("/dev"), disk).and_then(|node| run_direct(&node)).or_else(|| run(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_is_where_transfer_time_equals_access_time() {
        // WD Red-like: 15 ms access, 125 MiB/s: 1.875 MiB.
        let rate = transfer_rate((Duration::from_millis(23), 1 << 20), (Duration::from_millis(143), 16 << 20)).unwrap();
        assert!((rate - 131_072_000.0).abs() < 1.0, "{rate}");
        let r = start_from(Duration::from_millis(15), rate).unwrap();
        assert_eq!(r.start_bytes, 1_966_080);
        // A large read no slower than a small one measured the page cache.
        assert_eq!(transfer_rate((Duration::from_millis(15), 1 << 20), (Duration::from_millis(15), 16 << 20)), None);
        assert_eq!(transfer_rate((Duration::from_millis(15), 1 << 20), (Duration::from_millis(20), 1 << 20)), None);
        assert_eq!(start_from(Duration::ZERO, rate), None);
        assert_eq!(start_from(Duration::from_millis(15), f64::NAN), None);
    }

    #[test]
    fn small_or_cached_files_give_no_measurement() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, vec![1u8; 1 << 20]).unwrap();
        assert_eq!(run(&File::open(&small).unwrap()), None);
        // Just written: every page is in the page cache.
        let cached = dir.path().join("cached");
        std::fs::write(&cached, vec![1u8; 16 << 20]).unwrap();
        assert_eq!(run(&File::open(&cached).unwrap()), None);
    }

    /// A 1 TiB disk whose access time grows with the seek distance (5 ms +
    /// 10 ms per full stroke) and transfers 100 MB/s, read over `size` bytes
    /// from its start; with `lost_ms`, a read of
    /// 1 MiB or more also loses that much once (a revolution missed between
    /// the pieces the stack splits it into).
    struct SeekModel {
        size: u64,
        head: u64,
        seeks: Vec<u64>,
        lost_ms: f64,
        /// Every read, and the ranges already in the cache (read at no cost).
        reads: Vec<(u64, u64)>,
        cached: Vec<(u64, u64)>,
        /// Reads (by their index) delayed by so many ms: other requests at
        /// the disk meanwhile.
        delayed: Vec<(usize, f64)>,
    }

    impl SeekModel {
        fn new(size: u64, lost_ms: f64) -> SeekModel {
            SeekModel { size, head: 0, seeks: Vec::new(), lost_ms, reads: Vec::new(), cached: Vec::new(), delayed: Vec::new() }
        }
        fn cached_bytes(&self, at: u64, len: u64) -> u64 {
            self.cached.iter().map(|&(c, n)| (at + len).min(c + n).saturating_sub(at.max(c))).sum()
        }
    }

    impl Target for SeekModel {
        fn size(&self) -> u64 {
            self.size
        }
        fn uncached(&self, at: u64, len: u64) -> bool {
            self.cached_bytes(at, len) == 0
        }
        fn timed_read(&mut self, at: u64, len: usize) -> Option<Duration> {
            // What O_DIRECT needs, and what a file can give.
            assert!(at.is_multiple_of(DIRECT_ALIGN as u64) && len.is_multiple_of(DIRECT_ALIGN), "unaligned read {len} at {at}");
            assert!(at + len as u64 <= self.size, "read {len} at {at} past the end {}", self.size);
            let seek = self.head.abs_diff(at);
            self.seeks.push(seek);
            self.reads.push((at, len as u64));
            self.head = at + len as u64;
            // Strokes of a 1 TiB disk, whatever part of it the target is.
            let stroke = seek as f64 / (1u64 << 40) as f64;
            let lost = if len as u64 >= SMALL_TRANSFER { self.lost_ms / 1e3 } else { 0.0 };
            let from_disk = len as u64 - self.cached_bytes(at, len as u64);
            let delay = self.delayed.iter().filter(|(i, _)| *i == self.reads.len() - 1).map(|(_, ms)| ms / 1e3).sum::<f64>();
            Some(Duration::from_secs_f64(0.005 + 0.010 * stroke + lost + delay + from_disk as f64 / 100e6))
        }
    }

    /// The rate is the disk's even when large reads lose a revolution (one
    /// read timed alone would put that revolution in the transfer: 1 MiB in
    /// 11 ms more, half the rate), on targets of any size from the smallest,
    /// with every read inside the target, aligned, and apart from the others.
    #[test]
    fn transfer_rate_is_the_media_rate() {
        for size in [MIN_FILE, MIN_FILE + 12_345, (100 << 20) + 777, 1 << 40] {
            for lost_ms in [0.0, 11.1] {
                let mut disk = SeekModel::new(size, lost_ms);
                let r = measure(&mut disk).unwrap_or_else(|| panic!("size {size}"));
                assert!((r.transfer_bps / 100e6 - 1.0).abs() < 0.02, "size {size}, lost {lost_ms} ms: {r:?}");
                // Three pairs where there is room (576 MiB and more), else one.
                let pairs = if size >= 36 * LARGE_TRANSFER { 3 } else { 1 };
                assert_eq!(disk.reads.len(), ACCESS_READS as usize + 2 * pairs, "size {size}");
                for (i, &(a, n)) in disk.reads.iter().enumerate() {
                    for &(b, m) in &disk.reads[i + 1..] {
                        assert!(a + n <= b || b + m <= a, "size {size}: reads {n} at {a} and {m} at {b} overlap");
                    }
                }
            }
        }
        let r = measure(&mut SeekModel::new(1 << 40, 0.0)).unwrap();
        assert!(r.access >= Duration::from_millis(8) && r.access <= Duration::from_millis(10), "{r:?}");
        // Targets too small for a 4 MiB transfer read give no measurement.
        assert_eq!(measure(&mut SeekModel::new(MIN_FILE - 1, 0.0)), None);
    }

    /// One transfer pair delayed by other requests at the disk (90 ms on its
    /// large read, as once seen: a rate 1.6 times too low alone) moves the
    /// median of three pairs by little; on a target with room for one pair
    /// only, the delay shows.
    #[test]
    fn one_delayed_transfer_pair_does_not_set_the_rate() {
        for pair in 0..3 {
            let mut disk = SeekModel::new(1 << 40, 0.0);
            disk.delayed.push((ACCESS_READS as usize + 2 * pair, 90.0));
            let r = measure(&mut disk).unwrap();
            assert!((r.transfer_bps / 100e6 - 1.0).abs() < 0.02, "pair {pair} delayed: {r:?}");
        }
        let mut small = SeekModel::new(256 << 20, 0.0);
        small.delayed.push((ACCESS_READS as usize, 90.0));
        let r = measure(&mut small).unwrap();
        assert!(r.transfer_bps < 0.7 * 100e6, "one pair: {r:?}");
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0]), Some(2.0));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
    }

    /// A cached page anywhere in a transfer read would make it fast and the
    /// rate too high: the small read moves to another place, and a cached
    /// middle gives no measurement.
    #[test]
    fn cached_pages_never_reach_the_transfer_reads() {
        let size = 256 << 20;
        let mut disk = SeekModel::new(size, 0.0);
        disk.cached.push((SMALL_TRANSFER - 4096, 4096));
        let r = measure(&mut disk).unwrap();
        assert!((r.transfer_bps / 100e6 - 1.0).abs() < 0.02, "{r:?}");
        assert_eq!(disk.reads.last().unwrap().0, (size / 6) & !4095, "the small read moved");
        let mut disk = SeekModel::new(size, 0.0);
        disk.cached.push((size / 2 + (1 << 20), 4096));
        assert_eq!(measure(&mut disk), None, "one cached page in the middle");
        assert_eq!(disk.reads.len(), ACCESS_READS as usize, "no transfer read was timed");
    }

    /// The access reads cross about a third of the target or more, as
    /// random seeks do on average, so the whole-disk target measures the
    /// disk-wide seek a file-sized target cannot.
    #[test]
    fn access_reads_alternate_halves_and_span_the_target() {
        let mut disk = SeekModel::new(1 << 40, 0.0);
        let r = measure(&mut disk).unwrap();
        let span = (1u64 << 40) as f64;
        let crossings: Vec<f64> = disk.seeks[1..ACCESS_READS as usize].iter().map(|&s| s as f64 / span).collect();
        assert!(crossings.iter().all(|&c| c > 0.3), "{crossings:?}");
        // A 64 MiB file at the start of the same disk: short seeks, a
        // smaller access time and start size than the whole disk's.
        let mut file = SeekModel::new(64 << 20, 0.0);
        let f = measure(&mut file).unwrap();
        assert!(r.access > f.access && r.start_bytes > f.start_bytes, "disk {r:?} file {f:?}");
    }

    /// O_DIRECT reads with an aligned buffer work on a regular file of a
    /// real file system (what a block device gets), and the result says so.
    #[test]
    fn direct_reads_span_the_whole_target() {
        // Beside the test binary (the target dir): a disk file system, where
        // O_DIRECT works (tmpfs refuses it).
        let exe = std::env::current_exe().unwrap();
        let dir = tempfile::Builder::new().prefix("probe-test-").tempdir_in(exe.parent().unwrap()).unwrap();
        let path = dir.path().join("disk");
        std::fs::write(&path, vec![7u8; 48 << 20]).unwrap();
        let mut file = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&path).unwrap();
        let size = file.seek(SeekFrom::End(0)).unwrap();
        let mut t = DirectTarget { file, size, buf: vec![0u8; LARGE_TRANSFER as usize + DIRECT_ALIGN] };
        for at in access_offsets(size - SMALL_TRANSFER) {
            assert!(at % DIRECT_ALIGN as u64 == 0 && at + ACCESS_BYTES as u64 <= size);
            assert!(t.timed_read(at, ACCESS_BYTES).is_some(), "O_DIRECT read at {at}");
        }
        assert!(t.timed_read(0, LARGE_TRANSFER as usize).is_some());
        assert!(t.timed_read(size - 4096, ACCESS_BYTES * 2).is_none(), "a short read is no measurement");
        if let Some(r) = run_direct(&path) {
            assert_eq!(r.source, ProbeSource::Device);
        }
        assert_eq!(run_direct(&dir.path().join("missing")), None);
    }

    /// The device node must be the block device sysfs names.
    #[test]
    fn device_nodes_are_checked_against_sysfs() {
        let sys = tempfile::tempdir().unwrap();
        let dev = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("block/sdq")).unwrap();
        std::fs::write(sys.path().join("block/sdq/dev"), "8:0\n").unwrap();
        std::fs::write(dev.path().join("sdq"), "not a device").unwrap();
        assert_eq!(device_node(sys.path(), dev.path(), "sdq"), None, "a regular file");
        for name in ["anon-0:45", "sda+sdb", "../sdq", ""] {
            assert_eq!(device_node(sys.path(), dev.path(), name), None, "{name}");
        }
        // On this machine: every /sys/block entry with a /dev node resolves.
        let real: Vec<String> = std::fs::read_dir("/sys/block")
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        for name in real.iter().filter(|n| Path::new("/dev").join(n).exists()) {
            assert_eq!(device_node(Path::new("/sys"), Path::new("/dev"), name), Some(Path::new("/dev").join(name)));
        }
        // A wrong number in sysfs is refused.
        if let Some(name) = real.iter().find(|n| Path::new("/dev").join(n).exists()) {
            std::fs::create_dir_all(sys.path().join("block").join(name)).unwrap();
            std::fs::write(sys.path().join("block").join(name).join("dev"), "4095:4095\n").unwrap();
            assert_eq!(device_node(sys.path(), Path::new("/dev"), name), None);
        }
    }
}
