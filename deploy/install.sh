#!/usr/bin/env bash
# Install a collscope build into PREFIX, the layout every recipe in docs/deploy.md assumes:
#   PREFIX/bin/collscope                 the command (a wrapper that finds its private libraries)
#   PREFIX/bin/collscope-torchrun        torchrun with collscope beside it
#   PREFIX/libexec/collscope/collscope   the binary
#   PREFIX/lib/collscope/                its non-system libraries (DuckDB, simdjson, snappy)
#   PREFIX/lib/libnccl-profiler-collscope.so, libcollscope-cupti.so, libcollscope-annotate.so
#   PREFIX/python/collscope/             the annotation package (PYTHONPATH=PREFIX/python)
#   PREFIX/share/collscope/              collscope-lib.sh, slurm/, kubernetes/, systemd/
# Usage: deploy/install.sh BUILD_DIR PREFIX
# The prefix must be the same path on every node (a shared or identically provisioned folder).
set -euo pipefail
build=${1:?usage: install.sh BUILD_DIR PREFIX}
prefix=${2:?usage: install.sh BUILD_DIR PREFIX}
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
build=$(cd -- "$build" && pwd)
[[ -x $build/collscope ]] || { echo "install.sh: no collscope binary in $build" >&2; exit 1; }

install -d "$prefix/bin" "$prefix/libexec/collscope" "$prefix/lib/collscope" "$prefix/python" \
  "$prefix/share/collscope/slurm" "$prefix/share/collscope/kubernetes" "$prefix/share/collscope/systemd"
install -m 0755 "$build/collscope" "$prefix/libexec/collscope/collscope"

# The binary's own libraries that a bare node (or a slim container image) may lack: everything
# ldd resolves outside the C/C++ runtime.
ldd "$build/collscope" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r name path; do
  case $name in
    libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
    *) install -m 0644 "$(readlink -f "$path")" "$prefix/lib/collscope/$name" ;;
  esac
done

# The wrapper resolves its own location, so the prefix can move.
cat >"$prefix/bin/collscope" <<'EOF'
#!/bin/sh
# collscope, installed by deploy/install.sh: run the binary with its private libraries.
root=$(CDPATH='' cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd)
LD_LIBRARY_PATH="$root/lib/collscope${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$root/libexec/collscope/collscope" "$@"
EOF
chmod 0755 "$prefix/bin/collscope"

for lib in capture/nccl/libnccl-profiler-collscope.so capture/cupti/libcollscope-cupti.so \
  capture/annotate/libcollscope-annotate.so; do
  if [[ -f $build/$lib ]]; then
    install -m 0755 "$build/$lib" "$prefix/lib/"
  else
    echo "install.sh: $build/$lib not built; left out" >&2
  fi
done
if [[ -d $build/python/collscope ]]; then
  rm -rf -- "$prefix/python/collscope"
  cp -R -- "$build/python/collscope" "$prefix/python/collscope"
fi

install -m 0644 "$here/lib/collscope-lib.sh" "$prefix/share/collscope/collscope-lib.sh"
install -m 0755 "$here/torchrun/collscope-torchrun.sh" "$prefix/bin/collscope-torchrun"
install -m 0755 "$here/slurm/prolog.sh" "$here/slurm/epilog.sh" "$prefix/share/collscope/slurm/"
install -m 0644 "$here/slurm/collscope.sbatch" "$here/slurm/collscope-slurm.conf.example" "$prefix/share/collscope/slurm/"
install -m 0644 "$here"/kubernetes/*.yaml "$prefix/share/collscope/kubernetes/"
install -m 0644 "$here"/systemd/* "$prefix/share/collscope/systemd/"
install -m 0644 "$here/../docs/deploy.md" "$prefix/share/collscope/deploy.md"
"$prefix/bin/collscope" --help >/dev/null
echo "installed collscope into $prefix"
