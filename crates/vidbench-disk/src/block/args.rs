//! The block-mode flags of `vidbench disk mount` (`--block` and what goes
//! with it) and the choices they name: filesystem, I/O scheduler, fill order,
//! filesystem size. Kept apart from the rest of block mode so that the mount
//! command line (`mount_args`) can hold them without importing block mode.

use std::path::PathBuf;

/// The filesystem on the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsKind {
    #[default]
    Ext4,
    Xfs,
}

impl FsKind {
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
        }
    }
    pub(super) fn mkfs(self) -> &'static str {
        match self {
            FsKind::Ext4 => "mkfs.ext4",
            FsKind::Xfs => "mkfs.xfs",
        }
    }
    pub(super) fn package(self) -> &'static str {
        match self {
            FsKind::Ext4 => "e2fsprogs",
            FsKind::Xfs => "xfsprogs",
        }
    }
    pub(super) fn other(self) -> &'static str {
        match self {
            FsKind::Ext4 => "xfs",
            FsKind::Xfs => "ext4",
        }
    }
    /// Mount options of the filesystem the builder lays the library out on.
    /// ext4, no_prefetch_block_bitmaps: right after a mount ext4 reads block
    /// bitmaps in the background (and the allocator ahead of itself), and
    /// its cheap allocation passes skip block groups whose bitmap has not
    /// arrived, so where a file lands depended on the timing of those reads:
    /// five builds of one 2,000-file key on one machine placed 8 to 1,792
    /// files differently from each other, two of the 20,000-file paper-scale
    /// library 19,802. Without the prefetch a group is read when the
    /// allocator needs it, and five builds (three at paper scale) placed
    /// every file alike. xfs placed every file alike without any option.
    pub(super) fn build_options(self) -> &'static str {
        match self {
            FsKind::Ext4 => "no_prefetch_block_bitmaps",
            FsKind::Xfs => "",
        }
    }
    /// Read-only mount options that never write (no journal replay).
    pub(super) fn ro_options(self) -> &'static str {
        match self {
            FsKind::Ext4 => "noload",
            // nouuid: two mounts of the same cached image are two disks with
            // the same filesystem UUID, which xfs otherwise refuses.
            FsKind::Xfs => "norecovery,nouuid",
        }
    }
}

/// Order in which the builder creates the library's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FillOrder {
    /// The manifest's order (id order), as a copy of the library would.
    Library,
    /// A permutation drawn from --seed.
    Shuffled,
}

impl FillOrder {
    pub fn name(self) -> &'static str {
        match self {
            FillOrder::Library => "library",
            FillOrder::Shuffled => "shuffled",
        }
    }
}

/// How much of the drive the filesystem covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsSize {
    /// The whole drive: the filesystem's allocator spreads directories and
    /// files over it, as on a server's data disk.
    Whole,
    /// Only the library plus --fs-slack-pct, at the start of the drive (the
    /// outer, fastest tracks).
    Packed,
}

impl FsSize {
    pub fn name(self) -> &'static str {
        match self {
            FsSize::Whole => "whole",
            FsSize::Packed => "packed",
        }
    }
}

/// The I/O schedulers of blk-mq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    None,
    MqDeadline,
    Bfq,
    Kyber,
}

impl Scheduler {
    /// As the kernel names it in queue/scheduler.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::None => "none",
            Scheduler::MqDeadline => "mq-deadline",
            Scheduler::Bfq => "bfq",
            Scheduler::Kyber => "kyber",
        }
    }
}

/// Options of block mode (with --block).
#[derive(Debug, Clone, clap::Args)]
pub struct BlockArgs {
    /// Serve the drive as a block device (loop over an image) with a real
    /// filesystem at the mount point, instead of a FUSE filesystem.
    #[arg(long, help_heading = "Block mode")]
    pub block: bool,
    /// Filesystem on the drive.
    #[arg(long = "fs", value_enum, default_value_t = FsKind::Ext4, requires = "block", help_heading = "Block mode")]
    pub fs: FsKind,
    /// I/O scheduler of the device (/sys/block/loopN/queue/scheduler); the
    /// default is what the kernel gives a SATA disk.
    #[arg(long, value_enum, default_value_t = Scheduler::MqDeadline, requires = "block", help_heading = "Block mode")]
    pub scheduler: Scheduler,
    /// Largest request the block layer sends, KiB (queue/max_sectors_kb).
    /// Above the loop device's max_hw_sectors_kb (1280 here) the device gets
    /// its cap and the drive joins contiguous queued requests up to this size,
    /// as a disk's block layer would have merged them; at most 32767, a SATA
    /// disk's max_hw_sectors_kb. Default: the kernel's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..=32767), requires = "block", help_heading = "Block mode")]
    pub max_sectors_kb: Option<u32>,
    /// Requests the queue holds (queue/nr_requests). Default: the kernel's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..), requires = "block", help_heading = "Block mode")]
    pub nr_requests: Option<u32>,
    /// Order in which the files are written to the new filesystem.
    #[arg(long, value_enum, default_value_t = FillOrder::Library, requires = "block", help_heading = "Block mode")]
    pub fill_order: FillOrder,
    /// How much of the drive the filesystem covers.
    #[arg(long, value_enum, default_value_t = FsSize::Whole, requires = "block", help_heading = "Block mode")]
    pub fs_size: FsSize,
    /// Free space of a packed filesystem, percent of the library.
    #[arg(long, default_value_t = 10, requires = "block", help_heading = "Block mode")]
    pub fs_slack_pct: u32,
    /// Directory of built images [default: $XDG_CACHE_HOME/vidbench/images,
    /// else ~/.cache/vidbench/images, else /var/cache/vidbench/images].
    #[arg(long, value_name = "DIR", env = "VIDBENCH_IMAGE_CACHE", help_heading = "Block mode")]
    pub image_cache: Option<PathBuf>,
    /// Build the image again even if the cache has it.
    #[arg(long, requires = "block", help_heading = "Block mode")]
    pub rebuild_image: bool,
    /// Mount this image file instead of the cache's entry: an earlier build
    /// for the same library and layout, also by an older builder version (a
    /// resumed `vidbench run` keeps the drive it started on). Never builds.
    #[arg(long, value_name = "FILE", requires = "block", conflicts_with = "rebuild_image", help_heading = "Block mode")]
    pub image: Option<PathBuf>,
}
