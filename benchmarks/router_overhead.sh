#!/usr/bin/env bash
# Router overhead, measured in one run: wrk (Debian's) at 64 keep-alive
# connections, against the mock workers directly and then through
# kvroute_http_router in front of the same workers, with the same requests
# (OpenAI chat completions, 64 conversations of about 1 KB each). Prints
# each run's throughput and p99 latency and the ratios, for two kinds of
# worker:
#
#   instant   the mock replies at once (--mock-service-ms 0): every process
#             is CPU-bound, so the throughput ratio is the router's CPU cost
#             per request against the workers' and wrk's own;
#   5 ms      the mock takes 5 ms per reply, on a timer (--mock-service-ms 5),
#             like a real model server: the machine is not saturated, so the
#             p99 difference is the latency the router adds.
#
# Targets: the router keeps at least 70% of the direct throughput and adds at
# most 1 ms to p99.
#
#   benchmarks/router_overhead.sh [options]
#     --build-dir DIR      a Release build with kvroute_http_router
#                          (default build/bench; configured and built if missing)
#     --duration SECS      each wrk run (default 10)
#     --workers N          mock workers (default 1)
#     --service-ms "A B"   the workers' reply times to run (default "0 5")
#     --policy NAME        the router's policy (default cache_aware)
#     --router-args "..."  more flags for the router (e.g. "--threads 1")
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
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --service-ms) service_list=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --router-args) router_args=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "router_overhead: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

command -v wrk > /dev/null || { echo "router_overhead: needs wrk (apt-get install wrk)" >&2; exit 1; }
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

# wrk URL CONNECTIONS -> "rps p99_ms requests errors"
run_wrk() {
  wrk -t1 -c"$2" -d"${duration}s" --latency -s "$tmp/chat.lua" "$1" 2>&1 | grep '^RESULT' |
    sed 's/^RESULT //'
}

stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  pids=()
}

echo "router overhead: wrk -t1, 64 keep-alive connections, ${duration} s per run," \
  "$workers mock workers, policy $policy ${router_args}"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //');" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "compiler: $(grep -m1 CMAKE_CXX_COMPILER: "$build/CMakeCache.txt" | sed 's/.*=//')" \
  "$($(grep -m1 CMAKE_CXX_COMPILER: "$build/CMakeCache.txt" | sed 's/.*=//') --version | head -1)," \
  "$(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | sed 's/.*=//')"
printf '  %-10s %-16s %12s %10s %8s\n' "worker" "" "requests/s" "p99 ms" "errors"

for service_ms in $service_list; do
  ports=()
  urls=()
  for _ in $(seq "$workers"); do
    start --mock-worker --port 0 --threads 1 --mock-service-ms "$service_ms"
    ports+=("$port")
    urls+=("http://127.0.0.1:$port")
  done
  # shellcheck disable=SC2086
  start --port 0 --worker-urls "${urls[@]}" --policy "$policy" --log-level error $router_args
  router_port=$port

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
  read -r routed_rps routed_p99 _ routed_err <<< "$(run_wrk "http://127.0.0.1:$router_port" 64)"
  stop_all

  label="${service_ms} ms"
  [ "$service_ms" = 0 ] && label=instant
  printf '  %-10s %-16s %12s %10s %8s\n' "$label" "direct" "$direct_rps" "$direct_p99" "$direct_err"
  printf '  %-10s %-16s %12s %10s %8s\n' "" "through router" "$routed_rps" "$routed_p99" "$routed_err"
  awk -v d="$direct_rps" -v r="$routed_rps" -v dp="$direct_p99" -v rp="$routed_p99" 'BEGIN {
    ratio = r / d; added = rp - dp
    kept = (ratio >= 0.7) ? "met" : "NOT met"; fast = (added <= 1.0) ? "met" : "NOT met"
    printf "  %-10s throughput kept %.1f%% (>= 70%%: %s), p99 added %.3f ms (<= 1 ms: %s)\n",
           "", 100 * ratio, kept, added, fast
  }'
done
