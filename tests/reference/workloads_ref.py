#!/usr/bin/python3
"""Independent float64 reference for the mlp and encoder workloads.

Reads the tensors a test wrote (manifest.txt: `name dtype dim...` per line,
data in name.bin), recomputes the model with NumPy in float64 and compares
with RLX's output.  Exit 0: match; 1: mismatch; 77: NumPy missing (skip).
"""
import math
import os
import sys

try:
    import numpy as np
except ImportError:
    print("skip: NumPy is not installed for /usr/bin/python3 (apt-get install python3-numpy)")
    sys.exit(77)

DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32}


def load(folder):
    tensors = {}
    with open(os.path.join(folder, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            name, dtype, dims = parts[0], parts[1], [int(d) for d in parts[2:]]
            data = np.fromfile(os.path.join(folder, name + ".bin"), dtype=DTYPES[dtype])
            tensors[name] = data.reshape(dims).astype(np.float64 if dtype.startswith("f") else np.int64)
    return tensors


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def mlp(t):
    x = t["x"]
    x = gelu(x @ t["fc1.w"] + t["fc1.b"])
    x = gelu(x @ t["fc2.w"] + t["fc2.b"])
    return x @ t["fc3.w"] + t["fc3.b"]


def encoder(t, layers, heads, eps):
    ids = t["input_ids"]
    B, S = ids.shape
    x = t["emb.word.w"][ids] + t["emb.pos.w"][:S] + t["emb.type.w"][0]
    x = layer_norm(x, t["emb.ln.g"], t["emb.ln.b"], eps)
    H = x.shape[-1]
    D = H // heads
    for l in range(layers):
        p = "l%d" % l
        def proj(name, v):
            return v @ t["%s.%s.w" % (p, name)] + t["%s.%s.b" % (p, name)]
        q, k, v = (proj(n, x).reshape(B, S, heads, D).transpose(0, 2, 1, 3) for n in "qkv")
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        a = proj("o", a.transpose(0, 2, 1, 3).reshape(B, S, H))
        x = layer_norm(x + a, t[p + ".ln1.g"], t[p + ".ln1.b"], eps)
        f = proj("ffn2", gelu(proj("ffn1", x)))
        x = layer_norm(x + f, t[p + ".ln2.g"], t[p + ".ln2.b"], eps)
    return x


def main():
    folder, model = sys.argv[1], sys.argv[2]
    t = load(folder)
    if model == "mlp":
        ref, got = mlp(t), t["y"]
    else:
        ref, got = encoder(t, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])), t["hidden"]
    err = np.abs(ref - got)
    scale = np.sqrt((ref ** 2).mean())
    rel = err.max() / scale
    print("%s: max |rlx - ref| = %.3g, rms(ref) = %.3g, max error / rms = %.3g" % (model, err.max(), scale, rel))
    # f32 compute against float64: a few hundred ulps of accumulated rounding
    sys.exit(0 if rel < 2e-4 and np.isfinite(got).all() else 1)


if __name__ == "__main__":
    main()
