#!/usr/bin/python3
"""Seeded small decoder models and an independent float64 NumPy forward.

Architectures (Hugging Face class names):
  llama    LlamaForCausalLM     RMSNorm, SwiGLU, RoPE (rotate_half), GQA
  mistral  MistralForCausalLM   the same, with an optional sliding window
  qwen2    Qwen2ForCausalLM     + q/k/v biases
  qwen3    Qwen3ForCausalLM     + per-head RMSNorm of q and k before RoPE
  gpt2     GPT2LMHeadModel      learned positions, LayerNorm with bias,
                                 GELU (tanh form), Conv1D weights [in, out]

The library side:
  make_config(arch, **overrides) -> HF-style config dict (small sizes)
  make_weights(config, seed)     -> {HF tensor name: float32 array}
  forward(config, weights, ids)  -> float64 logits [B, S, V]
  greedy(config, weights, prompt_ids, n) -> generated ids (full recompute)
  to_gguf(config, weights)       -> (metadata, tensors) named as llama.cpp's
                                    converter names them (q/k rows permuted
                                    for 'llama')
  forward_gguf(metadata, tensors, ids) -> float64 logits computed the way
                                    llama.cpp reads the file (interleaved
                                    RoPE for 'llama', NeoX for the others)
  tokenizer_json(config)         -> the HF tokenizer.json of the byte vocab

GGUF metadata is a list of (key, type name, value) as tests/llm/formats.py's
write_gguf takes it: type names are the GGUF value types ('uint32',
'float32', 'string', 'bool', ...); an array is ('array', (element type,
items)).

The vocabulary: id i < 256 is the single byte i, written as GPT-2's
bytes_to_unicode() character for it; ids from 256 up (when vocab_size is
larger) are control tokens '<|extra_N|>'.  bos and eos are ids 1 and 2.

The command line:
  reference.py write --arch A --format gguf|safetensors|safetensors-sharded
                     --out PATH --seed N [--dtype f32|f16|bf16] [--set key=json]
  reference.py logits --model ARCH|PATH --ids 1,2,3[;4,5,6] --out logits.npy
  reference.py greedy --model ARCH|PATH --ids 1,2,3 --n 8   (prints the new ids)
  (--text "..." in place of --ids: the UTF-8 bytes, after bos for llama/mistral)
  reference.py selftest

`write` leaves a description beside the model (PATH.ref.json for a GGUF
file, rlx_reference.json in a safetensors folder); `logits` and `greedy`
given that PATH rebuild the same weights from config and seed, rounded to
the dtype as stored, so nothing is read back from the model file.  Given an
architecture name instead, they take --seed, --dtype, --format and --set.

Exit status 77 (skip) when NumPy is missing.
"""
import argparse
import json
import math
import os
import sys

try:
    import numpy as np
except ImportError:
    print("skip: NumPy is not installed for /usr/bin/python3 (apt-get install python3-numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))

ARCHS = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}
CLASS_TO_ARCH = {v: k for k, v in ARCHS.items()}
GGUF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gpt2": "gpt2"}
BOS_ID, EOS_ID = 1, 2

# --------------------------------------------------------------- configs


def make_config(arch, **overrides):
    """An HF-style config dict for a small model of `arch`.  Keyword
    overrides replace (or add) fields; rope_scaling may be None,
    {"rope_type": "linear", "factor": f} or {"rope_type": "llama3", ...}
    (missing llama3 fields get values that matter at these sizes)."""
    if arch not in ARCHS:
        raise ValueError("unknown architecture %r (one of %s)" % (arch, ", ".join(ARCHS)))
    if arch == "gpt2":
        cfg = {
            "architectures": [ARCHS[arch]], "model_type": "gpt2",
            "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "n_ctx": 128, "n_inner": None,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "vocab_size": 256,
            "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "tie_word_embeddings": True,
            "scale_attn_weights": True, "torch_dtype": "float32",
        }
    else:
        cfg = {
            "architectures": [ARCHS[arch]], "model_type": arch,
            "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
            "vocab_size": 256, "max_position_embeddings": 128, "tie_word_embeddings": False,
            "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "torch_dtype": "float32",
        }
        if arch == "mistral":
            cfg["sliding_window"] = None
        if arch in ("qwen2", "qwen3"):
            cfg.update(rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                       use_sliding_window=False, sliding_window=None)
        if arch == "qwen2":
            cfg["attention_bias"] = True  # Qwen2 always has q/k/v biases
        if arch == "qwen3":
            cfg["head_dim"] = 32  # unlike hidden / heads, as in the real models
    cfg.update(overrides)
    if arch != "gpt2" and "head_dim" not in overrides and ("hidden_size" in overrides or "num_attention_heads" in overrides):
        if arch != "qwen3":
            cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    rs = cfg.get("rope_scaling")
    if rs is not None:
        rs = dict(rs)
        kind = rs.get("rope_type", rs.get("type"))
        rs["rope_type"] = kind
        if kind == "llama3":
            rs.setdefault("factor", 8.0)
            rs.setdefault("low_freq_factor", 1.0)
            rs.setdefault("high_freq_factor", 4.0)
            rs.setdefault("original_max_position_embeddings", 64)
        elif kind == "linear":
            rs.setdefault("factor", 2.0)
        else:
            raise ValueError("rope_scaling type %r is not supported" % kind)
        cfg["rope_scaling"] = rs
    return cfg


def arch_of(cfg):
    return CLASS_TO_ARCH[cfg["architectures"][0]]


