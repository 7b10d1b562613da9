//! What Deception (the LD_PRELOAD shim), Reception (the daemon) and the tools
//! that start them share: the Rust mirror of `native/include/libception/protocol.h`,
//! the wire protocol between shim and daemon (this module); the shim's
//! environment mirrored from `shim.h` ([`shim_env`]); the shim's statistics
//! files ([`shim_stats`]); and the daemon's prefetch setting ([`prefetch`]).
//!
//! The C header is the source of truth. This crate mirrors it in two layers:
//!
//! * [`RawRequest`] and [`RawReply`] are `#[repr(C)]` copies of the C structs,
//!   declared once each with the codec their field list implies: every field
//!   is written to and read from an exact little-endian image at its
//!   `offset_of!`, so the code is independent of the host byte order and never
//!   transmutes, reads uninitialised or misaligned memory. Their `FIELDS`
//!   tables are what `tests/layout_vs_c.rs` compares with the C compiler's view.
//! * [`Request`] and [`Reply`] are the validated, typed messages, parsed from
//!   and encoded through the raw structs.
//!
//! Parsing treats every datagram as hostile: a wrong size, magic, version or
//! op, a non-zero reserved field or an unknown flag bit is a typed
//! [`RequestError`], never a panic. [`echo_header`] extracts the op and seq a
//! peer sent when the header is readable enough to echo them in an error reply.

use std::mem::{offset_of, size_of};

pub mod prefetch;
pub mod shim_env;
pub mod shim_stats;

pub use prefetch::{AdaptiveParams, BitrateScale, ParamError, Prefetch, DEFAULT_START};
pub use shim_env::{Mode, ShimEnv};

/// `LCP_PROTO_VERSION`: what this side sends. Version 2 added
/// [`Reply::resident_end`].
pub const PROTO_VERSION: u16 = 2;
/// `LCP_PROTO_VERSION_MIN`: the oldest request version the daemon still
/// answers (in that version's reply layout, see [`Reply::encode_version`]).
pub const PROTO_VERSION_MIN: u16 = 1;
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
pub const REPLY_SIZE: usize = 48;
/// The version 1 reply: the first 40 bytes of the current one (no
/// `resident_end`).
pub const REPLY_SIZE_V1: usize = 40;

/// Declares a `#[repr(C)]` mirror of an enum of the C header and, from the
/// same list, its parser from a wire value and its lower-case name.
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $name:ident: $repr:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr($repr)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)+
        }

        impl $name {
            /// The value for a wire number, if the protocol defines it.
            pub fn from_wire(value: $repr) -> Option<$name> {
                match value {
                    $($value => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Lower-case name used in logs and stats.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }
    };
}

/// Declares a `#[repr(C)]` mirror of a struct of the C header and, from the
/// same field list, its exact little-endian image (each field at its
/// `offset_of!`, whatever the host's byte order) and the table of its fields
/// that `tests/layout_vs_c.rs` compares with the C compiler's.
macro_rules! wire_struct {
    ($(#[$meta:meta])* pub struct $name:ident { $($field:ident: $ty:ty,)+ }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            $(pub $field: $ty,)+
        }

        impl $name {
            /// Every field as (name, offset, size), in the header's order.
            pub const FIELDS: &'static [(&'static str, usize, usize)] =
                &[$((stringify!($field), offset_of!($name, $field), size_of::<$ty>()),)+];

            /// The wire image.
            pub fn to_wire(&self) -> [u8; size_of::<$name>()] {
                let mut b = [0u8; size_of::<$name>()];
                $(
                    let at = offset_of!($name, $field);
                    b[at..at + size_of::<$ty>()].copy_from_slice(&self.$field.to_le_bytes());
                )+
                b
            }

            /// Every field read from a wire image.
            pub fn from_wire(b: &[u8; size_of::<$name>()]) -> $name {
                $name {
                    $($field: {
                        let at = offset_of!($name, $field);
                        <$ty>::from_le_bytes(b[at..at + size_of::<$ty>()].try_into().expect("a field lies inside its struct"))
                    },)+
                }
            }
        }
    };
}

