#!/usr/bin/python3
"""Writes ONNX backend-style cases (model.onnx, test_data_set_N/input_K.pb,
output_K.pb) for sequence and optional values beyond what Debian's
libonnx-testdata holds: SplitToSequence as the newer ONNX suites test it,
ConcatFromSequence, SequenceAt at a run-time position, SequenceErase,
sequences through If and Loop with conditions known only at run time,
SequenceMap with several outputs, Optional, and sequence and optional
graph inputs and outputs.  Values are stored as the suite stores them
(TensorProto, SequenceProto, OptionalProto); expected outputs are NumPy,
written from the operator specification.  Usage: make_sequence_cases.py
OUTDIR"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "sequence")
rng = np.random.default_rng(12)
NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


class Seq(list):
    """A sequence value: its tensors, and their element type (for an empty one)."""

    def __init__(self, items, dtype=np.float32):
        super().__init__(items)
        self.dtype = np.dtype(dtype)


class Opt:
    """An optional value: a tensor, a Seq, or None (empty) of a given type."""

    def __init__(self, value, type_proto=None):
        self.value = value
        self.type_proto = type_proto


def tensor_type(a, shape=True):
    return helper.make_tensor_type_proto(NP2ONNX[a.dtype], list(a.shape) if shape else None)


def type_of(v):
    if isinstance(v, Opt):
        return v.type_proto if v.value is None else helper.make_optional_type_proto(type_of(v.value))
    if isinstance(v, Seq):
        return helper.make_sequence_type_proto(helper.make_tensor_type_proto(NP2ONNX[v.dtype], None))
    return tensor_type(v)


def proto_of(v, name=""):
    if isinstance(v, Opt):
        if v.value is None:
            o = onnx.OptionalProto()
            o.name = name
            return o
        return numpy_helper.from_optional(v.value, name=name)
    if isinstance(v, Seq):
        s = numpy_helper.from_list(list(v), name=name)
        s.elem_type = onnx.SequenceProto.TENSOR
        return s
    return numpy_helper.from_array(v, name)


def case(name, nodes, inputs, outputs, sets, opset=17, inits=None):
    """inputs, outputs: names; sets: [(input values, output values)], the
    first set's values giving the declared types."""
    ins0, outs0 = sets[0]
    gin = [helper.make_value_info(n, type_of(v)) for n, v in zip(inputs, ins0)]
    gout = [helper.make_value_info(n, type_of(v)) for n, v in zip(outputs, outs0)]
    g = helper.make_graph(nodes, name, gin, gout, inits or [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_sequence_cases")
    m.ir_version = 8
    onnx.checker.check_model(m)
    d = os.path.join(OUT, "test_" + name)
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for si, (ins, outs) in enumerate(sets):
        sd = os.path.join(d, f"test_data_set_{si}")
        os.makedirs(sd)
        for k, (n, v) in enumerate(zip(inputs, ins)):
            with open(os.path.join(sd, f"input_{k}.pb"), "wb") as f:
                f.write(proto_of(v, n).SerializeToString())
        for k, (n, v) in enumerate(zip(outputs, outs)):
            with open(os.path.join(sd, f"output_{k}.pb"), "wb") as f:
                f.write(proto_of(v, n).SerializeToString())


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def const(name, a):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(a), name))


N = helper.make_node
if os.path.isdir(OUT):
    shutil.rmtree(OUT)
os.makedirs(OUT)

# --- SplitToSequence, as the ONNX suites after 1.12 test it ----------------
data = np.arange(18).reshape((3, 6)).astype(np.float32)
case("split_to_sequence_1", [N("SplitToSequence", ["data", "split"], ["seq"], axis=1)], ["data", "split"], ["seq"],
     [([data, np.array(2, np.int64)], [Seq([data[:, 0:2], data[:, 2:4], data[:, 4:6]])])])
case("split_to_sequence_2", [N("SplitToSequence", ["data", "split"], ["seq"], axis=0)], ["data", "split"], ["seq"],
     [([data, np.array([1, 2], np.int64)], [Seq([data[:1], data[1:]])])])
