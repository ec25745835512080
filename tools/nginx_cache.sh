# shellcheck shell=bash
# A throwaway Bazel HTTP remote cache: nginx with its WebDAV module (Debian's
# nginx package) on 127.0.0.1, never the system service. Sourced by
# tools/remote_cache_test.sh and benchmarks/build_speed.sh, which define
# fail() and stop it at exit (kill "$nginx_pid").
#
#   start_nginx_cache DIR   # config, temp files and the store under DIR;
#                           # sets nginx_pid and url (http://127.0.0.1:PORT/cache)

start_nginx_cache() {
  local dir=$1 port user_line=
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$dir/tmp" "$dir/store"
  [[ $EUID -eq 0 ]] && user_line="user root;"
  cat >"$dir/nginx.conf" <<CONF
$user_line
worker_processes 2;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  client_max_body_size 0;
  server {
    listen 127.0.0.1:$port;
    root $dir/store;
    location / {
      dav_methods PUT;
      create_full_put_path on;
      dav_access user:rw;
    }
  }
}
CONF
  nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" &
  nginx_pid=$!
  url="http://127.0.0.1:$port/cache"
  local _
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break
    kill -0 "$nginx_pid" 2>/dev/null || fail "nginx exited at start: $(cat "$dir/error.log" 2>/dev/null)"
    sleep 0.1
  done
  # The protocol Bazel uses: PUT under ac/ or cas/, then GET.
  curl -fsS -X PUT --data-binary probe "$url/cas/probe" >/dev/null || fail "PUT to nginx failed: $(cat "$dir/error.log")"
  [[ $(curl -fsS "$url/cas/probe") == probe ]] || fail "GET from nginx did not return what was PUT"
  rm -f "$dir/store/cache/cas/probe"
}
