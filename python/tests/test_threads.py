"""Concurrency: one session from many threads (serialised by its lock),
several sessions in parallel; every result equals a single-threaded run."""
import threading

import numpy as np

import rlx


def build_model():
    g = rlx.Graph()
    x = g.input("x", "float32", (4, 16))
    w = g.constant(np.random.default_rng(7).standard_normal((16, 8)).astype(np.float32))
    g.output("y", g.softmax(g.gelu(x @ w), axis=-1))
    return g


def test_one_session_8_threads_200_runs():
    c = build_model().compile(threads=1)
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(8 * 200)]
    expected = [c.run({"x": x})[0] for x in inputs]  # single-threaded
    got = [None] * len(inputs)
    errors = []

    def worker(t):
        try:
            for k in range(200):
                i = t * 200 + k
                got[i] = c.run({"x": inputs[i]})[0]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for e, g in zip(expected, got):
        assert g.tobytes() == e.tobytes()


def test_sessions_in_parallel_and_compiles_in_parallel():
    sessions = [None] * 4

    def compile_one(i):
        sessions[i] = build_model().compile(threads=1)

    ts = [threading.Thread(target=compile_one, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    ref = sessions[0].run({"x": x})[0]
    out = [[] for _ in range(4)]

    def run_many(i):
        for _ in range(100):
            out[i].append(sessions[i].run({"x": x})[0])

    ts = [threading.Thread(target=run_many, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for lst in out:
        assert len(lst) == 100 and all(o.tobytes() == ref.tobytes() for o in lst)
