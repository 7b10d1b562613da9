# shellcheck shell=bash
# A throwaway nginx for tests and benchmarks that need a real server but no
# experiment driver: one worker, sendfile on, no access log, long keep-alive,
# every file it writes under one directory, on a free random loopback port.
# Sourced by tests/integration/load-nginx.sh and bench/load/run.sh. The caller
# stops it with `kill "$(cat DIR/nginx.pid)"`.
#
#   scratch_nginx DIR ROOT WORKER_CONNECTIONS [NGINX_BINARY]
#
# Starts nginx (daemonized) serving ROOT, with nginx.conf, nginx.pid, error.log
# and temp directories in DIR; sets SCRATCH_NGINX_PORT and SCRATCH_NGINX_PID.
# Tries five random ports; if none works, prints nginx's start log to stderr and
# returns 1.
scratch_nginx() {
  local dir=$1 root=$2 conns=$3 nginx=${4:-nginx} p _
  mkdir -p "$dir/tmp"
  for _ in 1 2 3 4 5; do
    p=$(( 20000 + RANDOM % 20000 ))
    cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile $(( 2 * conns ));
pid $dir/nginx.pid;
error_log $dir/error.log;
$( [ "$(id -u)" = 0 ] && echo "user root;" )
events { worker_connections $conns; }
http {
  default_type application/octet-stream;
  access_log off;
  sendfile on;
  keepalive_timeout 75s;
  keepalive_requests 100000;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  server { listen 127.0.0.1:$p backlog=4096; root $root; }
}
CONF
    if "$nginx" -c "$dir/nginx.conf" -p "$dir" 2>>"$dir/start.log"; then
      for _ in $(seq 50); do [ -s "$dir/nginx.pid" ] && break; sleep 0.1; done
      SCRATCH_NGINX_PORT=$p
      SCRATCH_NGINX_PID=$(cat "$dir/nginx.pid")
      return 0
    fi
  done
  cat "$dir/start.log" >&2
  return 1
}
