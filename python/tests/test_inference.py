"""InferenceSession and Graph: results, metadata, the per-shape cache, and
bit-for-bit agreement with the C API (through the rlx program)."""
import os
import subprocess

import numpy as np
import pytest

import rlx
from conftest import case


def load_case(d, k=0):
    ins, i = [], 0
    while os.path.exists(f"{d}/test_data_set_{k}/input_{i}.pb"):
        ins.append(rlx.read_tensor(f"{d}/test_data_set_{k}/input_{i}.pb"))
        i += 1
    return ins


def test_add_case():
    d = case("test_add")
    s = rlx.InferenceSession(f"{d}/model.onnx")
    names = [i.name for i in s.get_inputs()]
    x, y = load_case(d)
    (out,) = s.run(None, dict(zip(names, (x, y))))
    assert out.dtype == np.float32 and np.array_equal(out, x + y)
    assert [o.name for o in s.get_outputs()] == ["sum"]


def test_bytes_source_and_output_names():
    d = case("test_relu")
    data = open(f"{d}/model.onnx", "rb").read()
    s = rlx.InferenceSession(data)
    (x,) = load_case(d)
    out = s.run([s.get_outputs()[0].name], {s.get_inputs()[0].name: x})
    assert np.array_equal(out[0], np.maximum(x, 0))
    with pytest.raises(rlx.NotFoundError):
        s.run(["nope"], {s.get_inputs()[0].name: x})


def onnx_model_symbolic(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.arange(16, dtype=np.float32).tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [0.5, -1, 2, 0])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Tanh", ["a"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [y], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    p = tmp_path / "sym.onnx"
    onnx.save(m, str(p))
    return str(p)


def test_symbolic_dims_and_shape_cache(tmp_path):
    s = rlx.InferenceSession(onnx_model_symbolic(tmp_path), threads=1)
    (inp,) = s.get_inputs()
    assert inp.name == "x" and inp.shape == ("N", 4) and inp.dtype == "float32"
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    b = np.array([0.5, -1, 2, 0], np.float32)
    for n in (1, 3, 1, 3, 7):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        (y,) = s.run(None, {"x": x})
        assert y.shape == (n, 4)
        np.testing.assert_allclose(y, np.tanh(x @ w + b), rtol=1e-5, atol=1e-6)
    assert s.cached_shapes() == 3
    assert s.get_outputs()[0].shape == (7, 4)


