#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a user's
# program against it twice: with find_package(rlx) and with pkg-config.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:$tmp/prefix/lib/x86_64-linux-gnu" "$tmp/consumer/consumer"
pcdir=$(dirname "$(find "$tmp/prefix" -name rlx.pc | head -n1)")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs rlx)
# shellcheck disable=SC2086
cc -std=c11 "$src/tests/install/consumer/main.c" -o "$tmp/consumer-pc" $flags -lm
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:$tmp/prefix/lib/x86_64-linux-gnu" "$tmp/consumer-pc"
