#!/usr/bin/env bash
# Checks the sources' style (scripts/check_format.sh), then builds RLX and
# runs the whole test suite twice: a Release build (with the
# Python package's tests), then a build under AddressSanitizer +
# UndefinedBehaviorSanitizer; then the library under ThreadSanitizer with
# the concurrency test alone (sessions compiled and run from threads).
# RLX_TEST_CONFIGS="release" (or "asan", "tsan") runs only one of them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
status=0
# one style for every C and CUDA source (.clang-format)
bash scripts/check_format.sh || status=1
for config in ${RLX_TEST_CONFIGS:-release asan tsan}; do
  targets=()
  select=()
  extra_env=()
  case "$config" in
    release) flags=(-DCMAKE_BUILD_TYPE=Release)
             # no GPU here: the CUDA sources are compiled once (sm_90a) to
             # check that they build (all three architectures took about
             # 9.5 of the Release build's 12 minutes on 2 cores)
             nvidia-smi -L >/dev/null 2>&1 || flags+=(-DCMAKE_CUDA_ARCHITECTURES=90a-real) ;;
    # The CUDA backend needs a GPU to run and its device code cannot be
    # sanitized: the Release build compiles it, tests/gpu/run_all.sh tests it.
    # -O1, as the sanitizers' authors advise: the suite in 239 s against
    # 295 at -O0 (2 cores)
    asan) flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" -DRLX_SANITIZE=ON -DRLX_CUDA=OFF) ;;
    # Only the library, the concurrency test and the thread pool's (the
    # kernels' loops run on the pool's threads, which TSan sees); OpenBLAS
    # is not loaded (not instrumented).
    tsan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_TSAN=ON -DRLX_CUDA=OFF -DRLX_ONNX=OFF)
          targets=(--target test_concurrency test_cpu_pool)
          select=(-R '^(test_concurrency|test_cpu_pool)$')
          extra_env=(RLX_NO_BLAS=1) ;;
    *) echo "unknown config $config" >&2; exit 2 ;;
  esac
  dir=build-test-$config
  echo "== $config: configure and build ($dir)"
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" "${targets[@]}" 2>&1 | grep -E "warning|error" || true
  cmake --build "$dir" -j"$jobs" "${targets[@]}" >/dev/null
  echo "== $config: ctest"
  # the tests run in parallel (ctest -j): teams sized by the load keep them
  # from waiting on workers the OS has not scheduled
  if ! env "${extra_env[@]}" OMP_DYNAMIC=true ASAN_OPTIONS=detect_leaks=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 1500 "${select[@]}"; then
    status=1
  fi
done
exit $status
