"""RLX from Python: run ONNX models and graphs built here, on the CPU (and on
CUDA where the library was built with it and a GPU is present).

    import numpy as np, rlx
    sess = rlx.InferenceSession("model.onnx")
    (y,) = sess.run(None, {"x": np.ones((1, 4), np.float32)})

    g = rlx.Graph()
    x = g.input("x", "float32", (2, 3))
    g.output("y", g.relu(x))
    (y,) = g.compile().run({"x": np.ones((2, 3), np.float32)})

    llm = rlx.LLM()                  # the built-in decoder-small, or a .gguf / safetensors folder
    for piece in llm.generate("Once upon a time", max_tokens=32, stream=True):
        print(piece, end="")

Every error of the C library is raised as an RLXError subclass carrying the
library's message.  Runs release the GIL; one session is safe to use from
several threads (its runs are serialised by a lock of its own), and
different sessions run in parallel.
"""
from __future__ import annotations

import codecs
import os
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _rlx
from ._rlx import (  # noqa: F401  (re-exported)
    DeviceError,
    DTypeError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfMemoryError,
    RLXError,
    RLXIOError,
    RLXRuntimeError,
    ShapeError,
    UnsupportedError,
)

__version__ = _rlx.version()

__all__ = [
    "InferenceSession", "Graph", "Node", "CompiledGraph", "Trainer", "TensorInfo", "Tensor", "DeviceTensor", "LLM",
    "from_dlpack",
    "read_tensor", "version", "cpu_gemm_info", "RLXError", "InvalidArgumentError", "ShapeError",
    "DTypeError", "NotFoundError", "UnsupportedError", "RLXIOError", "FormatError", "OutOfMemoryError",
    "DeviceError", "RLXRuntimeError", "InternalError",
]

_DTYPE_NAMES = _rlx.dtype_names()  # by rlx_dtype: f32 f16 bf16 f64 i64 i32 i8 u8 bool
_ALIASES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
    "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "bool", "bool_": "bool",
}
_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "f64": np.float64, "i64": np.int64,
          "i32": np.int32, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}
_PRECISIONS = {"f32": 0, "float32": 0, "f16": 1, "float16": 1, "bf16": 2, "bfloat16": 2}


def version() -> str:
    """The library's version string."""
    return _rlx.version()


def cpu_gemm_info() -> str:
    """The CPU backend's GEMM library and kernels in use."""
    return _rlx.cpu_gemm_info()


def _dtype_code(dtype: Any) -> int:
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    else:
        name = _ALIASES.get(np.dtype(dtype).name)
    if name not in _DTYPE_NAMES:
        raise DTypeError(f"unknown dtype {dtype!r} (RLX has {', '.join(_DTYPE_NAMES)})")
    return _DTYPE_NAMES.index(name)


def _device(device: str) -> Tuple[str, int, int]:
    """The device's text and its (kind, index): kind 0 cpu, 1 cuda; "cuda" is
    cuda:0.  The library parses it (rlx_device_parse)."""
    text = str(device)
    kind, index = _rlx._parse_device(text)
    return text, kind, index


def _precision_code(precision: str) -> int:
    if precision not in _PRECISIONS:
        raise InvalidArgumentError(f"unknown precision {precision!r} (f32, f16 or bf16)")
    return _PRECISIONS[precision]


def _output_device(output_device: str, session_device: str) -> bool:
    """True for outputs in CUDA memory ("cuda"), False for numpy arrays ("cpu")."""
    on_device = _device(output_device)[1] == 1
    if on_device and _device(session_device)[1] != 1:
        raise UnsupportedError(f"output_device={output_device!r} needs a session compiled for CUDA (device='cuda'); "
                               f"this one runs on {session_device!r}")
    return on_device


def _check_threads(threads: int) -> int:
    if not isinstance(threads, int) or threads < 0:
        raise InvalidArgumentError(f"threads must be an int >= 0 (0: all cores), got {threads!r}")
    return threads


