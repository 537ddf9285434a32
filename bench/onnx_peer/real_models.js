// Runs each real-model case through onnxruntime-node (2 intra-op threads)
// on its input_K.npy files and writes ort_output_K.npy beside them.
// Usage: node real_models.js ORT_DIR CASES_DIR
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[2], 'node_modules', 'onnxruntime-node'));

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
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(ab), dims);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(ab), dims);
  throw new Error('dtype ' + descr);
}

function writeNpy(file, t) {
  const descr = t.type === 'float32' ? '<f4' : (t.type === 'int64' ? '<i8' : null);
  if (!descr) throw new Error('output type ' + t.type);
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
    const s = await ort.InferenceSession.create(meta.model, { intraOpNumThreads: 2, interOpNumThreads: 1 });
    const feeds = {};
    meta.inputs.forEach((n, k) => { feeds[n] = readNpy(path.join(sd, `input_${k}.npy`)); });
    const res = await s.run(feeds);
    meta.outputs.forEach((n, k) => writeNpy(path.join(sd, `ort_output_${k}.npy`), res[n]));
    console.log(`ort: ${c}: ${meta.outputs.map((n) => n + '[' + res[n].dims.join('x') + ']').join(' ')}`);
  }
})();
