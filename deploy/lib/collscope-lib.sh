# shellcheck shell=bash
# collscope deployment library: sourced (never run) by the SLURM prolog, epilog and batch script,
# the torchrun launcher and anything else that starts `collscope agent` beside a job.
# Installed as PREFIX/share/collscope/collscope-lib.sh by deploy/install.sh. docs/deploy.md.
#
# One agent = one state folder (local disk, never the shared file system) holding
#   agent.pid   the agent's pid (written by its supervisor, read by whoever stops it)
#   agent.rc    the agent's exit status, written by the supervisor when the agent exits
#   agent.log   the agent's stdout and stderr
#   listen      ADDRESS:PORT the agent serves on (absent with --listen '')
# The supervisor is a small bash process that starts the agent, records its pid, waits for it
# and records its exit status, so a stop from another process (the epilog) still learns whether
# the agent exited cleanly.

# Logging: one line on stderr (and syslog through logger when CS_SYSLOG=1).
cs_log() {
  local msg
  msg="${CS_LOG_TAG:-collscope}: $*"
  printf '%s %s\n' "$(date '+%Y-%m-%dT%H:%M:%S%z')" "$msg" >&2
  if [[ ${CS_SYSLOG:-0} == 1 ]] && command -v logger >/dev/null 2>&1; then
    logger -t "${CS_LOG_TAG:-collscope}" -- "$*" 2>/dev/null || true
  fi
}

# cs_capture_env DUMP_DIR: export the environment that loads collscope's capture into every
# training process started from this shell, writing into DUMP_DIR (created).
#   COLLSCOPE_PREFIX   install prefix (default /opt/collscope)
#   COLLSCOPE_LIBDIR, COLLSCOPE_PYTHONDIR   the libraries' and the Python package's folders (default
#                      PREFIX/lib and PREFIX/python, deploy/install.sh's layout; `cmake --install`
#                      installs this file with its own folders as the defaults, docs/install.md)
#   COLLSCOPE_CAPTURE  which parts, any of: nccl cupti annotate (default: all three)
#   COLLSCOPE_PROM     1: also the NCCL Inspector Prometheus textfile (NCCL_INSPECTOR_PROM_DUMP=1)
# A part whose library is missing is left out, with a warning, rather than pointing a training
# process at a file that does not exist.
cs_capture_env() {
  local dump=${1:?cs_capture_env: dump folder}
  local prefix=${COLLSCOPE_PREFIX:-/opt/collscope}
  local libdir=${COLLSCOPE_LIBDIR:-$prefix/lib}
  local pydir=${COLLSCOPE_PYTHONDIR:-$prefix/python}
  local parts=" ${COLLSCOPE_CAPTURE:-nccl cupti annotate} "
  mkdir -p -- "$dump" || { cs_log "cannot create the dump folder $dump"; return 1; }
  export NCCL_INSPECTOR_DUMP_DIR="$dump" COLLSCOPE_DUMP_DIR="$dump"
  if [[ $parts == *" nccl "* ]]; then
    if [[ -r $libdir/libnccl-profiler-collscope.so ]]; then
      export NCCL_PROFILER_PLUGIN="$libdir/libnccl-profiler-collscope.so"
      if [[ ${COLLSCOPE_PROM:-0} == 1 ]]; then
        export NCCL_INSPECTOR_PROM_DUMP=1
      fi
    else
      cs_log "warning: $libdir/libnccl-profiler-collscope.so missing: NCCL capture off"
    fi
  fi
  if [[ $parts == *" cupti "* ]]; then
    if [[ -r $libdir/libcollscope-cupti.so ]]; then
      export CUDA_INJECTION64_PATH="$libdir/libcollscope-cupti.so"
    else
      cs_log "warning: $libdir/libcollscope-cupti.so missing: kernel summaries off"
    fi
  fi
  if [[ $parts == *" annotate "* ]]; then
    if [[ -r $libdir/libcollscope-annotate.so && -d $pydir/collscope ]]; then
      export COLLSCOPE_ANNOTATE_LIB="$libdir/libcollscope-annotate.so"
      export PYTHONPATH="$pydir${PYTHONPATH:+:$PYTHONPATH}"
    else
      cs_log "warning: the annotation package is not in $pydir: step/phase annotations off"
    fi
  fi
}