case("split_to_sequence_nokeepdims", [N("SplitToSequence", ["data"], ["seq"], axis=1, keepdims=0)], ["data"], ["seq"],
     [([data], [Seq([data[:, i] for i in range(6)])])])
# a chunk size that leaves a shorter last piece; negative axis
x = f32(2, 7)
case("split_to_sequence_uneven", [const("c", np.array(3, np.int64)),
                                  N("SplitToSequence", ["x", "c"], ["seq"], axis=-1)], ["x"], ["seq"],
     [([x], [Seq([x[:, 0:3], x[:, 3:6], x[:, 6:7]])])])

# --- ConcatFromSequence ------------------------------------------------------
a, b, c = f32(2, 3), f32(4, 3), f32(1, 3)
case("concat_from_sequence_axis0", [N("SequenceConstruct", ["a", "b", "c"], ["s"]),
                                    N("ConcatFromSequence", ["s"], ["y"], axis=0)], ["a", "b", "c"], ["y"],
     [([a, b, c], [np.concatenate([a, b, c], 0)])])
x = f32(3, 4, 5)
case("concat_from_sequence_new_axis", [N("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0),
                                       N("ConcatFromSequence", ["s"], ["y"], axis=-1, new_axis=1)], ["x"], ["y"],
     [([x], [np.stack([x[:, i] for i in range(4)], -1)])])

# --- SequenceAt at a position known only at run time (elements of one
# shape: a gather from their stack); two sets, one session --------------------
x = f32(4, 3)
case("sequence_at_runtime_position", [N("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
                                      N("SequenceAt", ["s", "pos"], ["y"])], ["x", "pos"], ["y"],
     [([x, np.array(2, np.int64)], [x[2]]), ([x, np.array(-1, np.int64)], [x[3]]),
      ([x, np.array(0, np.int64)], [x[0]])])

# --- SequenceErase / SequenceInsert at positions, a sequence output ----------
a, b, c, d = f32(2), f32(3), f32(4), f32(5)
case("sequence_erase_insert", [const("m2", np.array(-2, np.int64)), const("one", np.array(1, np.int64)),
                               N("SequenceConstruct", ["a", "b", "c"], ["s"]),
                               N("SequenceErase", ["s", "m2"], ["s2"]),
                               N("SequenceInsert", ["s2", "d", "one"], ["s3"]),
                               N("SequenceErase", ["s3"], ["s4"]),
                               N("SequenceLength", ["s4"], ["n"])], ["a", "b", "c", "d"], ["s3", "s4", "n"],
     [([a, b, c, d], [Seq([a, d, c]), Seq([a, d]), np.array(2, np.int64)])])

# --- a sequence input fed through: insert, and its length ---------------------
s_in = Seq([f32(2, 2), f32(3, 2)])
t = f32(1, 2)
case("sequence_input_insert_front", [const("zero", np.array(0, np.int64)),
                                     N("SequenceInsert", ["s", "t", "zero"], ["y"]),
                                     N("SequenceLength", ["y"], ["n"])], ["s", "t"], ["y", "n"],
     [([s_in, t], [Seq([t] + list(s_in)), np.array(3, np.int64)])])

# --- SequenceEmpty of int64, filled -------------------------------------------
i = np.array([4, 5], np.int64)
case("sequence_empty_int64", [N("SequenceEmpty", [], ["e"], dtype=TensorProto.INT64),
                              N("SequenceLength", ["e"], ["n0"]),
                              N("SequenceInsert", ["e", "i"], ["s"])], ["i"], ["n0", "s"],
     [([i], [np.array(0, np.int64), Seq([i], np.int64)])])

# --- If with a run-time condition: sequences of the same shapes, selected
# element by element ---------------------------------------------------------
a, b = f32(3), f32(2, 2)
then_g = helper.make_graph([N("SequenceConstruct", ["a", "b"], ["ts"])], "then", [],
                           [helper.make_value_info("ts", type_of(Seq([a])))])
else_g = helper.make_graph([N("Neg", ["a"], ["na"]), N("Neg", ["b"], ["nb"]),
                            N("SequenceConstruct", ["na", "nb"], ["es"])], "else", [],
                           [helper.make_value_info("es", type_of(Seq([a])))])
case("if_sequence_runtime_cond", [N("If", ["cond"], ["s"], then_branch=then_g, else_branch=else_g)],
     ["cond", "a", "b"], ["s"],
     [([np.array(True), a, b], [Seq([a, b])]), ([np.array(False), a, b], [Seq([-a, -b])])])

# --- Loop with a run-time condition carrying a sequence of fixed shapes: the
# iterations after the condition turns false leave it alone ------------------
x0, x1 = f32(2), f32(2)
body = helper.make_graph(
    [const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
     N("SequenceAt", ["s_in", "zero"], ["e0"]), N("SequenceAt", ["s_in", "one"], ["e1"]),
     N("Add", ["e0", "e1"], ["sum"]), N("SequenceConstruct", ["sum", "e0"], ["s_out"]),
     N("Less", ["it", "stop"], ["c_out"])],
    "body", [helper.make_tensor_value_info("it", TensorProto.INT64, []),
             helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
             helper.make_value_info("s_in", type_of(Seq([x0])))],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_value_info("s_out", type_of(Seq([x0])))])


def loop_ref(stop, trips=5):
    e0, e1 = x0, x1
    for it in range(trips):
        e0, e1 = e0 + e1, e0
        if not it < stop:
            break
    return Seq([e0, e1])


case("loop_sequence_runtime_cond", [const("M", np.array(5, np.int64)), const("c0", np.array(True)),
                                    N("SequenceConstruct", ["x0", "x1"], ["s0"]),
                                    N("Loop", ["M", "c0", "s0"], ["s"], body=body)], ["x0", "x1", "stop"], ["s"],
     [([x0, x1, np.array(s, np.int64)], [loop_ref(s)]) for s in (1, 3, 10)])

# --- SequenceMap: two sequences and a tensor in, two sequences out ----------
xs = Seq([f32(2, 3), f32(4, 3), f32(1, 3)])
ys = Seq([f32(3), f32(3), f32(3)])
w = f32(3)
body = helper.make_graph(
    [N("Add", ["x", "y"], ["xy"]), N("Mul", ["xy", "w_in"], ["o0"]), N("Shape", ["x"], ["o1"])], "map_body",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("w_in", TensorProto.FLOAT, [3])],
    [helper.make_tensor_value_info("o0", TensorProto.FLOAT, ["N", 3]),
     helper.make_tensor_value_info("o1", TensorProto.INT64, [2])])
