#!/bin/sh
# Builds the checkpoint-reader fuzz targets with clang (libFuzzer + ASan/UBSan,
# library instrumented for coverage) and runs one of them for SECONDS seconds
# from a seed corpus written by tests/llm/formats.py (every GGUF value type,
# v2 and v3, F32/F16/BF16/Q8_0 tensors; single-file safetensors) plus the
# inputs kept in regressions/.
# Usage: tests/fuzz/run_formats_fuzz.sh gguf|safetensors [SECONDS] [BUILD_DIR]
set -e
FMT=${1:?usage: run_formats_fuzz.sh gguf|safetensors [SECONDS] [BUILD_DIR]}
SECS=${2:-60}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${3:-$SRC/build-fuzz}
case "$FMT" in gguf|safetensors) ;; *) echo "unknown format '$FMT'"; exit 2 ;; esac
command -v clang >/dev/null || { echo "SKIP: clang not installed (apt-get install clang)"; exit 77; }
CC=clang cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_FUZZ=ON -DRLX_CUDA=OFF \
  -DRLX_BUILD_TESTS=OFF -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$BUILD" -j2 --target "fuzz_$FMT" >/dev/null 2>&1 || {
  [ "$FMT" = safetensors ] && ! grep -q "RLX_CJSON_LIBRARY:FILEPATH=/" "$BUILD/CMakeCache.txt" &&
    { echo "SKIP: cJSON not installed (apt-get install libcjson-dev)"; exit 77; }
  cmake --build "$BUILD" -j2 --target "fuzz_$FMT"; exit 1; }
CORPUS=$BUILD/${FMT}_corpus
mkdir -p "$CORPUS"
if [ -z "$(ls -A "$CORPUS")" ]; then
  /usr/bin/python3 "$SRC/tests/llm/formats.py" fixtures "$BUILD/formats_fixtures" >/dev/null
  if [ "$FMT" = gguf ]; then
    cp "$BUILD"/formats_fixtures/*.gguf "$CORPUS"/
  else
    cp "$BUILD"/formats_fixtures/py_single.safetensors "$CORPUS"/
    cp "$BUILD"/formats_fixtures/py_sharded/*.safetensors "$CORPUS"/
    # their headers alone too (the target frames an input starting with '{')
    for f in "$CORPUS"/*.safetensors; do
      n=$(od -An -tu8 -N8 "$f" | tr -d ' ')
      tail -c +9 "$f" | head -c "$n" > "$f.json"
    done
  fi
fi
# inputs that once crashed a reader stay in the corpus
cp "$SRC"/tests/fuzz/regressions/*."$FMT" "$CORPUS"/ 2>/dev/null || true
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
# leaks are caught input by input (libFuzzer's own check after each run, which
# writes leak-* artifacts); LeakSanitizer's extra scan at exit is off: its
# tracer crashed there (signal 11, an empty artifact) after clean campaigns
export LSAN_OPTIONS=${LSAN_OPTIONS:-leak_check_at_exit=0}
set +e
# A fixed seed and run count make the campaign the same on every machine;
# RLX_FUZZ_SEED=0 draws a new seed.
"$BUILD/tests/fuzz/fuzz_$FMT" "$CORPUS" -seed="${RLX_FUZZ_SEED:-1}" -runs="${RLX_FUZZ_RUNS:-20000000}" \
  -max_total_time="$SECS" -rss_limit_mb=2048 -max_len=65536 -timeout=20 -error_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="$BUILD/$FMT-" > "$BUILD/fuzz_$FMT.log" 2>&1
rc=$?
tail -15 "$BUILD/fuzz_$FMT.log"
[ $rc -eq 0 ] && echo "fuzz $FMT: clean after $SECS s" || echo "fuzz $FMT: FAILED (exit $rc; see $BUILD/fuzz_$FMT.log and $BUILD/$FMT-crash-*)"
exit $rc
