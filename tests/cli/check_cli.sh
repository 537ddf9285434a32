#!/usr/bin/env bash
# The `rlx` program: each check runs a command and looks for what it must
# print (or the error it must give).  Exits non-zero on the first miss.
set -uo pipefail
rlx=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() { # expect NAME EXIT_CODE REGEX -- command...
  local name=$1 want_rc=$2 regex=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -Eq -e "$regex" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want_rc), output did not match /$regex/:"
    tail -n 15 <<<"$out"
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}

expect help 0 'latency: median X ms, min Y ms over N runs' -- "$rlx" run --help
expect default-model 0 'output hidden: f32 \[1, 16, 384\].*non-finite 0' -- "$rlx" run --seq 16 --threads 1
expect repeat 0 '^latency: median [0-9.]+ ms, min [0-9.]+ ms over 3 runs$' -- "$rlx" run mlp --batch 2 --repeat 3
expect verbose 0 'plan: .* transient [0-9]+ B vs lower bound' -- env RLX_VERBOSE=1 "$rlx" run --seq 8
expect verbose-stages 0 'stage times \(ms\): verify .* pre-encode' -- env RLX_VERBOSE=1 "$rlx" run --seq 8
expect unknown-model 1 "unknown model 'nosuch'" -- "$rlx" run nosuch
expect bad-option 2 "unknown option '--bogus'" -- "$rlx" run --bogus
expect bad-threads 2 '--threads needs an integer' -- "$rlx" run --threads zero
expect missing-file 1 "cannot open '$tmp/none.npy'" -- "$rlx" run "$tmp/m.onnx" --input x="$tmp/none.npy"
expect dump-dot 0 'wrote .*after.dot' -- "$rlx" dump --dot mlp --batch 2 -o "$tmp/g"
expect dump-no-overwrite 1 "rlx dump: '$tmp/g.before.dot' exists; not replaced \(pass --force to overwrite\)" -- \
  "$rlx" dump --dot mlp --batch 2 -o "$tmp/g"
expect dump-force 0 'wrote .*after.dot' -- "$rlx" dump --dot mlp --batch 2 -o "$tmp/g" --force
if ! grep -q 'digraph' "$tmp/g.before.dot" 2>/dev/null; then
  echo "FAIL dump-dot: $tmp/g.before.dot is not Graphviz"
  fails=$((fails + 1))
fi
if [ "${RLX_HAS_CUDA_GPU:-0}" = 0 ]; then
  # without a GPU (or without the CUDA backend) the device is refused clearly
  expect no-gpu 1 'compile failed: .*(cuda|CUDA)' -- "$rlx" run --device cuda --seq 8
fi
exit $((fails > 0))