case("sequence_map_two_outputs", [N("SequenceMap", ["xs", "ys", "w"], ["o0", "o1"], body=body)], ["xs", "ys", "w"],
     ["o0", "o1"],
     [([xs, ys, w], [Seq([(p + q) * w for p, q in zip(xs, ys)]),
                     Seq([np.array(p.shape, np.int64) for p in xs], np.int64)])])

# --- Optional: of a tensor, empty, and as a graph output -----------------------
x = f32(3)
opt_f3 = helper.make_optional_type_proto(tensor_type(x))
case("optional_tensor_ops", [N("Optional", ["x"], ["o"]), N("OptionalHasElement", ["o"], ["has"]),
                             N("OptionalGetElement", ["o"], ["y"]),
                             N("Optional", [], ["e"], type=tensor_type(x)),
                             N("OptionalHasElement", ["e"], ["has_e"])], ["x"], ["o", "has", "y", "has_e"],
     [([x], [Opt(x), np.array(True), x, np.array(False)])], opset=16)
# an optional sequence input, present in one set and empty in the other
s1 = Seq([f32(2), f32(2)])
opt_seq = helper.make_optional_type_proto(type_of(s1))
case("optional_sequence_input", [N("OptionalHasElement", ["o"], ["has"]), N("Identity", ["o"], ["o2"])],
     ["o"], ["has", "o2"],
     [([Opt(s1)], [np.array(True), Opt(s1)]), ([Opt(None, opt_seq)], [np.array(False), Opt(None, opt_seq)])],
     opset=16)
print(len(os.listdir(OUT)), "cases in", OUT)