# cs_agent_start STATE_DIR COMMAND...: start COMMAND (a `collscope agent ...` line) under a
# supervisor, in the background, with its output in STATE_DIR/agent.log; returns once the pid is
# recorded. CS_DETACH=1 starts it in a session of its own (setsid), so it outlives the caller and
# the caller's process group (a SLURM prolog). CS_RUN_UID/CS_RUN_GID (numbers): run COMMAND as
# that user (setpriv), while the supervisor and the state files stay the caller's.
cs_agent_start() {
  local dir=${1:?cs_agent_start: state folder}
  shift
  local -a pre=()
  if [[ -n ${CS_RUN_UID:-} && ${CS_RUN_UID} != "$(id -u)" ]]; then
    pre=(setpriv "--reuid=$CS_RUN_UID" "--regid=${CS_RUN_GID:?CS_RUN_GID}" --init-groups --)
  fi
  rm -f -- "$dir/agent.pid" "$dir/agent.rc" "$dir/listen"
  # shellcheck disable=SC2016  # expanded by the supervisor, not here
  local supervisor='dir=$1; shift
    "$@" >"$dir/agent.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/agent.pid.tmp" && mv -f "$dir/agent.pid.tmp" "$dir/agent.pid"
    trap "" INT TERM HUP
    rc=0; wait "$pid" || rc=$?
    echo "$rc" >"$dir/agent.rc.tmp" && mv -f "$dir/agent.rc.tmp" "$dir/agent.rc"'
  if [[ ${CS_DETACH:-0} == 1 ]]; then
    setsid bash -c "$supervisor" collscope-agent-supervisor "$dir" "${pre[@]}" "$@" \
      </dev/null >/dev/null 2>&1 &
  else
    bash -c "$supervisor" collscope-agent-supervisor "$dir" "${pre[@]}" "$@" </dev/null >/dev/null 2>&1 &
  fi
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s $dir/agent.pid ]] && return 0
    sleep 0.05
  done
  cs_log "the agent's supervisor did not record a pid in $dir"
  return 1
}

# cs_agent_pid STATE_DIR: print the pid when it is this state folder's agent and alive; the
# command line must name STATE_DIR (its --db is there), so a recycled pid is never signalled.
cs_agent_pid() {
  local dir=${1:?} pid
  [[ -r $dir/agent.pid ]] || return 1
  pid=$(<"$dir/agent.pid")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *collscope*" agent "*"$dir/"* ]] || return 1
  echo "$pid"
}

# cs_http STATE_DIR PATH: GET http://LISTEN/PATH from the agent; prints the body, fails on an
# HTTP error (the body of a 503 /healthz still goes to stdout with CS_HTTP_ANY=1).
cs_http() {
  local dir=${1:?} path=${2:?} addr
  [[ -r $dir/listen ]] || return 1
  addr=$(<"$dir/listen")
  command -v curl >/dev/null 2>&1 || return 1
  if [[ ${CS_HTTP_ANY:-0} == 1 ]]; then
    curl -sS --max-time 5 "http://$addr$path"
  else
    curl -fsS --max-time 5 "http://$addr$path"
  fi
}

# cs_metric STATE_DIR NAME: the value of an unlabelled series on the agent's /metrics.
cs_metric() {
  cs_http "$1" /metrics | awk -v n="$2" '$1 == n { print $2; found = 1 } END { exit !found }'
}

