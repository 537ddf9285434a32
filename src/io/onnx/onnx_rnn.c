/* onnx_rnn.c - RNN, GRU and LSTM unrolled over the (static) sequence into
 * matmuls, slices and activations; both layouts, both directions,
 * peepholes, clip, linear_before_reset. */
#include <math.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "ir/ir.h" /* rlx_graph_fail: record a composite's failure in the graph */

#define G (n->c->g)

static rlx_node act(onnx_node *n, const char *name, double alpha, double beta, rlx_node x, bool has_a, bool has_b)
{
    rlx_dtype t = rlx_node_dtype(G, x);
#define S(v) onnx_scalar(n, t, (v))
    if (!strcasecmp(name, "Sigmoid"))
        return rlx_sigmoid(G, x);
    if (!strcasecmp(name, "Tanh"))
        return rlx_tanh(G, x);
    if (!strcasecmp(name, "Relu"))
        return rlx_relu(G, x);
    if (!strcasecmp(name, "Affine"))
        return rlx_add(G, rlx_mul(G, x, S(has_a ? alpha : 1)), S(has_b ? beta : 0));
    if (!strcasecmp(name, "LeakyRelu"))
        return rlx_where(G, rlx_less(G, x, S(0)), rlx_mul(G, x, S(has_a ? alpha : 0.01)), x);
    if (!strcasecmp(name, "ThresholdedRelu"))
        return rlx_where(G, rlx_greater(G, x, S(has_a ? alpha : 1)), x, S(0));
    if (!strcasecmp(name, "ScaledTanh"))
        return rlx_mul(G, S(has_a ? alpha : 1), rlx_tanh(G, rlx_mul(G, x, S(has_b ? beta : 1))));
    if (!strcasecmp(name, "HardSigmoid"))
        return rlx_clip(G, rlx_add(G, rlx_mul(G, x, S(has_a ? alpha : 0.2)), S(has_b ? beta : 0.5)), 0, 1);
    if (!strcasecmp(name, "Elu"))
        return rlx_where(G, rlx_greater(G, x, S(0)), x,
                         rlx_mul(G, S(has_a ? alpha : 1), rlx_sub(G, rlx_exp(G, x), S(1))));
    if (!strcasecmp(name, "Softsign"))
        return rlx_div(G, x, rlx_add(G, S(1), rlx_abs(G, x)));
    if (!strcasecmp(name, "Softplus"))
        return rlx_log(G, rlx_add(G, rlx_exp(G, x), S(1)));
#undef S
    return rlx_graph_fail(G, RLX_ERR_UNSUPPORTED, "recurrent activation '%s'", name);
}

static rlx_node slice1(onnx_node *n, rlx_node x, int axis, int64_t s, int64_t e)
{
    return rlx_slice(G, x, 1, &axis, &s, &e, NULL);
}

