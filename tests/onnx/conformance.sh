#!/bin/sh
# ONNX backend-test conformance: runs `rlx onnx-test` over the suite that
# Debian's libonnx-testdata installs.  Fails when a case crashes or when the
# pass count drops below the floor (argument 2); skips (77) without the data.
RLX=${1:?usage: conformance.sh RLX_CLI [MIN_PASS] [LOG]}
MIN=${2:-0}
LOG=${3:-onnx_conformance.log}
DATA=${RLX_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
DIRS=""
for d in node pytorch-converted pytorch-operator simple; do
  [ -d "$DATA/$d" ] && DIRS="$DIRS $DATA/$d"
done
if [ -z "$DIRS" ]; then
  echo "SKIP: ONNX test data not found under $DATA (apt-get install libonnx-testdata)"
  exit 77
fi
"$RLX" onnx-test $DIRS > "$LOG" 2>&1
rc=$?
grep -E '^(FAIL|ERROR)' "$LOG" | head -200
tail -3 "$LOG"
echo "full log: $LOG"
if [ $rc -eq 2 ] || grep -q 'crashed' "$LOG"; then
  echo "conformance: a case crashed"
  exit 1
fi
summary=$(tail -1 "$LOG")
passed=$(echo "$summary" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
if [ -z "$passed" ]; then
  echo "conformance: no summary line (rlx exited with $rc)"
  exit 1
fi
echo "ONNX conformance: $passed cases passed (floor $MIN)"
[ "$passed" -ge "$MIN" ] || { echo "conformance: pass count fell below $MIN"; exit 1; }
exit 0
