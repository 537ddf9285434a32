/* kernels_shape.c - data movement: reshape, transpose, slice, concat,
 * gather, expand, pad.  These only move bytes, so one code path serves every
 * dtype (by element size).  Transpose, slice and expand are one strided copy:
 * the output is dense and the source is read through per-dim strides. */
#include "backends/cpu/cpu_kernels.h"

/* Copies n elements of es bytes read at stride s (elements) into dense dst. */
static inline void copy_run(char *dst, const char *src, int64_t n, int64_t s, size_t es)
{
    if (s == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            dst[i] = src[i * s];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + 2 * i, src + 2 * i * s, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + 4 * i, src + 4 * i * s, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + 8 * i, src + 8 * i * s, 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + es * (size_t)i, src + (int64_t)es * i * s, es);
    }
}

#define TILE 32

/* A strided copy for the pool: tiles over dims (p, q), or rows. */
typedef struct copy_job {
    void *dst;
    const void *src;
    int n, p;
    const int64_t *d, *s;
    int64_t ost[RLX_MAX_DIMS];
    size_t es;
    int64_t tp, tq, len, step;
} copy_job;

static void copy_tiles(void *arg, int64_t it0, int64_t it1, int worker)
{
    (void)worker;
    const copy_job *j = arg;
    const int64_t *d = j->d, *s = j->s, *ost = j->ost;
    int n = j->n, p = j->p, q = n - 1;
    size_t es = j->es;
    int64_t P = d[p], Q = d[q], tp = j->tp, tq = j->tq;
    for (int64_t it = it0; it < it1; it++) {
        int64_t o = it / (tp * tq), bp = (it / tq) % tp * TILE, bq = it % tq * TILE;
        int64_t soff = 0, doff = 0, r = o;
        for (int i = n - 2; i >= 0; i--) { /* outer dims: all but p and q */
            if (i == p)
                continue;
            int64_t k = r % d[i];
            r /= d[i];
            soff += k * s[i];
            doff += k * ost[i];
        }
        int64_t ep = bp + TILE < P ? bp + TILE : P, eq = bq + TILE < Q ? bq + TILE : Q;
        const char *sb = (const char *)j->src + soff * (int64_t)es;
        char *db = (char *)j->dst + doff * (int64_t)es;
        int64_t sq = s[q], dp = ost[p];
        switch (es) {
        case 4:
            for (int64_t i = bp; i < ep; i++)
                for (int64_t k = bq; k < eq; k++)
                    memcpy(db + (i * dp + k) * 4, sb + (i + k * sq) * 4, 4);
            break;
        case 2:
            for (int64_t i = bp; i < ep; i++)
                for (int64_t k = bq; k < eq; k++)
                    memcpy(db + (i * dp + k) * 2, sb + (i + k * sq) * 2, 2);
            break;
        case 8:
            for (int64_t i = bp; i < ep; i++)
                for (int64_t k = bq; k < eq; k++)
                    memcpy(db + (i * dp + k) * 8, sb + (i + k * sq) * 8, 8);
            break;
        default:
            for (int64_t i = bp; i < ep; i++)
                for (int64_t k = bq; k < eq; k++)
                    memcpy(db + (size_t)(i * dp + k) * es, sb + (i + k * sq) * (int64_t)es, es);
        }
    }
}

/* Copies dims d (coalesced, n of them) where source dim p has stride 1 and
 * the innermost dim q = n - 1 is strided: tile over (p, q). */
static void tiled_copy(void *dst, const void *src, int n, const int64_t *d, const int64_t *s, int p, size_t es,
                       int64_t total, const rlx_run_ctx *ctx)
{
    int q = n - 1;
    copy_job j = {.dst = dst, .src = src, .n = n, .p = p, .d = d, .s = s, .es = es};
    j.ost[n - 1] = 1; /* output (dense) strides */
    for (int i = n - 2; i >= 0; i--)
        j.ost[i] = j.ost[i + 1] * d[i + 1];
    int64_t P = d[p], Q = d[q];
    j.tp = (P + TILE - 1) / TILE;
    j.tq = (Q + TILE - 1) / TILE;
    int64_t outer = total / (P * Q), items = outer * j.tp * j.tq;
    int threads = rlx_cpu_threads(ctx, total);
    if (items < threads)
        threads = 1;
    rlx_cpu_parallel(threads, items, copy_tiles, &j);
}

