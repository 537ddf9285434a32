#!/usr/bin/python3
"""RLX builds beside ONNX Runtime on a quiet machine and under load.

    /usr/bin/python3 bench/cpu/threads_load.py --rlx build/rlx --rlx-before OLD/build/rlx \\
        --models ocr-cls,silero-vad,mlp-b256,encoder-b1 --load 0,4 --rounds 5

For each load level (N busy-loop processes started here and stopped after,
none pinned), the rounds are interleaved: each row, then each engine once
(RLX before, RLX, ORT), one process each (a warm-up run, then the row's
repeat count, median).  A figure is the median of the per-round medians;
spread is the slowest per-round median over the fastest.  Rows, inputs and
engine commands are bench/cpu/peers.py's; threads per engine --threads.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers  # noqa: E402


def start_load(n):
    """n processes that spin forever, each in its own session."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True) for _ in range(n)]


def stop_load(procs):
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def measure(engine, rlx_bin, row, a, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    a.rlx = rlx_bin
    cmd = peers.engine_command(engine, row, a, out_dir)
    rc, out, err, _ = peers.run_process(cmd, dict(os.environ), os.path.join(out_dir, "log"), a.timeout)
    m = peers.LAT.search(out)
    if rc != 0 or not m:
        raise RuntimeError("%s %s failed: %s" % (engine, row.name, peers.first_error(rc, out, err)))
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rlx", default=os.path.join(peers.ROOT, "build", "rlx"))
    ap.add_argument("--rlx-before", help="a second RLX binary, run beside the first (the build before a change)")
    ap.add_argument("--models", default="ocr-cls,silero-vad")
    ap.add_argument("--load", default="0,4", help="busy processes per level, comma-separated (default 0,4)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-ort", action="store_true", help="RLX builds only")
    ap.add_argument("--work", default="/tmp/rlx-threads-load")
    ap.add_argument("--ort-dir", default=os.environ.get("ORT_DIR", "/tmp/rlx-ort-peer"))
    ap.add_argument("--models-dir", default=os.environ.get("RLX_NPM_MODELS",
                                                          os.path.join(peers.ROOT, "third_party_models", "npm-models")))
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    want = a.models.split(",")
    rows = [r for r in peers.ROWS if any(r.name == w or r.name.startswith(w) for w in want)]
    if os.path.exists(a.work):
        shutil.rmtree(a.work)
    os.makedirs(a.work)
    peers.prepare(rows, a.work, a.models_dir, a.ort_dir)
    engines = ([("rlx-before", "rlx", a.rlx_before)] if a.rlx_before else []) + [("rlx", "rlx", a.rlx)]
    if not a.no_ort:
        engines.append(("ort", "ort", None))
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print("# %s, %d threads per engine, %d rounds; started %s" %
          (cpu, a.threads, a.rounds, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    for level in [int(x) for x in a.load.split(",")]:
        procs = start_load(level)
        try:
            time.sleep(2 if level else 0)
            times, loads = {}, []
            for r in range(a.rounds):
                loads.append(peers.loadavg())
                for row in rows:
                    line = []
                    for label, engine, binary in engines:
                        t = measure(engine, binary, row, a, os.path.join(a.work, "out", row.name, label))
                        times.setdefault((row.name, label), []).append(t)
                        line.append("%s %.3f" % (label, t))
                    print("load %d round %d %-11s %s" % (level, r + 1, row.name, "  ".join(line)), file=sys.stderr)
        finally:
            stop_load(procs)
        print("\n## %d busy processes (load average at each round's start: %s)\n" % (level, ", ".join(loads)))
        head = ["model"] + ["%s ms (spread)" % lbl for lbl, _, _ in engines]
        if a.rlx_before:
            head.append("RLX after/before")
        if not a.no_ort:
            head.append("RLX/ORT")
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            med = {lbl: statistics.median(times[(row.name, lbl)]) for lbl, _, _ in engines}
            cells = [row.name]
            for lbl, _, _ in engines:
                ts = times[(row.name, lbl)]
                cells.append("%.3f (%.1f)" % (med[lbl], max(ts) / min(ts)))
            if a.rlx_before:
                cells.append("%.2f" % (med["rlx"] / med["rlx-before"]))
            if not a.no_ort:
                cells.append("%.2f" % (med["rlx"] / med["ort"]))
            print("| " + " | ".join(cells) + " |")
        print("\nper-round medians (ms):\n")
        for row in rows:
            for lbl, _, _ in engines:
                print("- %s %s: %s" % (row.name, lbl, " ".join("%.3f" % t for t in times[(row.name, lbl)])))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
