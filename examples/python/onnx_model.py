"""Build a small ONNX model with the onnx package, run it through
rlx.InferenceSession at two batch sizes (one compile each), and check it
against NumPy.  Uses python3-onnx only to write the model file."""
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

import rlx

rng = np.random.default_rng(0)
w1 = rng.standard_normal((8, 16)).astype(np.float32)
w2 = rng.standard_normal((16, 3)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
     helper.make_node("MatMul", ["r", "w2"], ["z"]), helper.make_node("Softmax", ["z"], ["probs"], axis=-1)],
    "classifier",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])],
    [helper.make_tensor("w1", TensorProto.FLOAT, w1.shape, w1.ravel().tolist()),
     helper.make_tensor("w2", TensorProto.FLOAT, w2.shape, w2.ravel().tolist())])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "classifier.onnx")
    onnx.save(model, path)
    sess = rlx.InferenceSession(path, device="cpu", threads=1)
    print("inputs:", sess.get_inputs())
    for batch in (2, 5):
        x = rng.standard_normal((batch, 8)).astype(np.float32)
        (probs,) = sess.run(None, {"x": x})
        z = np.maximum(x @ w1, 0) @ w2
        ref = np.exp(z - z.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        np.testing.assert_allclose(probs, ref, rtol=1e-5, atol=1e-6)
        print(f"batch {batch}: probs {probs.shape}, rows sum to {probs.sum(1).round(6).tolist()}")
    print("outputs:", sess.get_outputs(), "- compiled shapes:", sess.cached_shapes())
