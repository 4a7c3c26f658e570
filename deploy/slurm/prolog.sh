#!/bin/bash
# SLURM node prolog: start a per-node `collscope agent` for the job (docs/deploy.md, "SLURM").
#
# slurm.conf:  Prolog=/opt/collscope/share/collscope/slurm/prolog.sh
#              Epilog=/opt/collscope/share/collscope/slurm/epilog.sh
#              PrologFlags=Alloc        # run at allocation, on every node, before the job starts
# Site settings: /etc/collscope/slurm.conf (COLLSCOPE_SLURM_CONF names another), a bash file of
# VAR=value lines; see collscope-slurm.conf.example.
#
# Modes (COLLSCOPE_MODE):
#   host    host agent: ingests this node's dump files only and ships record summaries to
#           SHARED/JOBID/summaries; the batch script's aggregator diagnoses (docs/scale.md)
#   single  one full agent (diagnosis, metrics, alerts) over the job's dumps: one-node jobs
#   auto    single when the job has one node, else host (the default)
#   off     do nothing
# Runs as root (SlurmdUser); the agent runs as the job's user, niced, outside the job's cgroup,
# listening on loopback only. A failed start is logged and never fails the prolog (a failing
# prolog drains the node), unless COLLSCOPE_STRICT=1.
set -euo pipefail
umask 022
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # SLURM sets no PATH for prologs

conf=${COLLSCOPE_SLURM_CONF:-/etc/collscope/slurm.conf}
if [[ -r $conf ]]; then
  # shellcheck source=/dev/null
  source "$conf"
fi
: "${COLLSCOPE_PREFIX:=/opt/collscope}"
: "${COLLSCOPE_BIN:=$COLLSCOPE_PREFIX/bin/collscope}"
: "${COLLSCOPE_SHARED_ROOT:=/shared/collscope}"
: "${COLLSCOPE_STATE_DIR:=/run/collscope}"
: "${COLLSCOPE_MODE:=auto}"
: "${COLLSCOPE_LISTEN:=127.0.0.1:9464}"
: "${COLLSCOPE_INTERVAL:=5s}"
: "${COLLSCOPE_HOST:=$(hostname)}"
: "${COLLSCOPE_RUN_AS:=job}"
: "${COLLSCOPE_NICE:=10}"
: "${COLLSCOPE_AGENT_ARGS:=}"
: "${COLLSCOPE_START_TIMEOUT:=10}"
: "${COLLSCOPE_STRICT:=0}"
: "${COLLSCOPE_SYSLOG:=1}"
CS_LOG_TAG="collscope-prolog[job ${SLURM_JOB_ID:-?}]"
CS_SYSLOG=$COLLSCOPE_SYSLOG
# shellcheck source=../lib/collscope-lib.sh
source "$COLLSCOPE_PREFIX/share/collscope/collscope-lib.sh"
# Anything unexpected: log it and, unless strict, exit 0 (a failing prolog drains the node).
trap 'rc=$?; cs_log "unexpected failure (status $rc) at line $LINENO"; [[ $COLLSCOPE_STRICT == 1 ]] && exit "$rc"; exit 0' ERR

fail() {
  cs_log "$*"
  if [[ $COLLSCOPE_STRICT == 1 ]]; then exit 1; fi
  exit 0
}

job=${SLURM_JOB_ID:-}
[[ $job =~ ^[0-9]+$ ]] || fail "SLURM_JOB_ID '${job}' is not a job id; nothing started"
[[ $COLLSCOPE_MODE == off ]] && exit 0
mode=$COLLSCOPE_MODE
if [[ $mode == auto ]]; then
  # A one-node hostlist is a bare name; several nodes are written with ',' or '[...]'.
  if [[ ${SLURM_JOB_NODELIST:-} == *[,\[]* ]]; then mode=host; else mode=single; fi
fi
[[ $mode == host || $mode == single ]] || fail "COLLSCOPE_MODE '$COLLSCOPE_MODE' is not host, single, auto or off"
[[ -x $COLLSCOPE_BIN ]] || fail "$COLLSCOPE_BIN is not an executable; nothing started"
[[ $COLLSCOPE_HOST =~ ^[A-Za-z0-9._-]+$ ]] || fail "host name '$COLLSCOPE_HOST' has unexpected characters"

# Who the agent runs as: the job's user (it reads what the job writes and writes the job's
# shared folder, where root is often squashed), unless COLLSCOPE_RUN_AS=root.
uid=$(id -u) gid=$(id -g)
if [[ $COLLSCOPE_RUN_AS == job && $(id -u) == 0 ]]; then
  [[ -n ${SLURM_JOB_UID:-}${SLURM_JOB_USER:-} ]] || fail "neither SLURM_JOB_UID nor SLURM_JOB_USER is set"
  uid=${SLURM_JOB_UID:-$(id -u "$SLURM_JOB_USER")}
  gid=${SLURM_JOB_GID:-$(id -g "$uid")}
fi
as_user() {
  if [[ $uid != "$(id -u)" ]]; then
    setpriv "--reuid=$uid" "--regid=$gid" --init-groups -- "$@"
  else
    "$@"
  fi
}

job_root=$COLLSCOPE_SHARED_ROOT/$job
dir=$COLLSCOPE_STATE_DIR/job-$job
install -d -m 0755 "$COLLSCOPE_STATE_DIR"
install -d -m 0755 "$dir"
install -d -m 0700 -o "$uid" -g "$gid" "$dir/store"
if pid=$(cs_agent_pid "$dir"); then
  cs_log "agent already running (pid $pid); nothing to do"
  exit 0
fi
# The job's shared folders, made by the job's user (works under root squash).
as_user mkdir -p -- "$job_root/dumps" "$job_root/agents" ||
  fail "cannot create $job_root/dumps as uid $uid"

args=(agent --watch "$job_root/dumps" --listen "$COLLSCOPE_LISTEN" --interval "$COLLSCOPE_INTERVAL")
if [[ $mode == host ]]; then
  as_user mkdir -p -- "$job_root/summaries" || fail "cannot create $job_root/summaries as uid $uid"
  args+=(--db "$dir/store/host.duckdb" --host "$COLLSCOPE_HOST"
    --export-summaries "$job_root/summaries" --no-diagnose)
else
  args+=(--db "$dir/store/agent.duckdb" --job "slurm-$job")
fi
if [[ -n $COLLSCOPE_AGENT_ARGS ]]; then
  read -r -a extra <<<"$COLLSCOPE_AGENT_ARGS"
  args+=("${extra[@]}")
fi
echo "$mode" >"$dir/mode"

CS_DETACH=1 CS_RUN_UID=$uid CS_RUN_GID=$gid \
  cs_agent_start "$dir" nice -n "$COLLSCOPE_NICE" "$COLLSCOPE_BIN" "${args[@]}" ||
  fail "the agent did not start"
rc=0
cs_agent_wait_ready "$dir" "$COLLSCOPE_START_TIMEOUT" || rc=$?
case $rc in
  0) cs_log "$mode agent started (pid $(<"$dir/agent.pid"), uid $uid) watching $job_root/dumps, serving $(cat "$dir/listen" 2>/dev/null || echo nothing)" ;;
  1) fail "$mode agent failed to start; see $dir/agent.log" ;;
  *) cs_log "$mode agent running (pid $(<"$dir/agent.pid")) but not healthy yet; see $dir/agent.log" ;;
esac
exit 0
