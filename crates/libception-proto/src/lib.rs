//! What Deception (the LD_PRELOAD shim), Reception (the daemon) and the tools
//! that start them share: the Rust mirror of `native/include/libception/protocol.h`,
//! the wire protocol between shim and daemon (this module); the shim's
//! environment mirrored from `shim.h` ([`shim_env`]); and the daemon's
//! prefetch setting ([`prefetch`]).
//!
//! The C header is the source of truth. This crate mirrors it in two layers:
//!
//! * [`RawRequest`] and [`RawReply`] are `#[repr(C)]` copies of the C structs.
//!   They exist so that `offset_of!`/`size_of` can be compared with the C
//!   compiler's view (see `tests/layout_vs_c.rs`); they are never transmuted
//!   from bytes.
//! * [`Request`] and [`Reply`] are the validated, typed messages. They are
//!   encoded to and parsed from exact little-endian byte images field by field
//!   at the offsets of the raw structs, so the code is independent of the host
//!   byte order and never reads uninitialised or misaligned memory.
//!
//! Parsing treats every datagram as hostile: a wrong size, magic, version or
//! op, a non-zero reserved field or an unknown flag bit is a typed
//! [`RequestError`], never a panic. [`echo_header`] extracts the op and seq a
//! peer sent when the header is readable enough to echo them in an error reply.

use std::mem::{offset_of, size_of};

pub mod prefetch;
pub mod shim_env;

pub use prefetch::{AdaptiveParams, ParamError, Prefetch};
pub use shim_env::{Mode, ShimEnv};

/// `LCP_PROTO_VERSION`.
pub const PROTO_VERSION: u16 = 1;
/// `LCP_REQUEST_MAGIC`: "LCPQ" as a little-endian u32.
pub const REQUEST_MAGIC: u32 = 0x5150_434c;
/// `LCP_REPLY_MAGIC`: "LCPR" as a little-endian u32.
pub const REPLY_MAGIC: u32 = 0x5250_434c;
/// `LCP_SOCKET_ENV`: environment variable naming the daemon's socket.
pub const SOCKET_ENV: &str = "LIBCEPTION_SOCKET";
/// `LCP_SOCKET_DEFAULT`: the socket path when the variable is unset.
pub const SOCKET_DEFAULT: &str = "/run/libception.sock";
/// `LCP_MAX_MESSAGE`: the largest fixed-struct datagram either side receives.
pub const MAX_MESSAGE: usize = 64;
/// `sizeof(struct lcp_request)`.
pub const REQUEST_SIZE: usize = 48;
/// `sizeof(struct lcp_reply)`.
pub const REPLY_SIZE: usize = 40;

/// `enum lcp_op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Op {
    /// `LCP_OP_FETCH`: make a range resident (reading and prefetching if needed).
    Fetch = 1,
    /// `LCP_OP_CHECK`: report residency using the daemon's rights; no I/O.
    Check = 2,
    /// `LCP_OP_STATS`: the daemon's counters as JSON; no fd.
    Stats = 3,
}

impl Op {
    /// The op for a wire value, if it is one the protocol defines.
    pub fn from_wire(value: u16) -> Option<Op> {
        match value {
            1 => Some(Op::Fetch),
            2 => Some(Op::Check),
            3 => Some(Op::Stats),
            _ => None,
        }
    }

    /// Lower-case name used in logs and stats.
    pub fn name(self) -> &'static str {
        match self {
            Op::Fetch => "fetch",
            Op::Check => "check",
            Op::Stats => "stats",
        }
    }
}

/// `enum lcp_request_flags`.
pub mod request_flags {
    /// `LCP_REQ_NO_PREFETCH`: read exactly the requested range.
    pub const NO_PREFETCH: u32 = 1 << 0;
    /// `LCP_REQ_FLAGS_KNOWN`: every defined bit; any other bit is an error.
    pub const KNOWN: u32 = NO_PREFETCH;
}

