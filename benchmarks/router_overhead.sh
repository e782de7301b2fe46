#!/usr/bin/env bash
# Router overhead, measured in one run: wrk (Debian's) at 64 keep-alive
# connections, against the mock workers directly and then through
# kvroute_http_router in front of the same workers, with the same requests
# (OpenAI chat completions, 64 conversations of about 1 KB each). Prints
# each run's throughput and p99 latency and the ratios, and the CPU time each
# proxy spent per request it passed on, for two kinds of worker:
#
#   instant   the mock replies at once (--mock-service-ms 0): every process
#             is CPU-bound, so the throughput ratio is the router's CPU cost
#             per request against the workers' and wrk's own, and moves with
#             the scheduler from run to run; the CPU per request is steadier;
#   5 ms      the mock takes 5 ms per reply, on a timer (--mock-service-ms 5),
#             like a real model server: the machine is not saturated, so the
#             p99 difference is the latency the router adds.
#
# Targets: the router keeps at least 70% of the direct throughput and adds at
# most 1 ms to p99.
#
# Reference: where nginx is installed (Debian's nginx-light; cmake/
# install-deps.sh --ci), a third run goes through nginx as a plain reverse
# proxy in front of the same workers (as many worker processes as the router
# has I/O threads; keep-alive upstream connections; no routing logic), so
# that the router's figures sit beside what a mature C proxy costs on the
# same machine in the same run. --no-reference skips it.
#
# Threads: every process of the run gets one by default (wrk -t1, the mock
# workers, the router, nginx). wrk, the workers and the proxy share the
# machine's cores here, where in a deployment the router has its own: a
# second router thread on two cores only competes with wrk and the workers
# for time slices, which shows as added p99. --threads sets the router's
# (and nginx's) count.
#
#   benchmarks/router_overhead.sh [options]
#     --build-dir DIR      a Release build with kvroute_http_router
#                          (default build/bench; configured and built if missing)
#     --duration SECS      each wrk run (default 10)
#     --workers N          mock workers (default 1)
#     --service-ms "A B"   the workers' reply times to run (default "0 5")
#     --policy NAME        the router's policy (default cache_aware)
#     --threads N          the router's I/O threads and nginx's worker
#                          processes (default 1)
#     --router-args "..."  more flags for the router
#     --no-reference       no nginx run
#
# Everything runs on 127.0.0.1 and is stopped on exit. Direct: N wrk
# processes, 64/N connections each, one per worker (throughputs summed, the
# worst p99 kept). Through the router: one wrk, 64 connections. The router,
# the workers and wrk share the machine's cores in both runs.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/bench
duration=10
workers=1
service_list="0 5"
policy=cache_aware
router_args=""
reference=nginx
threads=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --service-ms) service_list=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --router-args) router_args=$2; shift 2 ;;
    --no-reference) reference=""; shift ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    *) echo "router_overhead: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

command -v wrk > /dev/null || { echo "router_overhead: needs wrk (apt-get install wrk)" >&2; exit 1; }
nginx_bin=""
if [ -n "$reference" ]; then
  nginx_bin=$(command -v nginx || ls /usr/sbin/nginx 2> /dev/null || true)
  [ -n "$nginx_bin" ] ||
    echo "router_overhead: nginx not found (apt-get install nginx-light): no reference run" >&2
fi
bin=$build/examples/http_router/kvroute_http_router
if [ ! -x "$bin" ]; then
  cmake --preset bench > /dev/null
  cmake --build "$build" --target kvroute_http_router > /dev/null
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Starts the program with "$@" (in this shell, so that cleanup can stop it);
# sets $port once it listens.
start() {
  local out=$tmp/out.$RANDOM
  "$bin" "$@" > "$out" 2> /dev/null &
  pids+=($!)
  for _ in $(seq 200); do
    if grep -q "listening on" "$out" 2> /dev/null; then
      port=$(grep "listening on" "$out" | tail -1 | sed 's/.*://')
      return
    fi
    sleep 0.05
  done
  echo "router_overhead: $bin $* did not start" >&2
  exit 1
}

# The requests: 64 conversations of about 1 KB, each its own text (so that
# cache_aware spreads them over the workers as the direct run does).
cat > "$tmp/chat.lua" << 'EOF'
local counter = 0
request = function()
  counter = counter + 1
  local session = counter % 64
  local body = '{"model":"bench","messages":[{"role":"user","content":"' .. session ..
      ' ' .. string.rep(string.char(97 + session % 26), 900) .. '"}]}'
  return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json"}, body)
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
                         latency:percentile(99) / 1000, summary.requests,
                         summary.errors.status + summary.errors.connect + summary.errors.read +
                         summary.errors.write + summary.errors.timeout))
end
EOF

# The CPU time, in clock ticks, that the processes "$@" and their children
# (nginx's workers) have used: utime + stime from /proc/PID/stat.
cpu_ticks() {
  local p all=("$@")
  for p in "$@"; do
    # shellcheck disable=SC2207
    all+=($(ps -o pid= --ppid "$p" 2> /dev/null || true))
  done
  for p in "${all[@]}"; do awk '{print $14 + $15}' "/proc/$p/stat" 2> /dev/null || true; done |
    awk '{s += $1} END {print s + 0}'
}

# PID URL CONNECTIONS -> "rps p99_ms requests errors cpu_us_per_request", the
# CPU being PID's (and its children's) during the run.
run_wrk_cpu() {
  local before after result
  before=$(cpu_ticks "$1")
  result=$(run_wrk "$2" "$3")
  after=$(cpu_ticks "$1")
  awk -v r="$result" -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    split(r, f, " ")
    printf "%s %.1f\n", r, (f[3] > 0 ? (b - a) / hz * 1e6 / f[3] : 0)
  }'
}

