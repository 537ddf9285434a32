#!/bin/sh
# Fetches llama.cpp as node-llama-cpp ships it on the npm registry, once:
# later runs find it in the cache and need no network.
#   @node-llama-cpp/linux-x64   the prebuilt CPU libraries (libllama, libggml,
#                               libggml-base and one libggml-cpu-* per x86
#                               instruction-set level, picked at run time)
#   node-llama-cpp              only for llama/gitRelease.bundle, the matching
#                               llama.cpp source, from which the public headers
#                               (include/llama.h, ggml/include/*.h) and its
#                               LICENSE are taken
# No install scripts run (npm pack only downloads the tarballs).
# Leaves in CACHE: lib/ (the .so files), include/ (the headers), VERSION.
# Usage: fetch_llamacpp.sh [CACHE_DIR]   (default: third_party_models/node-llama-cpp)
# Exit 0 when everything is there, 77 (with the reason) when it cannot be had.
set -u
VERSION=3.22.1
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${1:-${RLX_LLAMACPP_CACHE:-$HERE/../../third_party_models/node-llama-cpp}}
[ -f "$CACHE/VERSION" ] && [ "$(cat "$CACHE/VERSION")" = "$VERSION" ] &&
  [ -f "$CACHE/include/llama.h" ] && [ -f "$CACHE/lib/libggml-base.so" ] && exit 0
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "skipped: node-llama-cpp's prebuilt CPU libraries used here are for Linux x86-64 only"; exit 77 ;;
esac
command -v npm >/dev/null || { echo "skipped: npm is needed to fetch node-llama-cpp"; exit 77; }
command -v git >/dev/null || { echo "skipped: git is needed to read llama.cpp's headers from node-llama-cpp's bundle"; exit 77; }
mkdir -p "$CACHE" || { echo "skipped: cannot create $CACHE"; exit 77; }
CACHE=$(cd "$CACHE" && pwd)
tmp=$(mktemp -d) || exit 77
trap 'rm -rf "$tmp"' EXIT
for spec in "@node-llama-cpp/linux-x64@$VERSION" "node-llama-cpp@$VERSION"; do
  echo "fetching $spec"
  if ! (cd "$tmp" && timeout 300 npm pack --loglevel=error --ignore-scripts "$spec" > name.txt 2> err.txt); then
    echo "skipped: could not fetch $spec from the npm registry: $(head -2 "$tmp/err.txt" | tr "\n" " ")"
    exit 77
  fi
done
new=$tmp/new
mkdir -p "$new/lib" "$new/include" "$tmp/bins" "$tmp/src" || exit 77
tar xzf "$tmp/node-llama-cpp-linux-x64-$VERSION.tgz" -C "$tmp/bins" --strip-components=1 &&
  tar xzf "$tmp/node-llama-cpp-$VERSION.tgz" -C "$tmp/src" --strip-components=1 \
      package/llama/gitRelease.bundle ||
  { echo "skipped: could not unpack the node-llama-cpp tarballs"; exit 77; }
rm -f "$tmp"/*.tgz
# the libraries (not the Node addon itself)
for f in "$tmp"/bins/bins/linux-x64/*.so; do
  cp "$f" "$new/lib/" || exit 77
done
cp "$tmp/bins/bins/linux-x64/_nlcBuildMetadata.json" "$new/lib/" 2>/dev/null
[ -f "$new/lib/libggml-base.so" ] || { echo "skipped: no libggml-base.so in @node-llama-cpp/linux-x64@$VERSION"; exit 77; }
# the headers, from the llama.cpp commit the libraries were built from
git init -q --bare "$tmp/git" &&
  git --git-dir="$tmp/git" fetch -q "$tmp/src/llama/gitRelease.bundle" HEAD 2>"$tmp/err.txt" &&
  git --git-dir="$tmp/git" archive FETCH_HEAD include ggml/include LICENSE | tar x -C "$tmp/src" &&
  cp "$tmp"/src/include/*.h "$tmp"/src/ggml/include/*.h "$new/include/" ||
  { echo "skipped: could not read the headers from node-llama-cpp's llama.cpp bundle: $(tail -2 "$tmp/err.txt")"; exit 77; }
git --git-dir="$tmp/git" rev-parse FETCH_HEAD > "$new/LLAMA_CPP_COMMIT"
cp "$tmp/src/LICENSE" "$new/LICENSE.llama.cpp" 2>/dev/null
echo "$VERSION" > "$new/VERSION"
rm -rf "$CACHE/lib" "$CACHE/include" "$CACHE/VERSION" "$CACHE/LLAMA_CPP_COMMIT" "$CACHE"/LICENSE* &&
  mv "$new"/* "$CACHE"/ || { echo "skipped: could not fill $CACHE"; exit 77; }
exit 0
