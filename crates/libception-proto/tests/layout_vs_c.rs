//! Proves that the Rust mirror agrees with `native/include/libception/protocol.h`
//! and `native/include/libception/shim.h`.
//!
//! The test writes a small C program into a temporary directory, compiles it
//! with `cc` against the real header, runs it, and compares every line it
//! prints (struct sizes, field offsets and sizes, every constant) with the
//! same facts computed on the Rust side. Both sides print the same keys, so a
//! field or constant added to only one side fails the test too.

use libception_proto::*;
use std::collections::BTreeMap;
use std::mem::size_of;
use std::path::PathBuf;
use std::process::Command;

const C_PROGRAM: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include <libception/protocol.h>
#include <libception/shim.h>

#define FIELD(s, f) \
    printf("offsetof.%s.%s %zu\n", #s, #f, offsetof(struct s, f)); \
    printf("sizeof.%s.%s %zu\n", #s, #f, sizeof(((struct s *)0)->f))
#define CONST(c) printf("const.%s %llu\n", #c, (unsigned long long)(c))
#define STR(c) printf("str.%s %s\n", #c, c)

int main(void)
{
    printf("sizeof.lcp_request %zu\n", sizeof(struct lcp_request));
    FIELD(lcp_request, magic);
    FIELD(lcp_request, version);
    FIELD(lcp_request, op);
    FIELD(lcp_request, flags);
    FIELD(lcp_request, call);
    FIELD(lcp_request, seq);
    FIELD(lcp_request, offset);
    FIELD(lcp_request, length);
    FIELD(lcp_request, tid);
    FIELD(lcp_request, reserved);
    printf("sizeof.lcp_reply %zu\n", sizeof(struct lcp_reply));
    FIELD(lcp_reply, magic);
    FIELD(lcp_reply, version);
    FIELD(lcp_reply, op);
    FIELD(lcp_reply, seq);
    FIELD(lcp_reply, status);
    FIELD(lcp_reply, flags);
    FIELD(lcp_reply, bytes_read);
    FIELD(lcp_reply, payload_len);
    FIELD(lcp_reply, resident_end);
    CONST(LCP_PROTO_VERSION);
    CONST(LCP_PROTO_VERSION_MIN);
    CONST(LCP_REQUEST_MAGIC);
    CONST(LCP_REPLY_MAGIC);
    CONST(LCP_MAX_MESSAGE);
    CONST(LCP_OP_FETCH);
    CONST(LCP_OP_CHECK);
    CONST(LCP_OP_STATS);
    CONST(LCP_REQ_NO_PREFETCH);
    CONST(LCP_REQ_FLAGS_KNOWN);
    CONST(LCP_CALL_OTHER);
    CONST(LCP_CALL_READ);
    CONST(LCP_CALL_SENDFILE);
    CONST(LCP_CALL_MMAP);
    CONST(LCP_REP_RESIDENT);
    CONST(LCP_REP_READ);
    CONST(LCP_REP_JOINED);
    STR(LCP_SOCKET_ENV);
    STR(LCP_SOCKET_DEFAULT);
    STR(LCP_ENV_MODE);
    STR(LCP_ENV_SOCKET);
    STR(LCP_ENV_TIMEOUT_MS);
    STR(LCP_ENV_PATIENCE_MS);
    STR(LCP_ENV_PREFETCH);
    STR(LCP_ENV_MAX_REQUEST);
    STR(LCP_ENV_STATS);
    STR(LCP_ENV_STATS_INTERVAL_MS);
    STR(LCP_ENV_WINDOW_MS);
    STR(LCP_ENV_FORCE_CHECK);
    STR(LCP_ENV_DAEMON_UID);
    STR(LCP_CONF_PATH);
    CONST(LCP_MODE_OFF);
    CONST(LCP_MODE_FULL);
    CONST(LCP_MODE_SERIALIZE);
    CONST(LCP_MODE_PREFETCH);
    CONST(LCP_MODE_TRACK);
    STR(LCP_MODE_NAME_OFF);
    STR(LCP_MODE_NAME_FULL);
    STR(LCP_MODE_NAME_SERIALIZE);
    STR(LCP_MODE_NAME_PREFETCH);
    STR(LCP_MODE_NAME_TRACK);
    /* The status field is signed: a negative errno must survive. */
    printf("signed.lcp_reply.status %d\n", (int)((__typeof__(((struct lcp_reply *)0)->status))-1 < 0));
    return 0;
}
"#;

fn rust_facts() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        m.insert(k.to_string(), v);
    };
    // The tables the codec itself is built from, so every field the Rust side
    // encodes is checked, at the offset and size it encodes it.
    // (C struct, its size, its fields as (name, offset, size)).
    type Layout<'a> = (&'a str, usize, &'a [(&'a str, usize, usize)]);
    let structs: [Layout; 2] = [
        ("lcp_request", size_of::<RawRequest>(), RawRequest::FIELDS),
        ("lcp_reply", size_of::<RawReply>(), RawReply::FIELDS),
    ];
    for (cname, size, fields) in structs {
        put(&format!("sizeof.{cname}"), size.to_string());
        for (field, offset, size) in fields {
            put(&format!("offsetof.{cname}.{field}"), offset.to_string());
            put(&format!("sizeof.{cname}.{field}"), size.to_string());
        }
    }
    put("const.LCP_PROTO_VERSION", PROTO_VERSION.to_string());
    put("const.LCP_PROTO_VERSION_MIN", PROTO_VERSION_MIN.to_string());
    put("const.LCP_REQUEST_MAGIC", REQUEST_MAGIC.to_string());
    put("const.LCP_REPLY_MAGIC", REPLY_MAGIC.to_string());
    put("const.LCP_MAX_MESSAGE", MAX_MESSAGE.to_string());
    put("const.LCP_OP_FETCH", (Op::Fetch as u16).to_string());
    put("const.LCP_OP_CHECK", (Op::Check as u16).to_string());
    put("const.LCP_OP_STATS", (Op::Stats as u16).to_string());
    put("const.LCP_REQ_NO_PREFETCH", request_flags::NO_PREFETCH.to_string());
    put("const.LCP_REQ_FLAGS_KNOWN", request_flags::KNOWN.to_string());
    put("const.LCP_CALL_OTHER", (Call::Other as u32).to_string());
    put("const.LCP_CALL_READ", (Call::Read as u32).to_string());
    put("const.LCP_CALL_SENDFILE", (Call::Sendfile as u32).to_string());
    put("const.LCP_CALL_MMAP", (Call::Mmap as u32).to_string());
    put("const.LCP_REP_RESIDENT", reply_flags::RESIDENT.to_string());
    put("const.LCP_REP_READ", reply_flags::READ.to_string());
    put("const.LCP_REP_JOINED", reply_flags::JOINED.to_string());
    put("str.LCP_SOCKET_ENV", SOCKET_ENV.to_string());
    put("str.LCP_SOCKET_DEFAULT", SOCKET_DEFAULT.to_string());
    for (c, name) in ["MODE", "SOCKET", "TIMEOUT_MS", "PATIENCE_MS", "PREFETCH", "MAX_REQUEST", "STATS", "STATS_INTERVAL_MS", "WINDOW_MS", "FORCE_CHECK", "DAEMON_UID"].iter().zip(shim_env::var::ALL) {
        put(&format!("str.LCP_ENV_{c}"), name.to_string());
    }
    put("str.LCP_CONF_PATH", shim_env::CONF_PATH.to_string());
    for mode in shim_env::Mode::ALL {
        let c = mode.name().to_uppercase();
        put(&format!("const.LCP_MODE_{c}"), (mode as u32).to_string());
        put(&format!("str.LCP_MODE_NAME_{c}"), mode.name().to_string());
    }
    put("signed.lcp_reply.status", ((-1i32).is_negative() as i32).to_string());
    m
}

