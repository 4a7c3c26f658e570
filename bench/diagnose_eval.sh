#!/usr/bin/env bash
# Runs the large diagnosis evaluation (the small suite's shapes with more seeds, 512-GPU jobs with
# every fault kind, a 2,000-step healthy job and a 10,240-GPU straggler job) and prints the table:
# per scenario sim / ingest / analysis seconds, per kind findings, true, faults, found, precision,
# recall, F1, and false findings per 1,000 healthy steps.
#   bench/diagnose_eval.sh [BUILD_DIR] [extra collscope eval args, e.g. --only 10240]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
shift || true
exe="$build/collscope"
[ -x "$exe" ] || exe="$build/cli/collscope"
[ -x "$exe" ] || { echo "collscope not built in $build" >&2; exit 2; }
exec "$exe" eval --suite large --floors "$here/analysis/diagnose/eval_floors.txt" "$@"
