#!/usr/bin/python3
"""GGUF parity with llama.cpp itself: RLX and llama.cpp (the prebuilt
libllama of node-llama-cpp, fetched by fetch_llamacpp.sh) run the same
seeded GGUF file (reference.py write) on the same prompt ids.

    check_llamacpp.py RLX PROBE WORKDIR [--quick] [--cache DIR] [--table]

RLX is the rlx program (`rlx generate MODEL --prompt-tokens ... -n 0 --temp 0
--logits FILE`: the last prompt position's logits); PROBE is llm_probe (the
greedy tokens through RLX's KV cache, tests/llm/llm_probe.c).  llama.cpp
runs through llamacpp_run.c, compiled here against the fetched headers and
libraries, with an f32 KV cache and flash attention off.

Per model it reports
  argmax   the last prompt position's argmax, equal or not
  top-5    how many of llama.cpp's five highest logits are in RLX's five
  max      max |RLX - llama.cpp| over the vocabulary / rms(llama.cpp logits)
  rms      rms(RLX - llama.cpp) / rms(llama.cpp logits)
  steps    the max diff over the greedy steps both sides took alike
  greedy   the greedy tokens (each side feeding back its own argmax),
           equal over N, or the first step where they part
  ref      llama.cpp against the float64 NumPy forward (reference.py), so a
           difference can be placed on one side
Pass: argmax equal, max and steps within TOL of the dtype (f32: 1e-3 of
the logits' rms), and every greedy token equal.

Where llama.cpp itself departs from exact f32 (measured on these models;
RLX stays within ~1e-6 of the float64 forward in all of them):
  - f16/bf16 weights: RLX widens them to f32; llama.cpp's CPU matmul
    rounds the activations to the weights' type first (its vec_dot type),
    which alone accounts for its 1e-3 (f16) and 1e-2 (bf16) differences:
    with that rounding modeled in the float64 forward they drop to ~3e-7.
    Hence TOL f16 1e-2, bf16 5e-2.
  - gpt2: llama.cpp's CPU GELU reads an f16 table (input and output
    rounded to f16), ~6e-4 of the logits' rms, within the f32 bound; with
    the table modeled the difference drops to ~1e-5.
  - mistral without a sliding window is the same GGUF as llama ('llama'
    architecture, same seeded weights), so its rows repeat llama's.

Exit 0 when all pass, 1 on a failure, 77 (with the reason) when llama.cpp
cannot be fetched or built here.
"""
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skip: NumPy is not installed for this python")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "reference.py")
PY = sys.executable

LLAMA3 = ("rope_scaling={\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
          "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":64}")
