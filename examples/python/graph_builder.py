"""Build a graph with rlx.Graph (an MLP block with a residual and a
LayerNorm), compile it, set its weights, run it, and print the dispatch
report and the size of its Graphviz drawing."""
import numpy as np

import rlx

B, D, H = 4, 32, 64
g = rlx.Graph()
x = g.input("x", "float32", (B, D))
w1, b1 = g.param("w1", "float32", (D, H)), g.param("b1", "float32", (H,))
w2, b2 = g.param("w2", "float32", (H, D)), g.param("b2", "float32", (D,))
h = g.gelu(x @ w1 + b1)
y = g.layer_norm(h @ w2 + b2 + x, eps=1e-5)
g.output("y", y)
print("built", g.node_count(), "nodes; y is", y.shape, y.dtype)

c = g.compile(device="cpu", threads=1, report=True)
rng = np.random.default_rng(0)
weights = {"w1": rng.standard_normal((D, H)) * 0.1, "b1": np.zeros(H), "w2": rng.standard_normal((H, D)) * 0.1,
           "b2": np.zeros(D)}
for name, v in weights.items():
    c.set_param(name, v.astype(np.float32))
xv = rng.standard_normal((B, D)).astype(np.float32)
(out,) = c.run({"x": xv})

from math import erf  # noqa: E402
gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))
hh = gelu(xv.astype(np.float64) @ weights["w1"])
z = hh @ weights["w2"] + xv
ref = (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-5)
np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
print("matches NumPy; max |diff|", float(np.abs(out - ref).max()))
print(c.report(), end="")
print("compiled graph:", c.stats()["nodes_final"], "nodes;", len(c.to_dot()), "bytes of Graphviz")