/// `enum lcp_reply_flags`.
pub mod reply_flags {
    /// `LCP_REP_RESIDENT`: the whole range was resident when the daemon looked.
    pub const RESIDENT: u32 = 1 << 0;
    /// `LCP_REP_READ`: the daemon read from the file for this request.
    pub const READ: u32 = 1 << 1;
    /// `LCP_REP_JOINED`: the request waited on a read already queued or in flight.
    pub const JOINED: u32 = 1 << 2;
    /// Every defined bit.
    pub const KNOWN: u32 = RESIDENT | READ | JOINED;
}

/// `enum lcp_call`: which interposed function caused a request (informational).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Call {
    /// `LCP_CALL_OTHER`.
    Other = 0,
    /// `LCP_CALL_READ`: read, pread*, readv, preadv*.
    Read = 1,
    /// `LCP_CALL_SENDFILE`: sendfile, sendfile64.
    Sendfile = 2,
    /// `LCP_CALL_MMAP`: mmap, mmap64 of a regular file.
    Mmap = 3,
}

impl Call {
    /// The call for a wire value; unknown values are informational only and
    /// map to `None` rather than an error.
    pub fn from_wire(value: u32) -> Option<Call> {
        match value {
            0 => Some(Call::Other),
            1 => Some(Call::Read),
            2 => Some(Call::Sendfile),
            3 => Some(Call::Mmap),
            _ => None,
        }
    }

    /// Lower-case name used in stats.
    pub fn name(self) -> &'static str {
        match self {
            Call::Other => "other",
            Call::Read => "read",
            Call::Sendfile => "sendfile",
            Call::Mmap => "mmap",
        }
    }
}

/// `struct lcp_request`, field for field. Only used for layout checks.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawRequest {
    pub magic: u32,
    pub version: u16,
    pub op: u16,
    pub flags: u32,
    pub call: u32,
    pub seq: u64,
    pub offset: u64,
    pub length: u64,
    pub tid: u32,
    pub reserved: u32,
}

/// `struct lcp_reply`, field for field. Only used for layout checks.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawReply {
    pub magic: u32,
    pub version: u16,
    pub op: u16,
    pub seq: u64,
    pub status: i32,
    pub flags: u32,
    pub bytes_read: u64,
    pub payload_len: u64,
}

const _: () = assert!(size_of::<RawRequest>() == REQUEST_SIZE);
const _: () = assert!(size_of::<RawReply>() == REPLY_SIZE);
const _: () = assert!(REQUEST_SIZE <= MAX_MESSAGE && REPLY_SIZE <= MAX_MESSAGE);

/// Why a request datagram was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("request is {len} bytes, expected {REQUEST_SIZE}")]
    Size { len: usize },
    #[error("request magic is {found:#010x}, expected {REQUEST_MAGIC:#010x}")]
    Magic { found: u32 },
    #[error("request version is {found}, this daemon speaks {PROTO_VERSION}")]
    Version { found: u16 },
    #[error("request op {found} is not one of fetch(1), check(2), stats(3)")]
    Op { found: u16 },
    #[error("request reserved field is {found:#x}, must be 0")]
    Reserved { found: u32 },
    #[error("request flags {unknown:#x} are not defined (known: {:#x})", request_flags::KNOWN)]
    Flags { unknown: u32 },
}

/// Why a reply datagram was rejected (used by clients of the daemon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("reply is {len} bytes, expected {REPLY_SIZE}")]
    Size { len: usize },
    #[error("reply magic is {found:#010x}, expected {REPLY_MAGIC:#010x}")]
    Magic { found: u32 },
    #[error("reply version is {found}, expected {PROTO_VERSION}")]
    Version { found: u16 },
    #[error("reply flags {unknown:#x} are not defined")]
    Flags { unknown: u32 },
}

/// A validated request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    /// Only bits of [`request_flags::KNOWN`].
    pub flags: u32,
    /// Raw `enum lcp_call` value; see [`Call::from_wire`].
    pub call: u32,
    pub seq: u64,
    pub offset: u64,
    pub length: u64,
    pub tid: u32,
}

/// A validated reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Echoed op; 0 if the request was unreadable.
    pub op: u16,
    pub seq: u64,
    /// 0 or a negative errno.
    pub status: i32,
    /// Bits of [`reply_flags`].
    pub flags: u32,
    pub bytes_read: u64,
    pub payload_len: u64,
}

fn get_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([buf[at], buf[at + 1]])
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

