#!/usr/bin/env bash
# Runs the large diagnosis evaluation (the small suite's shapes with 24 seeds, 512- to 4,096-GPU
# jobs with every fault kind, a 2,000-step healthy job and a 10,240-GPU straggler job) and prints,
# per evidence tier and strictly scored, per kind findings, true, exact, duplicates, faults, found,
# precision, recall, exact rate, recall against severity, calibration, and false findings per
# 1,000 healthy steps. The floors (eval_floors.txt) are the small suite's; here nothing is
# checked against them.
#   bench/diagnose_eval.sh [BUILD_DIR] [extra collscope eval args, e.g. --only 10240]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
shift || true
exe="$build/collscope"
[ -x "$exe" ] || exe="$build/cli/collscope"
[ -x "$exe" ] || { echo "collscope not built in $build" >&2; exit 2; }
exec "$exe" eval --suite large "$@"
