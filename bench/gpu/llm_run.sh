#!/usr/bin/env bash
# llm_run.sh - the decoder LLM on the GPU machine: builds RLX with CUDA,
# runs the GPU parity suite's cache_write, attention and argmax cases (or
# all, FULL=1), checks the LLM on CUDA against float64 references prepared
# on a CPU machine
# (DATA: llm_probe outputs and reference.py logits, see below), then times
# the `decoder` workload (Qwen3-0.6B shape, bf16, prefill 512, decode 128
# at batch 1, 8, 32) in RLX, with and without RLX_CUDA_DECODE_ATTENTION=1,
# and in PyTorch (bench/gpu/llm_torch.py).
# SKIP_BENCH=1 / SKIP_TORCH=1 leave out RLX's or PyTorch's timing;
# SKIP_PARITY=1 the parity cases; PREBUILT=1 uses the library in $BUILD.
#
#   bench/gpu/llm_run.sh [DATA]
#
# DATA holds, per model NAME: NAME.gguf or folder NAME, NAME.cpu.ids (the
# CPU's 32 greedy tokens after the prompt below) and NAME.ref.f64 (.npy, the
# float64 logits over prompt + those tokens), made with
#   tests/llm/reference.py write / llm_probe --greedy 32 / reference.py logits.
# DEPS (default gpu-deps, if present): lib/ and include/ of PCRE2, utf8proc
# and cJSON for a GPU machine whose package manager cannot reach them
# (bench/gpu/make_deps.sh gathers them, and protobuf-c for the ONNX importer).
set -u -o pipefail
cd "$(dirname "$0")/../.."
DATA=${1:-gpu-llm}
BUILD=${BUILD:-build-gpu}
OUTD=${OUT:-$BUILD}
PROMPT=9,150,33,201,77,5,18,240,61
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$BUILD"
DEPS=${DEPS:-gpu-deps}
extra=()
if [ -d "$DEPS/lib" ]; then
  extra=(-DCMAKE_PREFIX_PATH="$PWD/$DEPS")
  export LD_LIBRARY_PATH="$PWD/$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
t0=$(date +%s)
if [ -z "${PREBUILT:-}" ]; then # PREBUILT=1: $BUILD already holds the library (bench/gpu/check_all.sh)
  cmake -S . -B "$BUILD" -DRLX_ONNX=OFF -DRLX_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >"$BUILD/configure.log" 2>&1 &&
    cmake --build "$BUILD" -j"${JOBS:-16}" >"$BUILD/build.log" 2>&1 || { tail -30 "$BUILD/configure.log" "$BUILD/build.log"; exit 1; }
fi
for p in tests/llm/llm_probe.c bench/llm_bench.c; do
  cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L "$p" -Iinclude -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lrlx -lm \
     -o "$BUILD/$(basename "$p" .c)" || exit 1
done
echo "build: $(( $(date +%s) - t0 )) s"

cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L tests/gpu/cuda_parity.c -Iinclude -Isrc -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" \
   -lrlx_internal -lm -o "$BUILD/cuda_parity" || exit 1
echo "== GPU parity (${FULL:+all cases}${FULL:-cache_write, attention and argmax cases})"
if [ -n "${SKIP_PARITY:-}" ]; then
  echo "(left out: SKIP_PARITY)"
elif [ -n "${FULL:-}" ]; then
  PREBUILT=$BUILD tests/gpu/run_all.sh 2>&1 | tail -3
else
  for f in cache_write attention argm; do # the cases the LLM step leans on
    RLX_GPU_TEST_FILTER=$f "$BUILD/cuda_parity" 2>&1 | grep -E "FAIL|passed" | tail -4
  done
fi

echo "== LLM on CUDA against the float64 reference"
for ids in "$DATA"/*.cpu.ids; do
  name=$(basename "$ids" .cpu.ids)
  model="$DATA/$name"; [ -f "$model.gguf" ] && model="$model.gguf"
  for prec in f32 bf16; do
    res=$("$BUILD/llm_probe" "$model" --device cuda --precision $prec --ids $PROMPT --greedy 32 \
          --out "$OUTD/$name.cuda.$prec" --ref "$DATA/$name.ref.f64" --expect-ids "$(cat "$ids")" 2>&1 | tr '\n' ' ')
    echo "$name $prec: $res"
  done
done

if [ -z "${SKIP_BENCH:-}" ]; then
  echo "== decoder (Qwen3-0.6B shape), bf16: RLX"
  "$BUILD/llm_bench" decoder --device cuda --precision bf16 --prompt 512 --decode 128 --batches 1,8,32 --repeat 3 \
    2>&1 | tee "$OUTD/llm_bench_rlx.txt"
  echo "== the same with the one-row attention kernel (RLX_CUDA_DECODE_ATTENTION=1)"
  RLX_CUDA_DECODE_ATTENTION=1 "$BUILD/llm_bench" decoder --device cuda --precision bf16 --prompt 512 --decode 128 \
    --batches 1,8,32 --repeat 3 2>&1 | tee "$OUTD/llm_bench_rlx_decode_attention.txt"
fi
if [ -z "${SKIP_TORCH:-}" ]; then
  echo "== decoder, bf16: PyTorch (eager, and static cache + torch.compile reduce-overhead)"
  PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16 python3 bench/gpu/llm_torch.py --batches 1,8,32 \
    --json "$OUTD/llm_torch.json" 2>"$OUTD/llm_torch.log" | tail -25 | tee "$OUTD/llm_bench_torch.txt"
fi
