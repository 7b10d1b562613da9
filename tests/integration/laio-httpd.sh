#!/usr/bin/env bash
# laio-httpd, the HTTP server on liblaio, with both back ends (lazy, eager):
# whole files, single ranges (first-last, open, suffix, past the end),
# HEAD, keep-alive with several and pipelined requests, every byte checked;
# malformed, oversized, unsupported and escaping requests answered with the
# right status and the connection closed; a head sent a byte at a time; a
# client that leaves in the middle of a body; 200 concurrent connections;
# idle keep-alive connections cut after the timeout; a bad configuration
# refused naming file and line; workers run as www-data; SIGTERM stops
# master and workers, each printing its counters, in which the receives of
# idle connections went to the background. Needs root (user switch,
# drop_caches).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${LIBCEPTION_BUILD:-$PWD/build}
HTTPD=$BUILD/bin/laio-httpd

if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (user switch, drop_caches)"; exit 77; fi
[ -x "$HTTPD" ] || { echo "FAIL: $HTTPD not built (run make)"; exit 1; }
id www-data >/dev/null 2>&1 || { echo "FAIL: user www-data missing (scripts/bootstrap installs nginx, which adds it)"; exit 1; }

T=$(mktemp -d /tmp/laio-httpd.XXXXXX)
chmod 755 "$T"
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$T/err.log" ] && tail -20 "$T/err.log"; exit 1; }

mkdir -p "$T/root/v/a" "$T/root/secret"
head -c 3000001 /dev/urandom > "$T/root/v/a/big.mp4"
head -c 1000 /dev/urandom > "$T/root/v/small.mp4"
: > "$T/root/v/empty.mp4"
echo "not for you" > "$T/root/secret/x"
chmod 700 "$T/root/secret"
chmod -R a+rX "$T/root/v"
echo "outside the docroot" > "$T/outside"

# A bad configuration names its file and line.
printf 'docroot = %s\nworkers = many\n' "$T/root" > "$T/bad.conf"
if "$HTTPD" -f "$T/bad.conf" -t 2> "$T/bad.err"; then fail "a bad workers value was accepted"; fi
grep -q "bad.conf:2: bad value \"many\" for workers" "$T/bad.err" || fail "bad config error: $(cat "$T/bad.err")"
printf 'docroot = %s\ncolour = red\n' "$T/root" > "$T/bad.conf"
if "$HTTPD" -f "$T/bad.conf" -t 2> "$T/bad.err"; then fail "an unknown key was accepted"; fi
grep -q "bad.conf:2: unknown setting \"colour\"" "$T/bad.err" || fail "unknown key error: $(cat "$T/bad.err")"
if "$HTTPD" -l 127.0.0.1:18090 2> "$T/bad.err"; then fail "no docroot was accepted"; fi
grep -q "no document root" "$T/bad.err" || fail "missing docroot error: $(cat "$T/bad.err")"

port=18090
for backend in lazy eager; do
  : > "$T/err.log"
  chown www-data "$T/err.log"
  cat > "$T/httpd.conf" <<EOF
# laio-httpd test configuration
docroot = $T/root
listen = 127.0.0.1:$port
workers = 2
user = www-data
keepalive_timeout = 2
buffer_kb = 64
backend = $backend
error_log = $T/err.log
pid_file = $T/httpd.pid
EOF
  "$HTTPD" -f "$T/httpd.conf" -t > /dev/null || fail "-t refused a good configuration"
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$HTTPD" -f "$T/httpd.conf" &
  pid=$!
  for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    sleep 0.1
  done
  [ "$(cat "$T/httpd.pid")" = "$pid" ] || fail "pid file holds $(cat "$T/httpd.pid"), not $pid"
  [ "$(ps -o user= --ppid "$pid" | sort -u | tr -d ' ')" = www-data ] || fail "workers do not run as www-data"

  python3 - "$T/root" "$port" <<'EOF' || fail "client checks ($backend back end)"
