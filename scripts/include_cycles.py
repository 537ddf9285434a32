#!/usr/bin/python3
"""Dependency circles in src/, at three grains.

1. files: the #include "..." graph (a header that ends up including itself);
2. folders: src/X includes a header of src/Y and src/Y one of src/X (io and
   backends count by subfolder: io/onnx, backends/cpu, ...);
3. with a build folder (its CMakeFiles/*.dir/src objects): the files whose objects
   use each other's functions, read with nm, which is where shared helpers
   sit above the files that call them (a header is shared by both).

Usage: scripts/include_cycles.py [build]   (exit 1 when any circle is found)
Known circles are listed in ALLOWED with the reason; they are printed but
do not fail.  ctest runs it on the CPU build (test include_cycles); on a
CUDA build it also shows cuda_backend.cu and the k_*.cu files calling each
other (launch and error helpers kept in cuda_backend.cu), not yet moved."""
import collections
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
SRC = os.path.join(ROOT, 'src')
# the op table's rows point at their inference, decomposition and gradient functions,
# which look rows up in turn: one unit split by meaning
ALLOWED = {('src/ir/decompose.c', 'src/ir/ops.c'), ('src/ir/grad_rules.c', 'src/ir/ops.c'),
           ('src/ir/ops.c', 'src/ir/ops_fused.c')}


def sources():
    out = {}
    for d, _, fs in os.walk(SRC):
        for f in fs:
            if f.endswith(('.h', '.c', '.cu', '.cuh')):
                p = os.path.join(d, f)
                out[os.path.relpath(p, SRC)] = p
    return out


def include_graph(files):
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    g = {}
    for rel, p in files.items():
        deps = set()
        for name in inc.findall(open(p, errors='replace').read()):
            for cand in (os.path.normpath(os.path.join(os.path.dirname(rel), name)), os.path.normpath(name)):
                if cand in files:
                    deps.add(cand)
                    break
        g[rel] = deps
    return g


def sccs(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(100000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def folder(rel):
    parts = rel.split('/')
    return '/'.join(parts[:2]) if parts[0] in ('io', 'backends') and len(parts) > 2 else parts[0]


def main():
    files = sources()
    g = include_graph(files)
    found = 0
    comps = sccs(g)
    print(f'files: {len(comps)} #include circle(s)')
    for c in comps:
        print('  ', ' -> '.join(c))
    found += len(comps)

    fg, why = collections.defaultdict(set), collections.defaultdict(list)
    for a, deps in g.items():
        for b in deps:
            if folder(a) != folder(b):
                fg[folder(a)].add(folder(b))
                why[(folder(a), folder(b))].append(f'{a} includes {b}')
    comps = sccs(fg)
    print(f'folders: {len(comps)} circle(s)')
    for c in comps:
        print('  ', ' <-> '.join(c))
        for a in c:
            for b in c:
                for w in why.get((a, b), [])[:3]:
                    print('      ', w)
    found += len(comps)

    if len(sys.argv) > 1:
        # the library's objects: BUILD/CMakeFiles/rlx_objects.dir/src/... (any other
        # target's folder may hold objects of an older layout of the build)
        objs = glob.glob(os.path.join(sys.argv[1], 'CMakeFiles', 'rlx_objects.dir', 'src', '**', '*.o'), recursive=True)
        if not objs:
            objs = glob.glob(os.path.join(sys.argv[1], 'CMakeFiles', '*.dir', 'src', '**', '*.o'), recursive=True)
        defs, uses, seen = {}, collections.defaultdict(set), set()
        for o in sorted(objs):
            name = 'src/' + o.split('.dir' + os.sep + 'src' + os.sep, 1)[1][:-2]
            if name in seen or not os.path.exists(os.path.join(ROOT, name)):
                continue  # the same source in a second target, or a stale object of a moved file
            seen.add(name)
            for line in subprocess.run(['nm', o], capture_output=True, text=True).stdout.splitlines():
                p = line.split()
                if len(p) == 3 and p[1] in 'TDBR':
                    defs[p[2]] = name
                elif len(p) == 2 and p[0] == 'U':
                    uses[name].add(p[1])
        sg, sym = collections.defaultdict(set), collections.defaultdict(set)
        for a, ss in uses.items():
            for s in ss:
                b = defs.get(s)
                if b and b != a:
                    sg[a].add(b)
                    sym[(a, b)].add(s)
        pairs = sorted((a, b) for a in sg for b in sg[a] if a < b and a in sg.get(b, ()))
        bad = [p for p in pairs if p not in ALLOWED]
        print(f'objects: {len(pairs)} pair(s) of files using each other ({len(pairs) - len(bad)} allowed)')
        for a, b in pairs:
            tag = ' (allowed)' if (a, b) in ALLOWED else ''
            print(f'   {a} <-> {b}{tag}')
            print(f'      {os.path.basename(a)} uses {", ".join(sorted(sym[(a, b)])[:5])}')
            print(f'      {os.path.basename(b)} uses {", ".join(sorted(sym[(b, a)])[:5])}')
        found += len(bad)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
