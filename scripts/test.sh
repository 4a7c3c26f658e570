#!/usr/bin/env bash
# Sets up, builds and runs every test: a release build, then the same tests under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# CTest runs $jobs tests at once: each DuckDB with one thread, not one per core, spends its CPU on
# the queries rather than on scheduling parallel plans over small stores (docs/cli.md).
export COLLSCOPE_DUCKDB_THREADS=1
# Each phase says how long it took: CI's time is the sum, and it varies between machines.
phase_start=$SECONDS
took() { echo "scripts/test.sh: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
# Line tables only (-g1): a backtrace still names every file and line, and GCC compiles the tree in
# about two thirds of the time full debug information takes (CI's time is mostly builds and tests).
scripts/setup.sh build "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
took "setup and the release build"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600)
took "the release tests"
# The sanitizer build is Clang's (it compiles about twice as fast as GCC's here) and holds the
# libFuzzer targets too: the tree is compiled twice, not three times. Debug (assertions on) at
# -O1, as AddressSanitizer's authors advise for speed (CI's time is mostly this suite and the two
# builds), with line tables, all that a sanitizer's report needs of the debug information.
CC=clang CXX=clang++ scripts/setup.sh build-asan -DCOLLSCOPE_SANITIZE=ON -DCOLLSCOPE_FUZZ=ON -DCOLLSCOPE_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" "-DCMAKE_C_FLAGS_DEBUG=-O1 -gline-tables-only"
took "the sanitizer build"
# A quarantine of 64 MB, not 256: freed memory waits there before reuse, and DuckDB frees so much
# that at 256 MB a process spends about a third of its time in the kernel (page faults) and memset
# (perf; an ingest of 8 records: 3.5 s, 2.5 s at 64 MB). A use after free is still caught within the
# last 64 MB freed.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=64 ctest --output-on-failure -j"$jobs" --timeout 900)
took "the sanitizer tests"
# Capture code runs on NCCL's and the training loop's threads: its tests also run under
# ThreadSanitizer, and so do the agent's server and remote-write threads.
CC=clang CXX=clang++ cmake -S . -B build-tsan -DCOLLSCOPE_TSAN=ON -DCOLLSCOPE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" "-DCMAKE_C_FLAGS_DEBUG=-O1 -gline-tables-only" >/dev/null
cmake --build build-tsan -j"$jobs" --target capture_nccl_plugin_test capture_nccl_format_test \
  capture_annotate_test capture_annotate_lines_test capture_cupti_test capture_nccl_prom_test agent_net_test
(cd build-tsan && ctest --output-on-failure -j"$jobs" --timeout 900 -R '^(capture_|agent_net_test)')
took "the thread-sanitizer build and tests"
# Every reader under libFuzzer for 30 s each, two at a time, from the sanitizer build (bench/fuzz.sh
# alone builds its own optimised targets and runs them for 10 minutes).
COLLSCOPE_FUZZ_BUILD=build-asan bench/fuzz.sh 30
took "fuzzing"