def dims(cfg):
    """(hidden, layers, heads, kv heads, head_dim, ffn, eps) for any arch."""
    if arch_of(cfg) == "gpt2":
        h = cfg["n_embd"]
        return h, cfg["n_layer"], cfg["n_head"], cfg["n_head"], h // cfg["n_head"], cfg.get("n_inner") or 4 * h, \
            cfg["layer_norm_epsilon"]
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    return h, cfg["num_hidden_layers"], nh, cfg.get("num_key_value_heads") or nh, cfg.get("head_dim") or h // nh, \
        cfg["intermediate_size"], cfg["rms_norm_eps"]


# --------------------------------------------------------------- weights


def make_weights(cfg, seed):
    """{HF tensor name: float32 array}, seeded.  Projections ~ N(0, 0.7^2/in)
    so activations stay O(1); embeddings (and lm_head) ~ N(0, 2^2/hidden)
    so logits spread over a few units; norm weights 1 + N(0, 0.1^2); biases
    N(0, 0.1^2)."""
    rng = np.random.default_rng(seed)
    arch = arch_of(cfg)
    H, L, nh, nkv, hd, F, _ = dims(cfg)
    V = cfg["vocab_size"]
    w = {}

    def proj(out_dim, in_dim):
        return rng.standard_normal((out_dim, in_dim)) * (0.7 / math.sqrt(in_dim))

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    def bias(n):
        return 0.1 * rng.standard_normal(n)

    if arch == "gpt2":
        w["transformer.wte.weight"] = rng.standard_normal((V, H)) * (2.0 / math.sqrt(H))
        w["transformer.wpe.weight"] = rng.standard_normal((cfg["n_positions"], H)) * 0.3
        for i in range(L):
            p = "transformer.h.%d." % i
            w[p + "ln_1.weight"], w[p + "ln_1.bias"] = norm(H), bias(H)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = proj(3 * H, H).T, bias(3 * H)  # Conv1D: [in, out]
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = proj(H, H).T, bias(H)
            w[p + "ln_2.weight"], w[p + "ln_2.bias"] = norm(H), bias(H)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = proj(F, H).T, bias(F)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = proj(H, F).T, bias(H)
        w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = norm(H), bias(H)
        if not cfg.get("tie_word_embeddings", True):
            w["lm_head.weight"] = rng.standard_normal((V, H)) * (2.0 / math.sqrt(H))
    else:
        qkv_bias = cfg.get("attention_bias", False)
        w["model.embed_tokens.weight"] = rng.standard_normal((V, H)) * (2.0 / math.sqrt(H))
        for i in range(L):
            p = "model.layers.%d." % i
            w[p + "input_layernorm.weight"] = norm(H)
            w[p + "self_attn.q_proj.weight"] = proj(nh * hd, H)
            w[p + "self_attn.k_proj.weight"] = proj(nkv * hd, H)
            w[p + "self_attn.v_proj.weight"] = proj(nkv * hd, H)
            if qkv_bias:
                w[p + "self_attn.q_proj.bias"] = bias(nh * hd)
                w[p + "self_attn.k_proj.bias"] = bias(nkv * hd)
                w[p + "self_attn.v_proj.bias"] = bias(nkv * hd)
            if arch == "qwen3":
                w[p + "self_attn.q_norm.weight"] = norm(hd)
                w[p + "self_attn.k_norm.weight"] = norm(hd)
            w[p + "self_attn.o_proj.weight"] = proj(H, nh * hd)
            if arch in ("llama", "mistral") and qkv_bias:
                w[p + "self_attn.o_proj.bias"] = bias(H)  # Llama's attention_bias covers o_proj too
            w[p + "post_attention_layernorm.weight"] = norm(H)
            w[p + "mlp.gate_proj.weight"] = proj(F, H)
            w[p + "mlp.up_proj.weight"] = proj(F, H)
            w[p + "mlp.down_proj.weight"] = proj(H, F)
        w["model.norm.weight"] = norm(H)
        if not cfg.get("tie_word_embeddings", False):
            w["lm_head.weight"] = rng.standard_normal((V, H)) * (2.0 / math.sqrt(H))
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


def round_to(a, dtype):
    """float32 array rounded to f16 or bf16 (round to nearest even) and
    widened back to float32."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "f32":
        return a
    if dtype == "f16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        u = a.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return u.astype(np.uint32).view(np.float32)
    raise ValueError("dtype %r (f32, f16 or bf16)" % dtype)


def stored_weights(cfg, seed, dtype="f32", fmt="safetensors"):
    """The weights as a file of that dtype and format holds them: every
    tensor in dtype for safetensors; for GGUF, 1-D tensors (norms, biases)
    stay f32 as llama.cpp's converter keeps them."""
    w = make_weights(cfg, seed)
    keep_1d = fmt == "gguf"
    return {k: (v if (keep_1d and v.ndim == 1) else round_to(v, dtype)) for k, v in w.items()}


