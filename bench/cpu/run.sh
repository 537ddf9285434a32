#!/usr/bin/env bash
# CPU workloads, RLX against PyTorch (Debian's python3-torch), interleaved
# (A B A B ...) so that the machine's drifting speed hits both alike.
# usage: bench/cpu/run.sh [ROUNDS] [THREADS]   (from the repository root, after a Release build in build/)
# Prints one row per workload: medians of the per-round medians and the ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
threads=${2:-2}
rlx=${RLX_BIN:-build/rlx}
py=/usr/bin/python3
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf "%-14s %12s %12s %8s\n" workload "rlx ms" "torch ms" "torch/rlx"
for spec in "mlp 256 10" "encoder 1 20" "encoder 32 3" "resnet50 1 5" "resnet50 16 2"; do
  set -- $spec
  model=$1 batch=$2 repeat=$3
  r_times=() t_times=()
  for _ in $(seq "$rounds"); do
    r=$("$rlx" run "$model" --batch "$batch" --threads "$threads" --repeat "$repeat" | sed -n 's/^latency: median \([0-9.]*\) ms.*/\1/p')
    t=$(OMP_NUM_THREADS=$threads "$py" bench/cpu/torch_workloads.py "$model" "$batch" "$repeat" "$threads" | sed -n 's/^latency: median \([0-9.]*\) ms.*/\1/p')
    r_times+=("$r") t_times+=("$t")
  done
  rm_=$(printf "%s\n" "${r_times[@]}" | median)
  tm_=$(printf "%s\n" "${t_times[@]}" | median)
  printf "%-14s %12.2f %12.2f %8.2f\n" "$model-b$batch" "$rm_" "$tm_" "$(echo "$tm_ / $rm_" | bc -l)"
done
