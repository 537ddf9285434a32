"""Reference counts and resident memory stay flat over many runs."""
import gc
import sys

import numpy as np

import rlx


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_refcounts_and_rss_flat_over_10000_runs():
    g = rlx.Graph()
    x = g.input("x", "float32", (8, 32))
    g.output("y", g.relu(x) * 2.0)
    c = g.compile(threads=1)
    xv = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
    feeds = {"x": xv}
    for _ in range(500):  # warm up allocator pools
        c.run(feeds)
    gc.collect()
    ref_x, ref_f = sys.getrefcount(xv), sys.getrefcount(feeds)
    before = rss_kib()
    for _ in range(10000):
        (y,) = c.run(feeds)
    gc.collect()
    after = rss_kib()
    assert sys.getrefcount(xv) == ref_x and sys.getrefcount(feeds) == ref_f
    assert sys.getrefcount(y) == 2  # only `y` (and the call's argument) hold it
    assert after - before < 1024, f"resident memory grew {after - before} KiB over 10000 runs"


def test_session_objects_freed():
    before = None
    for i in range(300):
        g = rlx.Graph()
        x = g.input("x", "float32", (4, 4))
        g.output("y", g.exp(x))
        c = g.compile(threads=1)
        c.run({"x": np.zeros((4, 4), np.float32)})
        del g, c, x
        if i == 50:
            gc.collect()
            before = rss_kib()
    gc.collect()
    assert rss_kib() - before < 4096
