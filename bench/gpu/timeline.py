#!/usr/bin/env python3
"""Kernel-by-kernel timeline of one forward pass on the GPU, RLX and PyTorch.

    python3 bench/gpu/timeline.py BUILD_DIR mlp|encoder|resnet50|decoder BATCH f32|f16|bf16 [--no-torch] [--compile]

RLX runs the WORKLOADS.md graph built through the C API (librlx from
BUILD_DIR, through ctypes); PyTorch runs the same model from
bench/gpu/torch_bench.py captured into a CUDA graph.  Both are traced with
torch.profiler (CUPTI), which sees every kernel of the process, library
kernels and CUDA-graph nodes included.  Kernels are grouped into forwards
by idle gaps over 4 us; for the forwards of the most common form it prints
each kernel's median duration and the median gap before it (short graphs),
the total per kernel name, the median span from the first kernel's start
to the last one's end, and the host's median time per run (through
ctypes or Python, so a few us above bench/gpu/run.sh's figures).  With
--compile it traces torch.compile(mode="reduce-overhead") too.  CUPTI's
tracing adds a little to every kernel, so spans of graphs with many kernels
come out longer than untraced runs; compare figures of this tool with each
other.

RLX compiles before torch is imported, so librlx opens the system's cuDNN
rather than the copy PyTorch ships (the two pick different kernels).
"""
import collections
import ctypes
import json
import os
import statistics as st
import sys
import tempfile
import time

DTYPES = {"f32": 0, "f16": 1, "bf16": 2}


class EncoderConfig(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("seq", ctypes.c_int), ("layers", ctypes.c_int), ("hidden", ctypes.c_int),
                ("heads", ctypes.c_int), ("ffn", ctypes.c_int), ("vocab", ctypes.c_int), ("max_pos", ctypes.c_int),
                ("eps", ctypes.c_double)]


class DecoderConfig(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("seq", ctypes.c_int), ("layers", ctypes.c_int), ("hidden", ctypes.c_int),
                ("heads", ctypes.c_int), ("kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int), ("ffn", ctypes.c_int),
                ("vocab", ctypes.c_int), ("rope_theta", ctypes.c_double), ("eps", ctypes.c_double),
                ("dtype", ctypes.c_int)]


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("dims", ctypes.c_int64 * 8), ("bytes", ctypes.c_size_t)]


def load_rlx(build):
    lib = ctypes.CDLL(os.path.join(build, "librlx.so"))
    lib.rlx_workload_mlp.restype = ctypes.c_void_p
    lib.rlx_workload_mlp.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.rlx_workload_resnet50.restype = ctypes.c_void_p
    lib.rlx_workload_resnet50.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.rlx_encoder_minilm.restype = EncoderConfig
    lib.rlx_encoder_minilm.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.rlx_workload_encoder.restype = ctypes.c_void_p
    lib.rlx_workload_encoder.argtypes = [ctypes.POINTER(EncoderConfig)]
    lib.rlx_decoder_qwen3_06b.restype = DecoderConfig
    lib.rlx_decoder_qwen3_06b.argtypes = [ctypes.c_int]
    lib.rlx_workload_decoder.restype = ctypes.c_void_p
    lib.rlx_workload_decoder.argtypes = [ctypes.POINTER(DecoderConfig)]
    lib.rlx_options_init.argtypes = [ctypes.c_void_p]
    lib.rlx_compile.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.rlx_last_error.restype = ctypes.c_char_p
    lib.rlx_workload_init_params.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.rlx_session_run.argtypes = [ctypes.c_void_p]
    lib.rlx_session_count.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rlx_session_info.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.rlx_session_set_input.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    return lib


def compile_rlx(lib, name, batch, dts):
    """The session (compiled on the GPU, params set); inputs are set later."""
    dt = DTYPES[dts]
    # rlx_options begins with the device, then the precision (include/rlx.h)
    opts = ctypes.create_string_buffer(512)
    lib.rlx_options_init(opts)
    ctypes.c_int.from_buffer(opts, 0).value = 1  # RLX_DEVICE_CUDA
    if name == "mlp":
        g = lib.rlx_workload_mlp(batch, dt)
    elif name == "resnet50":
        g = lib.rlx_workload_resnet50(batch, dt)
    elif name == "decoder":  # the prefill of 512 tokens
        cfg = lib.rlx_decoder_qwen3_06b(512)
        cfg.batch, cfg.dtype = batch, dt
        g = lib.rlx_workload_decoder(ctypes.byref(cfg))
    else:
        cfg = lib.rlx_encoder_minilm(batch, 128)
        g = lib.rlx_workload_encoder(ctypes.byref(cfg))
        ctypes.c_int.from_buffer(opts, 4).value = dt  # the encoder is built in f32; precision does the rest
    s = ctypes.c_void_p()
    if not g or lib.rlx_compile(g, opts, ctypes.byref(s)) != 0:
        sys.exit("rlx: " + lib.rlx_last_error().decode())
    if lib.rlx_workload_init_params(s, 1) != 0:
        sys.exit("rlx: " + lib.rlx_last_error().decode())
    return s


