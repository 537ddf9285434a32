#!/usr/bin/env bash
# The CPU benchmark: RLX beside ONNX Runtime and PyTorch eager, interleaved,
# in the environment as it comes and with OPENBLAS_CORETYPE unset; writes
# bench/results/cpu-peers-DATE-CPU-COMMIT.md.  See bench/cpu/README.md.
# usage: bench/cpu/run.sh [peers.py options: --rounds R --models a,b --quick --out FILE ...]
# (from any folder; builds nothing: a Release build must be in build/ or RLX_BIN)
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 bench/cpu/peers.py "$@"
