#!/bin/sh
# Staged runs (rlx_model_run, `rlx onnx-test --staged`) on the suite's cases
# whose ops need values at import (data-dependent output shapes, shape and
# index inputs; ops on strings, which RLX computes at import): the inputs
# are given as they are, never bound by value by the test runner, so each
# such op runs in a window of its own.  Every case
# must pass; skips (77) without Debian's libonnx-testdata.
RLX=${1:?usage: staged_cases.sh RLX_CLI}
DATA=${RLX_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node
[ -d "$DATA" ] || { echo "SKIP: ONNX test data not found under $DATA"; exit 77; }
set --
for p in nonzero nonmaxsuppression unique tfidfvectorizer compress top_k reshape expand slice range onehot tile \
         constantofshape resize_tf_crop pad strnormalizer cast_FLOAT_to_STRING cast_STRING_to_FLOAT \
         castlike_FLOAT_to_STRING castlike_STRING_to_FLOAT; do
  for d in "$DATA"/test_"$p"*; do [ -d "$d" ] && set -- "$@" "$d"; done
done
out=$("$RLX" onnx-test --staged "$@" 2>&1)
echo "$out" | grep -v '^PASS'
echo "$out" | tail -1 | grep -Eq '^[1-9][0-9]* passed, 0 failed, 0 skipped$'
