#!/usr/bin/env python3
"""train_torch.py - the PyTorch peer of bench/train/train_bench.c: the same
models (WORKLOADS.md shapes), the same loss heads, torch.optim.AdamW with
its defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every
param, no clipping), one fixed random batch, weights normal(0, 0.02), biases
0, norm gains 1.

  mlp            batch 256: Linear 1024-4096-4096-1024, GELU between, MSE
                 against a random target
  encoder        batch 32, seq 128: MiniLM-shaped post-LN BERT encoder plus a
                 token-classification head (Linear 384 -> 9 labels) and
                 cross-entropy over every token
  decoder-small  batch 8, seq 128: Qwen3-shaped decoder (8 layers, hidden
                 512, 8/4 heads of 64, q/k RMSNorm, RoPE theta 1e6, SwiGLU
                 1536, tied embeddings, vocab 32000), next-token
                 cross-entropy (labels: the next id, -100 at the last position)

  train_torch.py --workload W --device cpu|cuda --precision f32|bf16|f16
                 [--mode eager|compile] [--warmup 3] [--steps 10]
                 [--repeat 3] [--threads 2] [--batch B] [--seq S]

bf16/f16 run under torch.autocast with f32 params (mixed precision, as RLX's
precision option: no loss scaling).  Every step calls loss.item().  Peak
memory: on CUDA torch.cuda.max_memory_allocated (reset after the warm-up,
so params, grads, AdamW state and the activations of a step); on the CPU the
process's peak RSS (ru_maxrss: the interpreter and torch's libraries
included).  The last line starts "RESULT " and is JSON.
"""
import argparse
import json
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ENC_LABELS = 9


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1024, 4096)
        self.fc2 = nn.Linear(4096, 4096)
        self.fc3 = nn.Linear(4096, 1024)

    def forward(self, x, target):
        y = self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))
        return F.mse_loss(y, target)


def attention(q, k, v, causal):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        S, T = s.shape[-2], s.shape[-1]
        mask = torch.ones(S, T, dtype=torch.bool, device=s.device).triu(T - S + 1)
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, -1) @ v


class EncoderLayer(nn.Module):
    def __init__(self, h, heads, ffn, eps):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln1 = nn.LayerNorm(h, eps=eps)
        self.ffn1 = nn.Linear(h, ffn)
        self.ffn2 = nn.Linear(ffn, h)
        self.ln2 = nn.LayerNorm(h, eps=eps)

    def forward(self, x):
        B, S, H = x.shape
        d = H // self.heads

        def split(t):
            return t.view(B, S, self.heads, d).transpose(1, 2)

        a = attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), False)
        a = self.o(a.transpose(1, 2).reshape(B, S, H))
        x = self.ln1(x + a)
        return self.ln2(x + self.ffn2(F.gelu(self.ffn1(x))))


class Encoder(nn.Module):
    def __init__(self, layers=6, h=384, heads=12, ffn=1536, vocab=30522, max_pos=512, eps=1e-12):
        super().__init__()
        self.word = nn.Embedding(vocab, h)
        self.pos = nn.Embedding(max_pos, h)
        self.tok_type = nn.Embedding(2, h)
        self.ln = nn.LayerNorm(h, eps=eps)
        self.layers = nn.ModuleList(EncoderLayer(h, heads, ffn, eps) for _ in range(layers))
        self.head = nn.Linear(h, ENC_LABELS)

    def forward(self, ids, labels):
        S = ids.shape[1]
        x = self.word(ids) + self.pos.weight[:S] + self.tok_type.weight[:1]
        x = self.ln(x)
        for l in self.layers:
            x = l(x)
        logits = self.head(x)
        return F.cross_entropy(logits.reshape(-1, ENC_LABELS).float(), labels.reshape(-1), ignore_index=-100)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope(x, theta):
    D = x.shape[-1]
    S = x.shape[-2]
    inv = theta ** (-torch.arange(0, D, 2, device=x.device, dtype=torch.float32) / D)
    ang = torch.arange(S, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class DecoderLayer(nn.Module):
    def __init__(self, h, heads, kv, d, ffn, theta, eps):
        super().__init__()
        self.heads, self.kv, self.d, self.theta = heads, kv, d, theta
        self.attn_norm = RMSNorm(h, eps)
        self.q = nn.Linear(h, heads * d, bias=False)
        self.k = nn.Linear(h, kv * d, bias=False)
        self.v = nn.Linear(h, kv * d, bias=False)
        self.q_norm = RMSNorm(d, eps)
        self.k_norm = RMSNorm(d, eps)
        self.o = nn.Linear(heads * d, h, bias=False)
        self.ffn_norm = RMSNorm(h, eps)
        self.gate = nn.Linear(h, ffn, bias=False)
        self.up = nn.Linear(h, ffn, bias=False)
        self.down = nn.Linear(ffn, h, bias=False)

    def forward(self, x):
        B, S, _ = x.shape
        h = self.attn_norm(x)
        q = rope(self.q_norm(self.q(h).view(B, S, self.heads, self.d)).transpose(1, 2), self.theta)
        k = rope(self.k_norm(self.k(h).view(B, S, self.kv, self.d)).transpose(1, 2), self.theta)
        v = self.v(h).view(B, S, self.kv, self.d).transpose(1, 2)
        rep = self.heads // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        a = attention(q, k, v, True).transpose(1, 2).reshape(B, S, self.heads * self.d)
        x = x + self.o(a)
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, layers=8, h=512, heads=8, kv=4, d=64, ffn=1536, vocab=32000, theta=1e6, eps=1e-6):
        super().__init__()
        self.embed = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(DecoderLayer(h, heads, kv, d, ffn, theta, eps) for _ in range(layers))
        self.final_norm = RMSNorm(h, eps)

    def forward(self, ids, labels):
        x = self.embed(ids)
        for l in self.layers:
            x = l(x)
        logits = self.final_norm(x) @ self.embed.weight.t()  # tied
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