# --------------------------------------------------------------- math


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def layer_norm(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def inv_freq(head_dim, theta, scaling):
    """HF's rotary inverse frequencies [head_dim / 2], with linear or
    llama3 scaling."""
    f = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    if scaling is None:
        return f
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        return f / scaling["factor"]
    if kind == "llama3":
        return f / llama3_factors(head_dim, theta, scaling)
    raise ValueError("rope scaling %r" % kind)


def llama3_factors(head_dim, theta, scaling):
    """The divisor of each frequency under llama3 scaling: `factor` for long
    wavelengths, 1 for short ones, a smooth blend between (the values
    llama.cpp keeps in rope_freqs.weight)."""
    f = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2.0 * math.pi / f
    out = np.empty_like(f)
    for i, wl in enumerate(wavelen):
        if wl < old / hi:
            out[i] = 1.0
        elif wl > old / lo:
            out[i] = factor
        else:
            s = (old / wl - lo) / (hi - lo)
            out[i] = 1.0 / ((1.0 - s) / factor + s)
    return out


def rope_half(x, pos, freqs):
    """HF's form: x [..., S, D] rotated with pairs (i, i + D/2)."""
    ang = pos[:, None] * freqs[None, :]  # [S, D/2]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


def rope_interleaved(x, pos, freqs):
    """llama.cpp's 'normal' form: pairs (2i, 2i + 1)."""
    ang = pos[:, None] * freqs[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def attention(q, k, v, window=None):
    """q [B, nh, S, D], k/v [B, nkv, S, D]; causal; query head h reads kv head
    h // (nh / nkv) (HF's repeat_kv, llama.cpp's broadcast); window: keys
    at distance >= window are masked (Mistral's sliding window)."""
    nh, nkv = q.shape[1], k.shape[1]
    if nh % nkv:
        raise ValueError("%d heads not a multiple of %d kv heads" % (nh, nkv))
    k = np.repeat(k, nh // nkv, axis=1)
    v = np.repeat(v, nh // nkv, axis=1)
    S = q.shape[2]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    masked = j > i
    if window:
        masked = masked | (i - j >= window)
    s = np.where(masked, -np.inf, s)
    return softmax(s) @ v


def _heads(x, n, d):
    B, S, _ = x.shape
    return x.reshape(B, S, n, d).transpose(0, 2, 1, 3)


def _merge(x):
    B, n, S, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, S, n * d)


# --------------------------------------------------------------- forward


def forward(cfg, weights, ids):
    """float64 logits [B, S, V] for ids [B, S] (a list or array), from the
    HF-named weights."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim == 1:
        ids = ids[None]
    W = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    arch = arch_of(cfg)
    H, L, nh, nkv, hd, F, eps = dims(cfg)
    B, S = ids.shape
    if arch == "gpt2":
        x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][np.arange(S)][None]
        for i in range(L):
            p = "transformer.h.%d." % i
            h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
            qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
            q, k, v = (_heads(t, nh, hd) for t in np.split(qkv, 3, axis=-1))
            x = x + _merge(attention(q, k, v)) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
            h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
            m = gelu_new(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
            x = x + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
        x = layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
        head = W.get("lm_head.weight", W["transformer.wte.weight"])
        return x @ head.T
    freqs = inv_freq(hd, cfg["rope_theta"], cfg.get("rope_scaling"))
    pos = np.arange(S, dtype=np.float64)
    window = cfg.get("sliding_window") if arch == "mistral" else None

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    x = W["model.embed_tokens.weight"][ids]
    for i in range(L):
        p = "model.layers.%d." % i
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = _heads(lin(h, p + "self_attn.q_proj"), nh, hd)
        k = _heads(lin(h, p + "self_attn.k_proj"), nkv, hd)
        v = _heads(lin(h, p + "self_attn.v_proj"), nkv, hd)
        if arch == "qwen3":
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope_half(q, pos, freqs), rope_half(k, pos, freqs)
        x = x + lin(_merge(attention(q, k, v, window)), p + "self_attn.o_proj")
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        m = silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj")
        x = x + lin(m, p + "mlp.down_proj")
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


def greedy(cfg, weights, prompt_ids, n, stop_at_eos=False):
    """n ids after prompt_ids, each the argmax (lowest id on ties) of a full
    recompute over everything so far."""
    ids = [int(t) for t in prompt_ids]
    out = []
    for _ in range(n):
        t = int(np.argmax(forward(cfg, weights, [ids])[0, -1]))
        out.append(t)
        ids.append(t)
        if stop_at_eos and t == cfg.get("eos_token_id"):
            break
    return out


# --------------------------------------------------------------- tokenizer


def bytes_to_unicode():
    """GPT-2's byte -> printable character map: printable Latin-1 bytes map
    to themselves, the others to U+0100 upwards in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def vocab_tokens(vocab_size):
    """(token strings, GGUF token types) for ids 0 .. vocab_size - 1."""
    b2u = bytes_to_unicode()
    toks = [b2u[i] for i in range(min(256, vocab_size))]
    types = [1] * len(toks)  # normal
    for i in range(256, vocab_size):
        toks.append("<|extra_%d|>" % (i - 256))
        types.append(3)  # control
    return toks, types


def add_bos(cfg):
    return arch_of(cfg) in ("llama", "mistral")


def tokenizer_json(cfg):
    """HF tokenizer.json for the byte vocab: byte-level BPE without merges."""
    toks, types = vocab_tokens(cfg["vocab_size"])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, (t, ty) in enumerate(zip(toks, types)) if ty == 3]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    post = byte_level
    if add_bos(cfg):
        bos = toks[cfg["bos_token_id"]]
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [cfg["bos_token_id"]], "tokens": [bos]}}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": byte_level, "post_processor": post, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(toks)}, "merges": []},
    }


def encode(cfg, text):
    """The ids of text in the byte vocab: its UTF-8 bytes, after bos for
    the models whose tokenizer adds one (llama, mistral)."""
    return ([cfg["bos_token_id"]] if add_bos(cfg) else []) + list(text.encode("utf-8"))


