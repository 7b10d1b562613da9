//! `libception fetch`: asks the daemon to make file ranges resident (FETCH)
//! or to report whether they are (CHECK), one request per file, in order.
//! Useful to warm files by hand, and it is the protocol client the shell
//! tests and the multi-process serialization test use.

use libception::Client;
use anyhow::{Context, Result};
use libception_proto::{reply_flags, request_flags};
use serde::Serialize;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct FetchOptions {
    pub socket: PathBuf,
    pub files: Vec<PathBuf>,
    pub offset: u64,
    pub length: u64,
    pub check: bool,
    pub no_prefetch: bool,
    pub fadvise_random: bool,
    pub json: bool,
    pub timeout: Duration,
}

#[derive(Debug, Serialize)]
struct Outcome<'a> {
    path: &'a Path,
    op: &'static str,
    status: i32,
    resident: bool,
    read: bool,
    joined: bool,
    bytes_read: u64,
    /// 0, or how far from the offset the daemon knew the file resident.
    resident_end: u64,
}

/// Returns the exit code: 0 when every request got status 0.
pub fn run(opts: &FetchOptions) -> Result<i32> {
    let mut client = Client::connect(&opts.socket).with_context(|| format!("is the daemon running? (socket {})", opts.socket.display()))?;
    client.set_timeout(Some(opts.timeout))?;
    let mut failures = 0;
    for path in &opts.files {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        if opts.fadvise_random {
            // SAFETY: advice on a descriptor we own.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        }
        let reply = if opts.check {
            client.check(file.as_raw_fd(), opts.offset, opts.length)
        } else {
            let flags = if opts.no_prefetch { request_flags::NO_PREFETCH } else { 0 };
            client.fetch(file.as_raw_fd(), opts.offset, opts.length, flags)
        }
        .with_context(|| format!("asking the daemon about {}", path.display()))?;
        let o = Outcome {
            path,
            op: if opts.check { "check" } else { "fetch" },
            status: reply.status,
            resident: reply.flags & reply_flags::RESIDENT != 0,
            read: reply.flags & reply_flags::READ != 0,
            joined: reply.flags & reply_flags::JOINED != 0,
            bytes_read: reply.bytes_read,
            resident_end: reply.resident_end,
        };
        if o.status != 0 {
            failures += 1;
        }
        if opts.json {
            println!("{}", serde_json::to_string(&o)?);
        } else if o.status != 0 {
            println!("{}: error: {}", path.display(), std::io::Error::from_raw_os_error(-o.status));
        } else {
            let what = match (o.resident, o.read, o.joined) {
                (true, _, _) => "resident".to_string(),
                (_, true, false) => format!("read {} bytes", o.bytes_read),
                (_, _, true) => format!("joined a read of {} bytes", o.bytes_read),
                _ => "not resident".to_string(),
            };
            println!("{}: {what}", path.display());
        }
    }
    Ok(if failures == 0 { 0 } else { 1 })
}
