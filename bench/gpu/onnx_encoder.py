"""onnx_encoder.py - the WORKLOADS.md encoder (b1, seq 128) exported to ONNX
by PyTorch at opset 14 (LayerNorm written out) and opset 17, and once more at
opset 17 with its attention as F.scaled_dot_product_attention (exported with
the scale split between q and k^T), and at opset 17 with an attention_mask
input as Hugging Face's BERT takes it (an additive mask (1 - mask) * -10000
over the keys; the last 16 of 128 tokens padding), run by `rlx run --device
cuda` in f32 and f16, each output compared with PyTorch's (f32, on the CPU)
and each time set beside the C-API encoder's (bench/gpu/rlx_gpu_bench.c).

    python3 bench/gpu/onnx_encoder.py RLX_BIN [RUNS]

Prints one line per (opset, precision): median latency, the canon and
fusion summary, and max |rlx - torch| / rms(torch)."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cpu"))
import torch_workloads as tw  # noqa: E402


def export(net, args, path, opset, names=("input_ids",), output="out"):
    kw = dict(input_names=list(names), output_names=[output], opset_version=opset)
    try:
        torch.onnx.export(net, args, path, dynamo=False, **kw)
    except TypeError:  # PyTorch without the dynamo switch
        torch.onnx.export(net, args, path, **kw)


def sdpa_forward(self, x):
    """tw.Layer.forward with the attention as one scaled_dot_product_attention call."""
    b, s, h = x.shape
    d = h // self.heads
    q, k, v = (m(x).view(b, s, self.heads, d).transpose(1, 2) for m in (self.q, self.k, self.v))
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, s, h)))
    return self.ln2(x + self.f2(torch.nn.functional.gelu(self.f1(x))))


class MaskedEncoder(torch.nn.Module):
    """tw.Encoder with Hugging Face BERT's attention_mask: 1 for tokens, 0
    for padding, added to the scores as (1 - mask) * -10000 over the keys."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, ids, attention_mask):
        n = self.net
        s = ids.shape[1]
        x = n.ln(n.word(ids) + n.pos.weight[:s] + n.tok_type.weight[0])
        ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for l in n.layers:
            b, _, h = x.shape
            d = h // l.heads
            q, k, v = (m(x).view(b, s, l.heads, d).transpose(1, 2) for m in (l.q, l.k, l.v))
            a = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5 + ext, -1) @ v
            x = l.ln1(x + l.o(a.transpose(1, 2).reshape(b, s, h)))
            x = l.ln2(x + l.f2(torch.nn.functional.gelu(l.f1(x))))
        return x


def main():
    rlx, runs = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "200"
    work = tempfile.mkdtemp(prefix="rlx-onnx-gpu-")
    torch.manual_seed(1)
    net = tw.normal_(tw.Encoder()).eval()
    x = torch.randint(0, 30000, (1, 128))
    inp = os.path.join(work, "in.npy")
    np.save(inp, x.numpy())
    mask = torch.ones(1, 128, dtype=torch.int64)
    mask[:, 112:] = 0
    mask_file = os.path.join(work, "mask.npy")
    np.save(mask_file, mask.numpy())
    variants = [14, 17, "17mask"]
    refs = {}
    with torch.no_grad():
        ref = net(x).numpy().astype(np.float64)
        for opset in (14, 17):
            export(net, (x,), os.path.join(work, "enc%d.onnx" % opset), opset)
        masked = MaskedEncoder(net).eval()
        refs["17mask"] = masked(x, mask).numpy().astype(np.float64)
        export(masked, (x, mask), os.path.join(work, "enc17mask.onnx"), 17, ("input_ids", "attention_mask"))
        if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            plain = tw.Layer.forward
            tw.Layer.forward = sdpa_forward
            export(net, (x,), os.path.join(work, "enc17sdpa.onnx"), 17)
            tw.Layer.forward = plain
            variants.append("17sdpa")
    for opset in variants:
        want = refs.get(opset, ref)
        rms = float(np.sqrt((want ** 2).mean()))
        for prec in ("f32", "f16"):
            model, odir = os.path.join(work, "enc%s.onnx" % opset), os.path.join(work, "o%s%s" % (opset, prec))
            os.makedirs(odir, exist_ok=True)
            cmd = [rlx, "run", model, "--input", "input_ids=" + inp, "--device", "cuda", "--precision", prec,
                   "--repeat", runs, "--output-dir", odir, "--force"]
            if opset in refs:
                cmd += ["--input", "attention_mask=" + mask_file]
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, RLX_VERBOSE="1"))
            lat = re.search(r"latency: median ([0-9.]+) ms", r.stdout)
            if r.returncode != 0 or not lat:
                print("opset %s %s: FAILED (%d)\n%s" % (opset, prec, r.returncode, (r.stdout + r.stderr)[-1500:]))
                continue
            canon = re.search(r"\[rlx canon\] (\d+)", r.stderr)
            fusion = re.search(r"fusion: ([^\n]*)", r.stderr)
            got = np.load(os.path.join(odir, "out.npy")).astype(np.float64)
            print("ONNX opset %s %s: median %s ms, canon rewrites %s, fusion %s, max |rlx - torch| / rms %.2e" % (
                opset, prec, lat.group(1), canon.group(1) if canon else "0", fusion.group(1) if fusion else "?",
                float(np.abs(got - want).max()) / rms))


if __name__ == "__main__":
    main()