H256 = ["hidden_size=256", "intermediate_size=512"]
# llama.cpp's file types (llama_ftype) for the quantized rows
QUANT = {"q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
QUANT_TYPES = list(QUANT)
# (architecture, variant label, --set overrides, dtypes)
MODELS = [
    ("llama", "", [], ["f32", "f16", "bf16"]),
    ("llama", "rope-llama3", [LLAMA3], ["f32"]),
    ("llama", "rope-linear", ["rope_scaling={\"rope_type\":\"linear\",\"factor\":2.0}"], ["f32"]),
    ("mistral", "", [], ["f32", "f16", "bf16"]),
    ("qwen2", "", [], ["f32", "f16", "bf16"]),
    ("qwen3", "", [], ["f32", "f16", "bf16"]),
    ("qwen3", "untied", ["tie_word_embeddings=false"], ["f32"]),
    ("gpt2", "", [], ["f32", "f16", "bf16"]),
    # quantized by llama.cpp's own quantizer from the f32 file, at a width
    # where the _K types' 256-element blocks fit (narrower rows make it
    # fall back to the 32-element types)
    ("llama", "h256", H256, QUANT_TYPES),
    ("qwen2", "h256", H256, ["q8_0", "q4_k_m"]),
    ("qwen3", "h256", H256, ["q8_0", "q4_k_m", "q6_k"]),
    ("gpt2", "h256", ["n_embd=256"], ["q8_0", "q4_0"]),
]
QUICK = {("llama", "f32"), ("mistral", "f32"), ("qwen2", "f32"), ("qwen3", "f32"), ("gpt2", "f32"),
         ("llama", "f16"), ("qwen3", "bf16")}
TOL = {"f32": 1e-3, "f16": 1e-2, "bf16": 5e-2}
GREEDY = {"f32": 64, "f16": 32, "bf16": 32}
# Quantized: the same weights on both sides and the activations quantized
# per block on both, but not always rounded alike (llama.cpp's decode steps
# with the _K types and some of its Q8_0 paths round differently from RLX);
# measured against the forward on the dequantized weights without that
# rounding, each side is off by about 5% of the logits' rms on these models,
# and from each other by as much (Q4_0, Q5_0 and the prompts of Q8_0 and
# Q4_K_M agree to 1e-6).  So: argmax equal, top-5 at least 4 of 5 and
# differences within 0.1 of the rms; the greedy tokens are reported (these
# seeded models have near-ties that such noise can flip) but not required.
for _q in QUANT:
    TOL[_q], GREEDY[_q] = 0.1, 64
QUICK |= {("llama", "q8_0"), ("llama", "q4_k_m"), ("qwen3", "q6_k")}


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r.stdout


def build_runner(cache, work):
    """Compiles llamacpp_run.c against the fetched llama.cpp; (path, reason)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "no C compiler (cc) to build llamacpp_run"
    lib, inc = os.path.join(cache, "lib"), os.path.join(cache, "include")
    names = os.listdir(lib)
    llama = next((n for n in names if re.fullmatch(r"libllama(\.v[0-9.]+)?\.so", n)), None)
    ggml = next((n for n in names if re.fullmatch(r"libggml(\.v[0-9.]+)?\.so", n)), None)
    if not llama or not ggml:
        return None, "%s has no libllama/libggml" % lib
    exe = os.path.join(work, "llamacpp_run")
    src = os.path.join(HERE, "llamacpp_run.c")
    if os.path.exists(exe) and os.path.getmtime(exe) >= max(os.path.getmtime(src), os.path.getmtime(os.path.join(lib, llama))):
        return exe, None
    cmd = [cc, "-O2", "-std=c11", "-I", inc, src, "-o", exe, "-L", lib, "-l:" + llama, "-l:" + ggml,
           "-l:libggml-base.so", "-Wl,-rpath," + lib]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        # the fetched headers and libraries do not fit this toolchain/libc: a
        # property of the machine, not of RLX
        return None, "llamacpp_run did not build against the fetched llama.cpp:\n" + r.stderr[-1500:]
    return exe, None


def first_diff(a, b):
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), None if len(a) == len(b) else n)


def check(tools, work, arch, label, sets, dtype, prompt):
    rlx, probe, runner, env = tools
    tag = arch + ("+" + label if label else "") + " " + dtype
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", tag)
    path = os.path.join(work, name + ".gguf")
    setargs = [a for s in sets for a in ("--set", s)]
    source = path
    if dtype in QUANT:  # llama.cpp quantizes the f32 file
        source = os.path.join(work, re.sub(r"[^A-Za-z0-9_.-]+", "_", tag.rsplit(" ", 1)[0]) + "_f32.gguf")
    if not os.path.exists(source) or os.path.getmtime(source) < os.path.getmtime(REF):
        run([PY, REF, "write", "--arch", arch, "--format", "gguf", "--dtype", "f32" if dtype in QUANT else dtype,
             "--seed", "7", "--out", source] + setargs)
    if dtype in QUANT and (not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(source)):
        run([runner, source, "--quantize", str(QUANT[dtype]), path], env)
    ids = ",".join(str(i) for i in prompt)
    n = GREEDY[dtype]
    # llama.cpp: last prompt position, then n greedy steps through its KV cache
    lc = os.path.join(work, name + ".llamacpp")
    info = run([runner, path, "--ids", ids, "--greedy", str(n), "--threads", "1", "--out", lc], env)
    L = np.load(lc + ".npy").astype(np.float64)
    l_ids = [int(t) for t in open(lc + ".ids").read().strip().split(",") if t]
    # RLX: the CLI's last-position logits, and the greedy steps through llm_probe
    rl = os.path.join(work, name + ".rlx.npy")
    run([rlx, "generate", path, "--prompt-tokens", ids, "-n", "0", "--temp", "0", "--threads", "1",
         "--logits", rl, "--force"])
    R0 = np.load(rl).astype(np.float64).reshape(-1)
    rp = os.path.join(work, name + ".probe")
    run([probe, path, "--ids", ids, "--greedy", str(n), "--out", rp])
    R = np.load(rp + ".npy").astype(np.float64)
    r_ids = [int(t) for t in open(rp + ".ids").read().strip().split(",") if t]
    # the float64 reference on the prompt, to tell which side moved
    fp = os.path.join(work, name + ".ref.npy")
    if dtype in QUANT:  # (the NumPy forward reads no quantized types)
        F = np.full(L.shape[1], np.nan)
    else:
        run([PY, REF, "logits", "--model", path, "--ids", ids, "--out", fp])
        F = np.load(fp).astype(np.float64).reshape(-1, L.shape[1])[-1]

    l0 = L[0]
    rms = float(np.sqrt((l0 ** 2).mean()))
    d = R0 - l0
    mx, rd = float(np.abs(d).max()) / rms, float(np.sqrt((d ** 2).mean())) / rms
    am = int(np.argmax(R0)) == int(np.argmax(l0))
    top5 = len(set(np.argsort(-R0)[:5].tolist()) & set(np.argsort(-l0)[:5].tolist()))
    fd = first_diff(r_ids, l_ids)
    same = fd if fd is not None else n  # steps fed identical tokens on both sides
    srms = np.sqrt((L[:same + 1] ** 2).mean(axis=1))
    steps = float((np.abs(R[:same + 1] - L[:same + 1]).max(axis=1) / srms).max())
    ref_l = float(np.abs(l0 - F).max()) / rms
    ref_r = float(np.abs(R0 - F).max()) / rms
    probe_cli = float(np.abs(R[0] - R0).max()) / rms
    problems = []
    if not am:
        problems.append("argmax differs (RLX %d, llama.cpp %d)" % (int(np.argmax(R0)), int(np.argmax(l0))))
    if not mx <= TOL[dtype]:
        problems.append("max diff %.3g > %g of the rms" % (mx, TOL[dtype]))
    if not steps <= TOL[dtype]:
        problems.append("greedy steps' logits differ by %.3g" % steps)
    if dtype in QUANT and top5 < 4:
        problems.append("top-5 overlap %d/5" % top5)
    if fd is not None and dtype not in QUANT:
        problems.append("greedy tokens part at step %d (RLX %s, llama.cpp %s)"
                        % (fd, r_ids[fd] if fd < len(r_ids) else "-", l_ids[fd] if fd < len(l_ids) else "-"))
    if not probe_cli <= 1e-5:
        problems.append("rlx generate and llm_probe disagree by %.3g" % probe_cli)
    greedy = "%d/%d equal" % (n, n) if fd is None else "part at %d" % fd
    row = dict(model=tag, argmax="equal" if am else "DIFF", top5="%d/5" % top5, max=mx, rms=rd, steps=steps,
               greedy=greedy, ref_l=ref_l, ref_r=ref_r, ok=not problems)
    print("%s %s: argmax %s, top-5 %d/5, max diff %.2g, rms diff %.2g, steps %.2g, greedy %s; vs float64: "
          "llama.cpp %.2g, RLX %.2g%s" % ("PASS" if not problems else "FAIL", tag, row["argmax"], top5, mx, rd,
                                          steps, greedy, ref_l, ref_r,
                                          (" -- " + "; ".join(problems)) if problems else ""), flush=True)
    return row, info


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    quick, table = "--quick" in argv, "--table" in argv
    cache = None
    if "--cache" in argv:
        cache = argv[argv.index("--cache") + 1]
        args.remove(cache)
    if len(args) < 3:
        print(__doc__)
        return 2
    rlx, probe, work = args[:3]
    cache = cache or os.environ.get("RLX_LLAMACPP_CACHE") or os.path.join(HERE, "..", "..", "third_party_models",
                                                                        "node-llama-cpp")
    r = subprocess.run(["sh", os.path.join(HERE, "fetch_llamacpp.sh"), cache])
    if r.returncode != 0:
        return 77 if r.returncode == 77 else 1
    cache = os.path.abspath(cache)
    os.makedirs(work, exist_ok=True)
    runner, why = build_runner(cache, os.path.abspath(work))
    if not runner:
        print("skipped: " + why)
        return 77
    env = dict(os.environ, LLAMACPP_LIB=os.path.join(cache, "lib"))
    try:
        commit = open(os.path.join(cache, "LLAMA_CPP_COMMIT")).read().strip()
        version = open(os.path.join(cache, "VERSION")).read().strip()
    except OSError:
        commit = version = "?"
    print("llama.cpp %s (node-llama-cpp %s), f32 KV cache, flash attention off, 1 thread" % (commit[:12], version))
    rng = np.random.default_rng(5)
    prompt = [int(x) for x in rng.integers(3, 250, size=9)]
    print("prompt ids: " + ",".join(map(str, prompt)), flush=True)
    rows, passed, failed, info = [], 0, 0, ""
    for arch, label, sets, dtypes in MODELS:
        for dtype in dtypes:
            if quick and ((label and dtype not in QUANT) or (arch, dtype) not in QUICK):
                continue
            try:
                row, info = check((rlx, probe, runner, env), work, arch, label, sets, dtype, prompt)
                rows.append(row)
                ok = row["ok"]
            except Exception as e:  # a crash or a missing file is a failure with its message
                print("FAIL %s %s: %s" % (arch + ("+" + label if label else ""), dtype, e), flush=True)
                ok = False
            passed += ok
            failed += not ok
    if info:
        print(info.strip())
    if table:
        print("\n| model | argmax | top-5 | max diff / rms | rms diff / rms | greedy steps max diff | greedy tokens |"
              " llama.cpp vs float64 | RLX vs float64 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %s | %s | %.2g | %.2g | %.2g | %s | %.2g | %.2g |" % (
                r["model"], r["argmax"], r["top5"], r["max"], r["rms"], r["steps"], r["greedy"], r["ref_l"], r["ref_r"]))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
