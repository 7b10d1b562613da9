//! The command line of `vidbench disk mount`, shared by the FUSE mode
//! (`mount`) and the block mode (`block`).

use crate::drive_args::DriveArgs;
use crate::layout::Placement;
use crate::params::DriveParams;
use crate::sys;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use vidbench_library::Library;

#[derive(Debug, clap::Args)]
pub struct MountArgs {
    /// Existing empty directory to mount on.
    pub mountpoint: PathBuf,
    /// Library manifest (library.json, written by `vidbench workload gen`).
    #[arg(long)]
    pub library: PathBuf,
    #[command(flatten)]
    pub drive: DriveArgs,
    /// Stay attached to the terminal (the default).
    #[arg(long, conflicts_with = "daemonize")]
    pub foreground: bool,
    /// Run in the background; return once the mount is ready.
    #[arg(long)]
    pub daemonize: bool,
    /// Where a daemonized server writes its messages.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write every disk request to this CSV file (flushed at unmount).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Owner of the files (default: the caller).
    #[arg(long)]
    pub uid: Option<u32>,
    /// Group of the files (default: the caller's).
    #[arg(long)]
    pub gid: Option<u32>,
    /// The mount's readahead window, KiB (/sys/class/bdi/MAJ:MIN/read_ahead_kb).
    #[arg(long, default_value_t = 128)]
    pub read_ahead_kb: u32,
    /// Largest read the kernel may send, KiB (FUSE max_pages); above 1024 the
    /// sysctl fs.fuse.max_pages_limit is raised.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(4..=16384))]
    pub max_request_kb: u32,
    /// Asynchronous (readahead) requests the kernel keeps outstanding.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_background: u16,
    /// Order of the files on the platter.
    #[arg(long, value_enum, default_value_t = Placement::Random)]
    pub placement: Placement,
    /// Seed of the random placement (default: the manifest's placement_seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Threads reading FUSE requests. One keeps the kernel's order of the
    /// reads; with more, a read can reach the drive before one issued just
    /// ahead of it.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub fuse_threads: u32,
    #[command(flatten)]
    pub block: crate::block::args::BlockArgs,
}

impl MountArgs {
    /// What every mount needs before it sets anything up, in either mode: the
    /// drive (preset name and parameters), the library, and a mount point that
    /// is an unused directory on a machine with FUSE.
    pub fn prepare(&self) -> anyhow::Result<(String, DriveParams, Library)> {
        let (preset_name, params) = self.drive.resolve()?;
        let library = Library::load(&self.library).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mountpoint = &self.mountpoint;
        let meta = std::fs::metadata(mountpoint).with_context(|| format!("mount point {} does not exist or cannot be reached", mountpoint.display()))?;
        if !meta.is_dir() {
            bail!("mount point {} is not a directory", mountpoint.display());
        }
        if let Some(m) = sys::mount_at(mountpoint)? {
            bail!("{} is already a mount point ({} of {}, device {}:{}); unmount it first (`vidbench disk unmount {}`)", mountpoint.display(), m.fstype, m.source, m.major, m.minor, mountpoint.display());
        }
        if !Path::new("/dev/fuse").exists() {
            bail!("/dev/fuse is missing: the emulated drive is served through FUSE; load the fuse module (modprobe fuse) or run where FUSE is available");
        }
        Ok((preset_name, params, library))
    }
}
