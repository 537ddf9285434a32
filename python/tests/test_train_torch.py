"""Whole training runs against PyTorch: the same initial weights, the same
batches, 100 AdamW steps in both; the loss of every step and the params at
the end are compared.  PyTorch's models are written here with torch.nn and
RLX's are built with rlx.Graph under the param names of
src/models/workloads.c and decoder.c (a dense weight is [in, out], torch's
weight transposed), so neither side is derived from the other.

Models, at reduced sizes so that the file runs in well under a minute:
- mlp: the workload's 3 Linear layers with exact GELU at 256-1024-1024-256
  (the workload is 1024-4096-4096-1024), MSE against random targets;
- encoder: the MiniLM-shaped workload (embeddings + LayerNorm, post-norm
  layers of attention and a GELU FFN) at 2 layers, hidden 64, 4 heads, ffn
  256, vocab 1000, with a token-classification head (a dense layer to 5
  classes) and cross-entropy against random labels;
- decoder-small: Qwen3-shaped (RMSNorm, q/k RMSNorm per head, RoPE
  theta 1e6, grouped-query attention, SwiGLU, tied embeddings) at 2
  layers, hidden 64, 4 heads over 2 KV heads of 16, ffn 192, vocab 512,
  with next-token cross-entropy (per-step loss within 5e-5: see LOSS_RTOL);
- the mlp again, exported by torch.onnx.export with its loss as an output
  and trained by rlx.Trainer from the file (initializers as params).

Skipped, saying why, where torch does not import (CI installs Debian's
python3-torch)."""
import math

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch", reason="PyTorch is needed for the comparison (Debian's python3-torch)")
F = torch.nn.functional

STEPS = 100
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01
# Per-step loss, relative: 1e-5, except decoder-small, where float32 itself
# does not reproduce to 1e-5: trained in float64 from the same start,
# PyTorch's own float32 run differs by up to 1.2e-5 relative and RLX's by
# 1.8e-5 (RLX against PyTorch, both float32: 2.7e-5), while the params of
# the two runs end within 1.5e-6 of each other.
LOSS_RTOL = {"mlp": 1e-5, "mlp (ONNX)": 1e-5, "encoder": 1e-5, "decoder-small": 5e-5}
PARAM_ATOL = 1e-4  # at the end


def run_both(rlx_graph, torch_params, torch_loss, batches):
    """Trains both for len(batches) AdamW steps.  torch_params: {rlx name:
    (torch tensor, transposed?)}; torch_loss(batch) -> loss tensor.
    Returns (loss pairs per step, {name: max |param difference|})."""
    tr = rlx.Trainer(rlx_graph, "loss", optimizer="adamw", lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    for name, (p, t) in torch_params.items():
        w = p.detach().numpy()
        tr.set_param(name, np.ascontiguousarray(w.T if t else w))
    opt = torch.optim.AdamW([p for p, _ in torch_params.values()], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    losses = []
    for feeds in batches:
        got = tr.step(feeds)
        opt.zero_grad()
        loss = torch_loss({k: torch.from_numpy(v) for k, v in feeds.items()})
        loss.backward()
        opt.step()
        losses.append((got, loss.item()))
    diffs = {}
    for name, (p, t) in torch_params.items():
        w = p.detach().numpy()
        diffs[name] = float(np.max(np.abs(tr.get_param(name) - (w.T if t else w))))
    return losses, diffs


def check(model, losses, diffs, skip=()):
    """skip: params left out of the param comparison (reported)."""
    rel = [abs(a - b) / abs(b) for a, b in losses]
    for name in skip:
        print(f"\n{model}: {name} differs by {diffs.pop(name):.3g} (not compared)", end="")
    worst = max(diffs, key=diffs.get)
    print(f"\n{model}: loss {losses[0][1]:.6f} -> {losses[-1][1]:.6f} over {len(losses)} AdamW steps; "
          f"max loss difference {max(rel):.3g} relative (step {int(np.argmax(rel)) + 1}); "
          f"max param difference {diffs[worst]:.3g} ({worst})")
    assert losses[-1][1] < losses[0][1], "training did not lower the loss"
    assert max(rel) <= LOSS_RTOL[model], f"{model}: loss differs by {max(rel):.3g} relative at step {np.argmax(rel) + 1}"
    assert diffs[worst] <= PARAM_ATOL, f"{model}: param {worst} differs by {diffs[worst]:.3g}"


def init(shape, gen, std=0.02):
    return torch.nn.Parameter(torch.randn(*shape, generator=gen) * std)


@pytest.fixture(autouse=True)
def _threads():
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


def test_mlp_mse():
    B, D, Hd = 16, 256, 1024
    gen = torch.Generator().manual_seed(11)
    dims = [(D, Hd), (Hd, Hd), (Hd, D)]
    lin = []
    for i, (a, b) in enumerate(dims):
        m = torch.nn.Linear(a, b)
        with torch.no_grad():
            m.weight.copy_(torch.randn(b, a, generator=gen) / math.sqrt(a))
            m.bias.copy_(torch.randn(b, generator=gen) * 0.1)
        lin.append(m)

    g = rlx.Graph()
    x = g.input("x", "float32", (B, D))
    h = x
    for i, (a, b) in enumerate(dims):
        h = g.matmul(h, g.param(f"fc{i + 1}.w", "float32", (a, b))) + g.param(f"fc{i + 1}.b", "float32", (b,))
        if i < 2:
            h = g.gelu(h)
    g.output("loss", g.mse_loss(h, g.input("t", "float32", (B, D))))
    params = {}
    for i, m in enumerate(lin):
        params[f"fc{i + 1}.w"] = (m.weight, True)
        params[f"fc{i + 1}.b"] = (m.bias, False)

    def torch_loss(f):
        y = lin[2](F.gelu(lin[1](F.gelu(lin[0](f["x"])))))
        return F.mse_loss(y, f["t"])

    rng = np.random.default_rng(1)
    batches = [{"x": rng.standard_normal((B, D)).astype(np.float32),
                "t": rng.standard_normal((B, D)).astype(np.float32)} for _ in range(4)]
    losses, diffs = run_both(g, params, torch_loss, [batches[i % 4] for i in range(STEPS)])
    check("mlp", losses, diffs)


def test_encoder_token_classification():
    B, S, H, NH, FF, V, P, L, C, eps = 2, 16, 64, 4, 256, 1000, 64, 2, 5, 1e-12
    Dh = H // NH
    gen = torch.Generator().manual_seed(12)
    params = {}

    def param(name, shape, transposed=False, kind="w"):
        if kind == "g":
            p = torch.nn.Parameter(torch.ones(*shape) + 0.1 * torch.randn(*shape, generator=gen))
        elif kind == "b":
            p = torch.nn.Parameter(0.02 * torch.randn(*shape, generator=gen))
        else:
            p = init(shape, gen, 0.1)
        params[name] = (p, transposed)
        return p

    def dense_t(name, a, b):  # torch Linear layout [out, in]
        return param(name + ".w", (b, a), True), param(name + ".b", (b,), kind="b")

    word, pos, typ = param("emb.word.w", (V, H)), param("emb.pos.w", (P, H)), param("emb.type.w", (2, H))
    eln = (param("emb.ln.g", (H,), kind="g"), param("emb.ln.b", (H,), kind="b"))
    layers = []
    for li in range(L):
        p = f"l{li}"
        layers.append({n: dense_t(f"{p}.{n}", *d) for n, d in
                       (("q", (H, H)), ("k", (H, H)), ("v", (H, H)), ("o", (H, H)), ("ffn1", (H, FF)),
                        ("ffn2", (FF, H)))})
        layers[-1]["ln1"] = (param(f"{p}.ln1.g", (H,), kind="g"), param(f"{p}.ln1.b", (H,), kind="b"))
        layers[-1]["ln2"] = (param(f"{p}.ln2.g", (H,), kind="g"), param(f"{p}.ln2.b", (H,), kind="b"))
    head = dense_t("cls", H, C)

    def torch_loss(f):
        ids = f["input_ids"]
        x = F.embedding(ids, word) + pos[:S] + typ[0]
        x = F.layer_norm(x, (H,), *eln, eps=eps)
        for ly in layers:
            q, k, v = (F.linear(x, *ly[n]).view(B, S, NH, Dh).transpose(1, 2) for n in "qkv")
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(Dh), -1) @ v
            x = F.layer_norm(x + F.linear(a.transpose(1, 2).reshape(B, S, H), *ly["o"]), (H,), *ly["ln1"], eps=eps)
            f2 = F.linear(F.gelu(F.linear(x, *ly["ffn1"])), *ly["ffn2"])
            x = F.layer_norm(x + f2, (H,), *ly["ln2"], eps=eps)
        return F.cross_entropy(F.linear(x, *head).reshape(B * S, C), f["labels"].reshape(-1))

    # RLX: as src/models/workloads.c builds the encoder, plus the head
    g = rlx.Graph()
    ids = g.input("input_ids", "int64", (B, S))

    def gp(name, shape):
        return g.param(name, "float32", shape)

    def dense(x, name, a, b):
        return g.matmul(x, gp(name + ".w", (a, b))) + gp(name + ".b", (b,))

    def ln(x, name):
        return g.layer_norm(x, gp(name + ".g", (H,)), gp(name + ".b", (H,)), eps)

    x = g.gather(gp("emb.word.w", (V, H)), ids, 0)
    x = x + g.slice(gp("emb.pos.w", (P, H)), [0], [0], [S])
    x = x + g.slice(gp("emb.type.w", (2, H)), [0], [0], [1])
    x = ln(x, "emb.ln")
    for li in range(L):
        p = f"l{li}"
        q, k, v = (g.transpose(g.reshape(dense(x, f"{p}.{n}", H, H), (B, S, NH, Dh)), (0, 2, 1, 3)) for n in "qkv")
        a = g.reshape(g.transpose(g.attention(q, k, v), (0, 2, 1, 3)), (B, S, H))
        x = ln(x + dense(a, f"{p}.o", H, H), f"{p}.ln1")
        x = ln(x + dense(g.gelu(dense(x, f"{p}.ffn1", H, FF)), f"{p}.ffn2", FF, H), f"{p}.ln2")
    logits = dense(x, "cls", H, C)
    g.output("loss", g.cross_entropy(logits, g.input("labels", "int64", (B, S))))

    rng = np.random.default_rng(2)
    batches = [{"input_ids": rng.integers(0, V, (B, S)).astype(np.int64),
                "labels": rng.integers(0, C, (B, S)).astype(np.int64)} for _ in range(4)]
    losses, diffs = run_both(g, params, torch_loss, [batches[i % 4] for i in range(STEPS)])
    # The key biases do not change the output (softmax over the keys is
    # invariant to adding q.b to every score), so their gradient is zero
    # in exact arithmetic and rounding noise of 1e-10 in both; AdamW
    # divides by its own root mean square, turning that noise into steps
    # of about lr either way.  They are trained but not compared.
    check("encoder", losses, diffs, skip=[f"l{li}.k.b" for li in range(L)])


def test_decoder_small_next_token():
    B, S, Hd, NH, KV, D, FF, V, L, theta, eps = 2, 16, 64, 4, 2, 16, 192, 512, 2, 1e6, 1e-6
    gen = torch.Generator().manual_seed(13)
    params = {}

    def param(name, shape, transposed=False, gamma=False):
        p = torch.nn.Parameter(torch.ones(*shape) + 0.1 * torch.randn(*shape, generator=gen)) if gamma else \
            init(shape, gen, 0.1)
        params[name] = (p, transposed)
        return p

    emb = param("embed.w", (V, Hd))
    layers = []
    for li in range(L):
        p = f"l{li}"
        layers.append({
            "attn_norm": param(f"{p}.attn_norm.g", (Hd,), gamma=True),
            "q": param(f"{p}.q.w", (NH * D, Hd), True), "k": param(f"{p}.k.w", (KV * D, Hd), True),
            "v": param(f"{p}.v.w", (KV * D, Hd), True),
            "q_norm": param(f"{p}.q_norm.g", (D,), gamma=True), "k_norm": param(f"{p}.k_norm.g", (D,), gamma=True),
            "o": param(f"{p}.o.w", (Hd, NH * D), True), "ffn_norm": param(f"{p}.ffn_norm.g", (Hd,), gamma=True),
            "gate": param(f"{p}.gate.w", (FF, Hd), True), "up": param(f"{p}.up.w", (FF, Hd), True),
            "down": param(f"{p}.down.w", (Hd, FF), True)})
    final = param("final_norm.g", (Hd,), gamma=True)

    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).float(), torch.sin(ang).float()

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rope(x):  # rotate halves (Llama / Qwen)
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    causal = torch.ones(S, S, dtype=torch.bool).tril()

    def torch_loss(f):
        x = F.embedding(f["input_ids"], emb)
        for ly in layers:
            h = rms(x, ly["attn_norm"])
            q = rope(rms(F.linear(h, ly["q"]).view(B, S, NH, D), ly["q_norm"]).transpose(1, 2))
            k = rope(rms(F.linear(h, ly["k"]).view(B, S, KV, D), ly["k_norm"]).transpose(1, 2))
            v = F.linear(h, ly["v"]).view(B, S, KV, D).transpose(1, 2)
            k, v = k.repeat_interleave(NH // KV, 1), v.repeat_interleave(NH // KV, 1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            a = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
            x = x + F.linear(a.transpose(1, 2).reshape(B, S, NH * D), ly["o"])
            h = rms(x, ly["ffn_norm"])
            x = x + F.linear(F.silu(F.linear(h, ly["gate"])) * F.linear(h, ly["up"]), ly["down"])
        logits = F.linear(rms(x, final), emb)  # tied
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), f["targets"].reshape(-1))

    # RLX: as src/models/decoder.c builds decoder-small, plus the loss
    g = rlx.Graph()

    def gp(name, shape):
        return g.param(name, "float32", shape)

    def heads(h, p, which, n, gamma):
        y = g.reshape(g.matmul(h, gp(f"{p}.{which}.w", (Hd, n * D))), (B, S, n, D))
        if gamma is not None:
            y = g.rms_norm(y, gamma, eps)
        y = g.transpose(y, (0, 2, 1, 3))
        return g.rope(y, theta) if gamma is not None else y

    e = gp("embed.w", (V, Hd))
    x = g.gather(e, g.input("input_ids", "int64", (B, S)), 0)
    for li in range(L):
        p = f"l{li}"
        h = g.rms_norm(x, gp(f"{p}.attn_norm.g", (Hd,)), eps)
        q = heads(h, p, "q", NH, gp(f"{p}.q_norm.g", (D,)))
        k = heads(h, p, "k", KV, gp(f"{p}.k_norm.g", (D,)))
        v = heads(h, p, "v", KV, None)
        a = g.reshape(g.transpose(g.attention(q, k, v, causal=True), (0, 2, 1, 3)), (B, S, NH * D))
        x = x + g.matmul(a, gp(f"{p}.o.w", (NH * D, Hd)))
        h = g.rms_norm(x, gp(f"{p}.ffn_norm.g", (Hd,)), eps)
        f = g.silu(g.matmul(h, gp(f"{p}.gate.w", (Hd, FF)))) * g.matmul(h, gp(f"{p}.up.w", (Hd, FF)))
        x = x + g.matmul(f, gp(f"{p}.down.w", (FF, Hd)))
    logits = g.matmul(g.rms_norm(x, gp("final_norm.g", (Hd,)), eps), e, trans_b=True)
    logits = g.slice(logits, [1], [0], [S - 1])
    g.output("loss", g.cross_entropy(logits, g.input("targets", "int64", (B, S - 1))))

    rng = np.random.default_rng(3)
    batches = []
    for _ in range(4):
        ids = rng.integers(0, V, (B, S)).astype(np.int64)
        batches.append({"input_ids": ids, "targets": np.ascontiguousarray(ids[:, 1:])})
    losses, diffs = run_both(g, params, torch_loss, [batches[i % 4] for i in range(STEPS)])
    check("decoder-small", losses, diffs)


