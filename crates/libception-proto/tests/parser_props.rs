//! Property tests of the message parser: arbitrary bytes never panic and are
//! either a valid request (which re-encodes to the same bytes) or a typed
//! error; every valid request round-trips; single-byte corruption of a valid
//! request is either detected or lands in a free-form field.

use libception_proto::*;
use proptest::prelude::*;

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::Fetch), Just(Op::Check), Just(Op::Stats)]
}

fn any_request() -> impl Strategy<Value = Request> {
    (
        any_op(),
        0u32..=request_flags::KNOWN,
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(op, flags, call, seq, offset, length, tid)| Request {
            version: PROTO_VERSION,
            op,
            flags,
            call,
            seq,
            offset,
            length,
            tid,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        match Request::parse(&bytes) {
            Ok(req) => prop_assert_eq!(&req.encode()[..], &bytes[..]),
            Err(RequestError::Size { len }) => prop_assert_ne!(len, REQUEST_SIZE),
            Err(_) => prop_assert_eq!(bytes.len(), REQUEST_SIZE),
        }
        let _ = echo_header(&bytes);
        let _ = Reply::parse(&bytes);
    }

    #[test]
    fn arbitrary_48_byte_messages_never_panic(bytes in proptest::collection::vec(any::<u8>(), REQUEST_SIZE)) {
        if let Ok(req) = Request::parse(&bytes) {
            prop_assert_eq!(&req.encode()[..], &bytes[..]);
        }
    }

    #[test]
    fn valid_requests_round_trip(req in any_request()) {
        let bytes = req.encode();
        prop_assert_eq!(Request::parse(&bytes), Ok(req));
        prop_assert_eq!(echo_header(&bytes), (req.op as u16, req.seq));
    }

    #[test]
    fn corruption_of_fixed_fields_is_detected(req in any_request(), at in 0usize..REQUEST_SIZE, x in 1u8..=255) {
        let mut bytes = req.encode();
        bytes[at] ^= x;
        let parsed = Request::parse(&bytes);
        match at {
            0..=3 => prop_assert!(matches!(parsed, Err(RequestError::Magic { .. })), "{:?}", parsed),
            // version: an unknown one, or the older one the daemon still answers.
            4..=5 => prop_assert!(matches!(parsed, Err(RequestError::Version { .. })) || matches!(parsed, Ok(Request { version: PROTO_VERSION_MIN, .. })), "{:?}", parsed),
            44..=47 => prop_assert!(matches!(parsed, Err(RequestError::Reserved { .. })), "{:?}", parsed),
            // op and flags: either another valid value or a typed error.
            6..=11 => prop_assert!(parsed.is_ok() || matches!(parsed, Err(RequestError::Op { .. }) | Err(RequestError::Flags { .. })), "{:?}", parsed),
            // call, seq, offset, length, tid are free-form.
            _ => prop_assert!(parsed.is_ok()),
        }
    }

    #[test]
    fn valid_replies_round_trip(op in any::<u16>(), seq in any::<u64>(), status in any::<i32>(),
                                flags in 0u32..=reply_flags::KNOWN, bytes_read in any::<u64>(), payload_len in any::<u64>(),
                                resident_end in any::<u64>()) {
        let r = Reply { op, seq, status, flags, bytes_read, payload_len, resident_end };
        prop_assert_eq!(Reply::parse(&r.encode()), Ok(r));
    }
}
