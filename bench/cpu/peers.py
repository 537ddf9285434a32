#!/usr/bin/python3
"""CPU workloads side by side: RLX (the C-API graph, and the same model
imported from ONNX), ONNX Runtime (onnxruntime-node) and PyTorch, all on the
same weights and inputs, interleaved round by round (A B C D A B C D ...).

usage: bench/cpu/peers.py [--rounds R] [--threads T] [--models mlp,encoder,resnet50]
Needs a Release build in build/ (or RLX_BIN), Debian's python3-torch and
python3-onnx, and onnxruntime-node in ORT_DIR (default /tmp/rlx-ort-peer:
`npm install --ignore-scripts onnxruntime-node@1.30.0` there).

Prints per workload the median of the per-round medians (ms), the ratios
peer / RLX (above 1: RLX is faster), and the largest difference between
RLX's and ONNX Runtime's outputs relative to the output's RMS.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_workloads as tw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RLX = os.environ.get("RLX_BIN", os.path.join(ROOT, "build", "rlx"))
ORT_DIR = os.environ.get("ORT_DIR", "/tmp/rlx-ort-peer")
LAT = re.compile(r"latency: median ([0-9.]+) ms")
GEMM = re.compile(r"cpu gemm: (.*)")
gemm_seen = []  # RLX's "cpu gemm:" line, printed with the table

# (model, batch, repeat per round)
SPECS = {"mlp": (256, 10), "encoder": (1, 20), "resnet50": (1, 5)}


def latency(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = LAT.search(out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit("command failed: %s\n%s%s" % (" ".join(cmd), out.stdout[-2000:], out.stderr[-2000:]))
    g = GEMM.search(out.stdout)
    if g and g.group(1) not in gemm_seen:
        gemm_seen.append(g.group(1))
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="mlp,encoder,resnet50")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    work = tempfile.mkdtemp(prefix="rlx-peers-")
    rows = []
    for name in a.models.split(","):
        batch, repeat = SPECS[name]
        torch.manual_seed(1)
        if name == "mlp":
            net, x, in_name = tw.Mlp(), torch.randn(batch, 1024), "x"
        elif name == "encoder":
            net, x, in_name = tw.Encoder(), torch.randint(0, 30000, (batch, 128)), "input_ids"
        else:
            net, x, in_name = tw.ResNet50(), torch.randn(batch, 3, 224, 224), "image"
        net = tw.normal_(net).eval()
        model = os.path.join(work, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(net, (x,), model, input_names=[in_name], output_names=["out"], opset_version=17)
            ref = net(x).numpy()
        inp = os.path.join(work, name + "_in.npy")
        np.save(inp, x.numpy())
        times = {"rlx": [], "rlx-onnx": [], "ort": [], "torch": []}
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        for _ in range(a.rounds):
            times["rlx"].append(latency([RLX, "run", name, "--batch", str(batch), "--threads", str(a.threads),
                                         "--repeat", str(repeat)]))
            times["rlx-onnx"].append(latency([RLX, "run", model, "--input", "%s=%s" % (in_name, inp), "--threads",
                                              str(a.threads), "--repeat", str(repeat), "--output-dir", work, "--force"]))
            times["ort"].append(latency(["node", os.path.join(ROOT, "bench", "cpu", "ort_time.js"), ORT_DIR, model,
                                         in_name, inp, str(repeat), str(a.threads),
                                         os.path.join(work, name + "_ort.npy")], env))
            times["torch"].append(latency(["/usr/bin/python3", os.path.join(ROOT, "bench", "cpu", "torch_workloads.py"),
                                           name, str(batch), str(repeat), str(a.threads)], env))
        got = np.load(os.path.join(work, "out.npy"))
        ort_out = np.load(os.path.join(work, name + "_ort.npy"))
        rms = float(np.sqrt((ref.astype(np.float64) ** 2).mean()))
        diff_ort = float(np.abs(got - ort_out).max()) / rms
        diff_torch = float(np.abs(got - ref).max()) / rms
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((name + "-b%d" % batch, med, diff_ort, diff_torch))
    print("\nCPU, %d threads, medians of %d interleaved rounds (ms); ratio = peer / rlx" % (a.threads, a.rounds))
    print("RLX's GEMM: %s" % "; ".join(gemm_seen))
    print("%-12s %9s %9s %9s %9s %9s %9s   %s" % ("workload", "rlx", "rlx-onnx", "ort", "torch", "ort/rlx",
                                              "torch/rlx", "max|rlx-onnx - peer| / rms (ort, torch)"))
    for name, m, d1, d2 in rows:
        print("%-12s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f   %.2e, %.2e" % (
            name, m["rlx"], m["rlx-onnx"], m["ort"], m["torch"], m["ort"] / m["rlx"], m["torch"] / m["rlx"], d1, d2))


if __name__ == "__main__":
    main()