# cs_agent_wait_ready STATE_DIR TIMEOUT_S: wait until the agent serves (records STATE_DIR/listen)
# and /healthz answers 200 (or, with --listen '', until it says what it watches).
# 0: ready; 1: the agent exited (its log's tail is logged); 2: running but not healthy in time.
cs_agent_wait_ready() {
  local dir=${1:?} timeout=${2:-10} deadline addr
  deadline=$((SECONDS + timeout))
  while ((SECONDS <= deadline)); do
    if [[ -e $dir/agent.rc ]]; then
      cs_log "the agent exited with status $(<"$dir/agent.rc"): $(tail -n 3 "$dir/agent.log" 2>/dev/null | tr '\n' ' ')"
      return 1
    fi
    if [[ ! -e $dir/listen ]]; then
      addr=$(sed -n 's/^serving .* on \([^ ]*:[0-9][0-9]*\)$/\1/p' "$dir/agent.log" 2>/dev/null | tail -n 1)
      if [[ -n $addr ]]; then
        echo "$addr" >"$dir/listen.tmp" && mv -f "$dir/listen.tmp" "$dir/listen"
      elif grep -q '^store ' "$dir/agent.log" 2>/dev/null && ! grep -q '^serving ' "$dir/agent.log"; then
        # --listen '': nothing to probe; running and past its start-up lines is all there is.
        sleep 0.5
        [[ -e $dir/agent.rc ]] && continue
        return 0
      fi
    fi
    if [[ -e $dir/listen ]] && cs_http "$dir" /healthz >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  cs_log "the agent is running but not healthy after ${timeout} s: $(CS_HTTP_ANY=1 cs_http "$dir" /healthz 2>&1 | head -n 2 | tr '\n' ' ')"
  return 2
}

# cs_agent_drain STATE_DIR TICKS TIMEOUT_S: after the job's writers stopped, wait until the agent
# has finished TICKS more ticks (so what was written last is ingested, and exported), at most
# TIMEOUT_S. Needs the agent to serve /metrics; otherwise returns at once.
cs_agent_drain() {
  local dir=${1:?} ticks=${2:-2} timeout=${3:-15} start now deadline
  start=$(cs_metric "$dir" collscope_agent_ticks_total 2>/dev/null) || return 0
  deadline=$((SECONDS + timeout))
  while ((SECONDS <= deadline)); do
    now=$(cs_metric "$dir" collscope_agent_ticks_total 2>/dev/null) || return 0
    if awk -v a="$now" -v b="$start" -v t="$ticks" 'BEGIN { exit !(a - b >= t) }'; then
      return 0
    fi
    sleep 0.2
  done
  cs_log "drain: the agent did not finish $ticks ticks in ${timeout} s"
}

# cs_agent_stop STATE_DIR TIMEOUT_S: SIGTERM the agent (it finishes its tick, flushes
# remote-write for at most 2 s and exits 0), wait for its supervisor to record the exit status,
# SIGKILL after TIMEOUT_S. Prints the exit status ("" when there was no agent to stop); removes
# the pid file. CS_SIGNAL_AS="UID GID": signal as that user (the kernel then refuses to signal
# anything the user does not own).
cs_agent_stop() {
  local dir=${1:?} timeout=${2:-20} pid deadline
  local -a as=()
  if [[ -n ${CS_SIGNAL_AS:-} ]]; then
    local uid gid
    read -r uid gid <<<"$CS_SIGNAL_AS"
    [[ $uid != "$(id -u)" ]] && as=(setpriv "--reuid=$uid" "--regid=$gid" --clear-groups --)
  fi
  if pid=$(cs_agent_pid "$dir"); then
    "${as[@]}" kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + timeout))
    while ((SECONDS <= deadline)) && [[ ! -e $dir/agent.rc ]] && kill -0 "$pid" 2>/dev/null; do
      sleep 0.1
    done
    if [[ ! -e $dir/agent.rc ]] && kill -0 "$pid" 2>/dev/null; then
      cs_log "the agent (pid $pid) did not exit ${timeout} s after SIGTERM: SIGKILL"
      "${as[@]}" kill -KILL "$pid" 2>/dev/null || true
    fi
    # The supervisor writes the status right after the agent exits.
    for ((deadline = 0; deadline < 50; deadline++)); do
      [[ -e $dir/agent.rc ]] && break
      sleep 0.1
    done
  fi
  rm -f -- "$dir/agent.pid"
  [[ -e $dir/agent.rc ]] && cat -- "$dir/agent.rc"
  return 0
}
