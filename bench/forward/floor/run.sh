#!/usr/bin/env bash
# Floor benchmark: what libmicrohttpd + libcurl allow in C, measured against nginx proxy_pass in the same run.
#   bash bench/forward/floor/run.sh
# Env: ROUNDS (3), DURATION (8s), WARM (2s), VARIANTS (space-separated subset of the names below),
#      OUT (results dir; default a fresh tmpdir whose results.jsonl and table.md are copied next to this script).
# Loopback only, ports 19080-19089; every wrk run is bounded by -d; all started processes are killed on exit.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
NGINX=/usr/sbin/nginx
WRK=/usr/bin/wrk
[ -x "$NGINX" ] || { echo "floor: $NGINX missing" >&2; exit 1; }
[ -x "$WRK" ] || { echo "floor: $WRK missing" >&2; exit 1; }
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
WARM=${WARM:-2s}
VARIANTS=${VARIANTS:-"nginx-proxy proxy-p2-c1-socket proxy-p2-c1-poll proxy-p2-c2-socket proxy-p2-c2-poll oneloop-2 mhd-hello"}

P_UP=19080 P_NGX=19081 P_HELLO=19082 P_P1S=19083 P_P1P=19084 P_P2S=19085 P_P2P=19086 P_ONE=19087

CFLAGS="-O2 -Wall -Wextra"
LIBS="$(pkg-config --cflags --libs libmicrohttpd libcurl) -lpthread"
for p in mhd_hello mhd_curl_proxy mhd_curl_oneloop; do
  gcc $CFLAGS -o "$p" "$p.c" $LIBS
done

TMP=$(mktemp -d /tmp/floor-bench.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PAYLOAD=$(cat payload.json)
nginx_conf() { # name workers server_block http_extra
  mkdir -p "$TMP/$1"
  cat >"$TMP/$1/nginx.conf" <<CONF
worker_processes $2;
daemon off;
pid $TMP/$1/nginx.pid;
error_log $TMP/$1/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/$1/client_body;
    proxy_temp_path $TMP/$1/proxy;
    fastcgi_temp_path $TMP/$1/fastcgi;
    uwsgi_temp_path $TMP/$1/uwsgi;
    scgi_temp_path $TMP/$1/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    $4
    server {
        $3
    }
}
CONF
}
nginx_conf upstream 1 "listen 127.0.0.1:$P_UP; location / { default_type application/json; return 200 '$PAYLOAD'; }" ""
nginx_conf proxy 2 "listen 127.0.0.1:$P_NGX; location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; }" \
  "upstream backend { server 127.0.0.1:$P_UP; keepalive 64; }"

start() { # log cmd...
  local log=$1; shift
  "$@" >"$TMP/$log.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$log=$!"
}
UP="http://127.0.0.1:$P_UP"
start upstream "$NGINX" -p "$TMP/upstream" -c "$TMP/upstream/nginx.conf"
start ngxproxy "$NGINX" -p "$TMP/proxy" -c "$TMP/proxy/nginx.conf"
start hello ./mhd_hello $P_HELLO 2
start p1s ./mhd_curl_proxy $P_P1S "$UP" 2 1 socket
start p1p ./mhd_curl_proxy $P_P1P "$UP" 2 1 poll
start p2s ./mhd_curl_proxy $P_P2S "$UP" 2 2 socket
start p2p ./mhd_curl_proxy $P_P2P "$UP" 2 2 poll
start one ./mhd_curl_oneloop $P_ONE "$UP" 2
sleep 1

