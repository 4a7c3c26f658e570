#!/usr/bin/env bash
# Sets up, builds and runs every test: a release build, then the same tests under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/setup.sh build
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600)
scripts/setup.sh build-asan -DCOLLSCOPE_SANITIZE=ON -DCOLLSCOPE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs" --timeout 900)
# Capture code runs on NCCL's and the training loop's threads: its tests also run under ThreadSanitizer.
cmake -S . -B build-tsan -DCOLLSCOPE_TSAN=ON -DCOLLSCOPE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-tsan -j"$jobs" --target capture_nccl_plugin_test capture_nccl_format_test \
  capture_annotate_test capture_annotate_lines_test
(cd build-tsan && ctest --output-on-failure -j"$jobs" --timeout 900 -R '^capture_')
# Every reader under libFuzzer for 30 s each (bench/fuzz.sh runs them for 10 minutes).
bench/fuzz.sh 30
