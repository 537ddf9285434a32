#!/usr/bin/env bash
# `rlx train`: the loss falls on the default text, a checkpoint resumes to
# the same bytes as an uninterrupted run, --plot draws SVG, and files are
# written only when asked (never replaced without --force).
set -uo pipefail
rlx=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
small=(--layers 1 --batch 4 --seq 64 --threads 2)

# the loss falls: 30 steps from a uniform guess (5.55) on the license texts
out=$("$rlx" train "${small[@]}" --steps 30 --lr 0.003 2>&1) || fail "train: exit $?: $(tail -3 <<<"$out")"
line=$(grep '^trained 30 steps' <<<"$out")
first=$(sed -E 's/.*loss ([0-9.]+) -> ([0-9.]+).*/\1/' <<<"$line")
last=$(sed -E 's/.*loss ([0-9.]+) -> ([0-9.]+).*/\2/' <<<"$line")
if [ -z "$line" ] || ! awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'; then
  fail "loss-falls: '$line'"
else
  echo "ok   loss-falls ($first -> $last)"
fi

# 6 steps straight = stop at 3 and save, resume to 6: the same checkpoint bytes
# (warm-up and cosine decay over the 6 steps in both)
"$rlx" train "${small[@]}" --steps 6 --accumulate 2 --save "$tmp/a.safetensors" >/dev/null 2>&1 || fail "save a"
"$rlx" train "${small[@]}" --steps 6 --stop-at 3 --accumulate 2 --save "$tmp/b.safetensors" --plot "$tmp/b.svg" >/dev/null 2>&1 ||
  fail "save b"
"$rlx" train "${small[@]}" --steps 6 --accumulate 2 --resume "$tmp/b.safetensors" --save "$tmp/c.safetensors" \
  >"$tmp/c.log" 2>&1 || fail "resume: $(tail -3 "$tmp/c.log")"
grep -q 'training steps 4 to 6' "$tmp/c.log" || fail "resume did not go on from step 4: $(head -3 "$tmp/c.log")"
if cmp -s "$tmp/a.safetensors" "$tmp/c.safetensors"; then echo "ok   resume-bit-identical"; else fail "resume: checkpoints differ"; fi
grep -q '<polyline' "$tmp/b.svg" && grep -q '</svg>' "$tmp/b.svg" && echo "ok   plot" || fail "plot: not an SVG line chart"
# the checkpoint is plain safetensors: its header names the params and the step counter
hdr=$(/usr/bin/python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; h=json.loads(f.read(n)); print(h["opt.step"]["dtype"], h["embed.w"]["shape"], len(h))' "$tmp/a.safetensors")
grep -q '^I64 \[256, 512\]' <<<"$hdr" && echo "ok   checkpoint-header ($hdr)" || fail "checkpoint header: '$hdr'"

# never replaced unasked; refused before training starts
before=$(md5sum <"$tmp/a.safetensors")
out=$("$rlx" train "${small[@]}" --steps 2 --save "$tmp/a.safetensors" 2>&1)
rc=$?
[ "$rc" -eq 1 ] && grep -q 'exists' <<<"$out" && ! grep -q '^trained' <<<"$out" && [ "$before" = "$(md5sum <"$tmp/a.safetensors")" ] &&
  echo "ok   no-overwrite" || fail "no-overwrite: exit $rc: $out"
"$rlx" train "${small[@]}" --steps 2 --save "$tmp/a.safetensors" --force >/dev/null 2>&1 && echo "ok   force" || fail "force"
out=$("$rlx" train "${small[@]}" --steps 3 --resume "$tmp/c.safetensors" 2>&1)
[ $? -eq 1 ] && grep -q 'at step 6 already' <<<"$out" && echo "ok   resume-past-end" || fail "resume-past-end: $out"
out=$("$rlx" train "${small[@]}" --layers 2 --resume "$tmp/c.safetensors" 2>&1)
[ $? -eq 1 ] && grep -q "no tensor 'l1" <<<"$out" && echo "ok   resume-other-model" || fail "resume-other-model: $out"
out=$("$rlx" train --text "$tmp/none.txt" 2>&1)
[ $? -eq 1 ] && grep -q "none.txt" <<<"$out" && echo "ok   missing-text" || fail "missing-text: $out"
out=$("$rlx" train --optimizer lion 2>&1)
[ $? -eq 2 ] && grep -q "adamw, adam or sgd" <<<"$out" && echo "ok   bad-optimizer" || fail "bad-optimizer: $out"
# an ONNX model with a loss output, its inputs from .npy files (samples along axis 0)
if /usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null; then
  /usr/bin/python3 - "$tmp" <<'PY'
import sys, numpy as np
from onnx import helper, numpy_helper, TensorProto, save
d = sys.argv[1]
rng = np.random.default_rng(5)
w = numpy_helper.from_array((rng.standard_normal((4, 3)) * 0.5).astype(np.float32), "w")
b = numpy_helper.from_array(np.zeros(3, np.float32), "b")
vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"]),
                       helper.make_node("Sub", ["y", "t"], ["e"]), helper.make_node("Mul", ["e", "e"], ["e2"]),
                       helper.make_node("ReduceMean", ["e2"], ["loss"], keepdims=0)],
                      "lin", [vi("x", ["N", 4]), vi("t", ["N", 3])], [vi("loss", [])], [w, b])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/lin.onnx")
x = rng.standard_normal((64, 4)).astype(np.float32)
np.save(d + "/x.npy", x)
np.save(d + "/t.npy", (x @ rng.standard_normal((4, 3)) + 0.3).astype(np.float32))
PY
  out=$("$rlx" train "$tmp/lin.onnx" --loss loss --input x="$tmp/x.npy" --input t="$tmp/t.npy" --batch 16 \
    --steps 200 --lr 0.05 --threads 2 --save "$tmp/lin.safetensors" 2>&1)
  line=$(grep '^trained 200 steps' <<<"$out")
  first=$(sed -E 's/.*loss ([0-9.e+-]+) -> ([0-9.e+-]+).*/\1/' <<<"$line")
  last=$(sed -E 's/.*loss ([0-9.e+-]+) -> ([0-9.e+-]+).*/\2/' <<<"$line")
  if [ -n "$line" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 20) }'; then
    echo "ok   onnx-model ($first -> $last)"
  else
    fail "onnx-model: $(tail -3 <<<"$out")"
  fi
  out=$("$rlx" train "$tmp/lin.onnx" --loss loss --input x="$tmp/x.npy" --threads 2 2>&1)
  [ $? -eq 1 ] && grep -q "input 't' needs --input t=FILE.npy" <<<"$out" && echo "ok   onnx-missing-input" ||
    fail "onnx-missing-input: $out"
  out=$("$rlx" train "$tmp/lin.onnx" --loss nope --input x="$tmp/x.npy" --input t="$tmp/t.npy" 2>&1)
  [ $? -eq 1 ] && grep -q "no output named 'nope'" <<<"$out" && echo "ok   onnx-bad-loss" || fail "onnx-bad-loss: $out"
  out=$("$rlx" train "$tmp/lin.onnx" --loss loss --input x="$tmp/t.npy" --input t="$tmp/t.npy" 2>&1)
  [ $? -eq 1 ] && grep -q "input 'x' takes" <<<"$out" && echo "ok   onnx-wrong-shape" || fail "onnx-wrong-shape: $out"
else
  echo "skip onnx-model: /usr/bin/python3 has no onnx module to write the test model"
fi
ls "$tmp" | grep -q '\.tmp' && fail "temporary files left: $(ls "$tmp")"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all rlx train checks passed"
