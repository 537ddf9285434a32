#!/bin/sh
# Builds the Python package against this build's librlx (RLX_LIB_DIR) into
# BUILD_DIR, runs its pytest suite and the examples of examples/python.
# usage: run_pytest.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
out=$2
py=${RLX_PYTHON:-/usr/bin/python3}
rm -rf "$out"
mkdir -p "$out"
cd "$src/python"
"$py" setup.py -q build --build-base "$out/build" --build-lib "$out/lib" >"$out/build.log" 2>&1 || {
  cat "$out/build.log"; exit 1; }
if grep -E "warning:|error:" "$out/build.log" | grep -v "byte-compiling is disabled"; then echo "the extension does not build cleanly"; exit 1; fi
export PYTHONPATH="$out/lib:$src/python/tests"
cd "$out"
"$py" -m pytest -q -p no:cacheprovider -rs "$src/python/tests"
for ex in "$src"/examples/python/*.py; do
  echo "== example $(basename "$ex")"
  "$py" "$ex"
done
echo "== python -m rlx"
"$py" -m rlx info /usr/share/libonnx-testdata/data/node/test_add/model.onnx >/dev/null 2>&1 || [ ! -d /usr/share/libonnx-testdata ]
"$py" -m rlx run mlp --batch 2 --repeat 2
