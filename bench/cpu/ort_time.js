// Times one ONNX model in onnxruntime-node (CPU, 2 intra-op threads by
// default) the way `rlx run --repeat` does: a warm-up run, then N runs.
// Usage: node ort_time.js ORT_DIR MODEL INPUT_NAME INPUT.npy REPEAT THREADS OUT.npy
// Prints: latency: median X ms, min Y ms over N runs
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
  const raw = Buffer.from(buf.slice(start));
  const ab = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length);
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(ab), dims);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(ab), dims);
  throw new Error('unsupported dtype ' + descr);
}

function writeNpy(file, t) {
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let h = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  while ((10 + h.length + 1) % 64) h += ' ';
  h += '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, h.length & 0xff, h.length >> 8]);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(h, 'latin1'), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)]));
}

(async () => {
  const [, , , model, inputName, inputFile, repeatArg, threadsArg, outFile] = process.argv;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1, graphOptimizationLevel: 'all',
  });
  const feeds = { [inputName]: readNpy(inputFile) };
  let out = await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(repeatArg); i++) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const n = times.length;
  const median = n % 2 ? times[(n - 1) / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  writeNpy(outFile, out[session.outputNames[0]]);
  console.log(`latency: median ${median.toFixed(3)} ms, min ${times[0].toFixed(3)} ms over ${n} runs`);
})().catch((e) => { console.error(e); process.exit(1); });
