#!/usr/bin/env bash
# Installs the Debian packages collscope needs (when missing), then configures and builds.
# Usage: scripts/setup.sh [BUILD_DIR] [extra cmake arguments...]
# DuckDB 1.4.4 is fetched (pinned, checksummed) into BUILD_DIR by CMake unless a system one exists.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true

# Libraries come from Debian; tools may already be on the machine from elsewhere (an image's own
# Node.js, say), so those are installed only when their command is missing.
packages=(build-essential pkg-config ca-certificates
          libsimdjson-dev libcli11-dev libzstd-dev zlib1g-dev
          libgtest-dev libgmock-dev libbenchmark-dev chromium clang lld libclang-rt-14-dev
          libsnappy-dev libunwind-dev libdw-dev python3-dev file
          prometheus prometheus-alertmanager victoria-metrics)
declare -A tools=([cmake]=cmake [git]=git [python3]=python3 [npm]="nodejs npm")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
for t in "${!tools[@]}"; do
  command -v "$t" >/dev/null 2>&1 || missing+=(${tools[$t]})
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # The test servers (prometheus, alertmanager, victoria-metrics) are started by the tests on
  # loopback; their packages must not start system services listening on every address, so
  # service starts are refused (policy-rc.d 101) while they install, where no policy exists yet.
  policy=/usr/sbin/policy-rc.d
  own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy" && own_policy=1
  fi
  status=0
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
  [ -z "$own_policy" ] || $sudo rm -f "$policy"
  [ "$status" -eq 0 ] || exit "$status"
fi

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
