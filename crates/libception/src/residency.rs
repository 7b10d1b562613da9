//! Page-cache residency checks made with the daemon's own rights.
//!
//! Primary method: `cachestat(2)` (Linux 6.5+, syscall 451), which counts the
//! cached pages of a range. Fallback when the kernel lacks it (ENOSYS):
//! `mmap` + `mincore`. Both are truthful only for a caller that owns the file
//! or may write it; for anyone else `cachestat` fails with EPERM and `mincore`
//! reports every page resident. Reception runs as root, so its check is
//! truthful for every file, which is why unprivileged shims ask it (LCP_OP_CHECK).
//! An EPERM here is returned as an error and callers treat it as "not known
//! resident": a check that cannot fail is not a check.
//!
//! Ranges are byte ranges `[start, end)` with `end <= file size`; they are
//! widened to whole pages because that is what the cache holds.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

const SYS_CACHESTAT: libc::c_long = 451;
/// Largest window mapped at once by the mincore fallback.
const MINCORE_WINDOW: u64 = 64 << 20;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

static CACHESTAT_MISSING: AtomicBool = AtomicBool::new(false);

/// The system page size.
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no memory effects.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v > 0 {
            v as u64
        } else {
            4096
        }
    })
}

/// Which mechanism answered (for logs and stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Cachestat,
    Mincore,
}

/// The method in use on this kernel.
pub fn method() -> Method {
    if CACHESTAT_MISSING.load(Ordering::Relaxed) {
        Method::Mincore
    } else {
        Method::Cachestat
    }
}

/// Number of cached pages among `pages` pages starting at page `first`.
fn cachestat_pages(fd: BorrowedFd<'_>, first: u64, pages: u64) -> io::Result<u64> {
    let ps = page_size();
    let range = CachestatRange {
        off: first * ps,
        len: pages * ps,
    };
    let mut out = Cachestat::default();
    // SAFETY: both pointers point to live, correctly laid out structs.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd() as libc::c_uint,
            &range as *const CachestatRange,
            &mut out as *mut Cachestat,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(out.nr_cache)
}

/// Windows mapped by the mincore fallback so far (the bound of its work).
static MINCORE_WINDOWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Walks the residency bytes of `pages` pages from page `first` by mmap +
/// mincore, one window at a time, handing each window's vector to `visit`
/// until it returns false; never holds more than one window's vector,
/// however long the range (a client's CHECK(0, u64::MAX) of a sparse file
/// costs one window, not a byte per page of it).
fn mincore_walk(fd: BorrowedFd<'_>, first: u64, pages: u64, mut visit: impl FnMut(&[u8]) -> bool) -> io::Result<()> {
    let ps = page_size();
    let window = MINCORE_WINDOW / ps;
    let mut vec = vec![0u8; pages.min(window) as usize];
    let mut done = 0;
    while done < pages {
        let n = (pages - done).min(window);
        let len = (n * ps) as usize;
        // SAFETY: a fresh read-only shared mapping; unmapped below on every path.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                ((first + done) * ps) as libc::off_t,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        MINCORE_WINDOWS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: addr/len is the mapping just made; vec has a byte per page of it.
        let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
        let err = io::Error::last_os_error();
        // SAFETY: unmapping exactly what was mapped.
        unsafe { libc::munmap(addr, len) };
        if rc != 0 {
            return Err(err);
        }
        if !visit(&vec[..n as usize]) {
            break;
        }
        done += n;
    }
    Ok(())
}

/// How many of `pages` pages from page `first` are resident without a gap
/// (mincore): stops at the first page that is not.
fn mincore_prefix(fd: BorrowedFd<'_>, first: u64, pages: u64) -> io::Result<u64> {
    let mut done = 0;
    mincore_walk(fd, first, pages, |vec| {
        let run = vec.iter().take_while(|b| **b & 1 == 1).count();
        done += run as u64;
        run == vec.len()
    })?;
    Ok(done)
}

/// Whether any of `pages` pages from page `first` is resident (mincore).
fn mincore_any(fd: BorrowedFd<'_>, first: u64, pages: u64) -> io::Result<bool> {
    let mut any = false;
    mincore_walk(fd, first, pages, |vec| {
        any = vec.iter().any(|b| *b & 1 == 1);
        !any
    })?;
    Ok(any)
}

fn page_span(start: u64, end: u64) -> (u64, u64) {
    let ps = page_size();
    let first = start / ps;
    let last = end.div_ceil(ps);
    (first, last - first)
}

/// Whether every page of `[start, end)` is in the page cache.
pub fn is_resident(fd: BorrowedFd<'_>, start: u64, end: u64) -> io::Result<bool> {
    Ok(resident_prefix(fd, start, end)? == end.saturating_sub(start))
}

