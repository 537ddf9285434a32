#!/usr/bin/python3
"""`rlx quantize` end to end.

    check_quantize.py RLX QUANTIZE_CHECK WORKDIR [--llamacpp] [--cache DIR]

Seeded models (tests/llm/reference.py) written as Hugging Face folders and
as GGUF files: Llama (8 layers, rows of 256, BF16, single safetensors),
Qwen2 (tied embeddings, q/k/v biases, F32, sharded) and a small Llama
(rows of 64: the K types fall back, F16).  Each is quantized to every type,
from GGUF and from safetensors, and checked:
  - the type of every tensor against the rules stated below (and, for the
    8-layer q4_k_m, the layers llama.cpp gives Q6_K written out);
  - QUANTIZE_CHECK (quantize_check.c): the GGUF-made file's bytes are the
    reference quantizer's, its values near the source's, metadata copied;
  - the safetensors-made file holds the same matrices, byte for byte (so
    the names and the q/k permutation agree with reference.py's converter),
    and the metadata llama.cpp's converter writes;
  - it loads and generates through `rlx generate` (text through its
    tokenizer), with last-position logits near the unquantized model's;
  - bad inputs (missing input, unknown type, existing output, an integer
    weight, an unsupported architecture) fail with a clear message and
    leave nothing behind; --force replaces an existing output.
With --llamacpp, instead: llama.cpp itself (node-llama-cpp, fetched by
tests/llm/fetch_llamacpp.sh) quantizes the same GGUF sources with its own
presets, which must pick the same type for every tensor, and loads and
runs RLX's files: argmax equal and logits within 0.1 of their rms of RLX's
(most files agree to 1e-6; both sides round activations for their integer
dot products, and where the two roundings of one value fall on either side
of a level these random models' logits move by up to ~4%).
Exit 77 (with the reason) when llama.cpp cannot be had.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LLM = os.path.join(HERE, "..", "llm")
sys.path.insert(0, HERE)
sys.path.insert(0, LLM)
import gguf_raw  # noqa: E402

REF = os.path.join(LLM, "reference.py")
TYPES = ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"]
BASE = {"q8_0": "Q8_0", "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1", "q4_k": "Q4_K",
        "q5_k": "Q5_K", "q6_k": "Q6_K", "q4_k_m": "Q4_K", "q5_k_m": "Q5_K"}
BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256}
PRESETS = {"q8_0": 7, "q6_k": 18, "q4_k_m": 15, "q5_k_m": 17}  # llama.cpp's file types
BIG = ["--set", "hidden_size=256", "--set", "intermediate_size=512"]
MODELS = [  # name, arch, dtype, safetensors format, overrides, layers
    ("llama8", "llama", "bf16", "safetensors", BIG + ["--set", "num_hidden_layers=8"], 8),
    ("qwen2", "qwen2", "f32", "safetensors-sharded", BIG, 2),
    ("llama64", "llama", "f16", "safetensors", [], 2),
]
PROMPT = [1, 72, 101, 108, 108, 111, 32, 119, 111]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what, flush=True)
    return ok


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env)


def expected_type(name, shape, qtype, n_layers, tied):
    """The rule, restated: matrices named *weight (not norms) are quantized;
    the presets give Q6_K to the output (Q8_0 when its rows do not fill
    256) and, for q4_k_m/q5_k_m, to attn_v and ffn_down of the first and
    last eighth of the layers and every third between; rows that do not
    fill a block fall back K -> 32-block types -> F16."""
    if len(shape) < 2 or not name.endswith("weight") or name.endswith("_norm.weight"):
        return "F32"
    t, row = BASE[qtype], shape[-1]
    if qtype in PRESETS:
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            t = "Q8_0" if row % BLOCK[t] else ("Q6_K" if t != "Q8_0" else t)
        elif qtype in ("q4_k_m", "q5_k_m") and name.startswith("blk."):
            i, n = int(name.split(".")[1]), n_layers
            more = i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2
            if more and ("attn_v.weight" in name or "ffn_down" in name):
                t = "Q6_K"
    if row % BLOCK[t]:
        t = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}.get(t, t)
    return t if row % BLOCK.get(t, 1) == 0 else "F16"


def types_of(path):
    _, meta, t = gguf_raw.read(path)
    return meta, {n: gguf_raw.NAMES[v[1]] for n, v in t.items()}, t


def logits(rlx, model, out):
    if os.path.exists(out):
        os.remove(out)
    r = run([rlx, "generate", model, "--prompt-tokens", ",".join(map(str, PROMPT)), "-n", "0", "--temp", "0",
             "--threads", "2", "--logits", out])
    if not check(r.returncode == 0, "rlx generate %s: %s" % (model, r.stderr[-500:])):
        return None
    return np.load(out).reshape(-1).astype(np.float64)


def make_models(work):
    made = {}
    for name, arch, dtype, fmt, sets, layers in MODELS:
        hf, gg = os.path.join(work, name), os.path.join(work, name + ".gguf")
        for f, path in ((fmt, hf), ("gguf", gg)):
            if not os.path.exists(path):
                r = run([sys.executable, REF, "write", "--arch", arch, "--format", f, "--out", path, "--seed", "3",
                         "--dtype", dtype] + sets)
                if r.returncode:
                    raise SystemExit("reference.py write failed: " + r.stderr[-1000:])
        made[name] = (hf, gg, layers)
    return made


def leftovers(d):
    return [f for f in os.listdir(d) if ".rlx-" in f]


def bad_inputs(rlx, work, made):
    out = os.path.join(work, "bad.gguf")
    hf = made["llama64"][0]

    def refused(args, needle, what):
        r = run([rlx, "quantize"] + args)
        check(r.returncode != 0 and needle in r.stderr, "%s: exit %d, stderr %r" % (what, r.returncode, r.stderr[-300:]))

    refused([os.path.join(work, "missing"), out, "--type", "q8_0"], "missing", "missing input")
    refused([hf, out, "--type", "q3_k"], "unknown quantization type 'q3_k'", "unknown type")
    refused([hf, out], "--type is required", "no type")
    check(not os.path.exists(out), "a refused command left %s" % out)
    with open(out, "w") as f:
        f.write("keep")
    refused([hf, out, "--type", "q8_0"], "exists", "existing output")
    check(open(out).read() == "keep", "an existing output was changed")
    r = run([rlx, "quantize", hf, out, "--type", "q8_0", "--force", "--quiet"])
    check(r.returncode == 0 and open(out, "rb").read(4) == b"GGUF", "--force did not replace: " + r.stderr[-300:])
    os.remove(out)
    # an integer matrix where a weight should be
    sys.path.insert(0, LLM)
    import formats
    bad = os.path.join(work, "int-weight")
    if os.path.exists(bad):
        shutil.rmtree(bad)
    shutil.copytree(hf, bad)
    _, t = None, {}
    for name in ("model.safetensors",):
        os.remove(os.path.join(bad, name))
    tensors = {"model.embed_tokens.weight": np.zeros((256, 64), np.float32),
               "model.layers.0.mlp.up_proj.weight": np.zeros((128, 64), np.int32)}
    formats.write_safetensors(os.path.join(bad, "model.safetensors"), tensors)
    refused([bad, out, "--type", "q4_0"], "I32", "integer weight")
    # an architecture not converted here
    g2 = os.path.join(work, "gpt2")
    if not os.path.exists(g2):
        run([sys.executable, REF, "write", "--arch", "gpt2", "--format", "safetensors", "--out", g2, "--seed", "1"])
    refused([g2, out, "--type", "q8_0"], "not converted", "gpt2 checkpoint")
    check(not os.path.exists(out), "a failed command left %s" % out)
    check(not leftovers(work), "temporary files left: %s" % leftovers(work))


def main_rlx(rlx, checker, work):
    made = make_models(work)
    for name, (hf, gg, layers) in made.items():
        ref_logits = logits(rlx, gg, os.path.join(work, name + ".f.npy"))
        src_meta, _, _ = types_of(gg)
        for qtype in TYPES:
            og, oh = os.path.join(work, "%s.%s.g.gguf" % (name, qtype)), os.path.join(work, "%s.%s.h.gguf" % (name, qtype))
            made_ok = True
            for src, out in ((gg, og), (hf, oh)):
                if os.path.exists(out):
                    os.remove(out)
                r = run([rlx, "quantize", src, out, "--type", qtype, "--quiet"])
                made_ok &= check(r.returncode == 0, "quantize %s %s: %s" % (src, qtype, r.stderr[-500:]))
            if not made_ok:
                continue
            r = run([checker, gg, og])
            check(r.returncode == 0, "quantize_check %s %s:\n%s" % (name, qtype,
                                                                    "\n".join(l for l in r.stdout.splitlines() if "FAIL" in l)))
            mg, tg, rg = types_of(og)
            mh, th, rh = types_of(oh)
            tied = "output.weight" not in tg
            for n, t in tg.items():
                shape = rg[n][0]
                check(t == expected_type(n, shape, qtype, layers, tied),
                      "%s %s: %s is %s, %s expected" % (name, qtype, n, t, expected_type(n, shape, qtype, layers, tied)))
            check(set(th) == set(tg), "%s %s: tensor names differ from safetensors and GGUF" % (name, qtype))
            for n in tg:
                if n in th and tg[n] not in ("F32", "F16"):
                    check(th[n] == tg[n] and rh[n][2] == rg[n][2],
                          "%s %s: %s from safetensors differs from GGUF's" % (name, qtype, n))
            check(mg.get("general.file_type") == mh.get("general.file_type") and mg.get("general.quantization_version") == 2,
                  "%s %s: file type keys" % (name, qtype))
            for k, v in src_meta.items():
                if k not in ("general.name", "general.file_type", "tokenizer.ggml.pre"):
                    check(mh.get(k) == v if not isinstance(v, float) else abs(mh.get(k, 1e9) - v) < 1e-6 * abs(v),
                          "%s %s: metadata %s = %r, reference.py's converter writes %r" % (name, qtype, k, mh.get(k), v))
            if name == "llama8" and qtype == "q4_k_m":  # written out: llama.cpp's layers for 8
                six = sorted(int(n.split(".")[1]) for n, t in th.items() if n.endswith("attn_v.weight") and t == "Q6_K")
                check(six == [0, 3, 6, 7] and th["output.weight"] == "Q6_K" and th["token_embd.weight"] == "Q4_K",
                      "llama8 q4_k_m: attn_v Q6_K layers %s, output %s" % (six, th["output.weight"]))
            if name == "qwen2" and qtype == "q4_k_m":
                check(th["token_embd.weight"] == "Q6_K", "qwen2 q4_k_m: a tied token_embd should be Q6_K")
            if name == "llama64" and qtype == "q4_k":
                check(th["blk.0.attn_q.weight"] == "Q5_0", "llama64 q4_k: rows of 64 should fall back to Q5_0")
            lq = logits(rlx, oh, oh + ".npy")
            if ref_logits is not None and lq is not None:
                rel = np.sqrt(np.mean((lq - ref_logits) ** 2)) / np.sqrt(np.mean(ref_logits ** 2))
                bound = 0.1 if qtype in ("q8_0", "q6_k") else 0.4
                check(np.all(np.isfinite(lq)) and rel < bound, "%s %s: logits %.3g (relative rms) from the "
                      "unquantized model's, bound %g" % (name, qtype, rel, bound))
                print("%-8s %-7s ok  logits rel rms vs unquantized %.4f" % (name, qtype, rel), flush=True)
        r = run([rlx, "generate", os.path.join(work, "%s.q4_k_m.h.gguf" % name), "--prompt", "Hello", "-n", "4",
                 "--temp", "0", "--threads", "2"])
        check(r.returncode == 0 and "Hello" in r.stdout, "%s: generate from text: %s" % (name, r.stderr[-300:]))
    bad_inputs(rlx, work, made)


def main_llamacpp(rlx, work, cache):
    r = subprocess.run(["sh", os.path.join(LLM, "fetch_llamacpp.sh"), cache])
    if r.returncode:
        return 77 if r.returncode == 77 else 1
    import check_llamacpp
    runner, why = check_llamacpp.build_runner(os.path.abspath(cache), os.path.abspath(work))
    if not runner:
        print("skipped: " + why)
        return 77
    env = dict(os.environ, LLAMACPP_LIB=os.path.join(os.path.abspath(cache), "lib"))
    made = make_models(work)
    for name, (hf, gg, layers) in made.items():
        for qtype, ftype in PRESETS.items():
            lc, ours = os.path.join(work, "%s.%s.llamacpp.gguf" % (name, qtype)), os.path.join(work, "%s.%s.h.gguf" % (name, qtype))
            for p in (lc, ours):
                if os.path.exists(p):
                    os.remove(p)
            r = run([runner, gg, "--quantize", str(ftype), lc], env=env)
            if not check(r.returncode == 0, "llama.cpp quantize %s %s: %s" % (name, qtype, r.stderr[-500:])):
                continue
            r = run([rlx, "quantize", hf, ours, "--type", qtype, "--quiet"])
            if not check(r.returncode == 0, "rlx quantize %s %s: %s" % (name, qtype, r.stderr[-500:])):
                continue
            _, tl, _ = types_of(lc)
            _, to, _ = types_of(ours)
            diff = sorted((n, to.get(n), t) for n, t in tl.items() if to.get(n) != t)
            check(not diff, "%s %s: types differ from llama.cpp's (name, rlx, llama.cpp): %s" % (name, qtype, diff[:6]))
            out = os.path.join(work, "lc")
            r = run([runner, ours, "--ids", ",".join(map(str, PROMPT)), "--out", out], env=env)
            if not check(r.returncode == 0, "llama.cpp did not run %s: %s" % (ours, r.stderr[-800:])):
                continue
            a = np.load(out + ".npy")[0].astype(np.float64)
            b = logits(rlx, ours, ours + ".npy")
            if b is None:
                continue
            rel = np.abs(a - b).max() / np.sqrt(np.mean(a * a))
            check(a.argmax() == b.argmax() and rel < 0.1, "%s %s: llama.cpp's logits of RLX's file: argmax %d vs "
                  "RLX %d, max diff %.3g of the rms" % (name, qtype, a.argmax(), b.argmax(), rel))
            print("%-8s %-7s types as llama.cpp's (%d tensors); llama.cpp runs it: argmax %d, max diff %.2g of rms"
                  % (name, qtype, len(tl), a.argmax(), rel), flush=True)
    return 0


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    rlx, checker, work = argv[1], argv[2], argv[3]
    os.makedirs(work, exist_ok=True)
    if "--llamacpp" in argv:
        cache = argv[argv.index("--cache") + 1] if "--cache" in argv else os.environ.get(
            "RLX_LLAMACPP_CACHE", os.path.join(HERE, "..", "..", "third_party_models", "node-llama-cpp"))
        rc = main_llamacpp(rlx, work, cache)
        if rc:
            return rc
    else:
        main_rlx(rlx, checker, work)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
