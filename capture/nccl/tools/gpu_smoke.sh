#!/usr/bin/env bash
# GPU smoke check of the collscope NCCL profiler plugin (needs one GPU, nvcc, NCCL, g++, python3).
# Builds the plugin with plain g++ (no CMake, so no other dependency is needed on the GPU host),
# runs gpu_smoke.cu with NCCL_PROFILER_PLUGIN pointing at it, and validates the records.
# Usage: capture/nccl/tools/gpu_smoke.sh [OUT_DIR]   (run from the repository root)
set -euo pipefail
out=${1:-${OUT:-/tmp/collscope-gpu-smoke}}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -I. \
  capture/nccl/config.cc capture/nccl/hot_path.cc capture/nccl/record_format.cc \
  capture/nccl/runtime.cc capture/nccl/plugin_abi.cc \
  -o "$out/libnccl-profiler-collscope.so" -ldl -pthread
"$cuda/bin/nvcc" -O2 -o "$out/gpu_smoke" capture/nccl/tools/gpu_smoke.cu -lnccl \
  -I"$cuda/include" -L"$cuda/lib64"
nvidia-smi -L || true
rm -rf "$out/dump"
NCCL_PROFILER_PLUGIN="$out/libnccl-profiler-collscope.so" NCCL_INSPECTOR_DUMP_DIR="$out/dump" \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE COLLSCOPE_STATE_INTERVAL_MS=100 \
  "$out/gpu_smoke" 2>&1 | tee "$out/run.log" | grep -Ei "profiler|collscope|issued|error" || true
ls -la "$out/dump"
python3 - "$out/dump" <<'PY'
import collections, glob, json, sys
d = sys.argv[1]
logs = glob.glob(d + "/*.log")
assert logs, "no .log file written"
n = 0; src = collections.Counter(); kinds = collections.Counter(); bad = 0
for path in logs:
    for line in open(path):
        r = json.loads(line)
        if "dump_stats" in r:
            kinds["dump_stats"] += 1
            continue
        perf = r.get("coll_perf") or r.get("p2p_perf")
        keys = list(r)
        if keys[:3] != ["header", "metadata", "coll_perf" if "coll_perf" in r else "p2p_perf"] or keys[3] != "collscope":
            bad += 1
        n += 1
        src[perf.get("coll_timing_source") or perf.get("p2p_timing_source")] += 1
        kinds[perf.get("coll") or perf.get("p2p")] += 1
        if n <= 3:
            print(line.strip())
state = glob.glob(d + "/*.inflight.json")
print("records:", n, "bad key order:", bad)
print("timing sources:", dict(src))
print("ops:", dict(kinds))
for s in state:
    st = json.load(open(s))
    print("state:", s, "status", st["status"], "comms", len(st["comms"]), "finalized_comms", len(st["finalized_comms"]))
assert n > 0 and bad == 0
print("GPU SMOKE OK")
PY