import os, random, socket, sys, threading, time
root, port = sys.argv[1], int(sys.argv[2])
big = open(os.path.join(root, "v/a/big.mp4"), "rb").read()
small = open(os.path.join(root, "v/small.mp4"), "rb").read()

def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s, s.makefile("rb")

def response(f):
    status_line = f.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    status = int(status_line.split()[1])
    headers = {}
    while True:
        line = f.readline()
        assert line.endswith(b"\r\n"), line
        if line == b"\r\n":
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return status, headers

def body(f, headers, head=False):
    n = int(headers["content-length"])
    return b"" if head else f.read(n)

def closed(s, f):
    s.settimeout(5)
    return f.read(1) == b""

def get(path, rng=None, extra="", method="GET"):
    s, f = conn()
    req = f"{method} {path} HTTP/1.1\r\nHost: t\r\n" + (f"Range: {rng}\r\n" if rng else "") + extra + "Connection: close\r\n\r\n"
    s.sendall(req.encode())
    st, h = response(f)
    b = body(f, h, method == "HEAD")
    s.close()
    return st, h, b

# Whole files and ranges, bytes checked.
st, h, b = get("/v/a/big.mp4")
assert st == 200 and b == big and h["accept-ranges"] == "bytes", (st, len(b))
st, h, b = get("/v/empty.mp4")
assert st == 200 and b == b"" and h["content-length"] == "0"
for first, last in [(0, 0), (0, 524287), (524288, 1048575), (2999999, 3000000), (12345, 2000000)]:
    st, h, b = get("/v/a/big.mp4", f"bytes={first}-{last}")
    assert st == 206 and b == big[first:last + 1], (first, last, st, len(b))
    assert h["content-range"] == f"bytes {first}-{last}/{len(big)}", h
st, h, b = get("/v/a/big.mp4", "bytes=2990000-")
assert st == 206 and b == big[2990000:] and h["content-range"] == f"bytes 2990000-3000000/{len(big)}"
st, h, b = get("/v/a/big.mp4", "bytes=-100")
assert st == 206 and b == big[-100:]
st, h, b = get("/v/a/big.mp4", "bytes=2999000-9999999")
assert st == 206 and b == big[2999000:]
st, h, b = get("/v/a/big.mp4", "bytes=3000001-3000005")
assert st == 416 and h["content-range"] == f"bytes */{len(big)}", (st, h)
st, h, b = get("/v/a/big.mp4", "bytes=0-1,5-6")
assert st == 200 and b == big, "several ranges serve the whole file"
st, h, b = get("/v/a/big.mp4", method="HEAD")
assert st == 200 and h["content-length"] == str(len(big)) and b == b""
for path, want in [("/nope", 404), ("/v", 404), ("/v/a/big.mp4/x", 404), ("/secret/x", 403),
                   ("/v/a/big.mp4?start=5", 200), ("/v/a/%62ig.mp4", 200)]:
    st, h, b = get(path)
    assert st == want, (path, st, want)

# Keep-alive: several requests on one connection, then two pipelined in one write.
s, f = conn()
rnd = random.Random(7)
for i in range(20):
    a = rnd.randrange(len(big)); z = min(len(big) - 1, a + rnd.randrange(1, 700000))
    s.sendall(f"GET /v/a/big.mp4 HTTP/1.1\r\nHost: t\r\nRange: bytes={a}-{z}\r\n\r\n".encode())
    st, h = response(f)
    assert st == 206 and h["connection"] == "keep-alive" and body(f, h) == big[a:z + 1], (i, a, z)
s.sendall(b"GET /v/small.mp4 HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\nGET /v/small.mp4 HTTP/1.1\r\nHost: t\r\nRange: bytes=10-19\r\n\r\n")
st, h = response(f); assert st == 200 and body(f, h) == small
st, h = response(f); assert st == 404; body(f, h)
st, h = response(f); assert st == 206 and body(f, h) == small[10:20]
# HTTP/1.0 closes unless asked.
s.sendall(b"GET /v/small.mp4 HTTP/1.0\r\n\r\n")
st, h = response(f); assert st == 200 and body(f, h) == small and h["connection"] == "close"
assert closed(s, f), "HTTP/1.0 connection kept open"
s.close()

