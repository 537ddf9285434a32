"""python -m rlx: the `rlx` program's run and info commands, through the
library (the same calls as the C tools, from Python).

    python -m rlx info model.onnx
    python -m rlx run [encoder|mlp|resnet50|decoder-small|decoder|model.onnx]
                      [--device cpu|cuda] [--precision f32|f16|bf16] [--threads N]
                      [--repeat N] [--seed N] [--batch N] [--seq N]
                      [--input NAME=FILE.npy] [--shape NAME=AxB] [--output-dir DIR] [--report]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List, Optional

import numpy as np

import rlx

WORKLOADS = ("encoder", "mlp", "resnet50", "decoder-small", "decoder")


def _summary(name: str, a: np.ndarray) -> str:
    shown = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.float64)
    if a.size == 0:
        return f"{name}: {a.dtype}{list(a.shape)} (empty)"
    return (f"{name}: {a.dtype}{list(a.shape)} mean {shown.mean():.6g} min {shown.min():.6g} "
            f"max {shown.max():.6g} first {shown.ravel()[:4].tolist()}")


def _random_input(info: rlx.TensorInfo, shape: List[int], rng: np.random.Generator) -> np.ndarray:
    dt = info.dtype
    if dt in ("float32", "float16", "float64"):
        return rng.standard_normal(shape).astype(dt)
    if dt == "bfloat16":
        return (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 4, shape).astype(dt)


def _time(fn, repeat: int) -> None:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(f"latency: median {times[len(times) // 2]:.3f} ms, min {times[0]:.3f} ms over {repeat} runs")


def cmd_run(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m rlx run", description="Compile a model and run it.")
    p.add_argument("model", nargs="?", default="encoder", help="a built-in workload or a .onnx file")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="f32")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--repeat", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--seq", type=int, default=0)
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=AxB")
    p.add_argument("--output-dir", default=None)
    p.add_argument("--report", action="store_true")
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    if a.model in WORKLOADS:
        g = rlx.Graph.workload(a.model, a.batch, a.seq)
        c = g.compile(a.device, a.precision, a.threads, a.report)
        c.set_workload_params(a.seed)
        feeds = {}
        for info in c.get_inputs():
            if info.dtype == "int64":  # token ids
                feeds[info.name] = rng.integers(0, 1000, info.shape).astype(np.int64)
            else:
                feeds[info.name] = _random_input(info, list(info.shape), rng)
        run = lambda: c.run(feeds)  # noqa: E731
        names = [o.name for o in c.get_outputs()]
        if a.report:
            print(c.report(), end="")
    elif os.path.exists(a.model):
        s = rlx.InferenceSession(a.model, device=a.device, precision=a.precision, threads=a.threads)
        files: Dict[str, np.ndarray] = {}
        for spec in a.input:
            name, _, path = spec.partition("=")
            files[name] = rlx.read_tensor(path)
        shapes = {}
        for spec in a.shape:
            name, _, dims = spec.partition("=")
            shapes[name] = [int(d) for d in dims.split("x")]
        feeds = {}
        for info in s.get_inputs():
            if info.name in files:
                feeds[info.name] = files[info.name]
                continue
            shape = shapes.get(info.name) or [1 if d is None else d for d in (info.shape or ())]
            feeds[info.name] = _random_input(info, shape, rng)
        names = [o.name for o in s.get_outputs()]
        run = lambda: s.run(None, feeds)  # noqa: E731
    else:
        print(f"python -m rlx run: unknown model '{a.model}' (built-in: {', '.join(WORKLOADS)}, or a .onnx file)",
              file=sys.stderr)
        return 1
    outs = run()
    for name, arr in zip(names, outs):
        print(_summary(name, arr))
        if a.output_dir is not None:
            np.save(os.path.join(a.output_dir, f"{name}.npy"), arr)
    if a.repeat > 0:
        _time(run, a.repeat)
    return 0


def cmd_info(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m rlx info MODEL.onnx ...\n\nPrints each model's inputs, outputs, opsets and op counts.")
        return 1 if not argv else 0
    rc = 0
    for path in argv:
        try:
            rlx._rlx.print_info(path)
        except rlx.RLXError as e:
            print(f"python -m rlx info: {e}", file=sys.stderr)
            rc = 1
    return rc


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 1
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "run":
            return cmd_run(rest)
        if cmd == "info":
            return cmd_info(rest)
        if cmd == "version":
            print(rlx.version())
            return 0
    except rlx.RLXError as e:
        print(f"python -m rlx {cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"python -m rlx: unknown command '{cmd}' (run, info, version)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
