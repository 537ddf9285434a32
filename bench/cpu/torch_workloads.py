#!/usr/bin/python3
"""PyTorch (Debian's python3-torch, CPU) versions of the workloads, timed the
same way `rlx run --repeat` times RLX: one warm-up forward pass, then N
passes, median and min in milliseconds.

usage: torch_workloads.py MODEL BATCH REPEAT THREADS
prints: latency: median X ms, min Y ms over N runs
"""
import math
import sys
import time

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


def main():
    model, batch, repeat, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    if model == "mlp":
        net, x = Mlp(), torch.randn(batch, 1024)
    elif model == "encoder":
        net, x = Encoder(), torch.randint(0, 30000, (batch, 128))
    elif model == "resnet50":
        net, x = ResNet50(), torch.randn(batch, 3, 224, 224)
    else:
        raise SystemExit("unknown model " + model)
    net = normal_(net).eval()
    times = []
    with torch.inference_mode():
        net(x)
        for _ in range(repeat):
            t0 = time.perf_counter()
            net(x)
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    print("latency: median %.3f ms, min %.3f ms over %d runs" % (median, times[0], n))


if __name__ == "__main__":
    main()
