#!/bin/sh
# RLX beside ONNX Runtime (onnxruntime-node 1.30.0) on the ONNX backend-test
# suite: same cases, same tolerances.  Prints both pass counts and the
# cases that ONNX Runtime passes and RLX does not.
# Usage: bench/onnx_peer/run_peer.sh [RLX_CLI] [SUITE_DIR...]
# Env: ORT_DIR (default /tmp/rlx-ort-peer; npm installs there), WORK (scratch).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
RLX=${1:-$HERE/../../build/rlx}
[ $# -gt 0 ] && shift
DATA=${RLX_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
if [ $# -gt 0 ]; then SUITES="$*"; else
  SUITES="$DATA/node $DATA/pytorch-converted $DATA/pytorch-operator $DATA/simple"; fi
ORT_DIR=${ORT_DIR:-/tmp/rlx-ort-peer}
WORK=${WORK:-/tmp/rlx-ort-peer/work}
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
mkdir -p "$WORK"
/usr/bin/python3 "$HERE/export_cases.py" "$WORK/cases" $SUITES
node "$HERE/ort_conformance.js" "$ORT_DIR" "$WORK/cases" > "$WORK/ort.txt" 2>&1 || true
"$RLX" onnx-test $SUITES > "$WORK/rlx.txt" 2>&1 || true
echo "ONNX Runtime 1.30 (onnxruntime-node): $(tail -1 "$WORK/ort.txt")"
echo "RLX:                                  $(tail -1 "$WORK/rlx.txt")"
grep '^PASS ' "$WORK/ort.txt" | cut -d' ' -f2 | sort > "$WORK/ort_pass"
grep '^PASS ' "$WORK/rlx.txt" | cut -d' ' -f2 | sort > "$WORK/rlx_pass"
n=$(comm -23 "$WORK/ort_pass" "$WORK/rlx_pass" | wc -l)
echo "cases ONNX Runtime passes and RLX does not: $n"
comm -23 "$WORK/ort_pass" "$WORK/rlx_pass" | while read c; do
  grep -E "^(FAIL|ERROR|SKIP) $c[ :]" "$WORK/rlx.txt" | head -1 | cut -c1-220
done
echo "logs: $WORK/ort.txt $WORK/rlx.txt"
