#!/usr/bin/env bash
# Builds RLX and runs the whole test suite twice: a Release build, then a
# build under AddressSanitizer + UndefinedBehaviorSanitizer.
# RLX_TEST_CONFIGS="release" (or "asan") runs only one of them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
status=0
for config in ${RLX_TEST_CONFIGS:-release asan}; do
  case "$config" in
    release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    # The CUDA backend needs a GPU to run and its device code cannot be
    # sanitized: the Release build compiles it, tests/gpu/run_all.sh tests it.
    asan) flags=(-DCMAKE_BUILD_TYPE=Debug -DRLX_SANITIZE=ON -DRLX_CUDA=OFF) ;;
    *) echo "unknown config $config" >&2; exit 2 ;;
  esac
  dir=build-test-$config
  echo "== $config: configure and build ($dir)"
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" 2>&1 | grep -E "warning|error" || true
  cmake --build "$dir" -j"$jobs" >/dev/null
  echo "== $config: ctest"
  if ! ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 1500; then
    status=1
  fi
done
exit $status
