//! Reading and writing session files and warming lists.
//!
//! Two session formats, both read back by the load client:
//!
//! * **JSON lines** (`sessions.jsonl`): one [`Session`] per line, serde, the full
//!   detail. Blank lines are skipped.
//! * **wsesslog** (`sessions.wsesslog`): httperf's session log as extended by the
//!   videoperf client of paper 003's group. A session is a run of request lines;
//!   sessions are separated by blank lines. A request line is a URL path followed by
//!   `key=value` attributes: `timeout=S` (whole-response deadline), `pace_time=S`
//!   (start-to-start pacing; `pacing=` is accepted as in paper 003 Figure 5),
//!   `headers='Range: bytes=A-B'` (or `range=A-B`), `method=GET`. What httperf has no
//!   attribute for (class, bandwidth, delay, phase, video, content ids) is carried in
//!   a comment right before the session:
//!   `# session id=3 phase=measure class=dsl rate_bps=3500000 delay_ms=50 video=17 file_id=17`.
//!   Any other comment is ignored, so a log written by another tool (no such
//!   comments) still parses: see [`WSESSLOG_DEFAULTS`].
//!
//! A warming list (`warm.txt`) names the byte ranges to read into the page cache
//! before a run, one `PATH FIRST-LAST` per line, most popular first.
//!
//! Every reader reports malformed input as `file:line: what is wrong`.

use crate::session::{Phase, Request, Session};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// What a wsesslog without `# session` comments gets: the documented defaults.
pub const WSESSLOG_DEFAULTS: &str = "class=default rate_bps=0 (uncapped) delay_ms=0 phase=measure \
     timeout=10 s, no pacing, video = index of the session's path among the log's distinct first paths";

/// Deadline given to a wsesslog request that has no `timeout=` attribute (paper 003's 10 s).
pub const DEFAULT_TIMEOUT_S: f64 = 10.0;

/// Why a session file or warming list could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionIoError {
    #[error("cannot {action} {path}: {error}")]
    Io { action: &'static str, path: PathBuf, error: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Malformed { path: PathBuf, line: usize, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The two session file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionFormat {
    JsonLines,
    Wsesslog,
}

impl SessionFormat {
    /// Guesses the format: by extension (`.jsonl`, `.ndjson`, `.json` are JSON
    /// lines; `.wsesslog`, `.log` are wsesslog), otherwise by the first character
    /// that is not blank and not in a `#` comment (`{` means JSON lines).
    pub fn detect(path: &Path, text: &str) -> SessionFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "ndjson" | "json") => return SessionFormat::JsonLines,
            Some("wsesslog" | "log") => return SessionFormat::Wsesslog,
            _ => {}
        }
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        match first {
            Some(l) if l.starts_with('{') => SessionFormat::JsonLines,
            _ => SessionFormat::Wsesslog,
        }
    }
}

/// Reads a session file in either format (see [`SessionFormat::detect`]).
pub fn read_sessions(path: &Path) -> Result<Vec<Session>, SessionIoError> {
    let text = read_text(path)?;
    match SessionFormat::detect(path, &text) {
        SessionFormat::JsonLines => parse_jsonl(&text, path),
        SessionFormat::Wsesslog => parse_wsesslog(&text, path),
    }
}

/// Writes sessions to `path` in `format`, through a buffered writer.
pub fn write_sessions(path: &Path, format: SessionFormat, sessions: &[Session]) -> Result<(), SessionIoError> {
    let io = |error| SessionIoError::Io { action: "write", path: path.to_owned(), error };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = BufWriter::new(file);
    match format {
        SessionFormat::JsonLines => write_jsonl(&mut out, sessions),
        SessionFormat::Wsesslog => write_wsesslog(&mut out, sessions),
    }
    .and_then(|()| out.flush())
    .map_err(io)
}

fn read_text(path: &Path) -> Result<String, SessionIoError> {
    std::fs::read_to_string(path).map_err(|error| SessionIoError::Io { action: "read", path: path.to_owned(), error })
}

// ---------------------------------------------------------------- JSON lines

