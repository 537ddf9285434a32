"""Per-call overhead of rlx's Python run() on a tiny model, beside the C
API's own set-input + run + get-output sequence on the same session (timed
in C, no Python in the loop) and a direct NumPy implementation.

    PYTHONPATH=<built package> /usr/bin/python3 bench/python/overhead.py [--runs N]

Model: y = relu(x * 2 + 1), x float32 [1, 16] (one fused elementwise
kernel).  Prints microseconds per call: median of 7 rounds of N calls."""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import rlx


def per_call(fn, n):
    rounds = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t0) / n)
    return statistics.median(rounds) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20000)
    a = ap.parse_args()
    n = a.runs

    g = rlx.Graph()
    x = g.input("x", "float32", (1, 16))
    g.output("y", g.relu(x * 2.0 + 1.0))
    c = g.compile(threads=1)
    xv = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    feeds = {"x": xv}
    c.run(feeds)
    c_us = statistics.median(c._s._bench_c(feeds, n) for _ in range(7)) * 1e6
    py_us = per_call(lambda: c.run(feeds), n)
    np_us = per_call(lambda: np.maximum(xv * 2.0 + 1.0, 0.0), n)

    onnx_line = ""
    try:
        import onnx
        from onnx import TensorProto, helper
        two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
        one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
        gr = helper.make_graph(
            [helper.make_node("Mul", ["x", "two"], ["m"]), helper.make_node("Add", ["m", "one"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])], "tiny",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], [two, one])
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "tiny.onnx")
            onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]), p)
            s = rlx.InferenceSession(p, threads=1)
            s.run(None, feeds)
            sess_us = per_call(lambda: s.run(None, feeds), n)
            onnx_line = f"InferenceSession.run (same model from ONNX): {sess_us:.2f} us  (+{sess_us - c_us:.2f} over C)\n"
    except ImportError:
        pass

    print(f"tiny model, {n} calls x 7 rounds, median per call")
    print(f"C API (set_input + run + get_output, timed in C): {c_us:.2f} us")
    print(f"CompiledGraph.run (Python):                      {py_us:.2f} us  (+{py_us - c_us:.2f} over C)")
    print(onnx_line, end="")
    print(f"NumPy (np.maximum(x * 2 + 1, 0)):                {np_us:.2f} us")


if __name__ == "__main__":
    main()
