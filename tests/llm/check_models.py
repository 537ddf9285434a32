#!/usr/bin/env python3
"""Decoder-LLM parity: every architecture in every checkpoint format, run by
RLX (tests/llm/llm_probe.c, through the public C API) against the float64
NumPy forward of reference.py on the same seeded weights.

    check_models.py PROBE WORKDIR [--quick]

Per model it checks
  - the logits after the prompt and after each of the greedy steps (decoded
    through the KV cache) against the reference forward over the same ids:
    f32 within 1e-4 of the logits' rms, f16/bf16 within their tolerance;
  - the greedy tokens (f32: every one of them) against the reference's own
    greedy generation (full recompute each step);
  - the KV cache against recomputing (llm_probe's kv-recompute line, f32
    within 1e-5) and a batch of three sequences of different lengths
    against each alone (llm_probe's batch line).
Prints one line per model and `N passed, M failed`; exits 1 on a failure.
"""
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "reference.py")
PY = sys.executable

# (architecture, overrides) x formats x dtypes
MODELS = [
    ("llama", []),
    ("llama", ["rope_scaling={\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
               "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":64}"]),
    ("mistral", []),
    ("qwen2", []),
    ("qwen3", []),
    ("qwen3", ["tie_word_embeddings=false"]),
    ("gpt2", []),
]
FORMATS = ["gguf", "safetensors", "safetensors-sharded"]
# logits against the float64 forward, relative to their rms, by compute
# precision (f32 over 64 greedy steps; 16-bit over 8, every op's result
# rounded to 8 or 11 bits)
TOL = {"f32": 1e-4, "bf16": 6e-2, "f16": 1e-2}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def check(probe, work, arch, sets, fmt, dtype, greedy, prompt, precision="f32"):
    tag = f"{arch}{'+' + sets[0].split('=')[0] if sets else ''} {fmt} {dtype}"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", tag)
    if precision != "f32":
        tag += f", computed in {precision}"
        out_name = name + "." + precision
    else:
        out_name = name
    path = os.path.join(work, name + (".gguf" if fmt == "gguf" else ""))
    setargs = [a for s in sets for a in ("--set", s)]
    if not os.path.exists(path):
        run([PY, REF, "write", "--arch", arch, "--format", fmt, "--dtype", dtype, "--seed", "7", "--out", path]
            + setargs)
    ids = ",".join(str(i) for i in prompt)
    out = os.path.join(work, out_name + ".rlx")
    # the weights are stored in `dtype`; RLX computes in f32 from them, so
    # the reference (which rebuilds the same rounded weights) is float64 on
    # identical values and the f32 tolerance holds for every stored dtype
    text = run([probe, path, "--ids", ids, "--greedy", str(greedy), "--precision", precision, "--out", out])
    got = np.load(out + ".npy").astype(np.float64)
    gen = [int(t) for t in open(out + ".ids").read().split(",") if t]
    full = prompt + gen
    refp = os.path.join(work, out_name + ".ref.npy")
    run([PY, REF, "logits", "--model", path, "--ids", ",".join(map(str, full)), "--out", refp])
    ref = np.load(refp).reshape(-1, got.shape[1])[len(prompt) - 1:]
    rms = np.sqrt((ref ** 2).mean(axis=1, keepdims=True))
    err = float((np.abs(got - ref) / rms).max())
    want_ids = gen
    if precision == "f32":  # 16-bit rounding may tip a near tie: tokens are compared in f32
        want = run([PY, REF, "greedy", "--model", path, "--ids", ids, "--n", str(greedy)]).strip()
        want_ids = [int(t) for t in re.findall(r"-?\d+", want)][-greedy:] if greedy else []
    kv = float(re.search(r"kv-recompute: max diff (\S+)", text).group(1))
    bt = re.search(r"batch: max diff (\S+)", text)
    bt = float(bt.group(1)) if bt else 0.0
    problems = []
    if not err <= TOL[precision]:
        problems.append(f"logits differ by {err:.3g} of their rms")
    if gen != want_ids:
        first = next((i for i, (a, b) in enumerate(zip(gen, want_ids)) if a != b), min(len(gen), len(want_ids)))
        problems.append(f"greedy tokens differ from step {first}")
    same = 1e-5 if precision == "f32" else TOL[precision]
    if not kv <= same:
        problems.append(f"KV cache vs recompute {kv:.3g}")
    if not bt <= same:
        problems.append(f"batch vs alone {bt:.3g}")
    status = "FAIL" if problems else "PASS"
    print(f"{status} {tag}: logits {err:.2g}, kv-recompute {kv:.2g}, batch {bt:.2g}, {len(gen)} greedy tokens"
          + (" -- " + "; ".join(problems) if problems else ""), flush=True)
    return not problems


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    probe, work = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    prompt = [int(x) for x in rng.integers(3, 250, size=9)]
    passed = failed = 0
    for arch, sets in MODELS:
        for fmt in FORMATS:
            for dtype in (["f32", "bf16"] if fmt == "gguf" else ["f32", "f16"]):
                if quick and (fmt == "safetensors-sharded" or dtype != "f32"):
                    continue
                try:
                    ok = check(probe, work, arch, sets, fmt, dtype, 64 if dtype == "f32" else 16, prompt)
                except Exception as e:  # a crash or a missing file is a failure with its message
                    print(f"FAIL {arch} {fmt} {dtype}: {e}", flush=True)
                    ok = False
                passed += ok
                failed += not ok
        if not quick:  # computed in 16 bits, from the f32 GGUF
            for precision in ("bf16", "f16"):
                try:
                    ok = check(probe, work, arch, sets, "gguf", "f32", 8, prompt, precision)
                except Exception as e:
                    print(f"FAIL {arch} gguf f32 in {precision}: {e}", flush=True)
                    ok = False
                passed += ok
                failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