# A head a byte at a time.
s, f = conn()
for c in b"GET /v/small.mp4 HTTP/1.1\r\nHost: t\r\n\r\n":
    s.send(bytes([c])); time.sleep(0.002)
st, h = response(f); assert st == 200 and body(f, h) == small
s.close()

# Malformed, unsupported, oversized: answered, then closed.
for raw, want in [(b"GARBAGE\r\n\r\n", 400), (b"GET / HTTP/1.1\r\n\r\n", 400),
                  (b"GET /../outside HTTP/1.1\r\nHost: t\r\n\r\n", 400),
                  (b"GET /v/%2e%2e/%2e%2e/outside HTTP/1.1\r\nHost: t\r\n\r\n", 400),
                  (b"GET /v/small.mp4 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
                  (b"POST /v/small.mp4 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 501),
                  (b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
                  (b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", 431),
                  (b"\x00\xff\xfe binary \r\n\r\n", 400)]:
    s, f = conn()
    s.sendall(raw)
    st, h = response(f)
    assert st == want, (raw[:40], st, want)
    body(f, h)
    assert closed(s, f), f"connection left open after {want}"
    s.close()

# A client that leaves in the middle of a body does not disturb the server.
for _ in range(5):
    s, f = conn()
    s.sendall(b"GET /v/a/big.mp4 HTTP/1.1\r\nHost: t\r\n\r\n")
    f.read(1000)
    s.close()

# 200 concurrent connections, each a few ranges.
errors = []
def worker(k):
    try:
        r = random.Random(k)
        s, f = conn()
        for _ in range(3):
            a = r.randrange(len(big) - 1); z = min(len(big) - 1, a + r.randrange(1, 300000))
            s.sendall(f"GET /v/a/big.mp4 HTTP/1.1\r\nHost: t\r\nRange: bytes={a}-{z}\r\n\r\n".encode())
            st, h = response(f)
            if st != 206 or body(f, h) != big[a:z + 1]:
                errors.append((k, a, z, st))
        s.close()
    except Exception as e:
        errors.append((k, repr(e)))
threads = [threading.Thread(target=worker, args=(k,)) for k in range(200)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors[:5]

# An idle keep-alive connection is closed after keepalive_timeout (2 s).
s, f = conn()
s.sendall(b"GET /v/small.mp4 HTTP/1.1\r\nHost: t\r\n\r\n")
st, h = response(f); body(f, h)
t0 = time.time()
assert closed(s, f), "idle connection not closed"
waited = time.time() - t0
assert 1.0 <= waited <= 4.5, f"idle connection closed after {waited:.1f} s, keepalive_timeout is 2 s"
print("client checks: ok")
EOF

  kill -TERM "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "laio-httpd still running 5 s after SIGTERM"
  wait "$pid" || fail "laio-httpd exited with status $? after SIGTERM"
  pid=
  pgrep -f "$T/httpd.conf" >/dev/null && fail "workers left running after SIGTERM"
  grep -q "worker 0 ($backend back end)" "$T/err.log" || fail "no counters from worker 0 with the $backend back end"
  [ "$(grep -c "laio-httpd worker [01] ($backend back end)" "$T/err.log")" -eq 2 ] || fail "not every worker reported"
  # Receives on idle keep-alive connections must wait: background. (Whether a
  # cold read waits depends on the device; t_laio_cold covers that.)
  bg=$(grep -o 'recv [0-9]* ([0-9]*)' "$T/err.log" | sed 's/.*(\([0-9]*\))/\1/' | paste -sd+ | bc)
  [ "$bg" -gt 0 ] || fail "no receive went to the background ($backend)"
  echo "$backend back end: $(grep 'laio-httpd worker' "$T/err.log" | cut -d: -f2- | head -1)"
  port=$((port + 1))
done
echo "laio-httpd: ok"
