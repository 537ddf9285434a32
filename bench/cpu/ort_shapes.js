// Runs one ONNX model once in onnxruntime-node on given inputs and writes
// the shape of every output it was asked for (and the values of those with
// at most 16 elements) as JSON: {name: {"dims": [...], "value": [...]}}.
// bench/cpu/onnx_flops.py uses it with every intermediate value made an output.
// Usage: node ort_shapes.js ORT_DIR MODEL OUT.json NAME=FILE.npy...
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[2], 'node_modules', 'onnxruntime-node'));
const { readNpy } = require('./npy.js')(ort);

(async () => {
  const [, , , model, outFile, ...inputs] = process.argv;
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 2, interOpNumThreads: 1 });
  const feeds = {};
  for (const arg of inputs) {
    const eq = arg.indexOf('=');
    feeds[arg.slice(0, eq)] = readNpy(arg.slice(eq + 1));
  }
  const res = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) {
    const t = res[name];
    out[name] = { dims: t.dims };
    if (t.data.length <= 16 && t.type !== 'string') out[name].value = Array.from(t.data, (v) => Number(v));
  }
  fs.writeFileSync(outFile, JSON.stringify(out));
})().catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1); });
