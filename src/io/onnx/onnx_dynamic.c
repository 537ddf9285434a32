/* onnx_dynamic.c - ops whose output shape depends on their input values
 * (NonZero, NonMaxSuppression, Unique) and TfIdfVectorizer (integer n-gram
 * lookups with no graph form).  Shapes in RLX are static, so these are
 * evaluated on the host at import, when their inputs are known there
 * (constants, shape computations, or graph inputs bound by value); a
 * run-time input is refused with a message naming the input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

static rlx_status h_nonzero(onnx_node *n)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "X (NonZero has a data-dependent shape)");
    int64_t cnt = 0;
    for (int64_t i = 0; i < x->numel; i++)
        cnt += onnx_get_f(x, i) != 0;
    int64_t d[2] = {x->ndim, cnt};
    onnx_tensor *y = onnx_tensor_derived(RLX_I64, 2, d);
    if (!y)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    int64_t k = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (onnx_get_f(x, i) == 0)
            continue;
        int64_t rem = i;
        for (int a = x->ndim - 1; a >= 0; a--) {
            ((int64_t *)y->data)[a * cnt + k] = rem % x->dims[a];
            rem /= x->dims[a];
        }
        k++;
    }
    return onnx_out_const(n, 0, y);
}

/* ------------------------------------------------------- NonMaxSuppression */

typedef struct nms_box {
    double x1, y1, x2, y2; /* x1 <= x2, y1 <= y2 */
} nms_box;

static nms_box nms_read_box(const onnx_tensor *b, int64_t at, int center)
{
    double v[4];
    for (int i = 0; i < 4; i++)
        v[i] = onnx_get_f(b, at + i);
    if (center) /* [x_center, y_center, width, height] */
        return (nms_box){v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2};
    /* [y1, x1, y2, x2], either corner first */
    return (nms_box){fmin(v[1], v[3]), fmin(v[0], v[2]), fmax(v[1], v[3]), fmax(v[0], v[2])};
}

/* Whether b suppresses a: their intersection over union above the
 * threshold (an empty box suppresses nothing). */
static bool nms_suppresses(const nms_box *a, const nms_box *b, double iou_threshold)
{
    double area_a = (a->x2 - a->x1) * (a->y2 - a->y1), area_b = (b->x2 - b->x1) * (b->y2 - b->y1);
    if (area_a <= 0 || area_b <= 0)
        return false;
    double w = fmin(a->x2, b->x2) - fmax(a->x1, b->x1), h = fmin(a->y2, b->y2) - fmax(a->y1, b->y1);
    if (w <= 0 || h <= 0)
        return false;
    double inter = w * h, uni = area_a + area_b - inter;
    return uni > 0 && inter / uni > iou_threshold;
}

typedef struct nms_cand {
    double score;
    int64_t index;
} nms_cand;

