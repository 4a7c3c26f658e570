#!/usr/bin/env bash
# Renders the example job's report in headless Chromium and checks it: no JavaScript error, every
# section and every plot present and drawn. Keeps report.html, dom.html and screenshot.png in
# OUT_DIR as test artifacts. Exit 77 (CTest: skipped) when chromium or the example is absent.
# Usage: browser_test.sh COLLSCOPE EXAMPLE_JOB_DIR OUT_DIR
set -uo pipefail
bin=$1 job=$2 out=$3
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$chromium" ]; then
  echo "SKIP: chromium not found (apt-get install chromium); the report was not checked in a browser"
  exit 77
fi
if [ ! -d "$job/nccl-inspector" ]; then
  echo "SKIP: no example job in $job (see examples/README.md)"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out" && out=$(cd "$out" && pwd)
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

db=$tmp/job.duckdb
"$bin" ingest "$job/nccl-inspector" --db "$db" --run example -q || fail "ingest"
# A baseline: nccl-tests of the example's 8-GPU tensor-parallel groups, from the simulator.
"$bin" simulate -o "$tmp/nt" --mode nccl-tests --hosts 1 --gpus-per-host 8 --tp 8 --pp 1 \
  --nt-ops allreduce --nt-min-bytes 1048576 --nt-max-bytes 268435456 --kineto-max-ranks 0 \
  --seed 7 >/dev/null || fail "simulate nccl-tests"
"$bin" compare --db "$db" --baseline nccl-tests --baseline-log "$tmp/nt/nccl-tests.out" \
  2>/dev/null || fail "store baseline"
# Findings from the diagnosis when the command exists; the report renders either way.
findings=()
"$bin" diagnose --db "$db" --run example --json >"$tmp/findings.json" 2>/dev/null || true
if grep -q collscope.findings.v1 "$tmp/findings.json"; then
  findings=(--findings "$tmp/findings.json")
fi
"$bin" report --db "$db" --run example -o "$out/report.html" "${findings[@]}" || fail "report"

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$tmp/profile" --virtual-time-budget=8000 --hide-scrollbars)
timeout 120 "$chromium" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom \
  "file://$out/report.html" >"$out/dom.html" 2>"$out/chromium.log" || fail "chromium --dump-dom"
timeout 120 "$chromium" "${flags[@]}" --window-size=1400,4700 --screenshot="$out/screenshot.png" \
  "file://$out/report.html" >/dev/null 2>>"$out/chromium.log" || fail "chromium --screenshot"

dom=$out/dom.html
grep -q "<title>JSERROR" "$dom" && fail "JavaScript error: $(grep -o '<title>[^<]*' "$dom")"
grep -q 'data-rendered="ok"' "$dom" || fail "the report script did not finish (see $out/chromium.log)"
if grep -E 'Uncaught|console\(.*\) "(Error|TypeError|ReferenceError)' "$out/chromium.log"; then
  fail "console error"
fi
for id in overview findings hot-kernels ecdf temporal spatial ranges baseline; do
  grep -q "<section id=\"$id\"" "$dom" || fail "section $id missing"
done
for id in chart-ops chart-classes chart-ecdf chart-temporal-bw chart-temporal-exec \
          chart-host-heatmap chart-rank-heatmap chart-range-communicator chart-range-host \
          chart-range-time_bin chart-range-sn_bin; do
  grep -Eq "id=\"$id\"[^>]*data-chart=\"ok\"" "$dom" || fail "plot $id not drawn"
  grep -Eq "id=\"$id\"[^>]*>.*<canvas" "$dom" || fail "plot $id has no canvas"
done
grep -q '<table class="t">' "$dom" || fail "no tables"
grep -q 'id="hot-table"><table' "$dom" || fail "hot-kernel table missing"
grep -q 'id="host-table"><table' "$dom" || fail "host table missing"
grep -q 'id="baseline-body"><p' "$dom" || fail "baseline comparison missing"
if [ ${#findings[@]} -gt 0 ]; then
  grep -q 'class="finding"' "$dom" || grep -q 'id="no-findings"' "$dom" || fail "findings not rendered"
else
  grep -q 'id="no-findings"' "$dom" || fail "no-findings state missing"
fi
[ -s "$out/screenshot.png" ] || fail "no screenshot"
echo "PASS: report rendered in $(basename "$chromium") without errors; screenshot $out/screenshot.png"
