#!/usr/bin/env bash
# Renders reports in headless Chromium and checks them: no JavaScript error, every section and plot
# drawn, and every view naming the planted culprit (the first screen at 1400x900, a finding card,
# the host table's first row, the heatmap's labels, finding bands on the time charts, no
# overlapping text). Jobs: the bundled example (examples/job), simulated jobs of 32 and 64 GPUs
# (a slow GPU, a degraded NIC) and of 256 GPUs (a degraded NIC, a slow GPU, a hang). Keeps the reports, their DOMs and screenshots (*.first_screen.png, *.page.png) in OUT_DIR. Exit 77 (CTest: skipped) when chromium or the example is absent.
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
"$bin" ingest "$job/nccl-inspector" "$job/steps" --db "$db" --run example -q || fail "ingest"
# A baseline: nccl-tests of the example's 8-GPU tensor-parallel groups, from the simulator.
"$bin" simulate -o "$tmp/nt" --mode nccl-tests --hosts 1 --gpus-per-host 8 --tp 8 --pp 1 \
  --nt-ops allreduce --nt-min-bytes 1048576 --nt-max-bytes 268435456 --kineto-max-ranks 0 \
  --seed 7 >/dev/null || fail "simulate nccl-tests"
"$bin" compare --db "$db" --baseline nccl-tests --baseline-log "$tmp/nt/nccl-tests.out" \
  2>/dev/null || fail "store baseline"
# The report diagnoses the store itself (no --findings): the whole answer from one command.
"$bin" report --db "$db" --run example -o "$out/report.html" || fail "report"

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$tmp/profile" --virtual-time-budget=8000 --hide-scrollbars)

# The culprit the simulator planted: the first fault's hosts in ground_truth.json.
truth_host() { sed -n '/"faults":/,$p' "$1" | grep -o '"hosts":\["[^"]*"' | head -1 | sed 's/.*\["//;s/"$//'; }

