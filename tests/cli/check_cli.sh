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

# ---- files only on request, never replaced unasked, never half-written
data=$(cd "$(dirname "$0")/data" && pwd)
model=$data/tiny.onnx # x f32 [N, 4] -> y, p f32 [N, 3]
x=$data/x.npy         # f32 [2, 4]
out=$tmp/out
mkdir -p "$out"
no_files() { # no_files NAME DIR: DIR holds nothing (no output, no temporary)
  if [ -n "$(ls -A "$2")" ]; then
    echo "FAIL $1: files left in $2: $(ls -A "$2" | tr '\n' ' ')"
    fails=$((fails + 1))
  fi
}
# make_npy FILE DESCR FORTRAN SHAPE DATA_BYTES [MAGIC] [HEADER_LEN]: a crafted .npy (version 1)
make_npy() {
  local h="{'descr': '$2', 'fortran_order': $3, 'shape': $4, }"
  local pad=$(((64 - (10 + ${#h} + 1) % 64) % 64))
  local hl=${7:-$((${#h} + pad + 1))}
  {
    printf "${6:-\\x93NUMPY}\\x01\\x00"
    printf "\\x$(printf %02x $((hl & 255)))\\x$(printf %02x $((hl >> 8 & 255)))"
    printf '%s%*s\n' "$h" "$pad" ''
    head -c "$5" /dev/zero
  } >"$1"
}
if "$rlx" info "$model" >/dev/null 2>&1; then
  (cd "$out" && "$rlx" run "$model" --input x="$x" >/dev/null 2>&1)
  no_files no-output-unasked "$out"
  expect not-written-note 0 'outputs not written \(ask with --output-dir DIR or --output NAME=FILE\)' -- \
    "$rlx" run "$model" --input x="$x"
  # dump binds the model's input shapes from --input files, as run does
  expect dump-input 0 'wrote .*after.dot' -- "$rlx" dump --dot "$model" --input x="$x" -o "$tmp/gi"
  expect dump-input-missing 1 "rlx dump: --input x: .*none.npy" -- "$rlx" dump --dot "$model" --input x="$tmp/none.npy" \
    -o "$tmp/gm"
  expect output-dir 0 "wrote $out/p.npy" -- "$rlx" run "$model" --input x="$x" --output-dir "$out"
  cp "$out/y.npy" "$tmp/y.before"
  expect no-overwrite 1 "^rlx run: output 'y': '$out/y.npy' exists; not replaced \(pass --force to overwrite\)$" -- \
    "$rlx" run "$model" --input x="$x" --output-dir "$out"
  if ! cmp -s "$out/y.npy" "$tmp/y.before"; then
    echo "FAIL no-overwrite: $out/y.npy changed"
    fails=$((fails + 1))
  fi
  expect force 0 "wrote $out/y.npy" -- "$rlx" run "$model" --input x="$x" --output-dir "$out" --force
  expect output-one 0 "wrote $tmp/one.npy" -- "$rlx" run "$model" --input x="$x" --output p="$tmp/one.npy"
  rm -f "$out"/*.npy "$tmp/one.npy"
  # ---- the bad-input matrix: exit 1 (2 for a bad option), one line naming the problem, no file left
  bad() { # bad NAME EXIT_CODE REGEX -- command...: also checks that $out stays empty
    expect "$@"
    no_files "$1" "$out"
  }
  o=(--output-dir "$out")
  bad in-missing 1 "^rlx run: --input x: cannot open '$tmp/none.npy': No such file or directory$" -- \
    "$rlx" run "$model" --input x="$tmp/none.npy" "${o[@]}"
  bad in-directory 1 "^rlx run: --input x: '$tmp' is a directory$" -- "$rlx" run "$model" --input x="$tmp" "${o[@]}"
  : >"$tmp/empty.npy"
  bad in-empty 1 "^rlx run: --input x: '$tmp/empty.npy' is empty$" -- \
    "$rlx" run "$model" --input x="$tmp/empty.npy" "${o[@]}"
  if [ "$(id -u)" != 0 ]; then # root reads any file
    cp "$x" "$tmp/locked.npy" && chmod 000 "$tmp/locked.npy"
    bad in-unreadable 1 "^rlx run: --input x: cannot open '$tmp/locked.npy': Permission denied$" -- \
      "$rlx" run "$model" --input x="$tmp/locked.npy" "${o[@]}"
  fi
  head -c 140 "$x" >"$tmp/trunc.npy"
  bad in-truncated 1 "^rlx run: --input x: '$tmp/trunc.npy': the shape needs 32 data bytes, the file has 12$" -- \
    "$rlx" run "$model" --input x="$tmp/trunc.npy" "${o[@]}"
  head -c 100 "$x" >"$tmp/trunch.npy"
  bad in-truncated-header 1 "^rlx run: --input x: '$tmp/trunch.npy': bad header length 118$" -- \
    "$rlx" run "$model" --input x="$tmp/trunch.npy" "${o[@]}"
  head -c 5 "$x" >"$tmp/trunc5.npy"
  bad in-truncated-magic 1 "^rlx run: --input x: '$tmp/trunc5.npy' is not a .npy file$" -- \
    "$rlx" run "$model" --input x="$tmp/trunc5.npy" "${o[@]}"
  make_npy "$tmp/magic.npy" '<f4' False '(2, 4)' 32 '\x93NUMPX'
  bad in-magic 1 "^rlx run: --input x: '$tmp/magic.npy' is not a .npy file$" -- \
    "$rlx" run "$model" --input x="$tmp/magic.npy" "${o[@]}"
  make_npy "$tmp/hlen.npy" '<f4' False '(2, 4)' 32 '' 65535
  bad in-header-length 1 "^rlx run: --input x: '$tmp/hlen.npy': bad header length 65535$" -- \
    "$rlx" run "$model" --input x="$tmp/hlen.npy" "${o[@]}"
  make_npy "$tmp/fortran.npy" '<f4' True '(2, 4)' 32
  bad in-fortran 1 "^rlx run: --input x: '$tmp/fortran.npy': only C-order arrays are supported$" -- \
    "$rlx" run "$model" --input x="$tmp/fortran.npy" "${o[@]}"
  make_npy "$tmp/object.npy" '|O' False '(2, 4)' 64
  bad in-object 1 "^rlx run: --input x: '$tmp/object.npy': dtype 'O' is not supported$" -- \
    "$rlx" run "$model" --input x="$tmp/object.npy" "${o[@]}"
  make_npy "$tmp/long.npy" '<f4' False '(2, 4)' 40
  bad in-size 1 "^rlx run: --input x: '$tmp/long.npy': the shape needs 32 data bytes, the file has 40$" -- \
    "$rlx" run "$model" --input x="$tmp/long.npy" "${o[@]}"
  make_npy "$tmp/big.npy" '<f4' False '(4000000000000, 4000000000000)' 0
  bad in-huge-shape 1 "^rlx run: --input x: '$tmp/big.npy': array too large$" -- \
    "$rlx" run "$model" --input x="$tmp/big.npy" "${o[@]}"
  make_npy "$tmp/int.npy" '<i8' False '(2, 4)' 64
  bad in-dtype 1 "^rlx run: cannot set params/inputs: input 'x' is f32, the file holds i64$" -- \
    "$rlx" run "$model" --input x="$tmp/int.npy" "${o[@]}"
  make_npy "$tmp/wide.npy" '<f4' False '(2, 5)' 40
  bad in-shape 1 "^rlx run: $model: input 'x' dim 1 is 4 in the model, the binding gives 5$" -- \
    "$rlx" run "$model" --input x="$tmp/wide.npy" "${o[@]}"
  make_npy "$tmp/rank.npy" '<f4' False '(2, 4, 1)' 32
  bad in-rank 1 "^rlx run: $model: input 'x' has rank 2, the binding gives rank 3$" -- \
    "$rlx" run "$model" --input x="$tmp/rank.npy" "${o[@]}"
  bad model-missing 1 "^rlx run: cannot open '$tmp/none.onnx': No such file or directory$" -- \
    "$rlx" run "$tmp/none.onnx" "${o[@]}"
  bad model-directory 1 "^rlx run: '$out' is a directory$" -- "$rlx" run "$out" "${o[@]}"
  : >"$tmp/empty.onnx"
  bad model-empty 1 "^rlx run: '$tmp/empty.onnx' is empty$" -- "$rlx" run "$tmp/empty.onnx" "${o[@]}"
  printf '\377\377\377' >"$tmp/junk.onnx"
  bad model-junk 1 "^rlx run: '$tmp/junk.onnx' is not a valid ONNX model \(protobuf decoding failed\)$" -- \
    "$rlx" run "$tmp/junk.onnx" "${o[@]}"
  bad in-name 1 "^rlx run: cannot set params/inputs: the compiled graph has no input named 'nosuch'$" -- \
    "$rlx" run "$model" --input nosuch="$x" "${o[@]}"
  bad out-name 1 "^rlx run: --output nosuch: the model has no output 'nosuch' \(outputs: y p\)$" -- \
    "$rlx" run "$model" --input x="$x" --output nosuch="$out/a.npy"
  bad out-dir-missing 1 "^rlx run: --output-dir '$tmp/nowhere': no such folder$" -- \
    "$rlx" run "$model" --input x="$x" --output-dir "$tmp/nowhere"
  bad out-dir-file 1 "^rlx run: --output-dir '$x': not a folder$" -- "$rlx" run "$model" --input x="$x" --output-dir "$x"
  bad out-dir-proc 1 "^rlx run: output 'y': cannot write '/proc/y.npy': " -- \
    "$rlx" run "$model" --input x="$x" --output-dir /proc
  bad out-file-dir 1 "^rlx run: output 'y': cannot write '$out': it is a directory$" -- \
    "$rlx" run "$model" --input x="$x" --output y="$out" --force
  bad out-no-folder 1 "^rlx run: output 'y': cannot write '$tmp/nowhere/y.npy': folder '$tmp/nowhere' does not exist$" -- \
    "$rlx" run "$model" --input x="$x" --output y="$tmp/nowhere/y.npy"
  bad out-device-unforced 1 "^rlx run: output 'y': '/dev/full' exists; not replaced \(pass --force to overwrite\)$" -- \
    "$rlx" run "$model" --input x="$x" --output y=/dev/full
  bad out-disk-full 1 "^rlx run: output 'y': cannot write '/dev/full': No space left on device$" -- \
    "$rlx" run "$model" --input x="$x" --output y=/dev/full --output p="$out/p.npy" --force
fi
expect threads-zero 2 '^rlx run: --threads needs an integer from 1 to 1024$' -- "$rlx" run mlp --threads 0
expect threads-negative 2 '^rlx run: --threads needs an integer from 1 to 1024$' -- "$rlx" run mlp --threads -3
expect threads-huge 2 '^rlx run: --threads needs an integer from 1 to 1024$' -- "$rlx" run mlp --threads 100000
expect threads-overflow 2 '^rlx run: --threads needs an integer from 1 to 1024$' -- \
  "$rlx" run mlp --threads 99999999999999999999999
expect repeat-huge 2 '^rlx run: --repeat needs an integer >= 1$' -- "$rlx" run mlp --repeat 99999999999999999999
expect max-memory 1 '^rlx run: compile failed: the arena needs 100773888 bytes \(96.1 MiB\), over the limit of 1024 bytes \(1.0 KiB\)' -- \
  "$rlx" run mlp --batch 2 --max-memory 1K
expect max-memory-env 1 'over the limit of 1048576 bytes \(1.0 MiB\) set by' -- env RLX_MAX_ARENA=1M "$rlx" run mlp --batch 2
expect max-memory-bad 2 '^rlx run: --max-memory takes a size such as 4096, 512M or 2G$' -- "$rlx" run mlp --max-memory lots
expect max-memory-fits 0 'output y: f32 \[2, 1024\]' -- "$rlx" run mlp --batch 2 --max-memory 200M
expect available-memory 1 'the arena needs [0-9]+ bytes \(.*\), more than the [0-9]+ bytes \(.*\) of memory available' -- \
  "$rlx" run mlp --batch 100000000
# ---- a model whose op needs values it computes (NMS on computed boxes) runs in stages
mkdir -p "$tmp/mm" "$tmp/st"
if /usr/bin/python3 "$(dirname "$0")/../onnx/make_models.py" "$tmp/mm" >/dev/null 2>&1; then
  expect staged 0 'over 3 runs \(2 stages compiled\)' -- "$rlx" run "$tmp/mm/staged_nms.onnx" --repeat 3
  expect staged-summary 0 'output y: f32 \[[0-9]+, 4\]' -- "$rlx" run "$tmp/mm/staged_nms.onnx"
  expect staged-output 0 "wrote $tmp/st/y.npy" -- "$rlx" run "$tmp/mm/staged_nms.onnx" --output-dir "$tmp/st"
  expect staged-no-overwrite 1 "output 'y': '$tmp/st/y.npy' exists; not replaced" -- \
    "$rlx" run "$tmp/mm/staged_nms.onnx" --output-dir "$tmp/st"
else
  echo "skip staged: /usr/bin/python3 with the onnx module is needed to write the model"
fi
if [ "${RLX_HAS_CUDA_GPU:-0}" = 0 ]; then
  # without a GPU (or without the CUDA backend) the device is refused clearly
  expect no-gpu 1 'compile failed: .*(cuda|CUDA)' -- "$rlx" run --device cuda --seq 8
fi
exit $((fails > 0))
