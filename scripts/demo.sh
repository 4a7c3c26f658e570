#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the bundled example (examples/README.md): ingest its
# NCCL Inspector logs and PyTorch-profiler traces into a fresh store, summarise it, diagnose it,
# and write the HTML report, which diagnoses the store itself.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
cs=./build/collscope
db=build/example.duckdb
rm -f "$db" "$db.wal"
$cs ingest examples/job --db "$db" --run example
echo
$cs summary --db "$db" --top 8
echo
echo "== findings"
# diagnose exits 1 when it has findings (0: none, 2: nothing usable read), as diff does.
$cs diagnose --db "$db" --run example || [ $? -eq 1 ]
$cs diagnose --db "$db" --run example --json > build/example-findings.json || [ $? -eq 1 ]
# The report runs the same diagnosis itself and puts the findings first.
$cs report --db "$db" --run example -o build/example-report.html
echo
echo "report: build/example-report.html (findings as JSON: build/example-findings.json)"
