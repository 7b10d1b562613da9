//! Where each file of the library lies on the emulated platter.
//!
//! Files are contiguous. Their order is a permutation of the library drawn from
//! a seed (random placement, as on the papers' disks) or the id order
//! (sequential placement). The library is then spread over the whole drive:
//! the free space is cut into equal gaps, one before each file, so that even a
//! small library spans the full stroke and seeks between files cost what they
//! would on a full disk. Starts are aligned to 4 KiB.

use crate::model::SECTOR;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use vidbench_library::Library;

/// Placement order of the files on the platter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// A random permutation drawn from the seed.
    Random,
    /// In the manifest's order.
    Sequential,
}

/// First sector of every file, indexed like `library.files`.
#[derive(Debug, Clone)]
pub struct Layout {
    pub start_lba: Vec<u64>,
}

const ALIGN_SECTORS: u64 = 4096 / SECTOR;

impl Layout {
    /// Lays `library` out on a drive of `total_sectors`; fails if it does not fit.
    pub fn new(library: &Library, total_sectors: u64, placement: Placement, seed: u64) -> Result<Layout, String> {
        let n = library.files.len() as u64;
        let sizes: Vec<u64> = library.files.iter().map(|f| f.size.div_ceil(SECTOR).div_ceil(ALIGN_SECTORS) * ALIGN_SECTORS).collect();
        let used: u64 = sizes.iter().sum();
        if used > total_sectors {
            return Err(format!(
                "the library ({:.1} GB in {} files) does not fit on the drive ({:.1} GB); choose a larger capacity_gb",
                (used * SECTOR) as f64 / 1e9,
                n,
                (total_sectors * SECTOR) as f64 / 1e9
            ));
        }
        let mut order: Vec<usize> = (0..library.files.len()).collect();
        if placement == Placement::Random {
            order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
        }
        let gap = (total_sectors - used) / n / ALIGN_SECTORS * ALIGN_SECTORS;
        let mut start_lba = vec![0; library.files.len()];
        let mut lba = gap / 2 / ALIGN_SECTORS * ALIGN_SECTORS;
        for &i in &order {
            start_lba[i] = lba;
            lba += sizes[i] + gap;
        }
        debug_assert!(lba - gap <= total_sectors);
        Ok(Layout { start_lba })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vidbench_library::{Video, MANIFEST_VERSION};

    fn library(sizes: &[u64]) -> Library {
        Library {
            version: MANIFEST_VERSION,
            name: "t".into(),
            placement_seed: 1,
            files: sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| Video { id: i as u32, content: None, path: format!("v/{i}"), size, video: i as u32, chunk: None, bitrate_kbps: 400, duration_s: 1.0, rank: 1 + i as u32 })
                .collect(),
        }
    }

    #[test]
    fn files_spread_over_the_disk_without_overlap() {
        let lib = library(&[1 << 20, 5000, 3 << 20, 7, 1 << 20]);
        let total = 1_000_000_000u64;
        for placement in [Placement::Random, Placement::Sequential] {
            let l = Layout::new(&lib, total, placement, 42).unwrap();
            let mut spans: Vec<(u64, u64)> = l.start_lba.iter().zip(&lib.files).map(|(&s, f)| (s, s + f.size.div_ceil(SECTOR))).collect();
            spans.sort();
            for w in spans.windows(2) {
                assert!(w[0].1 <= w[1].0, "{placement:?}: overlap {w:?}");
            }
            assert!(spans.iter().all(|&(s, _)| s % ALIGN_SECTORS == 0));
            assert!(spans.last().unwrap().1 <= total);
            // The library spans most of the drive.
            assert!(spans.last().unwrap().0 > total * 3 / 4 && spans[0].0 < total / 4, "{spans:?}");
        }
        let seq = Layout::new(&lib, total, Placement::Sequential, 42).unwrap();
        assert!(seq.start_lba.windows(2).all(|w| w[0] < w[1]));
        let r1 = Layout::new(&lib, total, Placement::Random, 1).unwrap().start_lba;
        let r2 = Layout::new(&lib, total, Placement::Random, 2).unwrap().start_lba;
        assert_ne!(r1, r2, "the seed chooses the order");
    }

    #[test]
    fn a_library_larger_than_the_drive_is_refused() {
        let err = Layout::new(&library(&[10_000_000]), 1000, Placement::Random, 1).unwrap_err();
        assert!(err.contains("does not fit"), "{err}");
    }
}