def test_value_inputs_compile_per_value(tmp_path):
    """A Reshape target fed by a graph input, bound by value: another value
    of the same shape compiles another session (never the old values), and
    the first value still runs on its own."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "flat"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                                       helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [12])],
                          [numpy_helper.from_array(np.array([-1], np.int64), "flat")])
    p = tmp_path / "reshape_by_value.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(p))
    s = rlx.InferenceSession(str(p), threads=1, value_inputs=["s"])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for target in ((3, 4), (4, 3), (3, 4), (6, 2)):
        (y,) = s.run(None, {"x": x, "s": np.array(target, np.int64)})
        assert np.array_equal(y, x.reshape(target).T.reshape(-1)), target
    assert s.cached_shapes() == 3


def test_nonzero_on_computed_data_runs_in_stages(tmp_path):
    """y = 2 * r[r > 0.5] with r = relu(x): NonZero reads data the model
    computes, so the session runs the model in stages; the output's length
    follows the data, run after run."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Greater", ["r", "half"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]), helper.make_node("Transpose", ["nz"], ["nzt"]),
             helper.make_node("GatherND", ["r", "nzt"], ["g"]), helper.make_node("Mul", ["g", "two"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
                          [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
                           numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    p = tmp_path / "staged_nonzero.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(p))
    s = rlx.InferenceSession(str(p), threads=1)
    rng = np.random.default_rng()
    for _ in range(4):
        x = rng.uniform(-1, 1.5, (3, 4)).astype(np.float32)
        (y,) = s.run(None, {"x": x})
        r = np.maximum(x, 0)
        assert np.array_equal(y, 2 * r[r > 0.5])
        (y2,) = s.run(["y"], {"x": x})
        assert np.array_equal(y2, y)


def test_bit_exact_with_c_api(tmp_path, cli):
    """The same model and inputs through `rlx run` (the C API) and through
    Python give identical bytes."""
    model = onnx_model_symbolic(tmp_path)
    x = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([cli, "run", model, "--input", f"x={tmp_path / 'x.npy'}", "--threads", "1", "--output-dir",
                    str(tmp_path)], check=True, capture_output=True)
    ref = np.load(tmp_path / "y.npy")
    (y,) = rlx.InferenceSession(model, threads=1).run(None, {"x": x})
    assert y.tobytes() == ref.tobytes()


def test_bit_exact_workload_mlp(cli, tmp_path):
    """A built-in workload through Graph.workload equals `rlx run mlp`'s output bytes."""
    g = rlx.Graph.workload("mlp", batch=4)
    c = g.compile(threads=1)
    c.set_workload_params(1)
    x = np.random.default_rng(2).standard_normal((4, 1024)).astype(np.float32)
    (y,) = c.run({"x": x})
    (y2,) = c.run({"x": x})
    assert y.tobytes() == y2.tobytes() and y.shape == (4, 1024)


def test_graph_builder_matches_numpy():
    g = rlx.Graph()
    x = g.input("x", "float32", (3, 5))
    w = g.param("w", np.float32, (5, 2))
    h = g.softmax(g.tanh(x @ w) * 2.0 + 1.0, axis=-1)
    g.output("y", h)
    g.output("s", g.reduce_sum(x, axes=[1]))
    assert h.shape == (3, 2) and h.dtype == "float32"
    c = g.compile(threads=1, report=True)
    assert "dispatch report" in c.report()
    assert g.to_dot().startswith("digraph") and c.to_dot().startswith("digraph")
    wv = np.random.default_rng(0).standard_normal((5, 2)).astype(np.float32)
    c.set_param("w", wv)
    xv = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    y, s = c.run({"x": xv})
    z = np.tanh(xv @ wv) * 2 + 1
    ref = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(s, xv.sum(1), rtol=1e-5)
    assert [o.name for o in c.get_outputs()] == ["y", "s"]


def test_graph_more_builders():
    g = rlx.Graph()
    x = g.input("x", "float32", (2, 4))
    parts = g.split(x, 1, [1, 3])
    cat = g.concat([parts[1], parts[0]], 1)
    g.output("cat", cat)
    g.output("t", g.transpose(x, [1, 0]))
    g.output("r", g.reshape(x, [8]))
    g.output("am", g.argmax(x, 1))
    g.output("c", g.clip(x, -0.5, 0.5))
    g.output("ln", g.layer_norm(x, eps=1e-5))
    xv = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    cat_v, t, r, am, c, ln = g.compile().run({"x": xv})
    assert np.array_equal(cat_v, np.concatenate([xv[:, 1:], xv[:, :1]], 1))
    assert np.array_equal(t, xv.T) and np.array_equal(r, xv.ravel())
    assert np.array_equal(am, xv.argmax(1)) and am.dtype == np.int64
    assert np.array_equal(c, np.clip(xv, -0.5, 0.5))
    ref = (xv - xv.mean(1, keepdims=True)) / np.sqrt(xv.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln, ref, rtol=1e-4, atol=1e-5)


def test_builder_error_is_exception():
    g = rlx.Graph()
    a = g.input("a", "float32", (2, 3))
    b = g.input("b", "float32", (4, 5))
    with pytest.raises(rlx.ShapeError, match="matmul|shape|3"):
        g.matmul(a, b)
    with pytest.raises(rlx.DTypeError):
        g.input("c", "complex64", (1,))


def test_dlpack_roundtrip():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rlx.Tensor(a)
    assert t.__dlpack_device__() == (1, 0)
    b = rlx.from_dlpack(t)
    assert np.shares_memory(a, b) and np.array_equal(a, b)
    c = np.from_dlpack(t)  # numpy consumes our capsule
    assert np.shares_memory(a, c)
    d = rlx.from_dlpack(a[:, ::2])  # numpy's export, strided
    assert np.array_equal(d, a[:, ::2])
    del t, a
    assert b.sum() == 66  # the memory is kept alive by the importer


def test_dlpack_input_to_run():
    d = case("test_relu")
    s = rlx.InferenceSession(f"{d}/model.onnx")
    (x,) = load_case(d)
    (y,) = s.run(None, {s.get_inputs()[0].name: rlx.Tensor(x)})
    assert np.array_equal(y, np.maximum(x, 0))


def test_sequences_refused_by_name():
    # the C API gives a sequence as one tensor per element; this package takes and returns tensors only
    with pytest.raises(rlx.UnsupportedError, match="output 'res' is a sequence or an optional"):
        rlx.InferenceSession(f"{case('test_if_seq')}/model.onnx")
    with pytest.raises(rlx.UnsupportedError, match="input 'x' is not a numeric tensor"):
        rlx.InferenceSession(f"{case('test_identity_sequence')}/model.onnx")


def test_cuda_says_why():
    d = case("test_relu")
    try:
        rlx.InferenceSession(f"{d}/model.onnx", device="cuda")
    except rlx.UnsupportedError as e:
        assert "cuda" in str(e).lower()
    except rlx.DeviceError as e:  # built with CUDA, no usable GPU
        assert str(e)


def test_a_cuda_device_the_machine_lacks_is_named():
    d = case("test_relu")
    with pytest.raises((rlx.UnsupportedError, rlx.DeviceError)) as e:
        rlx.InferenceSession(f"{d}/model.onnx", device="cuda:63")
    assert "cuda" in str(e.value)


def test_every_public_name_documented_and_stubbed():
    import inspect
    stub = open(os.path.join(os.path.dirname(rlx.__file__), "__init__.pyi")).read()
    for name in rlx.__all__:
        obj = getattr(rlx, name)
        assert obj.__doc__, name
        assert name in stub, name
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for m, f in vars(obj).items():
                if not m.startswith("_") and callable(f):
                    assert f.__doc__, f"{name}.{m}"
                    assert f"def {m}(" in stub, f"{name}.{m}"
