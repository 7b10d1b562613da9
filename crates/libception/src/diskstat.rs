//! A block device's own I/O counters, read as iostat reads them.
//!
//! Paper 001 measured the adaptive score's disk time with iostat: ms per
//! transaction is the disk's busy time over the transactions it completed.
//! The kernel keeps both in `/sys/block/DEV/stat` (Documentation/block/stat):
//! field 1 is reads completed (after merging, one per request the device
//! served) and field 10 `io_ticks`, the milliseconds the device had I/O in
//! flight. The adaptive controller samples them at the start and end of each
//! interval and takes the deltas. They count every process's I/O on the
//! device, as iostat does.
//!
//! A queue named after several disks (`sda+sdb`, a dm or md device over
//! them) sums its disks' counters. Anonymous devices (`anon-0:45`, FUSE,
//! overlayfs) and devices missing from sysfs (`dev-8:99`) have no such file:
//! [`sample_in`] returns `None` and the caller estimates instead.

use std::path::Path;

/// Cumulative counters of one device (or the sum over several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceSample {
    /// Reads completed.
    pub reads: u64,
    /// Milliseconds with I/O in flight.
    pub io_ticks_ms: u64,
}

impl DeviceSample {
    /// The counters' growth from `earlier` to `self` (`None` if one went
    /// backwards: the device was replaced or its counters reset).
    pub fn since(&self, earlier: &DeviceSample) -> Option<DeviceSample> {
        Some(DeviceSample { reads: self.reads.checked_sub(earlier.reads)?, io_ticks_ms: self.io_ticks_ms.checked_sub(earlier.io_ticks_ms)? })
    }
}

/// Parses the contents of a `/sys/block/DEV/stat` file.
pub fn parse_stat(text: &str) -> Option<DeviceSample> {
    let fields: Vec<u64> = text.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
    // Eleven fields since Linux 2.6; more (discard, flush) since 4.18 and 5.5.
    if fields.len() < 11 {
        return None;
    }
    Some(DeviceSample { reads: fields[0], io_ticks_ms: fields[9] })
}

/// The counters of the queue `disk` (a queue name of [`crate::disks`]),
/// summed over its disks, reading sysfs under `sys_root` (normally `/sys`);
/// `None` when any of them has no readable stat file.
pub fn sample_in(sys_root: &Path, disk: &str) -> Option<DeviceSample> {
    let mut sum = DeviceSample::default();
    for name in disk.split('+') {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return None;
        }
        let text = std::fs::read_to_string(sys_root.join("block").join(name).join("stat")).ok()?;
        let s = parse_stat(&text)?;
        sum.reads += s.reads;
        sum.io_ticks_ms += s.io_ticks_ms;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VDA: &str = "  407517    10458 72052849  7573859  3889349  3364118 2530378695  5301211        0  1992072 12876263       16        0  1048592       15     2508     1177\n";

    #[test]
    fn reads_completed_and_io_ticks_from_the_stat_file() {
        assert_eq!(parse_stat(VDA), Some(DeviceSample { reads: 407517, io_ticks_ms: 1992072 }));
        assert_eq!(parse_stat("1 2 3 4 5 6 7 8 9 10 11"), Some(DeviceSample { reads: 1, io_ticks_ms: 10 }));
        assert_eq!(parse_stat("1 2 3"), None, "too short");
        assert_eq!(parse_stat("1 2 3 4 5 6 7 8 9 x 11"), None);
    }

    #[test]
    fn stacked_queues_sum_and_anonymous_ones_have_none() {
        let t = tempfile::tempdir().unwrap();
        for (name, text) in [("sda", "10 0 0 0 0 0 0 0 0 100 0"), ("sdb", "5 0 0 0 0 0 0 0 0 50 0")] {
            std::fs::create_dir_all(t.path().join("block").join(name)).unwrap();
            std::fs::write(t.path().join("block").join(name).join("stat"), text).unwrap();
        }
        assert_eq!(sample_in(t.path(), "sda"), Some(DeviceSample { reads: 10, io_ticks_ms: 100 }));
        assert_eq!(sample_in(t.path(), "sda+sdb"), Some(DeviceSample { reads: 15, io_ticks_ms: 150 }));
        assert_eq!(sample_in(t.path(), "anon-0:45"), None);
        assert_eq!(sample_in(t.path(), "sda+sdc"), None, "every disk or none");
        assert_eq!(sample_in(t.path(), "../block/sda"), None);
        let later = DeviceSample { reads: 12, io_ticks_ms: 130 };
        assert_eq!(later.since(&DeviceSample { reads: 10, io_ticks_ms: 100 }), Some(DeviceSample { reads: 2, io_ticks_ms: 30 }));
        assert_eq!(DeviceSample::default().since(&later), None);
    }
}
