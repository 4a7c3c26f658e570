#!/usr/bin/env bash
# The live agent's own cost beside one 8-GPU host, as a user runs it: `collscope simulate --live`
# writes the host's Inspector logs at wall-clock pace, `collscope agent` watches them with its
# default interval (5 s) and window (5 min), and at the end the agent's CPU share of one core
# (its collscope_agent_cpu_seconds_total over the wall time) and peak RSS are printed.
# Usage: bench/agent_cost.sh [SECONDS=120] [MFU=0.45] [INTERVAL=5s] [BUILD=build]
# MFU sets the step time of the simulated model: 0.45 (the simulator's default) gives steps of
# about 0.14 s, far more records per second than real jobs write; 0.02 gives steps of about 3 s.
set -euo pipefail
seconds=${1:-120}
mfu=${2:-0.45}
interval=${3:-5s}
bin=$(realpath "${4:-build}")/collscope
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# One host, 8 GPUs (TP 4, PP 2), with enough steps to outlast the measurement: a step takes about
# 0.054 / MFU s of compute, plus communication (the estimate errs long: the job is simulated whole
# before it is paced out, so too many steps only cost staging time).
steps=$(python3 -c "print(int($seconds / (0.054 / $mfu)) * 2 + 20)")
"$bin" simulate --live -o "$work/job" --hosts 1 --gpus-per-host 8 --steps "$steps" --mfu "$mfu" \
  --kineto-max-ranks 0 --no-steps >"$work/sim.log" 2>&1 &
sim=$!
start=$(date +%s.%N)
"$bin" agent --watch "$work/job" --db "$work/agent.duckdb" --listen "127.0.0.1:$port" --interval "$interval" \
  >"$work/agent.log" 2>&1 &
agent=$!
sleep "$seconds"
metrics=$(curl -s "127.0.0.1:$port/metrics")
echo "$metrics" | grep "^collscope_agent_tick_phase_seconds_total"
wall=$(python3 -c "import time; print(time.time() - $start)")
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$agent/status")
kill -TERM "$agent"; wait "$agent" || true
kill -TERM "$sim"; wait "$sim" || true
value() { echo "$metrics" | awk -v n="$1" '$1 == n {print $2}'; }
cpu=$(value collscope_agent_cpu_seconds_total)
ticks=$(value collscope_agent_ticks_total)
records=$(value collscope_agent_records_ingested_total)
store=$(du -k "$work/agent.duckdb" | cut -f1)
python3 - "$cpu" "$wall" "$ticks" "$records" "$rss_kb" "$store" "$mfu" "$interval" <<'PY'
import sys
cpu, wall, ticks, records, rss_kb, store_kb, mfu = map(float, sys.argv[1:8]); interval = sys.argv[8]
print(f"mfu {mfu}, interval {interval}: {records/wall:.0f} records/s ingested over {wall:.0f} s, {ticks:.0f} ticks")
print(f"agent CPU: {cpu:.2f} s = {100*cpu/wall:.2f}% of one core ({1000*cpu/max(ticks,1):.0f} ms per tick); "
      f"peak RSS {rss_kb/1024:.0f} MB; store {store_kb/1024:.1f} MB")
PY
