#!/usr/bin/env python3
"""Kernel time per training step on the GPU, RLX beside PyTorch, by kernel name.

    python3 bench/train/timeline.py TRAIN_BENCH_SO WORKLOAD PRECISION [--steps N] [--torch eager,compile]

TRAIN_BENCH_SO is bench/train/train_bench.c built as a shared object whose
main is renamed (`cc -shared -fPIC -Dmain=train_bench_main ...`), so RLX's
trainer runs inside this process and torch.profiler (CUPTI) sees its
kernels, CUDA-graph nodes and library kernels included.  train_bench runs
3 warm-up steps and then N timed steps; the RLX kernels are split into
steps at idle gaps over 30 us (a step ends with its loss read back on the
host) and the last N groups are summed.  PyTorch runs train_torch.py's
model, data and AdamW the same way, the profiler on for the N timed steps
only.  Printed per engine: kernels and kernel time per step, the step's
span on the GPU, and the kernels by total time (with their count).  CUPTI
adds a little to every kernel: compare this tool's figures with each
other, not with train_bench's steps/s.
"""
import collections
import ctypes
import json
import os
import sys
import tempfile

GAP_US = 30.0


def kernel_events(prof):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    return sorted((e["ts"], e["dur"], e["name"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy",
                                                                                      "gpu_memset"))


def split_steps(kernels):
    out, cur, end = [], [], None
    for s, d, n in kernels:
        if end is not None and s - end > GAP_US:
            out.append(cur)
            cur = []
        cur.append((s, d, n))
        end = max(end or 0.0, s + d)
    if cur:
        out.append(cur)
    return out


def report(tag, steps):
    if not steps:
        print(f"== {tag}: no kernels traced")
        return
    n = len(steps)
    busy = sum(d for b in steps for _, d, _ in b) / n
    span = sum(b[-1][0] + b[-1][1] - b[0][0] for b in steps) / n
    count = sum(len(b) for b in steps) / n
    print(f"== {tag}: {n} steps; per step {count:.0f} kernels, {busy / 1e3:.3f} ms of kernels, "
          f"span {span / 1e3:.3f} ms")
    per = collections.defaultdict(lambda: [0.0, 0])
    for b in steps:
        for _, d, name in b:
            per[name][0] += d / n
            per[name][1] += 1
    print("  us/step   share  count/step  kernel")
    for name, (d, c) in sorted(per.items(), key=lambda kv: -kv[1][0])[:40]:
        print(f"  {d:8.1f}  {100 * d / busy:5.1f}%  {c / n:6.1f}  {name[:110]}")


def run_rlx(torch, so, workload, precision, nsteps):
    lib = ctypes.CDLL(so)
    argv = ["train_bench", "--workload", workload, "--device", "cuda", "--precision", precision, "--warmup", "3",
            "--steps", str(nsteps), "--repeat", "1"]
    arr = (ctypes.c_char_p * len(argv))(*[a.encode() for a in argv])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        rc = lib.train_bench_main(len(argv), arr)
    sys.stdout.flush()
    if rc != 0:
        print(f"== RLX {workload} {precision}: train_bench failed ({rc})")
        return
    steps = split_steps(kernel_events(p))
    print(f"(RLX: {len(steps)} groups split at {GAP_US:.0f} us gaps; the last {nsteps} are the timed steps)")
    report(f"RLX {workload} {precision}", steps[-nsteps:])


def run_torch(torch, workload, precision, mode, nsteps):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import train_torch
    dev = torch.device("cuda")
    model, inputs, _, _ = train_torch.build(workload, 0, 0, dev)
    train_torch.init_params(model)
    model.to(dev)
    inputs = tuple(t.to(dev) for t in inputs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    fn = torch.compile(model) if mode == "compile" else model
    amp = {"bf16": torch.bfloat16, "f16": torch.float16}.get(precision)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=amp, enabled=amp is not None):
            loss = fn(*inputs)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    groups = []
    for _ in range(nsteps):  # one profile per step: exact step boundaries
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            step()
        groups.append(kernel_events(p))
    report(f"PyTorch {mode} {workload} {precision}", groups)


def main():
    import argparse
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("so")
    ap.add_argument("workload")
    ap.add_argument("precision")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--torch", default="compile")
    a = ap.parse_args()
    import torch
    run_rlx(torch, os.path.abspath(a.so), a.workload, a.precision, a.steps)
    for mode in a.torch.split(","):
        if mode:
            run_torch(torch, a.workload, a.precision, mode, a.steps)


if __name__ == "__main__":
    main()
