//! One session played over one persistent HTTP/1.1 connection.
//!
//! Design:
//! - Every session is a task on the load client's single-threaded event loop.
//!   Reads go into one scratch buffer shared by all sessions (a read is
//!   synchronous between two awaits: `readable()` then `try_read`), so 2,000
//!   sessions cost no per-session body buffers; bytes are only counted, and
//!   compared with the library's content when verifying.
//! - Bandwidth cap: the socket gets a small `SO_RCVBUF` before `connect` and
//!   the session reads no faster than its class's rate (a token bucket whose
//!   depth is 20 ms of the rate, at least 4 KiB). Unread bytes fill the receive
//!   buffer, the advertised window closes, and TCP flow control holds the
//!   server back: the server's socket buffer, not the client, decides how much
//!   each of its `sendfile` calls asks the disk for, as with the papers' dummynet.
//! - One-way delay (sleep-based): the TCP handshake costs two delays, a
//!   request leaves one delay after it was issued, and a response is seen one
//!   delay after its bytes arrive. The deadline is checked against when the
//!   response is seen, so a delay eats into it as on a real link.
//! - A response is good when its status is 206 for a range (200 for a whole
//!   file), its Content-Length (and Content-Range) match the range, and exactly
//!   that many body bytes arrive before the deadline. Anything else fails the
//!   session, which then stops, as httperf does.

use crate::config::{ReceiveBuffer, Server};
use crate::records::{micros, Collector, Outcome, RequestRecord, SessionRecord};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio::time::{sleep, sleep_until, timeout_at, Instant};
use vidbench_library::{content::first_mismatch, Request, Session};

/// Size of the scratch buffer every read goes into.
pub(crate) const SCRATCH_BYTES: usize = 256 * 1024;
/// Response heads longer than this are refused.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What all sessions of a run share. Lives on the event-loop thread.
pub(crate) struct Shared {
    pub server: Server,
    pub run_start: Instant,
    pub receive_buffer: ReceiveBuffer,
    pub timeout_override: Option<f64>,
    pub scratch: RefCell<Box<[u8]>>,
    pub collector: RefCell<Collector>,
    /// Set on Ctrl-C; `interrupt` wakes the sessions waiting on something.
    pub interrupted: Cell<bool>,
    pub interrupt: Notify,
    /// Notified whenever a session ends.
    pub session_done: Notify,
    /// The sessions in play by key, each with whether a population match
    /// has withdrawn it (it stops before its next request).
    /// (A BTreeMap: a match walks it, and which sessions it withdraws must
    /// follow from the seed alone.)
    pub in_play: RefCell<std::collections::BTreeMap<u64, bool>>,
    pub next_key: Cell<u64>,
}

/// Where a session in play comes from, for the record of its failure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    /// Its entry in `Shared::in_play`.
    pub key: u64,
    /// Its place in the session list.
    pub catalogue: usize,
    /// When it would end: its scheduled start plus its whole paced time
    /// (for one joined in progress, of the whole session, not of the part
    /// it plays).
    pub would_end_s: f64,
}

impl Shared {
    fn seconds(&self, t: Instant) -> f64 {
        micros(t.saturating_duration_since(self.run_start).as_secs_f64())
    }
}

/// Why a request failed: the cause that is counted and a message for people.
#[derive(Debug)]
struct Failure {
    cause: Outcome,
    /// General message, the same for every occurrence of the same problem
    /// (used to aggregate errors).
    kind: String,
    /// Specifics of this occurrence, appended in `sessions.csv`.
    specifics: Option<String>,
}

impl Failure {
    fn new(cause: Outcome, kind: impl Into<String>) -> Failure {
        Failure { cause, kind: kind.into(), specifics: None }
    }

    fn with(mut self, specifics: String) -> Failure {
        self.specifics = Some(specifics);
        self
    }

    fn io(doing: &str, e: std::io::Error) -> Failure {
        Failure::new(Outcome::Io, format!("{doing}: {e}"))
    }
}

