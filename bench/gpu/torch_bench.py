"""torch_bench.py - the PyTorch side of the GPU benchmark, and the card's
ceilings measured in the same run.

Runs the WORKLOADS.md models (mlp, MiniLM-shaped encoder, ResNet-50 v1.5
with BatchNorm folded, the Qwen3-0.6B-shaped decoder's prefill of 512
tokens) in PyTorch: eager, eager captured into a CUDA graph,
and (with --compile) torch.compile(mode="reduce-overhead").  Each figure is
the median over repeated runs after warm-up, timed per run with a device
synchronisation, the same way bench/gpu/rlx_gpu_bench.c times RLX.

Prints one JSON object per line: {"kind": "ceiling"|"torch", ...}.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def init_weights(m, seed=1):
    g = torch.Generator().manual_seed(seed)
    for name, p in m.named_parameters():
        with torch.no_grad():
            if name.endswith("bias") or name.endswith(".b"):
                p.zero_()
            elif "norm" in name or "ln" in name or name.startswith("bn") or ".bn" in name:
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def mlp():
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024))


class Layer(nn.Module):
    def __init__(self, h=384, heads=12, ffn=1536, eps=1e-12):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(h, eps=eps), nn.LayerNorm(h, eps=eps)
        self.f1, self.f2 = nn.Linear(h, ffn), nn.Linear(ffn, h)
        self.heads = heads

    def forward(self, x):
        B, S, H = x.shape
        d = H // self.heads
        q, k, v = (t(x).view(B, S, self.heads, d).transpose(1, 2) for t in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, S, H)
        x = self.ln1(x + self.o(a))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class Encoder(nn.Module):
    def __init__(self, layers=6, h=384, vocab=30522, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, h)
        self.pos = nn.Embedding(max_pos, h)
        self.tok_type = nn.Embedding(2, h)
        self.ln = nn.LayerNorm(h, eps=1e-12)
        self.layers = nn.ModuleList(Layer(h) for _ in range(layers))

    def forward(self, ids):
        S = ids.shape[1]
        x = self.word(ids) + self.pos.weight[:S] + self.tok_type.weight[0]
        x = self.ln(x)
        for l in self.layers:
            x = l(x)
        return x


def resnet50():
    import torchvision
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    m = torchvision.models.resnet50().eval()
    init_weights(m)
    for mod in m.modules():  # He-scaled convs so activations stay away from zero
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight)
        elif isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.weight.fill_(1.0)
                mod.bias.zero_()
    m.conv1 = fuse_conv_bn_eval(m.conv1, m.bn1)
    m.bn1 = nn.Identity()
    for layer in (m.layer1, m.layer2, m.layer3, m.layer4):
        for b in layer:
            b.conv1, b.bn1 = fuse_conv_bn_eval(b.conv1, b.bn1), nn.Identity()
            b.conv2, b.bn2 = fuse_conv_bn_eval(b.conv2, b.bn2), nn.Identity()
            b.conv3, b.bn3 = fuse_conv_bn_eval(b.conv3, b.bn3), nn.Identity()
            if b.downsample is not None:
                b.downsample = nn.Sequential(fuse_conv_bn_eval(b.downsample[0], b.downsample[1]))
    return m


class DecoderLayer(nn.Module):
    """Qwen3-shaped: pre-RMSNorm grouped-query attention with q/k RMSNorm per
    head and RoPE (rotate-half form), a SwiGLU FFN, residuals."""

    def __init__(self, h=1024, heads=16, kv=8, d=128, ffn=3072, eps=1e-6):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv, d
        self.attn_norm, self.ffn_norm = nn.RMSNorm(h, eps=eps), nn.RMSNorm(h, eps=eps)
        self.q_norm, self.k_norm = nn.RMSNorm(d, eps=eps), nn.RMSNorm(d, eps=eps)
        self.q, self.o = nn.Linear(h, heads * d, bias=False), nn.Linear(heads * d, h, bias=False)
        self.k, self.v = nn.Linear(h, kv * d, bias=False), nn.Linear(h, kv * d, bias=False)
        self.gate, self.up = nn.Linear(h, ffn, bias=False), nn.Linear(h, ffn, bias=False)
        self.down = nn.Linear(ffn, h, bias=False)

    @staticmethod
    def rope(x, cos, sin):
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat((-x2, x1), -1) * sin

    def forward(self, x, cos, sin):
        B, S, _ = x.shape
        h = self.attn_norm(x)
        q = self.rope(self.q_norm(self.q(h).view(B, S, self.heads, self.d)).transpose(1, 2), cos, sin)
        k = self.rope(self.k_norm(self.k(h).view(B, S, self.kv, self.d)).transpose(1, 2), cos, sin)
        v = self.v(h).view(B, S, self.kv, self.d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, S, -1))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    """WORKLOADS.md `decoder` (Qwen3-0.6B-shaped), the prefill forward: 28
    layers, hidden 1024, logits through the tied embedding."""

    def __init__(self, layers=28, h=1024, d=128, vocab=151936, seq=512, theta=1e6, eps=1e-6):
        super().__init__()
        self.embed = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(DecoderLayer(h, d=d, eps=eps) for _ in range(layers))
        self.final_norm = nn.RMSNorm(h, eps=eps)
        inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        f = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
        f = torch.cat((f, f), -1)
        self.register_buffer("cos", f.cos().float(), persistent=False)
        self.register_buffer("sin", f.sin().float(), persistent=False)

    def forward(self, ids):
        S = ids.shape[1]
        cos, sin = self.cos[:S].to(self.embed.weight.dtype), self.sin[:S].to(self.embed.weight.dtype)
        x = self.embed(ids)
        for l in self.layers:
            x = l(x, cos, sin)
        return self.final_norm(x) @ self.embed.weight.t()


def build(name, batch, dtype):
    dev = "cuda"
    if name == "mlp":
        m = mlp()
        init_weights(m)
        x = torch.randn(batch, 1024)
    elif name == "encoder":
        m = Encoder()
        init_weights(m)
        x = torch.randint(0, 30000, (batch, 128))
    elif name == "decoder":  # a prefill of 512 tokens
        m = Decoder()
        init_weights(m)
        x = torch.randint(0, 30000, (batch, 512))
    else:
        m = resnet50()
        x = torch.randn(batch, 3, 224, 224)
    m = m.to(dev).eval()
    if dtype != torch.float32:
        m = m.to(dtype)
    x = x.to(dev)
    if x.is_floating_point():
        x = x.to(dtype)
    return m, x


def time_fn(fn, runs, warm=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def capture_graph(m, x):
    """m(x) captured into one CUDA graph after three warm-up calls on a side
    stream (as torch.cuda.graphs asks); returns the graph and its output."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = m(x)
    return g, out


