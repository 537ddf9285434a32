"""Floating-point operations of one forward pass of an ONNX model at given
inputs, counted from its graph with the shapes that ONNX Runtime computes
(bench/cpu/ort_shapes.js runs the model once with every intermediate value
made an output; python3-onnx's own shape inference loses shapes at many
Reshape and If nodes of real models).

Counted: Conv, ConvTranspose, MatMul, Gemm (2 per multiply-add), LSTM and
GRU (their gate products); everything else (elementwise ops, norms,
softmax, pooling) is left out, as usual for GFLOP/s figures; so are the
8-bit products (QLinearMatMul, MatMulInteger, and in the QDQ form a MatMul,
Gemm or Conv of two DequantizeLinear results), which are not floating-point
work.  An If whose
condition ONNX Runtime computed is replaced by the branch it takes, and the
model is run again, until no such If is left; an If left over, or a Loop or
Scan, makes the count unknown.

    count(model_path, {input name: .npy path}, ort_dir, work_dir) -> (flops or None, note)
"""
import json
import os
import subprocess

import numpy as np
import onnx
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTED = ("Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM", "GRU")


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _ort_values(model, inputs, ort_dir, work):
    """Shapes (and small values) of every value the main graph computes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have:
                m.graph.output.add().name = o  # untyped: ONNX Runtime fills the type in
                have.add(o)
    path = os.path.join(work, "flops-probe.onnx")
    onnx.save(m, path)
    out = os.path.join(work, "flops-probe.json")
    cmd = ["node", os.path.join(HERE, "ort_shapes.js"), ort_dir, path, out] + ["%s=%s" % kv for kv in inputs.items()]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("ort_shapes.js: " + (r.stderr.strip().splitlines() or ["failed"])[-1])
    with open(out) as f:
        return json.load(f)


def _inline_ifs(graph, values):
    """Replaces each If of the main graph whose condition is known by the
    nodes of the branch it takes; True when one was replaced."""
    done = False
    nodes = []
    for n in graph.node:
        cond = values.get(n.input[0], {}).get("value") if n.op_type == "If" else None
        if cond is None:
            nodes.append(n)
            continue
        branch = _attr(n, "then_branch" if cond[0] else "else_branch")
        graph.initializer.extend(branch.initializer)
        nodes.extend(branch.node)
        for src, dst in zip(branch.output, n.output):
            nodes.append(helper.make_node("Identity", [src.name], [dst]))
        done = True
    del graph.node[:]
    graph.node.extend(nodes)
    return done


def _node_flops(n, shape):
    s = [shape(i) if i else None for i in n.input]
    out = shape(n.output[0])
    if n.op_type == "Conv":
        return 2 * int(np.prod(out)) * int(np.prod(s[1][1:]))
    if n.op_type == "ConvTranspose":
        return 2 * int(np.prod(s[0])) * int(np.prod(s[1][1:]))
    if n.op_type == "MatMul":
        return 2 * int(np.prod(out)) * s[0][-1]
    if n.op_type == "Gemm":
        return 2 * int(np.prod(out)) * s[0][0 if _attr(n, "transA", 0) else 1]
    seq, batch, _ = s[0]  # LSTM, GRU
    dirs, gates_h, inp = s[1]
    return 2 * seq * batch * dirs * gates_h * (inp + s[2][2])


def count(model_path, inputs, ort_dir, work):
    model = onnx.load(model_path)
    for _ in range(8):
        values = _ort_values(model, inputs, ort_dir, work)
        if not _inline_ifs(model.graph, values):
            break
    left = sorted({n.op_type for n in model.graph.node if n.op_type in ("If", "Loop", "Scan")})
    if left:
        return None, "not counted: %s in the graph" % ", ".join(left)
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    dims.update({k: v["dims"] for k, v in values.items()})
    for name, path in inputs.items():
        dims[name] = list(np.load(path, mmap_mode="r").shape)
    dequantized = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    total = 0
    for n in model.graph.node:
        if n.op_type in COUNTED and not (len(n.input) > 1 and n.input[0] in dequantized and n.input[1] in dequantized):
            try:
                total += _node_flops(n, lambda name: dims[name])
            except (KeyError, TypeError, ValueError, IndexError):
                return None, "not counted: no shape at a %s" % n.op_type
    return total, ""
