#!/usr/bin/env bash
# The units of dist/systemd/ under a real systemd (issue 13): systemd runs as
# PID 1 of private PID, mount, network, UTS and IPC namespaces (this machine's
# PID 1 is not systemd), with the units `make install-service` installs
# (PREFIX in the namespace's /run, where the built daemon is copied), stub targets in place of the
# distribution's (so that nothing of the host is started or changed) and a
# `libception` system user in private copies of /etc/passwd and /etc/group.
# Checked:
# - socket activation: the socket listens before any daemon runs; the first
#   client starts the service through LISTEN_FDS and is answered;
# - the daemon runs as user libception with exactly CAP_DAC_READ_SEARCH and
#   CAP_FOWNER (effective, permitted, bounding, ambient), no_new_privs and a
#   seccomp filter;
# - Restart=always: the daemon SIGKILLed three times is started again each
#   time by systemd, the socket file keeps its inode, and a client that
#   connects while no daemon runs waits in the backlog and is answered by the
#   next one;
# - a program under the shim in full mode fetches through the activated
#   daemon (LIBCEPTION_DAEMON_UID names the service's uid).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${LIBCEPTION_BUILD:-$PWD/build}
BIN=$BUILD/bin/libception
SHIM=$BUILD/libdeception.so
SYSTEMD=/lib/systemd/systemd
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (namespaces, mounts)"; exit 77; fi
[ -x "$BIN" ] && [ -f "$SHIM" ] || { echo "FAIL: libception or the shim is not built (run make)"; exit 1; }
[ -x "$SYSTEMD" ] || { echo "skip: $SYSTEMD is missing (scripts/bootstrap installs systemd)"; exit 77; }

tmp=$(mktemp -d /tmp/service-systemd.XXXXXX)
chmod 755 "$tmp"
init=
cleanup() {
  # Killing the namespace's PID 1 kills every process in it.
  [ -n "$init" ] && kill -9 "$init" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -n "$init" ] && in_ns systemctl status libception.service libception.socket --no-pager 2>&1 | tail -20; exit 1; }

# The unit's PrivateTmp hides /tmp, where a checkout may live: the daemon is
# installed under the namespace's own /run, as PREFIX.
prefix=/run/libception-test
make -s install-service DESTDIR="$tmp/stage" PREFIX="$prefix" SYSTEMDUNITDIR=/etc/systemd/system >/dev/null \
  || fail "make install-service"
units=$tmp/stage/etc/systemd/system
grep -q "^ExecStart=$prefix/bin/libception daemon" "$units/libception.service" || fail "ExecStart does not name PREFIX/bin"
printf '[Unit]\nDescription=the test: the socket only\nWants=libception.socket\n' > "$units/libception-test.target"
mkdir -p "$tmp/lib"
for t in sysinit basic sockets shutdown local-fs local-fs-pre swap umount paths timers slices network multi-user; do
  printf '[Unit]\nDescription=stub %s\nDefaultDependencies=no\n' "$t" > "$tmp/lib/$t.target"
done
cp /etc/passwd "$tmp/passwd"
cp /etc/group "$tmp/group"
if ! grep -q '^libception:' /etc/passwd; then
  uid=990
  while cut -d: -f3 /etc/passwd | grep -qx "$uid" || cut -d: -f3 /etc/group | grep -qx "$uid"; do uid=$((uid - 1)); done
  echo "libception:x:$uid:$uid:Libception Reception daemon:/nonexistent:/usr/sbin/nologin" >> "$tmp/passwd"
  echo "libception:x:$uid:" >> "$tmp/group"
fi
uid=$(awk -F: '$1 == "libception" { print $3 }' "$tmp/passwd")

