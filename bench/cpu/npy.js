// .npy files <-> onnxruntime-node tensors, for ort_time.js and ort_shapes.js.
// Usage: const { readNpy, writeNpy } = require('./npy.js')(ort);
const fs = require('fs');

// npy dtype -> ORT tensor type and typed array
const TYPES = {
  '<f4': ['float32', Float32Array],
  '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array],
  '|b1': ['bool', Uint8Array],
  '|u1': ['uint8', Uint8Array],
};

module.exports = (ort) => {
  function readNpy(file) {
    const buf = fs.readFileSync(file);
    const major = buf[6];
    const hl = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
    const start = (major === 1 ? 10 : 12) + hl;
    const header = buf.slice(start - hl, start).toString('latin1');
    const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
    const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
    if (!TYPES[descr]) throw new Error(`${file}: unsupported dtype ${descr}`);
    const [type, Arr] = TYPES[descr];
    const raw = Buffer.from(buf.slice(start)); // a copy, aligned for the typed array
    return new ort.Tensor(type, new Arr(raw.buffer, raw.byteOffset, raw.length / Arr.BYTES_PER_ELEMENT), dims);
  }

  function writeNpy(file, t) {
    const descr = Object.keys(TYPES).find((k) => TYPES[k][0] === t.type);
    if (!descr) throw new Error(`output type ${t.type}`);
    const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
    let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
    while ((10 + h.length + 1) % 64) h += ' ';
    h += '\n';
    const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, h.length & 0xff, h.length >> 8]);
    const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(h, 'latin1'), data]));
  }

  return { readNpy, writeNpy };
};