def set_inputs(lib, s, torch):
    keep = []
    for i in range(lib.rlx_session_count(s, 0)):
        info = TensorInfo()
        lib.rlx_session_info(s, 0, i, ctypes.byref(info))
        dims = [info.dims[d] for d in range(info.ndim)]
        floats = {0: torch.float32, 1: torch.float16, 2: torch.bfloat16}
        if info.dtype in floats:  # normal values
            t = torch.randn(dims).to(floats[info.dtype])
        elif info.dtype in (4, 5):  # token ids, i64 or i32
            t = torch.randint(0, 30000, dims, dtype=torch.int64 if info.dtype == 4 else torch.int32)
        else:
            sys.exit(f"timeline: input of dtype {info.dtype} not handled")
        t = t.contiguous()
        keep.append(t)
        if lib.rlx_session_set_input(s, info.name, ctypes.c_void_p(t.data_ptr()), info.bytes) != 0:
            sys.exit("rlx: " + lib.rlx_last_error().decode())
    return keep


def host_us(fn, n=300):
    for _ in range(30):
        fn()
    ts = []
    for _ in range(n):
        a = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - a) * 1e6)
    return st.median(ts)


def trace(torch, fn, n=100):
    for _ in range(30):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            fn()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        p.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    return sorted((e["ts"], e["dur"], e["name"]) for e in events if e.get("cat") == "kernel")


def forwards(kernels):
    out, cur, last = [], [], None
    for s, d, n in kernels:
        if last is not None and s - last > 4.0:
            out.append(cur)
            cur = []
        cur.append((s, d, n))
        last = max(last or 0.0, s + d)
    if cur:
        out.append(cur)
    return out[2:-2]  # the profiler's first and last forwards can be cut


def report(tag, kernels, host):
    fw = forwards(kernels)
    if not fw:
        print(f"== {tag}: no kernels traced")
        return
    form = collections.Counter(tuple(n for _, _, n in b) for b in fw).most_common(1)[0][0]
    use = [b for b in fw if tuple(n for _, _, n in b) == form]
    span = st.median([b[-1][0] + b[-1][1] - b[0][0] for b in use])
    print(f"== {tag}: {len(use)} of {len(fw)} forwards of the common form, {len(form)} kernels; "
          f"span {span:.2f} us, host time per run {host:.2f} us")
    per_name = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for i, name in enumerate(form):
        dur = st.median([b[i][1] for b in use])
        gap = st.median([b[i][0] - (b[i - 1][0] + b[i - 1][1]) for b in use]) if i else 0.0
        agg = per_name[name]
        agg[0] += dur
        agg[1] += gap
        agg[2] += 1
        if len(form) <= 24:
            print(f"  {i:2d} {dur:7.2f} us  gap before {gap:6.2f} us  {name[:100]}")
    print("  by kernel: total us, total gap before, count")
    for name, (dur, gap, cnt) in sorted(per_name.items(), key=lambda kv: -kv[1][0]):
        print(f"    {dur:8.2f} {gap:7.2f} {cnt:4d}  {name[:100]}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 4:
        sys.exit(__doc__)
    build, name, batch, dts = args[0], args[1], int(args[2]), args[3]
    lib = load_rlx(build)
    s = compile_rlx(lib, name, batch, dts)
    import torch  # after the RLX compile: see the module's note
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    keep = set_inputs(lib, s, torch)
    run = lambda: lib.rlx_session_run(s)
    report(f"RLX {name} b{batch} {dts}", trace(torch, run), host_us(run))
    del keep
    if "--no-torch" in sys.argv:
        return
    import torch_bench
    m, x = torch_bench.build(name, batch, {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dts])
    with torch.inference_mode():
        g, _ = torch_bench.capture_graph(m, x)
        replay = lambda: (g.replay(), torch.cuda.synchronize())
        report(f"PyTorch CUDA graph {name} b{batch} {dts}", trace(torch, replay), host_us(replay))
        del g
        if "--compile" in sys.argv:  # torch.compile(mode="reduce-overhead") as well
            cm = torch.compile(m, mode="reduce-overhead")
            for _ in range(5):
                cm(x)
            call = lambda: (cm(x), torch.cuda.synchronize())
            report(f"PyTorch compiled {name} b{batch} {dts}", trace(torch, call), host_us(call))


if __name__ == "__main__":
    main()