impl Request {
    /// Parses one datagram. Checks, in order: size, magic, version, op,
    /// reserved field, flags.
    pub fn parse(buf: &[u8]) -> Result<Request, RequestError> {
        if buf.len() != REQUEST_SIZE {
            return Err(RequestError::Size { len: buf.len() });
        }
        let magic = get_u32(buf, offset_of!(RawRequest, magic));
        if magic != REQUEST_MAGIC {
            return Err(RequestError::Magic { found: magic });
        }
        let version = get_u16(buf, offset_of!(RawRequest, version));
        if version != PROTO_VERSION {
            return Err(RequestError::Version { found: version });
        }
        let op_raw = get_u16(buf, offset_of!(RawRequest, op));
        let op = Op::from_wire(op_raw).ok_or(RequestError::Op { found: op_raw })?;
        let reserved = get_u32(buf, offset_of!(RawRequest, reserved));
        if reserved != 0 {
            return Err(RequestError::Reserved { found: reserved });
        }
        let flags = get_u32(buf, offset_of!(RawRequest, flags));
        if flags & !request_flags::KNOWN != 0 {
            return Err(RequestError::Flags {
                unknown: flags & !request_flags::KNOWN,
            });
        }
        Ok(Request {
            op,
            flags,
            call: get_u32(buf, offset_of!(RawRequest, call)),
            seq: get_u64(buf, offset_of!(RawRequest, seq)),
            offset: get_u64(buf, offset_of!(RawRequest, offset)),
            length: get_u64(buf, offset_of!(RawRequest, length)),
            tid: get_u32(buf, offset_of!(RawRequest, tid)),
        })
    }

    /// The exact wire image (magic, version and reserved filled in).
    pub fn encode(&self) -> [u8; REQUEST_SIZE] {
        let mut b = [0u8; REQUEST_SIZE];
        put(&mut b, offset_of!(RawRequest, magic), &REQUEST_MAGIC.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, version), &PROTO_VERSION.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, op), &(self.op as u16).to_le_bytes());
        put(&mut b, offset_of!(RawRequest, flags), &self.flags.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, call), &self.call.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, seq), &self.seq.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, offset), &self.offset.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, length), &self.length.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, tid), &self.tid.to_le_bytes());
        put(&mut b, offset_of!(RawRequest, reserved), &0u32.to_le_bytes());
        b
    }

    /// Whether the client asked for the exact range only.
    pub fn no_prefetch(&self) -> bool {
        self.flags & request_flags::NO_PREFETCH != 0
    }
}

/// The op and seq of a datagram that failed to parse, for the error reply:
/// echoed only when the magic is right and the seq field is present, as the
/// header asks; `(0, 0)` otherwise.
pub fn echo_header(buf: &[u8]) -> (u16, u64) {
    let seq_end = offset_of!(RawRequest, seq) + 8;
    if buf.len() < seq_end || get_u32(buf, offset_of!(RawRequest, magic)) != REQUEST_MAGIC {
        return (0, 0);
    }
    (
        get_u16(buf, offset_of!(RawRequest, op)),
        get_u64(buf, offset_of!(RawRequest, seq)),
    )
}

impl Reply {
    /// A reply with status 0 and nothing else set.
    pub fn ok(op: u16, seq: u64) -> Reply {
        Reply {
            op,
            seq,
            status: 0,
            flags: 0,
            bytes_read: 0,
            payload_len: 0,
        }
    }

    /// An error reply; `errno` is positive, the wire carries `-errno`.
    pub fn error(op: u16, seq: u64, errno: i32) -> Reply {
        Reply {
            status: -errno.abs(),
            ..Reply::ok(op, seq)
        }
    }

    /// The exact wire image.
    pub fn encode(&self) -> [u8; REPLY_SIZE] {
        let mut b = [0u8; REPLY_SIZE];
        put(&mut b, offset_of!(RawReply, magic), &REPLY_MAGIC.to_le_bytes());
        put(&mut b, offset_of!(RawReply, version), &PROTO_VERSION.to_le_bytes());
        put(&mut b, offset_of!(RawReply, op), &self.op.to_le_bytes());
        put(&mut b, offset_of!(RawReply, seq), &self.seq.to_le_bytes());
        put(&mut b, offset_of!(RawReply, status), &self.status.to_le_bytes());
        put(&mut b, offset_of!(RawReply, flags), &self.flags.to_le_bytes());
        put(&mut b, offset_of!(RawReply, bytes_read), &self.bytes_read.to_le_bytes());
        put(&mut b, offset_of!(RawReply, payload_len), &self.payload_len.to_le_bytes());
        b
    }

