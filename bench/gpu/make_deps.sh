#!/usr/bin/env bash
# make_deps.sh [DIR] - on the CPU machine (Debian 12, scripts/install-deps.sh
# done), gathers what the GPU machine lacks into DIR (default gpu-deps):
# PCRE2, utf8proc, cJSON and protobuf-c (lib/ and include/), onnx.proto, the
# C code protoc-c makes from it (onnx-gen/) and bin/protoc-c, a stand-in
# that copies that code where the build asks.  llm_run.sh and run_all.sh use
# DIR through CMAKE_PREFIX_PATH; for the ONNX importer also pass
#   -DRLX_PROTOC_C=$PWD/DIR/bin/protoc-c -DRLX_ONNX_PROTO=$PWD/DIR/include/onnx/onnx.proto
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu-deps}
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$out/lib" "$out/include/onnx" "$out/onnx-gen" "$out/bin"
cp -P $lib/libpcre2-8.so* $lib/libutf8proc.so* $lib/libcjson.so* $lib/libprotobuf-c.so* "$out/lib/"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$out/include/"
cp -r /usr/include/cjson /usr/include/protobuf-c "$out/include/"
cp /usr/include/onnx/onnx.proto "$out/include/onnx/"
protoc-c --proto_path=/usr/include/onnx --c_out="$out/onnx-gen" /usr/include/onnx/onnx.proto
cat > "$out/bin/protoc-c" <<'SH'
#!/bin/sh
# stands in for protoc-c: copies the C code protoc-c made from the same
# onnx.proto on the CPU machine (bench/gpu/make_deps.sh)
here=$(cd "$(dirname "$0")/.." && pwd)
for a in "$@"; do case "$a" in --c_out=*) out=${a#--c_out=} ;; esac; done
cp "$here/onnx-gen/onnx.pb-c.c" "$here/onnx-gen/onnx.pb-c.h" "$out/"
SH
chmod +x "$out/bin/protoc-c"
echo "$out: $(du -sh "$out" | cut -f1)"
