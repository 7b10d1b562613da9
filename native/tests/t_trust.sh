#!/usr/bin/env bash
# t_trust.sh - the shim's trust of its environment, its peer and the files it
# writes (issue 13, docs/shim.md "Trust"). Each check reproduces an attack a
# local user could mount once the shim sits in /etc/ld.so.preload:
#   1. a setuid program (built here, linked against a shim whose configuration
#      file lives in this test's directory, run as nobody): LIBCEPTION_STATS,
#      LIBCEPTION_MODE and LIBCEPTION_SOCKET from the caller are ignored - no
#      file is created as root, no fd goes to the caller's socket;
#   2. the same program follows the root-owned configuration file, and
#      ignores it once it is group-writable;
#   3. a daemon running as another uid (nobody) gets no fd from a root
#      process unless LIBCEPTION_DAEMON_UID names it, and stderr says why;
#   4. statistics: none in mode off; a symlink planted at the old predictable
#      temporary name (PATH.tmpPID) is not followed; track mode's default
#      directory is per uid, created 0700, and refused when someone else owns it.
# Needs root (setuid, setpriv) and a C compiler: exits 77 without them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
native=$(cd "$here/.." && pwd)
build=${LCP_TEST_BUILD:?run by native/tests/run}
preload=${LCP_TEST_PRELOAD:?run by native/tests/run}
fakedaemon=${LCP_TEST_FAKEDAEMON:?run by native/tests/run}
[ "$(id -u)" = 0 ] || { echo "needs root (a setuid helper, setpriv)"; exit 77; }
command -v setpriv >/dev/null || { echo "needs setpriv (util-linux)"; exit 77; }
command -v "${CC:-cc}" >/dev/null || { echo "needs a C compiler"; exit 77; }

tmp=$(mktemp -d "$build/t_trust-XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp" /tmp/libception-65533
}
trap cleanup EXIT
fail=0
check() { # check CONDITION-STATUS MESSAGE
  if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi
}
cold() { dd if="$1" iflag=nocache count=0 status=none; }
start_daemon() { # start_daemon SOCKET LOG [setpriv args...]
  local sock=$1 log=$2
  shift 2
  : >"$log"
  chmod 666 "$log"
  "$@" "$fakedaemon" --socket "$sock" --log "$log" &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.05; done
  echo "fake daemon did not create $sock"; exit 1
}
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)

head -c 4194304 /dev/urandom >"$tmp/video"
chmod 644 "$tmp/video"
sync "$tmp/video" # dirty pages cannot be dropped