/// Writes one JSON object per session, one per line.
pub(crate) fn write_jsonl(out: &mut impl Write, sessions: &[Session]) -> std::io::Result<()> {
    for s in sessions {
        serde_json::to_writer(&mut *out, s).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Parses JSON lines; `origin` names the file in errors.
pub(crate) fn parse_jsonl(text: &str, origin: &Path) -> Result<Vec<Session>, SessionIoError> {
    let mut sessions = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let malformed = |message: String| SessionIoError::Malformed { path: origin.to_owned(), line: line_no, message };
        let session: Session =
            serde_json::from_str(line).map_err(|e| malformed(format!("not a valid session: {e}")))?;
        check_session(&session).map_err(malformed)?;
        sessions.push(session);
    }
    Ok(sessions)
}

// ---------------------------------------------------------------- wsesslog

/// Writes the wsesslog form: a `# session` comment, the request lines, a blank line.
pub(crate) fn write_wsesslog(out: &mut impl Write, sessions: &[Session]) -> std::io::Result<()> {
    writeln!(out, "# vidbench sessions: httperf wsesslog with videoperf extensions (pace_time, timeout, headers)")?;
    writeln!(out, "# '# session' comments carry what httperf has no attribute for; other tools ignore them")?;
    writeln!(out)?;
    let mut line = String::new();
    for s in sessions {
        line.clear();
        write!(
            line,
            "# session id={} phase={} class={} rate_bps={} delay_ms={} video={}",
            s.id,
            phase_name(s.phase),
            s.class,
            s.rate_bps,
            s.delay_ms,
            s.video
        )
        .unwrap();
        let ids: Vec<Option<u32>> = s.requests.iter().map(|r| r.file_id).collect();
        if ids.iter().all(|id| id.is_some()) {
            if ids.windows(2).all(|w| w[0] == w[1]) {
                write!(line, " file_id={}", ids[0].unwrap()).unwrap();
            } else {
                let list: Vec<String> = ids.iter().map(|id| id.unwrap().to_string()).collect();
                write!(line, " file_ids={}", list.join(",")).unwrap();
            }
        }
        writeln!(out, "{line}")?;
        for r in &s.requests {
            line.clear();
            line.push_str(&r.path);
            if let Some(p) = r.pace_s {
                write!(line, " pace_time={p}").unwrap();
            }
            write!(line, " timeout={}", r.timeout_s).unwrap();
            if let Some((a, b)) = r.range {
                write!(line, " headers='Range: bytes={a}-{b}'").unwrap();
            }
            writeln!(out, "{line}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::RampUp => "ramp-up",
        Phase::Measure => "measure",
        Phase::RampDown => "ramp-down",
    }
}

/// Metadata from a `# session` comment, still to be matched with its requests.
#[derive(Default)]
struct SessionComment {
    line: usize,
    id: Option<u64>,
    phase: Option<Phase>,
    class: Option<String>,
    rate_bps: Option<u64>,
    delay_ms: Option<u32>,
    video: Option<u32>,
    file_ids: Option<FileIds>,
}

enum FileIds {
    Same(u32),
    List(Vec<u32>),
}

/// Parses a wsesslog; `origin` names the file in errors.
pub(crate) fn parse_wsesslog(text: &str, origin: &Path) -> Result<Vec<Session>, SessionIoError> {
    let malformed =
        |line: usize, message: String| SessionIoError::Malformed { path: origin.to_owned(), line, message };
    let mut sessions: Vec<Session> = Vec::new();
    let mut video_of_path: HashMap<String, u32> = HashMap::new();
    let mut pending: Option<SessionComment> = None;
    let mut current: Vec<Request> = Vec::new();
    let mut current_meta: Option<SessionComment> = None;
    let mut first_line = 0usize;

    let mut finish = |requests: &mut Vec<Request>,
                      meta: Option<SessionComment>,
                      first_line: usize,
                      sessions: &mut Vec<Session>|
     -> Result<(), SessionIoError> {
        if requests.is_empty() {
            return Ok(());
        }
        let meta = meta.unwrap_or_default();
        let mut requests = std::mem::take(requests);
        match meta.file_ids {
            Some(FileIds::Same(id)) => requests.iter_mut().for_each(|r| r.file_id = Some(id)),
            Some(FileIds::List(ids)) => {
                if ids.len() != requests.len() {
                    return Err(malformed(
                        meta.line,
                        format!("file_ids lists {} ids but the session has {} requests", ids.len(), requests.len()),
                    ));
                }
                requests.iter_mut().zip(ids).for_each(|(r, id)| r.file_id = Some(id));
            }
            None => {}
        }
        let next = video_of_path.len() as u32;
        let video = match meta.video {
            Some(v) => v,
            None => *video_of_path.entry(requests[0].path.clone()).or_insert(next),
        };
        let session = Session {
            id: meta.id.unwrap_or(sessions.len() as u64),
            phase: meta.phase.unwrap_or_default(),
            class: meta.class.unwrap_or_else(|| "default".into()),
            rate_bps: meta.rate_bps.unwrap_or(0),
            delay_ms: meta.delay_ms.unwrap_or(0),
            video,
            requests,
        };
        check_session(&session).map_err(|m| malformed(first_line, m))?;
        sessions.push(session);
        Ok(())
    };

    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        if line.is_empty() {
            finish(&mut current, current_meta.take(), first_line, &mut sessions)?;
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim_start();
            // Only `# session key=value ...` is metadata; `# session 1: ...` is prose.
            let metadata = comment
                .strip_prefix("session ")
                .filter(|rest| rest.split_whitespace().next().is_some_and(|t| t.contains('=')));
            if let Some(rest) = metadata {
                // A metadata comment starts a new session even without a blank line.
                finish(&mut current, current_meta.take(), first_line, &mut sessions)?;
                pending = Some(parse_session_comment(rest, line_no).map_err(|m| malformed(line_no, m))?);
            }
            continue;
        }
        if current.is_empty() {
            first_line = line_no;
            current_meta = pending.take();
        }
        current.push(parse_request_line(line).map_err(|m| malformed(line_no, m))?);
    }
    finish(&mut current, current_meta.take(), first_line, &mut sessions)?;
    if let Some(meta) = pending {
        return Err(malformed(meta.line, "a '# session' comment is not followed by any request".into()));
    }
    Ok(sessions)
}

fn parse_session_comment(rest: &str, line: usize) -> Result<SessionComment, String> {
    let mut meta = SessionComment { line, ..Default::default() };
    for token in rest.split_whitespace() {
        let (key, value) = token
            .split_once('=')
            .ok_or_else(|| format!("session comment: {token:?} is not key=value"))?;
        let bad = |what: &str| format!("session comment: {key}={value:?} is not {what}");
        match key {
            "id" => meta.id = Some(value.parse().map_err(|_| bad("a session number"))?),
            "phase" => {
                meta.phase = Some(match value {
                    "ramp-up" => Phase::RampUp,
                    "measure" => Phase::Measure,
                    "ramp-down" => Phase::RampDown,
                    _ => return Err(bad("ramp-up, measure or ramp-down")),
                })
            }
            "class" => meta.class = Some(value.to_owned()),
            "rate_bps" => meta.rate_bps = Some(value.parse().map_err(|_| bad("a rate in bit/s"))?),
            "delay_ms" => meta.delay_ms = Some(value.parse().map_err(|_| bad("a delay in ms"))?),
            "video" => meta.video = Some(value.parse().map_err(|_| bad("a video index"))?),
            "file_id" => meta.file_ids = Some(FileIds::Same(value.parse().map_err(|_| bad("a file id"))?)),
            "file_ids" => {
                let ids: Result<Vec<u32>, _> = value.split(',').map(str::parse).collect();
                meta.file_ids = Some(FileIds::List(ids.map_err(|_| bad("a comma-separated list of file ids"))?));
            }
            _ => return Err(format!("session comment: unknown key {key:?}")),
        }
    }
    Ok(meta)
}

/// Splits a request line into whitespace-separated tokens; a value may be
/// quoted with `'` or `"` (and then hold spaces), `\` escapes the next character.
fn tokenize(line: &str) -> Result<Vec<String>, String> {
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut in_token = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\\') => {
                let next = chars.next().ok_or("line ends with a lone backslash")?;
                // httperf-style escapes inside header values.
                match next {
                    'r' => token.push('\r'),
                    'n' => token.push('\n'),
                    other => token.push(other),
                }
                in_token = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => token.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_token = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_token {
                    tokens.push(std::mem::take(&mut token));
                    in_token = false;
                }
            }
            (None, c) => {
                token.push(c);
                in_token = true;
            }
        }
    }
    if let Some(q) = quote {
        return Err(format!("unterminated {q} quote"));
    }
    if in_token {
        tokens.push(token);
    }
    Ok(tokens)
}

