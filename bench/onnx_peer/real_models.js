// Runs each real-model case through onnxruntime-node (2 intra-op threads)
// on its input_K.npy files and writes ort_output_K.npy beside them.
// Usage: node real_models.js ORT_DIR CASES_DIR
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[2], 'node_modules', 'onnxruntime-node'));

// npy dtype, ORT tensor type, typed array
const NPY = [
  ['<f4', 'float32', Float32Array],
  ['<i8', 'int64', BigInt64Array],
  ['<i4', 'int32', Int32Array],
  ['|b1', 'bool', Uint8Array],
  ['|u1', 'uint8', Uint8Array],
  ['|i1', 'int8', Int8Array],
];

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const hl = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + hl;
  const header = buf.slice(start - hl, start).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const raw = buf.slice(start);
  const ab = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length);
  const t = NPY.find((x) => x[0] === descr);
  if (!t) throw new Error('dtype ' + descr);
  return new ort.Tensor(t[1], new t[2](ab), dims);
}

function writeNpy(file, t) {
  const d = NPY.find((x) => x[1] === t.type);
  if (!d) throw new Error('output type ' + t.type);
  const descr = d[0];
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  while ((10 + h.length + 1) % 64) h += ' ';
  h += '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, h.length & 0xff, h.length >> 8]);
  const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(h, 'latin1'), data]));
}

(async () => {
  const dir = process.argv[3];
  for (const c of fs.readdirSync(dir).filter((d) => d.startsWith('real_')).sort()) {
    const meta = JSON.parse(fs.readFileSync(path.join(dir, c, 'meta.json'), 'utf8'));
    const sd = path.join(dir, c, 'test_data_set_0');
    const t0 = Date.now();
    const s = await ort.InferenceSession.create(meta.model, { intraOpNumThreads: 2, interOpNumThreads: 1 });
    const feeds = {};
    meta.inputs.forEach((n, k) => { feeds[n] = readNpy(path.join(sd, `input_${k}.npy`)); });
    const res = await s.run(feeds);
    meta.outputs.forEach((n, k) => writeNpy(path.join(sd, `ort_output_${k}.npy`), res[n]));
    const shapes = meta.outputs.map((n) => n + '[' + res[n].dims.join('x') + ']').join(' ');
    console.log(`ort: ${c}: ${((Date.now() - t0) / 1000).toFixed(1)} s: ${shapes.length > 200 ? shapes.slice(0, 200) + '...' : shapes}`);
  }
})();