static void copy_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const copy_job *j = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = 0, q = r;
        for (int i = j->n - 2; i >= 0; i--) {
            off += (q % j->d[i]) * j->s[i];
            q /= j->d[i];
        }
        copy_run((char *)j->dst + (size_t)(r * j->len) * j->es, (const char *)j->src + off * (int64_t)j->es, j->len,
                 j->step, j->es);
    }
}

/* dst (dense, shape dims) = src read at element strides str (any sign). */
static void strided_copy(void *dst, const void *src, int ndim, const int64_t *dims, const int64_t *str, size_t es,
                         const rlx_run_ctx *ctx)
{
    int64_t d[RLX_MAX_DIMS], s[RLX_MAX_DIMS], total = 1;
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        total *= dims[i];
        if (dims[i] == 1)
            continue;
        if (n > 0 && s[n - 1] == dims[i] * str[i]) { /* adjacent in the source: merge */
            d[n - 1] *= dims[i];
            s[n - 1] = str[i];
            continue;
        }
        d[n] = dims[i];
        s[n] = str[i];
        n++;
    }
    if (total == 0)
        return;
    if (n == 0) {
        memcpy(dst, src, es);
        return;
    }
    /* A short contiguous innermost run (a pixel shuffle's pairs) is one
     * wider element: copied a few bytes per call of memcpy, it took most
     * of the copy. */
    while (n >= 2 && s[n - 1] == 1 && es * (size_t)d[n - 1] <= 8) {
        int64_t w = d[n - 1];
        bool fits = true;
        for (int i = 0; i < n - 1; i++)
            fits = fits && s[i] % w == 0;
        if (!fits)
            break;
        for (int i = 0; i < n - 1; i++)
            s[i] /= w;
        es *= (size_t)w;
        total /= w;
        n--;
    }
    int64_t len = d[n - 1], step = s[n - 1], rows = total / len;
    /* A transpose-like copy (the source's unit-stride dim is not the
     * output's innermost): copy in square tiles so reads and writes both
     * stay in cache.  Short output rows too (NCHW to channels-last of 3
     * channels): row by row, each row's offset and call took 4 ns. */
    if (step != 1) {
        for (int p = 0; p < n - 1; p++)
            if (s[p] == 1 && d[p] >= 8) {
                tiled_copy(dst, src, n, d, s, p, es, total, ctx);
                return;
            }
    }
    int threads = rlx_cpu_threads(ctx, total);
    if (rows < threads)
        threads = 1;
    copy_job j = {.dst = dst, .src = src, .n = n, .d = d, .s = s, .es = es, .len = len, .step = step};
    rlx_cpu_parallel(threads, rows, copy_rows, &j);
}

static rlx_status k_reshape(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    if (t->out != t->in[0])
        memmove(t->out, t->in[0], rlx_node_bytes(t->node));
    return RLX_OK;
}

static rlx_status k_transpose(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int64_t st[RLX_MAX_DIMS], str[RLX_MAX_DIMS];
    rlx_shape_strides(&xn->shape, st);
    for (int i = 0; i < xn->shape.ndim; i++)
        str[i] = st[t->node->attrs.transpose.perm[i]];
    strided_copy(t->out, t->in[0], t->node->shape.ndim, t->node->shape.dims, str, rlx_dtype_size(xn->dtype), ctx);
    return RLX_OK;
}

