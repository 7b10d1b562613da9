//! A library made without a workload: N files of one size, for testing and
//! benchmarking the emulated disk (`vidbench disk library`), where the
//! sessions and the popularity of a generated workload do not matter.
//!
//! File `i` is `v/a/0000i.mp4`, video `i`, rank `i + 1`, 2000 kbit/s. With
//! `odd_sizes` every file is `1000 + 37 i` bytes longer than asked (so most
//! sizes are no multiple of 512 or 4096, for end-of-file tests) and the odd
//! ones move to `v/b/`, so the tree has two directories.

use crate::{Library, Video, MANIFEST_VERSION};

/// Encoding rate written for every file; only the durations depend on it.
const BITRATE_KBPS: u32 = 2000;

/// What [`UniformLibrary::build`] makes.
#[derive(Debug, Clone)]
pub struct UniformLibrary {
    /// The library's name, for reports.
    pub name: String,
    pub files: u32,
    /// Size of each file, bytes (before the odd-size offset).
    pub file_bytes: u64,
    pub odd_sizes: bool,
    pub placement_seed: u64,
}

impl UniformLibrary {
    pub fn build(&self) -> Library {
        let files = (0..self.files)
            .map(|i| {
                let size = if self.odd_sizes { self.file_bytes + 1000 + 37 * i as u64 } else { self.file_bytes };
                let directory = if self.odd_sizes && i % 2 == 1 { "b" } else { "a" };
                Video {
                    id: i,
                    content: None,
                    path: format!("v/{directory}/{i:05}.mp4"),
                    size,
                    video: i,
                    chunk: None,
                    bitrate_kbps: BITRATE_KBPS,
                    duration_s: (size as f64 * 8.0 / (BITRATE_KBPS as f64 * 1000.0)).max(0.001),
                    rank: i + 1,
                }
            })
            .collect();
        Library { version: MANIFEST_VERSION, name: self.name.clone(), placement_seed: self.placement_seed, files }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_sizes_miss_sector_multiples_and_use_two_directories() {
        let spec = UniformLibrary { name: "t".into(), files: 6, file_bytes: 3 << 20, odd_sizes: true, placement_seed: 9 };
        let library = spec.build();
        library.validate().unwrap();
        assert_eq!((library.name.as_str(), library.placement_seed, library.files.len()), ("t", 9, 6));
        assert_eq!(library.files[1].path, "v/b/00001.mp4");
        assert_eq!(library.files[4].path, "v/a/00004.mp4");
        assert_eq!(library.files[2].size, (3 << 20) + 1000 + 74);
        assert!(library.files.iter().all(|f| f.size % 512 != 0));
        assert_eq!(library.files[5].rank, 6);
    }

    #[test]
    fn plain_files_are_all_alike_in_one_directory() {
        let library = UniformLibrary { name: "t".into(), files: 3, file_bytes: 1 << 20, odd_sizes: false, placement_seed: 1 }.build();
        assert!(library.files.iter().all(|f| f.size == 1 << 20 && f.path.starts_with("v/a/")));
        assert!((library.files[0].duration_s - (1u64 << 20) as f64 * 8.0 / 2e6).abs() < 1e-9);
    }
}
