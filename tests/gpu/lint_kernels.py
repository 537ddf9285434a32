#!/usr/bin/env python3
"""lint_kernels.py - the CUDA backend's launch rule, checked without a GPU.

Our kernels are launched through cu_launch (cuda_common.h), which lets each
start while the kernel before it drains; that is only correct when the
kernel begins with cu_grid_wait() (or cu_prefetch_then_wait(), which reads
only memory no kernel of the run writes before it waits).  This check fails when a kernel in
src/backends/cuda does not begin with it, or when a kernel is launched
another way (<<<...>>>).

    lint_kernels.py [DIR]     (default: src/backends/cuda beside this file)
"""
import os
import re
import sys


def strip_comments(text):
    """Comments and string literals out (a kernel generated at run time is
    text in a string: jit.cu's callers write its wait themselves)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def check(path):
    text = strip_comments(open(path, encoding="utf-8").read())
    problems, kernels = [], 0
    for m in re.finditer(r"\b__global__\b", text):
        line = text.count("\n", 0, m.start()) + 1
        body = text.index("{", m.end())
        name = re.findall(r"([A-Za-z_]\w*)\s*\(", text[m.end():body])
        name = [n for n in name if n != "__launch_bounds__"]
        kernels += 1
        if not re.match(r"\s*(cu_grid_wait\(\);|cu_prefetch_then_wait\()", text[body + 1:]):
            problems.append("%s:%d: kernel %s does not begin with cu_grid_wait(); or cu_prefetch_then_wait("
                            % (path, line, name[0] if name else "?"))
    for m in re.finditer(r"<<<", text):
        line = text.count("\n", 0, m.start()) + 1
        problems.append("%s:%d: a <<<...>>> launch (launch kernels with cu_launch)" % (path, line))
    return kernels, problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "src", "backends", "cuda")
    files = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith((".cu", ".h", ".cuh")))
    total, problems = 0, []
    for f in files:
        k, p = check(f)
        total += k
        problems += p
    for p in problems:
        print(p)
    print("%d kernels in %d files, %d problems" % (total, len(files), len(problems)))
    if total == 0:
        print("no kernels found under %s: wrong directory?" % root)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