fn header_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../native/include")
}

#[test]
fn rust_layout_and_constants_match_the_c_header() {
    let dir = tempfile::tempdir().expect("create temp dir for the C layout probe");
    let src = dir.path().join("probe.c");
    let exe = dir.path().join("probe");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(header_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "compiling the layout probe against protocol.h and shim.h failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run the layout probe");
    assert!(run.status.success());
    let c: BTreeMap<String, String> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').expect("probe line is `key value`");
            (k.to_string(), v.to_string())
        })
        .collect();
    let rust = rust_facts();
    assert!(c.len() > 40, "the probe printed too little: {c:?}");
    for (k, v) in &c {
        assert_eq!(rust.get(k), Some(v), "C says {k} = {v}");
    }
    for k in rust.keys() {
        assert!(c.contains_key(k), "Rust has {k} but the C probe does not");
    }
}

/// The wire images the Rust side produces are the ones C code reads: a C
/// program decodes a request encoded by Rust and encodes a reply Rust parses.
#[test]
fn c_reads_rust_bytes_and_rust_reads_c_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let req = Request {
        version: PROTO_VERSION,
        op: Op::Check,
        flags: request_flags::NO_PREFETCH,
        call: Call::Mmap as u32,
        seq: 0xdead_beef_0000_0001,
        offset: 123_456_789_012,
        length: 65_536,
        tid: 4242,
    };
    std::fs::write(dir.path().join("req.bin"), req.encode()).unwrap();
    let prog = r#"
#include <stdio.h>
#include <string.h>
#include <libception/protocol.h>
int main(int argc, char **argv)
{
    struct lcp_request q; struct lcp_reply r;
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(&q, 1, sizeof q, f) != sizeof q) return 2;
    fclose(f);
    printf("%u %u %u %u %u %llu %llu %llu %u %u\n", q.magic, q.version, q.op, q.flags, q.call,
           (unsigned long long)q.seq, (unsigned long long)q.offset,
           (unsigned long long)q.length, q.tid, q.reserved);
    memset(&r, 0, sizeof r);
    r.magic = LCP_REPLY_MAGIC; r.version = LCP_PROTO_VERSION; r.op = q.op; r.seq = q.seq;
    r.status = -71; r.flags = LCP_REP_READ | LCP_REP_JOINED; r.bytes_read = 2097152;
    r.payload_len = 77; r.resident_end = 4194304;
    f = fopen(argv[2], "wb");
    if (!f || fwrite(&r, 1, sizeof r, f) != sizeof r) return 3;
    fclose(f);
    return 0;
}
"#;
    let src = dir.path().join("rt.c");
    let exe = dir.path().join("rt");
    std::fs::write(&src, prog).unwrap();
    let ok = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Werror", "-I"])
        .arg(header_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = Command::new(&exe)
        .arg(dir.path().join("req.bin"))
        .arg(dir.path().join("rep.bin"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!(
            "{} {} 2 1 3 {} 123456789012 65536 4242 0",
            REQUEST_MAGIC, PROTO_VERSION, 0xdead_beef_0000_0001u64
        )
    );
    let rep = Reply::parse(&std::fs::read(dir.path().join("rep.bin")).unwrap()).unwrap();
    assert_eq!(
        rep,
        Reply {
            op: 2,
            seq: 0xdead_beef_0000_0001,
            status: -71,
            flags: reply_flags::READ | reply_flags::JOINED,
            bytes_read: 2_097_152,
            payload_len: 77,
            resident_end: 4_194_304,
        }
    );
}
