//! A small HTTP/1.1 file server for the load client's tests, with behaviour
//! chosen per request by query parameters on the path:
//!
//! - `id=N` content id (default 1), `size=N` file size (default 1 MiB): the
//!   body is `vidbench_library::content` of that file, ranges give 206;
//! - `status=N`: answer N with an empty body;
//! - `head_delay_ms=N`: wait before the response head;
//! - `slow_bps=N`: write the body at about N bytes/s;
//! - `close_after=N`: send N body bytes, then close the connection;
//! - `corrupt=OFF`: flip the byte at file offset OFF;
//! - `sndbuf=N`: set the connection's SO_SNDBUF to N (as nginx's
//!   `listen ... sndbuf=` does); otherwise Linux autotunes it up to
//!   `net.ipv4.tcp_wmem`'s maximum (4 MiB), which holds a whole test body.
//!
//! One thread per connection, keep-alive. The server records when it started
//! and finished writing each body (to see flow control from the server side),
//! and can stop listening after a number of connections (to make later
//! connects fail).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vidbench_library::content;

#[derive(Debug, Clone)]
pub struct Served {
    pub path: String,
    pub bytes: u64,
    pub write_started: Instant,
    pub write_finished: Instant,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub served: Arc<Mutex<Vec<Served>>>,
}

impl TestServer {
    pub fn start() -> TestServer {
        Self::start_with_accept_limit(None)
    }

    /// Stops listening after `limit` connections (later connects are refused).
    pub fn start_with_accept_limit(limit: Option<usize>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let log = served.clone();
        std::thread::spawn(move || {
            let mut accepted = 0;
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let log = log.clone();
                std::thread::spawn(move || serve(conn, log));
                accepted += 1;
                if limit == Some(accepted) {
                    break; // drops the listener
                }
            }
        });
        TestServer { addr, served }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn serve(mut conn: TcpStream, log: Arc<Mutex<Vec<Served>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Read one request head.
        let (path, range, used) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
                let path = req.path.unwrap_or("/").to_owned();
                let range = req
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("range"))
                    .and_then(|h| std::str::from_utf8(h.value).ok())
                    .and_then(|v| v.strip_prefix("bytes="))
                    .and_then(|v| v.split_once('-'))
                    .map(|(a, b)| (a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
                break (path, range, n);
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        buf.drain(..used);
        if respond(&mut conn, &path, range, &log).is_err() {
            return;
        }
    }
}

fn respond(conn: &mut TcpStream, path: &str, range: Option<(u64, u64)>, log: &Mutex<Vec<Served>>) -> std::io::Result<()> {
    let params: HashMap<&str, u64> = path
        .split_once('?')
        .map(|(_, q)| q.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k, v.parse().unwrap())).collect())
        .unwrap_or_default();
    let get = |k: &str| params.get(k).copied();
    if let Some(bytes) = get("sndbuf") {
        use std::os::fd::AsRawFd;
        let size = bytes as libc::c_int;
        // SAFETY: setsockopt reads `size` for the given length.
        let rc = unsafe {
            libc::setsockopt(
                conn.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt SO_SNDBUF");
    }
    if let Some(ms) = get("head_delay_ms") {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(status) = get("status") {
        return conn.write_all(format!("HTTP/1.1 {status} Forced\r\nContent-Length: 0\r\n\r\n").as_bytes());
    }
    let id = get("id").unwrap_or(1) as u32;
    let size = get("size").unwrap_or(1 << 20);
    let (first, last, head) = match range {
        Some((a, b)) => {
            let b = b.min(size - 1);
            (a, b, format!("HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {a}-{b}/{size}\r\n\r\n", b - a + 1))
        }
        None => (0, size - 1, format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n")),
    };
    conn.write_all(head.as_bytes())?;
    let limit = get("close_after").unwrap_or(u64::MAX);
    let write_started = Instant::now();
    let mut offset = first;
    let mut sent = 0u64;
    let mut block = vec![0u8; 64 * 1024];
    let piece = if get("slow_bps").is_some() { 4096 } else { block.len() as u64 };
    while offset <= last && sent < limit {
        let n = (last + 1 - offset).min(piece).min(limit - sent) as usize;
        content::fill(id, offset, &mut block[..n]);
        if let Some(bad) = get("corrupt") {
            if bad >= offset && bad < offset + n as u64 {
                block[(bad - offset) as usize] ^= 0xff;
            }
        }
        conn.write_all(&block[..n])?;
        if let Some(bps) = get("slow_bps") {
            std::thread::sleep(Duration::from_secs_f64(n as f64 / bps as f64));
        }
        offset += n as u64;
        sent += n as u64;
    }
    log.lock().unwrap().push(Served { path: path.to_owned(), bytes: sent, write_started, write_finished: Instant::now() });
    if sent < last + 1 - first {
        conn.shutdown(std::net::Shutdown::Both)?;
        return Err(std::io::Error::other("closed on purpose"));
    }
    Ok(())
}