fn parse_seconds(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{key}={value:?} is not a number of seconds >= 0")),
    }
}

fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("byte range {text:?} is not FIRST-LAST with FIRST <= LAST");
    let (a, b) = text.trim().split_once('-').ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

fn parse_request_line(line: &str) -> Result<Request, String> {
    let tokens = tokenize(line)?;
    let (path, attributes) = tokens.split_first().ok_or("empty request line")?;
    if path.contains('=') {
        return Err(format!("a request line starts with the URL path, not {path:?}"));
    }
    let path = if path.starts_with('/') { path.clone() } else { format!("/{path}") };
    let mut request = Request { path, range: None, file_id: None, pace_s: None, timeout_s: DEFAULT_TIMEOUT_S };
    for attribute in attributes {
        let (key, value) =
            attribute.split_once('=').ok_or_else(|| format!("attribute {attribute:?} is not key=value"))?;
        match key {
            "timeout" => {
                request.timeout_s = parse_seconds(key, value)?;
                if request.timeout_s == 0.0 {
                    return Err("timeout=0: a request needs a deadline > 0".into());
                }
            }
            "pace_time" | "pacing" => request.pace_s = Some(parse_seconds(key, value)?),
            "range" => request.range = Some(parse_range(value)?),
            "method" if value.eq_ignore_ascii_case("GET") => {}
            "method" => return Err(format!("method={value}: only GET requests can be replayed")),
            "headers" => {
                for header in value.split(['\r', '\n']).map(str::trim).filter(|h| !h.is_empty()) {
                    let (name, field) =
                        header.split_once(':').ok_or_else(|| format!("header {header:?} is not Name: value"))?;
                    if name.trim().eq_ignore_ascii_case("range") {
                        let spec = field.trim();
                        let bytes = spec
                            .strip_prefix("bytes=")
                            .ok_or_else(|| format!("Range header {spec:?} does not start with bytes="))?;
                        request.range = Some(parse_range(bytes)?);
                    } else if !name.trim().eq_ignore_ascii_case("host") {
                        return Err(format!("header {:?} cannot be replayed (only Range and Host are)", name.trim()));
                    }
                }
            }
            "think" => {
                return Err("think= (httperf think time after a burst) is not supported: use pace_time= (start to start)".into())
            }
            _ => return Err(format!("unknown attribute {key:?} (known: timeout, pace_time, headers, range, method)")),
        }
    }
    Ok(request)
}

