#!/usr/bin/env bash
# Installs the dependencies, builds RLX (Release) and runs `rlx run`: the
# embedded encoder workload, compiled and run on the CPU; then `rlx generate`
# on the built-in decoder-small LLM.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
RLX_VERBOSE=1 ./build/rlx run --repeat 10
./build/rlx generate -n 16   # the built-in decoder-small: prefill, KV cache, decode
