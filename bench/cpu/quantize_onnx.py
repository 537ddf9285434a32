#!/usr/bin/python3
"""Writes an 8-bit form of an f32 ONNX model: every MatMul and Gemm with a
constant weight matrix becomes an integer product.

  dynamic: as onnxruntime's quantize_dynamic writes it (QOperator form):
           x -> DynamicQuantizeLinear (u8, one per activation however many
           products read it) -> MatMulInteger with the weights as s8
           (symmetric, zero point 0) -> Cast to float -> Mul by
           x_scale * w_scale [-> Add bias].
  static:  QuantizeLinear (u8, scale and zero point calibrated from the
           activations' range on a calibration input) -> QLinearMatMul
           (s8 weights, output u8 with its calibrated range) ->
           DequantizeLinear [-> Add bias].
  qdq:     static, in the QDQ form onnxruntime's quantize_static writes
           by default: QuantizeLinear -> DequantizeLinear of the
           activations and of the s8 weights -> MatMul -> QuantizeLinear ->
           DequantizeLinear [-> Add bias], the same scales as static.

Products of two activations (attention's) stay f32.  Static calibration
runs the f32 model with the products' inputs and outputs as extra graph
outputs in onnxruntime-node (bench/cpu/ort_time.js), on --calib inputs.

usage: quantize_onnx.py IN.onnx OUT.onnx dynamic
       quantize_onnx.py IN.onnx OUT.onnx static|qdq --ort-dir DIR --calib NAME=FILE.npy [...]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def products(model):
    """(node, activation input, weight [K, N] as f32, bias or None) for each
    MatMul / Gemm whose weight is an initializer."""
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:  # exporters alias equal initializers through Identity
        if node.op_type == "Identity" and node.input[0] in inits:
            inits[node.output[0]] = inits[node.input[0]]
    found = []
    for node in model.graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits:
            w = numpy_helper.to_array(inits[node.input[1]])
            if w.ndim == 2:
                found.append((node, node.input[0], w, None))
        elif node.op_type == "Gemm" and node.input[1] in inits:
            at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if at.get("transA", 0) or at.get("alpha", 1.0) != 1.0 or at.get("beta", 1.0) != 1.0:
                continue
            w = numpy_helper.to_array(inits[node.input[1]])
            w = w.T if at.get("transB", 0) else w
            b = numpy_helper.to_array(inits[node.input[2]]) if len(node.input) > 2 and node.input[2] else None
            found.append((node, node.input[0], w, b))
    return found


def weight_s8(w):
    """Symmetric per-tensor s8 weights: (levels, scale)."""
    scale = float(np.abs(w).max()) / 127.0 or 1.0
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), np.float32(scale)


def u8_params(lo, hi):
    """Scale and zero point of an asymmetric u8 range that holds 0."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    return np.float32(scale), np.uint8(np.clip(np.round(-lo / scale), 0, 255))


