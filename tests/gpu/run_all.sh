#!/usr/bin/env bash
# run_all.sh - builds RLX with the CUDA backend and runs the GPU parity test
# (every op and fused op against the CPU reference, CUDA Graph replay, the
# mlp/encoder/resnet50 workloads end to end), the training test
# (tests/gpu/cuda_train.c) and the quantized ops (tests/gpu/cuda_quant.c).
# Meant for the GPU machine:
#
#   tests/gpu/run_all.sh            # build in build-gpu, run, last line "N passed, M failed"
#
# Environment: BUILD (build folder, default build-gpu), JOBS (default 16),
# LOG (where the full test log goes, default $OUT/gpu_tests.log or
# build-gpu/gpu_tests.log), RLX_GPU_TEST_FILTER (run only matching cases),
# PREBUILT (a build folder carried from elsewhere: used instead of building; with REBUILD=1 only
# when the build here fails).
set -u -o pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-16}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$BUILD"
LOG=${LOG:-${OUT:-$BUILD}/gpu_tests.log}

built=0
if [ -n "${PREBUILT:-}" ] && [ -f "$PREBUILT/librlx.so" ] && [ -z "${REBUILD:-}" ]; then
  echo "using the prebuilt library in $PREBUILT"   # built elsewhere (e.g. carried to the GPU machine)
  BUILD=$PREBUILT
  built=1
elif command -v cmake >/dev/null; then
  if cmake -S . -B "$BUILD" -DRLX_ONNX=OFF -DRLX_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1 &&
     cmake --build "$BUILD" -j"$JOBS" >"$BUILD/build.log" 2>&1; then
    built=1
  else
    echo "build failed; last lines:"; tail -20 "$BUILD/configure.log" "$BUILD/build.log" 2>/dev/null
  fi
else
  echo "no cmake on this machine"
fi
if [ $built = 0 ] && [ -n "${PREBUILT:-}" ] && [ -f "$PREBUILT/librlx.so" ]; then
  echo "using the prebuilt library in $PREBUILT"
  BUILD=$PREBUILT
  built=1
fi
if [ $built = 0 ]; then
  echo "0 passed, 1 failed"
  exit 1
fi
grep -q "CUDA backend on" "$BUILD/configure.log" 2>/dev/null && grep "CUDA backend on" "$BUILD/configure.log"
cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L tests/gpu/cuda_parity.c -Iinclude -Isrc \
   -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lrlx_internal -lm -o "$BUILD/cuda_parity" || { echo "0 passed, 1 failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
"$BUILD/cuda_parity" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
# convolutions again on the im2col + cuBLASLt path (cuDNN runs them when it loads)
echo "--- conv cases without cuDNN (RLX_CUDA_NO_CUDNN=1)" | tee -a "$LOG"
RLX_CUDA_NO_CUDNN=1 RLX_GPU_TEST_FILTER=conv "$BUILD/cuda_parity" 2>&1 | grep -v "^group" | sed 's/^\([0-9]* passed, [0-9]* failed\)$/conv without cuDNN: \1/' | tee -a "$LOG"
rc2=${PIPESTATUS[0]}
# training: optimizer steps, the gradient of every op family, a small decoder trained (tests/gpu/cuda_train.c)
echo "--- training (tests/gpu/cuda_train.c)" | tee -a "$LOG"
rc3=1
if cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L tests/gpu/cuda_train.c -Iinclude -Isrc -Itests \
   -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lrlx_internal -lm -o "$BUILD/cuda_train"; then
  "$BUILD/cuda_train" 2>&1 | grep -v "^group" | sed 's/^\([0-9]* passed, [0-9]* failed\)$/training: \1/' | tee -a "$LOG"
  rc3=${PIPESTATUS[0]}
else
  echo "training: 0 passed, 1 failed" | tee -a "$LOG"
fi
# quantized ops: dequantize bit for bit, qmatmul's two kernels against float64 and the CPU (tests/gpu/cuda_quant.c)
echo "--- quantized ops (tests/gpu/cuda_quant.c)" | tee -a "$LOG"
rc4=1
if cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L tests/gpu/cuda_quant.c -Iinclude -Isrc \
   -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lrlx_internal -lm -o "$BUILD/cuda_quant"; then
  "$BUILD/cuda_quant" 2>&1 | sed 's/^\([0-9]* passed, [0-9]* failed\)$/quantized: \1/' | tee -a "$LOG"
  rc4=${PIPESTATUS[0]}
else
  echo "quantized: 0 passed, 1 failed" | tee -a "$LOG"
fi
p1=$(grep -E "^[0-9]+ passed, [0-9]+ failed$" "$LOG" | tail -1 | awk '{print $1}')
f1=$(grep -E "^[0-9]+ passed, [0-9]+ failed$" "$LOG" | tail -1 | awk '{print $3}')
p2=$(grep -E "^conv without cuDNN: " "$LOG" | tail -1 | awk '{print $4}')
f2=$(grep -E "^conv without cuDNN: " "$LOG" | tail -1 | awk '{print $6}')
p3=$(grep -E "^training: " "$LOG" | tail -1 | awk '{print $2}')
f3=$(grep -E "^training: " "$LOG" | tail -1 | awk '{print $4}')
p4=$(grep -E "^quantized: " "$LOG" | tail -1 | awk '{print $2}')
f4=$(grep -E "^quantized: " "$LOG" | tail -1 | awk '{print $4}')
echo "$(( ${p1:-0} + ${p2:-0} + ${p3:-0} + ${p4:-0} )) passed, $(( ${f1:-1} + ${f2:-1} + ${f3:-1} + ${f4:-1} )) failed"
[ "$rc" = 0 ] && [ "$rc2" = 0 ] && [ "$rc3" = 0 ] && [ "$rc4" = 0 ] && exit 0
exit 1
