//! The drive image of block mode: what every byte of the emulated drive holds.
//!
//! A drive image is never stored whole. It is three things:
//! - the *overlay*: the 4 KiB blocks a real `mkfs` and the kernel wrote that
//!   are not all zeros (superblocks, group descriptors, bitmaps, inodes,
//!   directories, extent trees, journal headers): a few MB for a 1 TB drive;
//! - the *extent map*: ranges of the image that are the data of a library
//!   file, as image offset -> (file id, offset in the file), taken from the
//!   filesystem with FIEMAP. Their bytes are `content::fill`, generated on
//!   every read, so the 260 GB of video data cost nothing;
//! - zeros everywhere else.
//!
//! Precedence when serving: extent map, then overlay, then zeros. The builder
//! guarantees that the two do not overlap (a block first written by mkfs and
//! later given to a file is dropped from the overlay).
//!
//! On disk (the image cache) an image is one gzip stream: a magic, a JSON
//! header ([`ImageKey`] and figures), the overlay blocks and the extents in
//! little-endian binary, and an end marker. gzip's CRC-32 covers everything,
//! so a truncated or corrupt cache is detected when it is read.

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use vidbench_library::content;

/// Size of an overlay block.
pub const BLOCK: u64 = 4096;

/// Bumped whenever the builder makes a different image from the same inputs
/// (mkfs options, file creation, format): old caches are then rebuilt.
/// 2: ext4's directory hash seed fixed by the key (the library's place on the
/// drive was random before).
/// 3: ext4 built without block-bitmap prefetch (`FsKind::build_options`): under
/// version 2 the files' places within that region still changed from build
/// to build.
pub const BUILDER_VERSION: u32 = 3;

const MAGIC: &[u8; 8] = b"VBDIMG01";
const END: &[u8; 8] = b"VBDIMEND";

/// Everything that decides an image's content. Two builds with equal keys
/// make interchangeable images; the cache file name is the key's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageKey {
    pub builder_version: u32,
    /// FNV-1a 64 of the library manifest (canonical JSON), hex.
    pub library_hash: String,
    pub library_name: String,
    /// `ext4` or `xfs`.
    pub fs: String,
    /// Bytes of the drive (the image's size).
    pub capacity_bytes: u64,
    /// Bytes of the filesystem at the start of the drive.
    pub fs_bytes: u64,
    /// `library` or `shuffled`.
    pub fill_order: String,
    pub seed: u64,
    pub uid: u32,
    pub gid: u32,
}

impl ImageKey {
    /// Hash naming the cache file.
    pub fn hash(&self) -> String {
        format!("{:016x}", fnv1a(serde_json::to_vec(self).expect("a key serializes").as_slice()))
    }

    /// The cache file of this key in `dir`.
    pub fn cache_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}-{}-{}.vbimg", self.library_name.replace(['/', ' '], "_"), self.fs, self.hash()))
    }
}

/// FNV-1a 64: a stable hash for cache keys (not a security boundary).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A range of the image holding library data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    /// Byte offset in the image (= LBA * 512).
    pub image_offset: u64,
    pub len: u64,
    /// The content id of the file the extent holds (`Video::content_id`: the
    /// file's own id except for copies), which decides its bytes.
    pub file_id: u32,
    /// Byte offset in the file.
    pub file_offset: u64,
}

/// Figures of a build, kept in the header for `vidbench disk` to report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildFigures {
    pub build_seconds: f64,
    /// How file data was allocated: `write-zeroes` (fallocate) or `zero-writes`.
    pub allocation: String,
    pub files: u64,
    pub extents: u64,
    pub overlay_blocks: u64,
    /// Lowest and highest image byte holding library data.
    pub data_first_byte: u64,
    pub data_end_byte: u64,
    /// Versions of the tools that made the filesystem.
    pub mkfs: String,
    pub kernel: String,
    /// Digest of the extent map (which bytes of which file lie where on the
    /// drive; `Image::placement_digest`): equal for two images exactly when
    /// they place the library alike. Computed on load for images whose
    /// header predates it.
    #[serde(default)]
    pub placement: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    key: ImageKey,
    figures: BuildFigures,
    overlay_blocks: u64,
    extents: u64,
}

/// Why an image could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read image cache {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("image cache {path} is corrupt ({reason}); delete it or mount with --rebuild-image")]
    Corrupt { path: PathBuf, reason: String },
    #[error("image cache {path} was built for another drive image ({field}: the cache has {found}, this mount needs {wanted}); delete it or mount with --rebuild-image")]
    Mismatch { path: PathBuf, field: String, found: String, wanted: String },
    #[error("extent map: {0}")]
    Extents(String),
}

