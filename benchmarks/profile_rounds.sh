#!/usr/bin/env bash
# profile_rounds.sh: where the second thread's time goes. Samples a
# `kvroute_tree_replay FILE --threads 2 --scaling R` run with perf (CPU
# clock, so it works on a VM without hardware counters), sorts the samples
# of the --scaling rounds by the kind of thread that took them (each round
# starts one thread for its one-thread replay, then two for its two-thread
# replay), and prints the source lines whose samples grew most from the
# one-thread replays to the two-thread ones: the same work, so what grew
# is what the two threads cost each other.
#
#   benchmarks/profile_rounds.sh REPLAY FILE [--rounds R] [--top N] [-- FLAGS...]
#
# REPLAY is a kvroute_tree_replay binary, best built with debug
# information (for instance `cmake --preset bench -B build/prof
# -DCMAKE_CXX_FLAGS=-g && cmake --build build/prof --target
# kvroute_tree_replay`); without it the lines are function+offset. FLAGS
# go to the replay (default: --recency-shift 6, as cache_aware's trees).
# (--threads, --scaling, --reads and --private are refused: the script
# sets the first two, and the others would break its sorting of threads).
# R defaults to 41, N to 25. Needs perf, addr2line, nm, awk and sort;
# exits 2 on bad arguments or a missing tool, with perf's or the replay's
# status when either fails.
set -euo pipefail

die() { echo "profile_rounds: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: profile_rounds.sh REPLAY FILE [--rounds R] [--top N] [-- FLAGS...]"
replay=$1
file=$2
shift 2
rounds=41
top=25
flags=(--recency-shift 6)
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --top) top=${2:?--top needs a value}; shift 2 ;;
    --) shift; flags=("$@"); break ;;
    *) die "unknown option '$1'" ;;
  esac
done
case "$rounds$top" in *[!0-9]*) die "--rounds and --top take positive integers" ;; esac
if [ "$rounds" -lt 1 ] || [ "$top" -lt 1 ]; then die "--rounds and --top take positive integers"; fi
# The rounds' threads are told apart by the order they start in, and the
# two kinds must do the same work: no flag may add threads after them or
# change what a two-thread replay does.
for f in "${flags[@]}"; do
  case "$f" in
    --reads | --private | --scaling | --threads) die "FLAGS may not include $f" ;;
  esac
done
[ -x "$replay" ] || die "$replay is not an executable"
[ -r "$file" ] || die "cannot read $file"
for tool in perf addr2line nm awk sort; do
  command -v "$tool" >/dev/null || die "$tool not found"
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
perf record -q -e cpu-clock -F 9999 -o "$dir/perf.data" -- \
  "$replay" "$file" "${flags[@]}" --threads 2 --scaling "$rounds" >"$dir/replay.json"
bin=$(readlink -f "$replay")
# One line per sample: thread id, then symbol+offset in the replay binary,
# or the library and symbol elsewhere (libc's memcmp compares fragments;
# the kernel faults pages in), for the process's own threads.
perf script -i "$dir/perf.data" -F tid,ip,sym,symoff,dso --no-demangle 2>/dev/null |
  awk -v bin="($bin)" '{
    where = $3
    if ($NF != bin) { d = $NF; sub(/.*\//, "", d); gsub(/[()]/, "", d); sub(/\+0x[0-9a-f]+$/, "", where); where = d ":" where }
    print $1, where
  }' >"$dir/samples"

# The rounds' threads are the last 3R the process started (perf's fork
# events, in order): in each round one thread for the one-thread replay,
# then two.
perf script -i "$dir/perf.data" --show-task-events -F tid 2>/dev/null |
  sed -n 's/.*PERF_RECORD_FORK([0-9]*:\([0-9]*\)).*/\1/p' | tail -n "$((3 * rounds))" >"$dir/tids"
got=$(wc -l <"$dir/tids")
[ "$got" -eq "$((3 * rounds))" ] || die "found $got threads started for $rounds rounds"
awk 'NR == FNR { role[$1] = (FNR - 1) % 3 == 0 ? "one" : "two"; next }
     ($1 in role) { n[role[$1] " " $2]++ }
     END { for (k in n) print k, n[k] }' "$dir/tids" "$dir/samples" >"$dir/roles"

read -r one two < <(awk '{ t[$1] += $3 } END { print t["one"] + 0, t["two"] + 0 }' "$dir/roles")
echo "replay: $(sed -n 's/.*"scaling_median":\([0-9.]*\).*/scaling_median \1/p' "$dir/replay.json")"
echo "samples in the rounds: one-thread replays $one, two-thread replays $two (both threads)"
echo
echo "| one thread | two threads | growth | where (innermost first) |"
echo "|---|---|---|---|"
nm "$bin" >"$dir/nm" 2>/dev/null || true
awk '{ k = $2; if ($1 == "one") o[k] += $3; else w[k] += $3 }
     END { for (k in w) print w[k] - o[k], o[k] + 0, w[k], k }' "$dir/roles" |
  sort -rn | awk -v n="$top" 'NR <= n' |
  while read -r grew o w at; do
    sym=${at%+*}
    off=${at##*+}
    base=$(awk -v s="$sym" '$3 == s { print $1; exit }' "$dir/nm")
    where=$at
    if [ -n "$base" ] && [[ $at != *:* ]] && [[ $off == 0x* ]]; then
      addr=$(printf '%x' $((0x$base + off)))
      lines=$(addr2line -i -e "$bin" "0x$addr" 2>/dev/null | sed 's|.*/||' | head -n 3 | paste -sd ' ' -)
      [ -n "$lines" ] && [ "$lines" != "??:0" ] && where=$lines
    fi
    echo "| $o | $w | $grew | $where |"
  done
