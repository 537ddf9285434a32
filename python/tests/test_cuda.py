"""CUDA memory through DLPack: CUDA tensors as run() inputs (copied device to
device) and outputs as DeviceTensor (torch.from_dlpack without a host
copy), checked against the CPU's results.  The GPU tests need a CUDA build
of RLX, a GPU and torch with CUDA, and skip with the reason otherwise; the
rest (clear errors without a GPU or for the wrong device) run anywhere."""
import ctypes

import numpy as np
import pytest

import rlx


def _rlx_cuda_error():
    try:
        rlx._rlx._check_device("cuda")
    except rlx.RLXError as e:
        return e
    return None


RLX_CUDA_ERROR = _rlx_cuda_error()


def _no_gpu_reason():
    if RLX_CUDA_ERROR is not None:
        return f"RLX cannot use CUDA here: {RLX_CUDA_ERROR}"
    try:
        import torch
    except ImportError:
        return "torch is not importable (the CUDA tests feed torch.cuda tensors)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


NO_GPU = _no_gpu_reason()
gpu = pytest.mark.skipif(NO_GPU is not None, reason=str(NO_GPU))


def _no_onnx_reason():
    """Why this librlx cannot read ONNX models (built without the importer), or None."""
    try:
        rlx._rlx.onnx_inputs("/nonexistent/probe.onnx")
    except rlx.UnsupportedError as e:
        return f"this librlx has no ONNX importer: {e}"
    except rlx.RLXError:
        pass
    return None


NO_ONNX = _no_onnx_reason()
needs_onnx = pytest.mark.skipif(NO_ONNX is not None, reason=str(NO_ONNX))


# ------------------------------------------------------------ anywhere

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class FakeCudaTensor:
    """Claims to be a CUDA tensor (DLPack device (2, 0)); its memory is never
    read, since every use here must be refused first."""

    def __init__(self, shape, device_id=0):
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._m = _DLManaged()
        self._m.dl_tensor.data = 0x1000
        self._m.dl_tensor.device = _DLDevice(2, device_id)
        self._m.dl_tensor.ndim = len(shape)
        self._m.dl_tensor.dtype = _DLDataType(2, 32, 1)
        self._m.dl_tensor.shape = self._shape

    def __dlpack_device__(self):
        return (2, self._m.dl_tensor.device.device_id)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._m), b"dltensor", None)


def relu_graph(shape=(2, 3), dtype="float32"):
    g = rlx.Graph()
    x = g.input("x", dtype, shape)
    g.output("y", g.relu(x))
    return g


def onnx_classifier(path):
    onnx = pytest.importorskip("onnx", reason="the ONNX model is written with the onnx package")
    from onnx import TensorProto, helper
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    w2 = rng.standard_normal((16, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["z"]), helper.make_node("Softmax", ["z"], ["probs"], axis=-1)],
        "classifier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("w1", TensorProto.FLOAT, w1.shape, w1.ravel().tolist()),
         helper.make_tensor("w2", TensorProto.FLOAT, w2.shape, w2.ravel().tolist())])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.mark.skipif(RLX_CUDA_ERROR is None, reason="RLX can use CUDA here: the errors for its absence do not apply")
@needs_onnx
def test_cuda_device_without_gpu_says_why(tmp_path):
    # a symbolic batch, so nothing compiles at construction: the device is checked anyway
    path = onnx_classifier(str(tmp_path / "classifier.onnx"))
    for make in (lambda: rlx.InferenceSession(path, device="cuda"), lambda: relu_graph().compile(device="cuda"),
                 lambda: rlx.LLM(device="cuda", ctx=64)):
        with pytest.raises((rlx.UnsupportedError, rlx.DeviceError)) as e:
            make()
        msg = str(e.value)
        assert "cuda" in msg.lower()
        if isinstance(e.value, rlx.UnsupportedError):
            assert "no backend" in msg  # a build without the CUDA backend
        else:
            assert "device" in msg.lower()  # built with CUDA, no usable GPU


def test_cuda_tensor_into_a_cpu_session_is_refused():
    c = relu_graph().compile()
    with pytest.raises(rlx.UnsupportedError, match="input 'x' is a CUDA tensor; the session runs on the cpu"):
        c.run({"x": FakeCudaTensor((2, 3))})
    with pytest.raises(rlx.UnsupportedError, match="CUDA memory"):
        rlx.from_dlpack(FakeCudaTensor((2, 3)))
    # the session is fine afterwards
    (y,) = c.run({"x": np.array([[-1, 2, 3], [4, -5, 6]], np.float32)})
    assert y.tolist() == [[0, 2, 3], [4, 0, 6]]


