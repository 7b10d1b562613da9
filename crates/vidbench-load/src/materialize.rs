//! Writes a library's files to a real directory with their generated content,
//! so a stock server (nginx in the integration test and the benchmark) can
//! serve bytes that `--verify` checks. Only for small libraries: every byte is
//! written to disk.

use std::io::Write;
use std::path::Path;
use vidbench_library::{content, Library};

/// Writes every file of `library` under `dir` (created if missing); returns
/// the bytes written.
pub fn materialize(library: &Library, dir: &Path) -> std::io::Result<u64> {
    let context = |what: &str, path: &Path, e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()));
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    for file in &library.files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| context("create", parent, e))?;
        }
        let out = std::fs::File::create(&path).map_err(|e| context("create", &path, e))?;
        let mut out = std::io::BufWriter::new(out);
        let mut offset = 0u64;
        while offset < file.size {
            let n = (file.size - offset).min(buf.len() as u64) as usize;
            content::fill(file.content_id(), offset, &mut buf[..n]);
            out.write_all(&buf[..n]).map_err(|e| context("write", &path, e))?;
            offset += n as u64;
        }
        out.flush().map_err(|e| context("write", &path, e))?;
        total += file.size;
    }
    Ok(total)
}