/// Per-session download rate limiter.
struct Bucket {
    /// Bytes per second; 0 = uncapped.
    rate: f64,
    depth: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate_bps: u64) -> Bucket {
        let rate = rate_bps as f64 / 8.0;
        let depth = (rate * 0.02).clamp(4096.0, SCRATCH_BYTES as f64);
        Bucket { rate, depth, tokens: depth, last: Instant::now() }
    }

    /// Waits until a read of up to `max` bytes is allowed; returns how many.
    async fn acquire(&mut self, max: usize) -> usize {
        if self.rate == 0.0 {
            return max;
        }
        loop {
            let now = Instant::now();
            self.tokens = (self.tokens + (now - self.last).as_secs_f64() * self.rate).min(self.depth);
            self.last = now;
            let want = (max as f64).min(self.depth);
            if self.tokens >= want {
                return (self.tokens as usize).clamp(1, max);
            }
            sleep(Duration::from_secs_f64((want - self.tokens) / self.rate)).await;
        }
    }

    fn spend(&mut self, n: usize) {
        if self.rate != 0.0 {
            self.tokens -= n as f64;
        }
    }
}

/// Reads once (after the rate limiter allows it) at most `max` bytes into the
/// shared scratch buffer and hands them to `consume`. Returns 0 at end of stream.
async fn read_paced<F>(stream: &TcpStream, bucket: &mut Bucket, shared: &Shared, max: usize, mut consume: F) -> Result<usize, Failure>
where
    F: FnMut(&[u8]) -> Result<(), Failure>,
{
    let allowed = bucket.acquire(max.min(SCRATCH_BYTES)).await;
    loop {
        stream.readable().await.map_err(|e| Failure::io("waiting for the response", e))?;
        let mut scratch = shared.scratch.borrow_mut();
        match stream.try_read(&mut scratch[..allowed]) {
            Ok(n) => {
                bucket.spend(n);
                shared.collector.borrow_mut().bytes_received(n as u64);
                consume(&scratch[..n])?;
                return Ok(n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(Failure::io("reading the response", e)),
        }
    }
}

/// What is known about a request in flight (kept when it times out).
#[derive(Default)]
struct InFlight {
    status: Option<u16>,
    first_byte: Option<Instant>,
    bytes: u64,
    /// The server said `Connection: close`: connect again for the next request.
    closing: bool,
}

/// The parts of a response head the client checks.
#[derive(Debug)]
struct Head {
    status: u16,
    len: usize,
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    content_range: Option<String>,
}

fn parse_head(buf: &[u8]) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 48];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Failure::new(Outcome::Protocol, format!("malformed response head: {e}"))),
    };
    let mut head = Head {
        status: response.code.unwrap_or(0),
        len,
        content_length: None,
        chunked: false,
        close: response.version == Some(0),
        content_range: None,
    };
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = value.parse().map_err(|_| {
                Failure::new(Outcome::Protocol, "malformed Content-Length").with(format!("Content-Length {value:?}"))
            })?;
            head.content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked |= value.to_ascii_lowercase().contains("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                head.close = true;
            } else if v.contains("keep-alive") {
                head.close = false;
            }
        } else if h.name.eq_ignore_ascii_case("content-range") {
            head.content_range = Some(value.to_owned());
        }
    }
    Ok(Some(head))
}