@needs_onnx
def test_cuda_outputs_need_a_cuda_session(tmp_path):
    c = relu_graph().compile()
    with pytest.raises(rlx.UnsupportedError, match="needs a session compiled for CUDA"):
        c.run({"x": np.ones((2, 3), np.float32)}, output_device="cuda")
    s = rlx.InferenceSession(onnx_classifier(str(tmp_path / "m.onnx")))
    with pytest.raises(rlx.UnsupportedError, match="needs a session compiled for CUDA"):
        s.run(None, {"x": np.ones((2, 8), np.float32)}, output_device="cuda")
    with pytest.raises(rlx.InvalidArgumentError, match="unknown device"):
        c.run({"x": np.ones((2, 3), np.float32)}, output_device="tpu")


# ------------------------------------------------------------ on a GPU

@gpu
@needs_onnx
def test_onnx_session_torch_cuda_in_numpy_out(tmp_path):
    import torch
    path = onnx_classifier(str(tmp_path / "classifier.onnx"))
    cpu = rlx.InferenceSession(path)
    cuda = rlx.InferenceSession(path, device="cuda")
    for batch in (2, 5):
        x = torch.randn(batch, 8, device="cuda")
        (ref,) = cpu.run(None, {"x": x.cpu().numpy()})
        (got,) = cuda.run(None, {"x": x})
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    assert cuda.cached_shapes() == 2


@gpu
@needs_onnx
def test_onnx_session_cuda_out_through_dlpack(tmp_path):
    import torch
    path = onnx_classifier(str(tmp_path / "classifier.onnx"))
    cpu = rlx.InferenceSession(path)
    cuda = rlx.InferenceSession(path, device="cuda")
    x = torch.randn(4, 8, device="cuda")
    (ref,) = cpu.run(None, {"x": x.cpu().numpy()})
    (out,) = cuda.run(None, {"x": x}, output_device="cuda")
    assert isinstance(out, rlx.DeviceTensor)
    assert out.__dlpack_device__() == (2, 0) and out.shape == (4, 3) and out.dtype == "float32"
    t = torch.from_dlpack(out)
    assert t.is_cuda and t.device.index == 0 and tuple(t.shape) == (4, 3) and t.dtype == torch.float32
    del out  # the tensor keeps the memory alive
    torch.cuda.synchronize()
    np.testing.assert_allclose(t.cpu().numpy(), ref, rtol=1e-4, atol=1e-5)
    # a second run writes new memory: the first result stays as it was
    (out2,) = cuda.run(None, {"x": x * 2}, output_device="cuda")
    np.testing.assert_allclose(t.cpu().numpy(), ref, rtol=1e-4, atol=1e-5)
    assert not torch.equal(torch.from_dlpack(out2), t)


@gpu
def test_compiled_graph_cuda_in_and_out():
    import torch
    g = rlx.Graph()
    x = g.input("x", "float32", (8, 16))
    w = g.param("w", "float32", (16, 4))
    g.output("y", g.softmax(g.gelu(x @ w), axis=-1))
    g.output("s", g.reduce_sum(x, [1]))
    rng = np.random.default_rng(3)
    wv = rng.standard_normal((16, 4)).astype(np.float32)
    cpu, cuda = g.compile(), g.compile(device="cuda")
    cpu.set_param("w", wv)
    cuda.set_param("w", wv)
    xt = torch.randn(8, 16, device="cuda")
    ref = cpu.run({"x": xt.cpu().numpy()})
    outs = cuda.run({"x": xt}, output_device="cuda")
    assert [o.shape for o in outs] == [(8, 4), (8,)]
    for r, o in zip(ref, outs):
        np.testing.assert_allclose(torch.from_dlpack(o).cpu().numpy(), r, rtol=1e-4, atol=1e-5)
    # host inputs and device outputs mix, and named outputs
    (s,) = cuda.run({"x": xt.cpu().numpy()}, ["s"], output_device="cuda")
    np.testing.assert_allclose(torch.from_dlpack(s).cpu().numpy(), ref[1], rtol=1e-4, atol=1e-5)


def _gpu_count():
    try:
        import torch
        return torch.cuda.device_count() if NO_GPU is None else 0
    except ImportError:
        return 0


