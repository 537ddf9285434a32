/* report.c - the dispatch report (RLX_DISPATCH_REPORT=1, RLX_VERBOSE=1,
 * `rlx run --report`): per op kind, how many nodes the graph had before
 * fusion, and how many of the final graph run natively on the backend, were
 * produced by lowering a node the backend does not claim, or are missing (no
 * kernel: the compile fails on them).  Then what fusion and lowering did. */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

void rlx_opt_dispatch_report(const rlx_graph *before, const rlx_graph *after, const rlx_backend *be,
                             const rlx_opt_stats *st, FILE *f)
{
    int n_before[RLX_OP_COUNT] = {0}, native[RLX_OP_COUNT] = {0}, missing[RLX_OP_COUNT] = {0};
    int leaves = 0;
    for (int i = 0; i < before->n_nodes; i++)
        n_before[before->nodes[i].op]++;
    for (int i = 0; i < after->n_nodes; i++) {
        rlx_op op = after->nodes[i].op;
        const rlx_op_info *info = rlx_op_info_of(op);
        if ((info->flags & RLX_OPF_LEAF) && !(info->flags & RLX_OPF_RANDOM)) {
            leaves++;
            continue;
        }
        if (be->supports(after, i))
            native[op]++;
        else
            missing[op]++;
    }
    fprintf(f, "[rlx %s] dispatch report\n", be->name);
    fprintf(f, "  %-20s %7s %7s %8s %8s\n", "op", "before", "native", "lowered", "missing");
    int tb = 0, tn = 0, tl = 0, tm = 0;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *info = rlx_op_info_of((rlx_op)op);
        if (!info || ((info->flags & RLX_OPF_LEAF) && !(info->flags & RLX_OPF_RANDOM)))
            continue;
        int low = st ? st->lowered[op] : 0;
        if (!n_before[op] && !native[op] && !low && !missing[op])
            continue;
        fprintf(f, "  %-20s %7d %7d %8d %8d%s\n", info->name, n_before[op], native[op], low, missing[op],
                (info->flags & RLX_OPF_FUSED) ? "  (fused)" : "");
        tb += n_before[op];
        tn += native[op];
        tl += low;
        tm += missing[op];
    }
    fprintf(f, "  %-20s %7d %7d %8d %8d\n", "total", tb, tn, tl, tm);
    fprintf(f, "  leaves (inputs, params, constants): %d; reshapes and contiguous slices become views\n", leaves);
    if (!st)
        return;
    if (st->nodes_before_fusion) {
        fprintf(f, "  fusion: %d -> %d nodes;", st->nodes_before_fusion, st->nodes_after_fusion);
        int any = 0;
        for (int op = RLX_OP_FIRST_FUSED; op < RLX_OP_COUNT; op++)
            if (st->fused[op]) {
                fprintf(f, "%s %s x%d", any ? "," : "", rlx_op_name((rlx_op)op), st->fused[op]);
                any = 1;
            }
        if (st->fused[RLX_OP_CONV])
            fprintf(f, "%s conv (scale and shift folded) x%d", any ? "," : "", st->fused[RLX_OP_CONV]), any = 1;
        if (!any)
            fprintf(f, " nothing fused");
        if (st->bn_folded)
            fprintf(f, "; %d batch norm(s) folded into conv weights", st->bn_folded);
        if (st->affine_folded)
            fprintf(f, "; %d per-channel add/sub/mul/div step(s) folded into conv weights", st->affine_folded);
        if (st->fusion_refused)
            fprintf(f, "; %d match(es) not fused because the backend does not claim the fused op", st->fusion_refused);
        fprintf(f, "\n");
    } else {
        fprintf(f, "  fusion: off\n");
    }
    if (st->amp_low || st->casts_inserted || st->amp_fallback)
        fprintf(f, "  mixed precision: %d nodes in low precision, %d casts inserted, %d removed, %d fallbacks to f32\n",
                st->amp_low, st->casts_inserted, st->casts_removed, st->amp_fallback);
}