/// A drive image: overlay + extent map over a drive of `capacity` bytes.
#[derive(Debug, Clone)]
pub struct Image {
    pub key: ImageKey,
    pub figures: BuildFigures,
    /// Block index (offset / BLOCK) -> the block's bytes.
    overlay: HashMap<u64, Box<[u8]>>,
    /// Sorted by image offset, non-overlapping.
    extents: Vec<Extent>,
}

impl Image {
    /// Checks and assembles an image. Extents are sorted, must not overlap and
    /// must lie inside the drive; overlay blocks they cover are dropped (the
    /// file's data replaced them). Returns the image and how many overlay
    /// blocks were dropped.
    pub fn new(key: ImageKey, figures: BuildFigures, mut overlay: HashMap<u64, Box<[u8]>>, mut extents: Vec<Extent>) -> Result<(Image, u64), ImageError> {
        extents.retain(|e| e.len > 0);
        extents.sort_by_key(|e| e.image_offset);
        for w in extents.windows(2) {
            if w[0].image_offset + w[0].len > w[1].image_offset {
                return Err(ImageError::Extents(format!("extents overlap: {:?} and {:?}", w[0], w[1])));
            }
        }
        if let Some(last) = extents.last() {
            if last.image_offset + last.len > key.capacity_bytes {
                return Err(ImageError::Extents(format!("extent {last:?} ends beyond the drive ({} bytes)", key.capacity_bytes)));
            }
        }
        let mut dropped = 0;
        for e in &extents {
            let first = e.image_offset / BLOCK;
            let last = (e.image_offset + e.len).div_ceil(BLOCK);
            if last - first < overlay.len() as u64 {
                for b in first..last {
                    // A partly covered block (file tail) keeps its other bytes
                    // only if they are not all zero; the extent wins on its part.
                    if overlay.remove(&b).is_some() {
                        dropped += 1;
                    }
                }
            } else {
                let before = overlay.len();
                overlay.retain(|b, _| *b < first || *b >= last);
                dropped += (before - overlay.len()) as u64;
            }
        }
        let mut image = Image { key, figures, overlay, extents };
        image.figures.placement = image.placement_digest();
        Ok((image, dropped))
    }

    /// FNV-1a over every extent (drive offset, length, file offset, file id),
    /// in drive order, as 16 hex digits.
    pub fn placement_digest(&self) -> String {
        let mut bytes = Vec::with_capacity(self.extents.len() * 28);
        for e in &self.extents {
            for v in [e.image_offset, e.len, e.file_offset] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            bytes.extend_from_slice(&e.file_id.to_le_bytes());
        }
        format!("{:016x}", fnv1a(&bytes))
    }

    pub fn capacity(&self) -> u64 {
        self.key.capacity_bytes
    }

    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    pub fn overlay_blocks(&self) -> usize {
        self.overlay.len()
    }

    /// The extent holding image byte `offset`, if any.
    pub fn extent_at(&self, offset: u64) -> Option<&Extent> {
        let i = self.extents.partition_point(|e| e.image_offset + e.len <= offset);
        self.extents.get(i).filter(|e| e.image_offset <= offset)
    }