def _check_on(device, shape=(64, 48), threads_runs=20):
    """A graph compiled for `device` (cuda:N) against the CPU, fed tensors
    of that GPU, its outputs on that GPU; returns the compiled graph."""
    import torch
    index = int(device.split(":")[1]) if ":" in device else 0
    g = rlx.Graph()
    x = g.input("x", "float32", shape)
    w = g.param("w", "float32", (shape[1], 8))
    g.output("y", g.gelu(x @ w))
    wv = np.random.default_rng(index).standard_normal((shape[1], 8)).astype(np.float32)
    cpu, dev = g.compile(), g.compile(device=device)
    cpu.set_param("w", wv)
    dev.set_param("w", wv)
    for _ in range(threads_runs):
        xt = torch.randn(*shape, device=f"cuda:{index}")
        (ref,) = cpu.run({"x": xt.cpu().numpy()})
        (out,) = dev.run({"x": xt}, output_device="cuda")
        assert out.device == f"cuda:{index}" and out.__dlpack_device__() == (2, index)
        t = torch.from_dlpack(out)
        assert t.device.index == index
        np.testing.assert_allclose(t.cpu().numpy(), ref, rtol=1e-4, atol=1e-5)
    return dev


@gpu
def test_explicit_device_index():
    _check_on("cuda:0")
    with pytest.raises(rlx.DeviceError, match=f"cuda:{_gpu_count()}"):
        relu_graph().compile(device=f"cuda:{_gpu_count()}")


@pytest.mark.skipif(_gpu_count() < 2, reason="needs two GPUs (this machine has fewer, or none usable)")
def test_two_sessions_on_two_gpus_at_once():
    import threading
    import torch
    errors = []

    def work(device):
        try:
            _check_on(device, threads_runs=50)
        except Exception as e:  # reported below
            errors.append((device, e))

    ts = [threading.Thread(target=work, args=(d,)) for d in ("cuda:0", "cuda:1", "cuda:1", "cuda:0")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    # a tensor of the other GPU is refused, naming both
    c = relu_graph().compile(device="cuda:1")
    with pytest.raises(rlx.InvalidArgumentError, match="runs on cuda:1"):
        c.run({"x": torch.randn(2, 3, device="cuda:0")})


@gpu
def test_input_made_on_a_side_stream():
    import torch
    c = relu_graph((1024, 1024)).compile(device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.randn(1024, 1024, device="cuda")
        x = (a @ a) - 3.0  # still queued on the side stream when run() is called
        (y,) = c.run({"x": x}, output_device="cuda")
        yt = torch.from_dlpack(y)
    torch.cuda.synchronize()
    assert torch.equal(yt, torch.relu(x))


@gpu
def test_half_precision_tensors():
    import torch
    for dtype, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        c = relu_graph((4, 5), name).compile(device="cuda")
        x = torch.randn(4, 5, device="cuda").to(dtype)
        (y,) = c.run({"x": x}, output_device="cuda")
        assert y.dtype == name
        yt = torch.from_dlpack(y)
        assert yt.dtype == dtype and torch.equal(yt, torch.relu(x))


@gpu
def test_device_input_errors():
    import torch
    c = relu_graph((2, 3)).compile(device="cuda")
    with pytest.raises(rlx.InvalidArgumentError, match="contiguous"):
        c.run({"x": torch.randn(3, 2, device="cuda").t()})
    with pytest.raises(rlx.DTypeError, match="must be f32"):
        c.run({"x": torch.randn(2, 3, device="cuda").double()})
    with pytest.raises(rlx.ShapeError, match="must have shape"):
        c.run({"x": torch.randn(3, 2, device="cuda")})
    if torch.cuda.device_count() > 1:
        with pytest.raises(rlx.InvalidArgumentError, match="runs on cuda:0"):
            c.run({"x": torch.randn(2, 3, device="cuda:1")})
    cpu = relu_graph((2, 3)).compile()
    with pytest.raises(rlx.UnsupportedError, match="CUDA tensor"):
        cpu.run({"x": torch.randn(2, 3, device="cuda")})


@gpu
def test_device_tensor_memory_is_freed():
    import torch
    c = relu_graph((1024, 1024)).compile(device="cuda")
    x = torch.randn(1024, 1024, device="cuda")
    free0 = torch.cuda.mem_get_info()[0]
    for _ in range(200):  # 4 MiB each: 800 MiB if none were freed
        (y,) = c.run({"x": x}, output_device="cuda")
        t = torch.from_dlpack(y)
        del y, t
    assert free0 - torch.cuda.mem_get_info()[0] < 64 << 20


@gpu
def test_llm_on_cuda_generates():
    m = rlx.LLM(device="cuda", ctx=64)
    a = m.generate("Once upon a time", max_tokens=8, temperature=0)
    assert a and a == "".join(m.generate("Once upon a time", max_tokens=8, temperature=0, stream=True))

