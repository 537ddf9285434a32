#!/usr/bin/python3
"""Writes the small ONNX models (and numpy reference outputs) that
tests/test_onnx_import.c checks.  Usage: make_models.py OUTDIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)


def save(name, graph, opset=17, check=True):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + ".onnx"))
    return m


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


# 1. mlp: MatMul + Add + Relu + Softmax; weights as raw_data and typed floats
x = rng.standard_normal((2, 4)).astype(np.float32)
w = rng.standard_normal((4, 3)).astype(np.float32)
b = rng.standard_normal((3,)).astype(np.float32)
wt = numpy_helper.from_array(w, "w")  # raw_data
bt = helper.make_tensor("b", TensorProto.FLOAT, [3], b.tolist())  # float_data
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["h2"]),
     helper.make_node("Relu", ["h2"], ["h3"]), helper.make_node("Softmax", ["h3"], ["y"], axis=-1)],
    "mlp", [vi("x", [2, 4])], [vi("y", [2, 3])], [wt, bt])
save("mlp", g)
h = np.maximum(x @ w + b, 0)
e = np.exp(h - h.max(-1, keepdims=True))
np.save(os.path.join(out, "mlp_x.npy"), x)
np.save(os.path.join(out, "mlp_y.npy"), (e / e.sum(-1, keepdims=True)).astype(np.float32))

# 2. shape chain with a symbolic batch: Reshape(x, concat(shape(x)[0], -1))
nodes = [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(0, np.int64))),
    helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
    helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0], np.int64))),
    helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
    helper.make_node("Constant", [], ["m1"], value=numpy_helper.from_array(np.array([-1], np.int64))),
    helper.make_node("Concat", ["n1", "m1"], ["shp"], axis=0),
    helper.make_node("Reshape", ["x", "shp"], ["y"]),
]
save("shape_chain", helper.make_graph(nodes, "shape_chain", [vi("x", ["N", 3, 4])], [vi("y", ["N", 12])]))
# the same nodes in reverse order (ONNX allows unsorted graphs)
save("unsorted", helper.make_graph(nodes[::-1], "unsorted", [vi("x", ["N", 3, 4])], [vi("y", ["N", 12])]),
     check=False)

# 3. a cycle: a = Relu(b), b = Relu(a)
g = helper.make_graph([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Add", ["a", "x"], ["b"])],
                      "cycle", [vi("x", [2])], [vi("b", [2])])
save("cycle", g, check=False)

# 4. a dangling input name
g = helper.make_graph([helper.make_node("Add", ["x", "nowhere"], ["y"])], "dangling", [vi("x", [2])],
                      [vi("y", [2])])
save("dangling", g, check=False)

# 5. unsupported ops: every one listed in one message
g = helper.make_graph([helper.make_node("FooOp", ["x"], ["a"], name="foo1"),
                       helper.make_node("FooOp", ["a"], ["b"], name="foo2"),
                       helper.make_node("BarOp", ["b"], ["y"], name="bar1")],
                      "unsupported", [vi("x", [2])], [vi("y", [2])])
save("unsupported", g, check=False)

# 6. external data next to the model, and one that points outside the folder
wt = numpy_helper.from_array(w, "w")
wt.ClearField("raw_data")
wt.data_location = TensorProto.EXTERNAL
for k, v in (("location", "weights.bin"), ("offset", "16"), ("length", str(w.nbytes))):
    e = wt.external_data.add()
    e.key, e.value = k, v
with open(os.path.join(out, "weights.bin"), "wb") as f:
    f.write(b"\0" * 16 + w.tobytes())
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext", [vi("x", [2, 4])],
                      [vi("y", [2, 3])], [wt])
save("external", g, check=False)
np.save(os.path.join(out, "external_y.npy"), (x @ w).astype(np.float32))
def ext_graph():
    return helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext", [vi("x", [2, 4])],
                             [vi("y", [2, 3])], [wt])
wt.external_data[0].value = "../weights.bin"
save("external_escape", ext_graph(), check=False)
wt.external_data[0].value = "weights.bin"
wt.external_data[1].value = "1000000"
save("external_oob", ext_graph(), check=False)

# 7. raw_data of the wrong size
bad = numpy_helper.from_array(w, "w")
bad.raw_data = bad.raw_data[:-4]
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "badraw", [vi("x", [2, 4])],
                      [vi("y", [2, 3])], [bad])
save("bad_raw", g, check=False)

# 8. If on a constant condition inlines the branch; on an input, both are built
then_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"])], "then", [], [vi("t", [3])])
else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t2"])], "else", [], [vi("t2", [3])])
g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                      "if", [vi("c", [], TensorProto.BOOL), vi("x", [3])], [vi("y", [3])])
save("if", g)
# the else branch only fits a 4-element x (Silero VAD's 8 kHz branch on a
# 16 kHz frame): with c unknown it fails, so c must be bound by value
bad_else = helper.make_graph([helper.make_node("Reshape", ["x", "s22"], ["t3"])], "else", [], [vi("t3", [2, 2])],
                             [numpy_helper.from_array(np.array([2, 2], np.int64), "s22")])
g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=bad_else)],
                      "if_unfit", [vi("c", [], TensorProto.BOOL), vi("x", [3])], [vi("y", ["d"])])
save("if_unfit", g)
# 20 outputs (a merged decoder's If gives one per layer's cache)
many = [helper.make_node("Mul", ["x", "k%d" % i], ["m%d" % i]) for i in range(20)]
ks = [numpy_helper.from_array(np.array([i], np.float32), "k%d" % i) for i in range(20)]
then_m = helper.make_graph(many, "then", [], [vi("m%d" % i, [3]) for i in range(20)], ks)
else_m = helper.make_graph(many + [helper.make_node("Neg", ["m%d" % i], ["n%d" % i]) for i in range(20)], "else", [],
                           [vi("n%d" % i, [3]) for i in range(20)], ks)
g = helper.make_graph([helper.make_node("If", ["c"], ["y%d" % i for i in range(20)], then_branch=then_m,
                                        else_branch=else_m)],
                      "if_many", [vi("c", [], TensorProto.BOOL), vi("x", [3])], [vi("y%d" % i, [3]) for i in range(20)])
save("if_many", g)

# 9. opset 11 Softmax (2-d coercion) against opset 13 (per axis)
x3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
for ops in (11, 13):
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], "sm", [vi("x", [2, 3, 4])],
                          [vi("y", [2, 3, 4])])
    save("softmax%d" % ops, g, opset=ops)
np.save(os.path.join(out, "sm_x.npy"), x3)
f = x3.reshape(2, 12)
e = np.exp(f - f.max(1, keepdims=True))
np.save(os.path.join(out, "sm11_y.npy"), (e / e.sum(1, keepdims=True)).reshape(2, 3, 4).astype(np.float32))
e = np.exp(x3 - x3.max(1, keepdims=True))
np.save(os.path.join(out, "sm13_y.npy"), (e / e.sum(1, keepdims=True)).astype(np.float32))

# 10. a huge declared dimension on an initializer without data
huge = TensorProto()
huge.name, huge.data_type = "w", TensorProto.FLOAT
huge.dims.extend([1 << 40, 1 << 40])
g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "huge", [vi("x", [2])], [vi("y", [2])], [huge])
save("huge", g, check=False)
# 11b. Loop with a run-time condition: v doubles while v < 10, at most 5 times
body = helper.make_graph(
    [helper.make_node("Mul", ["v_in", "two"], ["v_out"]),
     helper.make_node("Less", ["v_out", "ten"], ["c_out"])],
    "body", [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("v_in", [1])],
    [vi("c_out", [], TensorProto.BOOL), vi("v_out", [1])],
    [numpy_helper.from_array(np.array([2], np.float32), "two"),
     numpy_helper.from_array(np.array([10], np.float32), "ten")])
g = helper.make_graph([helper.make_node("Loop", ["M", "c", "v0"], ["v"], body=body)], "loop",
                      [vi("c", [], TensorProto.BOOL), vi("v0", [1])], [vi("v", [1])],
                      [numpy_helper.from_array(np.array(5, np.int64), "M")])
save("loop_cond", g)

# 12. cases in the backend-test layout (model.onnx + test_data_set_0) with
# numpy references, for the `rlx onnx-test` runner itself
def case(name, graph, inputs, outputs, opset=17):
    d = os.path.join(out, "cases", name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "model.onnx"))
    for kind, arrs in (("input", inputs), ("output", outputs)):
        for k, a in enumerate(arrs):
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (kind, k)), "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())


xg = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
sc = rng.standard_normal(3).astype(np.float32)
bi = rng.standard_normal(3).astype(np.float32)
xv = xg.reshape(2, 3, -1)
yg = ((xv - xv.mean(-1, keepdims=True)) / np.sqrt(xv.var(-1, keepdims=True) + 1e-5)).reshape(2, 6, 3, 4)
yg = yg * np.repeat(sc, 2).reshape(1, 6, 1, 1) + np.repeat(bi, 2).reshape(1, 6, 1, 1)
case("groupnorm", helper.make_graph(
    [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)], "gn",
    [vi("x", [2, 6, 3, 4])], [vi("y", [2, 6, 3, 4])],
    [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(bi, "b")]), [xg], [yg.astype(np.float32)], opset=18)
# symbolic batch bound from the input file's shape; a shape chain
xs = rng.standard_normal((3, 2, 5)).astype(np.float32)
case("flatten_symbolic", helper.make_graph(nodes, "sc", [vi("x", ["N", 2, 5])], [vi("y", ["N", 10])]),
     [xs], [xs.reshape(3, 10)])
# ConvTranspose with stride = kernel (a product and a reshuffle in the
# importer) against a numpy scatter of each tap
def conv_transpose_ref(x, w, b, s):
    n, c, h, wd = x.shape
    o, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    y = np.zeros((n, o, s[0] * (h - 1) + kh, s[1] * (wd - 1) + kw))
    for i in range(kh):
        for j in range(kw):
            y[:, :, i:i + s[0] * h:s[0], j:j + s[1] * wd:s[1]] += np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    return (y + (0 if b is None else b.reshape(1, -1, 1, 1))).astype(np.float32)


for name, xs, ws, st, bias in (("convtranspose_tiles", (2, 5, 3, 4), (5, 3, 2, 2), (2, 2), True),
                               ("convtranspose_tiles_3x2", (1, 4, 5, 3), (4, 6, 3, 2), (3, 2), False)):
    xc = rng.standard_normal(xs).astype(np.float32)
    wc = rng.standard_normal(ws).astype(np.float32)
    bc = rng.standard_normal(ws[1]).astype(np.float32) if bias else None
    yc = conv_transpose_ref(xc.astype(np.float64), wc.astype(np.float64), bc, st)
    inits = [numpy_helper.from_array(wc, "w")] + ([numpy_helper.from_array(bc, "b")] if bias else [])
    case(name, helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], strides=list(st),
                          kernel_shape=list(ws[2:]))], name, [vi("x", list(xs))], [vi("y", list(yc.shape))], inits),
         [xc], [yc])
# LSTM against a numpy recurrence
T, B, I, H = 4, 2, 3, 5
xl = rng.standard_normal((T, B, I)).astype(np.float32)
W = (rng.standard_normal((1, 4 * H, I)) * 0.5).astype(np.float32)
R = (rng.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32)
Bb = (rng.standard_normal((1, 8 * H)) * 0.5).astype(np.float32)
sig = lambda z: 1 / (1 + np.exp(-z))
h = np.zeros((B, H), np.float32)
c = np.zeros((B, H), np.float32)
ys = []
for t in range(T):
    gts = xl[t] @ W[0].T + h @ R[0].T + Bb[0, :4 * H] + Bb[0, 4 * H:]
    i_, o_, f_, c_ = np.split(gts, 4, axis=1)
    c = sig(f_) * c + sig(i_) * np.tanh(c_)
    h = sig(o_) * np.tanh(c)
    ys.append(h)
case("lstm_numpy", helper.make_graph(
    [helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Yh"], hidden_size=H)], "lstm",
    [vi("x", [T, B, I])], [vi("Y", [T, 1, B, H]), vi("Yh", [1, B, H])],
    [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(Bb, "B")]),
    [xl], [np.stack(ys)[:, None].astype(np.float32), h[None].astype(np.float32)])

# the same LSTM with per-batch lengths [4, 2]: entry 1 stops after 2 steps
lens = np.array([4, 2], np.int32)
h = np.zeros((B, H), np.float32)
c = np.zeros((B, H), np.float32)
ys = []
for t in range(T):
    gts = xl[t] @ W[0].T + h @ R[0].T + Bb[0, :4 * H] + Bb[0, 4 * H:]
    i_, o_, f_, c_ = np.split(gts, 4, axis=1)
    c2 = sig(f_) * c + sig(i_) * np.tanh(c_)
    h2 = sig(o_) * np.tanh(c2)
    live = (t < lens)[:, None]
    ys.append(np.where(live, h2, 0))
    h, c = np.where(live, h2, h), np.where(live, c2, c)
case("lstm_seq_lens_numpy", helper.make_graph(
    [helper.make_node("LSTM", ["x", "W", "R", "B", "lens"], ["Y", "Yh"], hidden_size=H)], "lstm",
    [vi("x", [T, B, I]), vi("lens", [B], TensorProto.INT32)], [vi("Y", [T, 1, B, H]), vi("Yh", [1, B, H])],
    [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(Bb, "B")]),
    [xl, lens], [np.stack(ys)[:, None].astype(np.float32), h[None].astype(np.float32)])

# 10b. a Llama/Qwen3-style attention layer as Hugging Face's code exports
# it: q/k RMSNorm per head, RoPE as x * cos + rotate_half(x) * sin with the
# tables folded (positions 0..S-1, theta 1e6, computed in f32), repeat_kv,
# an additive causal mask; RLX makes it one attention block
S, HID, NH, NK, HD = 16, 64, 4, 2, 16
xa = rng.standard_normal((1, S, HID)).astype(np.float32)
W = {n: (rng.standard_normal((HID if n != "wo" else NH * HD, c)) * 0.2).astype(np.float32)
     for n, c in (("wq", NH * HD), ("wk", NK * HD), ("wv", NK * HD), ("wo", HID))}
gam = {n: (rng.random(HD) + 0.5).astype(np.float32) for n in ("gq", "gk")}
inv = (1.0 / (np.float32(1e6) ** (np.arange(0, HD, 2, dtype=np.float32) / np.float32(HD)))).astype(np.float32)
fr = np.outer(np.arange(S, dtype=np.float32), inv).astype(np.float32)
emb = np.concatenate([fr, fr], -1)
cos_t, sin_t = np.cos(emb)[None, None].astype(np.float32), np.sin(emb)[None, None].astype(np.float32)
causal = np.triu(np.full((S, S), -np.inf, np.float32), 1)
C = lambda name, a: numpy_helper.from_array(np.asarray(a), name)
nodes, inits = [], [C(k, v) for k, v in list(W.items()) + list(gam.items())]
inits += [C("cos", cos_t), C("sin", sin_t), C("mask", causal), C("two", np.float32(2)), C("eps", np.float32(1e-6)),
          C("sqd", np.float32(np.sqrt(HD))), C("ax_last", np.array([-1], np.int64)), C("ax2", np.array([2], np.int64)),
          C("h0", np.array([0], np.int64)), C("h1", np.array([HD // 2], np.int64)), C("h2", np.array([HD], np.int64)),
          C("shq", np.array([1, S, NH, HD], np.int64)), C("shk", np.array([1, S, NK, HD], np.int64)),
          C("shx", np.array([1, NK, NH // NK, S, HD], np.int64)), C("shr", np.array([1, NH, S, HD], np.int64)),
          C("sho", np.array([1, S, NH * HD], np.int64))]
N = lambda op, i, o, **kw: nodes.append(helper.make_node(op, i, [o], **kw)) or o
for p, w, sh, g in (("q", "wq", "shq", "gq"), ("k", "wk", "shk", "gk")):
    h = N("Reshape", [N("MatMul", ["x", w], p + "_mm"), sh], p + "_h")
    ms = N("ReduceMean", [N("Pow", [h, "two"], p + "_sq")], p + "_ms", axes=[-1], keepdims=1)
    nrm = N("Mul", [N("Div", [h, N("Sqrt", [N("Add", [ms, "eps"], p + "_e")], p + "_rt")], p + "_n"), g], p + "_g")
    t = N("Transpose", [nrm], p + "_t", perm=[0, 2, 1, 3])
    lo = N("Slice", [t, "h0", "h1", "ax_last"], p + "_lo")
    hi = N("Neg", [N("Slice", [t, "h1", "h2", "ax_last"], p + "_hi")], p + "_nh")
    rot = N("Concat", [hi, lo], p + "_rot", axis=-1)
    N("Add", [N("Mul", [t, "cos"], p + "_c"), N("Mul", [rot, "sin"], p + "_s")], p + "_r")
v = N("Transpose", [N("Reshape", [N("MatMul", ["x", "wv"], "v_mm"), "shk"], "v_h")], "v_t", perm=[0, 2, 1, 3])
rep = {}
for p, src in (("k", "k_r"), ("v", v)):
    u = N("Unsqueeze", [src, "ax2"], p + "_u")
    rep[p] = N("Reshape", [N("Expand", [u, "shx"], p + "_x"), "shr"], p + "_rep")
sc = N("Div", [N("MatMul", ["q_r", N("Transpose", [rep["k"]], "kT", perm=[0, 1, 3, 2])], "qk"), "sqd"], "sc")
pr = N("Softmax", [N("Add", [sc, "mask"], "scm")], "pr", axis=-1)
o = N("Reshape", [N("Transpose", [N("MatMul", [pr, rep["v"]], "pv")], "pvt", perm=[0, 2, 1, 3]), "sho"], "o")
N("MatMul", [o, "wo"], "y")
save("llama_attention", helper.make_graph(nodes, "llama_attention", [vi("x", [1, S, HID])], [vi("y", [1, S, HID])],
                                          inits))
# the same layer with q, k and v from one fused projection cut by Split (as
# Phi-3's qkv_proj exports): RLX cuts the product back into three
cut = {"q_mm", "k_mm", "v_mm"}
fused_nodes = [helper.make_node("MatMul", ["x", "wqkv"], ["qkv"]),
               helper.make_node("Split", ["qkv", "qkv_sizes"], ["q_mm", "k_mm", "v_mm"], axis=-1)]
fused_nodes += [nd for nd in nodes if nd.output[0] not in cut]
fused_inits = [t for t in inits if t.name not in ("wq", "wk", "wv")]
fused_inits += [C("wqkv", np.concatenate([W["wq"], W["wk"], W["wv"]], 1)),
                C("qkv_sizes", np.array([NH * HD, NK * HD, NK * HD], np.int64))]
save("fused_qkv_attention", helper.make_graph(fused_nodes, "fused_qkv_attention", [vi("x", [1, S, HID])],
                                              [vi("y", [1, S, HID])], fused_inits))


def head_norm_rope(x, w, heads, g):
    h = (x @ w).reshape(1, S, heads, HD).astype(np.float64)
    h = (h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * g).transpose(0, 2, 1, 3)
    rot = np.concatenate([-h[..., HD // 2:], h[..., :HD // 2]], -1)
    return h * cos_t + rot * sin_t


qa = head_norm_rope(xa, W["wq"], NH, gam["gq"])
ka = np.repeat(head_norm_rope(xa, W["wk"], NK, gam["gk"]), NH // NK, axis=1)
va = np.repeat((xa @ W["wv"]).reshape(1, S, NK, HD).transpose(0, 2, 1, 3), NH // NK, axis=1).astype(np.float64)
sa = qa @ ka.transpose(0, 1, 3, 2) / np.sqrt(HD) + causal
pa = np.exp(sa - sa.max(-1, keepdims=True))
pa /= pa.sum(-1, keepdims=True)
ya = (pa @ va).transpose(0, 2, 1, 3).reshape(1, S, NH * HD) @ W["wo"]
np.save(os.path.join(out, "llama_attention_x.npy"), xa)
np.save(os.path.join(out, "llama_attention_y.npy"), ya.astype(np.float32))
np.save(os.path.join(out, "fused_qkv_attention_x.npy"), xa)
np.save(os.path.join(out, "fused_qkv_attention_y.npy"), ya.astype(np.float32))

# 10c. a GPT-2-style attention layer as Hugging Face's Conv1D exports it:
# each projection a Gemm on the tokens flattened to rows and reshaped back,
# q/k/v cut from one product by Split, a bool causal mask filled with the
# dtype's lowest value; RLX makes it one attention block
S, HID, NH = 16, 64, 4
HD = HID // NH
xg = rng.standard_normal((1, S, HID)).astype(np.float32)
wqkv = (rng.standard_normal((HID, 3 * HID)) * 0.2).astype(np.float32)
bqkv = (rng.standard_normal(3 * HID) * 0.1).astype(np.float32)
wo = (rng.standard_normal((HID, HID)) * 0.2).astype(np.float32)
bo = (rng.standard_normal(HID) * 0.1).astype(np.float32)
keep = np.tril(np.ones((S, S), bool))[None, None]
nodes = []
inits = [C("wqkv", wqkv), C("bqkv", bqkv), C("wo", wo), C("bo", bo), C("keep", keep),
         C("lowest", np.float32(np.finfo(np.float32).min)), C("sqd", np.float32(np.sqrt(HD))),
         C("rows", np.array([-1, HID], np.int64)), C("sh3", np.array([1, S, 3 * HID], np.int64)),
         C("shh", np.array([1, S, NH, HD], np.int64)), C("sho", np.array([1, S, HID], np.int64)),
         C("qkv_sizes", np.array([HID, HID, HID], np.int64))]
qkv = N("Reshape", [N("Gemm", [N("Reshape", ["x", "rows"], "xf"), "wqkv", "bqkv"], "qkv2"), "sh3"], "qkv")
nodes.append(helper.make_node("Split", [qkv, "qkv_sizes"], ["q", "k", "v"], axis=2))
hd = {p: N("Transpose", [N("Reshape", [p, "shh"], p + "_h")], p + "_t", perm=[0, 2, 1, 3]) for p in "qkv"}
sc = N("Div", [N("MatMul", [hd["q"], N("Transpose", [hd["k"]], "kT", perm=[0, 1, 3, 2])], "qk"), "sqd"], "sc")
pr = N("Softmax", [N("Where", ["keep", sc, "lowest"], "scm")], "pr", axis=-1)
o = N("Reshape", [N("Transpose", [N("MatMul", [pr, hd["v"]], "pv")], "pvt", perm=[0, 2, 1, 3]), "sho"], "o")
N("Reshape", [N("Gemm", [N("Reshape", [o, "rows"], "of"), "wo", "bo"], "y2"), "sho"], "y")
save("gpt2_attention", helper.make_graph(nodes, "gpt2_attention", [vi("x", [1, S, HID])], [vi("y", [1, S, HID])],
                                         inits))
qg, kg, vg = [(h.reshape(1, S, NH, HD).transpose(0, 2, 1, 3)) for h in
              np.split(xg.astype(np.float64) @ wqkv + bqkv, 3, axis=-1)]
sg = np.where(keep, qg @ kg.transpose(0, 1, 3, 2) / np.sqrt(HD), -np.inf)
pg = np.exp(sg - sg.max(-1, keepdims=True))
pg /= pg.sum(-1, keepdims=True)
yg = (pg @ vg).transpose(0, 2, 1, 3).reshape(1, S, HID) @ wo + bo
np.save(os.path.join(out, "gpt2_attention_x.npy"), xg)
np.save(os.path.join(out, "gpt2_attention_y.npy"), yg.astype(np.float32))

# 10d. a Reshape whose target shape is a graph input (bound by value at
# import): y = transpose(reshape(x, s)).flatten(), so two targets of the
# same size give the same shapes but different values
save("reshape_by_value", helper.make_graph(
    [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
     helper.make_node("Reshape", ["t", "flat"], ["y"])],
    "reshape_by_value", [vi("x", [2, 6]), vi("s", [2], TensorProto.INT64)], [vi("y", [12])],
    [numpy_helper.from_array(np.array([-1], np.int64), "flat")]))

# 12. training (initializers_as_params): a two-layer MLP whose output
# "loss" is the MSE against the input t; float initializers of rank >= 1
# become params, the scalar "half" and the int64 shape "shp" stay constants
x = rng.standard_normal((8, 4)).astype(np.float32)
t = rng.standard_normal((8, 2)).astype(np.float32)
w1 = (rng.standard_normal((4, 16)) * 0.5).astype(np.float32)
b1 = (rng.standard_normal((16,)) * 0.1).astype(np.float32)
w2 = (rng.standard_normal((16, 2)) * 0.5).astype(np.float32)
b2 = np.zeros((2,), np.float32)
inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(b2, "b2"), numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array([8, 4], np.int64), "shp")]
save("train_mlp", helper.make_graph(
    [helper.make_node("Reshape", ["x", "shp"], ["xr"]), helper.make_node("MatMul", ["xr", "w1"], ["h0"]),
     helper.make_node("Add", ["h0", "b1"], ["h1"]), helper.make_node("Relu", ["h1"], ["h"]),
     helper.make_node("MatMul", ["h", "w2"], ["y0"]), helper.make_node("Add", ["y0", "b2"], ["y"]),
     helper.make_node("Sub", ["y", "t"], ["d"]), helper.make_node("Mul", ["d", "d"], ["d2"]),
     helper.make_node("Mul", ["d2", "half"], ["d3"]), helper.make_node("ReduceMean", ["d3"], ["loss"], keepdims=0)],
    "train_mlp", [vi("x", [8, 4]), vi("t", [8, 2])], [vi("loss", []), vi("y", [8, 2])], inits))
y = np.maximum(x @ w1 + b1, 0) @ w2 + b2
np.save(os.path.join(out, "train_mlp_x.npy"), x)
np.save(os.path.join(out, "train_mlp_t.npy"), t)
np.save(os.path.join(out, "train_mlp_loss.npy"), np.array([np.mean((y - t) ** 2 * 0.5)], np.float32))

# Resize reading its float scales initializer at import, and NonZero, which
# needs its float initializer's value and cannot have it from a param
save("param_resize", helper.make_graph(
    [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")], "param_resize",
    [vi("x", [1, 1, 2, 2])], [vi("y", [1, 1, 4, 4])],
    [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]))
save("param_nonzero", helper.make_graph(
    [helper.make_node("NonZero", ["nzw"], ["i"]), helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT),
     helper.make_node("Add", ["y", "x"], ["z"])], "param_nonzero",
    [vi("x", [1])], [vi("z", [1, 2])], [numpy_helper.from_array(np.array([0, 3], np.float32), "nzw")]))

# an op with a data-dependent shape on graph inputs: refused unless they are
# bound by value
save("nms_input", helper.make_graph(
    [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou"], ["sel"]),
     helper.make_node("Cast", ["sel"], ["self"], to=TensorProto.FLOAT), helper.make_node("Add", ["self", "x"], ["z"])],
    "nms_input", [vi("boxes", [1, 3, 4]), vi("scores", [1, 1, 3]), vi("x", [1])], [vi("z", [None, 3])],
    [numpy_helper.from_array(np.array([3], np.int64), "max_out"),
     numpy_helper.from_array(np.array([0.5], np.float32), "iou")]))

# ops that need run-time values in the middle of a model (rlx_model_run
# runs it in stages): y = 2 * relu(x)[relu(x) > 0.5] (NonZero on computed
# data); boxes = b + off, scores = sigmoid(s) -> NonMaxSuppression -> the
# kept boxes' rows gathered and scaled
save("staged_nonzero", helper.make_graph(
    [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Greater", ["r", "half"], ["mask"]),
     helper.make_node("NonZero", ["mask"], ["nz"]), helper.make_node("Transpose", ["nz"], ["nzt"]),
     helper.make_node("GatherND", ["r", "nzt"], ["g"]), helper.make_node("Mul", ["g", "two"], ["y"])],
    "staged_nonzero", [vi("x", [3, 4])], [vi("y", [None])],
    [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
     numpy_helper.from_array(np.array(2.0, np.float32), "two")]))
save("staged_nms", helper.make_graph(
    [helper.make_node("Add", ["b", "off"], ["boxes"]), helper.make_node("Sigmoid", ["s"], ["scores"]),
     helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "smin"], ["sel"]),
     helper.make_node("Gather", ["sel", "col2"], ["idx"], axis=1),
     helper.make_node("Reshape", ["boxes", "shape2"], ["flat"]),
     helper.make_node("Gather", ["flat", "idx"], ["kept"], axis=0),
     helper.make_node("Mul", ["kept", "scale"], ["y"])],
    "staged_nms", [vi("b", [1, 8, 4]), vi("s", [1, 1, 8])], [vi("y", [None, 4])],
    [numpy_helper.from_array(np.array([0, 0, 1, 1], np.float32), "off"),
     numpy_helper.from_array(np.array([8], np.int64), "max_out"),
     numpy_helper.from_array(np.array([0.3], np.float32), "iou"),
     numpy_helper.from_array(np.array([0.4], np.float32), "smin"),
     numpy_helper.from_array(np.array(2, np.int64), "col2"),
     numpy_helper.from_array(np.array([8, 4], np.int64), "shape2"),
     numpy_helper.from_array(np.array(3.0, np.float32), "scale")]))

# 13. sequences and optionals: malformed ones (each import fails naming the
# node), a sequence input and output, an optional input
def seq_t(t=TensorProto.FLOAT, shape=None):
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(t, shape))


def cst(name, a):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(a), name))


N = helper.make_node
bad = {
    # elements of two dtypes
    "seq_bad_dtype": ([cst("i", np.array([1], np.int64)), N("SequenceConstruct", ["x", "i"], ["s"], name="mix"),
                       N("SequenceLength", ["s"], ["y"])], TensorProto.INT64),
    "seq_insert_bad_dtype": ([N("SequenceEmpty", [], ["e"], dtype=TensorProto.INT64),
                              N("SequenceInsert", ["e", "x"], ["s"], name="ins"), N("SequenceLength", ["s"], ["y"])],
                             TensorProto.INT64),
    # positions outside the sequence, elements wanted from empty sequences
    "seq_at_out_of_range": ([cst("p", np.array(5, np.int64)), N("SequenceConstruct", ["x", "x"], ["s"]),
                             N("SequenceAt", ["s", "p"], ["y"], name="at5")], TensorProto.FLOAT),
    "seq_insert_out_of_range": ([cst("p", np.array(-3, np.int64)), N("SequenceConstruct", ["x"], ["s"]),
                                 N("SequenceInsert", ["s", "x", "p"], ["s2"], name="insm3"),
                                 N("SequenceLength", ["s2"], ["y"])], TensorProto.INT64),
    "seq_at_empty": ([cst("p", np.array(0, np.int64)), N("SequenceEmpty", [], ["e"]),
                      N("SequenceAt", ["e", "p"], ["y"], name="at_empty")], TensorProto.FLOAT),
    "seq_erase_empty": ([N("SequenceEmpty", [], ["e"]), N("SequenceErase", ["e"], ["s"], name="erase_empty"),
                         N("SequenceLength", ["s"], ["y"])], TensorProto.INT64),
    "concat_from_empty": ([N("SequenceEmpty", [], ["e"]), N("ConcatFromSequence", ["e"], ["y"], name="cat_empty",
                                                            axis=0)], TensorProto.FLOAT),
    "optional_get_empty": ([N("Optional", [], ["o"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
                            N("OptionalGetElement", ["o"], ["y"], name="get_empty")], TensorProto.FLOAT),
    # a sequence where an op takes tensors
    "seq_into_tensor_op": ([N("SequenceConstruct", ["x"], ["s"]), N("Relu", ["s"], ["y"], name="relu_seq")],
                           TensorProto.FLOAT),
    "split_to_seq_bad_sizes": ([cst("sp", np.array([1, 3], np.int64)),
                                N("SplitToSequence", ["x", "sp"], ["s"], name="split_bad"),
                                N("SequenceLength", ["s"], ["y"])], TensorProto.INT64),
    # only an empty sequence comes out
    "seq_only_empty_output": ([N("SequenceEmpty", [], ["y"])], None),
}
for nm, (nodes, ot) in bad.items():
    yv = helper.make_value_info("y", seq_t()) if ot is None else helper.make_tensor_value_info("y", ot, None)
    save(nm, helper.make_graph(nodes, nm, [vi("x", [2])], [yv]), opset=16, check=False)

# SequenceAt at a run-time position: fine over elements of one shape, refused
# (the position must be bound by value) over elements of two shapes
for nm, shapes in (("seq_at_runtime_same", ([2], [2])), ("seq_at_runtime_mixed", ([2], [3]))):
    save(nm, helper.make_graph(
        [N("SequenceConstruct", ["a", "b"], ["s"]), N("SequenceAt", ["s", "pos"], ["y"], name="at_pos")], nm,
        [vi("a", shapes[0]), vi("b", shapes[1]), vi("pos", [], TensorProto.INT64)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), check=False)

# a sequence input (elements [N, 2]) concatenated, and split again into a
# sequence output of [1, 2] pieces
save("seq_io", helper.make_graph(
    [N("ConcatFromSequence", ["xs"], ["cat"], axis=0), N("Relu", ["cat"], ["r"]),
     N("SplitToSequence", ["r"], ["parts"], axis=0)], "seq_io",
    [helper.make_value_info("xs", seq_t(TensorProto.FLOAT, ["N", 2]))],
    [helper.make_value_info("parts", seq_t()), helper.make_tensor_value_info("r", TensorProto.FLOAT, None)]),
    check=False)

# an optional tensor input: present or bound empty
opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
save("optional_input", helper.make_graph(
    [N("OptionalHasElement", ["o"], ["has"])], "optional_input", [helper.make_value_info("o", opt_t)],
    [helper.make_tensor_value_info("has", TensorProto.BOOL, [])]), opset=16)
# the suite's files of a sequence and of an empty optional
with open(os.path.join(out, "seq_value.pb"), "wb") as f:
    f.write(numpy_helper.from_list([np.arange(3, dtype=np.float32), np.ones((2, 2), np.int64).astype(np.float32)],
                                   "s").SerializeToString())
with open(os.path.join(out, "empty_optional.pb"), "wb") as f:
    f.write(onnx.OptionalProto(name="o").SerializeToString())


# 11. graphs nested 3000 deep (If in If in ...): protobuf-c would recurse
# without limit; the importer must refuse it cleanly
def varint(v):
    b = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        b.append(c | (0x80 if v else 0))
        if not v:
            return bytes(b)


def ld(field, payload):
    return varint((field << 3) | 2) + varint(len(payload)) + payload


g = b""
for _ in range(3000):
    g = ld(1, ld(4, b"If") + ld(5, ld(1, b"a") + ld(6, g)))
with open(os.path.join(out, "deep.onnx"), "wb") as f:
    f.write(varint(1 << 3) + varint(8) + ld(7, g))
print("ok")


# Strings (computed at import only) and the preview training domain: what
# they give and how malformed nodes fail.
S = TensorProto.STRING
save("str_norm", helper.make_graph(
    [helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="UPPER", stopwords=["b"])],
    "str_norm", [vi("x", [3], S)], [vi("y", [None], S)]), opset=10)
save("str_norm_bad", helper.make_graph(
    [helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="SIDEWAYS")],
    "str_norm_bad", [vi("x", [3], S)], [vi("y", [None], S)]), opset=10, check=False)
sc = helper.make_tensor("s", S, [2], [b"1.5", b"abc"])
save("str_cast_bad", helper.make_graph(
    [helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)],
    "str_cast_bad", [], [vi("y", [2])], [sc]))
save("str_concat", helper.make_graph(
    [helper.make_node("Concat", ["s", "s"], ["y"], axis=0)],
    "str_concat", [], [vi("y", [4], S)], [sc]))
tr = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.preview.training", 1)]
for nm, op, attrs, nin in [("momentum_bad_mode", "Momentum",
                            dict(alpha=0.9, beta=0.1, norm_coefficient=0.0, mode="sideways"), 5),
                           ("adam_bad_inputs", "Adam", {}, 7)]:
    ins = [vi("R", []), vi("T", [], TensorProto.INT64)] + [vi("i%d" % k, [2]) for k in range(nin - 2)]
    m = helper.make_model(helper.make_graph(
        [helper.make_node(op, [i.name for i in ins], ["y"], domain="ai.onnx.preview.training", **attrs)],
        nm, ins, [vi("y", [2])]), opset_imports=tr)
    m.ir_version = 8
    onnx.save(m, os.path.join(out, nm + ".onnx"))
m = helper.make_model(helper.make_graph(
    [helper.make_node("Mul", ["a", "a"], ["d"]),
     helper.make_node("Gradient", ["a"], ["g"], domain="ai.onnx.preview.training", xs=["a"])],
    "gradient_no_y", [vi("a", [2])], [vi("g", [2])]), opset_imports=tr)
m.ir_version = 8
onnx.save(m, os.path.join(out, "gradient_no_y.onnx"))
sc = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 0.5, 0.5])
save("resize_antialias_bad", helper.make_graph(
    [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=2)],
    "resize_antialias_bad", [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 2, 2])], [sc]), opset=18, check=False)
