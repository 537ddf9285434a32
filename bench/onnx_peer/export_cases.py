#!/usr/bin/python3
"""Converts ONNX backend-test cases into what the ONNX Runtime peer script
reads: per case a meta.json (graph input/output names in order, which of
them are tensors) and .npy files for test_data_set_N/{input,output}_K.pb.
Usage: export_cases.py OUTDIR CASE_OR_SUITE_DIR..."""
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def cases(path):
    if os.path.exists(os.path.join(path, "model.onnx")):
        yield path
        return
    for d in sorted(os.listdir(path)):
        p = os.path.join(path, d)
        if os.path.isdir(p):
            yield from cases(p)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for root in sys.argv[2:]:
        for case in cases(root):
            name = os.path.basename(case)
            dst = os.path.join(out, name)
            os.makedirs(dst, exist_ok=True)
            meta = {"name": name, "model": os.path.abspath(os.path.join(case, "model.onnx")), "sets": []}
            try:
                m = onnx.load(meta["model"], load_external_data=False)
                inits = {t.name for t in m.graph.initializer}
                ins = [v for v in m.graph.input if v.name not in inits]
                meta["inputs"] = [v.name for v in ins]
                meta["outputs"] = [v.name for v in m.graph.output]
                meta["tensor_io"] = all(v.type.HasField("tensor_type") for v in list(ins) + list(m.graph.output))
            except Exception as e:  # noqa: BLE001
                meta["error"] = "cannot read model: %s" % e
            for s in sorted(os.listdir(case)):
                sd = os.path.join(case, s)
                if not (s.startswith("test_data_set_") and os.path.isdir(sd)):
                    continue
                entry = {"inputs": [], "outputs": []}
                for kind in ("input", "output"):
                    k = 0
                    while os.path.exists(os.path.join(sd, "%s_%d.pb" % (kind, k))):
                        f = os.path.join(sd, "%s_%d.pb" % (kind, k))
                        t = onnx.TensorProto()
                        try:
                            with open(f, "rb") as fh:
                                t.ParseFromString(fh.read())
                            a = numpy_helper.to_array(t)
                            if a.dtype == object:  # strings: JSON, as UTF-8 text
                                js = os.path.join(dst, "%s_%s_%d.json" % (s, kind, k))
                                with open(js, "w") as fh:
                                    json.dump({"dims": list(a.shape), "strings": [
                                        v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in a.ravel()]}, fh)
                                entry[kind + "s"].append({"file": js, "dtype": "string"})
                                k += 1
                                continue
                            npy = os.path.join(dst, "%s_%s_%d.npy" % (s, kind, k))
                            np.save(npy, a)
                            entry[kind + "s"].append({"file": npy, "dtype": str(a.dtype)})
                        except Exception as e:  # noqa: BLE001
                            entry[kind + "s"].append({"error": str(e)[:200]})
                        k += 1
                meta["sets"].append(entry)
            with open(os.path.join(dst, "meta.json"), "w") as fh:
                json.dump(meta, fh)
            n += 1
    print("exported %d cases" % n)


main()