cat > "$tmp/init.sh" <<EOF
#!/bin/sh
set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mkdir -p $prefix/bin
cp $BIN $prefix/bin/libception
mount -t tmpfs tmpfs /etc/systemd/system
cp $units/* /etc/systemd/system/
mount --bind $tmp/lib /lib/systemd/system
mount --bind $tmp/passwd /etc/passwd
mount --bind $tmp/group /etc/group
mount -t proc proc /proc
export container=libception-test
exec $SYSTEMD --system --unit=libception-test.target --log-target=kmsg
EOF
chmod +x "$tmp/init.sh"
setsid unshare --pid --fork --mount --net --uts --ipc "$tmp/init.sh" > "$tmp/unshare.log" 2>&1 &
for _ in $(seq 100); do
  init=$(pgrep -f "^$SYSTEMD --system --unit=libception-test.target" | head -1 || true)
  [ -n "$init" ] && break
  sleep 0.05
done
[ -n "$init" ] || { cat "$tmp/unshare.log"; fail "systemd did not start in the namespaces"; }
in_ns() { nsenter -t "$init" -m -p "$@"; }
for _ in $(seq 100); do
  [ "$(in_ns systemctl is-active libception.socket 2>/dev/null)" = active ] && break
  sleep 0.1
done
[ "$(in_ns systemctl is-active libception.socket)" = active ] || fail "libception.socket is not listening"
[ "$(in_ns systemctl is-active libception.service)" = inactive ] || fail "the daemon ran before any client"
inode=$(in_ns stat -c %i /run/libception.sock)

# Socket activation.
in_ns timeout 20 "$BIN" stat --json --socket /run/libception.sock > "$tmp/stat.json" || fail "the first client was not answered"
[ "$(in_ns systemctl is-active libception.service)" = active ] || fail "the first client did not start the service"
pid_in_ns=$(in_ns systemctl show -p MainPID --value libception.service)
[ "$(jq .daemon.pid "$tmp/stat.json")" = "$pid_in_ns" ] || fail "answered by pid $(jq .daemon.pid "$tmp/stat.json"), the service's is $pid_in_ns"

# Credentials: find the daemon as the host sees it (its namespace pid is 2-digit).
host_pid() {
  for p in $(pgrep -f "^$prefix/bin/libception daemon --socket /run/libception.sock"); do
    if [ "$(awk '/^NSpid/ { print $NF }' "/proc/$p/status")" = "$(in_ns systemctl show -p MainPID --value libception.service)" ]; then
      echo "$p"
      return
    fi
  done
}
daemon=$(host_pid)
[ -n "$daemon" ] || fail "the service's daemon is not visible from the host"
status=/proc/$daemon/status
[ "$(awk '/^Uid/ { print $2 $3 $4 $5 }' "$status")" = "$uid$uid$uid$uid" ] || fail "the daemon runs as $(grep ^Uid "$status"), not libception ($uid)"
for cap in CapEff CapPrm CapBnd CapAmb; do
  # bits 2 and 3: CAP_DAC_READ_SEARCH, CAP_FOWNER
  [ "$(awk -v c="$cap:" '$1 == c { print $2 }' "$status")" = 000000000000000c ] || fail "$cap is $(grep "^$cap" "$status"), not CAP_DAC_READ_SEARCH + CAP_FOWNER"
done
grep -q '^NoNewPrivs:[[:space:]]*1' "$status" || fail "no_new_privs is not set"
grep -q '^Seccomp:[[:space:]]*2' "$status" || fail "no seccomp filter"

# Restart=always, RestartSec=1s: three SIGKILLs, a client in each gap.
for k in 1 2 3; do
  daemon=$(host_pid)
  [ -n "$daemon" ] || fail "no daemon before kill $k"
  kill -9 "$daemon"
  start=$(date +%s.%N)
  in_ns timeout 20 "$BIN" stat --json --socket /run/libception.sock > "$tmp/stat.json" || fail "a client during restart gap $k was not answered"
  waited=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  new=$(jq .daemon.pid "$tmp/stat.json")
  [ "$new" = "$(in_ns systemctl show -p MainPID --value libception.service)" ] || fail "gap $k: answered by $new, not the service's daemon"
  [ "$(in_ns stat -c %i /run/libception.sock)" = "$inode" ] || fail "the socket file changed across restart $k"
  echo "kill $k: the client waited ${waited} s, answered by the restarted daemon (pid $new in the namespace)"
done
[ "$(in_ns systemctl show -p NRestarts --value libception.service)" = 3 ] || fail "NRestarts is $(in_ns systemctl show -p NRestarts --value libception.service), not 3"

# A program under the shim fetches through the activated daemon. The file is
# on the host's block-device root file system, visible in the namespaces.
head -c 4194304 /dev/urandom > "$tmp/data"
chmod 644 "$tmp/data"
sync "$tmp/data"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$tmp/data"
in_ns env LD_PRELOAD="$SHIM" LIBCEPTION_MODE=full LIBCEPTION_SOCKET=/run/libception.sock LIBCEPTION_DAEMON_UID="$uid" \
  cat "$tmp/data" | cmp -s - "$tmp/data" || fail "cat under the shim read wrong bytes"
in_ns "$BIN" stat --json --socket /run/libception.sock > "$tmp/stat.json"
fetches=$(jq '[.clients[] | select(.comm == "cat") | .fetch] | add // 0' "$tmp/stat.json")
[ "$fetches" -gt 0 ] || fail "cat under the shim made no FETCH through the service's daemon: $(jq -c .clients "$tmp/stat.json")"
echo "service-systemd: ok (uid $uid, CAP_DAC_READ_SEARCH + CAP_FOWNER, 3 restarts, cat fetched $fetches times)"
