"""rlx.Trainer and the training builders of rlx.Graph (gradients,
cross_entropy, mse_loss): against NumPy references of the formulas, on an
ONNX file whose initializers become the params, checkpoints that resume
bit for bit, accumulation, frozen params and the errors."""
import numpy as np
import pytest

import rlx

N, I, O = 8, 5, 3


def linear_graph(rows=N):
    g = rlx.Graph()
    x = g.input("x", "float32", (rows, I))
    t = g.input("t", "float32", (rows, O))
    w = g.param("w", "float32", (I, O))
    b = g.param("b", "float32", (O,))
    y = g.matmul(x, w) + b
    g.output("loss", g.mse_loss(y, t))
    g.output("y", y)
    return g


def data(seed=0, rows=N):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, I)).astype(np.float32), rng.standard_normal((rows, O)).astype(np.float32),
            rng.standard_normal((I, O)).astype(np.float32), rng.standard_normal((O,)).astype(np.float32))


def ref_grads(x, t, w, b):
    """d mean((x w + b - t)^2) / d (w, b) in float64."""
    x, t, w, b = (a.astype(np.float64) for a in (x, t, w, b))
    d = 2 * (x @ w + b - t) / t.size
    return x.T @ d, d.sum(0), np.mean((x @ w + b - t) ** 2)


