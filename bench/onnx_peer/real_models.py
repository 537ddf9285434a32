#!/usr/bin/python3
"""Real trained models, RLX against ONNX Runtime: makes one test case per
model (model.onnx + test_data_set_0/input_K.pb from fixed seeded random
inputs); real_models.js fills output_K.pb from onnxruntime-node; then
`rlx onnx-test --rtol 1e-4` compares.  Usage:
  real_models.py inputs MODELS_DIR CASES_DIR   (writes inputs)
  real_models.py outputs CASES_DIR             (npy outputs -> output_K.pb)"""
import glob
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

rng = np.random.default_rng(1234)
# model file -> fixed input shapes/values
MODELS = {
    "ch_PP-OCRv4_det_infer.onnx": {"x": ("f", [1, 3, 96, 128])},
    "ch_PP-OCRv4_rec_infer.onnx": {"x": ("f", [1, 3, 48, 160])},
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": {"x": ("f", [1, 3, 48, 192])},
    "silero_vad.onnx": {"input": ("f", [1, 512]), "sr": ("i", 16000), "h": ("z", [2, 1, 64]), "c": ("z", [2, 1, 64])},
}


def make_inputs(models_dir, cases_dir):
    for path in sorted(glob.glob(os.path.join(models_dir, "**", "*.onnx"), recursive=True)):
        base = os.path.basename(path)
        if base not in MODELS:
            continue
        case = os.path.join(cases_dir, "real_" + base[:-5])
        sd = os.path.join(case, "test_data_set_0")
        os.makedirs(sd, exist_ok=True)
        link = os.path.join(case, "model.onnx")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(path), link)
        m = onnx.load(path)
        inits = {t.name for t in m.graph.initializer}
        names = [v.name for v in m.graph.input if v.name not in inits]
        meta = {"model": os.path.abspath(path), "inputs": names, "outputs": [v.name for v in m.graph.output]}
        for k, name in enumerate(names):
            kind, val = MODELS[base][name]
            if kind == "f":
                a = rng.standard_normal(val).astype(np.float32)
                if base.startswith("silero"):
                    a *= 0.1
                else:
                    a = np.clip(a * 0.5, -1, 1).astype(np.float32)
            elif kind == "z":
                a = np.zeros(val, np.float32)
            else:
                a = np.array(val, np.int64)
            np.save(os.path.join(sd, "input_%d.npy" % k), a)
            with open(os.path.join(sd, "input_%d.pb" % k), "wb") as f:
                f.write(numpy_helper.from_array(a, name).SerializeToString())
        with open(os.path.join(case, "meta.json"), "w") as f:
            json.dump(meta, f)
        print("case", case)


def outputs_to_pb(cases_dir):
    for case in sorted(glob.glob(os.path.join(cases_dir, "real_*"))):
        sd = os.path.join(case, "test_data_set_0")
        for f in sorted(glob.glob(os.path.join(sd, "ort_output_*.npy"))):
            k = f.rsplit("_", 1)[1][:-4]
            a = np.load(f)
            with open(os.path.join(sd, "output_%s.pb" % k), "wb") as fh:
                fh.write(numpy_helper.from_array(a, "out%s" % k).SerializeToString())


if sys.argv[1] == "inputs":
    make_inputs(sys.argv[2], sys.argv[3])
else:
    outputs_to_pb(sys.argv[2])