static rlx_status k_slice(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    const rlx_shape *os = &t->node->shape;
    size_t es = rlx_dtype_size(xn->dtype);
    if (rlx_shape_numel(os) == 0)
        return RLX_OK;
    int64_t st[RLX_MAX_DIMS], str[RLX_MAX_DIMS], first = 0;
    rlx_shape_strides(&xn->shape, st);
    for (int i = 0; i < os->ndim; i++) {
        first += t->node->attrs.slice.start[i] * st[i];
        str[i] = t->node->attrs.slice.step[i] * st[i];
    }
    const char *src = (const char *)t->in[0] + first * (int64_t)es;
    if ((const void *)src == t->out) {
        /* The planner made this slice a view: it must then be one
         * contiguous range, which is already in place. */
        int outer = 0;
        while (outer < os->ndim && os->dims[outer] == 1)
            outer++;
        int contiguous = 1;
        for (int i = outer; i < os->ndim; i++) {
            if (t->node->attrs.slice.step[i] != 1 && os->dims[i] != 1)
                contiguous = 0;
            if (i > outer && os->dims[i] != xn->shape.dims[i])
                contiguous = 0;
        }
        if (contiguous)
            return RLX_OK;
        return rlx_cpu_kernel_error(t, "slice output overlaps its non-contiguous source");
    }
    strided_copy(t->out, src, os->ndim, os->dims, str, es, ctx);
    return RLX_OK;
}

static rlx_status k_expand(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int64_t str[RLX_MAX_DIMS];
    rlx_shape_broadcast_strides(&xn->shape, &t->node->shape, str);
    strided_copy(t->out, t->in[0], t->node->shape.ndim, t->node->shape.dims, str, rlx_dtype_size(xn->dtype), ctx);
    return RLX_OK;
}

/* Row-wise copies (concat's pieces, gather's rows, scatter_add's column
 * blocks, pad's rows) for the pool. */
typedef struct rows_job {
    const rlx_thunk *t;
    const char *src;
    char *dst;
    size_t out_row, chunk;
    int64_t n, m, inner, cols;
    const int64_t *idx;
} rows_job;

static void concat_rows(void *arg, int64_t o0, int64_t o1, int worker)
{
    (void)worker;
    const rows_job *j = arg;
    for (int64_t o = o0; o < o1; o++)
        memcpy(j->dst + (size_t)o * j->out_row, j->src + (size_t)o * j->chunk, j->chunk);
}

static rlx_status k_concat(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_shape *os = &t->node->shape;
    int axis = t->node->attrs.concat.axis;
    size_t es = rlx_dtype_size(t->node->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= os->dims[d];
    for (int d = axis + 1; d < os->ndim; d++)
        inner *= os->dims[d];
    size_t out_row = (size_t)(os->dims[axis] * inner) * es;
    if (outer == 0 || out_row == 0)
        return RLX_OK;
    size_t at = 0;
    for (int k = 0; k < t->node->n_in; k++) {
        size_t chunk = (size_t)(t->in_node[k]->shape.dims[axis] * inner) * es;
        if (chunk == 0)
            continue;
        const char *src = t->in[k];
        char *dst = (char *)t->out + at;
        int threads = rlx_cpu_threads(ctx, outer * (int64_t)chunk / 4);
        if (outer < threads)
            threads = 1;
        rows_job j = {.src = src, .dst = dst, .out_row = out_row, .chunk = chunk};
        rlx_cpu_parallel(threads, outer, concat_rows, &j);
        at += chunk;
    }
    return RLX_OK;
}

static void gather_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const rows_job *jb = arg;
    const rlx_thunk *t = jb->t;
    int64_t m = jb->m, n = jb->n;
    size_t row = jb->chunk;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / m, j = r % m;
        int64_t ix = rlx_load_i(t->in[1], t->in_node[1]->dtype, j);
        if (ix < 0)
            ix += n;
        memcpy((char *)t->out + (size_t)r * row, (const char *)t->in[0] + (size_t)(o * n + ix) * row, row);
    }
}

static rlx_status k_gather(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *dn = t->in_node[0], *in = t->in_node[1];
    int axis = t->node->attrs.gather.axis;
    size_t es = rlx_dtype_size(dn->dtype);
    int64_t outer = 1, n = dn->shape.dims[axis], inner = 1, m = rlx_shape_numel(&in->shape);
    for (int d = 0; d < axis; d++)
        outer *= dn->shape.dims[d];
    for (int d = axis + 1; d < dn->shape.ndim; d++)
        inner *= dn->shape.dims[d];
    /* check every index first: a bad one fails the run with nothing half done */
    for (int64_t j = 0; j < m; j++) {
        int64_t ix = rlx_load_i(t->in[1], in->dtype, j);
        if (ix < -n || ix >= n)
            return rlx_cpu_kernel_error(t, "index %lld out of range [0, %lld)", (long long)ix, (long long)n);
    }
    if (outer == 0 || m == 0 || inner == 0)
        return RLX_OK;
    size_t row = (size_t)inner * es;
    int threads = rlx_cpu_threads(ctx, outer * m * inner);
    if (outer * m < threads)
        threads = 1;
    rows_job jb = {.t = t, .chunk = row, .n = n, .m = m};
    rlx_cpu_parallel(threads, outer * m, gather_rows, &jb);
    return RLX_OK;
}