def test_adamw_matches_numpy_reference():
    x, t, w0, b0 = data()
    tr = rlx.Trainer(linear_graph(), "loss", optimizer="adamw", lr=0.05, betas=(0.8, 0.95), eps=1e-6,
                     weight_decay=0.1, grad_norm=True)
    tr.set_param("w", w0)
    tr.set_param("b", b0)
    p = [w0.astype(np.float64), b0.astype(np.float64)]
    m = [np.zeros_like(q) for q in p]
    v = [np.zeros_like(q) for q in p]
    for step in range(1, 8):
        gw, gb, loss = ref_grads(x, t, p[0], p[1])
        got = tr.step({"x": x, "t": t})
        assert abs(got - loss) <= 1e-5 * abs(loss)
        for i, gr in enumerate((gw, gb)):  # torch.optim.AdamW
            p[i] *= 1 - 0.05 * 0.1
            m[i] = 0.8 * m[i] + 0.2 * gr
            v[i] = 0.95 * v[i] + 0.05 * gr * gr
            p[i] -= 0.05 / (1 - 0.8 ** step) * m[i] / (np.sqrt(v[i]) / np.sqrt(1 - 0.95 ** step) + 1e-6)
    assert tr.steps == 7
    np.testing.assert_allclose(tr.get_param("w"), p[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tr.get_param("b"), p[1], rtol=1e-4, atol=1e-5)
    y = tr.get_output("y")
    assert y.shape == (N, O) and y.dtype == np.float32
    assert float(tr.get_output("grad_norm")) > 0


def test_sgd_momentum_schedule_and_loss_falls():
    x, t, w0, b0 = data(1)
    tr = rlx.Trainer(linear_graph(), "loss", optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=0.0,
                     warmup_steps=4, decay_steps=10, min_lr=0.01)
    tr.set_param("w", w0)
    tr.set_param("b", b0)
    assert tr.lr == pytest.approx(0.1 / 4)
    losses = [tr.step({"x": x, "t": t}) for _ in range(14)]
    assert tr.steps == 14
    assert tr.lr == pytest.approx(0.01)
    assert losses[-1] < 0.5 * losses[0]


def test_gradients_and_losses_on_graph():
    x, t, w0, b0 = data(2)
    g = rlx.Graph()
    xn = g.input("x", "float32", (N, I))
    tn = g.input("t", "float32", (N, O))
    w = g.param("w", "float32", (I, O))
    b = g.param("b", "float32", (O,))
    loss = g.mse_loss(g.matmul(xn, w) + b, tn)
    gw, gb = g.gradients(loss, [w, b])
    assert gw.shape == (I, O) and gb.shape == (O,)
    g.output("loss", loss)
    g.output("gw", gw)
    g.output("gb", gb)
    cg = g.compile()
    cg.set_param("w", w0)
    cg.set_param("b", b0)
    got_loss, got_gw, got_gb = cg.run({"x": x, "t": t})
    rw, rb, rl = ref_grads(x, t, w0, b0)
    np.testing.assert_allclose(got_gw, rw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_gb, rb, rtol=1e-5, atol=1e-6)
    assert float(got_loss) == pytest.approx(rl, rel=1e-5)

    # cross-entropy with an ignored row and label smoothing, as torch computes it
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    labels = np.array([0, 3, -100, 1, 2, 2], np.int64)
    g = rlx.Graph()
    ce = g.cross_entropy(g.input("z", "float32", (6, 4)), g.input("l", "int64", (6,)), ignore_index=-100,
                         label_smoothing=0.1)
    g.output("ce", ce)
    (got,) = g.run({"z": logits, "l": labels})
    z = logits.astype(np.float64)
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    keep = labels != -100
    per = -0.9 * logp[keep, labels[keep]] - 0.1 * logp[keep].mean(1)
    assert float(got) == pytest.approx(per.mean(), rel=1e-5)
    with pytest.raises(rlx.DTypeError):
        g.cross_entropy(g.input("z2", "float32", (6, 4)), g.input("l2", "float32", (6,)))


def test_accumulation_equals_one_big_batch():
    x, t, w0, b0 = data(4, rows=2 * N)
    big = rlx.Trainer(linear_graph(2 * N), "loss", optimizer="adam", lr=0.01)
    acc = rlx.Trainer(linear_graph(N), "loss", optimizer="adam", lr=0.01, accumulate=2)
    for tr in (big, acc):
        tr.set_param("w", w0)
        tr.set_param("b", b0)
    for _ in range(3):
        big.step({"x": x, "t": t})
        acc.step({"x": x[:N], "t": t[:N]})
        assert acc.steps == big.steps - 1
        acc.step({"x": x[N:], "t": t[N:]})
    assert acc.steps == big.steps == 3
    np.testing.assert_allclose(acc.get_param("w"), big.get_param("w"), rtol=1e-5, atol=1e-6)


def test_frozen_and_checkpoint(tmp_path):
    x, t, w0, b0 = data(5)

    def make():
        tr = rlx.Trainer(linear_graph(), "loss", optimizer="adamw", lr=0.02, frozen=["b"])
        tr.set_param("w", w0)
        tr.set_param("b", b0)
        return tr

    a = make()
    for _ in range(3):
        a.step({"x": x, "t": t})
    np.testing.assert_array_equal(a.get_param("b"), b0)  # frozen
    assert not np.array_equal(a.get_param("w"), w0)
    ck = tmp_path / "ck.safetensors"
    a.save(ck)
    with pytest.raises(rlx.RLXError, match="exists"):
        a.save(ck)
    a.save(ck, force=True)
    for _ in range(3):
        a.step({"x": x, "t": t})
    b = make()
    b.load(ck)
    assert b.steps == 3
    for _ in range(3):
        b.step({"x": x, "t": t})
    np.testing.assert_array_equal(a.get_param("w"), b.get_param("w"))
    assert b.steps == 6
    with pytest.raises(rlx.RLXIOError):
        b.load(tmp_path / "missing.safetensors")


def test_recompute_keeps_less_and_trains_the_same():
    """Activation checkpointing on three residual SwiGLU blocks: each
    block's silu(x w1) * (x w2) and its silu are computed again in the
    backward, so the step plans fewer transient bytes (the earlier blocks'
    values are no longer held while the later ones run); losses and
    weights are those of the step that keeps them (f32 on the CPU: the
    same operations on the same values)."""
    rows, hidden, ffn, blocks = 64, 32, 128, 3
    shapes = {f"{w}.{k}": s for k in range(blocks)
              for w, s in (("w1", (hidden, ffn)), ("w2", (hidden, ffn)), ("w3", (ffn, hidden)))}
    g = rlx.Graph()
    x = g.input("x", "float32", (rows, hidden))
    t = g.input("t", "float32", (rows, hidden))
    p = {n: g.param(n, "float32", s) for n, s in shapes.items()}
    for k in range(blocks):
        h = g.mul(g.silu(g.matmul(x, p[f"w1.{k}"])), g.matmul(x, p[f"w2.{k}"]))
        x = x + g.matmul(h, p[f"w3.{k}"])
    g.output("loss", g.mse_loss(x, t))
    rng = np.random.default_rng(5)
    ws = {n: (rng.standard_normal(s) * 0.1).astype(np.float32) for n, s in shapes.items()}
    batch = {"x": rng.standard_normal((rows, hidden)).astype(np.float32),
             "t": rng.standard_normal((rows, hidden)).astype(np.float32)}
    runs = []
    for recompute in (False, True):
        tr = rlx.Trainer(g, "loss", lr=0.01, recompute=recompute)
        for n, v in ws.items():
            tr.set_param(n, v)
        losses = [tr.step(batch) for _ in range(3)]
        runs.append((tr.stats(), losses, tr.get_param("w1.0")))
    (kept, loss0, w0), (again, loss1, w1) = runs
    assert kept["recomputed"] == 0 and kept["recomputed_bytes"] == 0
    # per block silu and the product, [64, 128] f32 each
    assert again["recomputed"] >= 2 * blocks and again["recomputed_bytes"] >= 2 * blocks * rows * ffn * 4
    assert again["transient_bytes"] < kept["transient_bytes"]
    assert again["arena_bytes"] >= again["persistent_bytes"] + again["transient_bytes"]
    assert loss1 == pytest.approx(loss0, rel=1e-6) and loss0[-1] < loss0[0]
    np.testing.assert_allclose(w1, w0, rtol=1e-5, atol=1e-6)


def test_errors():
    g = linear_graph()
    with pytest.raises(rlx.InvalidArgumentError, match="optimizer"):
        rlx.Trainer(g, "loss", optimizer="lbfgs")
    with pytest.raises(rlx.NotFoundError, match="nope"):
        rlx.Trainer(g, "nope")
    with pytest.raises(rlx.NotFoundError, match="ghost"):
        rlx.Trainer(g, "loss", frozen=["ghost"])
    with pytest.raises(rlx.InvalidArgumentError):
        rlx.Trainer(g, "loss", betas=(1.5, 0.9))
    with pytest.raises(TypeError):
        rlx.Trainer(42, "loss")
    tr = rlx.Trainer(g, "loss")
    x, t, w0, b0 = data()
    with pytest.raises(rlx.ShapeError):
        tr.set_param("w", w0[:2])
    with pytest.raises(rlx.NotFoundError):
        tr.set_param("nope", w0)
    tr.set_param("w", w0)
    with pytest.raises(rlx.InvalidArgumentError, match="never set"):
        tr.step({"x": x, "t": t})
    tr.set_param("b", b0)
    with pytest.raises(rlx.DTypeError):
        tr.step({"x": x.astype(np.float64), "t": t})
    with pytest.raises(rlx.ShapeError):
        tr.step({"x": x[:3], "t": t})
    with pytest.raises(rlx.InvalidArgumentError, match="optimizer"):
        tr.step({"opt.hyper": np.zeros(4, np.float32)})
    with pytest.raises(rlx.InvalidArgumentError, match="no step"):
        tr.get_output("y")
    with pytest.raises(rlx.RLXIOError):
        rlx.Trainer("/nonexistent/model.onnx", "loss")


def test_onnx_file_initializers_are_params(tmp_path):
    onnx = pytest.importorskip("onnx", reason="the model is written with the onnx package")
    from onnx import TensorProto, helper, numpy_helper
    x, t, w0, b0 = data(6)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"]),
             helper.make_node("Sub", ["y", "t"], ["d"]), helper.make_node("Mul", ["d", "d"], ["d2"]),
             helper.make_node("ReduceMean", ["d2"], ["loss"], keepdims=0)]
    g = helper.make_graph(nodes, "lin", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", I]),
                                         helper.make_tensor_value_info("t", TensorProto.FLOAT, ["N", O])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          [numpy_helper.from_array(w0, "w"), numpy_helper.from_array(b0, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "lin.onnx"
    onnx.save(m, str(path))
    tr = rlx.Trainer(path, "loss", optimizer="sgd", lr=0.1, weight_decay=0.0, shapes={"x": (N, I), "t": (N, O)})
    names = [p.name for p in tr.get_params()]
    assert names == ["w", "b"]  # plain SGD keeps no state
    np.testing.assert_array_equal(tr.get_param("w"), w0)  # from the file
    gw, gb, loss = ref_grads(x, t, w0, b0)
    assert tr.step({"x": x, "t": t}) == pytest.approx(loss, rel=1e-5)
    np.testing.assert_allclose(tr.get_param("w"), w0 - 0.1 * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tr.get_param("b"), b0 - 0.1 * gb, rtol=1e-5, atol=1e-6)
    losses = [tr.step({"x": x, "t": t}) for _ in range(30)]
    assert losses[-1] < 0.5 * loss
    with pytest.raises(rlx.ShapeError):  # the symbolic batch unbound
        rlx.Trainer(path, "loss")
