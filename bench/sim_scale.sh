#!/usr/bin/env bash
# Scale check of the simulator: a 16,384-GPU job (2048 hosts x 8 GPUs, TP=8, PP=4, DP=512) for
# 20 steps, streamed to disk. Reports peak RSS and records/s (goal: < 2 GB, >= 1 M records/s).
# Usage: bench/sim_scale.sh [collscope binary] [output dir]   (needs ~8 GB of free disk)
set -euo pipefail
BIN=${1:-build/collscope}
OUT=${2:-/tmp/collscope-sim-scale}
rm -rf "$OUT"
/usr/bin/time -v "$BIN" simulate -o "$OUT" --hosts 2048 --gpus-per-host 8 --tp 8 --pp 4 \
  --layers 8 --micro-batches 4 --steps 20 --dump-interval-us 100000 2>&1 |
  grep -E "simulated|wrote|records/s|Maximum resident|Elapsed|Percent of CPU"
du -sh "$OUT"
rm -rf "$OUT"
