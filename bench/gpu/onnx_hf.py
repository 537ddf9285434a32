"""onnx_hf.py - a small decoder from Hugging Face transformers (random
weights, 2 layers, eager attention) exported to ONNX at opset 17 by
PyTorch, run by `rlx run` on the given devices and precisions, the logits
compared with PyTorch's (f32, CPU), with the canon and fusion summary of
each compile.

  qwen3  hidden 256, 4 query heads and 2 kv heads of dim 64, q/k RMSNorm,
         RoPE theta 1e6
  gpt2   hidden 256, 4 heads, Conv1D projections (flattened rows), fused
         qkv, tanh GELU, learned positions

    python3 bench/gpu/onnx_hf.py qwen3|gpt2 RLX_BIN [cpu,cuda] [RUNS]

Prints one line per (device, precision): median latency, the summary, and
max |rlx - torch| / rms(torch); and the same measure for PyTorch's own bf16
model on the GPU, the yardstick for RLX's bf16 row."""
import copy
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

from onnx_encoder import export  # the same legacy-exporter call


class Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        # an all-ones padding mask: without one, transformers looks for packed
        # sequences in the positions with torch.diff, which ONNX export lacks
        return self.m(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits


def build(name):
    """The model with random weights (seeded) and its vocabulary size."""
    torch.manual_seed(0)
    if name == "qwen3":
        cfg = transformers.Qwen3Config(vocab_size=2048, hidden_size=256, intermediate_size=768, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                       max_position_embeddings=1024, rope_theta=1e6, rms_norm_eps=1e-6,
                                       tie_word_embeddings=True)
        cls = transformers.Qwen3ForCausalLM
    elif name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=2048, n_positions=1024, n_embd=256, n_layer=2, n_head=4,
                                      activation_function="gelu_new")
        cls = transformers.GPT2LMHeadModel
    else:
        sys.exit("unknown model %r (qwen3 or gpt2)" % name)
    cfg._attn_implementation = "eager"
    return Logits(cls(cfg).eval()), cfg.vocab_size


def main():
    name, rlx = sys.argv[1], sys.argv[2]
    devices = (sys.argv[3] if len(sys.argv) > 3 else "cpu,cuda").split(",")
    runs = sys.argv[4] if len(sys.argv) > 4 else "50"
    net, vocab = build(name)
    ids = torch.randint(0, vocab, (1, 128))
    with torch.no_grad():
        ref = net(ids).numpy()
        # PyTorch's own bf16 model on the GPU, as a yardstick for RLX's bf16 error
        peer = None
        if torch.cuda.is_available():  # a copy: casting buffers (RoPE's inv_freq) there and back would round them
            peer = copy.deepcopy(net).to("cuda", torch.bfloat16)(ids.cuda()).float().cpu().numpy()
    tmp = tempfile.mkdtemp()
    path, ids_file = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, "ids.npy")
    export(net, (ids,), path, 17, output="logits")
    np.save(ids_file, ids.numpy())
    rms = float(np.sqrt((ref.astype(np.float64) ** 2).mean()))
    if peer is not None:
        print("torch bf16 on cuda: max |torch bf16 - torch f32| / rms %.2e" % (np.abs(peer - ref).max() / rms))
    for dev in devices:
        for prec in ("f32", "bf16") if dev == "cuda" else ("f32",):
            cmd = [rlx, "run", path, "--input", "input_ids=" + ids_file, "--device", dev, "--precision", prec,
                   "--output-dir", tmp, "--force", "--repeat", runs]
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, RLX_VERBOSE="1"))
            text = r.stdout + r.stderr
            if r.returncode:
                print("%s %s: failed: %s" % (dev, prec, text.strip().splitlines()[-3:]))
                continue
            lat = re.search(r"latency: median ([0-9.]+) ms", text)
            canon = re.search(r"\[rlx canon\] (\d+)", text)
            fus = re.search(r"fusion: (.*)", text)
            y = np.load(os.path.join(tmp, "logits.npy")).astype(np.float64)
            print("%s %s: median %s ms, canon rewrites %s, %s, max |rlx - torch| / rms %.2e" %
                  (dev, prec, lat.group(1) if lat else "?", canon.group(1) if canon else 0,
                   fus.group(1).strip() if fus else "no fusion line", np.abs(y - ref).max() / rms))


if __name__ == "__main__":
    main()
