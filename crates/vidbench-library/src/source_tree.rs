//! Source trees for paper 000's diff microbenchmark (section 8): `copies`
//! identical trees `t0/`, `t1/`, ... of `files` files each, so that `diff -r
//! t0 t1` (and, in parallel, `diff -r t2 t3`) compares corresponding files of
//! equal content. Equal content makes diff read both files to their ends, as
//! it did for the paper's two nearly identical kernel versions; the copies
//! share content through `Video::content`, so no byte is stored.
//!
//! File sizes follow paper 000's Fig 19 (Linux 3.7.1): files over 16 KiB are
//! under a tenth of the files and carry about half of the bytes. The figure's
//! curves are not given as numbers, so the sizes come from a mixture fitted to
//! those two facts: with probability [`TAIL_SHARE`] a Pareto tail from 16 KiB
//! (shape [`TAIL_ALPHA`], capped at [`MAX_FILE`]), else a log-normal body
//! (median [`BODY_MEDIAN`], sigma [`BODY_SIGMA`]) kept below 16 KiB. Drawn for
//! 40,000 files (about a Linux 3.x tree's count) with seeds 1-3 it gives
//! 8.9-9.2 % of files over 16 KiB holding 51-53 % of the bytes, a median of
//! 3.7 KB and a mean of 8.2-8.4 KB (330-340 MB a tree). Directories hold [`FILES_PER_DIR`] files on average,
//! two levels deep, in the order `diff -r` visits them (sorted names), which
//! is also the order the image builder writes them.

use crate::{Library, Video, MANIFEST_VERSION};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Pareto};

/// Files over 16 KiB: Fig 19's "less than 10 %".
pub const TAIL_SHARE: f64 = 0.09;
/// Shape of the tail: with [`TAIL_SHARE`], about half the bytes over 16 KiB.
pub const TAIL_ALPHA: f64 = 1.5;
/// The largest file (Linux trees hold a few files of megabytes).
pub const MAX_FILE: u64 = 2 << 20;
/// Median and spread of the files up to 16 KiB.
pub const BODY_MEDIAN: f64 = 3584.0;
pub const BODY_SIGMA: f64 = 1.0;
/// Where the tail starts, and the body ends.
pub const TAIL_FROM: f64 = 16384.0;
/// Files per directory, on average (Linux 3.7: about 40,000 files in 2,700).
pub const FILES_PER_DIR: u32 = 15;
/// Directories per top-level directory.
const DIRS_PER_TOP: u32 = 20;

/// What [`SourceTrees::build`] makes.
#[derive(Debug, Clone)]
pub struct SourceTrees {
    pub name: String,
    /// Files in each tree.
    pub files: u32,
    /// Identical trees (2 for one diff, 4 for two in parallel).
    pub copies: u32,
    /// Seed of the file sizes (the same seed gives the same trees).
    pub seed: u64,
}

impl SourceTrees {
    /// The sizes of one tree's files, in order.
    pub fn sizes(&self) -> Vec<u64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        let tail = Pareto::new(TAIL_FROM, TAIL_ALPHA).expect("valid Pareto parameters");
        let body = LogNormal::new(BODY_MEDIAN.ln(), BODY_SIGMA).expect("valid log-normal parameters");
        (0..self.files)
            .map(|_| {
                if rng.gen_bool(TAIL_SHARE) {
                    (tail.sample(&mut rng) as u64).clamp(TAIL_FROM as u64 + 1, MAX_FILE)
                } else {
                    loop {
                        let x = body.sample(&mut rng);
                        if x < TAIL_FROM {
                            break (x as u64).max(1);
                        }
                    }
                }
            })
            .collect()
    }

    /// Path of file `i` of a tree, relative to the tree's root.
    fn path(i: u32) -> String {
        let dir = i / FILES_PER_DIR;
        format!("d{:03}/d{:03}/f{:05}.c", dir / DIRS_PER_TOP, dir % DIRS_PER_TOP, i)
    }

    pub fn build(&self) -> Library {
        let sizes = self.sizes();
        let n = self.files;
        let files = (0..self.copies)
            .flat_map(|copy| {
                sizes.iter().enumerate().map(move |(i, &size)| {
                    let i = i as u32;
                    let id = copy * n + i;
                    Video {
                        id,
                        content: (copy > 0).then_some(i),
                        path: format!("t{copy}/{}", Self::path(i)),
                        size,
                        video: id,
                        chunk: None,
                        // Not video: the fields a video library needs, filled
                        // so that every consumer accepts the manifest.
                        bitrate_kbps: 1,
                        duration_s: 1.0,
                        rank: id + 1,
                    }
                })
            })
            .collect();
        Library { version: MANIFEST_VERSION, name: self.name.clone(), placement_seed: self.seed, files }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees(files: u32, copies: u32) -> SourceTrees {
        SourceTrees { name: "t".into(), files, copies, seed: 1 }
    }

    #[test]
    fn sizes_follow_the_two_facts_of_fig_19() {
        for seed in 1..4 {
            let sizes = SourceTrees { seed, ..trees(40_000, 1) }.sizes();
            let total: u64 = sizes.iter().sum();
            let big: Vec<u64> = sizes.iter().copied().filter(|&s| s > 16384).collect();
            let share_files = big.len() as f64 / sizes.len() as f64;
            let share_bytes = big.iter().sum::<u64>() as f64 / total as f64;
            assert!((0.08..0.10).contains(&share_files), "seed {seed}: {share_files} of the files over 16 KiB");
            assert!((0.45..0.56).contains(&share_bytes), "seed {seed}: {share_bytes} of the bytes over 16 KiB");
            assert!(sizes.iter().all(|&s| (1..=MAX_FILE).contains(&s)));
        }
    }

    #[test]
    fn copies_share_content_and_sizes_and_the_manifest_is_valid() {
        let lib = trees(100, 4).build();
        lib.validate().unwrap();
        assert_eq!(lib.files.len(), 400);
        let t0 = &lib.files[7];
        let t3 = &lib.files[3 * 100 + 7];
        assert_eq!((t0.path.as_str(), t3.path.as_str()), ("t0/d000/d000/f00007.c", "t3/d000/d000/f00007.c"));
        assert_eq!((t0.content_id(), t3.content_id(), t0.size), (7, 7, t3.size));
        assert_ne!(t0.id, t3.id);
        // Paths in the order diff -r visits them (sorted), within each tree.
        let paths: Vec<&str> = lib.files[..100].iter().map(|f| f.path.as_str()).collect();
        assert!(paths.windows(2).all(|w| w[0] < w[1]));
        // The same seed gives the same trees.
        assert_eq!(trees(100, 4).build(), lib);
    }
}