children() { # pids of the process's children (nginx workers), comma-joined with the process itself
  local out=$1 c
  for c in $(cat /proc/[0-9]*/stat 2>/dev/null | awk -v pp="$1" '$4==pp {print $1}'); do out="$out,$c"; done
  echo "$out"
}
declare -A URL SPIDS
PATHQ=/1/indexes/bench/query
URL[nginx-proxy]=http://127.0.0.1:$P_NGX$PATHQ;        SPIDS[nginx-proxy]=$(children "$PID_ngxproxy")
URL[proxy-p2-c1-socket]=http://127.0.0.1:$P_P1S$PATHQ; SPIDS[proxy-p2-c1-socket]=$PID_p1s
URL[proxy-p2-c1-poll]=http://127.0.0.1:$P_P1P$PATHQ;   SPIDS[proxy-p2-c1-poll]=$PID_p1p
URL[proxy-p2-c2-socket]=http://127.0.0.1:$P_P2S$PATHQ; SPIDS[proxy-p2-c2-socket]=$PID_p2s
URL[proxy-p2-c2-poll]=http://127.0.0.1:$P_P2P$PATHQ;   SPIDS[proxy-p2-c2-poll]=$PID_p2p
URL[oneloop-2]=http://127.0.0.1:$P_ONE$PATHQ;          SPIDS[oneloop-2]=$PID_one
URL[mhd-hello]=http://127.0.0.1:$P_HELLO$PATHQ;        SPIDS[mhd-hello]=$PID_hello
UPIDS=$(children "$PID_upstream")

# correctness: every target answers 200, Content-Type application/json, body byte-identical to the upstream's
REQ='{"query":"apple","hitsPerPage":20}'
HDRS=(-H 'Content-Type: application/json' -H 'X-Algolia-Application-Id: BENCHAPP' -H 'X-Algolia-API-Key: bench-search-only-key')
for v in $VARIANTS; do
  code=$(curl -sS --noproxy '*' -o "$TMP/body" -w '%{http_code} %{content_type}' "${HDRS[@]}" -d "$REQ" "${URL[$v]}")
  [ "$code" = "200 application/json" ] || { echo "floor: $v answered '$code'" >&2; exit 1; }
  cmp -s "$TMP/body" payload.json || { echo "floor: $v body differs from the upstream's" >&2; exit 1; }
  case $v in proxy-*|oneloop-*)
    head -c 1100000 /dev/zero | tr '\0' 'a' >"$TMP/big"
    code=$(curl -sS --noproxy '*' -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$TMP/big" "${URL[$v]}")
    [ "$code" = 413 ] || { echo "floor: $v answered $code to a 1.1 MB body (want 413)" >&2; exit 1; } ;;
  esac
done
echo "correctness: all targets 200 application/json with the upstream's exact body; >1 MiB bodies get 413"

cat >"$TMP/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"query":"apple","hitsPerPage":20}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Algolia-Application-Id"] = "BENCHAPP"
wrk.headers["X-Algolia-API-Key"] = "bench-search-only-key"
LUA

echo "loadavg before: $(cat /proc/loadavg)"
echo "busiest processes:"; ps -eo pcpu,pid,comm --sort=-pcpu | head -5
for v in $VARIANTS; do
  python3 measure.py "$v" 0 "${URL[$v]}" "$TMP/post.lua" "$WARM" "${SPIDS[$v]}" "$UPIDS" >/dev/null 2>&1
done
RES="$TMP/results.jsonl"
: >"$RES"
read -r -a VA <<<"$VARIANTS"
n=${#VA[@]}
for ((r = 1; r <= ROUNDS; r++)); do
  for ((k = 0; k < n; k++)); do # rotate the order each round
    v=${VA[$(( (k + r - 1) % n ))]}
    python3 measure.py "$v" "$r" "${URL[$v]}" "$TMP/post.lua" "$DURATION" "${SPIDS[$v]}" "$UPIDS" >>"$RES"
  done
done
for l in hello p1s p1p p2s p2p one; do
  pid_var=PID_$l
  kill -0 "${!pid_var}" 2>/dev/null || { echo "floor: $l died: $(tail -5 "$TMP/$l.log")" >&2; exit 1; }
done
echo "loadavg after: $(cat /proc/loadavg)"
python3 summarize.py "$RES" | tee "$TMP/table.md"
cp "$RES" "$HERE/results.jsonl"; cp "$TMP/table.md" "$HERE/table.md"
