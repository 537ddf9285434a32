#!/usr/bin/env python3
"""run.py - RLX (bench/train/train_bench.c) beside PyTorch
(bench/train/train_torch.py) on the training workloads, interleaved: each
round runs every engine once per row (RLX, PyTorch eager, [torch.compile]),
each in its own process; a cell is the median over rounds of each process's
median steps/s.  Prints one Markdown table and writes it, with the command,
machine and versions, to --out when given.  bench/train/run.sh calls this.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd, env, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        out = p.stdout
        err = p.stderr
    except subprocess.TimeoutExpired:
        return {"error": "timeout after %d s" % timeout}, ""
    res = None
    for line in out.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    if res is None:
        lines = [l for l in (err + out).splitlines() if l.strip()]
        res = {"error": (lines[-1] if lines else "exit %d" % p.returncode)[:200]}
    res["wall_s"] = time.time() - t
    return res, out + err


def gemm_peak(py, threads, env):
    """SGEMM 2048^3 f32 through torch.mm at the benchmark's threads, best of 5 (CPU)."""
    code = ("import torch,time;torch.set_num_threads(%d);a=torch.randn(2048,2048);b=torch.randn(2048,2048);"
            "torch.mm(a,b);best=min((lambda t:(torch.mm(a,b),time.perf_counter()-t)[1])(time.perf_counter())"
            " for _ in range(5));print(2*2048**3/best/1e9)" % threads)
    try:
        return float(subprocess.check_output([py, "-c", code], env=env, text=True, timeout=120).strip())
    except Exception:
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "tests", "train_bench"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", default="f32")
    ap.add_argument("--workloads", default="mlp,encoder,decoder-small")
    ap.add_argument("--engines", default="rlx,eager", help="rlx, eager, compile")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peak-gflops", type=float, default=0, help="FLOP floor; CPU default: measured SGEMM peak")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(a.threads) if a.device == "cpu" else env.get("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    started = datetime.datetime.now(datetime.timezone.utc)
    peak = a.peak_gflops
    peaks = []
    if a.device == "cpu" and not peak:
        peaks.append(gemm_peak(a.python, a.threads, env))
        peak = peaks[0]
    common = ["--device", a.device, "--warmup", str(a.warmup), "--steps", str(a.steps), "--repeat", str(a.repeat),
              "--threads", str(a.threads)]
    engines = a.engines.split(",")
    rows = [(w, p) for p in a.precisions.split(",") for w in a.workloads.split(",")]
    cells = {}  # (w, p, engine) -> list of results
    log = []
    for r in range(a.rounds):
        for w, p in rows:
            for e in engines:
                prior = cells.get((w, p, e), [])
                if prior and "error" in prior[0]:
                    continue  # failed once: not again
                if e == "rlx":
                    cmd = [a.rlx, "--workload", w, "--precision", p] + common
                    if peak:
                        cmd += ["--peak-gflops", "%.1f" % peak]
                else:
                    cmd = [a.python, os.path.join(HERE, "train_torch.py"), "--workload", w, "--precision", p,
                           "--mode", e] + common
                res, text = run(cmd, env, a.timeout)
                cells.setdefault((w, p, e), []).append(res)
                msg = "round %d %s %s %s: %s" % (r + 1, w, p, e, res.get("error") or "%.3f steps/s" % res["steps_per_s"])
                print(msg, file=sys.stderr, flush=True)
                log.append(msg)
    if a.device == "cpu" and not a.peak_gflops:
        peaks.append(gemm_peak(a.python, a.threads, env))
        peak = max(peaks)

    def med(w, p, e, key="steps_per_s"):
        rs = [x for x in cells.get((w, p, e), []) if "error" not in x and key in x]
        return statistics.median(x[key] for x in rs) if rs else None

    def err(w, p, e):
        rs = cells.get((w, p, e), [])
        return rs[0]["error"] if rs and "error" in rs[0] else None

    def mx(w, p, e, key):
        rs = [x[key] for x in cells.get((w, p, e), []) if "error" not in x and key in x]
        return max(rs) if rs else None

    def fmt(v, f="%.3f"):
        return "—" if v is None else f % v

    mem_torch = "max_memory_allocated" if a.device == "cuda" else "ru_maxrss"
    head = ["workload", "device", "precision", "RLX steps/s", "PyTorch eager steps/s"]
    if "compile" in engines:
        head.append("torch.compile steps/s")
    head += ["RLX / eager (steps/s; > 1: RLX faster)"] + (["RLX / compile"] if "compile" in engines else [])
    head += ["RLX tokens/s", "RLX GFLOP/s (% of floor)", "RLX arena MiB", "RLX peak RSS MiB",
             "PyTorch peak MiB (%s)" % mem_torch, "round spread RLX / eager"]
    L = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w, p in rows:
        rl, ea, co = med(w, p, "rlx"), med(w, p, "eager"), med(w, p, "compile")
        gf = None
        rr = [x for x in cells.get((w, p, "rlx"), []) if "error" not in x]
        if rl is not None and rr:
            gf = rr[0]["gflop_per_step"] * rl
        cell_rl = fmt(rl) if rl is not None else "failed: " + (err(w, p, "rlx") or "")
        cell_ea = fmt(ea) if ea is not None else "failed: " + (err(w, p, "eager") or "")
        line = [w, a.device, p, cell_rl, cell_ea]
        if "compile" in engines:
            line.append(fmt(co) if co is not None else "failed: " + (err(w, p, "compile") or ""))
        line.append(fmt(rl / ea, "%.2f") if rl and ea else "—")
        if "compile" in engines:
            line.append(fmt(rl / co, "%.2f") if rl and co else "—")
        toks = med(w, p, "rlx", "tokens_per_s")
        line.append(fmt(toks, "%.0f") if toks else "—")
        line.append("%.1f (%.1f%%)" % (gf, 100 * gf / peak) if gf and peak else fmt(gf, "%.1f"))
        line.append(fmt(mx(w, p, "rlx", "arena_mib"), "%.0f"))
        line.append(fmt(mx(w, p, "rlx", "rss_mib"), "%.0f"))
        tp = [mx(w, p, e, "peak_mib") for e in engines if e != "rlx"]
        line.append(" / ".join(fmt(v, "%.0f") for v in tp))

        def spread(e):
            rs = [x["steps_per_s"] for x in cells.get((w, p, e), []) if "error" not in x]
            return "%.2f" % (max(rs) / min(rs)) if len(rs) > 1 else "—"

        line.append("%s / %s" % (spread("rlx"), spread("eager")))
        L.append("| " + " | ".join(line) + " |")
    table = "\n".join(L)
    print(table)
    if a.out:
        try:
            cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
        except Exception:
            cpu = platform.processor()
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                                text=True).stdout.strip()
        tv = next((x.get("torch") for v in cells.values() for x in v if x.get("torch")), "?")
        gemm = ""
        try:
            gemm = subprocess.run([a.rlx, "--workload", "none"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True).stdout.splitlines()[0]
        except Exception:
            pass
        with open(a.out, "x") as f:
            f.write("# Training steps/s: RLX beside PyTorch (%s)\n\n" % a.device)
            f.write("- Date: %s; commit %s; %s; %s; PyTorch %s\n" % (started.strftime("%Y-%m-%d %H:%M UTC"), commit,
                                                                     cpu, gemm, tv))
            f.write("- Command: `%s`\n" % " ".join(["bench/train/run.sh"] + sys.argv[1:]))
            f.write("- Environment: OMP_NUM_THREADS=%s; OPENBLAS_CORETYPE=%s; load averages at the end %s\n" % (
                env["OMP_NUM_THREADS"], env.get("OPENBLAS_CORETYPE", "(unset)"),
                " ".join("%.2f" % x for x in os.getloadavg())))
            if peaks:
                f.write("- FLOP floor: SGEMM 2048³ f32 through torch.mm at %d threads, best of 5, at the start and "
                        "the end: %s GFLOP/s (the largest is the peak)\n" % (a.threads, ", ".join("%.0f" % x for x in peaks)))
            elif peak:
                f.write("- FLOP floor: %.0f GFLOP/s (given)\n" % peak)
            f.write("- %d rounds, interleaved (RLX, then PyTorch, per row); each process: %d warm-up steps, then %d x %d "
                    "timed steps (median)\n\n" % (a.rounds, a.warmup, a.repeat, a.steps))
            f.write(table + "\n\n## Per round\n\n")
            for m in log:
                f.write("- " + m + "\n")
        print("written to " + a.out, file=sys.stderr)


if __name__ == "__main__":
    main()
