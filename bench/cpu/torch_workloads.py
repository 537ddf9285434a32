#!/usr/bin/python3
"""PyTorch (Debian's python3-torch, CPU) versions of the workloads, timed the
same way `rlx run --repeat` times RLX: one warm-up forward pass, then N
passes, median and min in milliseconds.  build(MODEL) gives the network with
its seeded weights; bench/cpu/peers.py exports the ONNX files from it, so
PyTorch and the ONNX engines run the same weights.

usage: torch_workloads.py MODEL BATCH REPEAT THREADS [--input X.npy] [--output Y.npy]
(without --input: seeded random input of the model's kind)
prints: latency: median X ms, min Y ms over N runs
"""
import argparse
import math
import time

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


def normal_(module):
    for name, p in module.named_parameters():
        with torch.no_grad():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    return module


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(1024, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1024)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


class Layer(nn.Module):
    def __init__(self, h=384, heads=12, ffn=1536):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(h, eps=1e-12), nn.LayerNorm(h, eps=1e-12)
        self.f1, self.f2 = nn.Linear(h, ffn), nn.Linear(ffn, h)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = (m(x).view(b, s, self.heads, d).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1) @ v
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, s, h)))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.pos, self.tok_type = nn.Embedding(30522, 384), nn.Embedding(512, 384), nn.Embedding(2, 384)
        self.ln = nn.LayerNorm(384, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(6))

    def forward(self, ids):
        s = ids.shape[1]
        x = self.word(ids) + self.pos.weight[:s] + self.tok_type.weight[0]
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        return x


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.c1 = nn.Conv2d(cin, width, 1)
        self.c2 = nn.Conv2d(width, width, 3, stride, 1)
        self.c3 = nn.Conv2d(width, cout, 1)
        self.down = nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = self.c3(F.relu(self.c2(F.relu(self.c1(x)))))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    """ResNet-50 v1.5 with BatchNorm folded into the convolutions (conv + bias)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, 2, 3)
        blocks, cin = [], 64
        for s, n in enumerate((3, 4, 6, 3)):
            for b in range(n):
                blocks.append(Bottleneck(cin, 64 << s, 2 if b == 0 and s > 0 else 1))
                cin = (64 << s) * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, 1000)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


MODELS = {"mlp": lambda: Mlp(), "encoder": lambda: Encoder(), "resnet50": lambda: ResNet50()}


def build(model):
    """The workload's network in eval mode, weights seeded as WORKLOADS.md says."""
    if model not in MODELS:
        raise SystemExit("unknown model " + model)
    torch.manual_seed(1)
    return normal_(MODELS[model]()).eval()


def random_input(model, batch):
    torch.manual_seed(2)
    if model == "mlp":
        return torch.randn(batch, 1024)
    if model == "encoder":
        return torch.randint(0, 30000, (batch, 128))
    return torch.randn(batch, 3, 224, 224)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("batch", type=int)
    ap.add_argument("repeat", type=int)
    ap.add_argument("threads", type=int)
    ap.add_argument("--input", help="the input as .npy (its batch wins over BATCH)")
    ap.add_argument("--output", help="write the output of the last run here as .npy")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    net = build(a.model)
    x = torch.from_numpy(np.load(a.input)) if a.input else random_input(a.model, a.batch)
    times = []
    with torch.inference_mode():
        y = net(x)
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            y = net(x)
            times.append((time.perf_counter() - t0) * 1e3)
    if a.output:
        np.save(a.output, y.numpy())
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    print("latency: median %.3f ms, min %.3f ms over %d runs" % (median, times[0], n))


if __name__ == "__main__":
    main()