/* Higher score first; equal scores by box index. */
static int nms_cand_cmp(const void *pa, const void *pb)
{
    const nms_cand *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static rlx_status h_nms(onnx_node *n)
{
    const onnx_tensor *boxes = n->in[0]->k, *scores = n->in[1]->k;
    if (!boxes)
        return onnx_need_const(n, 0, "boxes (NonMaxSuppression has a data-dependent shape)");
    if (!scores)
        return onnx_need_const(n, 1, "scores (NonMaxSuppression has a data-dependent shape)");
    double max_out = 0, iou = 0, score_min = 0;
    bool has_score_min = false;
    if (n->n_in > 2 && n->in[2] && !onnx_const_scalar(n, 2, &max_out))
        return onnx_need_const(n, 2, "max_output_boxes_per_class");
    if (n->n_in > 3 && n->in[3] && !onnx_const_scalar(n, 3, &iou))
        return onnx_need_const(n, 3, "iou_threshold");
    if (n->n_in > 4 && n->in[4]) {
        if (!onnx_const_scalar(n, 4, &score_min))
            return onnx_need_const(n, 4, "score_threshold");
        has_score_min = true;
    }
    int center = (int)onnx_attr_i(n, "center_point_box", 0);
    if (boxes->ndim != 3 || boxes->dims[2] != 4 || scores->ndim != 3 || scores->dims[0] != boxes->dims[0] ||
        scores->dims[2] != boxes->dims[1])
        return onnx_fail(n, RLX_ERR_SHAPE, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
    if (center != 0 && center != 1)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "center_point_box must be 0 or 1");
    int64_t B = boxes->dims[0], N = boxes->dims[1], C = scores->dims[1];
    int64_t per_class = max_out <= 0 ? 0 : max_out >= (double)N ? N : (int64_t)max_out;
    /* at most per_class selections for each (batch, class) */
    int64_t cap = B * C * per_class;
    int64_t *sel = malloc(sizeof *sel * 3 * (size_t)(cap ? cap : 1));
    nms_cand *cand = malloc(sizeof *cand * (size_t)(N ? N : 1));
    nms_box *kept = malloc(sizeof *kept * (size_t)(per_class ? per_class : 1));
    if (!sel || !cand || !kept) {
        free(sel);
        free(cand);
        free(kept);
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    }
    int64_t ns = 0;
    for (int64_t b = 0; b < B && per_class; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t nc = 0;
            for (int64_t i = 0; i < N; i++) {
                double s = onnx_get_f(scores, (b * C + c) * N + i);
                if (!has_score_min || s > score_min)
                    cand[nc++] = (nms_cand){s, i};
            }
            qsort(cand, (size_t)nc, sizeof *cand, nms_cand_cmp);
            int64_t nk = 0;
            for (int64_t j = 0; j < nc && nk < per_class; j++) {
                nms_box bx = nms_read_box(boxes, (b * N + cand[j].index) * 4, center);
                bool keep = true;
                for (int64_t k = 0; k < nk && keep; k++)
                    keep = !nms_suppresses(&bx, &kept[k], iou);
                if (!keep)
                    continue;
                kept[nk++] = bx;
                sel[ns * 3] = b;
                sel[ns * 3 + 1] = c;
                sel[ns * 3 + 2] = cand[j].index;
                ns++;
            }
        }
    free(cand);
    free(kept);
    onnx_tensor *y = onnx_tensor_derived(RLX_I64, 2, (int64_t[]){ns, 3});
    if (y && ns)
        memcpy(y->data, sel, sizeof *sel * 3 * (size_t)ns);
    free(sel);
    return y ? onnx_out_const(n, 0, y) : onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
}

/* ------------------------------------------------------------------ Unique */

/* X seen as [outer, L, inner] around the axis: slice s is the L-th slices'
 * s-th, compared element by element (the whole tensor flattened: outer =
 * inner = 1). */
typedef struct unique_view {
    const onnx_tensor *x;
    int64_t outer, len, inner;
} unique_view;

/* Elements in ascending order, NaN last (and equal to NaN); integers
 * compared as integers (int64 past 2^53 too). */
static int unique_cmp_elem(const onnx_tensor *x, int64_t a, int64_t b)
{
    if (!onnx_dtype_is_float(x->dtype)) {
        int64_t ia = onnx_get_i(x, a), ib = onnx_get_i(x, b);
        return (ia > ib) - (ia < ib);
    }
    double fa = onnx_get_f(x, a), fb = onnx_get_f(x, b);
    if (isnan(fa) || isnan(fb))
        return isnan(fa) - isnan(fb);
    return (fa > fb) - (fa < fb);
}

static int unique_cmp_slices(const unique_view *v, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t i = 0; i < v->inner; i++) {
            int64_t base = o * v->len * v->inner + i;
            int c = unique_cmp_elem(v->x, base + a * v->inner, base + b * v->inner);
            if (c)
                return c;
        }
    return 0;
}

/* qsort has no context argument: the view being sorted, one per thread
 * (as gguf.c and safetensors.c sort) so concurrent imports do not race */
static _Thread_local const unique_view *unique_sorting;

/* By value, then by first position (so each group's first is the first
 * occurrence). */
static int unique_cmp_index(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    int c = unique_cmp_slices(unique_sorting, a, b);
    return c ? c : (a > b) - (a < b);
}

