#!/usr/bin/env bash
# Router overhead, measured in one run: wrk (Debian's) at 64 keep-alive
# connections, first against the mock workers directly, then through
# kvroute_http_router in front of the same workers, with the same requests
# (OpenAI chat completions, 64 conversations of about 1 KB each). Prints
# both runs' throughput and p99 latency and the ratios. Targets: the router
# keeps at least 70% of the direct throughput and adds at most 1 ms to p99.
#
#   benchmarks/router_overhead.sh [options]
#     --build-dir DIR      a Release build with kvroute_http_router
#                          (default build/bench; built if missing)
#     --duration SECS      each wrk run (default 10)
#     --workers N          mock workers (default 2)
#     --service-ms MS      the mocks' time per request before replying
#                          (default 0: pure overhead, the harshest case)
#     --policy NAME        the router's policy (default cache_aware)
#
# Everything runs on 127.0.0.1 and is stopped on exit. Direct: N wrk
# processes, 64/N connections each, one per worker (throughputs summed, the
# worst p99 kept). Through the router: one wrk, 64 connections. The router,
# the workers and wrk share the machine's cores in both runs, so on a small
# machine the ratio includes the router's CPU as well as its latency.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/bench
duration=10
workers=2
service_ms=0
policy=cache_aware
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --service-ms) service_ms=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
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

# Starts the program with "$@"; prints its port once it listens.
start() {
  local out=$tmp/out.$RANDOM
  "$bin" "$@" > "$out" 2> /dev/null &
  pids+=($!)
  for _ in $(seq 200); do
    if grep -q "listening on" "$out" 2> /dev/null; then
      grep "listening on" "$out" | tail -1 | sed 's/.*://'
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

mock_args=(--mock-worker --port 0 --threads 1)
[ "$service_ms" -gt 0 ] && mock_args+=(--mock-service-ms "$service_ms")
ports=()
urls=()
for _ in $(seq "$workers"); do
  p=$(start "${mock_args[@]}")
  ports+=("$p")
  urls+=("http://127.0.0.1:$p")
done
router_port=$(start --port 0 --worker-urls "${urls[@]}" --policy "$policy" --log-level error)

# wrk URL CONNECTIONS -> "rps p99_ms requests errors"
run_wrk() {
  wrk -t1 -c"$2" -d"${duration}s" --latency -s "$tmp/chat.lua" "$1" 2>&1 | grep '^RESULT' |
    sed 's/^RESULT //'
}

# Warm up both paths (connections, caches, trees).
for p in "${ports[@]}"; do wrk -t1 -c8 -d1s -s "$tmp/chat.lua" "http://127.0.0.1:$p" > /dev/null; done
wrk -t1 -c8 -d1s -s "$tmp/chat.lua" "http://127.0.0.1:$router_port" > /dev/null

per=$((64 / workers))
for p in "${ports[@]}"; do run_wrk "http://127.0.0.1:$p" "$per" > "$tmp/direct.$p" & done
wait_pids=$(jobs -p | tr '\n' ' ')
# shellcheck disable=SC2086
wait $wait_pids 2> /dev/null || true
direct_rps=$(cat "$tmp"/direct.* | awk '{s += $1} END {printf "%.1f", s}')
direct_p99=$(cat "$tmp"/direct.* | awk '$2 > m {m = $2} END {printf "%.3f", m}')
direct_err=$(cat "$tmp"/direct.* | awk '{s += $4} END {print s + 0}')
read -r routed_rps routed_p99 _ routed_err <<< "$(run_wrk "http://127.0.0.1:$router_port" 64)"

echo "router overhead: wrk -t1, 64 keep-alive connections, ${duration} s per run, $workers mock" \
  "workers (--mock-service-ms $service_ms), policy $policy"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //');" \
  "compiler: $(${CXX:-c++} --version | head -1)"
printf '  %-16s %12s %10s %8s\n' "" "requests/s" "p99 ms" "errors"
printf '  %-16s %12s %10s %8s\n' "direct" "$direct_rps" "$direct_p99" "$direct_err"
printf '  %-16s %12s %10s %8s\n' "through router" "$routed_rps" "$routed_p99" "$routed_err"
awk -v d="$direct_rps" -v r="$routed_rps" -v dp="$direct_p99" -v rp="$routed_p99" 'BEGIN {
  ratio = r / d; added = rp - dp
  kept = (ratio >= 0.7) ? "met" : "NOT met"; fast = (added <= 1.0) ? "met" : "NOT met"
  printf "  throughput kept: %.1f%% (target >= 70%%): %s\n", 100 * ratio, kept
  printf "  p99 added: %.3f ms (target <= 1 ms): %s\n", added, fast
}'