/// Checks what every consumer of a session relies on.
fn check_session(s: &Session) -> Result<(), String> {
    if s.requests.is_empty() {
        return Err(format!("session {} has no requests", s.id));
    }
    if s.class.is_empty() || s.class.contains(char::is_whitespace) {
        return Err(format!("session {}: class {:?} must be one word", s.id, s.class));
    }
    for (i, r) in s.requests.iter().enumerate() {
        let at = format!("session {} request {i}", s.id);
        if !r.path.starts_with('/') || r.path.contains(char::is_whitespace) {
            return Err(format!("{at}: path {:?} must start with / and hold no spaces", r.path));
        }
        if let Some((a, b)) = r.range {
            if a > b {
                return Err(format!("{at}: range {a}-{b} is empty"));
            }
        }
        if !(r.timeout_s.is_finite() && r.timeout_s > 0.0) {
            return Err(format!("{at}: timeout_s must be > 0"));
        }
        if let Some(p) = r.pace_s {
            if !(p.is_finite() && p >= 0.0) {
                return Err(format!("{at}: pace_s must be >= 0"));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- warming list

/// One byte range to read into the cache before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmRange {
    /// URL path, starting with `/` (the manifest path with a leading slash).
    pub path: String,
    /// Inclusive byte range.
    pub range: (u64, u64),
}

/// Writes a warming list: a comment header, then `PATH FIRST-LAST` lines.
pub fn write_warm_list(path: &Path, header: &str, ranges: &[WarmRange]) -> Result<(), SessionIoError> {
    let io = |error| SessionIoError::Io { action: "write", path: path.to_owned(), error };
    let mut out = BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let mut write = || -> std::io::Result<()> {
        for line in header.lines() {
            writeln!(out, "# {line}")?;
        }
        for r in ranges {
            writeln!(out, "{} {}-{}", r.path, r.range.0, r.range.1)?;
        }
        out.flush()
    };
    write().map_err(io)
}

/// Reads a warming list; `#` comments and blank lines are skipped.
pub fn read_warm_list(path: &Path) -> Result<Vec<WarmRange>, SessionIoError> {
    let text = read_text(path)?;
    let mut ranges = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let malformed = |message: String| SessionIoError::Malformed { path: path.to_owned(), line: index + 1, message };
        let mut fields = line.split_whitespace();
        let (Some(file), Some(range), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(malformed(format!("expected 'PATH FIRST-LAST', got {line:?}")));
        };
        if !file.starts_with('/') {
            return Err(malformed(format!("path {file:?} must start with /")));
        }
        ranges.push(WarmRange { path: file.to_owned(), range: parse_range(range).map_err(malformed)? });
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_sessions() -> Vec<Session> {
        let req = |path: &str, range, file_id, pace_s| Request { path: path.into(), range, file_id, pace_s, timeout_s: 10.0 };
        vec![
            Session {
                id: 0,
                phase: Phase::RampUp,
                class: "cable".into(),
                rate_bps: 10_000_000,
                delay_ms: 50,
                video: 17,
                requests: vec![
                    req("/v/00017.mp4", Some((0, 523_749)), Some(17), None),
                    req("/v/00017.mp4", Some((523_750, 1_047_499)), Some(17), None),
                    req("/v/00017.mp4", Some((1_047_500, 1_100_000)), Some(17), Some(10.0)),
                ],
            },
            Session {
                id: 1,
                phase: Phase::Measure,
                class: "dsl".into(),
                rate_bps: 3_500_000,
                delay_ms: 50,
                video: 3,
                requests: vec![
                    req("/v/00003/0000.ts", None, Some(40), None),
                    Request { timeout_s: 2.5, ..req("/v/00003/0001.ts", None, Some(41), Some(0.1 + 0.2)) },
                ],
            },
            Session {
                id: 2,
                phase: Phase::RampDown,
                class: "medium".into(),
                rate_bps: 1_000_000,
                delay_ms: 0,
                video: 9,
                requests: vec![req("/x", None, None, None)],
            },
        ]
    }

    #[test]
    fn jsonl_round_trips() {
        let sessions = sample_sessions();
        let mut buf = Vec::new();
        write_jsonl(&mut buf, &sessions).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert_eq!(parse_jsonl(&text, Path::new("s.jsonl")).unwrap(), sessions);
    }

    #[test]
    fn wsesslog_round_trips_exactly() {
        let sessions = sample_sessions();
        let mut buf = Vec::new();
        write_wsesslog(&mut buf, &sessions).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.contains("/v/00017.mp4 pace_time=10 timeout=10 headers='Range: bytes=1047500-1100000'"), "{text}");
        assert!(text.contains("# session id=1 phase=measure class=dsl rate_bps=3500000 delay_ms=50 video=3 file_ids=40,41"));
        assert_eq!(parse_wsesslog(&text, Path::new("s.wsesslog")).unwrap(), sessions);
    }

    #[test]
    fn files_round_trip_and_format_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = sample_sessions();
        for (name, format) in [("a.jsonl", SessionFormat::JsonLines), ("b.wsesslog", SessionFormat::Wsesslog)] {
            let path = dir.path().join(name);
            write_sessions(&path, format, &sessions).unwrap();
            assert_eq!(read_sessions(&path).unwrap(), sessions);
            // Content sniffing when the extension says nothing.
            let other = dir.path().join(format!("{name}.txt"));
            std::fs::copy(&path, &other).unwrap();
            assert_eq!(SessionFormat::detect(&other, &std::fs::read_to_string(&other).unwrap()), format);
            assert_eq!(read_sessions(&other).unwrap(), sessions);
        }
    }

    #[test]
    fn reads_a_plain_httperf_log_with_defaults() {
        // Written by hand the way paper 003 Figure 5 and httperf users write them.
        let text = "\
# Session 1: 4 chunks with pacing
vid01/secs-0-9 timeout=10
vid01/secs-10-19 timeout=10
vid01/secs-20-29 timeout=10 pacing=10
vid01/secs-30-39 timeout=10 pacing=10

# Session 2: range requests, httperf header syntax
/vid02 method=GET headers=\"Range: bytes=0-524287\\r\\nHost: example\"
/vid02 range=524288-1048575 timeout=5.5


/vid01/secs-0-9
";
        let sessions = parse_wsesslog(text, Path::new("other.log")).unwrap();
        assert_eq!(sessions.len(), 3);
        let s = &sessions[0];
        assert_eq!((s.id, s.phase, s.class.as_str(), s.rate_bps, s.delay_ms, s.video), (0, Phase::Measure, "default", 0, 0, 0));
        assert_eq!(s.requests.len(), 4);
        assert_eq!(s.requests[0].path, "/vid01/secs-0-9");
        assert_eq!(s.requests[0].pace_s, None);
        assert_eq!(s.requests[2].pace_s, Some(10.0));
        assert_eq!(s.requests[3].file_id, None);
        let s = &sessions[1];
        assert_eq!((s.id, s.video), (1, 1));
        assert_eq!(s.requests[0].range, Some((0, 524_287)));
        assert_eq!(s.requests[0].timeout_s, DEFAULT_TIMEOUT_S);
        assert_eq!(s.requests[1].range, Some((524_288, 1_048_575)));
        assert_eq!(s.requests[1].timeout_s, 5.5);
        // Same first path as session 0: same video index.
        assert_eq!((sessions[2].id, sessions[2].video), (2, 0));
    }

    #[test]
    fn malformed_lines_are_named_by_file_and_line() {
        let cases: &[(&str, usize, &str)] = &[
            ("/a timeout=10\n/b timeout=x\n", 2, "timeout"),
            ("/a\n\n/b bogus=1\n", 3, "unknown attribute \"bogus\""),
            ("/a headers='Range: bytes=9-1'\n", 1, "FIRST <= LAST"),
            ("/a headers='Cookie: x'\n", 1, "Cookie"),
            ("/a headers='Range: bytes=1-2\n", 1, "unterminated"),
            ("/a method=POST\n", 1, "only GET"),
            ("/a think=2\n", 1, "pace_time"),
            ("/a pace_time=-1\n", 1, "pace_time"),
            ("/a timeout=0\n", 1, "deadline"),
            ("# session id=1 phase=warmup\n/a\n", 1, "ramp-up, measure or ramp-down"),
            ("# session id=1 colour=red\n/a\n", 1, "unknown key \"colour\""),
            ("# session id=1 file_ids=1,2\n/a\n", 1, "2 ids but the session has 1"),
            ("/a\n\n# session id=4\n", 3, "not followed by any request"),
        ];
        for (text, line, want) in cases {
            let err = parse_wsesslog(text, Path::new("bad.wsesslog")).unwrap_err().to_string();
            assert!(err.starts_with(&format!("bad.wsesslog:{line}: ")), "{text:?}: {err}");
            assert!(err.contains(want), "{text:?}: {err} should mention {want:?}");
        }
        let jsonl = "{\"id\":0,\"class\":\"c\",\"rate_bps\":0,\"delay_ms\":0,\"video\":0,\"requests\":[{\"path\":\"/a\",\"timeout_s\":10}]}\n\n{\"id\":1}\n";
        let err = parse_jsonl(jsonl, Path::new("s.jsonl")).unwrap_err().to_string();
        assert!(err.starts_with("s.jsonl:3: "), "{err}");
        let no_requests = "{\"id\":0,\"class\":\"c\",\"rate_bps\":0,\"delay_ms\":0,\"video\":0,\"requests\":[]}";
        let err = parse_jsonl(no_requests, Path::new("s.jsonl")).unwrap_err().to_string();
        assert!(err.contains("s.jsonl:1: session 0 has no requests"), "{err}");
        let err = read_sessions(Path::new("/nonexistent/s.jsonl")).unwrap_err().to_string();
        assert!(err.contains("cannot read /nonexistent/s.jsonl"), "{err}");
    }

    #[test]
    fn warm_list_round_trips_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warm.txt");
        let ranges = vec![
            WarmRange { path: "/v/00001.mp4".into(), range: (0, 523_749) },
            WarmRange { path: "/v/00001.mp4".into(), range: (523_750, 1_047_499) },
        ];
        write_warm_list(&path, "most popular first\nsecond line", &ranges).unwrap();
        assert_eq!(read_warm_list(&path).unwrap(), ranges);
        std::fs::write(&path, "# c\n/v/1 0-9\nv/2 0-9\n").unwrap();
        let err = read_warm_list(&path).unwrap_err().to_string();
        assert!(err.ends_with("warm.txt:3: path \"v/2\" must start with /"), "{err}");
    }
}