static rlx_status h_unique(onnx_node *n)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "X (Unique has a data-dependent shape)");
    int sorted = (int)onnx_attr_i(n, "sorted", 1);
    bool has_axis = onnx_attr(n, "axis") != NULL;
    unique_view v = {x, 1, x->numel, 1};
    int axis = 0;
    if (has_axis) {
        axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), x->ndim);
        if (axis < 0 || axis >= x->ndim)
            return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
        v.outer = onnx_numel(axis, x->dims);
        v.len = x->dims[axis];
        v.inner = onnx_numel(x->ndim - axis - 1, x->dims + axis + 1);
    }
    int64_t L = v.len;
    int64_t *order = malloc(sizeof *order * (size_t)(L ? L : 1));
    int64_t *group = malloc(sizeof *group * (size_t)(L ? L : 1)); /* slice -> its unique's index */
    int64_t *first = malloc(sizeof *first * (size_t)(L ? L : 1)); /* unique -> first slice */
    int64_t *count = calloc((size_t)(L ? L : 1), sizeof *count);
    int64_t *rank = malloc(sizeof *rank * (size_t)(L ? L : 1));
    onnx_tensor *out[4] = {NULL};
    rlx_status st = RLX_OK;
    if (!order || !group || !first || !count || !rank) {
        st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        goto done;
    }
    for (int64_t i = 0; i < L; i++)
        order[i] = i;
    unique_sorting = &v;
    qsort(order, (size_t)L, sizeof *order, unique_cmp_index);
    /* groups in sorted order */
    int64_t U = 0;
    for (int64_t j = 0; j < L; j++) {
        if (j == 0 || unique_cmp_slices(&v, order[j - 1], order[j]))
            first[U++] = order[j];
        group[order[j]] = U - 1;
    }
    /* sorted = 0: uniques in order of first occurrence instead */
    for (int64_t u = 0; u < U; u++)
        rank[u] = u;
    if (!sorted) {
        int64_t next = 0;
        for (int64_t i = 0; i < L; i++) /* the first slice of its group */
            if (first[group[i]] == i)
                rank[group[i]] = next++;
        int64_t *f2 = order; /* order is free again */
        for (int64_t u = 0; u < U; u++)
            f2[rank[u]] = first[u];
        memcpy(first, f2, sizeof *first * (size_t)U);
    }
    for (int64_t i = 0; i < L; i++)
        count[rank[group[i]]]++;
    int64_t yd[RLX_MAX_DIMS];
    memcpy(yd, x->dims, sizeof yd);
    int yr = has_axis ? x->ndim : 1;
    if (has_axis)
        yd[axis] = U;
    else
        yd[0] = U;
    out[0] = onnx_tensor_derived(x->dtype, yr, yd);
    out[1] = onnx_tensor_derived(RLX_I64, 1, &U);
    out[2] = onnx_tensor_derived(RLX_I64, 1, &L);
    out[3] = onnx_tensor_derived(RLX_I64, 1, &U);
    if (!out[0] || !out[1] || !out[2] || !out[3]) {
        st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        goto done;
    }
    size_t es = x->numel ? x->bytes / (size_t)x->numel : 0;
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t u = 0; u < U; u++)
            memcpy((char *)out[0]->data + ((o * U + u) * v.inner) * es,
                   (const char *)x->data + ((o * L + first[u]) * v.inner) * es, es * (size_t)v.inner);
    for (int64_t u = 0; u < U; u++) {
        ((int64_t *)out[1]->data)[u] = first[u];
        ((int64_t *)out[3]->data)[u] = count[u];
    }
    for (int64_t i = 0; i < L; i++)
        ((int64_t *)out[2]->data)[i] = rank[group[i]];
    for (int i = 0; i < 4 && st == RLX_OK; i++) {
        if (i < n->n_out)
            st = onnx_out_const(n, i, out[i]);
        else
            onnx_tensor_free(out[i]);
        out[i] = NULL;
    }
done:
    for (int i = 0; i < 4; i++)
        onnx_tensor_free(out[i]);
    free(order);
    free(group);
    free(first);
    free(count);
    free(rank);
    return st;
}

/* --------------------------------------------------------- TfIdfVectorizer */

#define TFIDF_MAX_GRAM 16

typedef struct tfidf_spec {
    int64_t min_n, max_n, max_skip;
    int64_t starts[TFIDF_MAX_GRAM + 1]; /* pool offset of the n-grams of length n (1-based) */
    const int64_t *pool, *indexes;
    int64_t n_pool, n_indexes;
} tfidf_spec;

/* The output column of the n-gram gram[0..len) (len within the spec), or
 * -1 when the pool does not hold it. */
static int64_t tfidf_lookup(const tfidf_spec *s, const int64_t *gram, int64_t len)
{
    int64_t at = s->starts[len - 1], end = s->starts[len];
    for (int64_t p = at; p + len <= end; p += len) {
        if (memcmp(s->pool + p, gram, sizeof *gram * (size_t)len))
            continue;
        int64_t k = (p - at) / len; /* the k-th n-gram of its length ... */
        for (int64_t shorter = 1; shorter < len; shorter++)
            k += (s->starts[shorter] - s->starts[shorter - 1]) / shorter; /* ... after all shorter ones */
        return k < s->n_indexes ? s->indexes[k] : -1;
    }
    return -1;
}