def calibrate(model, names, ort_dir, calib):
    """Min and max of each named value over the calibration inputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    for name in names:
        m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calib.onnx")
        onnx.save(m, path)
        subprocess.run(["node", os.path.join(HERE, "ort_time.js"), ort_dir, path, "1", "2", tmp] + calib, check=True,
                       stdout=subprocess.DEVNULL)
        out = {}
        for k, name in enumerate(names):
            v = np.load(os.path.join(tmp, "out_%d.npy" % k))
            out[name] = (v.min(), v.max())
        return out


def quantize(model, mode, ort_dir=None, calib=None):
    found = products(model)
    ranges = {}
    if mode in ("static", "qdq"):
        names = sorted({x for _, x, _, _ in found} | {n.output[0] for n, _, _, _ in found})
        ranges = calibrate(model, names, ort_dir, calib)
    g = model.graph
    new_nodes, inits, done = [], [], {}  # done: activation -> its quantized form's names
    by_node = {id(n): (x, w, b) for n, x, w, b in found}
    for node in g.node:
        if id(node) not in by_node:
            new_nodes.append(node)
            continue
        x, w, b = by_node[id(node)]
        base = (node.name or node.output[0]).replace("/", "_")
        wq, ws = weight_s8(w)
        inits += [numpy_helper.from_array(wq, base + "_w_q"), numpy_helper.from_array(ws, base + "_w_scale"),
                  numpy_helper.from_array(np.int8(0), base + "_w_zp")]
        y = node.output[0] if b is None else base + "_nobias"
        if mode == "dynamic":
            if x not in done:
                q = [x + "_q", x + "_scale", x + "_zp"]
                new_nodes.append(helper.make_node("DynamicQuantizeLinear", [x], q, name=x + "_quant"))
                done[x] = q
            xq, xs, xz = done[x]
            new_nodes += [
                helper.make_node("MatMulInteger", [xq, base + "_w_q", xz, base + "_w_zp"], [base + "_i32"],
                                 name=base + "_int"),
                helper.make_node("Cast", [base + "_i32"], [base + "_f"], to=TensorProto.FLOAT),
                helper.make_node("Mul", [xs, base + "_w_scale"], [base + "_s"]),
                helper.make_node("Mul", [base + "_f", base + "_s"], [y]),
            ]
        else:
            if x not in done:
                xs, xz = u8_params(*ranges[x])
                inits += [numpy_helper.from_array(xs, x + "_scale"), numpy_helper.from_array(xz, x + "_zp")]
                new_nodes.append(helper.make_node("QuantizeLinear", [x, x + "_scale", x + "_zp"], [x + "_q"],
                                                  name=x + "_quant"))
                done[x] = [x + "_q", x + "_scale", x + "_zp"]
            xq, xs, xz = done[x]
            if mode == "qdq" and x + "_dq" not in done:
                new_nodes.append(helper.make_node("DequantizeLinear", [xq, xs, xz], [x + "_dq"]))
                done[x + "_dq"] = True
            lo, hi = ranges[node.output[0]]
            if b is not None:  # calibrated with the bias added: the product's range is the bias less
                lo, hi = lo - float(b.max()), hi - float(b.min())
            ys, yz = u8_params(lo, hi)
            inits += [numpy_helper.from_array(ys, base + "_y_scale"), numpy_helper.from_array(yz, base + "_y_zp")]
            if mode == "qdq":
                new_nodes += [
                    helper.make_node("DequantizeLinear", [base + "_w_q", base + "_w_scale", base + "_w_zp"],
                                     [base + "_w_dq"]),
                    helper.make_node("MatMul", [x + "_dq", base + "_w_dq"], [base + "_y"], name=base + "_matmul"),
                    helper.make_node("QuantizeLinear", [base + "_y", base + "_y_scale", base + "_y_zp"],
                                     [base + "_yq"]),
                ]
            else:
                new_nodes.append(
                    helper.make_node("QLinearMatMul", [xq, xs, xz, base + "_w_q", base + "_w_scale", base + "_w_zp",
                                                       base + "_y_scale", base + "_y_zp"], [base + "_yq"],
                                     name=base + "_qlinear"))
            new_nodes.append(helper.make_node("DequantizeLinear", [base + "_yq", base + "_y_scale", base + "_y_zp"],
                                              [y]))
        if b is not None:
            inits.append(numpy_helper.from_array(b.astype(np.float32), base + "_bias"))
            new_nodes.append(helper.make_node("Add", [y, base + "_bias"], [node.output[0]]))
    used = {i for n in new_nodes for i in n.input}
    kept = [t for t in g.initializer if t.name in used]
    del g.node[:]
    g.node.extend(new_nodes)
    del g.initializer[:]
    g.initializer.extend(kept + inits)
    del g.value_info[:]
    onnx.checker.check_model(model)
    return model, len(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("mode", choices=["dynamic", "static", "qdq"])
    ap.add_argument("--ort-dir", default=os.environ.get("ORT_DIR", "/tmp/rlx-ort-peer"))
    ap.add_argument("--calib", nargs="*", default=[], help="NAME=FILE.npy inputs for static calibration")
    a = ap.parse_args()
    if a.mode != "dynamic" and not a.calib:
        sys.exit("quantize_onnx.py: static quantization needs --calib NAME=FILE.npy inputs")
    model, count = quantize(onnx.load(a.src), a.mode, a.ort_dir, a.calib)
    onnx.save(model, a.dst)
    print("%s: %d products quantized (%s) -> %s" % (a.src, count, a.mode, a.dst))


if __name__ == "__main__":
    main()
