#!/bin/bash
# SLURM node epilog: stop the job's `collscope agent` started by prolog.sh, cleanly, and report
# (docs/deploy.md, "SLURM"). Same site settings as the prolog (/etc/collscope/slurm.conf).
#
# 1. drain: the job's processes are gone, so wait until the agent finished COLLSCOPE_DRAIN_TICKS
#    more ticks (what they wrote last is ingested and, for a host agent, shipped as summaries),
#    at most COLLSCOPE_DRAIN_TIMEOUT seconds;
# 2. keep the agent's last /metrics (and /findings of a single agent);
# 3. SIGTERM, wait up to COLLSCOPE_STOP_TIMEOUT seconds for it to exit (SIGKILL after);
# 4. report: one line with the exit status, records ingested, summary files and errors (stderr
#    and syslog), and the agent's log, metrics, findings (and, single mode, its store) copied to
#    SHARED/JOBID/agents/ as <host>.*, written by the job's user;
# 5. remove the per-job state folder (the pid file with it) unless COLLSCOPE_KEEP_STATE=1.
# Never fails (a failing epilog drains the node), unless COLLSCOPE_STRICT=1 and the agent did
# not exit cleanly.
set -euo pipefail
umask 022
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

conf=${COLLSCOPE_SLURM_CONF:-/etc/collscope/slurm.conf}
if [[ -r $conf ]]; then
  # shellcheck source=/dev/null
  source "$conf"
fi
: "${COLLSCOPE_PREFIX:=/opt/collscope}"
: "${COLLSCOPE_SHARED_ROOT:=/shared/collscope}"
: "${COLLSCOPE_STATE_DIR:=/run/collscope}"
: "${COLLSCOPE_HOST:=$(hostname)}"
: "${COLLSCOPE_DRAIN_TICKS:=2}"
: "${COLLSCOPE_DRAIN_TIMEOUT:=15}"
: "${COLLSCOPE_STOP_TIMEOUT:=20}"
: "${COLLSCOPE_KEEP_STATE:=0}"
: "${COLLSCOPE_STRICT:=0}"
: "${COLLSCOPE_SYSLOG:=1}"
CS_LOG_TAG="collscope-epilog[job ${SLURM_JOB_ID:-?}]"
CS_SYSLOG=$COLLSCOPE_SYSLOG
# shellcheck source=../lib/collscope-lib.sh
source "$COLLSCOPE_PREFIX/share/collscope/collscope-lib.sh"
# Anything unexpected: log it and, unless strict, exit 0 (a failing epilog drains the node).
trap 'rc=$?; cs_log "unexpected failure (status $rc) at line $LINENO"; [[ $COLLSCOPE_STRICT == 1 ]] && exit "$rc"; exit 0' ERR

job=${SLURM_JOB_ID:-}
[[ $job =~ ^[0-9]+$ ]] || { cs_log "SLURM_JOB_ID '${job}' is not a job id"; exit 0; }
[[ $COLLSCOPE_HOST =~ ^[A-Za-z0-9._-]+$ ]] || { cs_log "host name '$COLLSCOPE_HOST' has unexpected characters"; exit 0; }
dir=$COLLSCOPE_STATE_DIR/job-$job
[[ -d $dir ]] || exit 0  # the prolog started nothing here
job_root=$COLLSCOPE_SHARED_ROOT/$job
mode=$(cat "$dir/mode" 2>/dev/null || echo unknown)

# The agent and its store belong to the job's user (the owner of the store folder); signals and
# writes to the shared folder go as that user.
uid=$(stat -c %u "$dir/store" 2>/dev/null || id -u)
gid=$(stat -c %g "$dir/store" 2>/dev/null || id -g)
as_user() {
  if [[ $uid != "$(id -u)" ]]; then
    setpriv "--reuid=$uid" "--regid=$gid" --init-groups -- "$@"
  else
    "$@"
  fi
}

if cs_agent_pid "$dir" >/dev/null; then
  cs_agent_drain "$dir" "$COLLSCOPE_DRAIN_TICKS" "$COLLSCOPE_DRAIN_TIMEOUT"
  cs_http "$dir" /metrics >"$dir/final.metrics" 2>/dev/null || rm -f -- "$dir/final.metrics"
  if [[ $mode == single ]]; then
    cs_http "$dir" /findings >"$dir/final.findings.json" 2>/dev/null || rm -f -- "$dir/final.findings.json"
  fi
fi
rc=$(CS_SIGNAL_AS="$uid $gid" cs_agent_stop "$dir" "$COLLSCOPE_STOP_TIMEOUT")

value() { awk -v n="$1" '$1 == n { print $2 }' "$dir/final.metrics" 2>/dev/null; }
records=$(value collscope_agent_records_ingested_total)
files=$(value collscope_agent_summary_files_total)
errors=$(value collscope_agent_errors_total)
clean=no
[[ $rc == 0 ]] && clean=yes
cs_log "$mode agent stopped: exit status ${rc:-unknown} (clean: $clean), records ingested ${records:-?}, summary files ${files:-?}, tick errors ${errors:-?}"

# The report beside the job's data, as the job's user.
if as_user mkdir -p -- "$job_root/agents" 2>/dev/null; then
  {
    echo "host=$COLLSCOPE_HOST mode=$mode exit_status=${rc:-unknown} clean=$clean"
    echo "records_ingested=${records:-} summary_files=${files:-} tick_errors=${errors:-}"
  } | as_user tee "$job_root/agents/$COLLSCOPE_HOST.report" >/dev/null || true
  for f in agent.log final.metrics final.findings.json; do
    if [[ -r $dir/$f ]]; then
      dst=${f#final.}
      as_user tee "$job_root/agents/$COLLSCOPE_HOST.$dst" <"$dir/$f" >/dev/null || true
    fi
  done
  if [[ $mode == single && -r $dir/store/agent.duckdb ]]; then
    as_user cp -- "$dir/store/agent.duckdb" "$job_root/agents/$COLLSCOPE_HOST.duckdb" || true
  fi
else
  cs_log "cannot write $job_root/agents; the report stays in $dir"
  COLLSCOPE_KEEP_STATE=1
fi

if [[ $COLLSCOPE_KEEP_STATE != 1 ]]; then
  rm -rf -- "$dir"
fi
if [[ $COLLSCOPE_STRICT == 1 && $clean != yes ]]; then exit 1; fi
exit 0