static rlx_status h_tfidf(onnx_node *n)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "X (TfIdfVectorizer reads its values at import)");
    if (onnx_dtype_is_float(x->dtype) || x->ndim < 1 || x->ndim > 2)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "X must be an integer tensor of rank 1 or 2");
    char mode[16];
    onnx_attr_s(n, "mode", "TF", mode, sizeof mode);
    int m = !strcmp(mode, "TF") ? 0 : !strcmp(mode, "IDF") ? 1 : !strcmp(mode, "TFIDF") ? 2 : -1;
    if (m < 0)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "mode '%s' (TF, IDF or TFIDF)", mode);
    if (onnx_attr(n, "pool_strings"))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "pool_strings (string tensors are not supported)");
    tfidf_spec s = {.min_n = onnx_attr_i(n, "min_gram_length", 1),
                    .max_n = onnx_attr_i(n, "max_gram_length", 1),
                    .max_skip = onnx_attr_i(n, "max_skip_count", 0)};
    if (s.min_n < 1 || s.max_n < s.min_n || s.max_n > TFIDF_MAX_GRAM || s.max_skip < 0)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "gram lengths must satisfy 1 <= min <= max <= %d, skip >= 0",
                         TFIDF_MAX_GRAM);
    const Onnx__AttributeProto *pool = onnx_attr(n, "pool_int64s"), *idx = onnx_attr(n, "ngram_indexes"),
                               *cnt = onnx_attr(n, "ngram_counts"), *wts = onnx_attr(n, "weights");
    if (!pool || !idx || !cnt)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "needs pool_int64s, ngram_counts and ngram_indexes");
    s.pool = pool->ints;
    s.n_pool = (int64_t)pool->n_ints;
    s.indexes = idx->ints;
    s.n_indexes = (int64_t)idx->n_ints;
    /* ngram_counts[i]: where the (i+1)-grams begin in the pool */
    for (int i = 0; i <= TFIDF_MAX_GRAM; i++) {
        s.starts[i] = i < (int)cnt->n_ints ? cnt->ints[i] : s.n_pool;
        if (s.starts[i] < (i ? s.starts[i - 1] : 0) || s.starts[i] > s.n_pool)
            return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "ngram_counts must rise within the pool");
    }
    int64_t cols = 0;
    for (int64_t k = 0; k < s.n_indexes; k++) {
        if (s.indexes[k] < 0 || s.indexes[k] >= ONNX_FOLD_MAX_NUMEL)
            return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "ngram_indexes out of range");
        cols = s.indexes[k] + 1 > cols ? s.indexes[k] + 1 : cols;
    }
    int64_t rows = x->ndim == 2 ? x->dims[0] : 1, len = x->dims[x->ndim - 1];
    int64_t yd[2] = {rows, cols};
    onnx_tensor *y = x->ndim == 2 ? onnx_tensor_derived(RLX_F32, 2, yd) : onnx_tensor_derived(RLX_F32, 1, &cols);
    if (!y)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    /* weights[k] belongs to the pool's k-th n-gram, so to column indexes[k] */
    float *col_w = calloc((size_t)(cols ? cols : 1), sizeof *col_w);
    if (!col_w) {
        onnx_tensor_free(y);
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    }
    for (int64_t k = 0; k < s.n_indexes; k++)
        col_w[s.indexes[k]] = !wts ? 1 : k < (int64_t)wts->n_floats ? wts->floats[k] : 0;
    float *yv = y->data;
    int64_t gram[TFIDF_MAX_GRAM];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t start = 0; start < len; start++)
            for (int64_t skip = 0; skip <= s.max_skip; skip++)
                for (int64_t g = s.min_n; g <= s.max_n; g++) {
                    if (g == 1 && skip > 0) /* a unigram is counted once, not per skip */
                        continue;
                    if (start + (g - 1) * (skip + 1) >= len)
                        break;
                    for (int64_t j = 0; j < g; j++)
                        gram[j] = onnx_get_i(x, r * len + start + j * (skip + 1));
                    int64_t col = tfidf_lookup(&s, gram, g);
                    if (col >= 0)
                        yv[r * cols + col] += 1;
                }
    for (int64_t i = 0; i < rows * cols; i++) {
        float w = col_w[i % cols];
        yv[i] = m == 0 ? yv[i] : m == 1 ? (yv[i] > 0 ? w : 0) : yv[i] * w;
    }
    free(col_w);
    return onnx_out_const(n, 0, y);
}

const onnx_op onnx_dynamic_ops[] = {
    ONNX_OP("NonZero", h_nonzero, 1),
    ONNX_OP("NonMaxSuppression", h_nms, 2),
    ONNX_OP("Unique", h_unique, 1),
    ONNX_OP("TfIdfVectorizer", h_tfidf, 1),
    ONNX_OP_END,
};
