"""onnx_dynamo.py - the models today's PyTorch exporter writes: the
WORKLOADS.md `encoder` (b1, seq 128) and `resnet50` (b1, 224x224), and a
small Qwen3 decoder from Hugging Face transformers (bench/gpu/onnx_hf.py's,
2 layers, random weights), each exported with
`torch.onnx.export(..., dynamo=True)` (the exporter's default opset, and
opset 20 when asked), then run by `rlx run` on each device and precision
and compared with PyTorch's f32 output on the CPU.

    python3 bench/gpu/onnx_dynamo.py RLX_BIN [cpu,cuda] [OPSET] [RUNS]

Needs PyTorch 2.5 or later with onnx and onnxscript (the exporter's own
needs). Prints, per model, the opset and op types the exporter wrote, then
one line per (device, precision): median latency and max |rlx - torch| /
rms(torch), or the error RLX gave."""
import collections
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cpu"))
sys.path.insert(0, HERE)
import torch_workloads as tw  # noqa: E402


def models():
    """(name, net, example inputs, input names, output name) per model."""
    torch.manual_seed(2)
    out = [("encoder", tw.build("encoder"), (torch.randint(0, 30000, (1, 128)),), ["input_ids"], "out"),
           ("resnet50", tw.build("resnet50"), (torch.randn(1, 3, 224, 224),), ["input"], "out")]
    try:
        import onnx_hf  # transformers
        net, vocab = onnx_hf.build("qwen3")
        net.eval()
        out.append(("qwen3-decoder", net, (torch.randint(0, vocab, (1, 128)),), ["input_ids"], "logits"))
    except ImportError as e:
        print("qwen3-decoder: skipped, transformers is missing (%s)" % e)
    return out


def op_summary(path):
    import onnx
    m = onnx.load(path)
    opsets = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    ops = collections.Counter()

    def walk(g):
        for n in g.node:
            ops[(n.domain + "." if n.domain else "") + n.op_type] += 1
            for a in n.attribute:
                if a.g is not None and a.g.node:
                    walk(a.g)
    walk(m.graph)
    for f in m.functions:  # local functions the exporter may write
        walk(f)
    return opsets, ops, len(m.functions)


def main():
    rlx = sys.argv[1]
    devices = (sys.argv[2] if len(sys.argv) > 2 else "cpu,cuda").split(",")
    opset = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "default" else None
    runs = sys.argv[4] if len(sys.argv) > 4 else "20"
    work = tempfile.mkdtemp(prefix="rlx-dynamo-")
    print("torch %s" % torch.__version__)
    for name, net, args, names, oname in models():
        path = os.path.join(work, name + ".onnx")
        with torch.no_grad():
            ref = net(*args).numpy().astype(np.float64)
        kw = dict(input_names=names, output_names=[oname], dynamo=True)
        if opset:
            kw["opset_version"] = opset
        try:
            torch.onnx.export(net, args, path, **kw)
        except Exception as e:  # the exporter's own failure: not RLX's
            print("%s: export failed: %s" % (name, str(e).splitlines()[0][:300]))
            continue
        opsets, ops, nfun = op_summary(path)
        print("%s: opsets %s, %d nodes, %d local functions; ops %s" % (
            name, opsets, sum(ops.values()), nfun, ", ".join("%s x%d" % kv for kv in sorted(ops.items()))))
        feeds = []
        for i, (n, a) in enumerate(zip(names, args)):
            f = os.path.join(work, "%s_in%d.npy" % (name, i))
            np.save(f, a.numpy())
            feeds += ["--input", "%s=%s" % (n, f)]
        rms = float(np.sqrt((ref ** 2).mean()))
        for dev in devices:
            for prec in ("f32", "f16" if name != "qwen3-decoder" else "bf16") if dev == "cuda" else ("f32",):
                odir = os.path.join(work, "o-%s-%s-%s" % (name, dev, prec))
                os.makedirs(odir, exist_ok=True)
                cmd = [rlx, "run", path, "--device", dev, "--precision", prec, "--repeat", runs,
                       "--output-dir", odir, "--force"] + feeds
                r = subprocess.run(cmd, capture_output=True, text=True)
                lat = re.search(r"latency: median ([0-9.]+) ms", r.stdout + r.stderr)
                if r.returncode != 0 or not lat:
                    print("  %s %s: FAILED (%d): %s" % (dev, prec, r.returncode,
                                                      " | ".join((r.stdout + r.stderr).strip().splitlines()[-3:])))
                    continue
                got = np.load(os.path.join(odir, oname + ".npy")).astype(np.float64)
                print("  %s %s: median %s ms, max |rlx - torch| / rms %.2e" % (
                    dev, prec, lat.group(1), float(np.abs(got - ref).max()) / rms))


if __name__ == "__main__":
    main()
