#!/usr/bin/env bash
# Past one machine, measured (docs/scale.md): a simulated job written live, K host-agent processes
# that ingest their slice of hosts and export record summaries (one Parquet file per host and
# tick), and one aggregator agent that watches the summaries and diagnoses the whole job. A NIC of
# one host is slowed mid-run; the script reports
#   - the time from the fault's first record on disk (simulate's live_events.ndjson) to the
#     aggregator's /findings naming the culprit host,
#   - the bytes of summaries each host ships per minute,
#   - CPU seconds and peak RSS of the aggregator (and per tick), and of the host agents.
# Everything is the commands a user runs: `collscope simulate --live`, `collscope agent`.
#
# Usage: bench/scale.sh [COLLSCOPE_BINARY]   (env: HOSTS=512 GPUS=8 K=4 STEPS=60 OUT=/tmp/...)
set -euo pipefail
BIN=${1:-build/collscope}
HOSTS=${HOSTS:-512}
GPUS=${GPUS:-8}
K=${K:-4}                      # host-agent processes, each covering HOSTS/K hosts
STEPS=${STEPS:-60}
LAYERS=${LAYERS:-4}
STEP_GAP_US=${STEP_GAP_US:-1500000}
CULPRIT=${CULPRIT:-$((HOSTS / 3))}
FAULT_FROM=${FAULT_FROM:-$((STEPS / 2))}
HOST_INTERVAL=${HOST_INTERVAL:-5s}
AGG_INTERVAL=${AGG_INTERVAL:-5s}
WINDOW=${WINDOW:-30s}
PORT=${PORT:-19464}
OUT=${OUT:-$(mktemp -d /tmp/collscope-scale.XXXXXX)}
BIN=$(readlink -f "$BIN")
mkdir -p "$OUT"
cd "$OUT"
rm -rf job summaries agg.duckdb host-*.duckdb ./*.log
culprit=$(printf 'node-%03d' "$CULPRIT")
echo "job: $HOSTS hosts x $GPUS GPUs, $STEPS steps, fault nic_degrade on $culprit from step $FAULT_FROM; $K host-agent processes; out $OUT"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$BIN" simulate --live -o job --hosts "$HOSTS" --gpus-per-host "$GPUS" --tp "$GPUS" --pp 4 \
  --layers "$LAYERS" --steps "$STEPS" --step-gap-us "$STEP_GAP_US" --kineto-max-ranks 0 --no-steps \
  --no-inflight-state \
  --fault "kind=nic_degrade,host=$CULPRIT,factor=0.25,start_step=$FAULT_FROM,end_step=$((FAULT_FROM + 15))" \
  > simulate.log 2>&1 &
sim=$!
pids+=("$sim")

# Host agents: process k covers hosts k, k+K, k+2K, ... (each exports one file per host and tick).
agent_pids=()
for ((k = 0; k < K; k++)); do
  args=()
  for ((h = k; h < HOSTS; h += K)); do args+=(--host "$(printf 'node-%03d' "$h")"); done
  "$BIN" agent --watch job --db "host-$k.duckdb" --export-summaries summaries --no-diagnose \
    --listen '' --interval "$HOST_INTERVAL" --memory-limit 1GB "${args[@]}" > "host-$k.log" 2>&1 &
  agent_pids+=($!)
  pids+=($!)
done
"$BIN" agent --watch summaries --db agg.duckdb --listen "127.0.0.1:$PORT" --interval "$AGG_INTERVAL" \
  --window "$WINDOW" --memory-limit 4GB > aggregator.log 2>&1 &
agg=$!
pids+=("$agg")

cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hwm_mb() { awk '/VmHWM/ {print $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }
now_us() { date +%s%6N; }

found_us=0
while kill -0 "$sim" 2>/dev/null || [ "$found_us" = 0 ]; do
  sleep 1
  if [ "$found_us" = 0 ] && curl -sf "http://127.0.0.1:$PORT/findings" | grep "\"$culprit\"" >/dev/null; then
    found_us=$(now_us)
    echo "aggregator names $culprit"
  fi
  if ! kill -0 "$sim" 2>/dev/null && [ "$found_us" = 0 ]; then
    # The job ended; give the aggregator two more ticks.
    sleep 12
    curl -sf "http://127.0.0.1:$PORT/findings" | grep "\"$culprit\"" >/dev/null && found_us=$(now_us)
    break
  fi
done
sleep 2
metrics=$(curl -sf "http://127.0.0.1:$PORT/metrics" || true)
findings=$(curl -sf "http://127.0.0.1:$PORT/findings" || true)
agg_cpu=$(cpu_s "$agg")
agg_hwm=$(hwm_mb "$agg")
host_cpu=0
host_hwm=0
for p in "${agent_pids[@]}"; do
  host_cpu=$(echo "$host_cpu + $(cpu_s "$p")" | bc -l)
  h=$(hwm_mb "$p")
  host_hwm=$(echo "if ($h > $host_hwm) $h else $host_hwm" | bc -l)
done
agg_ticks=$(echo "$metrics" | awk '/^collscope_agent_ticks_total/ {print $2}')
fault_us=$(grep '"fault_first_record"' job/live_events.ndjson | head -1 | sed 's/.*"wall_us":\([0-9]*\).*/\1/')
started_us=$(grep '"started"' job/live_events.ndjson | head -1 | sed 's/.*"wall_us":\([0-9]*\).*/\1/')
finished_us=$(grep '"finished"' job/live_events.ndjson | head -1 | sed 's/.*"wall_us":\([0-9]*\).*/\1/')
files=$(find summaries -name '*.parquet' | wc -l)
bytes=$(find summaries -name '*.parquet' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
minutes=$(echo "($finished_us - $started_us) / 60000000" | bc -l)
echo
echo "== results =="
tail -2 simulate.log
printf 'job wall time                 %.1f s (started -> finished)\n' "$(echo "$minutes * 60" | bc -l)"
if [ "$found_us" != 0 ] && [ -n "$fault_us" ]; then
  printf 'fault first record -> aggregator finding  %.1f s\n' "$(echo "($found_us - $fault_us) / 1000000" | bc -l)"
else
  echo "fault first record -> aggregator finding  NOT FOUND"
fi
printf 'summaries                     %d files, %.1f MB; %.1f KB per host per minute\n' "$files" \
  "$(echo "$bytes / 1000000" | bc -l)" "$(echo "$bytes / 1000 / $HOSTS / $minutes" | bc -l)"
printf 'aggregator                    %.1f CPU s over %s ticks (%.2f CPU s/tick), peak RSS %.0f MB\n' \
  "$agg_cpu" "${agg_ticks:-?}" "$(echo "$agg_cpu / ${agg_ticks:-1}" | bc -l)" "$agg_hwm"
printf 'host agents (%d processes)     %.1f CPU s in all (%.3f CPU s per host per minute), peak RSS %.0f MB each at most\n' \
  "$K" "$host_cpu" "$(echo "$host_cpu / $HOSTS / $minutes" | bc -l)" "$host_hwm"
echo "aggregator findings: $findings" | cut -c1-600
echo "$metrics" | grep -E '^collscope_agent_(tick_duration|records_ingested|errors|data_lag)' || true
