"""table.py - joins RLX and PyTorch GPU results (JSON lines / RESULT lines)
into one table: medians, ratio of the best PyTorch row to RLX, and each
row's floor (the larger of FLOPs over the measured bf16 matrix rate and
the fewest bytes over the measured copy bandwidth).

usage: table.py RESULTS_FILE [markdown_out]"""
import json
import sys

ES = {"f32": 4, "f16": 2, "bf16": 2}


def counts(w, b, dt):
    """(FLOPs, fewest bytes) of one forward pass."""
    es = ES[dt]
    if w == "mlp":
        params = 1024 * 4096 + 4096 * 4096 + 4096 * 1024
        return 2 * b * params, (params + 4096 * 2 + 1024) * es + b * 2048 * es
    if w == "encoder":
        S, H, F, L = 128, 384, 1536, 6
        flops = L * (2 * b * S * (4 * H * H + 2 * H * F) + 4 * b * S * S * H)
        weights = L * (4 * H * H + 2 * H * F) * es
        return flops, weights + b * S * H * (es + 4) + b * S * 8
    if w == "decoder":  # Qwen3-0.6B-shaped prefill of 512 tokens, causal attention, tied logits
        S, H, L, heads, kv, d, F, V = 512, 1024, 28, 16, 8, 128, 3072, 151936
        layer = H * heads * d * 2 + H * kv * d * 2 + 3 * H * F
        flops = 2 * b * S * (L * layer + H * V) + L * 4 * b * heads * d * S * S // 2
        return flops, (L * layer + V * H) * es + b * S * V * es
    # resnet50 v1.5: 4.09 GMAC per 224x224 image, 25.5 M parameters
    return 2 * 4.09e9 * b, 25.5e6 * es + b * (3 * 224 * 224 + 1000) * es


def main():
    rows, torch_rows, ceil = {}, {}, {}
    for line in open(sys.argv[1]):
        line = line.strip()
        if line.startswith("RESULT "):
            p = line.split()
            rows[(p[1], int(p[2]), p[3])] = float(p[5])
        elif line.startswith("ERROR"):
            pass
        elif line.startswith("{"):
            d = json.loads(line)
            if d["kind"] == "ceiling":
                ceil = d
            else:
                # a mode measured twice in one run (eager and graph are timed again
                # beside torch.compile): its best time, the one RLX must beat
                t = torch_rows.setdefault((d["workload"], d["batch"], d["dtype"]), {})
                for x in ("eager_ms", "graph_ms", "compile_ms"):
                    if d.get(x) and (not t.get(x) or d[x] < t[x]):
                        t[x] = d[x]
    bw = ceil.get("copy_tbs", 4.25) * 1e12
    rate = ceil.get("bf16_tflops", 780) * 1e12
    out = []
    out.append(f"card: {ceil.get('card', '?')}, torch {ceil.get('torch', '?')}; measured ceilings: copy "
               f"{ceil.get('copy_tbs', float('nan')):.2f} TB/s, bf16 GEMM {ceil.get('bf16_tflops', float('nan')):.0f} TFLOP/s")
    out.append("")
    out.append("| workload | batch | dtype | RLX ms | torch eager | torch graph | torch compile | best torch / RLX | floor ms | RLX / floor | RLX TFLOP/s |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    keys = sorted(set(rows) | set(torch_rows), key=lambda k: (k[0], k[2], k[1]))
    for k in keys:
        w, b, dt = k
        r = rows.get(k)
        t = torch_rows.get(k, {})
        tv = [t.get(x) for x in ("eager_ms", "graph_ms", "compile_ms")]
        best = min([v for v in tv if v], default=None)
        flops, nbytes = counts(w, b, dt)
        # f32 matmuls run on the f32 (non tensor-core) pipe: about 1/12 the bf16 rate
        eff_rate = rate / 12 if dt == "f32" else rate
        floor = max(flops / eff_rate, nbytes / bw) * 1e3
        f = lambda v: f"{v:.3f}" if v else "-"
        out.append(f"| {w} | {b} | {dt} | {f(r)} | {f(tv[0])} | {f(tv[1])} | {f(tv[2])} | "
                   f"{(best / r if (best and r) else float('nan')):.2f} | {floor:.4f} | "
                   f"{(r / floor if r else float('nan')):.1f} | {(flops / (r * 1e-3) / 1e12 if r else float('nan')):.1f} |")
    for k in keys:  # WORKLOADS.md reports the decoder's prefill in tokens/s
        if k[0] == "decoder":
            r, t = rows.get(k), torch_rows.get(k, {})
            best = min([t[x] for x in ("eager_ms", "graph_ms", "compile_ms") if t.get(x)], default=None)
            tps = lambda v: f"{512 * k[1] / v * 1e3:,.0f}" if v else "-"
            out.append("")
            out.append(f"decoder {k[2]} prefill of 512 tokens: RLX {tps(r)} tokens/s, best PyTorch {tps(best)} tokens/s")
    text = "\n".join(out)
    print(text)
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").write(text + "\n")


if __name__ == "__main__":
    main()