    /// Fills `buf` with the image's bytes at `offset` (zeros past the end).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) {
        buf.fill(0);
        let end = offset + buf.len() as u64;
        // Overlay blocks.
        let mut block = offset / BLOCK;
        while block * BLOCK < end {
            if let Some(bytes) = self.overlay.get(&block) {
                let from = (block * BLOCK).max(offset);
                let to = ((block + 1) * BLOCK).min(end);
                buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(&bytes[(from - block * BLOCK) as usize..(to - block * BLOCK) as usize]);
            }
            block += 1;
        }
        // Extents.
        let mut i = self.extents.partition_point(|e| e.image_offset + e.len <= offset);
        while let Some(e) = self.extents.get(i) {
            if e.image_offset >= end {
                break;
            }
            let from = e.image_offset.max(offset);
            let to = (e.image_offset + e.len).min(end);
            content::fill(e.file_id, e.file_offset + (from - e.image_offset), &mut buf[(from - offset) as usize..(to - offset) as usize]);
            i += 1;
        }
    }

    /// Writes the image to `path` atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".{}.tmp{}", path.file_name().and_then(|n| n.to_str()).unwrap_or("image"), std::process::id()));
        let result = (|| {
            let file = std::fs::File::create(&tmp)?;
            let mut z = GzEncoder::new(std::io::BufWriter::with_capacity(1 << 20, file), flate2::Compression::new(6));
            z.write_all(MAGIC)?;
            let header = Header { key: self.key.clone(), figures: self.figures.clone(), overlay_blocks: self.overlay.len() as u64, extents: self.extents.len() as u64 };
            let json = serde_json::to_vec(&header).map_err(std::io::Error::other)?;
            z.write_all(&(json.len() as u32).to_le_bytes())?;
            z.write_all(&json)?;
            let mut blocks: Vec<u64> = self.overlay.keys().copied().collect();
            blocks.sort_unstable();
            for b in blocks {
                z.write_all(&b.to_le_bytes())?;
                z.write_all(&self.overlay[&b])?;
            }
            for e in &self.extents {
                z.write_all(&e.image_offset.to_le_bytes())?;
                z.write_all(&e.len.to_le_bytes())?;
                z.write_all(&e.file_offset.to_le_bytes())?;
                z.write_all(&e.file_id.to_le_bytes())?;
            }
            z.write_all(END)?;
            let mut out = z.finish()?;
            out.flush()?;
            out.get_ref().sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Reads an image from `path` and checks that it was built for `want`.
    pub fn load(path: &Path, want: &ImageKey) -> Result<Image, ImageError> {
        Image::load_checked(path, want, false)
    }

    /// `load`, accepting an image of `want` built by another builder version
    /// (same library, filesystem, layout and owner; files placed as that
    /// version placed them).
    pub fn load_any_version(path: &Path, want: &ImageKey) -> Result<Image, ImageError> {
        Image::load_checked(path, want, true)
    }

    fn load_checked(path: &Path, want: &ImageKey, any_version: bool) -> Result<Image, ImageError> {
        let file = std::fs::File::open(path).map_err(|error| ImageError::Io { path: path.to_owned(), error })?;
        let corrupt = |reason: String| ImageError::Corrupt { path: path.to_owned(), reason };
        let mut z = GzDecoder::new(std::io::BufReader::with_capacity(1 << 20, file));
        let io = |e: std::io::Error| corrupt(format!("reading: {e}"));
        let mut magic = [0u8; 8];
        z.read_exact(&mut magic).map_err(io)?;
        if &magic != MAGIC {
            return Err(corrupt("not a vidbench drive image (bad magic)".into()));
        }
        let mut n4 = [0u8; 4];
        z.read_exact(&mut n4).map_err(io)?;
        let n = u32::from_le_bytes(n4) as usize;
        if n > 1 << 20 {
            return Err(corrupt(format!("header of {n} bytes")));
        }
        let mut json = vec![0u8; n];
        z.read_exact(&mut json).map_err(io)?;
        let header: Header = serde_json::from_slice(&json).map_err(|e| corrupt(format!("header: {e}")))?;
        let want = ImageKey { builder_version: if any_version { header.key.builder_version } else { want.builder_version }, ..want.clone() };
        check_key(path, &header.key, &want)?;
        if header.overlay_blocks > header.key.capacity_bytes / BLOCK || header.extents > header.key.capacity_bytes / 512 {
            return Err(corrupt(format!("{} overlay blocks and {} extents for a drive of {} bytes", header.overlay_blocks, header.extents, header.key.capacity_bytes)));
        }
        let mut overlay = HashMap::with_capacity(header.overlay_blocks as usize);
        let mut b8 = [0u8; 8];
        for _ in 0..header.overlay_blocks {
            z.read_exact(&mut b8).map_err(io)?;
            let mut bytes = vec![0u8; BLOCK as usize].into_boxed_slice();
            z.read_exact(&mut bytes).map_err(io)?;
            overlay.insert(u64::from_le_bytes(b8), bytes);
        }
        let mut extents = Vec::with_capacity(header.extents as usize);
        let mut rec = [0u8; 28];
        for _ in 0..header.extents {
            z.read_exact(&mut rec).map_err(io)?;
            let u = |i: usize| u64::from_le_bytes(rec[i..i + 8].try_into().expect("8 bytes"));
            extents.push(Extent { image_offset: u(0), len: u(8), file_offset: u(16), file_id: u32::from_le_bytes(rec[24..28].try_into().expect("4 bytes")) });
        }
        z.read_exact(&mut magic).map_err(io)?;
        if &magic != END {
            return Err(corrupt("missing end marker".into()));
        }
        // Reading to the end makes the decoder check the gzip CRC and length.
        let mut rest = Vec::new();
        z.read_to_end(&mut rest).map_err(io)?;
        if !rest.is_empty() {
            return Err(corrupt(format!("{} bytes after the end marker", rest.len())));
        }
        let (image, _) = Image::new(header.key, header.figures, overlay, extents).map_err(|e| corrupt(e.to_string()))?;
        Ok(image)
    }
}

fn check_key(path: &Path, found: &ImageKey, want: &ImageKey) -> Result<(), ImageError> {
    let f = serde_json::to_value(found).expect("serializes");
    let w = serde_json::to_value(want).expect("serializes");
    if let (Some(f), Some(w)) = (f.as_object(), w.as_object()) {
        for (k, wv) in w {
            let fv = f.get(k).cloned().unwrap_or(serde_json::Value::Null);
            if &fv != wv {
                return Err(ImageError::Mismatch { path: path.to_owned(), field: k.clone(), found: fv.to_string(), wanted: wv.to_string() });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ImageKey {
        ImageKey {
            builder_version: BUILDER_VERSION,
            library_hash: "00112233".into(),
            library_name: "t".into(),
            fs: "ext4".into(),
            capacity_bytes: 1 << 30,
            fs_bytes: 1 << 29,
            fill_order: "library".into(),
            seed: 1,
            uid: 0,
            gid: 0,
        }
    }

    fn block(fill: u8) -> Box<[u8]> {
        vec![fill; BLOCK as usize].into_boxed_slice()
    }

    fn sample() -> Image {
        let mut overlay = HashMap::new();
        overlay.insert(0, block(0xaa));
        overlay.insert(3, block(0xbb));
        overlay.insert(10, block(0xcc)); // covered by the extent below: dropped
        let extents = vec![
            Extent { image_offset: 10 * BLOCK, len: 2 * BLOCK + 100, file_id: 7, file_offset: 0 },
            Extent { image_offset: 20 * BLOCK, len: BLOCK, file_id: 7, file_offset: 2 * BLOCK + 100 },
            Extent { image_offset: 5 * BLOCK, len: 512, file_id: 9, file_offset: 4096 },
        ];
        let (image, dropped) = Image::new(key(), BuildFigures::default(), overlay, extents).unwrap();
        assert_eq!(dropped, 1);
        image
    }

    /// The reference: byte by byte from the definition.
    fn expected_byte(offset: u64) -> u8 {
        let in_extent = |start: u64, len: u64| offset >= start && offset < start + len;
        if in_extent(10 * BLOCK, 2 * BLOCK + 100) {
            content::byte_at(7, offset - 10 * BLOCK)
        } else if in_extent(20 * BLOCK, BLOCK) {
            content::byte_at(7, 2 * BLOCK + 100 + offset - 20 * BLOCK)
        } else if in_extent(5 * BLOCK, 512) {
            content::byte_at(9, 4096 + offset - 5 * BLOCK)
        } else if offset / BLOCK == 0 {
            0xaa
        } else if offset / BLOCK == 3 {
            0xbb
        } else {
            0
        }
    }

    #[test]
    fn reads_combine_extents_overlay_and_zeros() {
        let image = sample();
        let span = 24 * BLOCK;
        let mut all = vec![0u8; span as usize];
        image.read_at(0, &mut all);
        for (i, b) in all.iter().enumerate() {
            assert_eq!(*b, expected_byte(i as u64), "byte {i}");
        }
        // Any window agrees with the whole.
        for (off, len) in [(1u64, 10usize), (4095, 2), (10 * BLOCK - 3, 9000), (12 * BLOCK + 90, 30), (19 * BLOCK + 7, 5000), (5 * BLOCK + 500, 20)] {
            let mut buf = vec![1u8; len];
            image.read_at(off, &mut buf);
            assert_eq!(buf, all[off as usize..off as usize + len], "window {off}+{len}");
        }
        assert_eq!(image.extent_at(10 * BLOCK + 5).unwrap().file_id, 7);
        assert_eq!(image.extent_at(5 * BLOCK + 511).unwrap().file_id, 9);
        assert!(image.extent_at(5 * BLOCK + 512).is_none());
        assert!(image.extent_at(0).is_none());
        assert_eq!(image.overlay_blocks(), 2);
    }

    #[test]
    fn placement_digest_names_the_extent_map() {
        let image = sample();
        assert_eq!(image.figures.placement.len(), 16);
        assert_eq!(image.figures.placement, image.placement_digest());
        let rebuilt = |moved: Option<(usize, u64)>| {
            let mut extents = image.extents().to_vec();
            if let Some((i, by)) = moved {
                extents[i].image_offset += by;
            }
            Image::new(key(), BuildFigures::default(), HashMap::new(), extents).unwrap().0.figures.placement
        };
        // The overlay (filesystem metadata) is not the placement.
        assert_eq!(rebuilt(None), image.figures.placement);
        // One file's extent one block further on is another placement.
        assert_ne!(rebuilt(Some((2, BLOCK))), image.figures.placement);
        // So is the same layout holding another file.
        let mut other = image.extents().to_vec();
        other[0].file_id = 8;
        assert_ne!(Image::new(key(), BuildFigures::default(), HashMap::new(), other).unwrap().0.figures.placement, image.figures.placement);
        // Headers written before the digest existed still parse (Image::new
        // then computes it).
        let old = r#"{"build_seconds":1.0,"allocation":"zero-writes","files":1,"extents":1,"overlay_blocks":0,"data_first_byte":0,"data_end_byte":1,"mkfs":"m","kernel":"k"}"#;
        assert_eq!(serde_json::from_str::<BuildFigures>(old).unwrap().placement, "");
    }

    #[test]
    fn an_older_builder_versions_image_loads_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let image = sample();
        let older = ImageKey { builder_version: BUILDER_VERSION - 1, ..key() };
        let (image, _) = Image::new(older.clone(), image.figures.clone(), HashMap::new(), image.extents().to_vec()).unwrap();
        let path = dir.path().join("older.vbimg");
        image.save(&path).unwrap();
        match Image::load(&path, &key()) {
            Err(ImageError::Mismatch { field, .. }) => assert_eq!(field, "builder_version"),
            r => panic!("expected a builder_version mismatch, got {r:?}"),
        }
        let back = Image::load_any_version(&path, &key()).unwrap();
        assert_eq!(back.key, older, "the image keeps the key it was built under");
        assert_eq!(back.extents(), image.extents());
        // Any version, but still this library.
        let other = ImageKey { library_hash: "ffff".into(), ..key() };
        assert!(matches!(Image::load_any_version(&path, &other), Err(ImageError::Mismatch { field, .. }) if field == "library_hash"));
    }

    #[test]
    fn overlapping_or_outside_extents_are_refused() {
        let e = |o: u64, l: u64| Extent { image_offset: o, len: l, file_id: 1, file_offset: 0 };
        assert!(Image::new(key(), BuildFigures::default(), HashMap::new(), vec![e(0, 8192), e(4096, 4096)]).is_err());
        assert!(Image::new(key(), BuildFigures::default(), HashMap::new(), vec![e((1 << 30) - 4096, 8192)]).is_err());
        assert!(Image::new(key(), BuildFigures::default(), HashMap::new(), vec![e(0, 4096), e(4096, 4096)]).is_ok());
    }

    #[test]
    fn cache_round_trip_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let image = sample();
        let path = image.key.cache_path(dir.path());
        image.save(&path).unwrap();
        let back = Image::load(&path, &key()).unwrap();
        let mut a = vec![0u8; 24 * BLOCK as usize];
        let mut b = a.clone();
        image.read_at(0, &mut a);
        back.read_at(0, &mut b);
        assert_eq!(a, b);
        assert_eq!(back.extents(), image.extents());
        assert_eq!(back.figures.placement, image.figures.placement);

        // Built for another library: a clear mismatch naming the field.
        let mut other = key();
        other.library_hash = "ffff".into();
        match Image::load(&path, &other) {
            Err(ImageError::Mismatch { field, .. }) => assert_eq!(field, "library_hash"),
            r => panic!("expected a mismatch, got {r:?}"),
        }
        // Keys hash differently, so they name different files.
        assert_ne!(other.cache_path(dir.path()), path);

        // Truncated and bit-flipped files are corrupt, never silently used.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(matches!(Image::load(&path, &key()), Err(ImageError::Corrupt { .. })), "truncated");
        let mut flipped = bytes.clone();
        let n = flipped.len();
        flipped[n - 12] ^= 0x40; // inside the deflate stream's tail / CRC
        std::fs::write(&path, &flipped).unwrap();
        assert!(matches!(Image::load(&path, &key()), Err(ImageError::Corrupt { .. })), "flipped");
        std::fs::write(&path, b"not an image at all").unwrap();
        let err = Image::load(&path, &key()).unwrap_err().to_string();
        assert!(err.contains("corrupt") && err.contains("--rebuild-image"), "{err}");
    }
}
