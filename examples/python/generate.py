"""Stream text from a decoder LLM through rlx.LLM.  With no arguments it runs
the built-in default (decoder-small: seeded weights and a byte tokenizer,
so the text is noise while the speed is real); give a .gguf file or a
Hugging Face folder (config.json, safetensors, tokenizer.json) for a real
model.

    python3 examples/python/generate.py [MODEL] [--prompt TEXT] [-n N] [--temp T] [--seed S]
"""
import argparse
import sys

import rlx

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("model", nargs="?", default=None, help="a .gguf file or a model folder (default: decoder-small)")
ap.add_argument("--prompt", default="Once upon a time")
ap.add_argument("-n", "--max-tokens", type=int, default=32)
ap.add_argument("--temp", type=float, default=0.8, help="temperature; 0 = greedy")
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()

llm = rlx.LLM(args.model, ctx=256)
print(f"{llm.architecture}: vocab {llm.vocab_size}, context {llm.ctx}", file=sys.stderr)
print(args.prompt, end="", flush=True)
for piece in llm.generate(args.prompt, max_tokens=args.max_tokens, temperature=args.temp, seed=args.seed,
                          stream=True):
    print(piece, end="", flush=True)
print()
st = llm.last_stats
decoded = max(st["generated_tokens"] - 1, 0)  # the first token comes from the prefill's logits
print(f"prefill: {st['prompt_tokens'] / max(st['prefill_ms'], 1e-9) * 1e3:.1f} tok/s, "
      f"decode: {decoded / max(st['decode_ms'], 1e-9) * 1e3:.1f} tok/s", file=sys.stderr)
