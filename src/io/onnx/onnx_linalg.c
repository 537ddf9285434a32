/* onnx_linalg.c - linear algebra: MatMul, Gemm, Einsum (contracted through
 * transposes, reshapes and batched matmuls) and Det of small matrices. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

static rlx_status h_matmul(onnx_node *n)
{
    rlx_node y = onnx_qdq_matmul(n, onnx_in(n, 0), onnx_in(n, 1));
    return onnx_out_node(n, 0, y >= 0 ? y : rlx_matmul(n->c->g, onnx_in(n, 0), onnx_in(n, 1), 0, 0));
}

static rlx_status h_gemm(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    double alpha = onnx_attr_f(n, "alpha", 1.0), beta = onnx_attr_f(n, "beta", 1.0);
    int ta = (int)onnx_attr_i(n, "transA", 0), tb = (int)onnx_attr_i(n, "transB", 0);
    rlx_dtype t = onnx_in_dtype(n, 0);
    rlx_node y = rlx_matmul(g, onnx_in(n, 0), onnx_in(n, 1), ta, tb);
    if (alpha != 1.0)
        y = rlx_mul(g, y, onnx_scalar(n, t, alpha));
    if (n->n_in >= 3 && n->in[2]) {
        rlx_node c = onnx_in(n, 2);
        if (beta != 1.0)
            c = rlx_mul(g, c, onnx_scalar(n, t, beta));
        y = rlx_add(g, y, c);
    }
    return onnx_out_node(n, 0, y);
}

static rlx_status h_einsum(onnx_node *n)
{
    char eq[256];
    const char *e = onnx_attr_s(n, "equation", "", eq, sizeof eq);
    char terms[3][64];
    int nt = 0;
    char out[64] = "";
    bool has_arrow = false;
    /* strip spaces, split on ',' and "->" */
    char s[256];
    int l = 0;
    for (const char *p = e; *p && l < 255; p++)
        if (*p != ' ')
            s[l++] = *p;
    s[l] = 0;
    char *arrow = strstr(s, "->");
    if (arrow) {
        has_arrow = true;
        snprintf(out, sizeof out, "%s", arrow + 2);
        *arrow = 0;
    }
    for (const char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '.' || *q == ','))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad character in einsum equation");
    for (const char *q = out; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '.'))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad character in einsum output");
    for (char *tok = strtok(s, ","); tok && nt < 3; tok = strtok(NULL, ","))
        snprintf(terms[nt++], 64, "%s", tok);
    if (nt != n->n_in || nt < 1 || nt > 2)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "einsum with %d operands", nt);
    /* expand "..." into digit labels */
    char lab[2][RLX_MAX_DIMS + 1];
    int ell_rank = 0;
    for (int t = 0; t < nt; t++) {
        int64_t d[RLX_MAX_DIMS];
        int r = onnx_in_shape(n, t, d);
        char *dots = strstr(terms[t], "...");
        int letters = (int)strlen(terms[t]) - (dots ? 3 : 0);
        int er = dots ? r - letters : 0;
        if (er < 0 || (!dots && letters != r))
            return onnx_fail(n, RLX_ERR_SHAPE, "equation does not fit operand %d", t);
        if (er > ell_rank)
            ell_rank = er;
        int k = 0;
        for (const char *p = terms[t]; *p && k < RLX_MAX_DIMS;) {
            if (!strncmp(p, "...", 3)) {
                for (int i = 0; i < er && k < RLX_MAX_DIMS; i++)
                    lab[t][k++] = (char)('0' + (ell_rank - er) + i);
                p += 3;
            } else
                lab[t][k++] = *p++;
        }
        lab[t][k] = 0;
    }
    char ol[RLX_MAX_DIMS + 1];
    int ko = 0;
    if (has_arrow) {
        for (const char *p = out; *p && ko < RLX_MAX_DIMS;) {
            if (!strncmp(p, "...", 3)) {
                for (int i = 0; i < ell_rank && ko < RLX_MAX_DIMS; i++)
                    ol[ko++] = (char)('0' + i);
                p += 3;
            } else
                ol[ko++] = *p++;
        }
    } else {
        for (int i = 0; i < ell_rank; i++)
            ol[ko++] = (char)('0' + i);
        for (char c = 'A'; c <= 'z'; c++) {
            if (c > 'Z' && c < 'a')
                continue;
            int dup = 0;
            for (int t = 0; t < nt; t++)
                for (const char *p = lab[t]; *p; p++)
                    dup += *p == c;
            if (dup == 1 && ko < RLX_MAX_DIMS)
                ol[ko++] = c;
        }
    }
    ol[ko] = 0;
    rlx_node ops[2];
    int64_t dim_of[128];
    for (int i = 0; i < 128; i++)
        dim_of[i] = -1;
    for (int t = 0; t < nt; t++) {
        ops[t] = onnx_in(n, t);
        int64_t d[RLX_MAX_DIMS];
        int r = onnx_in_shape(n, t, d);
        if ((int)strlen(lab[t]) != r)
            return onnx_fail(n, RLX_ERR_SHAPE, "equation does not fit operand %d", t);
        /* a label repeated in one operand takes the diagonal: move the pair
         * last, flatten it and gather every (n+1)-th element */
        for (bool again = true; again;) {
            again = false;
            for (int i = 0; i < r && !again; i++)
                for (int j = i + 1; j < r && !again; j++) {
                    if (lab[t][i] != lab[t][j])
                        continue;
                    if (d[i] != d[j])
                        return onnx_fail(n, RLX_ERR_SHAPE, "diagonal of unequal dims");
                    int perm[RLX_MAX_DIMS], k = 0;
                    char nl[RLX_MAX_DIMS + 1];
                    int64_t nd[RLX_MAX_DIMS];
                    for (int q = 0; q < r; q++)
                        if (q != i && q != j) {
                            nl[k] = lab[t][q];
                            nd[k] = d[q];
                            perm[k++] = q;
                        }
                    perm[k] = i;
                    perm[k + 1] = j;
                    rlx_node v = rlx_transpose(G, ops[t], perm);
                    nd[k] = d[i] * d[i];
                    v = rlx_reshape(G, v, k + 1, nd);
                    onnx_tensor *ix = onnx_tensor_derived(RLX_I64, 1, &d[i]);
                    if (!ix)
                        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
                    for (int64_t q = 0; q < d[i]; q++)
                        ((int64_t *)ix->data)[q] = q * (d[i] + 1);
                    ops[t] = rlx_gather(G, v, onnx_const_node(n, ix), k);
                    nl[k] = lab[t][i];
                    nd[k] = d[i];
                    nl[k + 1] = 0;
                    memcpy(lab[t], nl, (size_t)k + 2);
                    for (int q = 0; q <= k; q++)
                        d[q] = nd[q];
                    r = k + 1;
                    again = true;
                }
        }
        for (int i = 0; i < r; i++) {
            int c = (unsigned char)lab[t][i];
            if (dim_of[c] < 0 || dim_of[c] == 1)
                dim_of[c] = d[i];
        }
        /* sum out labels seen only here and not in the output */
        int axes[RLX_MAX_DIMS], na = 0;
        char keep[RLX_MAX_DIMS + 1];
        int kk = 0;
        for (int i = 0; i < r; i++) {
            char c = lab[t][i];
            bool other = nt == 2 && strchr(lab[1 - t], c);
            if (!strchr(ol, c) && !other)
                axes[na++] = i;
            else
                keep[kk++] = c;
        }
        keep[kk] = 0;
        if (na) {
            ops[t] = rlx_reduce_sum(G, ops[t], na, axes, 0);
            memcpy(lab[t], keep, (size_t)kk + 1);
        }
    }
    rlx_node y;
    char yl[32];
    if (nt == 1) {
        y = ops[0];
        snprintf(yl, sizeof yl, "%s", lab[0]);
    } else {
        /* batch (both, out), contracted (both, not out), a-only, b-only */
        char bl[9] = "", cl[9] = "", al[9] = "", bo[9] = "";
        int nb = 0, nc = 0, na = 0, nbo = 0;
        for (const char *p = lab[0]; *p; p++) {
            bool inb = strchr(lab[1], *p), ino = strchr(ol, *p);
            if (inb && ino)
                bl[nb++] = *p;
            else if (inb)
                cl[nc++] = *p;
            else
                al[na++] = *p;
        }
        for (const char *p = lab[1]; *p; p++)
            if (!strchr(lab[0], *p))
                bo[nbo++] = *p;
        bl[nb] = cl[nc] = al[na] = bo[nbo] = 0;
        int64_t Bs = 1, M = 1, K = 1, N = 1;
        for (int i = 0; i < nb; i++)
            Bs *= dim_of[(unsigned char)bl[i]];
        for (int i = 0; i < na; i++)
            M *= dim_of[(unsigned char)al[i]];
        for (int i = 0; i < nc; i++)
            K *= dim_of[(unsigned char)cl[i]];
        for (int i = 0; i < nbo; i++)
            N *= dim_of[(unsigned char)bo[i]];
        char ta[32], tb[32];
        snprintf(ta, sizeof ta, "%s%s%s", bl, al, cl);
        snprintf(tb, sizeof tb, "%s%s%s", bl, cl, bo);
        rlx_node xs[2];
        const char *want[2] = {ta, tb};
        for (int t = 0; t < 2; t++) {
            int r = (int)strlen(lab[t]);
            int perm[RLX_MAX_DIMS];
            bool id = true;
            for (int i = 0; i < r; i++) {
                perm[i] = (int)(strchr(lab[t], want[t][i]) - lab[t]);
                id &= perm[i] == i;
            }
            /* broadcast dims of size 1 against the other operand's */
            xs[t] = id ? ops[t] : rlx_transpose(G, ops[t], perm);
            int64_t cur[RLX_MAX_DIMS], full[RLX_MAX_DIMS];
            int cr = onnx_shape(n, xs[t], cur);
            bool need = false;
            for (int i = 0; i < cr; i++) {
                full[i] = dim_of[(unsigned char)want[t][i]];
                need |= full[i] != cur[i];
            }
            if (need)
                xs[t] = rlx_expand(G, xs[t], cr, full);
        }
        rlx_node a3 = rlx_reshape(G, xs[0], 3, (int64_t[]){Bs, M, K});
        rlx_node b3 = rlx_reshape(G, xs[1], 3, (int64_t[]){Bs, K, N});
        y = rlx_matmul(G, a3, b3, 0, 0);
        int64_t yd[RLX_MAX_DIMS];
        int k = 0;
        snprintf(yl, sizeof yl, "%s%s%s", bl, al, bo);
        for (const char *p = yl; *p; p++)
            yd[k++] = dim_of[(unsigned char)*p];
        y = rlx_reshape(G, y, k, yd);
    }
    int r = (int)strlen(yl);
    if (r != ko)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "einsum output labels");
    int perm[RLX_MAX_DIMS];
    bool id = true;
    for (int i = 0; i < ko; i++) {
        const char *p = strchr(yl, ol[i]);
        if (!p)
            return onnx_fail(n, RLX_ERR_SHAPE, "output label '%c' not in the operands", ol[i]);
        perm[i] = (int)(p - yl);
        id &= perm[i] == i;
    }
    if (!id)
        y = rlx_transpose(G, y, perm);
    return onnx_out_node(n, 0, y);
}