def tokenizer_config(cfg):
    toks, _ = vocab_tokens(cfg["vocab_size"])
    return {"add_bos_token": add_bos(cfg), "add_eos_token": False, "bos_token": toks[cfg["bos_token_id"]],
            "eos_token": toks[cfg["eos_token_id"]], "model_max_length": max_positions(cfg),
            "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}


def max_positions(cfg):
    return cfg["n_positions"] if arch_of(cfg) == "gpt2" else cfg["max_position_embeddings"]


# --------------------------------------------------------------- GGUF


def permute_qk(w, n_head):
    """llama.cpp's convert_hf_to_gguf permute for q_proj/k_proj of 'llama':
    within each head, rows (i, i + D/2) become (2i, 2i + 1), so RoPE on
    adjacent pairs equals HF's rotate_half.  k uses the kv head count."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_gguf(cfg, weights):
    """(metadata, tensors) for a GGUF file as llama.cpp's converter writes
    one.  Tensors keep NumPy's [out, in] order (the writer reverses the
    dims into GGUF's ne order)."""
    arch = arch_of(cfg)
    ga = GGUF_ARCH[arch]
    H, L, nh, nkv, hd, F, eps = dims(cfg)
    meta = [("general.architecture", "string", ga), ("general.name", "string", "rlx-reference-" + arch),
            ("%s.context_length" % ga, "uint32", max_positions(cfg)),
            ("%s.embedding_length" % ga, "uint32", H), ("%s.block_count" % ga, "uint32", L),
            ("%s.feed_forward_length" % ga, "uint32", F), ("%s.attention.head_count" % ga, "uint32", nh)]
    t = {}
    if arch == "gpt2":
        meta.append(("gpt2.attention.layer_norm_epsilon", "float32", eps))
        t["token_embd.weight"] = weights["transformer.wte.weight"]
        t["position_embd.weight"] = weights["transformer.wpe.weight"]
        for i in range(L):
            p, b = "transformer.h.%d." % i, "blk.%d." % i
            for hf, gg in (("ln_1", "attn_norm"), ("ln_2", "ffn_norm")):
                t[b + gg + ".weight"], t[b + gg + ".bias"] = weights[p + hf + ".weight"], weights[p + hf + ".bias"]
            for hf, gg in (("attn.c_attn", "attn_qkv"), ("attn.c_proj", "attn_output"),
                           ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down")):
                t[b + gg + ".weight"] = np.ascontiguousarray(weights[p + hf + ".weight"].T)  # Conv1D -> [out, in]
                t[b + gg + ".bias"] = weights[p + hf + ".bias"]
        t["output_norm.weight"], t["output_norm.bias"] = weights["transformer.ln_f.weight"], weights["transformer.ln_f.bias"]
        if "lm_head.weight" in weights:
            t["output.weight"] = weights["lm_head.weight"]
    else:
        meta += [("%s.attention.head_count_kv" % ga, "uint32", nkv),
                 ("%s.rope.freq_base" % ga, "float32", float(cfg["rope_theta"])),
                 ("%s.rope.dimension_count" % ga, "uint32", hd),
                 ("%s.attention.layer_norm_rms_epsilon" % ga, "float32", eps),
                 ("%s.vocab_size" % ga, "uint32", cfg["vocab_size"])]
        if hd != H // nh:
            meta += [("%s.attention.key_length" % ga, "uint32", hd), ("%s.attention.value_length" % ga, "uint32", hd)]
        if cfg.get("sliding_window") and arch == "mistral":
            # not written by llama.cpp's converter for Mistral (its 'llama'
            # graph has no window); the key llama.cpp uses for other models
            meta.append(("%s.attention.sliding_window" % ga, "uint32", cfg["sliding_window"]))
        rs = cfg.get("rope_scaling")
        if rs and rs["rope_type"] == "linear":
            meta += [("%s.rope.scaling.type" % ga, "string", "linear"),
                     ("%s.rope.scaling.factor" % ga, "float32", float(rs["factor"]))]
        elif rs and rs["rope_type"] == "llama3":
            # llama.cpp's converter stores the per-frequency divisors as a tensor
            t["rope_freqs.weight"] = llama3_factors(hd, cfg["rope_theta"], rs).astype(np.float32)
        permute = ga == "llama"
        t["token_embd.weight"] = weights["model.embed_tokens.weight"]
        names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                 "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
                 "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
        for i in range(L):
            p, b = "model.layers.%d." % i, "blk.%d." % i
            for hf, gg in names.items():
                for kind in ("weight", "bias"):
                    key = p + hf + "." + kind
                    if key not in weights:
                        continue
                    a = weights[key]
                    if permute and hf == "self_attn.q_proj":
                        a = permute_qk(a, nh)
                    elif permute and hf == "self_attn.k_proj":
                        a = permute_qk(a, nkv)
                    t[b + gg + "." + kind] = np.ascontiguousarray(a)
        t["output_norm.weight"] = weights["model.norm.weight"]
        if "lm_head.weight" in weights:
            t["output.weight"] = weights["lm_head.weight"]
    toks, types = vocab_tokens(cfg["vocab_size"])
    meta += [("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.pre", "string", "default"),
             ("tokenizer.ggml.tokens", "array", ("string", toks)),
             ("tokenizer.ggml.token_type", "array", ("int32", types)),
             ("tokenizer.ggml.merges", "array", ("string", [])),
             ("tokenizer.ggml.bos_token_id", "uint32", cfg["bos_token_id"]),
             ("tokenizer.ggml.eos_token_id", "uint32", cfg["eos_token_id"]),
             ("tokenizer.ggml.add_bos_token", "bool", add_bos(cfg))]
    return meta, t


def forward_gguf(meta, tensors, ids):
    """float64 logits [B, S, V] from GGUF metadata and tensors alone, the
    way llama.cpp computes them: adjacent-pair RoPE for 'llama' (on the
    permuted q/k rows), NeoX (rotate_half) RoPE for qwen2/qwen3."""
    m = {k: v for k, _, v in meta}
    ga = m["general.architecture"]
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim == 1:
        ids = ids[None]
    T = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
    H, L, nh = m[ga + ".embedding_length"], m[ga + ".block_count"], m[ga + ".attention.head_count"]
    B, S = ids.shape
    head = T.get("output.weight", T["token_embd.weight"])
    if ga == "gpt2":
        eps, hd = m["gpt2.attention.layer_norm_epsilon"], H // nh
        x = T["token_embd.weight"][ids] + T["position_embd.weight"][np.arange(S)][None]
        for i in range(L):
            b = "blk.%d." % i
            h = layer_norm(x, T[b + "attn_norm.weight"], T[b + "attn_norm.bias"], eps)
            qkv = h @ T[b + "attn_qkv.weight"].T + T[b + "attn_qkv.bias"]
            q, k, v = (_heads(t, nh, hd) for t in np.split(qkv, 3, axis=-1))
            x = x + _merge(attention(q, k, v)) @ T[b + "attn_output.weight"].T + T[b + "attn_output.bias"]
            h = layer_norm(x, T[b + "ffn_norm.weight"], T[b + "ffn_norm.bias"], eps)
            u = gelu_new(h @ T[b + "ffn_up.weight"].T + T[b + "ffn_up.bias"])
            x = x + u @ T[b + "ffn_down.weight"].T + T[b + "ffn_down.bias"]
        x = layer_norm(x, T["output_norm.weight"], T["output_norm.bias"], eps)
        return x @ head.T
    nkv = m.get(ga + ".attention.head_count_kv", nh)
    hd = m.get(ga + ".attention.key_length", H // nh)
    eps = m[ga + ".attention.layer_norm_rms_epsilon"]
    base = m[ga + ".rope.freq_base"]
    freqs = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    if m.get(ga + ".rope.scaling.type") == "linear":
        freqs = freqs / m[ga + ".rope.scaling.factor"]
    if "rope_freqs.weight" in T:
        freqs = freqs / T["rope_freqs.weight"]
    rope = rope_interleaved if ga == "llama" else rope_half
    pos = np.arange(S, dtype=np.float64)

    def lin(x, name):
        y = x @ T[name + ".weight"].T
        return y + T[name + ".bias"] if name + ".bias" in T else y

    x = T["token_embd.weight"][ids]
    for i in range(L):
        b = "blk.%d." % i
        h = rms_norm(x, T[b + "attn_norm.weight"], eps)
        q = _heads(lin(h, b + "attn_q"), nh, hd)
        k = _heads(lin(h, b + "attn_k"), nkv, hd)
        v = _heads(lin(h, b + "attn_v"), nkv, hd)
        if b + "attn_q_norm.weight" in T:
            q = rms_norm(q, T[b + "attn_q_norm.weight"], eps)
            k = rms_norm(k, T[b + "attn_k_norm.weight"], eps)
        q, k = rope(q, pos, freqs), rope(k, pos, freqs)
        x = x + lin(_merge(attention(q, k, v, m.get(ga + ".attention.sliding_window"))), b + "attn_output")
        h = rms_norm(x, T[b + "ffn_norm.weight"], eps)
        x = x + lin(silu(lin(h, b + "ffn_gate")) * lin(h, b + "ffn_up"), b + "ffn_down")
    x = rms_norm(x, T["output_norm.weight"], eps)
    return x @ head.T


# --------------------------------------------------------------- files


def _formats():
    sys.path.insert(0, HERE)
    try:
        import formats  # tests/llm/formats.py: the GGUF and safetensors writers
    except ImportError as e:
        raise SystemExit("tests/llm/formats.py is needed to write model files (%s)" % e)
    return formats


def _file_tensor(a, dtype, formats):
    """A float32 array as the writer takes it in `dtype`."""
    if dtype == "f32":
        return np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "f16":
        return np.ascontiguousarray(a, dtype=np.float16)
    return (formats.bf16_bits(a), "BF16")  # bit pattern, rounded to nearest even


def write_model(arch, fmt, out, seed, dtype="f32", overrides=None):
    cfg = make_config(arch, **(overrides or {}))
    formats = _formats()
    store = "gguf" if fmt == "gguf" else "safetensors"
    w = stored_weights(cfg, seed, dtype, store)
    desc = {"arch": arch, "seed": seed, "dtype": dtype, "format": store, "config": cfg}
    if fmt == "gguf":
        meta, tensors = to_gguf(cfg, w)
        ftype = {"f32": 0, "f16": 1, "bf16": 32}[dtype]
        meta.insert(2, ("general.file_type", "uint32", ftype))
        tensors = {k: (np.ascontiguousarray(v, dtype=np.float32) if v.ndim == 1 else _file_tensor(v, dtype, formats))
                   for k, v in tensors.items()}
        if os.path.dirname(out):
            os.makedirs(os.path.dirname(out), exist_ok=True)
        formats.write_gguf(out, meta, tensors)
        with open(out + ".ref.json", "w") as f:
            json.dump(desc, f, indent=1)
        return
    os.makedirs(out, exist_ok=True)
    tensors = {k: _file_tensor(v, dtype, formats) for k, v in w.items()}
    cfg_file = dict(cfg, torch_dtype={"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype])
    if fmt == "safetensors":
        formats.write_safetensors(os.path.join(out, "model.safetensors"), tensors, {"format": "pt"})
    elif fmt == "safetensors-sharded":
        formats.write_safetensors_sharded(out, tensors, metadata={"format": "pt"})
    else:
        raise SystemExit("unknown format %r" % fmt)
    files = {"config.json": cfg_file, "tokenizer.json": tokenizer_json(cfg),
             "tokenizer_config.json": tokenizer_config(cfg),
             "generation_config.json": {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]},
             "rlx_reference.json": desc}
    for name, obj in files.items():
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False)


def load_model(spec, seed=0, dtype="f32", fmt="safetensors", overrides=None):
    """(config, weights as stored) from an architecture name or a model
    written by write_model."""
    if spec in ARCHS:
        cfg = make_config(spec, **(overrides or {}))
        return cfg, stored_weights(cfg, seed, dtype, fmt)
    side = os.path.join(spec, "rlx_reference.json") if os.path.isdir(spec) else spec + ".ref.json"
    if not os.path.exists(side):
        raise SystemExit("%s: neither an architecture (%s) nor a model written by `write` (no %s)"
                         % (spec, ", ".join(ARCHS), side))
    with open(side) as f:
        d = json.load(f)
    return d["config"], stored_weights(d["config"], d["seed"], d["dtype"], d["format"])


# --------------------------------------------------------------- reading back
# Small readers for what write_model writes (F32, F16, BF16 only), so the
# selftest can check that a file holds exactly the weights logits rebuilds.

_BF16_F32 = lambda bits: (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8:8 + n])
    out = {}
    for name, d in head.items():
        if name == "__metadata__":
            continue
        a, b = d["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if d["dtype"] == "BF16":
            arr = _BF16_F32(np.frombuffer(raw, dtype=np.uint16))
        else:
            arr = np.frombuffer(raw, dtype={"F32": np.float32, "F16": np.float16}[d["dtype"]]).astype(np.float32)
        out[name] = arr.reshape(d["shape"])
    return out


def read_gguf(path):
    """(metadata dict key -> value, tensors as float32 in NumPy order)."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, data, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("Q")
        pos[0] += n
        return data[pos[0] - n:pos[0]].decode("utf-8")

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    pos[0] = 4
    take("I")
    n_t, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_t):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, ne[::-1], take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    base = (pos[0] + align - 1) // align * align
    out = {}
    for name, shape, t, off in infos:
        n = int(np.prod(shape))
        if t == 0:
            a = np.frombuffer(data, np.float32, n, base + off)
        elif t == 1:
            a = np.frombuffer(data, np.float16, n, base + off).astype(np.float32)
        elif t == 30:
            a = _BF16_F32(np.frombuffer(data, np.uint16, n, base + off))
        else:
            raise ValueError("%s: ggml type %d not read here" % (name, t))
        out[name] = a.reshape(shape)
    return meta, out


# --------------------------------------------------------------- self-checks


def selftest():
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    def close(a, b, tol=1e-9):
        return a.shape == b.shape and float(np.max(np.abs(a - b))) <= tol * max(1.0, float(np.max(np.abs(b))))

    rng = np.random.default_rng(5)
    ids = rng.integers(0, 256, size=(2, 11))

    # the small pieces against values worked out by hand
    check(abs(gelu_new(np.array([1.0]))[0] - 0.8411919906082768) < 1e-12, "gelu_new(1)")
    check(np.allclose(rms_norm(np.array([3.0, 4.0]), np.array([1.0, 2.0]), 0.0),
                      [3 / math.sqrt(12.5), 8 / math.sqrt(12.5)]), "rms_norm of [3, 4]")
    b2u = bytes_to_unicode()
    check(len(set(b2u.values())) == 256 and b2u[ord("A")] == "A" and b2u[ord(" ")] == "\u0120"
          and b2u[0] == "\u0100", "bytes_to_unicode: 256 distinct, 'A' kept, ' ' -> U+0120")

    # RoPE: a score depends on the distance only, in both forms
    q, k = rng.standard_normal(16), rng.standard_normal(16)
    f = inv_freq(16, 10000.0, None)
    for rope in (rope_half, rope_interleaved):
        s1 = rope(q[None], np.array([3.0]), f) @ rope(k[None], np.array([1.0]), f).T
        s2 = rope(q[None], np.array([10.0]), f) @ rope(k[None], np.array([8.0]), f).T
        check(abs(s1 - s2).max() < 1e-12, rope.__name__ + ": q.k depends on the distance alone")
    # rotate_half as complex multiplication of (x_i, x_{i+D/2}), one value at a time
    pos = np.arange(5.0)
    x = rng.standard_normal((5, 16))
    want = np.empty_like(x)
    for s_ in range(5):
        for i in range(8):
            z = complex(x[s_, i], x[s_, i + 8]) * complex(math.cos(s_ * f[i]), math.sin(s_ * f[i]))
            want[s_, i], want[s_, i + 8] = z.real, z.imag
    check(close(rope_half(x, pos, f), want, 1e-12), "rope_half: each pair (i, i + D/2) turns by pos * freq_i")
    # attention against a loop over queries, keys and heads (GQA: 4 query heads, 2 kv heads)
    q, k, v = rng.standard_normal((1, 4, 5, 8)), rng.standard_normal((1, 2, 5, 8)), rng.standard_normal((1, 2, 5, 8))
    want = np.zeros((1, 4, 5, 8))
    for h in range(4):
        for i in range(5):
            sc = [float(q[0, h, i] @ k[0, h // 2, j]) / math.sqrt(8) for j in range(i + 1)]
            e = [math.exp(c - max(sc)) for c in sc]
            for j in range(i + 1):
                want[0, h, i] += e[j] / sum(e) * v[0, h // 2, j]
    check(close(attention(q, k, v), want, 1e-12), "attention: causal softmax(q.k / sqrt(D)) v, kv head h // 2")
    x = np.array([1.0, 2.0, 6.0])
    check(close(layer_norm(x, np.array([1.0, 1.0, 2.0]), np.array([0.0, 1.0, 0.0]), 0.0),
                np.array([-2.0 / math.sqrt(14 / 3), 1.0 - 1.0 / math.sqrt(14 / 3), 6.0 / math.sqrt(14 / 3)]), 1e-12),
          "layer_norm of [1, 2, 6]")

    x = rng.standard_normal((3, 5, 16))
    P = permute_qk(np.eye(16), 1)
    pos = np.arange(5.0)
    check(close(rope_interleaved(x @ P.T, pos, f), rope_half(x, pos, f) @ P.T, 1e-12),
          "the q/k row permutation turns rotate_half into adjacent pairs")

    variants = [(a, {}) for a in ARCHS] + [
        ("llama", {"tie_word_embeddings": True}), ("qwen2", {"tie_word_embeddings": False}),
        ("qwen3", {"tie_word_embeddings": False}), ("gpt2", {"tie_word_embeddings": False}),
        ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
        ("llama", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}),
        ("llama", {"head_dim": 32}), ("llama", {"num_key_value_heads": 1}),
        ("mistral", {"num_key_value_heads": 4}), ("qwen3", {"num_key_value_heads": 1, "rope_theta": 10000.0}),
        ("mistral", {"sliding_window": 4}), ("llama", {"attention_bias": True}),
    ]
    for arch, ov in variants:
        name = arch + (" " + json.dumps(ov) if ov else "")
        cfg = make_config(arch, **ov)
        w = make_weights(cfg, 7)
        lg = forward(cfg, w, ids)
        tied = "lm_head.weight" not in w
        check(lg.shape == (2, 11, 256) and np.isfinite(lg).all() and 0.3 < lg.std() < 30,
              "%s: logits [2, 11, 256], finite, spread %.2f (%s)" % (name, lg.std(), "tied" if tied else "untied"))
        check(close(forward(cfg, w, ids[:, :6]), lg[:, :6]), name + ": causal (a prefix's logits are the first rows)")
        check(close(forward(cfg, w, ids[1:]), lg[1:]), name + ": rows of a batch are independent")
        meta, t = to_gguf(cfg, w)
        check(close(forward_gguf(meta, t, ids), lg), name + ": GGUF names, layout and RoPE form give the same logits")
        g = greedy(cfg, w, ids[0, :4], 3)
        check(g[0] == int(np.argmax(lg[0, 3])) and len(g) == 3, name + ": greedy starts at the prompt's argmax")
        if GGUF_ARCH[arch] == "llama" and not ov.get("sliding_window"):
            t2 = dict(t)
            for i in range(cfg["num_hidden_layers"]):
                for n in ("attn_q", "attn_k"):
                    hf = "model.layers.%d.self_attn.%s_proj.weight" % (i, n[-1])
                    t2["blk.%d.%s.weight" % (i, n)] = w[hf]
            check(not close(forward_gguf(meta, t2, ids), lg, 1e-3), name + ": without the permutation they differ")

    # the sliding window matters once the sequence is longer than it
    cfg = make_config("mistral", sliding_window=4)
    w = make_weights(cfg, 7)
    lg = forward(cfg, w, ids)
    check(close(lg[:, :4], forward(make_config("mistral"), w, ids)[:, :4]) and
          not close(lg, forward(make_config("mistral"), w, ids), 1e-3), "mistral: the window masks distance >= 4 only")

    # GQA: kv heads repeated by hand give the same model with nkv = nh
    cfg = make_config("llama")
    w = make_weights(cfg, 3)
    full = make_config("llama", num_key_value_heads=4)
    w4 = dict(w)
    for i in range(cfg["num_hidden_layers"]):
        for n in ("k_proj", "v_proj"):
            key = "model.layers.%d.self_attn.%s.weight" % (i, n)
            w4[key] = np.repeat(w[key].reshape(2, 16, 64), 2, axis=0).reshape(64, 64)
    check(close(forward(full, w4, ids), forward(cfg, w, ids)), "GQA: query head h reads kv head h // (heads / kv heads)")

    # RoPE scaling changes the logits, and linear scaling is positions / factor
    lin2 = make_config("llama", rope_scaling={"rope_type": "linear", "factor": 2.0})
    check(not close(forward(lin2, w, ids), forward(cfg, w, ids), 1e-3), "linear RoPE scaling changes the logits")
    fl = llama3_factors(16, 10000.0, make_config("llama", rope_scaling={"rope_type": "llama3"})["rope_scaling"])
    check(fl[0] == 1.0 and fl[-1] == 8.0 and ((fl > 1) & (fl < 8)).any(), "llama3 factors: 1, blended, 8 at these sizes")

    # determinism of the weights; f16/bf16 rounding
    check(all(np.array_equal(a, b) for a, b in zip(make_weights(cfg, 3).values(), w.values())), "weights repeat for a seed")
    check(not np.array_equal(make_weights(cfg, 4)["model.norm.weight"], w["model.norm.weight"]), "another seed differs")
    r = round_to(np.array([1.0, 1.00390625, 1.01171875, 3.0e38], dtype=np.float32), "bf16")
    check(list(r[:3]) == [1.0, 1.0, 1.015625] and np.isfinite(r[3]), "bf16 rounds to nearest even")
    sw = stored_weights(cfg, 3, "f16", "gguf")
    check(sw["model.norm.weight"].dtype == np.float32 and np.array_equal(sw["model.norm.weight"], w["model.norm.weight"])
          and not np.array_equal(sw["lm_head.weight"], w["lm_head.weight"]), "GGUF f16 keeps 1-D tensors f32")

    # the tokenizer descriptions
    tj = tokenizer_json(make_config("qwen3", vocab_size=260))
    meta, _ = to_gguf(make_config("qwen3", vocab_size=260), make_weights(make_config("qwen3", vocab_size=260), 1))
    m = {k: v for k, _, v in meta}
    check(len(tj["model"]["vocab"]) == 260 and tj["model"]["vocab"]["\u0120"] == 32 and len(tj["added_tokens"]) == 4
          and m["tokenizer.ggml.tokens"][1][32] == "\u0120" and m["tokenizer.ggml.token_type"][1][259] == 3
          and m["qwen3.attention.key_length"] == 32, "tokenizer: byte i is id i in both forms; extras are control")

    # writing files when the writers are there
    if os.path.exists(os.path.join(HERE, "formats.py")):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            for arch, dtype in zip(ARCHS, ("f32", "f16", "bf16", "f16", "bf16")):
                gg, st, sh = os.path.join(d, arch + ".gguf"), os.path.join(d, arch), os.path.join(d, arch + "-sh")
                write_model(arch, "gguf", gg, 1, dtype)
                write_model(arch, "safetensors", st, 1, dtype)
                write_model(arch, "safetensors-sharded", sh, 1, dtype)
                c2, w2 = load_model(gg)
                m2, t2 = read_gguf(gg)
                meta2, want = to_gguf(c2, w2)
                same = sorted(t2) == sorted(want) and all(np.array_equal(t2[k], want[k]) for k in want)
                check(same and m2["general.architecture"] == GGUF_ARCH[arch] and
                      close(forward_gguf([(k, None, v) for k, v in m2.items()], t2, ids), forward(c2, w2, ids)),
                      "%s %s: the GGUF file holds the weights `logits` rebuilds, and they give its logits" % (arch, dtype))
                c3, w3 = load_model(st)
                r3 = read_safetensors(os.path.join(st, "model.safetensors"))
                r4 = {}
                for fn in sorted(os.listdir(sh)):
                    if fn.endswith(".safetensors"):
                        r4.update(read_safetensors(os.path.join(sh, fn)))
                check(sorted(r3) == sorted(w3) == sorted(r4) and
                      all(np.array_equal(r3[k], w3[k]) and np.array_equal(r4[k], w3[k]) for k in w3),
                      "%s %s: safetensors (single and sharded) hold the weights `logits` rebuilds" % (arch, dtype))
                tj = json.load(open(os.path.join(st, "tokenizer.json")))
                check(len(tj["model"]["vocab"]) == c3["vocab_size"], arch + ": tokenizer.json beside it")
    else:
        print("note  formats.py not present: file writing not checked")

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


# --------------------------------------------------------------- command line


def _parse_ids(s):
    rows = [[int(t) for t in r.split(",") if t.strip()] for r in s.split(";") if r.strip()]
    if len({len(r) for r in rows}) != 1:
        raise SystemExit("--ids: rows of different lengths")
    return rows


def _parse_sets(items):
    out = {}
    for it in items or []:
        k, _, v = it.partition("=")
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write a seeded model file")
    w.add_argument("--arch", required=True, choices=sorted(ARCHS))
    w.add_argument("--format", required=True, choices=["gguf", "safetensors", "safetensors-sharded"])
    w.add_argument("--out", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    w.add_argument("--set", action="append", help="config override key=JSON value")
    for name in ("logits", "greedy"):
        p = sub.add_parser(name)
        p.add_argument("--model", required=True, help="an architecture name or a model written by `write`")
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--ids", help="comma-separated ids; ';' between rows of a batch (logits)")
        g.add_argument("--text", help="UTF-8 text: its bytes are the ids (after bos where the model adds one)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
        p.add_argument("--format", default="safetensors", choices=["gguf", "safetensors"])
        p.add_argument("--set", action="append")
        if name == "logits":
            p.add_argument("--out", required=True)
        else:
            p.add_argument("--n", type=int, default=8)
    sub.add_parser("selftest")
    a = ap.parse_args(argv)
    if a.cmd == "selftest":
        return selftest()
    if a.cmd == "write":
        write_model(a.arch, a.format, a.out, a.seed, a.dtype, _parse_sets(a.set))
        return 0
    cfg, weights = load_model(a.model, a.seed, a.dtype, a.format, _parse_sets(a.set))
    rows = _parse_ids(a.ids) if a.ids is not None else [encode(cfg, a.text)]
    if a.cmd == "logits":
        np.save(a.out, forward(cfg, weights, rows))
    else:
        print(" ".join(str(t) for t in greedy(cfg, weights, rows[0], a.n)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
