// Runs exported ONNX backend-test cases (export_cases.py) through
// onnxruntime-node and prints one line per case and the summary in the
// same form as `rlx onnx-test`: rtol 1e-3, atol 1e-7 for floats, exact
// for integers, booleans and strings.  Usage: node ort_conformance.js ORT_DIR CASES_DIR
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[2], 'node_modules', 'onnxruntime-node'));
const casesDir = process.argv[3];

function readNpy(file) {
  if (file.endsWith('.json')) { // strings (export_cases.py)
    const j = JSON.parse(fs.readFileSync(file, 'utf8'));
    return { type: 'string', data: j.strings, dims: j.dims };
  }
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.slice(major === 1 ? 10 : 12, start).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shapeStr = /'shape':\s*\(([^)]*)\)/.exec(header)[1];
  const dims = shapeStr.split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const raw = buf.slice(start);
  const ab = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length);
  const kinds = {
    '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
    '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array], '|i1': ['int8', Int8Array],
    '|u1': ['uint8', Uint8Array], '<u2': ['uint16', Uint16Array], '<u4': ['uint32', Uint32Array],
    '<u8': ['uint64', BigUint64Array], '|b1': ['bool', Uint8Array], '<f2': ['float16', Uint16Array],
  };
  const k = kinds[descr];
  if (!k) throw new Error('npy dtype ' + descr);
  const data = new k[1](ab);
  return { type: k[0], data: k[0] === 'bool' ? Uint8Array.from(data) : data, dims };
}

function f16(h) {
  const s = (h & 0x8000) ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * Math.pow(2, -14) * (m / 1024);
  if (e === 31) return m ? NaN : s * Infinity;
  return s * Math.pow(2, e - 15) * (1 + m / 1024);
}

function compare(got, want) {
  const n = want.data.length;
  if (got.data.length !== n) return { ok: false, err: Infinity, why: 'size ' + got.data.length + ' vs ' + n };
  const isFloat = ['float32', 'float64', 'float16'].includes(want.type);
  let worst = 0, ok = true;
  for (let i = 0; i < n; i++) {
    let a = got.data[i], b = want.data[i];
    if (want.type === 'float16') { a = f16(a); b = f16(b); }
    if (want.type === 'string') {
      if (a !== b) { ok = false; worst = Infinity; }
      continue;
    }
    if (typeof a === 'bigint' || typeof b === 'bigint') {
      if (BigInt(a) !== BigInt(b)) { ok = false; worst = Math.max(worst, Math.abs(Number(BigInt(a) - BigInt(b)))); }
      continue;
    }
    a = Number(a); b = Number(b);
    if (isFloat) {
      if (Number.isNaN(b)) { if (!Number.isNaN(a)) { ok = false; worst = Infinity; } continue; }
      if (!Number.isFinite(b)) { if (a !== b) { ok = false; worst = Infinity; } continue; }
      const e = Math.abs(a - b);
      if (!(e <= 1e-7 + 1e-3 * Math.abs(b))) { ok = false; worst = Math.max(worst, Number.isNaN(e) ? Infinity : e); }
    } else if (a !== b) { ok = false; worst = Math.max(worst, Math.abs(a - b)); }
  }
  return { ok, err: worst };
}

async function runCase(dir) {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const name = meta.name;
  if (meta.error) return ['ERROR', `ERROR ${name}: ${meta.error}`];
  if (!meta.tensor_io) return ['SKIP', `SKIP ${name}: sequence/optional/map inputs or outputs`];
  let sess;
  try {
    sess = await ort.InferenceSession.create(meta.model, { intraOpNumThreads: 2, interOpNumThreads: 1,
      graphOptimizationLevel: 'all' });
  } catch (e) { return ['ERROR', `ERROR ${name}: ${String(e.message || e).split('\n')[0].slice(0, 200)}`]; }
  let worst = 0;
  for (const set of meta.sets) {
    const feeds = {};
    for (let k = 0; k < set.inputs.length; k++) {
      const f = set.inputs[k];
      if (f.error) return ['SKIP', `SKIP ${name}: input ${k}: ${f.error}`];
      const t = readNpy(f.file);
      feeds[meta.inputs[k]] = new ort.Tensor(t.type, t.data, t.dims);
    }
    let res;
    try { res = await sess.run(feeds); } catch (e) {
      return ['ERROR', `ERROR ${name}: ${String(e.message || e).split('\n')[0].slice(0, 200)}`];
    }
    for (let k = 0; k < set.outputs.length; k++) {
      const f = set.outputs[k];
      if (f.error) return ['SKIP', `SKIP ${name}: output ${k}: ${f.error}`];
      const want = readNpy(f.file);
      const got = res[meta.outputs[k]];
      if (!got) return ['ERROR', `ERROR ${name}: no output ${meta.outputs[k]}`];
      const c = compare(got, want);
      if (!c.ok) worst = Math.max(worst, c.err);
      if (!c.ok && worst === 0) worst = Infinity;
    }
  }
  if (worst > 0) return ['FAIL', `FAIL ${name} max_err=${worst.toPrecision(3)}`];
  return ['PASS', `PASS ${name}`];
}

(async () => {
  const dirs = fs.readdirSync(casesDir).filter((d) => fs.existsSync(path.join(casesDir, d, 'meta.json'))).sort();
  const count = { PASS: 0, FAIL: 0, ERROR: 0, SKIP: 0 };
  for (const d of dirs) {
    let r;
    try { r = await runCase(path.join(casesDir, d)); } catch (e) { r = ['ERROR', `ERROR ${d}: ${e.message}`]; }
    count[r[0]]++;
    console.log(r[1]);
  }
  console.log(`(${count.FAIL} failed on values, ${count.ERROR} errors)`);
  console.log(`${count.PASS} passed, ${count.FAIL + count.ERROR} failed, ${count.SKIP} skipped`);
})();
