#!/usr/bin/env bash
# llm_quant.sh - the `decoder-small` shape of WORKLOADS.md (Qwen3 layout, 8
# layers, hidden 512) as GGUF files, F32 and quantized by llama.cpp's own
# quantizer (Q8_0, Q4_0, Q4_K_M), timed in RLX (llm_bench) and llama.cpp
# (node-llama-cpp's prebuilt CPU libraries through tests/llm/llamacpp_run.c
# --time), alternating, on the same file, prompt ids, threads and lengths
# (prefill 128, decode 64, batch 1).  Medians of REPEAT runs each.
#
#   bench/cpu/llm_quant.sh [REPEAT] [THREADS]    (after a Release build in build/)
#
# BEFORE=path/to/another/llm_bench times that build too, in the same
# alternation (before, RLX, llama.cpp), for a before/after table.
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
threads=${2:-2}
work=${WORK:-/tmp/rlx-llm-quant}
cache=${RLX_LLAMACPP_CACHE:-third_party_models/node-llama-cpp}
mkdir -p "$work"
sh tests/llm/fetch_llamacpp.sh "$cache" >/dev/null || { echo "llama.cpp cannot be had here"; exit 77; }
lib=$(cd "$cache/lib" && pwd)
runner=$work/llamacpp_run
cc -O2 -std=c11 -I "$cache/include" tests/llm/llamacpp_run.c -o "$runner" -L "$lib" -l:libllama.v0.5.0.so \
   -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$lib"
bench=$(ls build/tests/llm_bench 2>/dev/null || ls build/llm_bench)
f32=$work/decoder-small_f32.gguf
[ -f "$f32" ] || /usr/bin/python3 tests/llm/reference.py write --arch qwen3 --format gguf --out "$f32" --seed 7 \
  --set hidden_size=512 --set intermediate_size=1536 --set num_hidden_layers=8 --set num_attention_heads=8 \
  --set num_key_value_heads=4 --set head_dim=64 --set vocab_size=32000 --set max_position_embeddings=4096 \
  --set rope_theta=1000000.0 >/dev/null
ids=$(/usr/bin/python3 -c "import random; random.seed(1); print(','.join(str(random.randint(3, 31000)) for _ in range(128)))")
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
before=${BEFORE:-}
if [ -n "$before" ]; then
  printf "| type | file MB | before prefill tok/s | RLX prefill tok/s | llama.cpp prefill tok/s | prefill before/llama.cpp | prefill RLX/llama.cpp | before decode tok/s | RLX decode tok/s | llama.cpp decode tok/s | decode before/llama.cpp | decode RLX/llama.cpp |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
else
  printf "| type | file MB | RLX prefill tok/s | llama.cpp prefill tok/s | prefill RLX/llama.cpp | RLX decode tok/s | llama.cpp decode tok/s | decode RLX/llama.cpp |\n|---|---|---|---|---|---|---|---|\n"
fi
for spec in "F32 0" "Q8_0 7" "Q4_0 2" "Q4_K_M 15"; do
  set -- $spec
  f=$work/decoder-small_$1.gguf
  [ "$2" = 0 ] && f=$f32
  [ -f "$f" ] || LLAMACPP_LIB=$lib "$runner" "$f32" --quantize "$2" "$f" >/dev/null
  rp=(); rd=(); lp=(); ld=(); bp=(); bd=()
  for r in $(seq "$reps"); do
    if [ -n "$before" ]; then
      out=$("$before" "$f" --threads "$threads" --prompt 128 --decode 64 --batches 1 --repeat 1 2>&1 | tail -1)
      bp+=("$(echo "$out" | awk -F'|' '{print $4}')"); bd+=("$(echo "$out" | awk -F'|' '{print $5}')")
    fi
    out=$("$bench" "$f" --threads "$threads" --prompt 128 --decode 64 --batches 1 --repeat 1 2>&1 | tail -1)
    rp+=("$(echo "$out" | awk -F'|' '{print $4}')"); rd+=("$(echo "$out" | awk -F'|' '{print $5}')")
    out=$(LLAMACPP_LIB=$lib UV_THREADPOOL_SIZE=1 "$runner" "$f" --ids "$ids" --greedy 64 --time 1 --threads "$threads" | tail -1)
    lp+=("$(echo "$out" | sed -E 's/.*prefill [0-9.]+ ms \(([0-9.]+) tok.*/\1/')")
    ld+=("$(echo "$out" | sed -E 's/.*decode [0-9.]+ ms \(([0-9.]+) tok.*/\1/')")
  done
  a=$(printf "%s\n" "${rp[@]}" | median); b=$(printf "%s\n" "${lp[@]}" | median)
  c=$(printf "%s\n" "${rd[@]}" | median); d=$(printf "%s\n" "${ld[@]}" | median)
  mb=$(($(stat -L -c %s "$f") / 1048576))
  if [ -n "$before" ]; then
    e=$(printf "%s\n" "${bp[@]}" | median); g=$(printf "%s\n" "${bd[@]}" | median)
    printf "| %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f | %.2f | %.2f |\n" "$1" "$mb" "$e" "$a" "$b" \
      "$(echo "$e / $b" | bc -l)" "$(echo "$a / $b" | bc -l)" "$g" "$c" "$d" "$(echo "$g / $d" | bc -l)" "$(echo "$c / $d" | bc -l)"
  else
    printf "| %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n" "$1" "$mb" "$a" "$b" "$(echo "$a / $b" | bc -l)" "$c" "$d" \
      "$(echo "$c / $d" | bc -l)"
  fi
done
