/* canon.c - canonical forms: a decomposition of an op RLX has natively is
 * rewritten into that op, so that fusion and the backends see it.  This
 * file drives the pass; the families of rewrites are canon_act.c,
 * canon_norm.c, canon_rope.c, canon_flat.c, canon_split.c and canon_attn.c
 * (canon.h).  The forms are those exporters write for ONNX opsets without
 * the op:
 *
 *   GELU       x * 0.5 * (1 + erf(x / sqrt 2))
 *              (PyTorch: (x * (erf(x / sqrt 2) + 1)) * 0.5)
 *   GELU tanh  0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
 *              with x^3 as x * (x * x), (x * x) * x or pow(x, 3)
 *   SiLU       x * sigmoid(x)
 *   max/min    a float clip(x, lo, hi) read from or by another op an
 *              elementwise chain can hold becomes min(max(x, lo), hi), so
 *              that it joins the chain (hard-swish, hard-sigmoid, ReLU6)
 *   LayerNorm  d / sqrt(mean(d^2) + eps) with d = x - mean(x)
 *              [* gamma] [+ beta]   (PyTorch before opset 17)
 *   RMSNorm    x / sqrt(mean(x^2) + eps) [* gamma]
 *              (either norm of a 16-bit x also computed in f32 between
 *              casts, gamma * cast(norm(cast(x, f32)), x's dtype), as
 *              Hugging Face's RMSNorm writes it)
 *   RoPE       x * cos + cat(-x[..., D/2:], x[..., :D/2]) * sin with
 *              constant cos/sin tables over x's last two axes that hold
 *              consecutive positions and theta^(-2i/D) frequencies (checked
 *              entry by entry; canon_rope.c)
 *   flattened  reshape(reshape(x, [M, K]) @ W [+ b], x's leading dims + [N])
 *   projection becomes x @ W [+ b] (GPT-2's Conv1D; canon_flat.c)
 *   projection slice(x @ W [+ b], last axis) where every reader of the
 *   cut        product is such a slice (a fused qkv or gate/up projection)
 *              becomes x @ W[:, cut] [+ b[cut]], W and b constants
 *              (canon_split.c)
 *   attention  softmax(q k^T * c [+ mask]) v   (the scale as a product
 *              with c or a division by 1 / c, or split as (q * a) (k^T *
 *              b); k^T a transpose of a [B, H, T, D] tensor or of one RLX
 *              transposes to it; the mask added to the scaled scores, of
 *              q's dtype; a constant causal mask, or a where() that
 *              fills the keys after the causal ones with -inf, becomes
 *              the causal flag; another where() with a bool select
 *              becomes attention's bool mask; k and v written out with
 *              each head repeated n times in a row (repeat_kv) become
 *              grouped heads)
 *
 * in any grouping of the three GELU factors, either operand order of every
 * product and sum, and x * (1 / sqrt 2) for the division.  In the norms the
 * means are over the last axis with the axis kept, a square is pow(v, 2) or
 * v * v, eps is a scalar constant >= 0, and the division may be a product
 * with rsqrt(...), 1 / sqrt(...) or reciprocal(sqrt(...)); gamma and beta
 * are vectors the size of the last axis.  The rewritten node must keep x's
 * shape and dtype (a constant that broadcasts x is not a scalar factor).
 * What the rewrite leaves unused, the next dce removes.  One difference
 * is accepted: a query row whose scores the mask makes all -inf gives
 * zeros in RLX's attention where the softmax gives NaN. */
#include <stdio.h>

#include "opt/canon.h"

/* Node id as the one op it writes out, or a copy; *arg counts rewrites. */
static rlx_node canon_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    rlx_node y;
    if (!canon_activation(out, g, id, map, &y) && !canon_norm(out, g, id, map, &y) &&
        !canon_rope(out, g, id, map, &y) && !canon_unflatten_projection(out, g, id, map, &y) &&
        !canon_split_projection(out, g, id, map, &y) && !canon_attention(out, g, id, map, &y))
        return RLX_REBUILD_COPY;
    (*(int *)arg)++;
    return y < 0 ? RLX_REBUILD_FAIL : y;
}

/* A rewrite can make another form visible (a projection unflattened is
 * then a product the cut rule takes), so the pass runs in rounds, dead
 * nodes removed between them, until a round rewrites nothing. */
#define CANON_ROUNDS 4

rlx_graph *rlx_pass_canon(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    rlx_graph *cur = NULL;
    int total = 0;
    for (int round = 0; round < CANON_ROUNDS; round++) {
        int rewritten = 0;
        rlx_graph *next = rlx_rebuild(cur ? cur : g, canon_node, &rewritten);
        if (next && rewritten) {
            rlx_graph *clean = rlx_pass_dce(next, ctx);
            rlx_graph_free(next);
            next = clean;
        }
        rlx_graph_free(cur);
        if (!next)
            return NULL;
        cur = next;
        total += rewritten;
        if (!rewritten)
            break;
    }
    if (total && ctx && ctx->verbose)
        fprintf(stderr, "[rlx canon] %d form%s rewritten (activations, norms, ropes, projections, attention)\n", total,
                total == 1 ? "" : "s");
    return cur;
}
