#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the bundled example: ingest its NCCL Inspector logs
# into a fresh store, then summarise it (and diagnose/report where those commands exist).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
example=examples/job
db=build/example.duckdb
rm -f "$db" "$db.wal"
./build/collscope ingest "$example/nccl-inspector" --db "$db" --run example
./build/collscope summary --db "$db" --top 8
for cmd in diagnose report; do
  if ./build/collscope "$cmd" --help >/dev/null 2>&1; then
    case "$cmd" in
      diagnose) ./build/collscope diagnose --db "$db" ;;
      report) ./build/collscope report --db "$db" -o build/example-report.html &&
              echo "report: build/example-report.html" ;;
    esac
  fi
done
