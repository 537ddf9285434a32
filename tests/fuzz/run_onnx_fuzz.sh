#!/bin/sh
# Builds the ONNX importer fuzz target with clang (libFuzzer + ASan/UBSan,
# library instrumented for coverage) and runs it for SECONDS seconds from a
# seed corpus of the ONNX test suite's model.onnx files (and the Llama- and
# GPT-2-style attention layers from tests/onnx/make_models.py, and the
# cases of tests/onnx/sequence and tests/onnx/opset18, and skeletons of the
# real npm models when their cache is there).
# Usage: tests/fuzz/run_onnx_fuzz.sh [SECONDS] [BUILD_DIR]
set -e
SECS=${1:-60}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${2:-$SRC/build-fuzz}
DATA=${RLX_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
command -v clang >/dev/null || { echo "SKIP: clang not installed (apt-get install clang)"; exit 77; }
CC=clang cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_FUZZ=ON -DRLX_CUDA=OFF \
  -DRLX_BUILD_TESTS=OFF -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$BUILD" -j2 --target fuzz_onnx_import >/dev/null
CORPUS=$BUILD/onnx_corpus
mkdir -p "$CORPUS"
if [ -d "$DATA" ] && [ -z "$(ls -A "$CORPUS")" ]; then
  i=0
  for m in "$DATA"/*/*/model.onnx; do
    [ -f "$m" ] || continue
    sz=$(stat -c %s "$m")
    [ "$sz" -le 65536 ] || continue
    cp "$m" "$CORPUS/seed_$i.onnx"; i=$((i+1))
  done
  echo "seed corpus: $i models"
fi
# forms the canon pass rewrites whole (a Llama-style attention layer: RMSNorm,
# RoPE, repeat_kv, attention; with a fused qkv projection; GPT-2's flattened
# projections), so that mutations reach those matchers
if [ ! -f "$CORPUS/seed_gpt2_attention.onnx" ] &&
   /usr/bin/python3 "$SRC/tests/onnx/make_models.py" "$BUILD/onnx_models" >/dev/null 2>&1; then
  for m in llama_attention fused_qkv_attention gpt2_attention; do
    cp "$BUILD/onnx_models/$m.onnx" "$CORPUS/seed_$m.onnx"
  done
fi
# sequences and optionals through every op on them, If, Loop and SequenceMap
# (tests/onnx/make_sequence_cases.py); the ops and attributes of opsets
# 18-21 (tests/onnx/make_opset18_cases.py: string ops, Resize's antialias, ...)
for m in "$SRC"/tests/onnx/sequence/*/model.onnx "$SRC"/tests/onnx/opset18/*/model.onnx; do
  [ -f "$m" ] || continue
  c=$(basename "$(dirname "$m")")
  [ -f "$CORPUS/seed_$c.onnx" ] || cp "$m" "$CORPUS/seed_$c.onnx"
done
# the real models of bench/onnx_peer (when their npm cache is there) as
# skeletons: each graph whole, its large constants ConstantOfShape
# (tests/fuzz/onnx_skeleton.py), the ones within MAX_LEN
NPM=${RLX_NPM_MODELS:-$SRC/third_party_models/npm-models}
MAX_LEN=163840
if [ -d "$NPM" ]; then
  n=0
  for m in $(find "$NPM" -name '*.onnx' | sort); do
    s="$CORPUS/seed_real_$(echo "$m" | md5sum | cut -c1-8).onnx"
    [ -f "$s" ] && { n=$((n+1)); continue; }
    /usr/bin/python3 "$SRC/tests/fuzz/onnx_skeleton.py" "$m" "$s" 2>/dev/null || { rm -f "$s"; continue; }
    if [ "$(stat -c %s "$s")" -le $MAX_LEN ]; then n=$((n+1)); else rm -f "$s"; fi
  done
  echo "real-model skeletons: $n"
fi
# inputs that once crashed the importer stay in the corpus
cp "$SRC"/tests/fuzz/regressions/*.onnx "$CORPUS"/ 2>/dev/null || true
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
# leaks are caught input by input (libFuzzer's own check after each run, which
# writes leak-* artifacts); LeakSanitizer's extra scan at exit is off: its
# tracer crashed there (signal 11, an empty artifact) after clean campaigns
export LSAN_OPTIONS=${LSAN_OPTIONS:-leak_check_at_exit=0}
set +e
# A fixed seed and run count make the campaign the same on every machine (a
# slower one stops earlier, on a prefix); RLX_FUZZ_SEED=0 draws a new seed.
"$BUILD/tests/fuzz/fuzz_onnx_import" "$CORPUS" -seed="${RLX_FUZZ_SEED:-1}" -runs="${RLX_FUZZ_RUNS:-1000000}" \
  -max_total_time="$SECS" -rss_limit_mb=2048 \
  -max_len=$MAX_LEN -timeout=20 -error_exitcode=1 -print_final_stats=1 -artifact_prefix="$BUILD/" > "$BUILD/fuzz.log" 2>&1
rc=$?
tail -25 "$BUILD/fuzz.log"
[ $rc -eq 0 ] && echo "fuzz: clean after $SECS s" || echo "fuzz: FAILED (exit $rc; see $BUILD/fuzz.log and $BUILD/crash-*)"
exit $rc
