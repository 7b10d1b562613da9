//! The library manifest (`library.json`): which files exist, how large they are,
//! and what they stand for. Written by `vidbench workload gen`, mounted by
//! `vidbench disk mount`, read by the load client to verify bytes.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Version of the manifest format; bumped on incompatible changes.
pub const MANIFEST_VERSION: u32 = 1;

/// A video library: the files the emulated disk serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Library {
    /// Always [`MANIFEST_VERSION`].
    pub version: u32,
    /// A name for reports (usually the workload spec's name).
    pub name: String,
    /// Seed of the on-platter placement order (the disk may override it).
    pub placement_seed: u64,
    /// The files, in id order.
    pub files: Vec<Video>,
}

/// One file of the library: a whole video, or one chunk of a video when the
/// workload stores a file per chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Video {
    /// The file's id, unique. Its bytes are `content::fill(id, ..)` unless
    /// `content` names another id.
    pub id: u32,
    /// Content id when the file is a copy: its bytes are those of a file
    /// with id `content` (copies of a source tree, for the diff
    /// microbenchmark). Absent: the file's own id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<u32>,
    /// Path relative to the mount point, `/`-separated, e.g. `v/00042.mp4`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Index of the video this file belongs to (equals the file's position for
    /// one-file-per-video storage).
    pub video: u32,
    /// Chunk number within the video for one-file-per-chunk storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<u32>,
    /// Encoding rate in kbit/s.
    pub bitrate_kbps: u32,
    /// Playing time of the whole video in seconds.
    pub duration_s: f64,
    /// Popularity rank of the video, 1 = most popular.
    pub rank: u32,
}

impl Video {
    /// Whose bytes the file holds: `content`, else its own id.
    pub fn content_id(&self) -> u32 {
        self.content.unwrap_or(self.id)
    }
}

/// Why a manifest could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error("cannot read library manifest {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("library manifest {path} is not valid JSON for a library (line {line}, column {column}): {message}")]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("library manifest {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Library {
    /// Reads and validates a manifest.
    pub fn load(path: &Path) -> Result<Library, LibraryError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| LibraryError::Io { path: path.to_owned(), error })?;
        let library: Library = serde_json::from_str(&text).map_err(|e| LibraryError::Parse {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        library
            .validate()
            .map_err(|message| LibraryError::Invalid { path: path.to_owned(), message })?;
        Ok(library)
    }

    /// Writes the manifest as pretty JSON, atomically (temp file + rename).
    pub fn save(&self, path: &Path) -> Result<(), LibraryError> {
        let io = |error| LibraryError::Io { path: path.to_owned(), error };
        let text = serde_json::to_string_pretty(self).expect("a library always serializes");
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Checks the invariants every consumer relies on; the message names the
    /// offending file.
    pub fn validate(&self) -> Result<(), String> {
        if self.version != MANIFEST_VERSION {
            return Err(format!(
                "version {} is not supported (this build reads version {MANIFEST_VERSION})",
                self.version
            ));
        }
        if self.files.is_empty() {
            return Err("the library has no files".into());
        }
        let mut ids = HashSet::new();
        let mut paths = HashSet::new();
        for (i, f) in self.files.iter().enumerate() {
            let at = format!("files[{i}] ({:?})", f.path);
            if !ids.insert(f.id) {
                return Err(format!("{at}: id {} is used twice", f.id));
            }
            check_path(&f.path).map_err(|m| format!("{at}: {m}"))?;
            if !paths.insert(f.path.as_str()) {
                return Err(format!("{at}: path is used twice"));
            }
            if f.size == 0 {
                return Err(format!("{at}: size is 0"));
            }
            if !(f.duration_s.is_finite() && f.duration_s > 0.0) {
                return Err(format!("{at}: duration_s must be a positive number"));
            }
            if f.rank == 0 {
                return Err(format!("{at}: rank starts at 1"));
            }
        }
        // A path may not be both a file and a directory.
        for f in &self.files {
            let mut prefix = String::new();
            for component in f.path.split('/').take(f.path.split('/').count() - 1) {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(component);
                if paths.contains(prefix.as_str()) {
                    return Err(format!("{prefix:?} is a file and also a directory of {:?}", f.path));
                }
            }
        }
        Ok(())
    }

    /// Total bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Finds a file by its path relative to the mount point.
    pub fn by_path(&self, path: &str) -> Option<&Video> {
        let path = path.trim_start_matches('/');
        self.files.iter().find(|f| f.path == path)
    }
}

fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("path is empty".into());
    }
    if path.starts_with('/') {
        return Err("path must be relative to the mount point".into());
    }
    for component in path.split('/') {
        match component {
            "" => return Err("path has an empty component".into()),
            "." | ".." => return Err("path may not contain . or ..".into()),
            c if c.len() > 255 => return Err("a path component is longer than 255 bytes".into()),
            c if c.contains('\0') => return Err("path contains a NUL byte".into()),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn video(id: u32, path: &str) -> Video {
        Video {
            id,
            content: None,
            path: path.into(),
            size: 1000,
            video: id,
            chunk: None,
            bitrate_kbps: 420,
            duration_s: 10.0,
            rank: id + 1,
        }
    }

    fn library(files: Vec<Video>) -> Library {
        Library { version: MANIFEST_VERSION, name: "t".into(), placement_seed: 1, files }
    }

    #[test]
    fn round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("library.json");
        let lib = library(vec![video(0, "v/0.mp4"), video(1, "v/1.mp4")]);
        lib.save(&path).unwrap();
        assert_eq!(Library::load(&path).unwrap(), lib);
    }

    #[test]
    fn rejects_bad_libraries_naming_the_file() {
        let cases = [
            (library(vec![video(0, "a"), video(0, "b")]), "id 0 is used twice"),
            (library(vec![video(0, "a"), video(1, "a")]), "path is used twice"),
            (library(vec![video(0, "/abs")]), "relative"),
            (library(vec![video(0, "a/../b")]), ". or .."),
            (library(vec![video(0, "a"), video(1, "a/b")]), "also a directory"),
            (library(vec![]), "no files"),
        ];
        for (lib, want) in cases {
            let err = lib.validate().unwrap_err();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
    }

    #[test]
    fn parse_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("library.json");
        std::fs::write(&path, "{\n \"version\": 1,\n \"bogus\": 2\n}").unwrap();
        let err = Library::load(&path).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("library.json"), "{err}");
    }
}