/// How many bytes from `start` (up to `end`) are resident without a gap.
pub fn resident_prefix(fd: BorrowedFd<'_>, start: u64, end: u64) -> io::Result<u64> {
    if end <= start {
        return Ok(0);
    }
    let (first, pages) = page_span(start, end);
    let ps = page_size();
    // The first page may begin before `start`: no resident page is 0 bytes.
    let bytes_for = |k: u64| ((first + k) * ps).clamp(start, end) - start;
    if !CACHESTAT_MISSING.load(Ordering::Relaxed) {
        match prefix_pages_cachestat(fd, first, pages) {
            Ok(k) => return Ok(bytes_for(k)),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                CACHESTAT_MISSING.store(true, Ordering::Relaxed);
                tracing::info!("cachestat(2) is not available; using mmap+mincore for residency checks");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(bytes_for(mincore_prefix(fd, first, pages)?))
}

/// Whether no page of `[start, end)` is in the page cache (a read of it
/// reaches the disk from its first byte to its last).
pub fn none_resident(fd: BorrowedFd<'_>, start: u64, end: u64) -> io::Result<bool> {
    if end <= start {
        return Ok(true);
    }
    let (first, pages) = page_span(start, end);
    if !CACHESTAT_MISSING.load(Ordering::Relaxed) {
        match cachestat_pages(fd, first, pages) {
            Ok(n) => return Ok(n == 0),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => CACHESTAT_MISSING.store(true, Ordering::Relaxed),
            Err(e) => return Err(e),
        }
    }
    Ok(!mincore_any(fd, first, pages)?)
}

/// Largest k such that the first k pages are all cached, by bisection:
/// one call when everything or nothing is cached, log2(pages) otherwise.
fn prefix_pages_cachestat(fd: BorrowedFd<'_>, first: u64, pages: u64) -> io::Result<u64> {
    let all = |k: u64| -> io::Result<bool> { Ok(cachestat_pages(fd, first, k)? == k) };
    if all(pages)? {
        return Ok(pages);
    }
    if !all(1)? {
        return Ok(0);
    }
    let (mut lo, mut hi) = (1, pages); // all(lo) holds, all(hi) does not
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if all(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;

    fn evict(f: &std::fs::File) {
        f.sync_all().unwrap();
        // SAFETY: plain advice on a valid fd.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
    }

    #[test]
    fn mincore_fallback_agrees_and_stops_at_the_first_missing_page() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("sparse");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(1 << 40).unwrap(); // 1 TiB, no data: nothing resident
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: plain advice on a valid fd.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        let mut page = vec![0u8; 3 * 4096];
        f.read_exact_at(&mut page, 0).unwrap();
        let pages = (1u64 << 40) / page_size();
        let before = MINCORE_WINDOWS.load(Ordering::Relaxed);
        let k = mincore_prefix(f.as_fd(), 0, pages).unwrap();
        let windows = MINCORE_WINDOWS.load(Ordering::Relaxed) - before;
        assert_eq!(k * page_size(), 3 * 4096);
        assert_eq!(k, prefix_pages_cachestat(f.as_fd(), 0, pages).unwrap_or(k));
        assert!(windows <= 2, "{windows} windows mapped for a range whose first window decides");
    }

    #[test]
    fn prefix_follows_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 64 * 4096 + 100]).unwrap();
        drop(f);
        let f = std::fs::File::open(&path).unwrap();
        evict(&f);
        let size = 64 * 4096 + 100;
        assert_eq!(resident_prefix(f.as_fd(), 0, size).unwrap(), 0);
        assert!(!is_resident(f.as_fd(), 0, size).unwrap());
        assert!(none_resident(f.as_fd(), 0, size).unwrap());
        let mut buf = vec![0u8; 10 * 4096];
        // POSIX_FADV_RANDOM keeps kernel readahead from caching beyond the read.
        // SAFETY: plain advice on a valid fd.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(resident_prefix(f.as_fd(), 0, size).unwrap(), 10 * 4096);
        assert_eq!(resident_prefix(f.as_fd(), 100, size).unwrap(), 10 * 4096 - 100);
        assert!(is_resident(f.as_fd(), 5, 10 * 4096).unwrap());
        assert!(!is_resident(f.as_fd(), 5, 10 * 4096 + 1).unwrap());
        // A range holding any cached page is not uncached; past the cached
        // pages it is. The mincore fallback agrees.
        let pages = size.div_ceil(4096);
        for (start, end, none) in [(0, size, false), (9 * 4096, size, false), (10 * 4096, size, true), (20 * 4096, size, true)] {
            assert_eq!(none_resident(f.as_fd(), start, end).unwrap(), none, "{start}..{end}");
            let (first, n) = page_span(start, end);
            assert_eq!(!mincore_any(f.as_fd(), first, n).unwrap(), none, "mincore {start}..{end}");
        }
        assert!(!mincore_any(f.as_fd(), 10, pages - 10).unwrap());
        let mut all = vec![0u8; size as usize];
        f.read_exact_at(&mut all, 0).unwrap();
        assert!(is_resident(f.as_fd(), 0, size).unwrap());
        assert_eq!(resident_prefix(f.as_fd(), 0, 0).unwrap(), 0);
    }
}