/* scatter_add: zeros, then each slice of the updates added where gather
 * read it.  Threads split the slices' columns, so every element is summed
 * by one thread in index order: the result does not depend on threads.
 * The indices are read once, checked and made non-negative into scratch,
 * rather than again by each column block. */
static size_t scatter_add_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    return (size_t)rlx_shape_numel(&g->nodes[n->in[1]].shape) * sizeof(int64_t);
}

/* Item (o, c): column block c of outer slice o, every update in order. */
static void scatter_add_items(void *arg, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const rows_job *jb = arg;
    const rlx_thunk *t = jb->t;
    const rlx_node_data *n = t->node, *un = t->in_node[0];
    int64_t m = jb->m, V = jb->n, inner = jb->inner, cols = jb->cols;
    const int64_t *idx = jb->idx;
    for (int64_t it = i0; it < i1; it++) {
        int64_t o = it / cols, c = it % cols;
        int64_t lo = inner * c / cols, hi = inner * (c + 1) / cols;
        for (int64_t j = 0; j < m; j++) {
            int64_t src = (o * m + j) * inner, dst = (o * V + idx[j]) * inner;
            if (n->dtype == RLX_F32) {
                float *y = (float *)t->out + dst;
                const float *x = (const float *)t->in[0] + src;
                for (int64_t e = lo; e < hi; e++)
                    y[e] += x[e];
            } else {
                for (int64_t e = lo; e < hi; e++)
                    rlx_store(t->out, n->dtype, dst + e,
                              rlx_load(t->out, n->dtype, dst + e) + rlx_load(t->in[0], un->dtype, src + e));
            }
        }
    }
}

static rlx_status k_scatter_add(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node, *in = t->in_node[1];
    int axis = n->attrs.gather.axis;
    int64_t outer = 1, V = n->shape.dims[axis], inner = 1, m = rlx_shape_numel(&in->shape);
    int64_t *idx = t->scratch;
    for (int d = 0; d < axis; d++)
        outer *= n->shape.dims[d];
    for (int d = axis + 1; d < n->shape.ndim; d++)
        inner *= n->shape.dims[d];
    for (int64_t j = 0; j < m; j++) {
        int64_t ix = rlx_load_i(t->in[1], in->dtype, j);
        if (ix < -V || ix >= V)
            return rlx_cpu_kernel_error(t, "index %lld out of range [0, %lld)", (long long)ix, (long long)V);
        idx[j] = ix < 0 ? ix + V : ix;
    }
    memset(t->out, 0, rlx_node_bytes(n));
    int threads = rlx_cpu_threads(ctx, outer * m * inner);
    int64_t cols = inner < threads ? 1 : threads;
    rows_job jb = {.t = t, .n = V, .m = m, .inner = inner, .cols = cols, .idx = idx};
    rlx_cpu_parallel(threads, outer * cols, scatter_add_items, &jb);
    return RLX_OK;
}

/* The cache's memory is the output's (the planner aliases them); a copy
 * first only where it did not. */
static rlx_status k_cache_write(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *c = t->in_node[0], *u = t->in_node[1], *p = t->in_node[2];
    int64_t B = c->shape.dims[0], H = c->shape.dims[1], T = c->shape.dims[2], D = c->shape.dims[3];
    int64_t S = u->shape.dims[2];
    size_t row = (size_t)D * rlx_dtype_size(c->dtype);
    if (t->out != t->in[0])
        memcpy(t->out, t->in[0], rlx_node_bytes(c));
    for (int64_t b = 0; b < B; b++) {
        int64_t p0 = rlx_load_i(t->in[2], p->dtype, b);
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                if (p0 + s < 0 || p0 + s >= T)
                    continue;
                memcpy((char *)t->out + (size_t)((b * H + h) * T + p0 + s) * row,
                       (const char *)t->in[1] + (size_t)((b * H + h) * S + s) * row, row);
            }
    }
    return RLX_OK;
}

