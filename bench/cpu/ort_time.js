// Times one ONNX model in onnxruntime-node (CPU; intra-op THREADS, inter-op 1)
// the way `rlx run --repeat` times RLX: a warm-up run, then REPEAT timed runs.
// Usage: node ort_time.js ORT_DIR MODEL REPEAT THREADS OUT_DIR NAME=FILE.npy...
// Writes output K (in the model's output order) as OUT_DIR/out_K.npy and
// prints: latency: median X ms, min Y ms over N runs
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[2], 'node_modules', 'onnxruntime-node'));

const { readNpy, writeNpy } = require('./npy.js')(ort);

(async () => {
  const [, , , model, repeatArg, threadsArg, outDir, ...inputs] = process.argv;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1, graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const arg of inputs) {
    const eq = arg.indexOf('=');
    feeds[arg.slice(0, eq)] = readNpy(arg.slice(eq + 1));
  }
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
  session.outputNames.forEach((name, k) => writeNpy(path.join(outDir, `out_${k}.npy`), out[name]));
  console.log(`latency: median ${median.toFixed(3)} ms, min ${times[0].toFixed(3)} ms over ${n} runs`);
})().catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1); });
