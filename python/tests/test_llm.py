"""rlx.LLM on the built-in default model (decoder-small, seeded weights, byte
tokenizer): determinism, streaming, agreement with `rlx generate`, tokens,
errors, abandoned streams and threads."""
import gc
import os
import subprocess
import threading

import numpy as np
import pytest

import rlx

PROMPT = "Once upon a time"  # 16 byte tokens
N = 24
CTX = 64  # what `rlx generate` picks for 16 + N tokens: (16 + N) rounded up to 64


@pytest.fixture(scope="module")
def llm():
    # the prompt in one prefill run of its 16 tokens, as `rlx generate` runs it
    return rlx.LLM(ctx=CTX, prefill_chunk=16, threads=2)


def tasks():
    return len(os.listdir("/proc/self/task"))


def test_default_model_and_info(llm):
    assert "decoder-small" in llm.architecture
    assert llm.vocab_size == 32000 and llm.ctx == CTX and llm.context_length == 4096
    assert llm.bos is None and llm.eos is None
    info = llm.info
    assert info["layers"] == 8 and info["hidden"] == 512 and info["vocab_size"] == llm.vocab_size
    assert "decoder-small" in repr(llm)


def test_greedy_is_deterministic(llm):
    a = llm.generate(PROMPT, max_tokens=N, temperature=0)
    b = llm.generate(PROMPT, max_tokens=N, temperature=0)
    assert a and a == b
    st = llm.last_stats
    assert st["prompt_tokens"] == 16 and st["generated_tokens"] == N


def test_seed_is_deterministic(llm):
    a = llm.generate(PROMPT, max_tokens=N, seed=7)
    b = llm.generate(PROMPT, max_tokens=N, seed=7)
    c = llm.generate(PROMPT, max_tokens=N, seed=8)
    assert a == b
    assert a != c


def test_ids_prompt_equals_text_prompt(llm):
    ids = llm.tokenize(PROMPT)
    assert len(ids) == 16
    assert llm.generate(ids, max_tokens=8, temperature=0) == llm.generate(PROMPT, max_tokens=8, temperature=0)


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(seed=3, top_k=0, top_p=0.9, min_p=0.0),
                                      dict(seed=5, repetition_penalty=1.3, stop="[22513]")])
def test_stream_joins_to_the_full_text(llm, settings):
    full = llm.generate(PROMPT, max_tokens=N, **settings)
    pieces = list(llm.generate(PROMPT, max_tokens=N, stream=True, **settings))
    assert all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == full
    if "stop" not in settings:
        assert len(pieces) == N  # one piece per token (every token here is whole ASCII text)


def cli_text(cli, *args):
    out = subprocess.run([cli, "generate", "--prompt", PROMPT, "-n", str(N), *args], capture_output=True,
                         check=True).stdout
    assert out.startswith(PROMPT.encode())
    end = out.rindex(b"\nprefill: ")
    return out[len(PROMPT):end].decode("utf-8", "replace")


@pytest.mark.parametrize("cli_args,settings", [
    (["--temp", "0"], dict(temperature=0)),
    (["--seed", "11", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.02", "--repeat-penalty", "1.1",
      "--stop", "[20503]"],
     dict(seed=11, top_k=20, top_p=0.9, min_p=0.02, repetition_penalty=1.1, stop=["[20503]"])),
])
def test_same_text_as_rlx_generate(llm, cli, cli_args, settings):
    expected = cli_text(cli, "--threads", "2", *cli_args)
    assert llm.generate(PROMPT, max_tokens=N, **settings) == expected
    assert "".join(llm.generate(PROMPT, max_tokens=N, stream=True, **settings)) == expected


def test_logits_equal_rlx_generate_logits(llm, cli, tmp_path):
    path = tmp_path / "logits.npy"
    subprocess.run([cli, "generate", "--prompt", PROMPT, "-n", str(N), "--temp", "0", "--threads", "2", "--logits",
                    str(path)], capture_output=True, check=True)
    ref = np.load(path)
    got = llm.logits(PROMPT)
    assert got.dtype == np.float32 and got.shape == (llm.vocab_size,)
    assert got.tobytes() == ref.tobytes()
    # the greedy first token is the argmax of these logits
    first = llm.generate(PROMPT, max_tokens=1, temperature=0)
    assert first.encode() == llm.token_piece(int(np.argmax(got)))


def test_tokenize_detokenize_roundtrip(llm):
    for text in ["hello world", "héllo wörld ✓ 日本", "", "tabs\tand\nlines"]:
        ids = llm.tokenize(text)
        assert all(isinstance(i, int) and 0 <= i < llm.vocab_size for i in ids)
        assert llm.detokenize(ids) == text
        assert b"".join(llm.token_piece(i) for i in ids) == text.encode()
    assert llm.tokenize(b"ab") == [97, 98]
    assert llm.token_piece(104) == b"h"
    assert llm.is_eog(104) is False
    with pytest.raises(rlx.InvalidArgumentError, match="outside the vocabulary"):
        llm.token_piece(llm.vocab_size)
    with pytest.raises(rlx.InvalidArgumentError, match="outside the vocabulary"):
        llm.detokenize([1, -5])


