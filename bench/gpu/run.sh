#!/usr/bin/env bash
# run.sh - the GPU benchmark: RLX (CUDA backend) and PyTorch (eager, CUDA
# graph, optionally torch.compile reduce-overhead) on the WORKLOADS.md
# shapes in one run on one machine, plus the card's measured ceilings, then
# a table of medians, ratios and floors.
#
#   bench/gpu/run.sh [--compile]      (after tests/gpu/run_all.sh built build-gpu)
#
# Environment: BUILD (default build-gpu), RUNS (default 100), OUT (results
# folder; default bench/results).  Writes gpu-<date>-<card>.{txt,md}.
set -u -o pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
RUNS=${RUNS:-100}
DEST=${OUT:-bench/results}
mkdir -p "$DEST"
COMPILE=""
[ "${1:-}" = "--compile" ] && COMPILE="--compile"
CASES="mlp:256:f32 mlp:256:f16 mlp:256:bf16 encoder:1:f32 encoder:1:f16 encoder:32:f32 encoder:32:f16 resnet50:1:f16 resnet50:16:f16 decoder:1:bf16"
cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L bench/gpu/rlx_gpu_bench.c -Iinclude -Isrc \
   -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lrlx_internal -lm -o "$BUILD/rlx_gpu_bench" || exit 1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-')
stamp=$(date -u +%Y-%m-%d)
RAW="$DEST/gpu-$stamp-${card:-gpu}.txt"
: >"$RAW"
for c in $CASES; do
  IFS=: read -r w b d <<<"$c"
  timeout 120 "$BUILD/rlx_gpu_bench" "$w" "$b" "$d" "$RUNS" 2>&1 | grep -E "^(RESULT|ERROR)" | tee -a "$RAW"
done
PY=python3
PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-300} $PY bench/gpu/torch_bench.py --runs "$RUNS" $CASES 2>"$DEST/torch_stderr.txt" | tee -a "$RAW"
if [ -n "$COMPILE" ]; then
  # torch.compile(mode="reduce-overhead") takes tens of seconds per model: the cases named in COMPILE_CASES
  PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16 timeout ${COMPILE_TIMEOUT:-360} $PY bench/gpu/torch_bench.py --runs "$RUNS" \
    --compile --no-ceilings ${COMPILE_CASES:-$CASES} 2>>"$DEST/torch_stderr.txt" | tee -a "$RAW"
fi
$PY bench/gpu/table.py "$RAW" "$DEST/gpu-$stamp-${card:-gpu}.md"
