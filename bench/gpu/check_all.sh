#!/usr/bin/env bash
# check_all.sh - the GPU machine's checks in one call: builds RLX with CUDA
# and the ONNX importer (libraries the machine lacks from gpu-deps, made by
# bench/gpu/make_deps.sh), checks device selection through the CLI (cuda:0
# runs; an index past the machine's GPUs is refused, naming it), runs the
# Python package's CUDA tests and the GPU parity suite (every op against the
# CPU reference; RLX_GPU_TEST_FILTER narrows it); a table last.
#
#   bench/gpu/check_all.sh            # ARCH=90a-real (default) builds sm_90a only, for an H100/H200
#
# Then bench/gpu/llm_run.sh with BUILD=build-gpu PREBUILT=1 SKIP_PARITY=1
# runs the LLM checks and timings on the same build.
set -u -o pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
DEPS=${DEPS:-gpu-deps}
OUTD=${OUT:-$BUILD}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$BUILD" "$OUTD"
extra=(-DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90a-real}")
if [ -d "$DEPS/lib" ]; then
  extra+=(-DCMAKE_PREFIX_PATH="$PWD/$DEPS" -DRLX_PROTOC_C="$PWD/$DEPS/bin/protoc-c"
          -DRLX_ONNX_PROTO="$PWD/$DEPS/include/onnx/onnx.proto")
  export LD_LIBRARY_PATH="$PWD/$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
declare -A result
t0=$(date +%s)
if cmake -S . -B "$BUILD" -DRLX_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >"$BUILD/configure.log" 2>&1 &&
   cmake --build "$BUILD" -j"${JOBS:-16}" >"$BUILD/build.log" 2>&1; then
  onnx="ONNX importer on"; grep -q "ONNX importer disabled" "$BUILD/configure.log" && onnx="ONNX importer OFF"
  result[build]="ok ($(( $(date +%s) - t0 )) s, $onnx)"
else
  tail -30 "$BUILD/configure.log" "$BUILD/build.log"
  echo "build failed"; exit 1
fi
grep -E "warning" "$BUILD/build.log" | head -5

echo "== device selection"
rlx="$BUILD/rlx"
out0=$("$rlx" run mlp --device cuda:0 --repeat 3 2>&1 | tail -2 | tr '\n' ' ')
echo "cuda:0: $out0"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
outn=$("$rlx" run mlp --device "cuda:$ngpu" 2>&1 | grep -i "cuda:$ngpu" | head -1)
echo "cuda:$ngpu: $outn"
if echo "$outn" | grep -q "cuda:$ngpu: no such device"; then sel="cuda:$ngpu refused by name"; else sel="cuda:$ngpu NOT refused as expected"; fi
result[devices]="$ngpu GPU(s); cuda:0 ran: $(echo "$out0" | grep -qi 'median' && echo yes || echo no); $sel"

echo "== Python CUDA tests"
rm -rf /tmp/pyb /tmp/pylib
(cd python && RLX_LIB_DIR="$PWD/../$BUILD" python3 setup.py -q build --build-base /tmp/pyb --build-lib /tmp/pylib) \
  >"$OUTD/python_build.txt" 2>&1 || tail -20 "$OUTD/python_build.txt"
PYTHONPATH=/tmp/pylib:python/tests python3 -m pytest -q -rs python/tests/test_cuda.py 2>&1 | tee "$OUTD/python_cuda.txt" | tail -15
result[python]="$(grep -E '[0-9]+ (passed|failed)' "$OUTD/python_cuda.txt" | tail -1)"

echo "== GPU parity suite"
t0=$(date +%s)
PREBUILT=$BUILD BUILD=$BUILD tests/gpu/run_all.sh >"$OUTD/parity.txt" 2>&1
grep -E "FAIL" "$OUTD/parity.txt" | head -20
result[parity]="$(tail -1 "$OUTD/parity.txt") ($(( $(date +%s) - t0 )) s)"

echo
echo "| check | result |"
echo "|---|---|"
for k in build parity devices python; do echo "| $k | ${result[$k]} |"; done
