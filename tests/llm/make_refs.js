// Reference token ids from independent encoders, for the tokenizer tests:
// OpenAI's GPT-2 encoder as ported to JavaScript (gpt-3-encoder) and the
// transformers.js tokenizers (@lenml/tokenizers) on Qwen3's, Llama 3's and
// Llama 2's tokenizer.json.  Reads the corpus written by make_corpus.py and
// writes one file per tokenizer: the ids of each text on one line.
// Usage: node make_refs.js CACHE_DIR CORPUS OUT_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const [cacheArg, corpusPath, outDir] = process.argv.slice(2);
const cache = path.resolve(cacheArg);

function readCorpus(p) {
  const buf = fs.readFileSync(p);
  const texts = [];
  let i = 0;
  while (i < buf.length) {
    const nl = buf.indexOf(10, i);
    const n = parseInt(buf.toString("latin1", i, nl), 10);
    texts.push(buf.toString("utf8", nl + 1, nl + 1 + n));
    i = nl + 1 + n + 1;
  }
  return texts;
}

const texts = readCorpus(corpusPath);
fs.mkdirSync(outDir, { recursive: true });
const encoders = {
  gpt2: () => require(path.join(cache, "gpt-3-encoder")).encode,
};
for (const name of ["qwen3", "llama3", "llama2"]) {
  encoders[name] = () => {
    const tok = require(path.join(cache, name, "dist", "main.js")).fromPreTrained();
    // added tokens in the text are always split out by transformers.js;
    // the second function adds BOS/EOS as the tokenizer's files ask
    const enc = (t) => tok.encode(t, { add_special_tokens: false });
    enc.special = (t) => tok.encode(t, { add_special_tokens: true });
    return enc;
  };
}
for (const [name, make] of Object.entries(encoders)) {
  const t0 = Date.now();
  const encode = make();
  const lines = texts.map((t) => encode(t).join(" "));
  fs.writeFileSync(path.join(outDir, name + ".ids"), lines.join("\n") + "\n");
  if (encode.special) {
    const first = texts.slice(0, 100).map((t) => encode.special(t).join(" "));
    fs.writeFileSync(path.join(outDir, name + ".special.ids"), first.join("\n") + "\n");
  }
  console.log(`${name}: ${texts.length} texts in ${Date.now() - t0} ms`);
}
