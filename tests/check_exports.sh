#!/bin/sh
# check_exports.sh LIB HEADER - librlx exports exactly the functions the
# public header declares: each declaration is marked RLX_API (the build
# makes the export list from those marks) and nothing internal leaks.
lib=$1 header=$2
command -v nm >/dev/null 2>&1 || { echo "skip: nm (binutils) is missing"; exit 77; }
unmarked=$(grep -E '^(const |unsigned )?[a-z_0-9]+[ *]+rlx_[a-z0-9_]+\(' "$header")
if [ -n "$unmarked" ]; then
  echo "FAIL: declared in $header without RLX_API:"; echo "$unmarked"; exit 1
fi
grep -E '^RLX_API ' "$header" | grep -oE 'rlx_[a-z0-9_]+\(' | tr -d '(' | sort -u > exports.declared
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u > exports.actual
n=$(wc -l < exports.declared)
if [ "$n" -lt 100 ]; then
  echo "FAIL: only $n RLX_API declarations found in $header"; exit 1
fi
if ! cmp -s exports.declared exports.actual; then
  echo "FAIL: $lib's exports differ from $header's RLX_API functions (< declared only, > exported only):"
  diff exports.declared exports.actual | grep '^[<>]'
  exit 1
fi
echo "ok: $lib exports the $n functions of $header and nothing else"