def test_mlp_exported_to_onnx(tmp_path):
    """The same MLP exported by torch.onnx.export (opset 17) with its loss
    as the graph's output: rlx.Trainer imports the file with the
    initializers as params (torch's names) and loads their values from it."""
    B, D, Hd = 16, 256, 1024

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = torch.nn.Linear(D, Hd), torch.nn.Linear(Hd, Hd), torch.nn.Linear(Hd, D)

        def forward(self, x, t):  # F.mse_loss has no ONNX export in torch 1.13
            return ((self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x))))) - t) ** 2).mean()

    torch.manual_seed(14)
    net = Net()
    rng = np.random.default_rng(4)
    batches = [{"x": rng.standard_normal((B, D)).astype(np.float32),
                "t": rng.standard_normal((B, D)).astype(np.float32)} for _ in range(4)]
    path = str(tmp_path / "mlp_loss.onnx")
    torch.onnx.export(net, (torch.from_numpy(batches[0]["x"]), torch.from_numpy(batches[0]["t"])), path,
                      input_names=["x", "t"], output_names=["loss"], opset_version=17, do_constant_folding=False)
    tr = rlx.Trainer(path, "loss", optimizer="adamw", lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    names = [p.name for p in tr.get_params() if not p.name.startswith("opt.")]
    assert sorted(names) == sorted(n for n, _ in net.named_parameters())
    for n, p in net.named_parameters():
        np.testing.assert_array_equal(tr.get_param(n), p.detach().numpy())
    opt = torch.optim.AdamW(net.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    losses = []
    for i in range(STEPS):
        f = batches[i % 4]
        got = tr.step(f)
        opt.zero_grad()
        loss = net(torch.from_numpy(f["x"]), torch.from_numpy(f["t"]))
        loss.backward()
        opt.step()
        losses.append((got, loss.item()))
    diffs = {n: float(np.max(np.abs(tr.get_param(n) - p.detach().numpy()))) for n, p in net.named_parameters()}
    check("mlp (ONNX)", losses, diffs)
