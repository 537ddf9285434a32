#!/usr/bin/python3
"""8-bit ONNX cases for tests/onnx/int8_peers.sh, each a folder
real_int8_NAME/ (model.onnx, test_data_set_0/input_K.{npy,pb}, meta.json)
that bench/onnx_peer/real_models.js runs through onnxruntime-node.

  exact/  integer results, equal to the bit: MatMulInteger on u8 x s8
          (zero points 131 and per column), u8 x u8 (zero points 0 and
          255), s8 x s8 (-128), after DynamicQuantizeLinear of a graph
          input; QLinearMatMul from u8 inputs to u8, two in a row, and
          static quantization's QuantizeLinear, QLinearMatMul,
          DequantizeLinear, Add, Relu, QuantizeLinear, QLinearMatMul;
          ConvInteger (groups, stride, padding; 1-D with dilation) and
          QLinearConv (per-channel weight scales, int32 bias; 1x1,
          depthwise, s8 activations).
  float/  small MLPs (a Gemm one and a MatMul + Add one on 3-D input,
          GELU between) quantized by bench/cpu/quantize_onnx.py, dynamic,
          static and static in the QDQ form; f32 results (int8_peers.sh
          states the tolerance).

usage: int8_cases.py inputs DIR ORT_DIR | outputs DIR
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "cpu"))
import quantize_onnx  # noqa: E402

rng = np.random.default_rng(23)
NP = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8,
      np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int32): TensorProto.INT32}


def case(folder, name, model, inputs):
    d = os.path.join(folder, "real_int8_" + name)
    sd = os.path.join(d, "test_data_set_0")
    os.makedirs(sd, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    names = [i.name for i in model.graph.input]
    for k, n in enumerate(names):
        np.save(os.path.join(sd, "input_%d.npy" % k), inputs[n])
        with open(os.path.join(sd, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(inputs[n], n).SerializeToString())
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"model": os.path.join(d, "model.onnx"), "inputs": names,
                   "outputs": [o.name for o in model.graph.output]}, f)


def model_of(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, NP[a.dtype], a.shape) for n, a in inputs],
                          [helper.make_tensor_value_info(n, t, sh) for n, t, sh in outputs],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def levels(dtype, shape):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    a.flat[0], a.flat[-1] = info.min, info.max  # the ends of the range
    return a


def exact_cases(folder):
    x = (rng.standard_normal((5, 37)) * 3).astype(np.float32)
    for name, wt, zp in (("u8s8", np.int8, "col"), ("u8u8", np.uint8, np.uint8(255)),
                         ("u8s8_zp0", np.int8, np.int8(0))):
        w = levels(wt, (37, 29))
        zb = levels(np.int8, (29,)) if zp == "col" else zp
        nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
                 helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["y"])]
        case(folder, "dyn_matmul_" + name, model_of(nodes, [("x", x)], [("y", TensorProto.INT32, [5, 29])],
                                                   [("w", w), ("wz", np.asarray(zb))]), {"x": x})
    a = levels(np.int8, (7, 45))
    w = levels(np.int8, (45, 18))
    nodes = [helper.make_node("MatMulInteger", ["a", "w", "az", "wz"], ["y"])]
    case(folder, "matmul_s8s8", model_of(nodes, [("a", a)], [("y", TensorProto.INT32, [7, 18])],
                                         [("w", w), ("az", np.int8(-128)), ("wz", np.int8(127))]), {"a": a})
    a = levels(np.uint8, (2, 3, 33))
    w = levels(np.int8, (33, 21))
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "w", "ws", "wz", "ys", "yz"], ["y"])]
    inits = [("as", np.float32(0.02)), ("az", np.uint8(128)), ("w", w), ("ws", np.float32(0.01)),
             ("wz", np.int8(0)), ("ys", np.float32(0.9)), ("yz", np.uint8(100))]
    case(folder, "qlinear_matmul", model_of(nodes, [("a", a)], [("y", TensorProto.UINT8, [2, 3, 21])], inits), {"a": a})
    static_chain_cases(folder)
    conv_cases(folder)


def static_chain_cases(folder):
    """QLinearMatMul into QLinearMatMul; and QuantizeLinear, QLinearMatMul,
    DequantizeLinear, Add, Relu, QuantizeLinear, QLinearMatMul (the u8 result
    of RLX's fused requantization equal to ONNX Runtime's)."""
    a = levels(np.uint8, (9, 40))
    w0, w1 = levels(np.int8, (40, 35)), levels(np.int8, (35, 17))
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "w0", "ws0", "wz", "hs", "hz"], ["h"]),
             helper.make_node("QLinearMatMul", ["h", "hs", "hz", "w1", "ws1", "wz", "ys", "yz"], ["y"])]
    inits = [("as", np.float32(0.03)), ("az", np.uint8(121)), ("w0", w0), ("ws0", np.float32(0.011)),
             ("wz", np.int8(0)), ("hs", np.float32(0.7)), ("hz", np.uint8(97)), ("w1", w1),
             ("ws1", np.float32(0.013)), ("ys", np.float32(0.4)), ("yz", np.uint8(133))]
    case(folder, "qlinear_chain", model_of(nodes, [("a", a)], [("y", TensorProto.UINT8, [9, 17])], inits), {"a": a})
    x = (rng.standard_normal((12, 48)) * 2).astype(np.float32)
    w0, w1 = levels(np.int8, (48, 64)), levels(np.int8, (64, 24))
    b = (0.5 * rng.standard_normal(64)).astype(np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "w0", "ws0", "wz", "hs", "hz"], ["hq"]),
             helper.make_node("DequantizeLinear", ["hq", "hs", "hz"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["hb"]), helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "rs", "rz"], ["rq"]),
             helper.make_node("QLinearMatMul", ["rq", "rs", "rz", "w1", "ws1", "wz", "ys", "yz"], ["y"])]
    inits = [("xs", np.float32(0.025)), ("xz", np.uint8(128)), ("w0", w0), ("ws0", np.float32(0.004)),
             ("wz", np.int8(0)), ("hs", np.float32(0.09)), ("hz", np.uint8(117)), ("b", b),
             ("rs", np.float32(0.05)), ("rz", np.uint8(3)), ("w1", w1), ("ws1", np.float32(0.006)),
             ("ys", np.float32(0.3)), ("yz", np.uint8(140))]
    case(folder, "static_relu_chain", model_of(nodes, [("x", x)], [("y", TensorProto.UINT8, [12, 24])], inits),
         {"x": x})


def conv_cases(folder):
    """ConvInteger and QLinearConv: padding, stride, groups, dilation, 1x1,
    1-D, per-channel weight scales, int32 bias, s8 activations."""
    x = levels(np.uint8, (2, 4, 9, 11))
    w = levels(np.uint8, (6, 2, 3, 3))
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 2, 1, 0], strides=[2, 1],
                              group=2)]
    case(folder, "conv_integer", model_of(nodes, [("x", x)], [("y", TensorProto.INT32, None)],
                                          [("w", w), ("xz", np.uint8(131)), ("wz", np.uint8(120))]), {"x": x})
    x1 = levels(np.uint8, (1, 5, 30))
    w1 = levels(np.uint8, (7, 5, 4))
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], dilations=[2], pads=[3, 3])]
    case(folder, "conv_integer_1d", model_of(nodes, [("x", x1)], [("y", TensorProto.INT32, None)],
                                             [("w", w1), ("xz", np.uint8(77))]), {"x": x1})
    for name, xt, shape, wshape, attrs in (
            ("qlinear_conv", np.uint8, (1, 6, 10, 12), (8, 6, 3, 3), dict(pads=[1, 1, 1, 1])),
            ("qlinear_conv_1x1", np.uint8, (2, 16, 5, 7), (24, 16, 1, 1), {}),
            ("qlinear_conv_dw", np.uint8, (1, 8, 9, 9), (8, 1, 3, 3),
             dict(group=8, strides=[2, 2], pads=[1, 1, 1, 1])),
            ("qlinear_conv_s8", np.int8, (1, 4, 8, 8), (6, 4, 3, 3), dict(dilations=[2, 2]))):
        x = levels(xt, shape)
        w = levels(np.int8, wshape)
        o = wshape[0]
        ws = (0.002 + 0.004 * rng.random(o)).astype(np.float32)
        bias = rng.integers(-3000, 3000, o).astype(np.int32)
        zp = np.uint8(119) if xt == np.uint8 else np.int8(-7)
        yz = np.uint8(128) if xt == np.uint8 else np.int8(5)
        nodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], **attrs)]
        inits = [("xs", np.float32(0.05)), ("xz", zp), ("w", w), ("ws", ws), ("wz", np.zeros(o, np.int8)),
                 ("ys", np.float32(0.8)), ("yz", yz), ("b", bias)]
        yt = TensorProto.UINT8 if xt == np.uint8 else TensorProto.INT8
        case(folder, name, model_of(nodes, [("x", x)], [("y", yt, None)], inits), {"x": x})


def mlp(three_d):
    """f32 x -> (MatMul + Add | Gemm) -> GELU (erf) -> ... -> out."""
    dims, nodes, inits, cur = [48, 96, 80, 24], [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype(np.float32)
        b = (0.1 * rng.standard_normal(dims[i + 1])).astype(np.float32)
        inits += [("w%d" % i, w), ("b%d" % i, b)]
        if three_d:
            nodes += [helper.make_node("MatMul", [cur, "w%d" % i], ["m%d" % i]),
                      helper.make_node("Add", ["m%d" % i, "b%d" % i], ["h%d" % i])]
        else:
            nodes.append(helper.make_node("Gemm", [cur, "w%d" % i, "b%d" % i], ["h%d" % i]))
        cur = "h%d" % i
        if i < 2:
            nodes += [helper.make_node("Div", [cur, "sqrt2"], ["d%d" % i]), helper.make_node("Erf", ["d%d" % i], ["e%d" % i]),
                      helper.make_node("Add", ["e%d" % i, "one"], ["p%d" % i]),
                      helper.make_node("Mul", [cur, "p%d" % i], ["q%d" % i]),
                      helper.make_node("Mul", ["q%d" % i, "half"], ["g%d" % i])]
            cur = "g%d" % i
    nodes.append(helper.make_node("Identity", [cur], ["out"]))
    inits += [("sqrt2", np.float32(np.sqrt(2))), ("one", np.float32(1)), ("half", np.float32(0.5))]
    shape = (3, 5, 48) if three_d else (16, 48)
    x = rng.standard_normal(shape).astype(np.float32)
    return model_of(nodes, [("x", x)], [("out", TensorProto.FLOAT, list(shape[:-1]) + [24])], inits), x


def float_cases(folder, ort_dir):
    os.makedirs(folder, exist_ok=True)
    for three_d in (False, True):
        m, x = mlp(three_d)
        tag = "mlp3d" if three_d else "mlp"
        cal = os.path.join(os.path.dirname(folder), tag + ".calib.npy")
        np.save(cal, rng.standard_normal(x.shape).astype(np.float32))
        for mode in ("dynamic", "static", "qdq"):
            q, n = quantize_onnx.quantize(onnx.load_from_string(m.SerializeToString()), mode, ort_dir, ["x=" + cal])
            assert n == 3, n
            case(folder, "%s_%s" % (tag, mode), q, {"x": x})


def outputs(folder):
    """ort_output_K.npy (from real_models.js) -> output_K.pb."""
    for sub in ("exact", "float"):
        for c in sorted(os.listdir(os.path.join(folder, sub))):
            sd = os.path.join(folder, sub, c, "test_data_set_0")
            for f in sorted(os.listdir(sd)):
                if f.startswith("ort_output_"):
                    k = f[len("ort_output_"):-4]
                    with open(os.path.join(sd, "output_%s.pb" % k), "wb") as fh:
                        fh.write(numpy_helper.from_array(np.load(os.path.join(sd, f)), "out").SerializeToString())


if __name__ == "__main__":
    if sys.argv[1] == "inputs":
        exact_cases(os.path.join(sys.argv[2], "exact"))
        float_cases(os.path.join(sys.argv[2], "float"), sys.argv[3])
    else:
        outputs(sys.argv[2])