def init_params(model):
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            owner = name.split(".")[-2] if "." in name else ""
            if leaf == "bias":
                p.zero_()
            elif leaf == "weight" and (owner.startswith("ln") or owner.endswith("norm")):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def build(name, batch, seq, device):
    g = torch.Generator().manual_seed(11)
    if name == "mlp":
        B = batch or 256
        model = MLP()
        inputs = (torch.randn(B, 1024, generator=g), torch.randn(B, 1024, generator=g))
        return model, inputs, 0, 3 * 2 * B * (1024 * 4096 + 4096 * 4096 + 4096 * 1024)
    if name == "encoder":
        B, S = batch or 32, seq or 128
        model = Encoder()
        ids = torch.randint(0, 30522, (B, S), generator=g)
        labels = torch.randint(0, ENC_LABELS, (B, S), generator=g)
        T, H = B * S, 384
        per_layer = 4 * 2 * T * H * H + 2 * 2 * T * H * 1536 + 2 * 2 * B * S * S * H
        return model, (ids, labels), T, 3 * (6 * per_layer + 2 * T * H * ENC_LABELS)
    if name in ("decoder-small", "decoder"):
        # decoder: the Qwen3-0.6B shape of WORKLOADS.md `decoder`, batch 8, seq 512
        full = name == "decoder"
        B, S = batch or 8, seq or (512 if full else 128)
        L, H, heads, kv, d, F, V = (28, 1024, 16, 8, 128, 3072, 151936) if full else (8, 512, 8, 4, 64, 1536, 32000)
        model = Decoder(L, H, heads, kv, d, F, V)
        ids = torch.randint(0, V, (B, S), generator=g)
        labels = torch.full((B, S), -100, dtype=torch.long)
        labels[:, :-1] = ids[:, 1:]
        T, Q, KV = B * S, heads * d, kv * d
        per_layer = 2 * T * H * (Q + 2 * KV) + 2 * T * Q * H + 3 * 2 * T * H * F + 2 * 2 * B * heads * S * S * d
        return model, (ids, labels), T, 3 * (L * per_layer + 2 * T * H * V)
    raise SystemExit("unknown workload %r (mlp, encoder, decoder-small, decoder)" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--peak-gflops", type=float, default=0)
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cpu":
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    res = {"impl": "torch-" + a.mode, "workload": a.workload, "device": dev.type, "precision": a.precision,
           "torch": torch.__version__}
    try:
        model, inputs, tokens, flops = build(a.workload, a.batch, a.seq, dev)
        init_params(model)
        model.to(dev)
        inputs = tuple(t.to(dev) for t in inputs)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        fn = model
        if a.mode == "compile":
            if not hasattr(torch, "compile"):
                raise RuntimeError("torch %s has no torch.compile" % torch.__version__)
            fn = torch.compile(model)
        amp = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.precision)
        if amp is not None and dev.type == "cpu" and amp != torch.bfloat16:
            raise RuntimeError("torch.autocast on the CPU takes bf16 only")

        def step():
            opt.zero_grad(set_to_none=True)
            if amp is not None:
                with torch.autocast(device_type=dev.type, dtype=amp):
                    loss = fn(*inputs)
            else:
                loss = fn(*inputs)
            loss.backward()
            opt.step()
            return loss.item()

        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        t0 = time.perf_counter()
        first = step()
        res["first_step_s"] = time.perf_counter() - t0  # torch.compile's compile lands here
        loss = first
        for _ in range(a.warmup - 1):
            loss = step()
        sync()
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        rates = []
        for r in range(a.repeat):
            t = time.perf_counter()
            for _ in range(a.steps):
                loss = step()
            sync()
            rates.append(a.steps / (time.perf_counter() - t))
            print("  %s repeat %d: %.3f steps/s (loss %.4f)" % (a.workload, r + 1, rates[-1], loss), flush=True)
        med = statistics.median(rates)
        res.update(steps_per_s=med, tokens_per_s=med * tokens, gflop_per_step=flops / 1e9, first_loss=first,
                   last_loss=loss, rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
        if dev.type == "cuda":
            res["peak_mib"] = torch.cuda.max_memory_allocated() / 1048576.0
        else:
            res["peak_mib"] = res["rss_mib"]
        print("%s  %s  %s  torch %s %s: %.3f steps/s, %.1f GFLOP/s, peak %.1f MiB (%s), loss %.4f -> %.4f" % (
            a.workload, dev.type, a.precision, torch.__version__, a.mode, med, flops * med / 1e9, res["peak_mib"],
            "max_memory_allocated" if dev.type == "cuda" else "ru_maxrss", first, loss))
    except Exception as e:  # a failure is a cell of the table, not the end of the run
        res["error"] = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:200]
        print("error: " + res["error"], file=sys.stderr)
    print("RESULT " + json.dumps(res), flush=True)
    return 1 if "error" in res else 0


if __name__ == "__main__":
    sys.exit(main())