/* Source index of padded index i on an axis of n elements with begin pad b;
 * -1 where the constant fills. */
static inline int64_t pad_src(int64_t i, int64_t n, int64_t b, int mode)
{
    int64_t k = i - b;
    if (k >= 0 && k < n)
        return k;
    switch (mode) {
    case RLX_PAD_REFLECT: /* numpy 'reflect': the edge is not repeated */
        if (n == 1)
            return 0;
        if (k < 0)
            k = -k;
        if (k >= n)
            k = 2 * (n - 1) - k;
        return k;
    case RLX_PAD_EDGE: return k < 0 ? 0 : n - 1;
    default: return -1;
    }
}

static void pad_rows(void *arg, int64_t row0, int64_t row1, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    const rlx_shape *is = &xn->shape, *os = &t->node->shape;
    size_t es = rlx_dtype_size(xn->dtype);
    int r = is->ndim, mode = t->node->attrs.pad.mode;
    const int64_t *pads = t->node->attrs.pad.pads;
    unsigned char fill[16] = {0};
    rlx_store(fill, t->node->dtype, 0, t->node->attrs.pad.value);
    int64_t st[RLX_MAX_DIMS];
    rlx_shape_strides(is, st);
    int64_t len = os->dims[r - 1], n = is->dims[r - 1], b = pads[r - 1], e = pads[2 * r - 1];
    for (int64_t row = row0; row < row1; row++) {
        char *dst = (char *)t->out + (size_t)(row * len) * es;
        int64_t off = 0, q = row;
        int constant = 0;
        for (int d = r - 2; d >= 0; d--) {
            int64_t i = q % os->dims[d];
            q /= os->dims[d];
            int64_t k = pad_src(i, is->dims[d], pads[d], mode);
            if (k < 0)
                constant = 1;
            else
                off += k * st[d];
        }
        if (constant) {
            for (int64_t j = 0; j < len; j++)
                memcpy(dst + (size_t)j * es, fill, es);
            continue;
        }
        const char *src = (const char *)t->in[0] + (size_t)off * es;
        for (int64_t j = 0; j < b; j++) {
            int64_t k = pad_src(j, n, b, mode);
            memcpy(dst + (size_t)j * es, k < 0 ? (const char *)fill : src + (size_t)k * es, es);
        }
        memcpy(dst + (size_t)b * es, src, (size_t)n * es);
        for (int64_t j = b + n; j < b + n + e; j++) {
            int64_t k = pad_src(j, n, b, mode);
            memcpy(dst + (size_t)j * es, k < 0 ? (const char *)fill : src + (size_t)k * es, es);
        }
    }
}

static rlx_status k_pad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    const rlx_shape *is = &xn->shape, *os = &t->node->shape;
    size_t es = rlx_dtype_size(xn->dtype);
    int r = is->ndim;
    if (rlx_shape_numel(os) == 0)
        return RLX_OK;
    if (r == 0) {
        memcpy(t->out, t->in[0], es);
        return RLX_OK;
    }
    int64_t rows = rlx_shape_numel(os) / os->dims[r - 1];
    int threads = rlx_cpu_threads(ctx, rlx_shape_numel(os));
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, pad_rows, (void *)t);
    return RLX_OK;
}

void rlx_cpu_register_shape(rlx_cpu_kernel *table)
{
    table[RLX_OP_RESHAPE].fn = k_reshape;
    table[RLX_OP_TRANSPOSE].fn = k_transpose;
    table[RLX_OP_SLICE].fn = k_slice;
    table[RLX_OP_CONCAT].fn = k_concat;
    table[RLX_OP_GATHER].fn = k_gather;
    table[RLX_OP_SCATTER_ADD] = (rlx_cpu_kernel){.fn = k_scatter_add, .scratch = scatter_add_scratch};
    table[RLX_OP_EXPAND].fn = k_expand;
    table[RLX_OP_PAD].fn = k_pad;
    table[RLX_OP_CACHE_WRITE].fn = k_cache_write;
}