static rlx_status h_rnn(onnx_node *n)
{
    const char *op = n->p->op_type;
    int kind = !strcmp(op, "RNN") ? 0 : (!strcmp(op, "GRU") ? 1 : 2);
    int ng = kind == 0 ? 1 : (kind == 1 ? 3 : 4);
    if (n->n_in < 3)
        return onnx_fail(n, RLX_ERR_FORMAT, "needs X, W, R");
    rlx_node X = onnx_in(n, 0), W = onnx_in(n, 1), R = onnx_in(n, 2);
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    if (onnx_shape(n, X, xd) != 3 || onnx_shape(n, W, wd) != 3)
        return onnx_fail(n, RLX_ERR_SHAPE, "X and W must have rank 3");
    int layout = (int)onnx_attr_i(n, "layout", 0);
    if (layout) {
        X = rlx_transpose(G, X, (int[]){1, 0, 2});
        int64_t t = xd[0];
        xd[0] = xd[1];
        xd[1] = t;
    }
    int64_t S = xd[0], B = xd[1], I = xd[2];
    int64_t H = onnx_attr_i(n, "hidden_size", wd[1] / ng);
    char dbuf[32];
    const char *dir = onnx_attr_s(n, "direction", "forward", dbuf, sizeof dbuf);
    int D = !strcmp(dir, "bidirectional") ? 2 : 1;
    if (wd[0] != D || wd[1] != ng * H || wd[2] != I)
        return onnx_fail(n, RLX_ERR_SHAPE, "W does not fit [dirs, gates*H, input]");
    if (S < 1)
        return onnx_fail(n, RLX_ERR_SHAPE, "empty sequence");
    if (S > 4096)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "sequence of %lld steps is too long to unroll", (long long)S);
    rlx_dtype t = onnx_in_dtype(n, 0);
    /* sequence_lens: every length == S needs nothing; otherwise (forward
     * only) steps past a batch entry's length keep its state and output 0 */
    rlx_node lens = -1;
    if (n->n_in > 4 && n->in[4]) {
        const onnx_tensor *k = n->in[4]->k;
        bool full = k != NULL;
        for (int64_t i = 0; k && i < k->numel; i++)
            full &= onnx_get_i(k, i) == S;
        if (!full) {
            char db[32];
            if (strcmp(onnx_attr_s(n, "direction", "forward", db, sizeof db), "forward"))
                return onnx_fail(n, RLX_ERR_UNSUPPORTED,
                                 "sequence_lens shorter than the sequence with a reverse direction");
            int64_t ld[RLX_MAX_DIMS];
            if (onnx_in_shape(n, 4, ld) != 1)
                return onnx_fail(n, RLX_ERR_SHAPE, "sequence_lens must be 1-d");
            lens = rlx_reshape(G, rlx_cast(G, onnx_in(n, 4), RLX_I64), 2, (int64_t[]){ld[0], 1});
        }
    }
    double clip = onnx_attr_f(n, "clip", -1);
    int lbr = (int)onnx_attr_i(n, "linear_before_reset", 0);
    int input_forget = (int)onnx_attr_i(n, "input_forget", 0);
    /* activations */
    const char *defs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int nact = kind == 0 ? 1 : (kind == 1 ? 2 : 3);
    char acts[6][32];
    float alphas[6], betas[6];
    int na_alpha = onnx_attr_floats(n, "activation_alpha", alphas, 6),
        na_beta = onnx_attr_floats(n, "activation_beta", betas, 6);
    const Onnx__AttributeProto *aa = onnx_attr(n, "activations");
    for (int d = 0; d < D; d++)
        for (int k = 0; k < nact; k++) {
            size_t idx = (size_t)(d * nact + k);
            if (aa && idx < aa->n_strings) {
                size_t l = aa->strings[idx].len < 31 ? aa->strings[idx].len : 31;
                memcpy(acts[idx], aa->strings[idx].data, l);
                acts[idx][l] = 0;
            } else
                snprintf(acts[idx], 32, "%s", defs[kind][k]);
        }
    rlx_node Bias = n->n_in > 3 && n->in[3] ? onnx_in(n, 3) : -1;
    rlx_node H0 = n->n_in > 5 && n->in[5] ? onnx_in(n, 5) : -1;
    rlx_node C0 = kind == 2 && n->n_in > 6 && n->in[6] ? onnx_in(n, 6) : -1;
    rlx_node P = kind == 2 && n->n_in > 7 && n->in[7] ? onnx_in(n, 7) : -1;
    if (layout) {
        if (H0 >= 0)
            H0 = rlx_transpose(G, H0, (int[]){1, 0, 2});
        if (C0 >= 0)
            C0 = rlx_transpose(G, C0, (int[]){1, 0, 2});
    }
    rlx_node ys[2], hs[2], cs[2];
    rlx_node Xall = rlx_reshape(G, X, 2, (int64_t[]){S * B, I});
    for (int d = 0; d < D; d++) {
        rlx_node Wd = rlx_reshape(G, slice1(n, W, 0, d, d + 1), 2, (int64_t[]){ng * H, I});
        rlx_node Rd = rlx_reshape(G, slice1(n, R, 0, d, d + 1), 2, (int64_t[]){ng * H, H});
        rlx_node XW = rlx_matmul(G, Xall, Wd, 0, 1); /* [S*B, ng*H] */
        rlx_node Rb = -1;
        if (Bias >= 0) {
            rlx_node bd = rlx_reshape(G, slice1(n, Bias, 0, d, d + 1), 1, (int64_t[]){2 * ng * H});
            rlx_node Wb = slice1(n, bd, 0, 0, ng * H);
            Rb = slice1(n, bd, 0, ng * H, 2 * ng * H);
            if (kind == 1)
                XW = rlx_add(G, XW, Wb);
            else {
                XW = rlx_add(G, XW, rlx_add(G, Wb, Rb));
                Rb = -1;
            }
        }
        XW = rlx_reshape(G, XW, 3, (int64_t[]){S, B, ng * H});
        rlx_node h = H0 >= 0 ? rlx_reshape(G, slice1(n, H0, 0, d, d + 1), 2, (int64_t[]){B, H})
                             : rlx_expand(G, onnx_scalar(n, t, 0), 2, (int64_t[]){B, H});
        rlx_node c = -1;
        if (kind == 2)
            c = C0 >= 0 ? rlx_reshape(G, slice1(n, C0, 0, d, d + 1), 2, (int64_t[]){B, H})
                        : rlx_expand(G, onnx_scalar(n, t, 0), 2, (int64_t[]){B, H});
        rlx_node Pi = -1, Po = -1, Pf = -1;
        if (P >= 0) {
            rlx_node pd = rlx_reshape(G, slice1(n, P, 0, d, d + 1), 1, (int64_t[]){3 * H});
            Pi = slice1(n, pd, 0, 0, H);
            Po = slice1(n, pd, 0, H, 2 * H);
            Pf = slice1(n, pd, 0, 2 * H, 3 * H);
        }
        const char *f = acts[d * nact], *g = nact > 1 ? acts[d * nact + 1] : NULL,
                   *hh = nact > 2 ? acts[d * nact + 2] : NULL;
        int ai = d * nact;
#define ACT(name, k, x) \
    act(n, name, na_alpha > (k) ? alphas[k] : 0, na_beta > (k) ? betas[k] : 0, x, na_alpha > (k), na_beta > (k))
#define CLIP(x) (clip > 0 ? rlx_clip(G, x, -clip, clip) : (x))
        bool reverse = !strcmp(dir, "reverse") || d == 1;
        rlx_node *steps = rlx_calloc((size_t)S, sizeof(rlx_node));
        if (!steps)
            return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        rlx_node Rh = kind == 1 && !lbr ? slice1(n, Rd, 0, 2 * H, 3 * H) : -1;
        rlx_node Rzr = kind == 1 && !lbr ? slice1(n, Rd, 0, 0, 2 * H) : -1;
        for (int64_t k = 0; k < S; k++) {
            int64_t s = reverse ? S - 1 - k : k;
            rlx_node xw = rlx_reshape(G, slice1(n, XW, 0, s, s + 1), 2, (int64_t[]){B, ng * H});
            rlx_node h_prev = h, c_prev = c;
            if (kind == 0) {
                h = ACT(f, ai, CLIP(rlx_add(G, xw, rlx_matmul(G, h, Rd, 0, 1))));
            } else if (kind == 2) {
                rlx_node gates = rlx_add(G, xw, rlx_matmul(G, h, Rd, 0, 1));
                rlx_node gi = slice1(n, gates, 1, 0, H), go = slice1(n, gates, 1, H, 2 * H);
                rlx_node gf = slice1(n, gates, 1, 2 * H, 3 * H), gc = slice1(n, gates, 1, 3 * H, 4 * H);
                if (Pi >= 0) {
                    gi = rlx_add(G, gi, rlx_mul(G, Pi, c));
                    gf = rlx_add(G, gf, rlx_mul(G, Pf, c));
                }
                rlx_node it = ACT(f, ai, CLIP(gi));
                rlx_node ft = input_forget ? rlx_sub(G, onnx_scalar(n, t, 1), it) : ACT(f, ai, CLIP(gf));
                rlx_node ct = ACT(g, ai + 1, CLIP(gc));
                c = rlx_add(G, rlx_mul(G, ft, c), rlx_mul(G, it, ct));
                if (Po >= 0)
                    go = rlx_add(G, go, rlx_mul(G, Po, c));
                rlx_node ot = ACT(f, ai, CLIP(go));
                h = rlx_mul(G, ot, ACT(hh, ai + 2, c));
            } else {
                rlx_node xz = slice1(n, xw, 1, 0, H), xr = slice1(n, xw, 1, H, 2 * H),
                         xh = slice1(n, xw, 1, 2 * H, 3 * H);
                rlx_node rec, rz, rr;
                if (lbr) {
                    rec = rlx_matmul(G, h, Rd, 0, 1);
                    if (Rb >= 0)
                        rec = rlx_add(G, rec, Rb);
                    rz = slice1(n, rec, 1, 0, H);
                    rr = slice1(n, rec, 1, H, 2 * H);
                } else {
                    rec = rlx_matmul(G, h, Rzr, 0, 1);
                    if (Rb >= 0)
                        rec = rlx_add(G, rec, slice1(n, Rb, 0, 0, 2 * H));
                    rz = slice1(n, rec, 1, 0, H);
                    rr = slice1(n, rec, 1, H, 2 * H);
                }
                rlx_node z = ACT(f, ai, CLIP(rlx_add(G, xz, rz)));
                rlx_node r = ACT(f, ai, CLIP(rlx_add(G, xr, rr)));
                rlx_node hpre;
                if (lbr)
                    hpre = rlx_add(G, xh, rlx_mul(G, r, slice1(n, rec, 1, 2 * H, 3 * H)));
                else {
                    rlx_node m = rlx_matmul(G, rlx_mul(G, r, h), Rh, 0, 1);
                    if (Rb >= 0)
                        m = rlx_add(G, m, slice1(n, Rb, 0, 2 * H, 3 * H));
                    hpre = rlx_add(G, xh, m);
                }
                rlx_node ht = ACT(g, ai + 1, CLIP(hpre));
                h = rlx_add(G, rlx_mul(G, rlx_sub(G, onnx_scalar(n, t, 1), z), ht), rlx_mul(G, z, h));
            }
            if (lens >= 0) {
                rlx_node live = rlx_less(G, onnx_scalar(n, RLX_I64, (double)s), lens); /* [B, 1] */
                steps[s] = rlx_reshape(G, rlx_where(G, live, h, onnx_scalar(n, t, 0)), 4, (int64_t[]){1, 1, B, H});
                h = rlx_where(G, live, h, h_prev);
                if (kind == 2)
                    c = rlx_where(G, live, c, c_prev);
            } else
                steps[s] = rlx_reshape(G, h, 4, (int64_t[]){1, 1, B, H});
        }
#undef ACT
#undef CLIP
        ys[d] = rlx_concat(G, (int)S, steps, 0);
        free(steps);
        hs[d] = rlx_reshape(G, h, 3, (int64_t[]){1, B, H});
        if (kind == 2)
            cs[d] = rlx_reshape(G, c, 3, (int64_t[]){1, B, H});
    }
    rlx_node Y = D == 2 ? rlx_concat(G, 2, ys, 1) : ys[0];
    rlx_node Yh = D == 2 ? rlx_concat(G, 2, hs, 0) : hs[0];
    rlx_node Yc = kind == 2 ? (D == 2 ? rlx_concat(G, 2, cs, 0) : cs[0]) : -1;
    if (layout) {
        Y = rlx_transpose(G, Y, (int[]){2, 0, 1, 3});
        Yh = rlx_transpose(G, Yh, (int[]){1, 0, 2});
        if (Yc >= 0)
            Yc = rlx_transpose(G, Yc, (int[]){1, 0, 2});
    }
    rlx_status st = onnx_out_node(n, 0, Y);
    if (st == RLX_OK && n->n_out > 1)
        st = onnx_out_node(n, 1, Yh);
    if (st == RLX_OK && n->n_out > 2 && kind == 2)
        st = onnx_out_node(n, 2, Yc);
    return st;
}

const onnx_op onnx_rnn_ops[] = {
    ONNX_OP("LSTM", h_rnn, 3),
    ONNX_OP("GRU", h_rnn, 3),
    ONNX_OP("RNN", h_rnn, 3),
    ONNX_OP_END,
};
