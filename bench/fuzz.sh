#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Clang, seeds each from the shared fixtures and a
# small simulated job, and runs each for SECONDS (default 600), as many at once as there are cores.
# A crash leaves its input under <build>/crashes/<target>/ and makes the script fail; turn each
# into a regression test.
# usage: bench/fuzz.sh [SECONDS] [TARGET...]
# COLLSCOPE_FUZZ_BUILD=DIR uses a build already configured with COLLSCOPE_FUZZ=ON (CI's sanitizer
# build, unoptimised: fewer runs per second) instead of its own optimised build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(inspector_line line_reader kineto pickle nccl_tests inflight_state steps kernel_summary ras prom stacks)
fixtures=${COLLSCOPE_FIXTURES:-../shared/fixtures}
out=${COLLSCOPE_FUZZ_BUILD:-build-fuzz}

if [ -z "${COLLSCOPE_FUZZ_BUILD:-}" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$out" -DCOLLSCOPE_FUZZ=ON -DCOLLSCOPE_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$out" -j"$(nproc)" --target $(printf '%s_fuzz ' "${targets[@]}")
# The seed job comes from the release build when there is one (the test run made it first).
sim=build/collscope
if [ ! -x "$sim" ]; then
  cmake --build "$out" -j"$(nproc)" --target collscope
  sim=$out/collscope
fi

# Seeds: small, real inputs of each format (whole files of a few KiB; the first lines of logs).
seeds=$out/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
job=$out/seed-job
rm -rf "$job" "$job-229" "$job-proxy"
"$sim" simulate -o "$job" --hosts 2 --gpus-per-host 2 --tp 2 --pp 2 --layers 2 --hidden 1024 \
  --seq-len 1024 --steps 4 --kineto-max-ranks 4 --kineto-last-step 0 --no-kineto-gzip --dump-interval-us 200000 >/dev/null
"$sim" simulate -o "$job-229" --hosts 2 --gpus-per-host 2 --tp 2 --pp 2 --layers 2 --hidden 1024 \
  --seq-len 1024 --steps 4 --kineto-max-ranks 0 --inspector-flavor 2.29 --inspector-verbose >/dev/null
# v4.4 marker streams with nested proxy_trace records.
"$sim" simulate -o "$job-proxy" --hosts 2 --gpus-per-host 2 --tp 2 --pp 2 --layers 2 --hidden 1024 \
  --seq-len 1024 --steps 2 --kineto-max-ranks 0 --inspector-proxy --dump-interval-us 200000 >/dev/null
seed() { mkdir -p "$seeds/$1"; cp "$2" "$seeds/$1/$(basename "$2")-$RANDOM"; }
for f in "$job"/nccl-inspector/*.log "$job-229"/nccl-inspector/*.log "$job-proxy"/nccl-inspector/*.log; do
  head -n 40 "$f" > "$seeds/tmp"
  seed inspector_line "$seeds/tmp"
  { printf '\0'; cat "$seeds/tmp"; } > "$seeds/tmp.plain" && seed line_reader "$seeds/tmp.plain"
  { printf '\1'; gzip -c "$seeds/tmp"; } > "$seeds/tmp.gz" && seed line_reader "$seeds/tmp.gz"
done
for f in "$job"/kineto/*.json; do [ -e "$f" ] && seed kineto "$f"; done
for f in "$job"/nccl-inspector/*.inflight.json "$job"/*.inflight.json; do [ -e "$f" ] && seed inflight_state "$f"; done
for f in "$job"/steps/*.steps.jsonl; do [ -e "$f" ] && { head -n 20 "$f" > "$seeds/tmp"; seed steps "$seeds/tmp"; }; done
for f in "$job"/kernels/*.kernels.jsonl.gz; do
  [ -e "$f" ] || continue
  { gzip -dc "$f" 2>/dev/null || true; } | head -n 30 > "$seeds/tmp"
  seed kernel_summary "$seeds/tmp"
  gzip -c "$seeds/tmp" > "$seeds/tmp.gz" && seed kernel_summary "$seeds/tmp.gz"
done
# Stack files of `collscope stacks --out` (sampling needs ptrace, so one is written here as the
# writer, agent/stacks/stack_session.cc, writes it): a finished file and one still being written.
mkdir -p "$seeds/stacks"
{
  printf '%s\n' '{"collscope_stacks":1,"type":"process","host":"node1","pid":4711,"rank":3,"exe":"/usr/bin/python3.11","command":"python3 train.py","python":"3.11.2","python_unread":"","interval_us":100000,"native":true}'
  printf '%s\n' '{"type":"stacks","tid":4711,"thread":"python3","window_start_us":1764666000000000,"window_end_us":1764666010000000,"first_us":1764666000100000,"last_us":1764666009900000,"count":99,"frames":"_start;Py_RunMain;<module> (train.py:80);train_step (train.py:42);wait (python3.11/threading.py:320);pthread_cond_wait;libc.so.6+0x8f2a1"}'
  printf '%s\n' '{"type":"stacks","tid":4730,"thread":"nccl proxy","window_start_us":1764666000000000,"window_end_us":1764666010000000,"first_us":1764666000100000,"last_us":1764666000100000,"count":1,"frames":"start_thread;ncclProxyService;poll"}'
} > "$seeds/stacks/open.stacks.jsonl"
{
  cat "$seeds/stacks/open.stacks.jsonl"
  printf '%s\n' '{"type":"end","samples":100,"failed":0,"dropped":0,"mean_sample_us":850,"mean_stopped_us":420,"max_stopped_us":2100,"exited":false}'
} > "$seeds/stacks/done.stacks.jsonl"
gzip -c "$seeds/stacks/done.stacks.jsonl" > "$seeds/stacks/done.stacks.jsonl.gz"
# RAS reports and MONITOR logs: the test samples (tests/ras_samples.h), one file each.
awk -v d="$seeds" '/R"[a-z]*\(/ { f = 1; n++; sub(/.*R"[a-z]*\(/, ""); out = d "/ras" n } f && /^\)[a-z]*";/ { f = 0; close(out); next } f { print > out }' tests/ras_samples.h
for f in "$seeds"/ras[0-9]*; do [ -e "$f" ] && seed ras "$f"; done
# NCCL Inspector Prometheus textfiles: the test samples (tests/prom_samples.h), one file each.
awk -v d="$seeds" '/R"\(/ { f = 1; n++; sub(/.*R"\(/, ""); out = d "/prom" n } f && /^\)";/ { f = 0; close(out); next } f { print > out }' tests/prom_samples.h
for f in "$seeds"/prom[0-9]*; do [ -e "$f" ] && seed prom "$f"; done
# Inspector's OTLP JSON export (the same target reads it): a saved aggregated (v5.1) request body,
# and verbose (v5.2) requests a line each, as a collector's file exporter writes them.
attr() { printf '{"key":"%s","value":{"stringValue":"%s"}}' "$1" "$2"; }
otlp_doc() {  # VERSION METRIC EXTRA_ATTRS VALUE
  printf '{"resourceMetrics":[{"resource":{"attributes":[%s]},"scopeMetrics":[{"scope":{"name":"nccl-inspector"},"metrics":[{"name":"%s","unit":"us","gauge":{"dataPoints":[{"attributes":[%s,%s,%s,%s%s],"timeUnixNano":"1800000000123456789","asDouble":%s}]}}]}]}]}\n' \
    "$(attr slurm.job.id 812)" "$2" "$(attr version "$1")" "$(attr node n7)" "$(attr gpu GPU3)" "$(attr comm_name dp)" "$3" "$4"
}
otlp_doc v5.1 nccl_bus_bandwidth_gbs ",$(attr collective AllReduce),$(attr message_size 16-17MB),$(attr nranks 16)" 171.2 > "$seeds/otlp1"
{
  otlp_doc v5.2 nccl_collective_exec_time_microseconds ",$(attr comm_id 0xd152c00f111816),$(attr coll_sn 41),$(attr coll_msg_size_bytes 16777216),$(attr collective AllReduce)" 812
  otlp_doc v5.2 nccl_p2p_exec_time_microseconds ",$(attr p2p_sn 77),$(attr p2p_operation Recv),$(attr p2p_msg_size_bytes 4096)" 12
} > "$seeds/otlp2"
seed prom "$seeds/otlp1"
seed prom "$seeds/otlp2"
printf '%s\n' '{"resourceMetrics":[{"resource":{"attributes":[{"key":"slurm.job.id","value":{"stringValue":"9"}}]},"scopeMetrics":[{"scope":{"name":"nccl-inspector"},"metrics":[{"name":"nccl_collective_exec_time_microseconds","unit":"us","gauge":{"dataPoints":[{"attributes":[{"key":"version","value":{"stringValue":"v5.2"}},{"key":"node","value":{"stringValue":"n1"}},{"key":"gpu","value":{"stringValue":"GPU0"}},{"key":"comm_id","value":{"stringValue":"0x1f"}},{"key":"coll_sn","value":{"stringValue":"7"}},{"key":"coll_msg_size_bytes","value":{"stringValue":"4096"}},{"key":"collective","value":{"stringValue":"AllReduce"}}],"timeUnixNano":"1800000000000000000","asDouble":12.5}]}}]}]}]}' > "$seeds/tmp"
seed prom "$seeds/tmp"
if [ -d "$fixtures" ]; then
  for f in "$fixtures"/flight-recorder/*/_dump_*; do [ -e "$f" ] && seed pickle "$f"; done
  for f in "$fixtures"/nccl-tests/*/*.log "$fixtures"/nccl-tests/*.log; do [ -e "$f" ] && seed nccl_tests "$f"; done
  for f in "$fixtures"/megatron/*.log "$fixtures"/megatron/*/*.log; do [ -e "$f" ] && { head -n 60 "$f" > "$seeds/tmp"; seed steps "$seeds/tmp"; }; done
  for f in "$fixtures"/kineto/*/*.json.gz; do [ -e "$f" ] && { { gzip -dc "$f" 2>/dev/null || true; } | head -c 65536 > "$seeds/tmp" || true; seed kineto "$seeds/tmp"; }; done
else
  echo "fuzz: no fixtures at $fixtures; seeding from the simulated job only"
fi
rm -f "$seeds"/tmp*

fuzz_one() {
  local t=$1 log=$out/fuzz-$1.log max_len=65536
  mkdir -p "$out/corpus/$t" "$out/crashes/$t" "$seeds/$t"
  [ "$t" = kineto ] && max_len=$((1 << 20))  # a one-step trace of one rank
  # The working corpus grows across runs; the seeds are read, never written.
  if "$out/tests/fuzz/${t}_fuzz" "$out/corpus/$t" "$seeds/$t" -max_total_time="$seconds" -timeout=20 \
       -rss_limit_mb=2560 -max_len=$max_len -print_final_stats=1 -artifact_prefix="$out/crashes/$t/" >"$log" 2>&1; then
    echo "fuzz $t: ${seconds}s, $(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$') runs, no finding"
  else
    echo "fuzz $t: FINDING, see $log and $out/crashes/$t/"
    tail -n 30 "$log"
    return 1
  fi
}

# One target per core at a time; every target's verdict counts.
status=0
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" & pids+=($!)
  if ((${#pids[@]} >= $(nproc))); then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
