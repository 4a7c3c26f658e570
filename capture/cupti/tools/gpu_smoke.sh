#!/usr/bin/env bash
# GPU smoke check of libcollscope-cupti (needs one GPU, nvcc, g++, python3; no CMake or DuckDB).
# Builds the library with plain g++, runs gpu_smoke.cu as 4 ranks one after another with the
# library injected through CUDA_INJECTION64_PATH (rank 2's compute kernel 1.4x slower from step
# 100), and checks the summaries: rank 2's spin_compute mode is 1.3x the others', the counts are
# exact, and nothing was dropped. The summaries land in OUT_DIR/dump for `collscope ingest` and
# `collscope diagnose` on the development machine, which must name rank 2 and spin_compute.
# Usage: capture/cupti/tools/gpu_smoke.sh [OUT_DIR]   (run from the repository root)
set -euo pipefail
out=${1:-${OUT:-/tmp/collscope-cupti-smoke}}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
rm -rf "$out/dump"
g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -I. -isystem "$cuda/include" \
  capture/cupti/duration_modes.cc capture/cupti/summarizer.cc capture/cupti/collector.cc \
  capture/cupti/injection.cc -o "$out/libcollscope-cupti.so" -ldl -lz -pthread
"$cuda/bin/nvcc" -O2 -o "$out/gpu_smoke" capture/cupti/tools/gpu_smoke.cu
nvidia-smi -L || true
for rank in 0 1 2 3; do
  RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$rank CUDA_INJECTION64_PATH="$out/libcollscope-cupti.so" \
    COLLSCOPE_DUMP_DIR="$out/dump" COLLSCOPE_CUPTI_WINDOW_MS=100 COLLSCOPE_CUPTI_LIBRARY="$cuda/lib64/libcupti.so" \
    "$out/gpu_smoke"
done
ls -la "$out/dump"
python3 - "$out/dump" <<'PY'
import glob, gzip, json, math, sys
files = glob.glob(sys.argv[1] + "/*.kernels.jsonl.gz")
assert len(files) == 4, files
centre = {}
for path in files:
    names, rank, late, count, stats = {}, None, [], 0, None  # late: (count, centre) of every mode
    for line in gzip.open(path, "rt"):
        x = json.loads(line)
        if x["type"] == "process": rank = x["rank"]
        elif x["type"] == "kernel": names[x["id"]] = x["name"]
        elif x["type"] == "stats": stats = x
        elif x["type"] == "summary" and names[x["kernel"]] == "spin_compute(long long, int*)":
            count += x["count"]
            assert sum(m[0] for m in x["modes"]) == x["count"]
            late += [(m[0], m[1]) for m in x["modes"]]
    assert count == 400 * 40, (path, count)
    assert stats and stats["dropped_by_cupti"] == 0 and stats["buffers_refused"] == 0, stats
    # The slowest well-populated mode: rank 2's is after its slowdown, the others' their only one.
    centre[rank] = max(c for w, c in late if w >= 100)
    print("rank", rank, "spin_compute modes", sorted(set((w, round(c)) for w, c in late))[:6], "stats", stats)
others = [centre[r] for r in (0, 1, 3)]
assert centre[2] > 1.3 * max(others), centre
print("cupti gpu smoke: OK (rank 2's spin_compute %.0f ns against %.0f ns)" % (centre[2], max(others)))
PY