class TensorInfo:
    """An input or output: name, shape (None or a str for a dimension not
    known before the input shapes are) and dtype name (numpy spelling;
    bfloat16 travels as uint16 bit patterns)."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name: str, shape: Optional[Tuple[Any, ...]], dtype: Optional[str]):
        self.name = name
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"TensorInfo(name={self.name!r}, shape={self.shape!r}, dtype={self.dtype!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorInfo) and (self.name, self.shape, self.dtype) == (
            other.name, other.shape, other.dtype)


def _np_name(code_or_name: Union[int, str]) -> str:
    name = _DTYPE_NAMES[code_or_name] if isinstance(code_or_name, int) else code_or_name
    return {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64",
            "i32": "int32", "i8": "int8", "u8": "uint8", "bool": "bool",
            "string": "str"}[name]  # strings: outputs an ONNX import computed, arrays of str


class InferenceSession:
    """An ONNX model, compiled once per distinct set of input shapes (the C
    library's model cache, rlx_model_load_onnx / rlx_model_session).

    path_or_bytes: a .onnx file path, or the model's bytes (external data
    then comes from base_dir).  device: "cpu", "cuda" or "cuda:N" (an UnsupportedError
    says why where CUDA is not available).  precision: "f32", "f16" or
    "bf16".  threads: CPU threads, 0 for all cores.  value_inputs: names of
    inputs bound by value at import (they become constants, so shape
    computations reading them fold; each distinct value compiles once and
    its session is kept, so a new value never runs on an old one's graph):
    what a model needs when a Reshape target or a Range limit is a graph
    input.

    Thread safety: run() may be called from several threads at once; runs of
    one session are serialised by a lock of its own (the GIL is released
    while compiling and running, so other sessions and Python threads go on).

    CUDA memory: with device="cuda", an input may be a CUDA tensor of
    another library (any object with __dlpack__ whose __dlpack_device__ is
    (2, N) for the session's cuda:N, e.g. a torch.cuda tensor): it is copied
    device to device into
    the session (no host round trip), after the producer's queued work (it
    is asked for DLPack stream 1).  run(..., output_device="cuda") returns
    DeviceTensor objects (device memory of their own, for
    torch.from_dlpack).  A CPU session refuses CUDA tensors with an
    UnsupportedError.
    """

    def __init__(self, path_or_bytes: Union[str, bytes, os.PathLike], device: str = "cpu",
                 precision: str = "f32", threads: int = 0, base_dir: Optional[str] = None,
                 value_inputs: Sequence[str] = ()):
        self.device = str(device)
        self.precision = precision
        (dev, kind, _), prec, thr = _device(device), _precision_code(precision), _check_threads(threads)
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            fd, tmp = tempfile.mkstemp(suffix=".onnx")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                ins, outs = _rlx.onnx_inputs(tmp)
                out_kinds = _rlx.onnx_outputs(tmp)
            finally:
                os.unlink(tmp)
            source: Union[str, bytes] = data
        else:
            source = os.fspath(path_or_bytes)
            ins, outs = _rlx.onnx_inputs(source)
            out_kinds = _rlx.onnx_outputs(source)
            if base_dir is None:
                base_dir = os.path.dirname(os.path.abspath(source))
        for name, dt, _dims, is_tensor, onnx_type in ins:
            if not is_tensor or onnx_type == 8:
                raise UnsupportedError(f"input '{name}' is not a numeric tensor (sequence, map, optional or "
                                       "string inputs are not supported)")
            if not 0 <= dt < len(_DTYPE_NAMES):
                raise UnsupportedError(f"input '{name}' has ONNX element type {onnx_type}, which RLX lacks")
        for name, out_kind in out_kinds:
            if out_kind != 0:  # the C API gives such an output as outputs NAME[i]; this package returns tensors only
                raise UnsupportedError(f"output '{name}' is a sequence or an optional (not supported)")
        self._inputs = [TensorInfo(n, None if dims is None else tuple(dims), _np_name(dt))
                        for n, dt, dims, _t, _o in ins]
        self._output_names = list(outs)
        value_inputs = set(value_inputs)
        unknown = value_inputs - {i[0] for i in ins}
        if unknown:
            raise NotFoundError(f"value_inputs: {sorted(unknown)} not inputs of the model")
        self._model = _rlx._Model(source, [(n, dt, dims, n in value_inputs) for n, dt, dims, _t, _o in ins], dev,
                                  prec, thr, base_dir)
        self._last_outputs: Optional[List[TensorInfo]] = None
        # set when an op needs values the model computes at import: run() then
        # runs the model in stages (rlx_model_run; host arrays only)
        self._staged = False
        if kind == 1:  # a missing backend or GPU shows here, whatever the shapes
            _rlx._check_device(dev)
        if kind == 1:  # compile once now where the shapes allow
            if all(i.shape is not None and all(isinstance(d, int) for d in i.shape) for i in self._inputs):
                self._compile_for(self._zeros())

    def _zeros(self) -> Dict[str, np.ndarray]:
        return {i.name: np.zeros(i.shape, _NUMPY[_ALIASES.get(i.dtype, i.dtype)]) for i in self._inputs}

    def _compile_for(self, feeds: Dict[str, Any]) -> None:
        _ins, outs = self._model.compiled_info(feeds)
        self._last_outputs = [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in outs]

    def get_inputs(self) -> List[TensorInfo]:
        """The model's graph inputs as declared: a symbolic dim is its name
        (a str), or None where the model leaves it unnamed."""
        return list(self._inputs)

    def get_outputs(self) -> List[TensorInfo]:
        """The model's outputs; shapes and dtypes of the last shapes run
        (or, before any run, of the declared shapes when every input dim
        is fixed), else None."""
        last = self._model.last_outputs()
        if last is not None:
            self._last_outputs = [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in last]
        if self._last_outputs is None and all(
                i.shape is not None and None not in i.shape for i in self._inputs):
            try:
                self._compile_for(self._zeros())
            except RLXError:
                pass
        if self._last_outputs is not None:
            return list(self._last_outputs)
        return [TensorInfo(n, None, None) for n in self._output_names]

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            output_device: str = "cpu") -> List[Any]:
        """Runs the model on input_feed ({name: array}) and returns the
        outputs named (all, in model order, for None) as new numpy arrays,
        or with output_device="cuda" (a CUDA session) as DeviceTensor
        objects in device memory.

        Arrays that are C-contiguous with the input's dtype are read in
        place (no copy); other layouts are copied; another dtype is a
        DTypeError naming the input.  CUDA tensors (DLPack device (2, N) of cuda:N,
        dense) are copied device to device.  A new set of input shapes
        compiles once and is kept.  A model whose ops need values it
        computes (NonZero, NonMaxSuppression, ... on its own data) runs in
        stages (rlx_model_run: host arrays in and out)."""
        if output_names is not None:
            output_names = list(output_names)
        on_device = _output_device(output_device, self.device)
        if not self._staged:
            try:
                out = self._model.run(input_feed, output_names, on_device)
                return [DeviceTensor(b) for b in out] if on_device else out
            except UnsupportedError as e:
                if "must be known at import time" not in str(e) or on_device:
                    raise
                self._staged = True  # an op needs values the model computes: run it in stages from now on
        outs = dict(zip(self._output_names, self._model.run_staged(input_feed)))
        missing = [n for n in (output_names or []) if n not in outs]
        if missing:
            raise NotFoundError(f"no output(s) {missing} (outputs: {self._output_names})")
        return [outs[n] for n in (output_names if output_names is not None else self._output_names)]

    def cached_shapes(self) -> int:
        """How many input shapes have been compiled."""
        return self._model.cached_sessions()


class CompiledGraph:
    """A Graph compiled for a device (rlx_compile).  run() is thread-safe
    (serialised per compiled graph); the GIL is released while it runs."""

    def __init__(self, session: "_rlx._Session", device: str = "cpu"):
        self._s = session
        self.device = device

    def get_inputs(self) -> List[TensorInfo]:
        """Inputs: name, shape, dtype."""
        return [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in self._s.info(0)]

    def get_params(self) -> List[TensorInfo]:
        """Params (weights set with set_param)."""
        return [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in self._s.info(1)]

    def get_outputs(self) -> List[TensorInfo]:
        """Outputs: name, shape, dtype."""
        return [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in self._s.info(2)]

    def set_param(self, name: str, value: Any) -> None:
        """Copies a param's value in (kept across runs)."""
        self._s.set_param(name, value)

    def run(self, inputs: Dict[str, Any], output_names: Optional[Sequence[str]] = None,
            output_device: str = "cpu") -> List[Any]:
        """Runs with inputs {name: array, or a CUDA tensor for a CUDA
        graph}; returns the outputs (all, or those named) as new numpy
        arrays, or as DeviceTensor objects with output_device="cuda"."""
        on_device = _output_device(output_device, self.device)
        out = self._s.run(inputs, None if output_names is None else list(output_names), on_device)
        return [DeviceTensor(b) for b in out] if on_device else out

    def report(self) -> str:
        """The per-op dispatch report (compile with report=True), else ""."""
        return self._s.report()

    def to_dot(self, title: Optional[str] = None) -> str:
        """The optimized graph as Graphviz text."""
        return self._s.to_dot(title)

    def stats(self) -> Dict[str, int]:
        """Node counts through the stages, arena bytes, thunks."""
        return self._s.stats()


class Node:
    """A node of a Graph: its id, shape and dtype.  Arithmetic operators
    (+ - * / @, unary -) build nodes; Python numbers become scalars of the
    node's dtype."""

    __slots__ = ("graph", "id")

    def __init__(self, graph: "Graph", id: int):
        self.graph = graph
        self.id = id

    @property
    def shape(self) -> Tuple[int, ...]:
        """The inferred shape."""
        return self.graph._g.node_info(self.id)[0]

    @property
    def dtype(self) -> str:
        """The inferred dtype (numpy spelling)."""
        return _np_name(self.graph._g.node_info(self.id)[1])

    def __repr__(self) -> str:
        return f"Node({self.id}, shape={self.shape}, dtype={self.dtype})"

    def _other(self, v: Any) -> "Node":
        if isinstance(v, Node):
            return v
        return self.graph.scalar(v, self.dtype)

    def __add__(self, o: Any) -> "Node": return self.graph.add(self, self._other(o))
    def __radd__(self, o: Any) -> "Node": return self.graph.add(self._other(o), self)
    def __sub__(self, o: Any) -> "Node": return self.graph.sub(self, self._other(o))
    def __rsub__(self, o: Any) -> "Node": return self.graph.sub(self._other(o), self)
    def __mul__(self, o: Any) -> "Node": return self.graph.mul(self, self._other(o))
    def __rmul__(self, o: Any) -> "Node": return self.graph.mul(self._other(o), self)
    def __truediv__(self, o: Any) -> "Node": return self.graph.div(self, self._other(o))
    def __rtruediv__(self, o: Any) -> "Node": return self.graph.div(self._other(o), self)
    def __matmul__(self, o: "Node") -> "Node": return self.graph.matmul(self, o)
    def __neg__(self) -> "Node": return self.graph.neg(self)


def _ids(nodes: Sequence[Node]) -> List[int]:
    return [n.id for n in nodes]


def _opt(n: Optional[Node]) -> int:
    return -1 if n is None else n.id


class Graph:
    """A tensor graph built through the C API's builders (rlx.h), one method
    per builder.  Shapes are static; every method returns a Node (or a tuple
    of them) and raises an RLXError subclass with the library's message when
    the builder fails."""

    def __init__(self) -> None:
        self._g = _rlx._Graph()

    @classmethod
    def workload(cls, name: str, batch: int = 0, seq: int = 0) -> "Graph":
        """A built-in workload of bench/WORKLOADS.md ("encoder", "mlp",
        "resnet50", "decoder-small", "decoder"); its weights are params
        (CompiledGraph.set_workload_params fills them, seeded)."""
        g = cls.__new__(cls)
        g._g = _rlx._Graph.from_workload(name, batch, seq)
        return g

    def _n(self, i: int) -> Node:
        return Node(self, i)

    # leaves and outputs
    def input(self, name: str, dtype: Any, shape: Sequence[int]) -> Node:
        """A graph input."""
        return self._n(self._g.leaf(False, name, _dtype_code(dtype), list(shape)))

    def param(self, name: str, dtype: Any, shape: Sequence[int]) -> Node:
        """A param (a weight, set after compiling with set_param)."""
        return self._n(self._g.leaf(True, name, _dtype_code(dtype), list(shape)))

    def constant(self, value: Any, dtype: Any = None) -> Node:
        """A constant holding a copy of value (an array; dtype defaults to its own)."""
        arr = np.asarray(value) if dtype is None else np.asarray(value, dtype=_NUMPY[_ALIASES.get(
            dtype, dtype) if isinstance(dtype, str) else _ALIASES[np.dtype(dtype).name]])
        return self._n(self._g.constant(arr, _dtype_code(arr.dtype) if dtype is None else _dtype_code(dtype)))

    def scalar(self, value: float, dtype: Any = "float32") -> Node:
        """A 0-d constant."""
        return self._n(self._g.scalar(_dtype_code(dtype), float(value)))

    def output(self, name: str, node: Node) -> None:
        """Marks node as the output called name."""
        self._g.output(name, node.id)

    def set_name(self, node: Node, name: str) -> None:
        """Names a node (used in messages and reports)."""
        self._g.set_name(node.id, name)

    # elementwise
    def mod(self, a: Node, b: Node, fmod: bool = False) -> Node:
        """Remainder: the divisor's sign (Python), or the dividend's (fmod)."""
        return self._n(self._g.mod(a.id, b.id, fmod))

    def where(self, cond: Node, a: Node, b: Node) -> Node:
        """cond ? a : b, broadcast."""
        return self._n(self._g.where(cond.id, a.id, b.id))

    def cast(self, x: Node, dtype: Any) -> Node:
        """x converted to dtype."""
        return self._n(self._g.cast(x.id, _dtype_code(dtype)))

    def clip(self, x: Node, lo: float, hi: float) -> Node:
        """x clamped to [lo, hi]."""
        return self._n(self._g.clip(x.id, float(lo), float(hi)))

    # linear algebra, reductions, normalisation
    def matmul(self, a: Node, b: Node, trans_a: bool = False, trans_b: bool = False) -> Node:
        """Batched matmul, batch dims broadcast."""
        return self._n(self._g.matmul(a.id, b.id, trans_a, trans_b))

    def _reduce(self, op: str, x: Node, axes: Optional[Sequence[int]], keepdims: bool) -> Node:
        return self._n(self._g.reduce(op, x.id, None if axes is None else list(axes), keepdims))

    def reduce_sum(self, x: Node, axes: Optional[Sequence[int]] = None, keepdims: bool = False) -> Node:
        """Sum over axes (None: all)."""
        return self._reduce("sum", x, axes, keepdims)

    def reduce_mean(self, x: Node, axes: Optional[Sequence[int]] = None, keepdims: bool = False) -> Node:
        """Mean over axes (None: all)."""
        return self._reduce("mean", x, axes, keepdims)

    def reduce_max(self, x: Node, axes: Optional[Sequence[int]] = None, keepdims: bool = False) -> Node:
        """Max over axes (None: all)."""
        return self._reduce("max", x, axes, keepdims)

    def reduce_min(self, x: Node, axes: Optional[Sequence[int]] = None, keepdims: bool = False) -> Node:
        """Min over axes (None: all)."""
        return self._reduce("min", x, axes, keepdims)

    def reduce_prod(self, x: Node, axes: Optional[Sequence[int]] = None, keepdims: bool = False) -> Node:
        """Product over axes (None: all)."""
        return self._reduce("prod", x, axes, keepdims)

    def argmax(self, x: Node, axis: int, keepdims: bool = False) -> Node:
        """Index (int64) of the first maximum along axis."""
        return self._n(self._g.arg(True, x.id, axis, keepdims))

    def argmin(self, x: Node, axis: int, keepdims: bool = False) -> Node:
        """Index (int64) of the first minimum along axis."""
        return self._n(self._g.arg(False, x.id, axis, keepdims))

    def softmax(self, x: Node, axis: int = -1) -> Node:
        """Softmax along axis."""
        return self._n(self._g.softmax(x.id, axis, False))

    def log_softmax(self, x: Node, axis: int = -1) -> Node:
        """Log-softmax along axis."""
        return self._n(self._g.softmax(x.id, axis, True))

    def layer_norm(self, x: Node, gamma: Optional[Node] = None, beta: Optional[Node] = None,
                   eps: float = 1e-5) -> Node:
        """LayerNorm over the last axis."""
        return self._n(self._g.norm(False, x.id, _opt(gamma), _opt(beta), eps))

    def rms_norm(self, x: Node, gamma: Optional[Node] = None, eps: float = 1e-6) -> Node:
        """RMSNorm over the last axis."""
        return self._n(self._g.norm(True, x.id, _opt(gamma), -1, eps))

    def batch_norm(self, x: Node, scale: Node, bias: Node, mean: Node, var: Node, eps: float = 1e-5) -> Node:
        """Inference batch norm over axis 1."""
        return self._n(self._g.batch_norm(x.id, scale.id, bias.id, mean.id, var.id, eps))

    # shapes
    def reshape(self, x: Node, shape: Sequence[int]) -> Node:
        """Reshape (one -1 inferred, 0 copies that dim)."""
        return self._n(self._g.reshape(x.id, list(shape)))

    def transpose(self, x: Node, perm: Sequence[int]) -> Node:
        """Permute the axes."""
        return self._n(self._g.transpose(x.id, list(perm)))

    def slice(self, x: Node, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
              steps: Optional[Sequence[int]] = None) -> Node:
        """Slice the listed axes (start, end clamped; negative steps allowed)."""
        steps = [1] * len(axes) if steps is None else list(steps)
        return self._n(self._g.slice(x.id, list(axes), list(starts), list(ends), steps))

    def concat(self, xs: Sequence[Node], axis: int) -> Node:
        """Concatenate along axis."""
        return self._n(self._g.concat(_ids(xs), axis))

    def split(self, x: Node, axis: int, sizes: Sequence[int]) -> Tuple[Node, ...]:
        """Split along axis into parts of the given sizes."""
        return tuple(self._n(i) for i in self._g.split(x.id, axis, list(sizes)))

    def gather(self, data: Node, indices: Node, axis: int = 0) -> Node:
        """numpy take."""
        return self._n(self._g.gather(data.id, indices.id, axis))

    def expand(self, x: Node, shape: Sequence[int]) -> Node:
        """Broadcast to shape."""
        return self._n(self._g.expand(x.id, list(shape)))

    def pad(self, x: Node, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Node:
        """Pad (all begins, then all ends); mode constant, reflect or edge."""
        modes = {"constant": 0, "reflect": 1, "edge": 2}
        if mode not in modes:
            raise InvalidArgumentError(f"pad mode {mode!r}: constant, reflect or edge")
        return self._n(self._g.pad(x.id, list(pads), modes[mode], float(value)))

    # transformer and convolution ops
    def rope(self, x: Node, theta: float = 10000.0, offset: int = 0, interleaved: bool = False) -> Node:
        """Rotary position embedding over x [..., S, D]."""
        return self._n(self._g.rope(x.id, theta, offset, interleaved))

    def attention(self, q: Node, k: Node, v: Node, mask: Optional[Node] = None, causal: bool = False,
                  scale: float = 0.0) -> Node:
        """Scaled dot-product attention (scale 0: 1/sqrt(D))."""
        return self._n(self._g.attention(q.id, k.id, v.id, _opt(mask), causal, scale))

    def conv(self, x: Node, w: Node, bias: Optional[Node] = None, stride: Sequence[int] = (1, 1),
             dilation: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0), groups: int = 1) -> Node:
        """1-d/2-d convolution."""
        return self._n(self._g.conv(x.id, w.id, _opt(bias), list(stride), list(dilation), list(pads), groups))

    def _pool(self, is_max: bool, x: Node, kernel: Sequence[int], stride: Optional[Sequence[int]],
              dilation: Sequence[int], pads: Sequence[int], count_include_pad: bool, ceil_mode: bool) -> Node:
        stride = list(kernel) if stride is None else list(stride)
        return self._n(self._g.pool(is_max, x.id, list(kernel), stride, list(dilation), list(pads),
                                    count_include_pad, ceil_mode))

    def max_pool(self, x: Node, kernel: Sequence[int], stride: Optional[Sequence[int]] = None,
                 dilation: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                 ceil_mode: bool = False) -> Node:
        """Max pooling (stride defaults to the kernel)."""
        return self._pool(True, x, kernel, stride, dilation, pads, False, ceil_mode)

    def avg_pool(self, x: Node, kernel: Sequence[int], stride: Optional[Sequence[int]] = None,
                 dilation: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                 count_include_pad: bool = False, ceil_mode: bool = False) -> Node:
        """Average pooling (stride defaults to the kernel)."""
        return self._pool(False, x, kernel, stride, dilation, pads, count_include_pad, ceil_mode)

    # random
    def random_uniform(self, dtype: Any, shape: Sequence[int], lo: float = 0.0, hi: float = 1.0) -> Node:
        """Uniform random values, new for each run (seeded by compile's seed)."""
        return self._n(self._g.random(False, _dtype_code(dtype), list(shape), lo, hi))

    def random_normal(self, dtype: Any, shape: Sequence[int], mean: float = 0.0, std: float = 1.0) -> Node:
        """Normal random values, new for each run."""
        return self._n(self._g.random(True, _dtype_code(dtype), list(shape), mean, std))

    def dropout(self, x: Node, p: float) -> Node:
        """Zero with probability p, scale the rest by 1/(1-p)."""
        return self._n(self._g.dropout(x.id, p))

    # training
    def gradients(self, loss: Node, wrt: Sequence[Node]) -> List[Node]:
        """Appends reverse-mode gradients of loss (one float element) with
        respect to each node of wrt (rlx_gradients); returns them, each of
        its node's shape and dtype.  Name them with output() to read them."""
        return [self._n(i) for i in self._g.gradients(loss.id, _ids(wrt))]

    def cross_entropy(self, logits: Node, labels: Node, ignore_index: int = -100,
                      label_smoothing: float = 0.0) -> Node:
        """torch.nn.functional.cross_entropy of logits [..., C] against class
        indices labels [...] (int64/int32): the mean over rows whose label is
        not ignore_index."""
        return self._n(self._g.cross_entropy(logits.id, labels.id, int(ignore_index), float(label_smoothing)))

    def mse_loss(self, pred: Node, target: Node) -> Node:
        """mean((pred - target)**2), broadcasting as sub does."""
        return self._n(self._g.mse_loss(pred.id, target.id))

    # whole graph
    def node_count(self) -> int:
        """Number of nodes."""
        return self._g.node_count()

    def verify(self) -> None:
        """Raises the first builder or graph error, if any."""
        self._g.verify()

    def to_dot(self, title: Optional[str] = None) -> str:
        """Graphviz text of the graph as built."""
        return self._g.to_dot(title)

    def compile(self, device: str = "cpu", precision: str = "f32", threads: int = 0, report: bool = False,
                seed: int = 0) -> CompiledGraph:
        """Optimizes, plans and prepares the graph (the GIL is released).
        report=True keeps the dispatch report (CompiledGraph.report())."""
        return CompiledGraph(self._g.compile(_device(device)[0], _precision_code(precision),
                                             _check_threads(threads), report, seed), str(device))

    def run(self, inputs: Dict[str, Any], **compile_options: Any) -> List[np.ndarray]:
        """compile(**compile_options).run(inputs), for one-off use."""
        return self.compile(**compile_options).run(inputs)


def _add_builder(name: str, arity: int) -> None:
    if arity == 1:
        def method(self: Graph, x: Node) -> Node:
            return self._n(self._g.unary(name, x.id))
    else:
        def method(self: Graph, a: Node, b: Node) -> Node:  # type: ignore[misc]
            return self._n(self._g.binary(name, a.id, b.id))
    method.__name__ = name
    method.__qualname__ = "Graph." + name
    method.__doc__ = f"The {name} builder (rlx.h), elementwise" + (
        "; numpy broadcasting." if arity == 2 else ".")
    setattr(Graph, name, method)


_unary, _binary = _rlx.ops_names()
for _name in _unary:
    _add_builder(_name, 1)
for _name in _binary:
    _add_builder(_name, 2)


_OPTIMIZERS = {"sgd": 0, "adam": 1, "adamw": 2}


class Trainer:
    """Training of a graph's float params against its loss output
    (rlx_trainer): forward, gradients and the optimizer's update compiled
    into one step that updates the params in place on the device.

    source: an rlx.Graph, or an ONNX file whose float initializers of rank
    >= 1 become the params, set from the file (shapes: {input name: shape}
    binds symbolic dims).  loss: the name of the output holding the loss.
    The optimizer options are torch.optim's: optimizer "adamw", "adam" or
    "sgd"; lr, betas, eps, weight_decay (AdamW's decoupled decay; SGD and
    Adam add it to the gradient), momentum, dampening, nesterov (SGD);
    clip_norm (> 0: gradients scaled to a global L2 norm of at most this);
    a linear warm-up over warmup_steps, then a cosine decay to min_lr over
    decay_steps; accumulate micro-batches per optimizer step (gradients
    averaged); frozen: names of params not trained; grad_norm: also write
    the global gradient norm as the output "grad_norm" (computed anyway
    with clip_norm or loss scaling); recompute: activation checkpointing,
    cheap forward values (activations, elementwise products, norms,
    rotated or transposed copies) computed again in the backward instead
    of kept (stats() says how many and the bytes).  device "cpu", "cuda"
    or "cuda:N"; precision "f32", "f16" or "bf16".

    A Graph's params must each be set with set_param before the first
    step (an ONNX file's come from the file).  Every failure raises an
    RLXError subclass with the library's message.
    """

    def __init__(self, source: Union["Graph", str, os.PathLike], loss: str = "loss", optimizer: str = "adamw",
                 lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, momentum: float = 0.0, dampening: float = 0.0, nesterov: bool = False,
                 clip_norm: float = 0.0, warmup_steps: int = 0, decay_steps: int = 0, min_lr: float = 0.0,
                 accumulate: int = 1, frozen: Sequence[str] = (), device: str = "cpu", precision: str = "f32",
                 threads: int = 0, seed: int = 0, shapes: Optional[Dict[str, Sequence[int]]] = None,
                 grad_norm: bool = False, recompute: bool = False):
        if optimizer not in _OPTIMIZERS:
            raise InvalidArgumentError(f"unknown optimizer {optimizer!r} (adamw, adam or sgd)")
        if len(betas) != 2:
            raise InvalidArgumentError(f"betas must be two numbers, got {betas!r}")
        if isinstance(source, Graph):
            src: Any = source._g
        elif isinstance(source, (str, os.PathLike)):
            src = os.fspath(source)
        else:
            raise TypeError(f"source must be an rlx.Graph or an ONNX file path, got {type(source).__name__}")
        self.device = str(device)
        self._t = _rlx._Trainer(
            src, loss, _OPTIMIZERS[optimizer], float(lr), float(betas[0]), float(betas[1]), float(eps),
            float(weight_decay), float(momentum), float(dampening), bool(nesterov), float(clip_norm),
            int(warmup_steps), int(decay_steps), float(min_lr), int(accumulate), list(frozen), _device(device)[0],
            _precision_code(precision), _check_threads(threads), int(seed),
            None if shapes is None else {k: list(v) for k, v in shapes.items()}, bool(grad_norm), bool(recompute))

    def get_params(self) -> List[TensorInfo]:
        """The params: the graph's, then the optimizer's state ("opt.m.NAME", ...)."""
        return [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in self._t.info(1)]

    def get_inputs(self) -> List[TensorInfo]:
        """The inputs step() takes (besides the optimizer's own "opt.hyper")."""
        return [TensorInfo(n, tuple(s), _np_name(d)) for n, s, d in self._t.info(0) if not n.startswith("opt.")]

    def set_param(self, name: str, value: Any) -> None:
        """Copies a param's value in (initial weights, or any param)."""
        self._t.set_param(name, value)

    def get_param(self, name: str) -> np.ndarray:
        """A param's current value, as a new array."""
        return self._t.get_param(name)

    def step(self, inputs: Dict[str, Any]) -> float:
        """One micro-batch {input name: array}: forward and backward, and on
        every accumulate-th the optimizer's step.  Returns its loss."""
        return self._t.step(dict(inputs))

    def get_output(self, name: str) -> np.ndarray:
        """An output of the last step: the loss, "grad_norm" (the global
        gradient norm before clipping, where clip_norm, loss scaling or
        grad_norm=True has it computed) or any output of the graph."""
        return self._t.get_output(name)

    @property
    def steps(self) -> int:
        """Optimizer steps taken."""
        return self._t.counters()[0]

    @property
    def lr(self) -> float:
        """The learning rate of the next optimizer step."""
        return self._t.counters()[1]

    def stats(self) -> Dict[str, int]:
        """The compiled step's memory: arena_bytes (params, optimizer state,
        gradients, activations and scratch), persistent_bytes,
        transient_bytes, scratch_bytes; with recompute, how many forward
        values are computed again (recomputed) and their bytes
        (recomputed_bytes)."""
        return self._t.stats()

    def save(self, path: Union[str, os.PathLike], force: bool = False) -> None:
        """Params, optimizer state and step counts as one safetensors file;
        an existing file is replaced only with force=True."""
        self._t.save(os.fspath(path), bool(force))

    def load(self, path: Union[str, os.PathLike]) -> None:
        """Puts back what save() wrote: training goes on exactly as before."""
        self._t.load(os.fspath(path))

    def __repr__(self) -> str:
        return f"Trainer(device={self.device!r}, steps={self.steps})"


def _set_workload_params(self: CompiledGraph, seed: int = 1) -> None:
    """Fills a built-in workload's params from the seeded generator `rlx run` uses."""
    self._s.set_workload_params(seed)


CompiledGraph.set_workload_params = _set_workload_params  # type: ignore[attr-defined]


class Tensor:
    """Host memory lent through DLPack: wraps a numpy array (no copy).
    __dlpack__ / __dlpack_device__ export it; rlx.from_dlpack imports."""

    __slots__ = ("_a",)

    def __init__(self, array: Any):
        self._a = np.asarray(array)

    def numpy(self) -> np.ndarray:
        """The array (shared memory)."""
        return self._a

    @property
    def shape(self) -> Tuple[int, ...]:
        """The shape."""
        return self._a.shape

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype."""
        return self._a.dtype

    def __array__(self, dtype: Any = None) -> np.ndarray:
        return self._a if dtype is None else self._a.astype(dtype)

    def __dlpack__(self, stream: Any = None) -> Any:
        """A 'dltensor' capsule lending this memory (CPU; stream unused)."""
        if stream is not None and stream != -1:
            raise BufferError("rlx.Tensor is host memory: no stream applies")
        return _rlx._to_dlpack(self._a)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(1, 0): kDLCPU, device 0."""
        return (1, 0)

    def __repr__(self) -> str:
        return f"rlx.Tensor(shape={self._a.shape}, dtype={self._a.dtype})"


def from_dlpack(obj: Any) -> np.ndarray:
    """A numpy array over the memory of obj (any object with __dlpack__, or
    a 'dltensor' capsule), without a copy; the producer's memory is kept
    alive as long as the array.  Host memory only, as numpy's: a CUDA
    tensor raises UnsupportedError (run() of a CUDA session takes CUDA
    tensors as they are)."""
    if hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if dev_type == 2:
            raise UnsupportedError(f"from_dlpack: the tensor is in CUDA memory (device {dev_id}); numpy arrays are "
                                   "host memory, so copy it to the host first (e.g. tensor.cpu()), or give it to "
                                   "run() of a CUDA session")
        if dev_type not in (1, 3):
            raise UnsupportedError(f"from_dlpack: the tensor is on device type {dev_type} (id {dev_id}); numpy "
                                   "arrays are host memory, so copy it to the host first")
    cap = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    return _rlx._from_dlpack_capsule(cap)


def read_tensor(path: Union[str, os.PathLike]) -> np.ndarray:
    """A .npy file or an ONNX TensorProto (.pb) file as a numpy array."""
    return _rlx.read_tensor(os.fspath(path))


class DeviceTensor:
    """A run's output in CUDA device memory of its own (run(...,
    output_device="cuda")), lent through DLPack: torch.from_dlpack(t) gives
    a CUDA tensor over the same memory, with no host copy.  The data is
    complete when run() returns, so any consumer stream may read it.  The
    memory is freed when this object and every tensor made from it are
    gone."""

    __slots__ = ("_b", "shape", "dtype", "nbytes", "_index")

    def __init__(self, buffer: "_rlx._DeviceBuffer"):
        shape, dtype, nbytes, index = buffer.info()
        self._b = buffer
        self.shape: Tuple[int, ...] = tuple(shape)
        self.dtype: str = _np_name(dtype)
        self.nbytes: int = nbytes
        self._index: int = index

    @property
    def device(self) -> str:
        """Where the memory is: "cuda:N", the session's GPU."""
        return f"cuda:{self._index}"

    def __dlpack__(self, stream: Any = None) -> Any:
        """A 'dltensor' capsule lending the device memory (kDLCUDA, its device)."""
        return self._b.dlpack()

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(2, N): kDLCUDA, device N."""
        return (2, self._index)

    def __repr__(self) -> str:
        return f"rlx.DeviceTensor(shape={self.shape}, dtype={self.dtype}, device={self.device})"


def _pieces(stream: "_rlx._Stream") -> Iterator[str]:
    """The text of a stream's byte pieces, decoded as UTF-8 incrementally (a
    character split across tokens comes out whole; invalid bytes as U+FFFD,
    as in the full text)."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        for b in stream:
            text = dec.decode(b)
            if text:
                yield text
        text = dec.decode(b"", True)
        if text:
            yield text
    finally:
        stream.close()


