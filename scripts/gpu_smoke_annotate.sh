#!/usr/bin/env bash
# GPU smoke test of the step/phase annotations, for a machine with an NVIDIA GPU and PyTorch
# (the device tool's machine; see docs/annotate.md). It needs no CMake or DuckDB there: it builds
# libcollscope-annotate.so with the system compiler, runs the example loop with 2 ranks whose
# phases are GPU kernels timed by CUDA events, rank 1's backward 3x slower from step 15, and
# checks that the series carry GPU times showing it. The series land in $OUT/annotated (or
# ./gpu-smoke-annotated) for `collscope diagnose` on the development machine, which must name
# rank 1 and its backward phase from the GPU times.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.}/annotated
rm -rf "$out" build-gpu-smoke && mkdir -p build-gpu-smoke/python/collscope "$out"
c++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -I. capture/annotate/annotate.cc capture/annotate/step_lines.cc \
  -o build-gpu-smoke/python/collscope/libcollscope-annotate.so -pthread
cp python/collscope/*.py build-gpu-smoke/python/collscope/
export PYTHONPATH=$PWD/build-gpu-smoke/python
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
python3 examples/annotate/train.py --gpu --ranks 2 --steps 30 --slow-rank 1 --slow-phase backward --slow-from 15 \
  --slow-factor 3 --dump-dir "$out"
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
gpu = {}
for f in os.listdir(d):
    for line in open(os.path.join(d, f)):
        x = json.loads(line)
        if x.get("type") == "gpu" and x["phase"] == "backward":
            gpu.setdefault(x["rank"], {})[x["step"]] = x["gpu_us"]
assert set(gpu) == {0, 1}, gpu.keys()
late = lambda r: sorted(v for s, v in gpu[r].items() if s >= 15)
early = lambda r: sorted(v for s, v in gpu[r].items() if 2 <= s < 15)
med = lambda v: v[len(v) // 2]
print("backward GPU us, median: rank 0 early %.0f late %.0f; rank 1 early %.0f late %.0f"
      % (med(early(0)), med(late(0)), med(early(1)), med(late(1))))
assert med(late(1)) > 2 * med(late(0)), "rank 1's slowed backward does not show in its GPU time"
print("gpu smoke: OK")
PY
