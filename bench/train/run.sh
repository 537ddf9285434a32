#!/usr/bin/env bash
# run.sh - training steps/s of RLX beside PyTorch, interleaved (RLX,
# PyTorch, RLX, PyTorch ...), one table of medians (bench/train/run.py).
#
#   CPU (after `cmake --build build`):  bench/train/run.sh [--rounds 3] [--out FILE]
#   GPU (see bench/train/README.md):     BUILD=build-gpu bench/train/run.sh --device cuda \
#                                          --precisions f32,bf16 --engines rlx,eager,compile
#
# BUILD: the build folder (default build; train_bench is compiled here from
# bench/train/train_bench.c against $BUILD/librlx_internal.so when the
# build has no tests/train_bench).  PY: the Python with PyTorch (default
# /usr/bin/python3 where it imports torch, else python3).
set -u -o pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN="$BUILD/tests/train_bench"
if [ ! -x "$BIN" ]; then
  BIN="$BUILD/train_bench"
  cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L bench/train/train_bench.c -Iinclude -Isrc \
     -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lrlx_internal -lm -o "$BIN" || exit 1
fi
if [ -z "${PY:-}" ]; then
  PY=python3
  /usr/bin/python3 -c "import torch" 2>/dev/null && PY=/usr/bin/python3
fi
exec "$PY" bench/train/run.py --rlx "$BIN" --python "$PY" "$@"