/* Det of [..., n, n] for n <= 3 by cofactor expansion. */
static rlx_status h_det(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    if (r < 2 || xd[r - 1] != xd[r - 2])
        return onnx_fail(n, RLX_ERR_SHAPE, "needs square matrices");
    int64_t m = xd[r - 1];
    if (m < 1 || m > 3)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "Det of %lldx%lld matrices (up to 3x3)", (long long)m, (long long)m);
    int64_t B = onnx_numel(r - 2, xd);
    rlx_node f = rlx_reshape(G, x, 2, (int64_t[]){B, m * m});
    rlx_node e[9];
    int ax = 1;
    for (int64_t i = 0; i < m * m; i++) {
        int64_t s0 = i, e0 = i + 1;
        e[i] = rlx_reshape(G, rlx_slice(G, f, 1, &ax, &s0, &e0, NULL), 1, &B);
    }
    rlx_node d;
    if (m == 1)
        d = e[0];
    else if (m == 2)
        d = rlx_sub(G, rlx_mul(G, e[0], e[3]), rlx_mul(G, e[1], e[2]));
    else {
        rlx_node c0 = rlx_sub(G, rlx_mul(G, e[4], e[8]), rlx_mul(G, e[5], e[7]));
        rlx_node c1 = rlx_sub(G, rlx_mul(G, e[3], e[8]), rlx_mul(G, e[5], e[6]));
        rlx_node c2 = rlx_sub(G, rlx_mul(G, e[3], e[7]), rlx_mul(G, e[4], e[6]));
        d = rlx_add(G, rlx_sub(G, rlx_mul(G, e[0], c0), rlx_mul(G, e[1], c1)), rlx_mul(G, e[2], c2));
    }
    return onnx_out_node(n, 0, rlx_reshape(G, d, r - 2, xd));
}

const onnx_op onnx_linalg_ops[] = {
    ONNX_OP("MatMul", h_matmul, 2),
    ONNX_OP("Gemm", h_gemm, 2),
    ONNX_OP("Det", h_det, 1),
    ONNX_OP("Einsum", h_einsum, 1),
    ONNX_OP_END,
};
