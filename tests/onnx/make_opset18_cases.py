#!/usr/bin/python3
"""Writes ONNX backend-style cases (model.onnx, test_data_set_0/input_K.pb,
output_K.pb) for ops and attributes of opsets 18-21, which Debian's
libonnx-testdata (opsets up to 17) lacks.  Expected outputs are NumPy
implementations written from the ONNX operator specification.  The
python3-onnx of Debian 12 (1.12) does not know these opsets, so models are
not run through onnx.checker.  Usage: make_opset18_cases.py OUTDIR"""
import os
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "opset18")
rng = np.random.default_rng(18)
IR = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10}
NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
           np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int8): TensorProto.INT8,
           np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.bool_): TensorProto.BOOL,
           np.dtype(object): TensorProto.STRING}


def case(name, op, inputs, outputs, opset, inits=None, **attrs):
    """inputs, outputs: [(name, array)]; inits: [(name, array)] become
    initializers (not graph inputs).  An input named "" is left out."""
    inits = inits or []
    node_in = [n for n, _ in inputs]
    init_names = {n for n, _ in inits}
    node = helper.make_node(op, node_in, [n for n, _ in outputs], **attrs)
    gin = [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], a.shape) for n, a in inputs
           if n and n not in init_names]
    gout = [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], a.shape) for n, a in outputs]
    g = helper.make_graph([node], name, gin, gout, [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_opset18_cases")
    m.ir_version = IR[opset]
    d = os.path.join(OUT, "test_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    k = 0
    for n, a in inputs:
        if n and n not in init_names:
            with open(os.path.join(d, "test_data_set_0", f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())
            k += 1
    for k, (n, a) in enumerate(outputs):
        with open(os.path.join(d, "test_data_set_0", f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a).SerializeToString())


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*v):
    return np.array(v, np.int64)


if os.path.isdir(OUT):
    shutil.rmtree(OUT)
os.makedirs(OUT)

# --- reductions with axes as an input (opset 18) ---------------------------
x = f32(3, 4, 5)
xp = np.abs(x) + 0.1
reds = {
    "ReduceMax": lambda a, ax, kd: np.max(a, axis=ax, keepdims=kd),
    "ReduceMin": lambda a, ax, kd: np.min(a, axis=ax, keepdims=kd),
    "ReduceMean": lambda a, ax, kd: np.mean(a, axis=ax, keepdims=kd),
    "ReduceProd": lambda a, ax, kd: np.prod(a, axis=ax, keepdims=kd),
    "ReduceL1": lambda a, ax, kd: np.sum(np.abs(a), axis=ax, keepdims=kd),
    "ReduceL2": lambda a, ax, kd: np.sqrt(np.sum(a * a, axis=ax, keepdims=kd)),
    "ReduceLogSum": lambda a, ax, kd: np.log(np.sum(a, axis=ax, keepdims=kd)),
    "ReduceLogSumExp": lambda a, ax, kd: np.log(np.sum(np.exp(a), axis=ax, keepdims=kd)),
    "ReduceSumSquare": lambda a, ax, kd: np.sum(a * a, axis=ax, keepdims=kd),
}
for op, fn in reds.items():
    a = xp if op == "ReduceLogSum" else x
    low = op.lower().replace("reduce", "reduce_")
    # axes as an initializer, keepdims 1 and 0, a negative axis
    for kd in (1, 0):
        case(f"{low}_axes_init_keepdims{kd}", op, [("x", a), ("axes", i64(0, -1))],
             [("y", fn(a, (0, 2), bool(kd)).astype(np.float32))], 18, inits=[("axes", i64(0, -1))], keepdims=kd)
    # axes as a graph input (bound by value at import)
    case(f"{low}_axes_input", op, [("x", a), ("axes", i64(1))], [("y", fn(a, (1,), True).astype(np.float32))], 18)
    # no axes: every axis
    case(f"{low}_no_axes", op, [("x", a)], [("y", fn(a, None, False).astype(np.float32))], 18, keepdims=0)
# empty axes with noop_with_empty_axes: the input unchanged
case("reduce_max_empty_axes_noop", "ReduceMax", [("x", x), ("axes", np.zeros(0, np.int64))], [("y", x)], 18,
     inits=[("axes", np.zeros(0, np.int64))], noop_with_empty_axes=1)
# bool ReduceMax / ReduceMin (opset 20)
b = rng.random((3, 4)) > 0.5
b[0] = False
b[1] = True
for op, fn in (("ReduceMax", np.any), ("ReduceMin", np.all)):
    case(f"{op.lower().replace('reduce', 'reduce_')}_bool", op, [("x", b), ("axes", i64(1))],
         [("y", fn(b, axis=1, keepdims=True))], 20, inits=[("axes", i64(1))])

# --- Split with num_outputs (opset 18) ----------------------------------------
x = f32(7, 4)
case("split_num_outputs_uneven", "Split", [("x", x)], [("a", x[0:3]), ("b", x[3:6]), ("c", x[6:7])], 18,
     axis=0, num_outputs=3)
x = f32(2, 6)
case("split_num_outputs_even", "Split", [("x", x)], [("a", x[:, 0:2]), ("b", x[:, 2:4]), ("c", x[:, 4:6])], 18,
     axis=-1, num_outputs=3)

# --- Pad with axes (18), wrap mode (19) -----------------------------------------
x = f32(2, 3, 4)
pads = i64(1, 2, 2, 1)  # for axes [1, -1]: begins, then ends
for mode in ("constant", "reflect", "edge"):
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    want = np.pad(x, [(0, 0), (1, 2), (2, 1)], mode=mode, **kw).astype(np.float32)
    value = [("value", np.array(0.5, np.float32))] if mode == "constant" else []
    case(f"pad_axes_{mode}", "Pad", [("x", x), ("pads", pads), (value[0] if value else ("", None)), ("axes", i64(1, -1))],
         [("y", want)], 18, inits=[("pads", pads), ("axes", i64(1, -1))] + value, mode=mode)
case("pad_wrap", "Pad", [("x", x), ("pads", i64(0, 1, 2, 0, 2, 1))],
     [("y", np.pad(x, [(0, 0), (1, 2), (2, 1)], mode="wrap"))], 19, inits=[("pads", i64(0, 1, 2, 0, 2, 1))],
     mode="wrap")

# --- GroupNormalization (18: scale per group; 21: per channel) -------------------


def group_norm(x, G, scale, bias, eps):
    N, C = x.shape[:2]
    xg = x.reshape(N, G, -1).astype(np.float64)
    m = xg.mean(-1, keepdims=True)
    v = xg.var(-1, keepdims=True)
    y = ((xg - m) / np.sqrt(v + eps)).reshape(x.shape)
    sh = (1, C) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(sh) + bias.reshape(sh)).astype(np.float32)


x = f32(2, 6, 3, 3)
sg, bg = f32(3), f32(3)
case("group_normalization_18", "GroupNormalization", [("x", x), ("scale", sg), ("bias", bg)],
     [("y", group_norm(x, 3, np.repeat(sg, 2), np.repeat(bg, 2), 1e-5))], 18, inits=[("scale", sg), ("bias", bg)],
     num_groups=3)
case("group_normalization_18_epsilon", "GroupNormalization", [("x", x), ("scale", sg), ("bias", bg)],
     [("y", group_norm(x, 3, np.repeat(sg, 2), np.repeat(bg, 2), 0.1))], 18, num_groups=3, epsilon=0.1)
sc, bc = f32(6), f32(6)
case("group_normalization_21", "GroupNormalization", [("x", x), ("scale", sc), ("bias", bc)],
     [("y", group_norm(x, 2, sc, bc, 1e-5))], 21, inits=[("scale", sc), ("bias", bc)], num_groups=2)
x5 = f32(1, 4, 5)
s4, b4 = f32(4), f32(4)
case("group_normalization_21_1d_stash", "GroupNormalization", [("x", x5), ("scale", s4), ("bias", b4)],
     [("y", group_norm(x5, 4, s4, b4, 1e-5))], 21, num_groups=4, stash_type=1)

# --- Col2Im (18) ----------------------------------------------------------------


def col2im(cols, image, block, dil, pads, strides):
    N, CK, L = cols.shape
    K = int(np.prod(block))
    C = CK // K
    H, W = image
    kh, kw = block
    oh = (H + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (W + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    assert oh * ow == L
    out = np.zeros((N, C, H + pads[0] + pads[2], W + pads[1] + pads[3]), np.float64)
    c6 = cols.reshape(N, C, kh, kw, oh, ow)
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    out[:, :, a * strides[0] + i * dil[0], b * strides[1] + j * dil[1]] += c6[:, :, i, j, a, b]
    return out[:, :, pads[0]:pads[0] + H, pads[1]:pads[1] + W].astype(np.float32)


for name, image, block, dil, pads, strides in (
        ("col2im", (5, 5), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
        ("col2im_strides_pads", (5, 6), (3, 2), (1, 1), (1, 0, 1, 1), (2, 2)),
        ("col2im_dilations", (6, 5), (2, 2), (2, 1), (0, 0, 0, 0), (1, 1))):
    kh, kw = block
    H, W = image
    oh = (H + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (W + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    cols = f32(2, 3 * kh * kw, oh * ow)
    case(name, "Col2Im", [("x", cols), ("image_shape", i64(*image)), ("block_shape", i64(*block))],
         [("y", col2im(cols, image, block, dil, pads, strides))], 18,
         inits=[("image_shape", i64(*image)), ("block_shape", i64(*block))],
         dilations=list(dil), pads=list(pads), strides=list(strides))

# --- Mish (18), Gelu (20) -----------------------------------------------------------
x = (f32(3, 7) * 3).astype(np.float32)
xd = x.astype(np.float64)
case("mish_18", "Mish", [("x", x)], [("y", (xd * np.tanh(np.log1p(np.exp(xd)))).astype(np.float32))], 18)
erf = np.vectorize(__import__("math").erf)
case("gelu_20", "Gelu", [("x", x)], [("y", (0.5 * xd * (1 + erf(xd / np.sqrt(2)))).astype(np.float32))], 20)
case("gelu_20_tanh", "Gelu", [("x", x)],
     [("y", (0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))).astype(np.float32))], 20,
     approximate="tanh")

# --- Bitwise (18) -------------------------------------------------------------------------
for dt in (np.int32, np.int64, np.uint8, np.int8):
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, (3, 4), dtype=dt, endpoint=True)
    bb = rng.integers(info.min, info.max, (4,), dtype=dt, endpoint=True)  # broadcast
    t = np.dtype(dt).name
    case(f"bitwise_and_{t}", "BitwiseAnd", [("a", a), ("b", bb)], [("y", np.bitwise_and(a, bb))], 18)
    case(f"bitwise_or_{t}", "BitwiseOr", [("a", a), ("b", bb)], [("y", np.bitwise_or(a, bb))], 18)
    case(f"bitwise_xor_{t}", "BitwiseXor", [("a", a), ("b", bb)], [("y", np.bitwise_xor(a, bb))], 18)
    case(f"bitwise_not_{t}", "BitwiseNot", [("a", a)], [("y", np.invert(a))], 18)

# --- CenterCropPad (18) ------------------------------------------------------------------


def center_crop_pad(x, shape, axes):
    out_shape = list(x.shape)
    for a, s in zip(axes, shape):
        out_shape[a] = s
    y = np.zeros(out_shape, x.dtype)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for a, s in zip(axes, shape):
        d = x.shape[a]
        if s < d:
            src[a] = slice((d - s) // 2, (d - s) // 2 + s)
        elif s > d:
            dst[a] = slice((s - d) // 2, (s - d) // 2 + d)
    y[tuple(dst)] = x[tuple(src)]
    return y


x = f32(5, 6, 3)
case("center_crop_pad_crop", "CenterCropPad", [("x", x), ("shape", i64(3, 3, 3))],
     [("y", center_crop_pad(x, (3, 3, 3), (0, 1, 2)))], 18, inits=[("shape", i64(3, 3, 3))])
case("center_crop_pad_pad", "CenterCropPad", [("x", x), ("shape", i64(8, 9, 3))],
     [("y", center_crop_pad(x, (8, 9, 3), (0, 1, 2)))], 18, inits=[("shape", i64(8, 9, 3))])
case("center_crop_pad_crop_and_pad_axes", "CenterCropPad", [("x", x), ("shape", i64(10, 2))],
     [("y", center_crop_pad(x, (10, 2), (2, 0)))], 18, inits=[("shape", i64(10, 2))], axes=[-1, 0])
xi = rng.integers(-9, 9, (4, 5), dtype=np.int64)
case("center_crop_pad_int64_odd", "CenterCropPad", [("x", xi), ("shape", i64(1, 8))],
     [("y", center_crop_pad(xi, (1, 8), (0, 1)))], 18, inits=[("shape", i64(1, 8))])

# --- ScatterElements / ScatterND with reduction max, min (18) -----------------------------
data = f32(3, 4)
idx = np.array([[1, 0, 2, 0], [0, 0, 1, 2]], np.int64)
upd = f32(2, 4)
for red in ("max", "min"):
    want = data.copy()
    for i in range(2):
        for j in range(4):
            r = idx[i, j]
            want[r, j] = max(want[r, j], upd[i, j]) if red == "max" else min(want[r, j], upd[i, j])
    case(f"scatter_elements_reduction_{red}", "ScatterElements", [("data", data), ("idx", idx), ("upd", upd)],
         [("y", want)], 18, axis=0, reduction=red)
data = f32(4, 3)
idx = np.array([[1], [3], [1]], np.int64)
upd = f32(3, 3)
for red in ("max", "min"):
    want = data.copy()
    for i in range(3):
        r = idx[i, 0]
        want[r] = np.maximum(want[r], upd[i]) if red == "max" else np.minimum(want[r], upd[i])
    case(f"scatternd_reduction_{red}", "ScatterND", [("data", data), ("idx", idx), ("upd", upd)], [("y", want)], 18,
         reduction=red)

# --- DFT (20: axis as an input), STFT (17) ---------------------------------------------------
xr = f32(2, 8, 1)
xc = f32(2, 8, 2)


def as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def as_pair(z):
    return np.stack([z.real, z.imag], -1).astype(np.float32)


case("dft_20_axis_input", "DFT", [("x", xr), ("", None), ("axis", i64(1).reshape(()))],
     [("y", as_pair(np.fft.fft(as_complex(xr), axis=1)))], 20, inits=[("axis", i64(1).reshape(()))])
case("dft_20_default_axis_complex", "DFT", [("x", xc)], [("y", as_pair(np.fft.fft(as_complex(xc), axis=1)))], 20)
case("dft_20_onesided", "DFT", [("x", xr), ("", None), ("axis", i64(1).reshape(()))],
     [("y", as_pair(np.fft.rfft(as_complex(xr).real, axis=1)))], 20, inits=[("axis", i64(1).reshape(()))],
     onesided=1)
case("dft_20_inverse_length", "DFT", [("x", xc), ("len", i64(6).reshape(())), ("axis", i64(1).reshape(()))],
     [("y", as_pair(np.fft.ifft(as_complex(xc)[:, :6], axis=1)))], 20,
     inits=[("len", i64(6).reshape(())), ("axis", i64(1).reshape(()))], inverse=1)
x3 = f32(3, 5, 2)
case("dft_20_axis0", "DFT", [("x", x3), ("", None), ("axis", i64(0).reshape(()))],
     [("y", as_pair(np.fft.fft(as_complex(x3), axis=0)))], 20, inits=[("axis", i64(0).reshape(()))])


def stft(sig, step, window, length, onesided):
    s = sig[..., 0]
    nf = (s.shape[1] - length) // step + 1
    frames = np.stack([s[:, i * step:i * step + length] * window for i in range(nf)], 1)
    z = np.fft.fft(frames, axis=-1)
    if onesided:
        z = z[..., :length // 2 + 1]
    return as_pair(z)


sig = f32(2, 32, 1)
win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(8) / 8)).astype(np.float32)
case("stft_window", "STFT", [("sig", sig), ("step", i64(4).reshape(())), ("win", win)],
     [("y", stft(sig, 4, win, 8, True))], 17, inits=[("step", i64(4).reshape(()))])
case("stft_length_twosided", "STFT",
     [("sig", sig), ("step", i64(6).reshape(())), ("", None), ("len", i64(10).reshape(()))],
     [("y", stft(sig, 6, np.ones(10), 10, False))], 17,
     inits=[("step", i64(6).reshape(())), ("len", i64(10).reshape(()))], onesided=0)

# --- AffineGrid (20) ------------------------------------------------------------------------


def affine_grid(theta, size, align):
    N = size[0]
    sp = size[2:]

    def lin(n):
        if align:
            return np.linspace(-1, 1, n) if n > 1 else np.zeros(1)
        return (2 * np.arange(n) + 1) / n - 1

    axes = [lin(n) for n in sp]  # H, W (or D, H, W)
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]  # x (W) first
    base = np.stack(coords + [np.ones_like(coords[0])], -1)  # [HW, nd+1]
    g = np.einsum("pk,njk->npj", base, theta.astype(np.float64))
    return g.reshape((N,) + tuple(sp) + (len(sp),)).astype(np.float32)


th = f32(2, 2, 3)
for al in (0, 1):
    case(f"affine_grid_2d_align{al}", "AffineGrid", [("theta", th), ("size", i64(2, 3, 4, 5))],
         [("grid", affine_grid(th, (2, 3, 4, 5), al))], 20, inits=[("size", i64(2, 3, 4, 5))], align_corners=al)
th3 = f32(1, 3, 4)
case("affine_grid_3d", "AffineGrid", [("theta", th3), ("size", i64(1, 1, 2, 3, 4))],
     [("grid", affine_grid(th3, (1, 1, 2, 3, 4), 0))], 20, inits=[("size", i64(1, 1, 2, 3, 4))])

# --- IsNaN / IsInf for float16 and double (opset 20) ------------------------------------------
for dt in (np.float16, np.float64):
    v = np.array([1.0, np.nan, np.inf, -np.inf, -2.5, 0.0, np.nan, 65504.0], dt).reshape(2, 4)
    t = np.dtype(dt).name
    case(f"isnan_{t}", "IsNaN", [("x", v)], [("y", np.isnan(v))], 20)
    case(f"isinf_{t}", "IsInf", [("x", v)], [("y", np.isinf(v))], 20)
    case(f"isinf_negative_{t}", "IsInf", [("x", v)], [("y", np.isneginf(v))], 20, detect_positive=0)

# --- Resize (18): keep_aspect_ratio_policy with axes -----------------------------------------------
x = f32(1, 2, 4, 6)
for pol, sizes, scale in (("not_larger", (2, 5), 0.5), ("not_smaller", (8, 9), 2.0)):
    oh, ow = int(round(4 * scale)), int(round(6 * scale))
    iy = np.floor(np.arange(oh) / scale).astype(int)
    ix = np.floor(np.arange(ow) / scale).astype(int)
    case(f"resize_keep_aspect_{pol}", "Resize", [("x", x), ("", None), ("", None), ("sizes", i64(*sizes))],
         [("y", x[:, :, iy][:, :, :, ix])], 18, inits=[("sizes", i64(*sizes))], axes=[2, 3],
         keep_aspect_ratio_policy=pol, mode="nearest", coordinate_transformation_mode="asymmetric",
         nearest_mode="floor")
# scales for the listed axes only: linear, half_pixel, x2 along the width
xo = (np.arange(12) + 0.5) / 2.0 - 0.5
xo = np.clip(xo, 0, 5)
lo = np.floor(xo).astype(int)
hi = np.minimum(lo + 1, 5)
fr = xo - lo
want = (x[..., lo] * (1 - fr) + x[..., hi] * fr).astype(np.float32)
case("resize_scales_axes_linear", "Resize", [("x", x), ("", None), ("scales", np.array([2.0], np.float32))],
     [("y", want)], 18, inits=[("scales", np.array([2.0], np.float32))], axes=[-1], mode="linear")
# --- Resize (18): antialias (linear, cubic) --------------------------------------------------------
# The spec's reference: per axis, coefficients from the filter stretched by
# 1 / scale when downscaling, normalised; the taps are the len(coeffs)
# nearest positions of the edge-padded input (preferring the lower one).


def aa_cubic(A, t):
    t = abs(t)
    if t <= 1:
        return (A + 2) * t ** 3 - (A + 3) * t ** 2 + 1
    return A * t ** 3 - 5 * A * t ** 2 + 8 * A * t - 4 * A if t < 2 else 0.0


def aa_coeffs(ratio, scale, mode, A):
    s = min(scale, 1.0)
    if mode == "linear":
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, 2 - start) - ratio) * s
        c = np.clip(1 - np.abs(args), 0, 1)
    else:
        start = int(np.floor(-2 / s) + 1)
        c = np.array([aa_cubic(A, s * (i - ratio)) for i in range(start, 2 - start)])
    return c / c.sum()


def aa_1d(data, scale, out_n, mode, A, excl, ctm):
    n_in = len(data)
    res = np.zeros(out_n)
    for o in range(out_n):
        if ctm == "half_pixel":
            x = (o + 0.5) / scale - 0.5
        elif ctm == "align_corners":
            x = o * (n_in - 1) / (scale * n_in - 1)
        else:
            x = o / scale
        ratio = 1.0 if float(x).is_integer() else x - np.floor(x)
        c = aa_coeffs(ratio, scale, mode, A)
        pad = int(np.ceil(len(c) / 2))
        padded = np.pad(data, pad, mode="edge")
        xp = x + pad
        idx = np.array(sorted(sorted(range(len(padded)), key=lambda i: (abs(xp - i), i))[:len(c)]))
        if excl:
            c = np.where((idx - pad < 0) | (idx - pad >= n_in), 0, c)
            c = c / c.sum()
        res[o] = np.dot(c, padded[idx])
    return res


def aa_resize(x, scales, sizes, mode, A=-0.75, excl=False, ctm="half_pixel"):
    y = x.astype(np.float64)
    for ax in range(x.ndim):
        if sizes[ax] == x.shape[ax] and scales[ax] == 1:
            continue
        y = np.apply_along_axis(aa_1d, ax, y, scales[ax], sizes[ax], mode, A, excl, ctm)
    return y.astype(np.float32)


x = f32(1, 2, 8, 10)
# scales exact in binary, so that no output size hangs on a float32 rounding;
# align_corners with whole output sizes (its denominator is scale * size,
# where ONNX Runtime takes the rounded size)
for name, mode, scales, attrs in (("linear_down", "linear", [1, 1, 0.625, 0.5], {}),
                                  ("cubic_down", "cubic", [1, 1, 0.5, 0.375], {}),
                                  ("cubic_down_a05_exclude", "cubic", [1, 1, 0.75, 0.625],
                                   dict(cubic_coeff_a=-0.5, exclude_outside=1)),
                                  ("linear_down_align_corners", "linear", [1, 1, 0.5, 0.5],
                                   dict(coordinate_transformation_mode="align_corners")),
                                  ("linear_up_down", "linear", [1, 1, 1.5, 0.5], {})):
    sc = np.array(scales, np.float32)
    sizes = [int(np.floor(d * s)) for d, s in zip(x.shape, sc.astype(np.float64))]
    want = aa_resize(x, sc.astype(np.float64), sizes, mode, attrs.get("cubic_coeff_a", -0.75),
                     attrs.get("exclude_outside", 0), attrs.get("coordinate_transformation_mode", "half_pixel"))
    case(f"resize_antialias_{name}", "Resize", [("x", x), ("", None), ("scales", sc)], [("y", want)], 18,
         inits=[("scales", sc)], mode=mode, antialias=1, **attrs)
# sizes for one axis: the scale is the size ratio
sz = i64(3)
case("resize_antialias_cubic_sizes_axes", "Resize", [("x", x), ("", None), ("", None), ("sizes", sz)],
     [("y", aa_resize(x, [1, 1, 1, 3 / 10], [1, 2, 8, 3], "cubic"))], 18, inits=[("sizes", sz)], axes=[3],
     mode="cubic", antialias=1)
# --- strings (19-20): Equal of strings, StringConcat, StringSplit, RegexFullMatch --------------------
# References: Python's str operations, which the spec's reference uses.
import re  # noqa: E402


def strs(*rows):
    return np.array(rows, dtype=object)


a, b = strs("abc", "", "h\u00e9!", "abc"), strs("abc", "", "h\u00e9", "abd")
case("equal_string", "Equal", [("x", a), ("y", b)], [("z", np.array([p == q for p, q in zip(a, b)]))], 19)
case("equal_string_broadcast", "Equal", [("x", strs(["a", "b"], ["b", "a"])), ("y", strs("a"))],
     [("z", np.array([[True, False], [False, True]]))], 19)
x2, y2 = strs(["abc", "def"], ["", "\u00e9t\u00e9"]), strs(".com", "!")
case("string_concat_broadcast", "StringConcat", [("x", x2), ("y", y2)],
     [("z", np.array([[p + q for p, q in zip(r, y2)] for r in x2], dtype=object))], 20)
case("string_concat_scalar", "StringConcat", [("x", strs("ab", "")), ("y", np.array("-z", dtype=object))],
     [("z", strs("ab-z", "-z"))], 20)


def split_ref(x, delim, maxsplit):
    parts = [v.split(delim or None, -1 if maxsplit is None else maxsplit) for v in x.ravel()]
    most = max((len(p) for p in parts), default=0)
    y = np.array([p + [""] * (most - len(p)) for p in parts], dtype=object).reshape(x.shape + (most,))
    return y, np.array([len(p) for p in parts], np.int64).reshape(x.shape)


for name, x, delim, maxsplit in (("delimiter", strs("abc.com", "def.net.org", ""), ".", None),
                                 ("consecutive_delimiters", strs(["o-n-n--x-", "o-n----nx"]), "-", None),
                                 ("long_delimiter", strs("a<>b<><>c", "<>"), "<>", None),
                                 ("whitespace_maxsplit", strs("hello world !", "  hello   world ! ", ""), None, 1),
                                 ("whitespace", strs("\ta  b\n", "   ", "one"), "", None),
                                 ("delimiter_maxsplit", strs("1,2,3,4", "5"), ",", 2)):
    y, z = split_ref(x, delim, maxsplit)
    attrs = {} if delim is None else dict(delimiter=delim)
    if maxsplit is not None:
        attrs["maxsplit"] = maxsplit
    case(f"string_split_{name}", "StringSplit", [("x", x)], [("y", y), ("z", z)], 20, **attrs)

for name, pat, x in (("basic", r"www\.[\w.-]+\.\bcom\b", strs("www.google.com", "www.facebook.com", "www.bbc.co.uk")),
                     ("email_domain", r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)",
                      strs(["account@gmail.com", "account@hotmail.com"], ["not email", "account2@yahoo.com"])),
                     ("partial_is_no_match", r"ab+", strs("ab", "abbb", "xab", "abx", "")),
                     ("utf8", r"h.t.", strs("h\u00e9t\u00e9", "hete", "h\u00e9t"))):
    want = np.array([re.fullmatch(pat, v) is not None for v in x.ravel()]).reshape(x.shape)
    case(f"regex_full_match_{name}", "RegexFullMatch", [("x", x)], [("y", want)], 20, pattern=pat)
print("ok")