def test_bad_path_names_the_file(tmp_path):
    missing = str(tmp_path / "no-such-model.gguf")
    with pytest.raises(rlx.RLXIOError, match="no-such-model.gguf"):
        rlx.LLM(missing)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(rlx.RLXError, match="junk.gguf"):
        rlx.LLM(str(junk))


def test_errors_carry_the_library_message(llm):
    with pytest.raises(rlx.InvalidArgumentError, match="exceed the context of 64"):
        llm.generate(PROMPT, max_tokens=CTX)
    with pytest.raises(rlx.InvalidArgumentError, match="exceed the context of 64"):
        llm.generate(PROMPT, max_tokens=CTX, stream=True)  # raised by the call, before any text
    with pytest.raises(rlx.InvalidArgumentError, match="top_p"):
        llm.generate(PROMPT, max_tokens=2, top_p=2.0, stream=True)
    with pytest.raises(rlx.InvalidArgumentError, match="outside the vocabulary"):
        llm.generate([1, 2, 99999], max_tokens=2)
    with pytest.raises(rlx.InvalidArgumentError, match="at least one token"):
        llm.generate("", max_tokens=2)
    with pytest.raises(rlx.InvalidArgumentError):
        llm.generate(PROMPT, max_tokens=-1)
    with pytest.raises(rlx.InvalidArgumentError):
        rlx.LLM(ctx=0)
    # the LLM is usable after each failure
    assert llm.generate(PROMPT, max_tokens=4, temperature=0) == llm.generate(PROMPT, max_tokens=4, temperature=0)


def test_cuda_device_says_why():
    try:
        m = rlx.LLM(device="cuda", ctx=CTX)
    except rlx.UnsupportedError as e:  # a build without the CUDA backend
        assert "cuda" in str(e).lower() and "no backend" in str(e)
    except rlx.DeviceError as e:  # built with CUDA, no usable GPU
        assert "cuda" in str(e).lower()
    else:  # a GPU is here
        assert m.generate(PROMPT, max_tokens=4, temperature=0)


def test_abandoned_stream_is_released(llm):
    expected = llm.generate(PROMPT, max_tokens=N, temperature=0)
    first = llm.generate(PROMPT, max_tokens=1, temperature=0)
    before = tasks()
    for _ in range(20):
        it = llm.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
        assert next(it) == first
        del it  # dropped midway: its thread stops and the LLM is free again
    never_started = llm.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
    del never_started
    for piece in llm.generate(PROMPT, max_tokens=N, temperature=0, stream=True):
        break  # leaving a for loop early drops the iterator too
    gc.collect()
    assert tasks() == before
    assert llm.generate(PROMPT, max_tokens=N, temperature=0) == expected


def test_closed_stream_and_busy_llm(llm):
    it = llm.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
    first = next(it)
    # an unfinished stream driven from this thread holds the LLM: refused, not a deadlock
    with pytest.raises(rlx.RLXRuntimeError, match="unfinished"):
        llm.generate(PROMPT, max_tokens=2)
    it.close()
    assert list(it) == []
    assert llm.generate(PROMPT, max_tokens=1, temperature=0) == first
    llm.generate(PROMPT, max_tokens=N, stream=True).close()  # closed before its first next()
    assert llm.generate(PROMPT, max_tokens=1, temperature=0) == first


def test_stream_memory_is_bounded(llm):
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    for _ in range(5):
        it = llm.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
        next(it)
        del it
    start = rss()
    for _ in range(40):
        it = llm.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
        next(it)
        del it
    assert rss() - start < 16 << 20


def test_two_llms_in_two_threads_match_sequential(llm):
    other = rlx.LLM(ctx=CTX, prefill_chunk=16, threads=1)
    jobs = [(llm, dict(temperature=0)), (other, dict(seed=9)), (llm, dict(seed=9, stream=True)),
            (other, dict(temperature=0, stream=True))]

    def run(m, kw):
        out = m.generate(PROMPT, max_tokens=N, **kw)
        return out if isinstance(out, str) else "".join(out)

    sequential = [run(m, kw) for m, kw in jobs]
    assert sequential[0] == sequential[3] and sequential[1] == sequential[2]
    got = [None] * len(jobs)
    errors = []

    def worker(i):
        try:
            for _ in range(2):
                got[i] = run(*jobs[i])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    # jobs 0 and 2 share one LLM (they take turns), as do 1 and 3; the two LLMs run side by side
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert got == sequential
