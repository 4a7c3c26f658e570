#!/usr/bin/env bash
# The deployment recipes of docs/deploy.md, run for real (deploy/):
#   1. shell scripts: bash -n, and shellcheck where installed;
#   2. deploy/install.sh into a temporary prefix; everything below runs from that prefix;
#   3. SLURM, one node: the prolog (fake SLURM environment, temporary folders) starts a single
#      agent: /healthz answers on loopback, it watches the job's dump folder; a simulated job
#      written there is ingested (/metrics); the epilog stops it: process gone, exit status 0,
#      pid file and state folder removed, report, findings and store in the job's folder;
#   4. SLURM, two nodes: the prolog starts a host agent, the batch script (fake srun) sets the
#      capture environment, runs the job and an aggregator; the host agent ships summaries, the
#      aggregator ingests them; the batch script passes the job's exit status on; the epilog
#      stops the host agent cleanly;
#   5. collscope-torchrun with a fake torchrun: agent started, healthy during training, ingested,
#      stopped with it, torchrun's arguments and exit status passed through;
#   6. Kubernetes manifests: parsed (python3 yaml) and checked (probe on /healthz, --watch/--db,
#      hostPath volumes, every mount and $(VAR) defined, resource limits, no 0.0.0.0);
#   7. systemd unit: systemd-analyze verify (else a check of its keys) and its ExecStart, with the
#      example env file, run for one tick.
# Usage: deploy_test.sh PATH/TO/collscope   (the build folder beside it holds the libraries)
set -euo pipefail
bin=$(readlink -f "${1:?usage: deploy_test.sh PATH/TO/collscope}")
build=$(dirname "$bin")
src=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
deploy=$src/deploy
for tool in curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not installed (the recipes' health checks need curl)"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/collscope-deploy-test.XXXXXX")
cleanup() {
  local p f i
  local -a left=()
  # Agents a failed step left running (their pid files are still there): stop them, then wait,
  # so their supervisors are done writing before the folder goes.
  for f in "$work"/state/job-*/agent.pid "$work"/*.agent/agent.pid "$work"/collscope-*-aggregator.*/agent.pid; do
    [[ -r $f ]] && left+=("$(<"$f")")
  done
  for p in "${left[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for ((i = 0; i < 50; i++)); do
    p=0
    for f in "${left[@]}"; do kill -0 "$f" 2>/dev/null && p=1; done
    ((p)) || break
    sleep 0.1
  done
  sleep 0.2
  if [[ ${KEEP:-0} != 1 ]]; then rm -rf -- "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }
metric() { awk -v n="$2" '$1 == n { print $2 }' <<<"$1"; }
positive() { awk -v v="${1:-0}" 'BEGIN { exit !(v + 0 > 0) }'; }
# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
  local t=$1 i
  shift
  for ((i = 0; i < t * 5; i++)); do
    "$@" && return 0
    sleep 0.2
  done
  return 1
}
alive() { [[ ${1:-0} -gt 0 ]] && kill -0 "$1" 2>/dev/null && [[ $(ps -o stat= -p "$1" 2>/dev/null) != Z* ]]; }

# ---- 1. shell scripts ----------------------------------------------------------------------
scripts=("$deploy"/install.sh "$deploy"/lib/collscope-lib.sh "$deploy"/slurm/prolog.sh
  "$deploy"/slurm/epilog.sh "$deploy"/slurm/collscope.sbatch "$deploy"/torchrun/collscope-torchrun.sh
  "$src"/tests/deploy_test.sh)
for s in "${scripts[@]}"; do
  bash -n "$s" || fail "bash -n $s"
done
ok "bash -n on ${#scripts[@]} scripts"
if command -v shellcheck >/dev/null 2>&1; then
  if (cd "$deploy" && shellcheck -x -P SCRIPTDIR -s bash -S warning "${scripts[@]}"); then
    ok "shellcheck (warnings and errors)"
  else
    fail "shellcheck"
  fi
else
  echo "SKIP: shellcheck not installed (Debian: shellcheck); only bash -n was checked"
fi

# ---- 2. install ----------------------------------------------------------------------------
prefix=$work/prefix
"$deploy"/install.sh "$build" "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; die "install.sh"; }
for f in bin/collscope bin/collscope-torchrun libexec/collscope/collscope share/collscope/collscope-lib.sh \
  share/collscope/slurm/prolog.sh share/collscope/slurm/epilog.sh share/collscope/slurm/collscope.sbatch \
  share/collscope/deploy.md; do
  [[ -e $prefix/$f ]] || fail "install.sh did not install $f"
done
# The installed command runs without the build tree's library path.
env -u LD_LIBRARY_PATH "$prefix/bin/collscope" agent --help >/dev/null || fail "installed collscope does not run"
ok "install.sh into $prefix"

mkdir -p "$work/state" "$work/shared"
cat >"$work/slurm.conf" <<EOF
COLLSCOPE_PREFIX=$prefix
COLLSCOPE_SHARED_ROOT=$work/shared
COLLSCOPE_STATE_DIR=$work/state
COLLSCOPE_LISTEN=127.0.0.1:0
COLLSCOPE_INTERVAL=1s
COLLSCOPE_HOST=node-000
COLLSCOPE_SYSLOG=0
COLLSCOPE_STRICT=1
COLLSCOPE_START_TIMEOUT=120
EOF
# What slurmd gives a prolog: a bare environment with the job's variables.
slurm_env() {
  local job=$1 nodelist=$2
  shift 2
  env -i HOME=/ "COLLSCOPE_SLURM_CONF=$work/slurm.conf" "SLURM_JOB_ID=$job" "SLURM_JOB_USER=$(id -un)" \
    "SLURM_JOB_UID=$(id -u)" "SLURM_JOB_GID=$(id -g)" SLURMD_NODENAME=node-000 \
    "SLURM_JOB_NODELIST=$nodelist" SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_CLUSTER_NAME=test "$@"
}
simulate() {  # simulate DIR: a small job (one host, 8 GPUs, 5 steps) written into DIR
  "$bin" simulate -o "$1" --hosts 1 --steps 5 --kineto-max-ranks 0 --no-steps >/dev/null
}
http() { curl -fsS --max-time 5 "http://$1$2"; }

# ---- 3. SLURM, one node: single agent --------------------------------------------------------
job=4242
jdir=$work/state/job-$job
slurm_env $job node-000 bash "$prefix/share/collscope/slurm/prolog.sh" 2>"$work/prolog1.err" ||
  { cat "$work/prolog1.err"; die "prolog (single) failed"; }
[[ -s $jdir/agent.pid ]] || die "prolog: no pid file in $jdir"
pid=$(<"$jdir/agent.pid")
alive "$pid" || die "prolog: agent $pid not running: $(cat "$jdir/agent.log")"
[[ $(<"$jdir/mode") == single ]] || fail "prolog: one-node job not in single mode"
addr=$(<"$jdir/listen")
[[ $addr == 127.0.0.1:* ]] || fail "prolog: agent listens on '$addr', not loopback"
[[ $(http "$addr" /healthz | head -n 1) == ok ]] || fail "prolog: /healthz is not ok"
grep -q "^watching $work/shared/$job/dumps " "$jdir/agent.log" || fail "prolog: agent does not watch the job's dump folder: $(head -n 2 "$jdir/agent.log")"
[[ -d $work/shared/$job/dumps ]] || fail "prolog: job dump folder not created"
# No listening socket of the agent's on anything but loopback.
if command -v ss >/dev/null 2>&1; then
  socks=$(ss -Hltnp 2>/dev/null | grep "pid=$pid," || true)
  [[ -n $socks ]] || fail "ss shows no listening socket of the agent"
  awk '{ print $4 }' <<<"$socks" | grep -v '^127\.0\.0\.1:' && fail "agent listens beyond loopback: $socks"
else
  echo "SKIP: ss not installed: the agent's sockets were not listed"
fi
ok "prolog started the single agent (pid $pid) on $addr, healthy, watching the job folder"

simulate "$work/shared/$job/dumps"
ingested() { positive "$(metric "$(http "$addr" /metrics)" collscope_agent_records_ingested_total)"; }
wait_for 60 ingested || fail "single agent ingested nothing in 60 s"
ok "single agent ingested $(metric "$(http "$addr" /metrics)" collscope_agent_records_ingested_total) records"

slurm_env $job node-000 SLURM_SCRIPT_CONTEXT=epilog_slurmd bash "$prefix/share/collscope/slurm/epilog.sh" \
  2>"$work/epilog1.err" || { cat "$work/epilog1.err"; fail "epilog (single) failed"; }
alive "$pid" && fail "epilog: agent $pid still running"
[[ -e $jdir ]] && fail "epilog: state folder $jdir (pid file) not removed"
report=$work/shared/$job/agents/node-000.report
grep -q "exit_status=0 clean=yes" "$report" || fail "epilog: report does not say a clean exit: $(cat "$report" 2>&1)"
rec=$(sed -n 's/^records_ingested=\([0-9.e+]*\).*/\1/p' "$report")
positive "$rec" || fail "epilog: report says no records ingested"
[[ -s $work/shared/$job/agents/node-000.findings.json ]] || fail "epilog: no findings kept"
[[ -s $work/shared/$job/agents/node-000.duckdb ]] || fail "epilog: single agent's store not kept"
"$prefix/bin/collscope" sql --db "$work/shared/$job/agents/node-000.duckdb" "SELECT count(*) FROM records" \
  >"$work/sql1.out" 2>&1 || fail "kept store not readable: $(cat "$work/sql1.out")"
grep -q "stopped: exit status 0 (clean: yes)" "$work/epilog1.err" || fail "epilog did not report the stop"
ok "epilog stopped the single agent cleanly (records $rec), report and store in the job folder"

# ---- 4. SLURM, two nodes: host agent, batch script with aggregator ---------------------------
job=4243
jdir=$work/state/job-$job
slurm_env $job 'node-[000-001]' bash "$prefix/share/collscope/slurm/prolog.sh" 2>"$work/prolog2.err" ||
  { cat "$work/prolog2.err"; die "prolog (host) failed"; }
[[ $(<"$jdir/mode") == host ]] || fail "prolog: two-node job not in host mode"
hpid=$(<"$jdir/agent.pid")
haddr=$(<"$jdir/listen")
[[ $(http "$haddr" /healthz | head -n 1) == ok ]] || fail "host agent /healthz is not ok"
tr '\0' ' ' <"/proc/$hpid/cmdline" | grep -- "--export-summaries $work/shared/$job/summaries --no-diagnose" >/dev/null ||
  fail "host agent not exporting summaries: $(tr '\0' ' ' <"/proc/$hpid/cmdline")"
ok "prolog started the host agent (pid $hpid) on $haddr"

mkdir -p "$work/fakebin"
cat >"$work/fakebin/srun" <<'EOF'
#!/bin/bash
# fake srun: drop srun's options, run the command once.
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
exec "$@"
EOF
cat >"$work/fakebin/fake-train" <<EOF
#!/bin/bash
# fake training: what the capture environment says, then a small job's dump files, then exit 3.
set -eu
env | grep -E '^(NCCL_PROFILER_PLUGIN|NCCL_INSPECTOR_DUMP_DIR|COLLSCOPE_DUMP_DIR|CUDA_INJECTION64_PATH|COLLSCOPE_ANNOTATE_LIB|PYTHONPATH)=' | sort >"$work/train-env.\$SLURM_JOB_ID"
"$bin" simulate -o "\$NCCL_INSPECTOR_DUMP_DIR" --hosts 1 --steps 5 --kineto-max-ranks 0 --no-steps >/dev/null
sleep 3
exit 3
EOF
chmod +x "$work/fakebin/srun" "$work/fakebin/fake-train"
rc=0
(cd "$work" && env -i HOME="$work" PATH="$work/fakebin:/usr/local/bin:/usr/bin:/bin" SLURM_JOB_ID=$job \
  SLURM_JOB_NUM_NODES=2 COLLSCOPE_PREFIX="$prefix" COLLSCOPE_SHARED_ROOT="$work/shared" COLLSCOPE_INTERVAL=1s \
  COLLSCOPE_AGG_LISTEN=127.0.0.1:0 COLLSCOPE_START_TIMEOUT=120 TMPDIR="$work" \
  bash "$prefix/share/collscope/slurm/collscope.sbatch" fake-train --steps 5) >"$work/sbatch.out" 2>&1 || rc=$?
[[ $rc == 3 ]] || fail "batch script exit status $rc, not the job's 3: $(cat "$work/sbatch.out")"
grep -qx "NCCL_INSPECTOR_DUMP_DIR=$work/shared/$job/dumps" "$work/train-env.$job" || fail "job's dump folder not set"
# Each capture variable is set when its library was built (and installed), and left out otherwise.
expect_var() {  # expect_var FILE VAR VALUE BUILT_FILE
  if [[ -e $4 ]]; then
    grep -qx "$2=$3" "$1" || fail "$2 not $3: $(cat "$1")"
  else
    echo "SKIP: $4 not built: checking only that $2 is left out"
    grep -q "^$2=" "$1" && fail "$2 set although $4 is not built"
  fi
  return 0
}
expect_var "$work/train-env.$job" NCCL_PROFILER_PLUGIN "$prefix/lib/libnccl-profiler-collscope.so" \
  "$build/capture/nccl/libnccl-profiler-collscope.so"
expect_var "$work/train-env.$job" CUDA_INJECTION64_PATH "$prefix/lib/libcollscope-cupti.so" \
  "$build/capture/cupti/libcollscope-cupti.so"
expect_var "$work/train-env.$job" PYTHONPATH "$prefix/python" "$build/python/collscope"
ls "$work/shared/$job/summaries/host=node-000/"*.parquet >/dev/null 2>&1 || fail "host agent shipped no summaries"
agg=$(cat "$work/shared/$job/aggregator.metrics" 2>/dev/null || true)
positive "$(metric "$agg" collscope_agent_records_ingested_total)" ||
  fail "aggregator ingested nothing: $(cat "$work/sbatch.out")"
[[ -s $work/shared/$job/aggregator.findings.json ]] || fail "aggregator findings not kept"
grep -q "aggregator stopped: exit status 0" "$work/sbatch.out" || fail "aggregator did not stop cleanly: $(cat "$work/sbatch.out")"
compgen -G "$work/collscope-$job-aggregator.*" >/dev/null && fail "aggregator state folder left behind"
ok "batch script: capture environment, aggregator ingested $(metric "$agg" collscope_agent_records_ingested_total) records from the summaries, exit status 3 passed on"

slurm_env $job 'node-[000-001]' SLURM_SCRIPT_CONTEXT=epilog_slurmd bash "$prefix/share/collscope/slurm/epilog.sh" \
  2>"$work/epilog2.err" || fail "epilog (host) failed"
alive "$hpid" && fail "epilog: host agent $hpid still running"
[[ -e $jdir ]] && fail "epilog: state folder $jdir not removed"
report=$work/shared/$job/agents/node-000.report
grep -q "mode=host exit_status=0 clean=yes" "$report" || fail "epilog (host): $(cat "$report" 2>&1)"
files=$(sed -n 's/.*summary_files=\([0-9.e+]*\).*/\1/p' "$report")
positive "$files" || fail "epilog (host): report says no summary files"
ok "epilog stopped the host agent cleanly (summary files $files)"

# ---- 5. torchrun ---------------------------------------------------------------------------
cat >"$work/fakebin/torchrun" <<EOF
#!/bin/bash
# fake torchrun: its arguments, whether the agent is up, a small job, then exit 7.
set -eu
printf '%s\n' "\$@" >"$work/torchrun.args"
env | grep -E '^(NCCL_PROFILER_PLUGIN|NCCL_INSPECTOR_DUMP_DIR)=' | sort >"$work/torchrun.env"
state=\$COLLSCOPE_DUMP_DIR.agent
cp "\$state/agent.pid" "$work/torchrun.agent-pid"
curl -fsS --max-time 5 "http://\$(cat "\$state/listen")/healthz" >"$work/torchrun.healthz"
"$bin" simulate -o "\$NCCL_INSPECTOR_DUMP_DIR" --hosts 1 --steps 5 --kineto-max-ranks 0 --no-steps >/dev/null
sleep 2
exit 7
EOF
chmod +x "$work/fakebin/torchrun"
rc=0
# A generous start timeout: under the sanitizers on a loaded machine the agent took over 15 s.
(cd "$work" && PATH="$work/fakebin:$PATH" COLLSCOPE_DUMP_DIR="$work/tr-dumps" COLLSCOPE_LISTEN=127.0.0.1:0 \
  COLLSCOPE_START_TIMEOUT=120 \
  COLLSCOPE_INTERVAL=1s "$prefix/bin/collscope-torchrun" --nproc-per-node 8 'train.py' --lr '1e-4 x') \
  >"$work/torchrun.out" 2>&1 || rc=$?
[[ $rc == 7 ]] || fail "collscope-torchrun exit status $rc, not torchrun's 7: $(cat "$work/torchrun.out")"
[[ $(cat "$work/torchrun.args") == $'--nproc-per-node\n8\ntrain.py\n--lr\n1e-4 x' ]] ||
  fail "torchrun's arguments changed: $(cat "$work/torchrun.args")"
[[ $(head -n 1 "$work/torchrun.healthz" 2>/dev/null) == ok ]] || fail "agent not healthy while training ran"
grep -qx "NCCL_INSPECTOR_DUMP_DIR=$work/tr-dumps" "$work/torchrun.env" || fail "torchrun: dump folder not set"
expect_var "$work/torchrun.env" NCCL_PROFILER_PLUGIN "$prefix/lib/libnccl-profiler-collscope.so" \
  "$build/capture/nccl/libnccl-profiler-collscope.so"
tpid=$(cat "$work/torchrun.agent-pid" 2>/dev/null || echo 0)
alive "$tpid" && fail "agent $tpid still running after collscope-torchrun exited"
[[ $(cat "$work/tr-dumps.agent/agent.rc" 2>/dev/null) == 0 ]] || fail "agent exit status not 0"
[[ -e $work/tr-dumps.agent/agent.pid ]] && fail "pid file left behind"
trec=$(awk '$1 == "collscope_agent_records_ingested_total" { print $2 }' "$work/tr-dumps.agent/final.metrics" 2>/dev/null)
positive "$trec" || fail "torchrun's agent ingested nothing: $(cat "$work/torchrun.out")"
[[ -s $work/tr-dumps.agent/findings.json ]] || fail "torchrun: findings not kept"
ok "collscope-torchrun: agent healthy during training, ingested $trec records, stopped cleanly, exit status 7 and arguments passed through"

# ---- 6. Kubernetes -------------------------------------------------------------------------
if python3 -c 'import yaml' 2>/dev/null; then
  if python3 - "$deploy/kubernetes" <<'PY'; then
import re, sys, pathlib, yaml
root = pathlib.Path(sys.argv[1])
errors = []
def err(m): errors.append(m)
docs = {}
for f in sorted(root.glob("*.yaml")):
    for d in yaml.safe_load_all(f.read_text()):
        if d is None: continue
        for k in ("apiVersion", "kind", "metadata"):
            if k not in d: err(f"{f.name}: a document without {k}")
        docs.setdefault(d["kind"], []).append((f.name, d))
def pod_spec(d):
    return d["spec"]["template"]["spec"] if d["kind"] in ("DaemonSet", "Job", "Deployment") else d["spec"]
def check_pod(name, spec):
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for c in spec.get("initContainers", []) + spec["containers"]:
        cname = f'{name}/{c["name"]}'
        if not c.get("image"): err(f"{cname}: no image")
        defined = set()
        for e in c.get("env", []):
            for ref in re.findall(r"\$\((\w+)\)", str(e.get("value", ""))):
                if ref not in defined: err(f"{cname}: env {e['name']} uses $({ref}) before it is defined")
            defined.add(e["name"])
        for ref in re.findall(r"\$\((\w+)\)", " ".join(map(str, c.get("args", []) + c.get("command", [])))):
            if ref not in defined: err(f"{cname}: args use $({ref}), not in env")
        for m in c.get("volumeMounts", []):
            if m["name"] not in vols: err(f"{cname}: mount of undefined volume {m['name']}")
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        for probe in ("livenessProbe", "startupProbe", "readinessProbe"):
            p = c.get(probe)
            if p and "httpGet" in p:
                port = p["httpGet"]["port"]
                if isinstance(port, str) and port not in ports: err(f"{cname}: {probe} port {port} not declared")
        res = c.get("resources", {})
        if not res.get("limits") and "nvidia.com/gpu" not in str(res): err(f"{cname}: no resource limits")
        if "0.0.0.0" in " ".join(map(str, c.get("args", []))): err(f"{cname}: listens on 0.0.0.0")
    for v in vols.values():
        hp = v.get("hostPath")
        if hp and hp.get("type") not in ("", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"):
            err(f"{name}: hostPath {v['name']} type {hp.get('type')}")
ds = [d for _, d in docs.get("DaemonSet", [])]
if len(ds) != 1: err(f"expected one DaemonSet, found {len(ds)}")
for d in ds:
    spec = pod_spec(d)
    check_pod("DaemonSet", spec)
    if d["spec"]["selector"]["matchLabels"].items() - d["spec"]["template"]["metadata"]["labels"].items():
        err("DaemonSet selector does not match its template's labels")
    if spec.get("serviceAccountName") or spec.get("automountServiceAccountToken") is not False:
        err("DaemonSet: expected no ServiceAccount and no token")
    agent = spec["containers"][0]
    args = agent["args"]
    for flag in ("--watch", "--db", "--listen"):
        if flag not in args: err(f"agent args lack {flag}")
    if agent["livenessProbe"]["httpGet"]["path"] != "/healthz": err("liveness probe is not /healthz")
    listen = args[args.index("--listen") + 1]
    if listen != "$(POD_IP):9464": err(f"agent listens on {listen}, not the pod IP")
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    watch = args[args.index("--watch") + 1]
    db = args[args.index("--db") + 1]
    def mount_of(path):
        best = max((p for p in mounts if path == p or path.startswith(p.rstrip("/") + "/")), key=len, default=None)
        return mounts.get(best)
    for what, path, ro in (("--watch", watch, True), ("--db", db, False)):
        m = mount_of(path)
        if not m: err(f"{what} {path} is on no volume"); continue
        if "hostPath" not in vols[m["name"]]: err(f"{what} {path} is not on a hostPath volume")
        if bool(m.get("readOnly")) != ro: err(f"{what} {path}: readOnly should be {ro}")
    if not mount_of(agent["command"][0]): err("the collscope command is on no volume")
    lim = agent["resources"]["limits"]
    if "cpu" not in lim or "memory" not in lim: err("agent: cpu and memory limits expected")
cm = {d["metadata"]["name"]: d for _, d in docs.get("ConfigMap", [])}
if "NCCL_PROFILER_PLUGIN" not in cm.get("collscope-capture", {}).get("data", {}):
    err("ConfigMap collscope-capture lacks NCCL_PROFILER_PLUGIN")
for _, d in docs.get("Job", []):
    spec = pod_spec(d)
    check_pod("Job", spec)
    c = spec["containers"][0]
    if {"configMapRef": {"name": "collscope-capture"}} not in c.get("envFrom", []): err("Job: no envFrom collscope-capture")
    env = {e["name"]: e.get("value") for e in c["env"]}
    dump = env.get("NCCL_INSPECTOR_DUMP_DIR", "")
    agent_args = ds[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    if not dump.startswith(agent_args[agent_args.index("--watch") + 1] + "/"):
        err(f"Job dump folder {dump} is not under the agent's --watch")
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    if "/var/lib/collscope/dumps" not in paths or "/opt/collscope" not in paths: err("Job: hostPath volumes missing")
    for k, v in cm["collscope-capture"]["data"].items():
        if v.startswith("/opt/collscope/") and not any(m["mountPath"] == "/opt/collscope" for m in c["volumeMounts"]):
            err(f"{k} points into /opt/collscope, which the Job does not mount")
for e in errors: print("  " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
    ok "Kubernetes manifests parse and pass the structural checks"
  else
    fail "Kubernetes manifests"
  fi
  echo "SKIP: no Kubernetes API server here: the manifests are not validated against its schema (kubectl --dry-run=server)"
else
  echo "SKIP: python3 yaml missing: only a text check of the manifests"
  grep -q 'path: /healthz' "$deploy/kubernetes/agent-daemonset.yaml" || fail "no /healthz probe"
fi

# ---- 7. systemd ----------------------------------------------------------------------------
unit=$deploy/systemd/collscope-agent.service
for key in ExecStart= Restart=on-failure KillSignal=SIGTERM ProtectSystem=strict ReadWritePaths= \
  StateDirectory= User= NoNewPrivileges=yes EnvironmentFile=; do
  grep -q "^$key" "$unit" || fail "unit lacks $key"
done
mkdir -p "$work/systemd"
sed "s|/opt/collscope|$prefix|g" "$unit" >"$work/systemd/collscope-agent.service"
if command -v systemd-analyze >/dev/null 2>&1; then
  if systemd-analyze verify "$work/systemd/collscope-agent.service" >"$work/verify.out" 2>&1; then
    ok "systemd-analyze verify"
  else
    fail "systemd-analyze verify: $(cat "$work/verify.out")"
  fi
else
  echo "SKIP: systemd-analyze not installed: the unit's keys were checked, not verified"
fi
# Its ExecStart with the example env file, expanded as systemd does ($VAR split, ${VAR} whole),
# against a temporary store and dump folder, for one tick.
python3 - "$work/systemd/collscope-agent.service" "$deploy/systemd/collscope-agent.env.example" \
  "$work/systemd" >"$work/systemd/cmd" <<'PY' || fail "could not expand ExecStart"
import re, sys, shlex
unit, envf, tmp = sys.argv[1:4]
env = {}
for line in open(envf):
    line = line.strip()
    if line and not line.startswith("#"):
        k, v = line.split("=", 1); env[k] = v
env["COLLSCOPE_WATCH"] = tmp + "/dumps"
env["COLLSCOPE_LISTEN"] = "127.0.0.1:0"
cmd = next(l.split("=", 1)[1] for l in open(unit) if l.startswith("ExecStart="))
out = []
for word in cmd.split():
    m = re.fullmatch(r"\$(\w+)", word)
    if m: out += env.get(m.group(1), "").split(); continue
    out.append(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word).replace("/var/lib/collscope", tmp + "/state"))
print(shlex.join(out + ["--ticks", "1"]))
PY
mkdir -p "$work/systemd/dumps" "$work/systemd/state"
simulate "$work/systemd/dumps"
if eval "$(cat "$work/systemd/cmd")" >"$work/systemd/agent.out" 2>&1; then
  ok "the unit's ExecStart runs one tick: $(grep -c . "$work/systemd/agent.out") lines of output"
else
  fail "the unit's ExecStart failed: $(cat "$work/systemd/cmd"): $(cat "$work/systemd/agent.out")"
fi
[[ -s $work/systemd/state/agent.duckdb ]] || fail "the unit's store was not written"

if ((failures)); then
  echo "deploy_test: $failures failure(s)" >&2
  exit 1
fi
echo "deploy_test: all passed"