class LLM:
    """A decoder LLM with one generation context (rlx_llm_load and
    rlx_llm_context_new).

    path: a .gguf file, a folder holding config.json, safetensors and
    tokenizer.json, or a built-in shape ("decoder-small", "decoder": seeded
    weights and a byte tokenizer, so their text is noise); None is the
    built-in "decoder-small" that `rlx generate` runs without a model.
    device: "cpu", "cuda" or "cuda:N"; precision: "f32", "f16" or "bf16"; ctx:
    positions of the context (None: the model's, at most 2048), which bounds
    prompt + max_tokens; threads: CPU threads, 0 for all cores;
    prefill_chunk: prompt tokens per prefill run (None: min(ctx, 512)).

    Text goes in as str (UTF-8) and comes out as str; token pieces are
    bytes, since a token may end inside a character.  Generation releases
    the GIL.  One LLM runs one generation at a time (callers on other
    threads wait their turn); LLM objects run in parallel.  A stream holds
    the LLM until it is exhausted, closed or dropped.  Errors are RLXError
    subclasses with the library's message.
    """

    def __init__(self, path: Union[str, os.PathLike, None] = None, device: str = "cpu", precision: str = "f32",
                 ctx: Optional[int] = None, threads: int = 0, prefill_chunk: Optional[int] = None):
        self.device = str(device)
        self.precision = precision
        dev, prec, thr = _device(device)[0], _precision_code(precision), _check_threads(threads)
        for name, v in (("ctx", ctx), ("prefill_chunk", prefill_chunk)):
            if v is not None and (not isinstance(v, int) or v < 1):
                raise InvalidArgumentError(f"{name} must be an int >= 1 or None, got {v!r}")
        self._m = _rlx._LLM(None if path is None else os.fspath(path), dev, prec, ctx or 0, thr, prefill_chunk or 0)
        self._info: Dict[str, Any] = self._m.info()

    @property
    def info(self) -> Dict[str, Any]:
        """The model's figures (architecture, layers, hidden, heads, kv_heads,
        head_dim, ffn, vocab_size, context_length, bos, eos) and ctx."""
        return dict(self._info)

    @property
    def architecture(self) -> str:
        """The architecture as the checkpoint names it."""
        return self._info["architecture"]

    @property
    def vocab_size(self) -> int:
        """Tokens in the vocabulary."""
        return self._info["vocab_size"]

    @property
    def context_length(self) -> int:
        """Positions the model was made for."""
        return self._info["context_length"]

    @property
    def ctx(self) -> int:
        """Positions of this LLM's context (prompt + generated tokens fit in it)."""
        return self._info["ctx"]

    @property
    def bos(self) -> Optional[int]:
        """The begin-of-sequence id, or None."""
        return None if self._info["bos"] < 0 else self._info["bos"]

    @property
    def eos(self) -> Optional[int]:
        """The end-of-sequence id, or None."""
        return None if self._info["eos"] < 0 else self._info["eos"]

    @property
    def last_stats(self) -> Optional[Dict[str, Any]]:
        """The last generation's figures: prompt_tokens, generated_tokens,
        prefill_ms, decode_ms (None before any)."""
        return self._m.last_stats()

    def tokenize(self, text: Union[str, bytes], add_special: bool = True) -> List[int]:
        """Token ids of text; add_special: the model's begin-of-sequence
        token first, where it has one."""
        return self._m.tokenize(text.encode("utf-8") if isinstance(text, str) else bytes(text), bool(add_special))

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of token ids (special tokens included; bytes that are
        not UTF-8 become U+FFFD)."""
        return self._m.detokenize(list(ids)).decode("utf-8", "replace")

    def token_piece(self, id: int) -> bytes:
        """The bytes of one token (possibly part of a character)."""
        return self._m.token_piece(int(id))

    def is_eog(self, id: int) -> bool:
        """Whether the token ends generation (end of sequence or turn)."""
        return self._m.is_eog(int(id))

    def _ids(self, prompt: Union[str, Sequence[int]]) -> List[int]:
        if isinstance(prompt, (str, bytes)):
            return self.tokenize(prompt)
        return [int(i) for i in prompt]

    def logits(self, prompt: Union[str, Sequence[int]]) -> np.ndarray:
        """The logits after the prompt's last token (float32 [vocab_size]):
        the prompt (text, tokenized with add_special, or token ids) is
        prefilled into the context, as generate() does first."""
        return self._m.logits(self._ids(prompt))

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 128, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0, stop: Union[str, Sequence[str]] = (),
                 ignore_eos: bool = False, stream: bool = False) -> Union[str, Iterator[str]]:
        """Text generated after prompt (text, tokenized with add_special, or
        token ids), up to max_tokens tokens, an end-of-generation token
        (unless ignore_eos) or a stop string (the text ends before it).

        Sampling as `rlx generate` does (the same settings give the same
        text): temperature 0 is greedy; top_k 0, top_p 1, min_p 0 and
        repetition_penalty 1 (over the last repeat_last_n ids) are off;
        seed fixes the draws.  stream=False returns the whole text;
        stream=True returns an iterator of str pieces as they are made
        (joined, the same text) once the first token is ready (what fails
        before it, such as a prompt that leaves no room for max_tokens in
        ctx, raises here); closing or dropping it stops the generation."""
        if not isinstance(max_tokens, int) or max_tokens < 0:
            raise InvalidArgumentError(f"max_tokens must be an int >= 0, got {max_tokens!r}")
        stops = [stop] if isinstance(stop, str) else list(stop)
        args = (self._ids(prompt), max_tokens, float(temperature), int(top_k), float(top_p), float(min_p),
                float(repetition_penalty), int(repeat_last_n), int(seed),
                [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in stops], bool(ignore_eos))
        if stream:
            return _pieces(self._m.stream(*args))
        return self._m.generate(*args).decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"rlx.LLM({self.architecture!r}, vocab_size={self.vocab_size}, ctx={self.ctx}, device={self.device!r})"