# check NAME REPORT CULPRIT: renders REPORT (dom at 1400x900, screenshots of the first screen and
# of the page) and checks that every view names CULPRIT.
check() {
  local name=$1 html=$2 culprit=$3
  local dom=$out/$name.dom.html log=$out/$name.chromium.log
  timeout 120 "$chromium" "${flags[@]}" --window-size=1400,900 --enable-logging=stderr --v=0 --dump-dom \
    "file://$html" >"$dom" 2>"$log" || fail "$name: chromium --dump-dom"
  timeout 120 "$chromium" "${flags[@]}" --window-size=1400,900 --screenshot="$out/$name.first_screen.png" \
    "file://$html" >/dev/null 2>>"$log" || fail "$name: chromium --screenshot (first screen)"
  timeout 120 "$chromium" "${flags[@]}" --window-size=1400,5200 --screenshot="$out/$name.page.png" \
    "file://$html" >/dev/null 2>>"$log" || fail "$name: chromium --screenshot (page)"
  grep -q "<title>JSERROR" "$dom" && fail "$name: JavaScript error: $(grep -o '<title>[^<]*' "$dom")"
  grep -q 'data-rendered="ok"' "$dom" || fail "$name: the report script did not finish (see $log)"
  if grep -E 'Uncaught|console\(.*\) "(Error|TypeError|ReferenceError)' "$log"; then
    fail "$name: console error"
  fi
  for id in summary findings overview hot-kernels ecdf temporal spatial ranges baseline; do
    grep -q "<section id=\"$id\"" "$dom" || fail "$name: section $id missing"
  done
  for id in chart-ops chart-classes chart-ecdf chart-temporal-bw chart-temporal-exec \
            chart-host-heatmap chart-kind-heatmap chart-rank-heatmap chart-range-communicator chart-range-host \
            chart-range-time_bin chart-range-sn_bin; do
    grep -Eq "id=\"$id\"[^>]*data-chart=\"ok\"" "$dom" || fail "$name: plot $id not drawn"
    grep -Eq "id=\"$id\"[^>]*>.*<canvas" "$dom" || fail "$name: plot $id has no canvas"
  done
  grep -q 'id="hot-table"><table' "$dom" || fail "$name: hot-kernel table missing"
  # The top says which run, which evidence tier, and whose findings.
  grep -q 'id="provenance"' "$dom" || fail "$name: no provenance line"
  grep -q 'Evidence tier <b>[A-D]</b>' "$dom" || fail "$name: no evidence tier"
  grep -q 'diagnosed by this report' "$dom" || fail "$name: does not say the findings are its own"
  # The first screen (1400x900) names the culprit: DOM bounding boxes, measured by the page.
  grep -Eq "data-first-screen-culprits=\"[^\"]*\\b$culprit\\b" "$dom" ||
    fail "$name: the first screen does not name $culprit ($(grep -o 'data-first-screen-culprits="[^"]*"' "$dom"))"
  grep -q "class=\"culprit-name\" href=\"#host-$culprit\">$culprit</a>" "$dom" || fail "$name: no card names $culprit"
  # No raw JSON evidence: a table with units.
  grep -q '<table class="t evidence">' "$dom" || fail "$name: no evidence table"
  # The first card's mini chart: the culprit against its peers, with the finding's window.
  grep -Eq 'id="card-chart-1"[^>]*data-chart="ok"' "$dom" || fail "$name: the first card has no mini chart"
  grep -Eq 'id="card-chart-1"[^>]*data-bands="[1-9]' "$dom" || fail "$name: the first card's chart has no window"
  sed -n '/<section id="findings"/,/<\/section>/p' "$dom" | grep '<pre' >/dev/null && fail "$name: raw evidence block"
  # The host table puts the culprit first, highlighted; the heatmap labels it.
  grep -q "id=\"host-table\"><table class=\"t hosts\"><thead>.*</thead><tbody><tr id=\"host-$culprit\" class=\"culprit\">" "$dom" ||
    fail "$name: $culprit is not first and highlighted in the host table"
  grep -Eq "id=\"chart-host-heatmap\"[^>]*data-culprits=\"$culprit\"" "$dom" || fail "$name: heatmap does not mark $culprit"
  # Finding bands on the time charts.
  for id in chart-temporal-bw chart-temporal-exec chart-host-heatmap; do
    grep -Eq "id=\"$id\"[^>]*data-bands=\"[1-9]" "$dom" || fail "$name: no finding band on $id"
  done
  # No text of the summary, the findings or the host table overlaps another (bounding boxes).
  grep -q 'data-text-overlaps="0"' "$dom" ||
    fail "$name: overlapping text: $(grep -o 'data-text-overlap[^>]*' "$dom" | head -c 600)"
  [ -s "$out/$name.first_screen.png" ] || fail "$name: no screenshot"
}

check example "$out/report.html" "$(truth_host "$job/ground_truth.json")"
grep -q 'id="baseline-body"><p' "$out/example.dom.html" || fail "baseline comparison missing"

# step_view NAME ID CULPRITS: the steps section's view ID is drawn and marks exactly CULPRITS.
step_view() {
  local dom=$out/$1.dom.html
  grep -Eq "id=\"$2\"[^>]*data-chart=\"ok\"" "$dom" || fail "$1: step view $2 not drawn"
  local got
  got=$(grep -o "id=\"$2\"[^>]*" "$dom" | grep -o 'data-culprits="[^"]*"')
  [ "$got" = "data-culprits=\"$3\"" ] || fail "$1: $2 marks $got, not \"$3\""
}
# The example's NIC (node-001, ranks 8-15) leaves every rank's compute as its peers': the views
# mark its ranks and shade the finding's steps, and show nothing slower.
step_view example chart-step-heatmap "rank 8 rank 9 rank 10 rank 11 rank 12 rank 13 rank 14 rank 15"
step_view example chart-phases "rank 8 rank 9 rank 10 rank 11 rank 12 rank 13 rank 14 rank 15"
step_view example chart-parallel-grid "8 9 10 11 12 13 14 15"
grep -Eq 'id="chart-kernel-modes"[^>]*data-chart="empty"' "$out/example.dom.html" || fail "example: kernel view not empty without kernels"
grep -Eq 'id="chart-step-heatmap"[^>]*data-bands="[1-9]' "$out/example.dom.html" || fail "example: no finding band on the step heatmap"

# A slow GPU (rank 13 of 32) with its step/phase series and the CUPTI library's kernel summaries:
# the step and kernel views mark that rank alone, although its finding names its host too.
"$bin" simulate -o "$tmp/gpu" --hosts 4 --gpus-per-host 8 --tp 4 --pp 2 --steps 12 --kineto-max-ranks 32 --no-kineto-traces --seed 3 \
  --fault kind=gpu_straggler,rank=13,factor=1.4,start_step=3 >/dev/null || fail "simulate gpu job"
"$bin" ingest "$tmp/gpu/nccl-inspector" "$tmp/gpu/steps" "$tmp/gpu/kernels" --db "$tmp/gpu.duckdb" --run gpu -q ||
  fail "ingest gpu job"
"$bin" report --db "$tmp/gpu.duckdb" -o "$out/gpu.html" 2>/dev/null || fail "report gpu job"
timeout 120 "$chromium" "${flags[@]}" --window-size=1400,900 --dump-dom "file://$out/gpu.html" >"$out/gpu.dom.html" 2>/dev/null ||
  fail "gpu: chromium --dump-dom"
grep -q 'data-rendered="ok"' "$out/gpu.dom.html" || fail "gpu: the report script did not finish"
step_view gpu chart-step-heatmap "rank 13"
step_view gpu chart-phases "rank 13"
step_view gpu chart-parallel-grid "13"
step_view gpu chart-kernel-modes "rank 13"

# A simulated 64-GPU job with one degraded NIC, Inspector logs with point-to-point records only
# (evidence tier B: no step series, no kernels).
"$bin" simulate -o "$tmp/nic" --hosts 8 --gpus-per-host 8 --tp 8 --pp 2 --layers 2 --micro-batches 2 \
  --hidden 8192 --seq-len 8192 --bucket-mparams 250 --steps 20 --dump-interval-us 200000 \
  --kineto-max-ranks 0 --no-steps --seed 5 \
  --fault kind=nic_degrade,host=5,factor=0.25,start_step=8,end_step=14 >/dev/null || fail "simulate nic job"
# Its hosts in one domain, as real clusters name them.
sed -i 's/"hostname":"\(node-[0-9]*\)"/"hostname":"\1.cluster.internal"/g' "$tmp/nic/nccl-inspector"/* || fail "rename nic hosts"
"$bin" ingest "$tmp/nic/nccl-inspector" --db "$tmp/nic.duckdb" --run nic -q || fail "ingest nic job"
"$bin" report --db "$tmp/nic.duckdb" -o "$out/nic.html" 2>/dev/null || fail "report nic job"
check nic "$out/nic.html" "$(truth_host "$tmp/nic/ground_truth.json").cluster.internal"
# The host heatmap's labels leave out the domain every host shares, and say so.
grep -q 'id="host-heatmap-note">Hosts without their shared domain, .cluster.internal.<' "$out/nic.dom.html" ||
  fail "nic: the host heatmap does not leave out the shared domain"
# Its 56 communicators are more than the rank heatmap's 40 rows: those with a member on the
# culprit host come first, and the note says how many are left out.
attr() { grep -o "id=\"$2\"[^>]*" "$out/$1.dom.html" | grep -o "$3=\"[^\"]*\"" | sed 's/.*="//;s/"$//'; }
[ "$(attr nic chart-rank-heatmap data-rows)" = 40 ] && [ "$(attr nic chart-rank-heatmap data-comms)" -gt 40 ] ||
  fail "nic: rank heatmap shows $(attr nic chart-rank-heatmap data-rows) of $(attr nic chart-rank-heatmap data-comms) communicators"
# Every one of the culprit's communicators is shown, its fast tensor-parallel group too.
culprit_rows=$(attr nic chart-rank-heatmap data-culprit-rows) culprit_comms=$(attr nic chart-rank-heatmap data-culprit-comms)
[ "$culprit_rows" -ge 2 ] && [ "$culprit_rows" = "$culprit_comms" ] ||
  fail "nic: the rank heatmap shows $culprit_rows of the culprit's $culprit_comms communicators"
grep -q 'id="rank-heatmap-note">40 of [0-9]* communicators, those with a member on a culprit host' "$out/nic.dom.html" ||
  fail "nic: the rank heatmap's note does not say what it leaves out"
# Every one of its 64 ranks in one view, a row per communicator kind, the culprit host's 8 framed.
[ "$(attr nic chart-kind-heatmap data-processes)" = 64 ] && [ "$(attr nic chart-kind-heatmap data-kinds)" -ge 2 ] ||
  fail "nic: the kind heatmap shows $(attr nic chart-kind-heatmap data-processes) processes in $(attr nic chart-kind-heatmap data-kinds) kinds"
[ "$(attr nic chart-kind-heatmap data-culprit-processes)" = 8 ] ||
  fail "nic: the kind heatmap frames $(attr nic chart-kind-heatmap data-culprit-processes) processes, not the culprit host's 8"

# The same fault where the data cannot tell the host from its data-parallel partners (no
# point-to-point records): a slow_network symptom, whose hosts are suspects and never a culprit.
"$bin" simulate -o "$tmp/net" --hosts 8 --gpus-per-host 8 --tp 8 --pp 2 --layers 2 --steps 12 \
  --kineto-max-ranks 0 --no-steps --seed 5 \
  --fault kind=nic_degrade,host=5,factor=0.25,start_step=4,end_step=10 >/dev/null || fail "simulate net job"
"$bin" ingest "$tmp/net/nccl-inspector" --db "$tmp/net.duckdb" --run net -q || fail "ingest net job"
"$bin" report --db "$tmp/net.duckdb" -o "$out/net.html" 2>/dev/null || fail "report net job"
if grep -q 'data-kind="slow_network"' "$out/net.html"; then
  grep -q 'No culprit named' "$out/net.html" || fail "net: a symptom's headline names a culprit"
  grep -q 'class="culprit-name"' "$out/net.html" && fail "net: a symptom's host is shown as a culprit"
  grep -q '<tr id="host-[^"]*" class="suspect">' "$out/net.html" || fail "net: suspects not marked in the host table"
fi

# The three 256-GPU jobs (32 hosts of 8; TP 8, PP 4, DP 8; Inspector logs with point-to-point
# records, and the plugin's in-flight state files): a degraded NIC, a GPU slow from the first step,
# and a hang. Each report's first screen and every view name the culprit's host.
big=(--hosts 32 --gpus-per-host 8 --tp 8 --pp 4 --layers 4 --micro-batches 2 --hidden 8192 --seq-len 8192
     --bucket-mparams 250 --steps 16 --dump-interval-us 200000 --kineto-max-ranks 0 --no-steps --seed 7)
for job256 in "nic256 kind=nic_degrade,host=13,factor=0.25,start_step=4" \
              "gpu256 kind=gpu_straggler,rank=150,factor=1.4,start_step=0" \
              "hang256 kind=hang,rank=150,comm=dp,start_step=8"; do
  name=${job256%% *}
  "$bin" simulate -o "$tmp/$name" "${big[@]}" --fault "${job256#* }" >/dev/null || fail "simulate $name"
  "$bin" ingest "$tmp/$name/nccl-inspector" --db "$tmp/$name.duckdb" --run "$name" -q || fail "ingest $name"
  "$bin" report --db "$tmp/$name.duckdb" -o "$out/$name.html" 2>/dev/null || fail "report $name"
  check "$name" "$out/$name.html" "$(truth_host "$tmp/$name/ground_truth.json")"
done

# Given findings, it says where they came from.
"$bin" diagnose --db "$db" --run example --json >"$tmp/findings.json" 2>/dev/null
"$bin" report --db "$db" --run example -o "$out/from_file.html" --findings "$tmp/findings.json" || fail "report --findings"
grep -q "read from $tmp/findings.json" "$out/from_file.html" || fail "--findings: source not said"
echo "PASS: reports rendered in $(basename "$chromium") without errors and name the culprit everywhere; first screens $out/*.first_screen.png"