/// `bytes FIRST-LAST/TOTAL` -> (FIRST, LAST).
fn parse_content_range(value: &str) -> Option<(u64, u64)> {
    let rest = value.strip_prefix("bytes ")?;
    let (span, _total) = rest.split_once('/')?;
    let (a, b) = span.split_once('-')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

async fn connect(shared: &Shared, rate_bps: u64) -> Result<TcpStream, Failure> {
    let addr = shared.server.addr;
    let fail = |e: std::io::Error| Failure::new(Outcome::Connect, format!("cannot connect to {addr}: {e}"));
    let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(fail)?;
    if let Some(size) = shared.receive_buffer.for_rate(rate_bps) {
        socket.set_recv_buffer_size(size).map_err(fail)?;
    }
    // Requests are single small writes; never hold them back.
    socket.set_nodelay(true).map_err(fail)?;
    socket.connect(addr).await.map_err(fail)
}

fn render_request(out: &mut Vec<u8>, shared: &Shared, req: &Request) {
    use std::io::Write;
    out.clear();
    let _ = write!(
        out,
        "GET {}{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: vidbench-load/{}\r\n",
        shared.server.prefix,
        req.path,
        shared.server.host_header,
        env!("CARGO_PKG_VERSION")
    );
    if let Some((a, b)) = req.range {
        let _ = write!(out, "Range: bytes={a}-{b}\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Scratch state of a session reused across its requests.
struct Connection {
    stream: Option<TcpStream>,
    bucket: Bucket,
    head: Vec<u8>,
    request: Vec<u8>,
    reconnects: u32,
}

/// Sends one request and receives its whole response.
async fn exchange(
    shared: &Shared,
    conn: &mut Connection,
    session: &Session,
    req: &Request,
    file_id: Option<u32>,
    delay: Duration,
    st: &mut InFlight,
) -> Result<(), Failure> {
    if conn.stream.is_none() {
        let stream = connect(shared, session.rate_bps).await?;
        if !delay.is_zero() {
            sleep(delay * 2).await; // SYN and SYN-ACK cross the emulated link
        }
        conn.stream = Some(stream);
    }
    let stream = conn.stream.as_mut().expect("connected above");
    if !delay.is_zero() {
        sleep(delay).await;
    }
    render_request(&mut conn.request, shared, req);
    stream.write_all(&conn.request).await.map_err(|e| Failure::io("sending the request", e))?;

    // The head. Reads are paced like the body: head bytes use the link too.
    conn.head.clear();
    let head = loop {
        let head_buf = &mut conn.head;
        let n = read_paced(stream, &mut conn.bucket, shared, 16 * 1024, |b| {
            head_buf.extend_from_slice(b);
            Ok(())
        })
        .await?;
        if n == 0 {
            return Err(if conn.head.is_empty() {
                Failure::new(Outcome::Io, "the server closed the connection before responding")
            } else {
                Failure::new(Outcome::Protocol, "the server closed the connection inside the response head")
            });
        }
        st.first_byte.get_or_insert_with(Instant::now);
        if let Some(head) = parse_head(&conn.head)? {
            break head;
        }
        if conn.head.len() > MAX_HEAD_BYTES {
            return Err(Failure::new(Outcome::Protocol, "response head longer than 64 KiB"));
        }
    };
    st.status = Some(head.status);
    let expected_status = if req.range.is_some() { 206 } else { 200 };
    if head.status != expected_status {
        return Err(Failure::new(Outcome::Status, format!("status {} where {expected_status} was expected", head.status)));
    }
    if head.chunked {
        return Err(Failure::new(Outcome::Protocol, "chunked transfer encoding is not supported"));
    }
    let body_len = head
        .content_length
        .ok_or_else(|| Failure::new(Outcome::Protocol, "response without Content-Length"))?;
    if let Some(want) = req.expected_len() {
        if body_len < want {
            return Err(Failure::new(Outcome::ShortBody, "Content-Length shorter than the range asked for")
                .with(format!("Content-Length {body_len}, range asks for {want}")));
        }
        if body_len > want {
            return Err(Failure::new(Outcome::Protocol, "Content-Length longer than the range asked for")
                .with(format!("Content-Length {body_len}, range asks for {want}")));
        }
        let (a, b) = req.range.expect("expected_len implies a range");
        match head.content_range.as_deref().map(parse_content_range) {
            Some(Some((ra, rb))) if ra == a && rb == b => {}
            _ => {
                return Err(Failure::new(Outcome::Protocol, "Content-Range does not match the range asked for")
                    .with(format!("Content-Range {:?}, asked for bytes {a}-{b}", head.content_range)))
            }
        }
    }
    st.closing = head.close;

    // The body: count, and verify when asked.
    let start_offset = req.range.map_or(0, |r| r.0);
    let consume = |bytes: &[u8], st: &mut InFlight| -> Result<(), Failure> {
        if bytes.len() as u64 > body_len - st.bytes {
            return Err(Failure::new(Outcome::Protocol, "more bytes than Content-Length before the next request"));
        }
        if let Some(id) = file_id {
            if let Some(at) = first_mismatch(id, start_offset + st.bytes, bytes) {
                return Err(Failure::new(Outcome::Verify, "received bytes differ from the library's content")
                    .with(format!("file id {id} byte {at} differs")));
            }
            shared.collector.borrow_mut().verified_bytes += bytes.len() as u64;
        }
        st.bytes += bytes.len() as u64;
        Ok(())
    };
    let leftover = std::mem::take(&mut conn.head);
    let result = consume(&leftover[head.len..], st);
    conn.head = leftover;
    result?;
    while st.bytes < body_len {
        let remaining = (body_len - st.bytes).min(SCRATCH_BYTES as u64) as usize;
        let n = read_paced(stream, &mut conn.bucket, shared, remaining, |b| consume(b, st)).await?;
        if n == 0 {
            return Err(Failure::new(Outcome::ShortBody, "the server closed the connection inside the body")
                .with(format!("{} of {body_len} body bytes received", st.bytes)));
        }
    }
    Ok(())
}

/// Waits for `at`, or returns false if the run is interrupted first.
pub(crate) async fn wait_until(shared: &Shared, at: Instant) -> bool {
    if shared.interrupted.get() {
        return false;
    }
    tokio::select! {
        _ = sleep_until(at) => true,
        _ = shared.interrupt.notified() => false,
    }
}

/// Plays `session` to its end and records it. `file_ids[i]` is the content id
/// to verify request `i` against, when verifying. It removes its entry in
/// `shared.in_play` when it ends.
pub(crate) async fn play_session(shared: Rc<Shared>, session: Session, file_ids: Vec<Option<u32>>, scheduled_s: f64, origin: Origin) {
    let key = origin.key;
    let start = Instant::now();
    let delay = Duration::from_millis(session.delay_ms as u64);
    let mut conn = Connection {
        stream: None,
        bucket: Bucket::new(session.rate_bps),
        head: Vec::with_capacity(1024),
        request: Vec::with_capacity(256),
        reconnects: 0,
    };
    let mut previous_start: Option<Instant> = None;
    let mut outcome = Outcome::Ok;
    let mut failure: Option<Failure> = None;
    let mut done = 0usize;
    let mut bytes = 0u64;

    for (i, req) in session.requests.iter().enumerate() {
        if let (Some(pace), Some(prev)) = (req.pace_s, previous_start) {
            if !wait_until(&shared, prev + Duration::from_secs_f64(pace)).await {
                outcome = Outcome::Interrupted;
                failure = Some(Failure::new(Outcome::Interrupted, "the run was interrupted"));
                break;
            }
        }
        if shared.interrupted.get() {
            outcome = Outcome::Interrupted;
            failure = Some(Failure::new(Outcome::Interrupted, "the run was interrupted"));
            break;
        }
        if shared.in_play.borrow().get(&key).copied().unwrap_or(false) {
            outcome = Outcome::Withdrawn;
            failure = Some(Failure::new(Outcome::Withdrawn, "withdrawn by a population match (a lower rate)"));
            break;
        }
        let req_start = Instant::now();
        previous_start = Some(req_start);
        shared.collector.borrow_mut().request_started();
        let timeout = shared.timeout_override.unwrap_or(req.timeout_s);
        let deadline = req_start + Duration::from_secs_f64(timeout);
        // The response must be seen (arrival + delay) by the deadline.
        let arrival_deadline = deadline.checked_sub(delay).filter(|d| *d > req_start).unwrap_or(req_start);
        let mut st = InFlight::default();
        let result = {
            let exchange = exchange(&shared, &mut conn, &session, req, file_ids[i], delay, &mut st);
            tokio::select! {
                r = timeout_at(arrival_deadline, exchange) => match r {
                    Ok(r) => r,
                    Err(_) => Err(Failure::new(Outcome::Timeout, format!("no complete response within the {timeout} s deadline"))),
                },
                _ = shared.interrupt.notified() => Err(Failure::new(Outcome::Interrupted, "the run was interrupted")),
            }
        };
        let seen = Instant::now() + delay;
        let record = RequestRecord {
            session: session.id,
            phase: session.phase,
            class: session.class.clone(),
            video: session.video,
            path: req.path.clone(),
            range: req.range.map(|(a, b)| format!("{a}-{b}")).unwrap_or_default(),
            start_s: shared.seconds(req_start),
            first_byte_s: st.first_byte.map(|t| shared.seconds(t + delay)),
            end_s: shared.seconds(seen),
            bytes: st.bytes,
            status: st.status,
            outcome: result.as_ref().err().map_or(Outcome::Ok, |f| f.cause),
        };
        shared.collector.borrow_mut().request_ended(&record);
        bytes += st.bytes;
        match result {
            Ok(()) => {
                done += 1;
                if st.closing {
                    conn.stream = None;
                    conn.reconnects += 1;
                }
                if !delay.is_zero() {
                    sleep_until(seen).await;
                }
            }
            Err(f) => {
                outcome = f.cause;
                failure = Some(f);
                break;
            }
        }
    }
    drop(conn.stream.take());
    let withdrawn = shared.in_play.borrow_mut().remove(&key).unwrap_or(false);
    let detail = failure.as_ref().map_or(String::new(), |f| match &f.specifics {
        Some(s) => format!("{} ({s})", f.kind),
        None => f.kind.clone(),
    });
    let record = SessionRecord {
        session: session.id,
        phase: session.phase,
        class: session.class.clone(),
        video: session.video,
        scheduled_s,
        start_s: shared.seconds(start),
        end_s: shared.seconds(Instant::now()),
        requests_done: done,
        requests_total: session.requests.len(),
        bytes,
        reconnects: conn.reconnects,
        outcome,
        detail,
    };
    let mut collector = shared.collector.borrow_mut();
    // One that failed in the request it was making when withdrawn was
    // leaving anyway: nothing to resume at the next match.
    if outcome.is_failure() && !withdrawn {
        collector.failed_sessions.push(crate::records::FailedSession {
            failed_at_s: record.end_s,
            would_end_s: origin.would_end_s,
            scheduled_s,
            catalogue: origin.catalogue,
        });
    }
    // When the request it ended on was issued (the failing one, for a failure).
    let last_request_s = previous_start.map(|t| shared.seconds(t));
    collector.session_ended(&record, failure.as_ref().map(|f| f.kind.as_str()), last_request_s);
    drop(collector);
    shared.session_done.notify_one();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_heads_and_content_ranges() {
        let raw = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 5-14/100\r\n\r\nbody";
        let head = parse_head(raw).unwrap().unwrap();
        assert_eq!(head.status, 206);
        assert_eq!(head.content_length, Some(10));
        assert!(!head.close);
        assert_eq!(head.len, raw.len() - 4);
        assert_eq!(parse_content_range(head.content_range.as_deref().unwrap()), Some((5, 14)));
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap().is_none());
        assert!(parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap().close);
        let bad = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").unwrap_err();
        assert_eq!(bad.cause, Outcome::Protocol);
        assert_eq!(parse_content_range("bytes */100"), None);
    }

    #[test]
    fn receive_buffer_follows_the_rate() {
        assert_eq!(ReceiveBuffer::Auto.for_rate(0), None);
        assert_eq!(ReceiveBuffer::Auto.for_rate(1_000_000), Some(ReceiveBuffer::AUTO_MIN));
        assert_eq!(ReceiveBuffer::Auto.for_rate(10_000_000), Some(125_000));
        assert_eq!(ReceiveBuffer::Auto.for_rate(1_000_000_000), Some(ReceiveBuffer::AUTO_MAX));
        assert_eq!(ReceiveBuffer::Bytes(4096).for_rate(0), Some(4096));
    }
}
