#!/usr/bin/env bash
# collscope-torchrun: torchrun with collscope beside it, on one node (docs/deploy.md, "torchrun").
#   collscope-torchrun --nproc-per-node 8 train.py --your --args
# takes exactly torchrun's arguments. It
#   1. sets the capture environment every worker inherits (NCCL profiler plugin, CUPTI kernel
#      summaries, step/phase annotations), writing into COLLSCOPE_DUMP_DIR;
#   2. starts `collscope agent` over that folder (loopback only) and waits until it is healthy;
#   3. runs torchrun (SIGINT/SIGTERM are passed on to it);
#   4. when training exits, lets the agent ingest what was written last (two more ticks), keeps its
#      last /findings and /metrics, stops it with SIGTERM and says what it saw;
#   5. exits with torchrun's exit status.
# Settings (environment):
#   COLLSCOPE_PREFIX      install prefix (default: the one this script is installed in, else /opt/collscope)
#   COLLSCOPE_DUMP_DIR    dump folder (default ./collscope-<date>-<pid>)
#   COLLSCOPE_STATE_DIR   agent state: pid, log, store, final findings (default DUMP_DIR.agent)
#   COLLSCOPE_MODE        single (default): a full agent; host: a host agent shipping summaries to
#                         COLLSCOPE_SUMMARIES (shared) for an aggregator (multi-node, one wrapper
#                         per node); off: no agent (capture only)
#   COLLSCOPE_LISTEN      default 127.0.0.1:9464 ('' serves nothing; 127.0.0.1:0 a free port)
#   COLLSCOPE_INTERVAL    default 5s
#   COLLSCOPE_AGENT_ARGS  more agent options, split on spaces (e.g. --alertmanager URL)
#   COLLSCOPE_CAPTURE, COLLSCOPE_PROM   what to capture (see collscope-lib.sh)
#   COLLSCOPE_STRICT      1: do not train when the agent cannot start (default 0: train anyway)
#   TORCHRUN              the launcher (default torchrun)
set -euo pipefail
here=$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)
if [[ -z ${COLLSCOPE_PREFIX:-} ]]; then
  if [[ -r $here/../share/collscope/collscope-lib.sh ]]; then
    COLLSCOPE_PREFIX=$(cd -- "$here/.." && pwd)
  else
    COLLSCOPE_PREFIX=/opt/collscope
  fi
fi
lib=$COLLSCOPE_PREFIX/share/collscope/collscope-lib.sh
[[ -r $lib ]] || lib=$here/../lib/collscope-lib.sh  # run from the source tree
# shellcheck source=../lib/collscope-lib.sh
source "$lib"
CS_LOG_TAG=collscope-torchrun
export COLLSCOPE_PREFIX

: "${COLLSCOPE_DUMP_DIR:=$PWD/collscope-$(date +%Y%m%d-%H%M%S)-$$}"
: "${COLLSCOPE_STATE_DIR:=$COLLSCOPE_DUMP_DIR.agent}"
: "${COLLSCOPE_MODE:=single}"
: "${COLLSCOPE_LISTEN:=127.0.0.1:9464}"
: "${COLLSCOPE_INTERVAL:=5s}"
: "${COLLSCOPE_AGENT_ARGS:=}"
: "${COLLSCOPE_STRICT:=0}"
: "${TORCHRUN:=torchrun}"
bin=$COLLSCOPE_PREFIX/bin/collscope
dir=$COLLSCOPE_STATE_DIR

agent=0
if [[ $COLLSCOPE_MODE != off ]]; then
  mkdir -p -- "$dir" "$COLLSCOPE_DUMP_DIR"
  args=(agent --watch "$COLLSCOPE_DUMP_DIR" --listen "$COLLSCOPE_LISTEN" --interval "$COLLSCOPE_INTERVAL")
  case $COLLSCOPE_MODE in
    single) args+=(--db "$dir/agent.duckdb") ;;
    host)
      : "${COLLSCOPE_SUMMARIES:?COLLSCOPE_MODE=host needs COLLSCOPE_SUMMARIES, the shared folder of the aggregator}"
      mkdir -p -- "$COLLSCOPE_SUMMARIES"
      args+=(--db "$dir/host.duckdb" --host "$(hostname)" --export-summaries "$COLLSCOPE_SUMMARIES" --no-diagnose) ;;
    *) cs_log "COLLSCOPE_MODE '$COLLSCOPE_MODE' is not single, host or off"; exit 2 ;;
  esac
  if [[ -n $COLLSCOPE_AGENT_ARGS ]]; then
    read -r -a extra <<<"$COLLSCOPE_AGENT_ARGS"
    args+=("${extra[@]}")
  fi
  if [[ ! -x $bin ]]; then
    cs_log "$bin not found: training without the agent"
    [[ $COLLSCOPE_STRICT == 1 ]] && exit 1
  elif cs_agent_start "$dir" nice -n 10 "$bin" "${args[@]}"; then
    agent=1
    ready=0
    cs_agent_wait_ready "$dir" "${COLLSCOPE_START_TIMEOUT:-15}" || ready=$?
    if ((ready == 1)); then
      agent=0
      [[ $COLLSCOPE_STRICT == 1 ]] && exit 1
      cs_log "training without the agent (see $dir/agent.log)"
    else
      cs_log "agent (pid $(<"$dir/agent.pid")) watching $COLLSCOPE_DUMP_DIR, serving $(cat "$dir/listen" 2>/dev/null || echo nothing)"
    fi
  fi
fi

stop_agent() {
  ((agent)) || return 0
  agent=0
  cs_agent_drain "$dir" 2 "${COLLSCOPE_DRAIN_TIMEOUT:-30}"
  cs_http "$dir" /metrics >"$dir/final.metrics" 2>/dev/null || rm -f -- "$dir/final.metrics"
  cs_http "$dir" /findings >"$dir/findings.json" 2>/dev/null || rm -f -- "$dir/findings.json"
  local rc records findings
  rc=$(cs_agent_stop "$dir" 20)
  records=$(awk '$1 == "collscope_agent_records_ingested_total" { print $2 }' "$dir/final.metrics" 2>/dev/null || true)
  findings=$(awk '$1 == "collscope_findings_active" { print $2 }' "$dir/final.metrics" 2>/dev/null || true)
  cs_log "agent stopped: exit status ${rc:-unknown}, records ingested ${records:-?}, active findings ${findings:-?}"
  if [[ $COLLSCOPE_MODE == single ]]; then
    cs_log "findings: $dir/findings.json; report: $bin report --db $dir/agent.duckdb -o report.html"
  fi
}
trap 'stop_agent' EXIT

# The workers inherit the capture environment; the agent above was started without it.
cs_capture_env "$COLLSCOPE_DUMP_DIR"
"$TORCHRUN" "$@" &
train=$!
# Pass SIGINT/SIGTERM on to torchrun (it stops its workers) and keep waiting for it.
trap 'kill -INT "$train" 2>/dev/null || true' INT
trap 'kill -TERM "$train" 2>/dev/null || true' TERM
rc=0
while :; do
  wait "$train" && { rc=0; break; } || rc=$?
  # wait returns >128 when a trapped signal interrupted it; torchrun may still be running.
  kill -0 "$train" 2>/dev/null || break
done
trap - INT TERM
cs_log "training exited with status $rc"
stop_agent
exit "$rc"
