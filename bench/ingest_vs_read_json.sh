#!/usr/bin/env bash
# Whole-process ingest benchmark: `collscope ingest DIR --db FRESH` exactly as a user runs it (the
# parse, the store, the other importers' scans, the analysis views, the aggregates, the checkpoint,
# the exit) against a whole peer process that loads the same files into a table with DuckDB's
# read_json (bench/read_json_peer.c, same libduckdb). Each side starts from an empty store every
# run; the runs alternate (ABBA...) so drift in the machine's load falls on both; medians of wall
# seconds and peak RSS (/usr/bin/time) are printed with the ratio peer / ingest (target >= 2).
# Both must load the same number of records, or the script fails.
#
# Wall seconds are what the target is about; CPU seconds (user + system, all threads) are printed
# beside them because they vary less on a shared machine.
#
# Usage: [COLLSCOPE=BIN] [WORK=DIR] bench/ingest_vs_read_json.sh [BUILD_DIR] [RUNS] [HOSTS:STEPS ...]
#   BUILD_DIR  holds collscope and bench/read_json_peer (default build; COLLSCOPE_BENCH=ON)
#   RUNS       runs of each side per data set (default 3)
#   HOSTS:STEPS simulated jobs, 8 GPUs (one log file) per host (default 32:11 64:21: about 116 MB
#              in 256 files and 443 MB in 512 files, the sizes of issue 16)
# Data sets are simulated once into $WORK (default /tmp/collscope-ingest-vs-read-json) and kept.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-3}
shift 2 2>/dev/null || shift $# || true
sets=("$@")
((${#sets[@]})) || sets=(32:11 64:21)
work=${WORK:-/tmp/collscope-ingest-vs-read-json}
collscope=${COLLSCOPE:-$build/collscope}  # another collscope binary (an older build) to compare
peer=$build/bench/read_json_peer
for b in "$collscope" "$peer"; do
  [ -x "$b" ] || { echo "missing $b (build with COLLSCOPE_BENCH=ON)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir -p "$work"

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# One timed whole process, its stdout to $1; leaves "wall_seconds peak_kb cpu_seconds" in
# $work/time.txt. A command that fails stops the script (set -e).
timed() {
  local out=$1; shift
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" >"$out" || { echo "failed: $*" >&2; return 1; }
  awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}' "$work/time" >"$work/time.txt"
}

echo "machine: $(nproc) cores; load before: $(uptime | sed 's/.*load average: //')"
echo "collscope: $collscope ($(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2))"
for set in "${sets[@]}"; do
  hosts=${set%%:*} steps=${set##*:}
  data=$work/h${hosts}s${steps}
  if [ ! -f "$data/.complete" ]; then
    rm -rf "$data"
    "$collscope" simulate -o "$data" --hosts "$hosts" --steps "$steps" --kineto-max-ranks 0 \
      --no-steps --no-inflight-state -q
    touch "$data/.complete"
  fi
  files=$(find "$data" -name '*.log' | wc -l)
  bytes=$(find "$data" -name '*.log' -printf '%s\n' | awk '{s += $1} END {print s}')
  cs_s=() cs_kb=() cs_cpu=() rj_s=() rj_kb=() rj_cpu=()
  for ((i = 0; i < runs; ++i)); do
    # ABBA: the side that goes first alternates.
    for side in $( ((i % 2)) && echo "peer ingest" || echo "ingest peer"); do
      rm -f "$work"/fresh.duckdb "$work"/fresh.duckdb.wal
      if [ "$side" = ingest ]; then
        timed "$work/ingest.json" "$collscope" ingest "$data" --db "$work/fresh.duckdb" --json
        read -r s kb cpu <"$work/time.txt"
        cs_s+=("$s") cs_kb+=("$kb") cs_cpu+=("$cpu")
        cs_records=$(sed 's/.*"records_stored": \([0-9]*\).*/\1/' "$work/ingest.json")
      else
        timed "$work/peer.out" "$peer" "$work/fresh.duckdb" "$data/**/*.log"
        read -r s kb cpu <"$work/time.txt"
        rj_s+=("$s") rj_kb+=("$kb") rj_cpu+=("$cpu")
        "$peer" --count "$work/fresh.duckdb" >"$work/count.txt"
        read -r rj_records rj_with_record <"$work/count.txt"
      fi
      echo "  run $((i + 1)) $side: $s s wall, $cpu s CPU, peak RSS $kb KB"
    done
  done
  rm -f "$work"/fresh.duckdb "$work"/fresh.duckdb.wal
  if [ "$cs_records" != "$rj_records" ] || [ "$rj_records" != "$rj_with_record" ]; then
    echo "records differ: collscope ingest stored $cs_records; read_json loaded $rj_records rows," \
         "$rj_with_record with their coll_perf/p2p_perf object" >&2
    exit 1
  fi
  cs=$(printf '%s\n' "${cs_s[@]}" | median) rj=$(printf '%s\n' "${rj_s[@]}" | median)
  cm=$(printf '%s\n' "${cs_kb[@]}" | median) rm_=$(printf '%s\n' "${rj_kb[@]}" | median)
  cc=$(printf '%s\n' "${cs_cpu[@]}" | median) rc=$(printf '%s\n' "${rj_cpu[@]}" | median)
  awk -v f="$files" -v b="$bytes" -v n="$cs_records" -v runs="$runs" -v cs="$cs" -v rj="$rj" \
      -v cm="$cm" -v rm="$rm_" -v cc="$cc" -v rc="$rc" 'BEGIN {
    printf "%d files, %.1f MB, %d records; medians of %d runs each:\n", f, b / 1e6, n, runs
    printf "  collscope ingest  %6.2f s wall  %6.1f MB/s  %6.2f s CPU  peak RSS %5.0f MB\n", cs, b / 1e6 / cs, cc, cm / 1024
    printf "  read_json peer    %6.2f s wall  %6.1f MB/s  %6.2f s CPU  peak RSS %5.0f MB\n", rj, b / 1e6 / rj, rc, rm / 1024
    printf "  ratio read_json / ingest: %.2fx wall (target >= 2), %.2fx CPU\n", rj / cs, rc / cc
  }'
done
echo "load after: $(uptime | sed 's/.*load average: //')"