# wrk URL CONNECTIONS -> "rps p99_ms requests errors"
run_wrk() {
  wrk -t1 -c"$2" -d"${duration}s" --latency -s "$tmp/chat.lua" "$1" 2>&1 | grep '^RESULT' |
    sed 's/^RESULT //'
}

# Starts nginx as a reverse proxy in front of "$@" (worker URLs); sets $port.
# nginx cannot report a port it chose, so a free one is taken from the kernel
# first. Every path it writes is under $tmp, so that it runs as any user.
start_nginx() {
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local dir=$tmp/nginx servers=""
  mkdir -p "$dir"
  for url in "$@"; do servers="$servers    server ${url#http://};"$'\n'; done
  cat > "$dir/nginx.conf" << CONF
worker_processes $threads;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  scgi_temp_path $dir/scgi;
  uwsgi_temp_path $dir/uwsgi;
  upstream workers {
$servers    keepalive 64;
  }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://workers;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
  "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" 2> "$dir/start.log" &
  pids+=($!)
  for _ in $(seq 200); do
    if (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then return; fi
    sleep 0.05
  done
  echo "router_overhead: nginx did not start: $(cat "$dir/start.log" "$dir/error.log" 2> /dev/null)" >&2
  exit 1
}

stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  pids=()
}

echo "router overhead: wrk -t1, 64 keep-alive connections, ${duration} s per run," \
  "$workers mock workers, policy $policy, $threads router threads ${router_args}"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //');" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "compiler: $(grep -m1 CMAKE_CXX_COMPILER: "$build/CMakeCache.txt" | sed 's/.*=//')" \
  "$($(grep -m1 CMAKE_CXX_COMPILER: "$build/CMakeCache.txt" | sed 's/.*=//') --version | head -1)," \
  "$(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | sed 's/.*=//')"
printf '  %-10s %-16s %12s %10s %8s %14s\n' "worker" "" "requests/s" "p99 ms" "errors" \
  "proxy CPU/req"

for service_ms in $service_list; do
  ports=()
  urls=()
  for _ in $(seq "$workers"); do
    start --mock-worker --port 0 --threads 1 --mock-service-ms "$service_ms"
    ports+=("$port")
    urls+=("http://127.0.0.1:$port")
  done
  # shellcheck disable=SC2086
  start --port 0 --worker-urls "${urls[@]}" --policy "$policy" --threads "$threads" \
    --log-level error $router_args
  router_port=$port
  router_pid=${pids[-1]}

  # Warm up both paths (connections, caches, trees).
  for p in "${ports[@]}"; do wrk -t1 -c8 -d1s -s "$tmp/chat.lua" "http://127.0.0.1:$p" > /dev/null; done
  wrk -t1 -c8 -d1s -s "$tmp/chat.lua" "http://127.0.0.1:$router_port" > /dev/null

  rm -f "$tmp"/direct.*
  per=$((64 / workers))
  direct_jobs=()
  for p in "${ports[@]}"; do
    run_wrk "http://127.0.0.1:$p" "$per" > "$tmp/direct.$p" &
    direct_jobs+=($!)
  done
  wait "${direct_jobs[@]}"
  direct_rps=$(cat "$tmp"/direct.* | awk '{s += $1} END {printf "%.1f", s}')
  direct_p99=$(cat "$tmp"/direct.* | awk '$2 > m {m = $2} END {printf "%.3f", m}')
  direct_err=$(cat "$tmp"/direct.* | awk '{s += $4} END {print s + 0}')
  read -r routed_rps routed_p99 _ routed_err routed_cpu \
    <<< "$(run_wrk_cpu "$router_pid" "http://127.0.0.1:$router_port" 64)"
  if [ -n "$nginx_bin" ]; then
    start_nginx "${urls[@]}"
    nginx_pid=${pids[-1]}
    wrk -t1 -c8 -d1s -s "$tmp/chat.lua" "http://127.0.0.1:$port" > /dev/null
    read -r nginx_rps nginx_p99 _ nginx_err nginx_cpu \
      <<< "$(run_wrk_cpu "$nginx_pid" "http://127.0.0.1:$port" 64)"
  fi
  stop_all

  label="${service_ms} ms"
  [ "$service_ms" = 0 ] && label=instant
  printf '  %-10s %-16s %12s %10s %8s %14s\n' "$label" "direct" "$direct_rps" "$direct_p99" \
    "$direct_err" "-"
  printf '  %-10s %-16s %12s %10s %8s %11s us\n' "" "through router" "$routed_rps" "$routed_p99" \
    "$routed_err" "$routed_cpu"
  awk -v d="$direct_rps" -v r="$routed_rps" -v dp="$direct_p99" -v rp="$routed_p99" 'BEGIN {
    ratio = r / d; added = rp - dp
    kept = (ratio >= 0.7) ? "met" : "NOT met"; fast = (added <= 1.0) ? "met" : "NOT met"
    printf "  %-10s throughput kept %.1f%% (>= 70%%: %s), p99 added %.3f ms (<= 1 ms: %s)\n",
           "", 100 * ratio, kept, added, fast
  }'
  if [ -n "$nginx_bin" ]; then
    printf '  %-10s %-16s %12s %10s %8s %11s us\n' "" "through nginx" "$nginx_rps" "$nginx_p99" \
      "$nginx_err" "$nginx_cpu"
    awk -v d="$direct_rps" -v r="$nginx_rps" -v dp="$direct_p99" -v rp="$nginx_p99" 'BEGIN {
      printf "  %-10s reference: nginx keeps %.1f%%, adds %.3f ms to p99\n", "", 100 * r / d, rp - dp
    }'
  fi
done
