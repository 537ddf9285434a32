#!/usr/bin/env bash
# Soak: resident memory over 100,000 runs of a small ONNX model and 1,000
# compile/free cycles of the encoder (bench/soak.c); prints VmRSS at ten
# points per phase and fails if either grows by more than 4 MiB after
# warm-up.  Usage: bench/soak.sh [BUILD_DIR] [RUNS] [COMPILES]
# (ctest runs a short one: tests/soak.cmake).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
runs=${2:-100000}
compiles=${3:-1000}
if [ ! -x "$build/tests/rlx_soak" ]; then
  cmake --build "$build" --target rlx_soak >/dev/null
fi
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
"$build/tests/rlx_soak" "$runs" "$compiles" "$here/../tests/cli/data/tiny.onnx"
