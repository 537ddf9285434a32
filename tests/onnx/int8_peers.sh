#!/bin/sh
# 8-bit ONNX models, RLX against onnxruntime-node 1.30 (tests/onnx/int8_cases.py
# writes them; bench/onnx_peer/real_models.js runs ORT).  Integer results
# (MatMulInteger after DynamicQuantizeLinear, QLinearMatMul) must be equal
# to the bit.  The quantized MLPs' f32 results within rtol 1e-4, atol 1e-5
# (the same levels and integer sums in both; the rest is f32 rounding, and a
# last-bit difference before a quantization can move a value one level,
# which the tolerance would show).  Skips (77) without node and
# onnxruntime-node (ORT_DIR, default /tmp/rlx-ort-peer; else installed into
# WORK/ort from the npm registry).
# Usage: tests/onnx/int8_peers.sh RLX_CLI WORK_DIR
RLX=${1:?usage: int8_peers.sh RLX_CLI WORK_DIR}
WORK=${2:?usage: int8_peers.sh RLX_CLI WORK_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || { echo "skipped: node is needed"; exit 77; }
ORT_DIR=${ORT_DIR:-/tmp/rlx-ort-peer}
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  ORT_DIR="$WORK/ort"
  mkdir -p "$ORT_DIR"
  [ -d "$ORT_DIR/node_modules/onnxruntime-node" ] ||
    (cd "$ORT_DIR" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null 2>&1) || {
      echo "skipped: could not install onnxruntime-node from the npm registry"
      exit 77
    }
fi
set -e
rm -rf "$WORK/cases"
mkdir -p "$WORK/cases"
/usr/bin/python3 "$ROOT/tests/onnx/int8_cases.py" inputs "$WORK/cases" "$ORT_DIR"
node "$ROOT/bench/onnx_peer/real_models.js" "$ORT_DIR" "$WORK/cases/exact"
node "$ROOT/bench/onnx_peer/real_models.js" "$ORT_DIR" "$WORK/cases/float"
/usr/bin/python3 "$ROOT/tests/onnx/int8_cases.py" outputs "$WORK/cases"
set +e
rc=0
"$RLX" onnx-test -v "$WORK/cases/exact" || rc=1
"$RLX" onnx-test -v --rtol 1e-4 --atol 1e-5 "$WORK/cases/float" || rc=1
exit $rc