# ---- 1, 2: AT_SECURE ----------------------------------------------------
${CC:-cc} -O2 -std=gnu11 -shared -fPIC -fvisibility=hidden -I"$native/include" -I"$native/deception" \
  -DLCP_CONF_FILE="\"$tmp/shim.conf\"" "$native"/deception/*.c -o "$tmp/libdeception-conf.so" \
  -Wl,--version-script="$native/deception/libdeception.map" -ldl -lpthread || exit 1
cat >"$tmp/helper.c" <<'EOF'
/* Reads argv[1] with read(2): a setuid program the shim is linked into. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	static char buf[65536];
	long total = 0;
	ssize_t n;
	int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;

	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		total += n;
	printf("%ld\n", total);
	return fd >= 0 ? 0 : 1;
}
EOF
# Linked by absolute path (the shim has no soname): ld.so loads it in secure
# mode, where LD_PRELOAD with a path would be ignored.
${CC:-cc} -O2 "$tmp/helper.c" "$tmp/libdeception-conf.so" -o "$tmp/helper" || exit 1
chmod 4755 "$tmp/helper"
# The same program without the shim, for LD_PRELOAD: unlike coreutils, it
# leaves stderr open for the shim's messages at exit.
${CC:-cc} -O2 "$tmp/helper.c" -o "$tmp/reader" || exit 1
mkdir -m 755 "$tmp/rootonly"

start_daemon "$tmp/evil.sock" "$tmp/evil.log"
cold "$tmp/video"
out=$(env LIBCEPTION_MODE=full LIBCEPTION_STATS="$tmp/rootonly/planted" LIBCEPTION_SOCKET="$tmp/evil.sock" \
  "${as_nobody[@]}" "$tmp/helper" "$tmp/video" 2>&1)
check $? "setuid helper ran as nobody (output: $out)"
[ "$out" = 4194304 ]; check $? "setuid helper read the whole file"
[ ! -e "$tmp/rootonly/planted" ] && [ -z "$(ls "$tmp/rootonly")" ]
check $? "AT_SECURE: LIBCEPTION_STATS from the caller created nothing as root ($(ls "$tmp/rootonly"))"
sleep 0.2
[ ! -s "$tmp/evil.log" ]; check $? "AT_SECURE: no fd sent to the caller's LIBCEPTION_SOCKET ($(wc -l <"$tmp/evil.log") requests)"

start_daemon "$tmp/good.sock" "$tmp/good.log"
printf '# test configuration\nLIBCEPTION_MODE = full\nLIBCEPTION_SOCKET=%s\n' "$tmp/good.sock" >"$tmp/shim.conf"
chmod 644 "$tmp/shim.conf"
cold "$tmp/video"
"${as_nobody[@]}" "$tmp/helper" "$tmp/video" >/dev/null 2>&1
sleep 0.2
[ -s "$tmp/good.log" ]; check $? "AT_SECURE: the root-owned configuration file is followed ($(wc -l <"$tmp/good.log") requests)"

: >"$tmp/good.log"
chmod 664 "$tmp/shim.conf"
cold "$tmp/video"
err=$("${as_nobody[@]}" "$tmp/helper" "$tmp/video" 2>&1 >/dev/null)
sleep 0.2
[ ! -s "$tmp/good.log" ]; check $? "a group-writable configuration file is ignored"
grep -q "ignoring $tmp/shim.conf" <<<"$err"; check $? "... and stderr says so ($err)"

# ---- 3: the peer's uid ---------------------------------------------------
mkdir -m 755 "$tmp/nobody" && chown 65534:65534 "$tmp/nobody"
start_daemon "$tmp/nobody/d.sock" "$tmp/nobody.log" "${as_nobody[@]}"
cold "$tmp/video"
err=$(env LD_PRELOAD="$preload" LIBCEPTION_SOCKET="$tmp/nobody/d.sock" LIBCEPTION_STATS="$tmp/peer.json" \
  cat "$tmp/video" 2>&1 >/dev/null | cat)
sleep 0.2
[ ! -s "$tmp/nobody.log" ]; check $? "a daemon running as nobody gets no fd from root ($(wc -l <"$tmp/nobody.log") requests)"
grep -q "not using the daemon" <<<"$err"; check $? "... stderr says why ($err)"
[ "$(grep -c 'not using the daemon' <<<"$err")" = 1 ]; check $? "... once"
grep -q '"untrusted": [1-9]' "$tmp/peer.json"; check $? "... and the statistics count it"
cold "$tmp/video"
env LD_PRELOAD="$preload" LIBCEPTION_SOCKET="$tmp/nobody/d.sock" LIBCEPTION_DAEMON_UID=65534 \
  cat "$tmp/video" 2>/dev/null | cat >/dev/null
sleep 0.2
[ -s "$tmp/nobody.log" ]; check $? "LIBCEPTION_DAEMON_UID=65534 trusts it"

# ---- 4: statistics files -------------------------------------------------
env LD_PRELOAD="$preload" LIBCEPTION_MODE=off LIBCEPTION_STATS="$tmp/off.json" cat "$tmp/video" | cat >/dev/null
[ ! -e "$tmp/off.json" ]; check $? "mode off writes no statistics file"

echo precious >"$tmp/victim"
bash -c 'ln -s "$1" "$2.tmp$$"; exec env LD_PRELOAD="$3" LIBCEPTION_MODE=track LIBCEPTION_STATS="$2" cat "$4"' \
  _ "$tmp/victim" "$tmp/track.json" "$preload" "$tmp/video" | cat >/dev/null
[ "$(cat "$tmp/victim")" = precious ]; check $? "a symlink at PATH.tmpPID is not followed"
grep -q '"mode": "track"' "$tmp/track.json" 2>/dev/null; check $? "... and the statistics reach PATH"

mkdir -m 755 /tmp/libception-65533
setpriv --reuid=65533 --regid=65533 --clear-groups env LD_PRELOAD="$preload" LIBCEPTION_MODE=track \
  "$tmp/reader" "$tmp/video" 2>"$tmp/track.err" >/dev/null
[ -z "$(ls /tmp/libception-65533)" ]; check $? "track mode writes nothing into a default directory someone else owns"
grep -q "not the user's own" "$tmp/track.err"; check $? "... and says so ($(cat "$tmp/track.err"))"
rmdir /tmp/libception-65533
setpriv --reuid=65533 --regid=65533 --clear-groups env LD_PRELOAD="$preload" LIBCEPTION_MODE=track \
  cat "$tmp/video" 2>/dev/null | cat >/dev/null
[ "$(stat -c '%u %a' /tmp/libception-65533 2>/dev/null)" = "65533 700" ]
check $? "track mode's default directory is created per uid, 0700"
ls /tmp/libception-65533/stats.*.json >/dev/null 2>&1; check $? "... and holds the statistics"
exit $fail