wire_enum! {
    /// `enum lcp_op`.
    pub enum Op: u16 {
        /// `LCP_OP_FETCH`: make a range resident (reading and prefetching if needed).
        Fetch = 1 => "fetch",
        /// `LCP_OP_CHECK`: report residency using the daemon's rights; no I/O.
        Check = 2 => "check",
        /// `LCP_OP_STATS`: the daemon's counters as JSON; no fd.
        Stats = 3 => "stats",
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

wire_enum! {
    /// `enum lcp_call`: which interposed function caused a request. Informational
    /// only: a value [`Call::from_wire`] does not know is `None`, not an error.
    pub enum Call: u32 {
        /// `LCP_CALL_OTHER`.
        Other = 0 => "other",
        /// `LCP_CALL_READ`: read, pread*, readv, preadv*.
        Read = 1 => "read",
        /// `LCP_CALL_SENDFILE`: sendfile, sendfile64.
        Sendfile = 2 => "sendfile",
        /// `LCP_CALL_MMAP`: mmap, mmap64 of a regular file.
        Mmap = 3 => "mmap",
    }
}

wire_struct! {
    /// `struct lcp_request`, field for field: the wire image of a [`Request`].
    pub struct RawRequest {
        magic: u32,
        version: u16,
        op: u16,
        flags: u32,
        call: u32,
        seq: u64,
        offset: u64,
        length: u64,
        tid: u32,
        reserved: u32,
    }
}

wire_struct! {
    /// `struct lcp_reply`, field for field: the wire image of a [`Reply`].
    pub struct RawReply {
        magic: u32,
        version: u16,
        op: u16,
        seq: u64,
        status: i32,
        flags: u32,
        bytes_read: u64,
        payload_len: u64,
        resident_end: u64,
    }
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
    #[error("request version is {found}, this daemon speaks {PROTO_VERSION_MIN} to {PROTO_VERSION}")]
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
    /// The sender's protocol version, [`PROTO_VERSION_MIN`]..=[`PROTO_VERSION`]:
    /// the reply goes out in the same version.
    pub version: u16,
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
    /// 0, or the end of a range from the request's offset known resident
    /// when the reply was made (`lcp_reply.resident_end`; version 2).
    pub resident_end: u64,
}

impl Request {
    /// Parses one datagram. Checks, in order: size, magic, version, op,
    /// reserved field, flags.
    pub fn parse(buf: &[u8]) -> Result<Request, RequestError> {
        let buf: &[u8; REQUEST_SIZE] = buf.try_into().map_err(|_| RequestError::Size { len: buf.len() })?;
        let raw = RawRequest::from_wire(buf);
        if raw.magic != REQUEST_MAGIC {
            return Err(RequestError::Magic { found: raw.magic });
        }
        if !(PROTO_VERSION_MIN..=PROTO_VERSION).contains(&raw.version) {
            return Err(RequestError::Version { found: raw.version });
        }
        let op = Op::from_wire(raw.op).ok_or(RequestError::Op { found: raw.op })?;
        if raw.reserved != 0 {
            return Err(RequestError::Reserved { found: raw.reserved });
        }
        if raw.flags & !request_flags::KNOWN != 0 {
            return Err(RequestError::Flags { unknown: raw.flags & !request_flags::KNOWN });
        }
        let RawRequest { version, flags, call, seq, offset, length, tid, .. } = raw;
        Ok(Request { version, op, flags, call, seq, offset, length, tid })
    }

    /// The exact wire image (magic and reserved filled in).
    pub fn encode(&self) -> [u8; REQUEST_SIZE] {
        let Request { version, op, flags, call, seq, offset, length, tid } = *self;
        RawRequest { magic: REQUEST_MAGIC, version, op: op as u16, flags, call, seq, offset, length, tid, reserved: 0 }.to_wire()
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
    let seq_end = offset_of!(RawRequest, seq) + size_of::<u64>();
    let mut image = [0u8; REQUEST_SIZE];
    let n = buf.len().min(REQUEST_SIZE);
    image[..n].copy_from_slice(&buf[..n]);
    let raw = RawRequest::from_wire(&image);
    if buf.len() < seq_end || raw.magic != REQUEST_MAGIC {
        return (0, 0);
    }
    (raw.op, raw.seq)
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
            resident_end: 0,
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
        self.encode_version(PROTO_VERSION).0
    }

    /// The wire image for a peer that spoke `version`, and its length: the
    /// whole reply for version 2, the first [`REPLY_SIZE_V1`] bytes (labelled
    /// version 1, `resident_end` left out) for version 1.
    pub fn encode_version(&self, version: u16) -> ([u8; REPLY_SIZE], usize) {
        let Reply { op, seq, status, flags, bytes_read, payload_len, resident_end } = *self;
        let v1 = version < 2;
        let raw = RawReply {
            magic: REPLY_MAGIC,
            version: if v1 { 1 } else { PROTO_VERSION },
            op,
            seq,
            status,
            flags,
            bytes_read,
            payload_len,
            resident_end: if v1 { 0 } else { resident_end },
        };
        (raw.to_wire(), if v1 { REPLY_SIZE_V1 } else { REPLY_SIZE })
    }

    /// Parses one reply datagram of this version ([`REPLY_SIZE`] bytes).
    pub fn parse(buf: &[u8]) -> Result<Reply, ReplyError> {
        if buf.len() != REPLY_SIZE {
            return Err(ReplyError::Size { len: buf.len() });
        }
        match Reply::parse_any_version(buf)? {
            (reply, PROTO_VERSION) => Ok(reply),
            (_, found) => Err(ReplyError::Version { found }),
        }
    }

    /// Parses a reply of any version the daemon speaks, as it answers a
    /// request of that version: a version-1 image is [`REPLY_SIZE_V1`] bytes
    /// (no `resident_end`, read as 0), a version-2 one [`REPLY_SIZE`].
    /// Returns the reply and its version.
    pub fn parse_any_version(buf: &[u8]) -> Result<(Reply, u16), ReplyError> {
        let mut image = [0u8; REPLY_SIZE];
        let expected = match buf.len() {
            REPLY_SIZE_V1 => 1,
            REPLY_SIZE => PROTO_VERSION,
            len => return Err(ReplyError::Size { len }),
        };
        image[..buf.len()].copy_from_slice(buf);
        let raw = RawReply::from_wire(&image);
        if raw.magic != REPLY_MAGIC {
            return Err(ReplyError::Magic { found: raw.magic });
        }
        if raw.version != expected {
            return Err(ReplyError::Version { found: raw.version });
        }
        if raw.flags & !reply_flags::KNOWN != 0 {
            return Err(ReplyError::Flags { unknown: raw.flags & !reply_flags::KNOWN });
        }
        let RawReply { op, seq, status, flags, bytes_read, payload_len, resident_end, .. } = raw;
        Ok((Reply { op, seq, status, flags, bytes_read, payload_len, resident_end }, raw.version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Request {
        Request {
            version: PROTO_VERSION,
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
        assert_eq!(&b[4..6], &[2, 0]);
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
        b[4] = 3;
        assert_eq!(Request::parse(&b), Err(RequestError::Version { found: 3 }));
        let mut b = good;
        b[4] = 0;
        assert_eq!(Request::parse(&b), Err(RequestError::Version { found: 0 }));
        let mut b = good;
        b[4] = 1;
        assert_eq!(Request::parse(&b), Ok(Request { version: 1, ..sample() }), "version 1 is still answered");
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
            resident_end: 3 << 20,
        };
        let b = r.encode();
        assert_eq!(&b[0..4], b"LCPR");
        assert_eq!(Reply::parse(&b), Ok(r));
        assert_eq!(Reply::parse(&b[..47]), Err(ReplyError::Size { len: 47 }));
    }

    #[test]
    fn a_version_1_peer_gets_the_version_1_layout() {
        let r = Reply { flags: reply_flags::RESIDENT, bytes_read: 7, resident_end: 3 << 20, ..Reply::ok(1, 9) };
        let (v1, n) = r.encode_version(1);
        assert_eq!(n, REPLY_SIZE_V1);
        assert_eq!(&v1[4..6], &[1, 0]);
        let (v2, m) = r.encode_version(PROTO_VERSION);
        assert_eq!(m, REPLY_SIZE);
        // Everything but the version label is where version 1 had it.
        assert_eq!(v1[..4], v2[..4]);
        assert_eq!(v1[6..n], v2[6..n]);
        assert_eq!(Reply::parse(&v2[..m]), Ok(r));
        // A version-1 image reads back without resident_end; only the parser
        // of any version takes it, and a mislabelled length is refused.
        assert_eq!(Reply::parse(&v1[..n]), Err(ReplyError::Size { len: REPLY_SIZE_V1 }));
        assert_eq!(Reply::parse_any_version(&v1[..n]), Ok((Reply { resident_end: 0, ..r }, 1)));
        assert_eq!(Reply::parse_any_version(&v2[..m]), Ok((r, PROTO_VERSION)));
        let mut v2_labelled_1 = v2;
        v2_labelled_1[4] = 1;
        assert_eq!(Reply::parse_any_version(&v2_labelled_1[..m]), Err(ReplyError::Version { found: 1 }));
        assert_eq!(Reply::parse_any_version(&v2[..n]), Err(ReplyError::Version { found: PROTO_VERSION }));
    }
}
