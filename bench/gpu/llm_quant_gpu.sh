#!/usr/bin/env bash
# llm_quant_gpu.sh - the `decoder` workload (Qwen3-0.6B shape, seeded
# weights, tied embedding) decoding on CUDA from GGUF files in BF16, Q8_0 and
# Q4_K_M: writes the BF16 file (tests/llm/reference.py), quantizes it with
# `rlx quantize`, times each with llm_bench (bf16 activations, prompt 512,
# decode 128) and prints decode tokens/s against the BF16 file's and against
# the floor of each file's weight bytes (file bytes over a device copy's
# bandwidth, measured by PyTorch here).  Goal (issue text): each type decodes
# faster than BF16 by at least 0.7 x the ratio of their weight bytes.
#
#   bench/gpu/llm_quant_gpu.sh            # BUILD=build-gpu (built by check_all.sh or llm_run.sh)
#
# BATCHES (default 1), REPEAT (3), WORK (where the files go, default /tmp/rlx-quant-gpu).
set -u -o pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/rlx-quant-gpu}
BATCHES=${BATCHES:-1}
REPEAT=${REPEAT:-3}
mkdir -p "$WORK"
t0=$(date +%s)
bf16=$WORK/decoder_bf16.gguf
[ -f "$bf16" ] || python3 tests/llm/reference.py write --arch qwen3 --format gguf --dtype bf16 --out "$bf16" --seed 7 \
  --set hidden_size=1024 --set intermediate_size=3072 --set num_hidden_layers=28 --set num_attention_heads=16 \
  --set num_key_value_heads=8 --set head_dim=128 --set vocab_size=151936 --set max_position_embeddings=40960 \
  --set rope_theta=1000000.0 --set tie_word_embeddings=true >/dev/null || { echo "could not write $bf16"; exit 1; }
for t in q8_0 q4_k_m; do
  [ -f "$WORK/decoder_$t.gguf" ] || "$BUILD/rlx" quantize "$bf16" "$WORK/decoder_$t.gguf" --type $t | tail -1
done
echo "files: $(( $(date +%s) - t0 )) s"
bw=$(python3 -c "
import torch, time
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device='cuda'); a.fill_(1); b = torch.empty_like(a); ts = []
for i in range(7):
    torch.cuda.synchronize(); t = time.perf_counter(); b.copy_(a); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
ts.sort(); print(2 * n / ts[3] / 1e9)")
echo "device copy bandwidth (read + write): $bw GB/s"
printf "| file | weights MB | decode b1 tok/s | over BF16 | goal | floor tok/s | of floor |\n|---|---|---|---|---|---|---|\n" >"$WORK/table.md"
base=
for t in bf16 q8_0 q4_k_m; do
  f=$WORK/decoder_$t.gguf
  "$BUILD/llm_bench" "$f" --device cuda --precision bf16 --prompt 512 --decode 128 --batches "$BATCHES" \
    --repeat "$REPEAT" >"$WORK/bench_$t.txt" 2>&1 || { tail -5 "$WORK/bench_$t.txt"; continue; }
  tail -4 "$WORK/bench_$t.txt"
  tok=$(grep -E '^\| *1 *\|' "$WORK/bench_$t.txt" | tail -1 | awk -F'|' '{print $5}' | tr -d ' ')
  mb=$(( $(stat -L -c %s "$f") / 1048576 ))
  [ -z "$base" ] && { base=$tok; base_mb=$mb; }
  python3 -c "
tok, base, mb, bmb, bw = float('$tok'), float('$base'), $mb, $base_mb, float('$bw')
floor = bw * 1e9 / (mb * 1048576)
goal = 0.7 * bmb / mb
print('| %s | %d | %.1f | %.2f | %s | %.0f | %.2f |' % ('$t', mb, tok, tok / base, '-' if mb == bmb else '>= %.2f' % goal, floor, tok / floor))
" >>"$WORK/table.md"
done
cat "$WORK/table.md"
