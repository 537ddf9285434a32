#!/usr/bin/env bash
# Installs the dependencies, builds RLX (Release) and runs `rlx run`: the
# embedded encoder workload, compiled and run on the CPU; `rlx generate` on
# the built-in decoder-small LLM; then builds the Python package in place
# and runs its graph-builder example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
RLX_VERBOSE=1 ./build/rlx run --repeat 10
./build/rlx generate -n 16   # the built-in decoder-small: prefill, KV cache, decode
# The Python package, built in place against build/librlx.so, and its
# graph-builder example.
(cd python && /usr/bin/python3 setup.py -q build_ext --inplace >/dev/null)
PYTHONPATH=python /usr/bin/python3 examples/python/graph_builder.py
