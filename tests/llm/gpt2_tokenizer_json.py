#!/usr/bin/env python3
"""Writes GPT-2's tokenizer.json as Hugging Face lays it out (BPE model,
ByteLevel pre-tokenizer with its built-in regex, ByteLevel decoder) from the
encoder.json and vocab.bpe of OpenAI's release, to test that configuration.
Usage: gpt2_tokenizer_json.py ENCODER_JSON VOCAB_BPE OUT"""
import json
import sys

enc, bpe, out = sys.argv[1:4]
vocab = json.load(open(enc, encoding="utf-8"))
merges = [l for l in open(bpe, encoding="utf-8").read().split("\n")[1:] if l.strip()]
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
doc = {
    "version": "1.0",
    "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
    "normalizer": None,
    "pre_tokenizer": byte_level,
    "post_processor": byte_level,
    "decoder": byte_level,
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab, "merges": merges},
}
json.dump(doc, open(out, "w", encoding="utf-8"), ensure_ascii=False)