    /// Parses one reply datagram.
    pub fn parse(buf: &[u8]) -> Result<Reply, ReplyError> {
        if buf.len() != REPLY_SIZE {
            return Err(ReplyError::Size { len: buf.len() });
        }
        let magic = get_u32(buf, offset_of!(RawReply, magic));
        if magic != REPLY_MAGIC {
            return Err(ReplyError::Magic { found: magic });
        }
        let version = get_u16(buf, offset_of!(RawReply, version));
        if version != PROTO_VERSION {
            return Err(ReplyError::Version { found: version });
        }
        let flags = get_u32(buf, offset_of!(RawReply, flags));
        if flags & !reply_flags::KNOWN != 0 {
            return Err(ReplyError::Flags {
                unknown: flags & !reply_flags::KNOWN,
            });
        }
        Ok(Reply {
            op: get_u16(buf, offset_of!(RawReply, op)),
            seq: get_u64(buf, offset_of!(RawReply, seq)),
            status: get_u32(buf, offset_of!(RawReply, status)) as i32,
            flags,
            bytes_read: get_u64(buf, offset_of!(RawReply, bytes_read)),
            payload_len: get_u64(buf, offset_of!(RawReply, payload_len)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Request {
        Request {
            op: Op::Fetch,
            flags: request_flags::NO_PREFETCH,
            call: Call::Sendfile as u32,
            seq: 0x0102_0304_0506_0708,
            offset: 4096,
            length: 1 << 20,
            tid: 77,
        }
    }

    #[test]
    fn request_bytes_are_little_endian_at_c_offsets() {
        let b = sample().encode();
        assert_eq!(&b[0..4], b"LCPQ");
        assert_eq!(&b[4..6], &[1, 0]);
        assert_eq!(&b[6..8], &[1, 0]);
        assert_eq!(&b[16..24], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&b[44..48], &[0, 0, 0, 0]);
        assert_eq!(Request::parse(&b), Ok(sample()));
    }

    #[test]
    fn each_defect_has_its_own_error() {
        let good = sample().encode();
        assert_eq!(Request::parse(&good[..47]), Err(RequestError::Size { len: 47 }));
        let mut b = good;
        b[0] = b'X';
        assert!(matches!(Request::parse(&b), Err(RequestError::Magic { .. })));
        let mut b = good;
        b[4] = 2;
        assert_eq!(Request::parse(&b), Err(RequestError::Version { found: 2 }));
        let mut b = good;
        b[6] = 9;
        assert_eq!(Request::parse(&b), Err(RequestError::Op { found: 9 }));
        let mut b = good;
        b[47] = 1;
        assert_eq!(
            Request::parse(&b),
            Err(RequestError::Reserved { found: 0x0100_0000 })
        );
        let mut b = good;
        b[8] = 0x3;
        assert_eq!(Request::parse(&b), Err(RequestError::Flags { unknown: 2 }));
    }

    #[test]
    fn echo_needs_magic_and_seq() {
        let good = sample().encode();
        assert_eq!(echo_header(&good[..24]), (1, 0x0102_0304_0506_0708));
        assert_eq!(echo_header(&good[..23]), (0, 0));
        let mut b = good;
        b[1] = 0;
        assert_eq!(echo_header(&b), (0, 0));
    }

    #[test]
    fn reply_round_trips() {
        let r = Reply {
            op: 3,
            seq: 9,
            status: -71,
            flags: reply_flags::READ | reply_flags::JOINED,
            bytes_read: 2 << 20,
            payload_len: 1234,
        };
        let b = r.encode();
        assert_eq!(&b[0..4], b"LCPR");
        assert_eq!(Reply::parse(&b), Ok(r));
        assert_eq!(Reply::parse(&b[..39]), Err(ReplyError::Size { len: 39 }));
    }
}
