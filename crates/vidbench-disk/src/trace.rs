//! `--trace FILE`: one CSV row per disk request, written by a thread of its
//! own so that the scheduler never waits on the file. Rows go through a 1 MiB
//! buffer and are flushed when the mount ends (the channel closes).
//!
//! Columns (times in ns on the mount's clock, which starts at the mount):
//! `arrival_ns,start_ns,end_ns,file_id,offset,bytes,lba,outcome,seek_cylinders,queue_depth`
//! where `offset` is the byte offset in the file, `lba` the first 512-byte
//! sector on the emulated drive and `outcome` one of hit, stream, miss, joined.

use crate::model::{Completion, Outcome};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

pub const HEADER: &str = "arrival_ns,start_ns,end_ns,file_id,offset,bytes,lba,outcome,seek_cylinders,queue_depth";

/// One traced request.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub completion: Completion,
    pub file_id: u32,
    pub offset: u64,
    /// Bytes returned (the model counts whole sectors).
    pub bytes: u64,
}

/// The writer thread's handle; dropping the sender side ends it.
pub struct Tracer {
    pub sender: mpsc::Sender<Row>,
    thread: JoinHandle<std::io::Result<u64>>,
    path: PathBuf,
}

impl Tracer {
    /// Creates (truncates) `path` and starts the writer.
    pub fn start(path: &Path) -> anyhow::Result<Tracer> {
        use anyhow::Context;
        let file = std::fs::File::create(path).with_context(|| format!("cannot create trace file {}", path.display()))?;
        let (sender, receiver) = mpsc::channel::<Row>();
        let thread = std::thread::Builder::new().name("vidbench-trace".into()).spawn(move || {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            writeln!(out, "{HEADER}")?;
            let mut rows = 0u64;
            for row in receiver {
                let c = row.completion;
                let outcome = match c.outcome {
                    Outcome::Hit => "hit",
                    Outcome::Stream => "stream",
                    Outcome::Miss => "miss",
                    Outcome::Joined => "joined",
                };
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{}",
                    c.arrival_ns, c.start_ns, c.end_ns, row.file_id, row.offset, row.bytes, c.lba, outcome, c.seek_cylinders, c.queue_depth
                )?;
                rows += 1;
            }
            out.flush()?;
            Ok(rows)
        })?;
        Ok(Tracer { sender, thread, path: path.to_owned() })
    }

    /// Closes the channel (the caller must have dropped every other sender)
    /// and waits for the file to be flushed.
    pub fn finish(self) -> anyhow::Result<u64> {
        drop(self.sender);
        match self.thread.join() {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => anyhow::bail!("writing trace file {}: {e}", self.path.display()),
            Err(_) => anyhow::bail!("the trace writer for {} panicked", self.path.display()),
        }
    }
}
