#!/usr/bin/env bash
# The install rules and the Debian package (docs/install.md), end to end, from a built tree:
#   1. cmake --install into a staging prefix; every key file is there;
#   2. the installed command: --version is the project's, it finds its own DuckDB (not the build
#      tree's), and on the bundled example job its findings equal the build tree's;
#   3. man pages and bash/zsh completions cover exactly the subcommands `collscope --help` lists,
#      and the completions complete;
#   4. the Python package loads the installed library and its steps file is ingested;
#   5. a tiny C consumer built through find_package(collscope), and again through pkg-config, runs
#      and its annotations are ingested;
#   6. the deploy library and the systemd unit name the installed paths;
#   7. cpack -G DEB builds the package; dpkg-deb lists it; its key files, dependencies and licence.
# Usage: tests/packaging_test.sh BUILD_DIR SOURCE_DIR   (CTest: packaging_test; exits 77 to skip)
set -euo pipefail
build=$(cd -- "${1:?usage: packaging_test.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd -- "${2:?usage: packaging_test.sh BUILD_DIR SOURCE_DIR}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/collscope-packaging.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
t0=$SECONDS
for tool in cmake cc pkg-config python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
version=$(cache CMAKE_PROJECT_VERSION)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "no project version in $build/CMakeCache.txt"
grep -q "^project(collscope VERSION $version " "$src/CMakeLists.txt" || fail "version $version is not the top CMakeLists.txt's"
grep -q "^version = \"$version\"$" "$src/python/pyproject.toml" || fail "python/pyproject.toml's version is not $version"

# --- 1. Staged install.
stage=$work/stage
cmake --install "$build" --prefix "$stage" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
libdir=$(cache CMAKE_INSTALL_LIBDIR)
pydir=$(cache COLLSCOPE_INSTALL_PYTHONDIR)
bundled=0
grep -q "libduckdb.so" "$work/install.log" && bundled=1
key_files=(
  bin/collscope bin/collscope-torchrun
  "$libdir/libcollscope-annotate.so" "$libdir/libnccl-profiler-collscope.so"
  include/collscope/collscope_annotate.h
  "$libdir/cmake/collscope/collscopeConfig.cmake" "$libdir/cmake/collscope/collscopeConfigVersion.cmake"
  "$libdir/cmake/collscope/collscopeTargets.cmake"
  "$libdir/pkgconfig/collscope-annotate.pc" "$libdir/pkgconfig/nccl-profiler-collscope.pc"
  "$pydir/collscope/__init__.py" "$pydir/collscope/torch_timing.py" "$pydir/collscope/libcollscope-annotate.so"
  share/man/man1/collscope.1 share/man/man1/collscope-ingest.1
  share/bash-completion/completions/collscope share/zsh/vendor-completions/_collscope
  share/doc/collscope/README.md share/doc/collscope/LICENSE share/doc/collscope/copyright
  share/doc/collscope/install.md share/doc/collscope/deploy.md share/doc/collscope/examples/job
  share/collscope/dashboards/collscope-job.json
  lib/systemd/system/collscope-agent.service lib/sysusers.d/collscope.conf
  share/collscope/systemd/collscope-agent.env.example share/collscope/collscope-lib.sh
  share/collscope/slurm/prolog.sh share/collscope/slurm/epilog.sh share/collscope/slurm/collscope.sbatch
  share/collscope/kubernetes/agent-daemonset.yaml
)
if [[ -f $build/capture/cupti/libcollscope-cupti.so ]]; then
  key_files+=("$libdir/libcollscope-cupti.so" "$libdir/pkgconfig/collscope-cupti.pc")
fi
((bundled)) && key_files+=("$libdir/collscope/libduckdb.so" share/doc/collscope/LICENSE.duckdb)
for f in "${key_files[@]}"; do
  [[ -e $stage/$f ]] || fail "cmake --install did not install $f"
done
for f in "$src"/docs/*.md; do
  [[ -f $stage/share/doc/collscope/$(basename "$f") ]] || fail "docs: $(basename "$f") not installed"
done
cmp -s "$src/LICENSE" "$stage/share/doc/collscope/LICENSE" || fail "installed LICENSE differs"
if ! grep -q "Apache License" "$src/LICENSE" || ! grep -q "Version 2.0, January 2004" "$src/LICENSE"; then
  fail "LICENSE is not Apache-2.0"
fi
ok "cmake --install into a staging prefix: ${#key_files[@]} key files"

# --- 2. The installed command.
cs=$stage/bin/collscope
got=$("$cs" --version)
[[ $got == "collscope $version" || $got == "collscope $version (git "*")" ]] || fail "--version says '$got'"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  [[ $got == *"(git "* ]] || fail "--version has no git description in a checkout: '$got'"
fi
if ((bundled)); then
  duck=$(ldd "$cs" | awk '$1 == "libduckdb.so" { print $3 }')
  [[ -n $duck && $(realpath "$duck") == "$(realpath "$stage/$libdir/collscope/libduckdb.so")" ]] || fail "installed collscope loads libduckdb.so from '$duck'"
  if readelf -d "$cs" | grep -E 'R(UN)?PATH' | grep -F "$build" >/dev/null; then fail "installed collscope's RUNPATH names the build tree"; fi
fi
ok "installed collscope: '$got'"

example() {  # example BIN DIR: the main job (scripts/demo.sh) on the bundled example, into DIR
  mkdir -p "$2"
  "$1" ingest "$src/examples/job" --db "$2/job.duckdb" --run example >"$2/ingest.log"
  "$1" summary --db "$2/job.duckdb" --top 8 >"$2/summary.txt"
  local rc=0
  "$1" diagnose --db "$2/job.duckdb" --run example --json >"$2/findings.json" 2>"$2/diagnose.log" || rc=$?
  [[ $rc == 0 || $rc == 1 ]] || fail "$1 diagnose exited $rc"
  "$1" report --db "$2/job.duckdb" --run example --findings "$2/findings.json" -o "$2/report.html" >/dev/null
}
example "$cs" "$work/installed" || fail "the installed collscope on the example job"
example "$build/collscope" "$work/built" || fail "the built collscope on the example job"
kinds=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "collscope.findings.v1" and d["findings"], "no findings"
print(" ".join(sorted({f["kind"] for f in d["findings"]})))' "$work/installed/findings.json") || fail "installed: no findings on the example job"
cmp -s "$work/installed/findings.json" "$work/built/findings.json" || fail "installed and built findings differ"
cmp -s "$work/installed/summary.txt" "$work/built/summary.txt" || fail "installed and built summaries differ"
[[ -s $work/installed/report.html ]] || fail "installed: no report"
ok "installed collscope on examples/job: findings ($kinds), summary and report equal to the build tree's"

# --- 3. Man pages and completions against the command's own --help.
subs=$("$cs" --help | awk '/^Subcommands:/ { on = 1; next } /^[^ ]/ { on = 0 } on && /^  [a-z]/ { print $1 }' | sort)
[[ -n $subs ]] || fail "collscope --help lists no subcommands"
pages=$(cd "$stage/share/man/man1" && ls collscope-*.1 | sed 's/^collscope-//; s/\.1$//' | sort)
[[ $pages == "$subs" ]] || fail "man pages ($(tr '\n' ' ' <<<"$pages")) are not the subcommands ($(tr '\n' ' ' <<<"$subs"))"
for s in $subs; do
  page=$stage/share/man/man1/collscope-$s.1
  grep -q "^\.TH COLLSCOPE\\\\-$s 1 .*\"collscope $version\"" "$page" || fail "$page: no .TH line"
  # Every option the subcommand's help lists is on its page.
  for o in $("$cs" "$s" --help | grep -oE '^  -[-a-zA-Z0-9,]+' | tr ',' ' '); do
    grep -qF -- "${o//-/\\-}" "$page" || fail "$page lacks $o"
  done
done
if command -v man >/dev/null; then
  for p in "$stage"/share/man/man1/*.1; do
    warn=$(MANWIDTH=100 man --warnings -l "$p" 2>&1 >/dev/null) || fail "man -l $p"
    [[ -z $warn ]] || fail "man -l $p: $warn"
  done
fi
comp=$stage/share/bash-completion/completions/collscope
bash -n "$comp" || fail "bash completion: syntax"
complete_words() {  # complete_words WORD...: what bash completes for the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _collscope; printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@"
}
[[ $(complete_words collscope "" | sort) == "$subs" ]] || fail "bash completion: subcommands are not those of --help"
[[ $(complete_words collscope inge) == ingest ]] || fail "bash completion: 'inge' does not complete to ingest"
complete_words collscope diagnose --js | grep -x -- --json >/dev/null || fail "bash completion: 'diagnose --js' does not complete to --json"
complete_words collscope ingest --d | grep -x -- --db >/dev/null || fail "bash completion: 'ingest --d' does not complete to --db"
zcomp=$stage/share/zsh/vendor-completions/_collscope
head -1 "$zcomp" | grep -x '#compdef collscope' >/dev/null || fail "zsh completion: no #compdef line"
for s in $subs; do grep -q "^    '$s:" "$zcomp" || fail "zsh completion lacks $s"; done
if command -v zsh >/dev/null; then zsh -n "$zcomp" || fail "zsh completion: syntax"; fi
ok "man pages and bash/zsh completions: $(wc -l <<<"$subs") subcommands, as --help lists them"

# --- 4. The Python package loads the installed library.
mkdir -p "$work/py"
PYTHONPATH=$stage/$pydir COLLSCOPE_DUMP_DIR=$work/py/dump RANK=0 WORLD_SIZE=1 python3 - "$stage/$libdir/libcollscope-annotate.so" >"$work/py/out" <<'EOF' || fail "Python package"
import os, sys
import collscope
path = collscope.library_path()
assert path and os.path.realpath(path) == os.path.realpath(sys.argv[1]), path
for n in range(3):
    with collscope.step(n):
        with collscope.phase("forward"):
            pass
collscope.flush()
print(path)
EOF
"$cs" ingest "$work/py/dump" --db "$work/py/db.duckdb" --run py >"$work/py/ingest.log" || true
grep -q "1 files (1 read): 3 steps, 3 phase rows, 0 lines rejected" "$work/py/ingest.log" || fail "Python annotations not ingested: $(cat "$work/py/ingest.log")"
ok "Python package from $pydir loads $(cat "$work/py/out"); its 3 steps ingested"

# --- 5. C consumers of the annotation library: find_package(collscope) and pkg-config.
mkdir -p "$work/consumer"
cat >"$work/consumer/main.c" <<'EOF'
#include <collscope/collscope_annotate.h>
#include <stdio.h>
int main(void) {
  for (int64_t s = 0; s < 4; ++s) {
    if (collscope_step_begin(s) != 0) return 1;
    collscope_phase_begin("forward");
    collscope_phase_end("forward");
    collscope_step_end();
  }
  if (collscope_flush() != 0) return 2;
  printf("dropped %llu\n", (unsigned long long)collscope_annotate_dropped());
  return 0;
}
EOF
cat >"$work/consumer/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(collscope $version REQUIRED COMPONENTS annotate)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE collscope::annotate)
file(GENERATE OUTPUT \${CMAKE_BINARY_DIR}/plugin.txt CONTENT "\$<TARGET_FILE:collscope::nccl_profiler>")
file(WRITE \${CMAKE_BINARY_DIR}/exe.txt "\${collscope_EXECUTABLE}")
EOF
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$stage" >"$work/consumer/cmake.log" 2>&1 ||
  { cat "$work/consumer/cmake.log"; fail "find_package(collscope) consumer: configure"; }
cmake --build "$work/consumer/build" >"$work/consumer/build.log" 2>&1 ||
  { cat "$work/consumer/build.log"; fail "find_package(collscope) consumer: build"; }
[[ $(cat "$work/consumer/build/plugin.txt") == "$stage/$libdir/libnccl-profiler-collscope.so" ]] || fail "collscope::nccl_profiler is not the installed plugin"
[[ $(cat "$work/consumer/build/exe.txt") == "$stage/bin/collscope" ]] || fail "collscope_EXECUTABLE is not the installed command"
consumer_libs=$(ldd "$work/consumer/build/consumer")
grep -F "$stage/$libdir/libcollscope-annotate.so" <<<"$consumer_libs" >/dev/null ||
  { echo "$consumer_libs"; fail "the consumer does not load the installed library"; }
COLLSCOPE_DUMP_DIR=$work/consumer/dump RANK=0 WORLD_SIZE=2 "$work/consumer/build/consumer" | grep -x "dropped 0" >/dev/null || fail "find_package consumer run"
# A version the package does not satisfy is refused.
sed "s/find_package(collscope $version /find_package(collscope 99.0 /" "$work/consumer/CMakeLists.txt" >"$work/consumer/v99.txt"
mkdir -p "$work/v99" && cp "$work/consumer/main.c" "$work/v99/" && cp "$work/consumer/v99.txt" "$work/v99/CMakeLists.txt"
if cmake -S "$work/v99" -B "$work/v99/build" -DCMAKE_PREFIX_PATH="$stage" >/dev/null 2>&1; then fail "find_package(collscope 99.0) succeeded"; fi
export PKG_CONFIG_PATH=$stage/$libdir/pkgconfig
[[ $(pkg-config --modversion collscope-annotate) == "$version" ]] || fail "pkg-config --modversion collscope-annotate"
[[ $(pkg-config --variable=prefix collscope-annotate) == "$stage" ]] || fail "collscope-annotate.pc: prefix is not $stage"
# shellcheck disable=SC2046
cc -o "$work/consumer/pc" "$work/consumer/main.c" $(pkg-config --cflags --libs collscope-annotate) \
  -Wl,-rpath,"$(pkg-config --variable=libdir collscope-annotate)" || fail "pkg-config consumer: build"
COLLSCOPE_DUMP_DIR=$work/consumer/dump RANK=1 WORLD_SIZE=2 "$work/consumer/pc" | grep -x "dropped 0" >/dev/null || fail "pkg-config consumer run"
plugin=$(pkg-config --variable=plugin nccl-profiler-collscope)
[[ -f $plugin && $plugin == "$stage/$libdir/libnccl-profiler-collscope.so" ]] || fail "nccl-profiler-collscope.pc: plugin '$plugin'"
"$cs" ingest "$work/consumer/dump" --db "$work/consumer/db.duckdb" --run c >"$work/consumer/ingest.log" || true
grep -q "2 files (2 read): [48] steps, 8 phase rows, 0 lines rejected" "$work/consumer/ingest.log" || fail "C consumers' annotations not ingested: $(cat "$work/consumer/ingest.log")"
unset PKG_CONFIG_PATH
ok "C consumers through find_package(collscope $version) and pkg-config built, ran, and were ingested"

# --- 6. Deploy files name the installed paths.
unit=$stage/lib/systemd/system/collscope-agent.service
grep -q "^ExecStart=$stage/bin/collscope agent " "$unit" || fail "systemd unit: ExecStart is not $stage/bin/collscope"
if grep -q /opt/collscope "$unit"; then fail "systemd unit still names /opt/collscope"; fi
env -i PATH="$PATH" HOME="$work" bash -c 'source "$1"; cs_capture_env "$2" 2>/dev/null; echo "$NCCL_PROFILER_PLUGIN"; echo "$PYTHONPATH"' _ \
  "$stage/share/collscope/collscope-lib.sh" "$work/dump" >"$work/capture_env"
[[ $(sed -n 1p "$work/capture_env") == "$stage/$libdir/libnccl-profiler-collscope.so" ]] || fail "installed collscope-lib.sh: NCCL_PROFILER_PLUGIN $(sed -n 1p "$work/capture_env")"
[[ $(sed -n 2p "$work/capture_env") == "$stage/$pydir" ]] || fail "installed collscope-lib.sh: PYTHONPATH $(sed -n 2p "$work/capture_env")"
ok "systemd unit and deploy library name the installed paths"

# --- 7. The Debian package.
if ! command -v dpkg-deb >/dev/null || ! command -v cpack >/dev/null; then
  echo "SKIP: dpkg-deb or cpack not installed: no Debian package built"; exit 77
fi
t_deb=$SECONDS
cpack -G DEB -B "$work/deb" --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$work"/deb/collscope_"$version"_*.deb 2>/dev/null | head -1)
[[ -f $deb ]] || { cat "$work/cpack.log"; fail "no collscope_${version}_*.deb"; }
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./||' >"$work/deb.list"
for f in "${key_files[@]}"; do
  grep -qxF -e "usr/$f" -e "usr/$f/" "$work/deb.list" || fail "the .deb lacks /usr/$f"
done
[[ $(dpkg-deb -f "$deb" Package) == collscope ]] || fail ".deb Package"
[[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail ".deb Version"
depends=$(dpkg-deb -f "$deb" Depends)
for d in libc6 libstdc++6 libsimdjson zlib1g; do
  [[ $depends == *"$d"* ]] || fail ".deb Depends lacks $d: $depends"
done
if ((bundled)) && [[ $depends == *duckdb* ]]; then fail ".deb depends on a duckdb package besides its own: $depends"; fi
dpkg-deb -f "$deb" Description | grep "License: Apache-2.0" >/dev/null || fail ".deb description states no licence"
mkdir -p "$work/debx"
dpkg-deb -x "$deb" "$work/debx"
grep -qx "prefix=/usr" "$work/debx/usr/$libdir/pkgconfig/collscope-annotate.pc" || fail ".deb: collscope-annotate.pc's prefix is not /usr"
grep -q "^ExecStart=/usr/bin/collscope agent " "$work/debx/usr/lib/systemd/system/collscope-agent.service" || fail ".deb: unit's ExecStart"
grep -q "^License: Apache-2.0" "$work/debx/usr/share/doc/collscope/copyright" || fail ".deb: copyright"
[[ -L $work/debx/usr/$pydir/collscope/libcollscope-annotate.so && -e $work/debx/usr/$pydir/collscope/libcollscope-annotate.so ]] ||
  fail ".deb: the Python package's library link is broken"
ok "$(basename "$deb"): $(wc -l <"$work/deb.list") entries, $(du -k "$deb" | cut -f1) KB, Depends: $depends ($((SECONDS - t_deb)) s)"
echo "packaging_test: passed in $((SECONDS - t0)) s"