def bench(name, batch, dts, runs, do_compile):
    dtype = DT[dts]
    m, x = build(name, batch, dtype)
    res = {"kind": "torch", "workload": name, "batch": batch, "dtype": dts}
    with torch.inference_mode():
        res["eager_ms"], _ = time_fn(lambda: m(x), runs)
        g, out = capture_graph(m, x)  # eager captured into one CUDA graph
        res["graph_ms"], _ = time_fn(g.replay, runs)
        res["out_abs_mean"] = float(out.float().abs().mean())
        del g
    if do_compile:
        try:
            t0 = time.time()
            cm = torch.compile(m, mode="reduce-overhead")
            with torch.inference_mode():
                for _ in range(5):
                    cm(x)
                res["compile_s"] = time.time() - t0
                res["compile_ms"], _ = time_fn(lambda: cm(x), runs)
        except Exception as e:  # report, do not stop the table
            res["compile_error"] = str(e)[:200]
    print(json.dumps(res), flush=True)


def ceilings():
    n = 1 << 30  # 1 GiB each way
    a = torch.empty(n // 2, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(10):
        b.copy_(a)
    e1.record()
    torch.cuda.synchronize()
    copy_tbs = 2 * n * 10 / (e0.elapsed_time(e1) * 1e-3) / 1e12
    del a, b
    N = 8192
    x = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        x @ y
    torch.cuda.synchronize()
    e0.record()
    for _ in range(10):
        x @ y
    e1.record()
    torch.cuda.synchronize()
    tflops = 2 * N ** 3 * 10 / (e0.elapsed_time(e1) * 1e-3) / 1e12
    print(json.dumps({"kind": "ceiling", "copy_tbs": copy_tbs, "bf16_tflops": tflops,
                      "card": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("cases", nargs="*", help="workload:batch:dtype, e.g. mlp:256:bf16")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if not a.no_ceilings:
        ceilings()
    for c in a.cases:
        w, b, d = c.split(":")
        try:
            bench(w, int(b), d, a.runs, a.compile)
        except Exception as e:
            print(json.dumps({"kind": "torch", "workload": w, "batch": int(b), "dtype": d, "error": str(e)[:300]}),
                  flush=True)
