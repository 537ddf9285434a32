/* onnx_string_ops.c - the ops on tensors of strings besides Cast, run on
 * the host at import (onnx_string.c holds the representation):
 * StringNormalizer; Equal of strings (opset 19); StringConcat,
 * StringSplit and RegexFullMatch (opset 20, patterns through PCRE2). */
#define _GNU_SOURCE /* newlocale, towlower_l */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <locale.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <wctype.h>

#include "io/onnx/onnx_ops.h"
#include "io/onnx/onnx_string.h"

/* ------------------------------------------------------------ StringNormalizer */

/* One case-mapped copy of UTF-8 s (dir: 1 upper, -1 lower, 0 none) in
 * locale loc; invalid UTF-8 is kept byte for byte. */
static char *map_case(const char *s, int dir, locale_t loc)
{
    size_t l = strlen(s);
    char *r = rlx_malloc(l * 2 + MB_LEN_MAX + 1); /* a mapped character may take more bytes */
    if (!r)
        return NULL;
    size_t o = 0;
    mbstate_t in, outst;
    memset(&in, 0, sizeof in);
    memset(&outst, 0, sizeof outst);
    locale_t old = uselocale(loc);
    for (size_t i = 0; i < l;) {
        wchar_t w;
        size_t k = mbrtowc(&w, s + i, l - i, &in);
        if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
            memset(&in, 0, sizeof in);
            r[o++] = s[i++];
            continue;
        }
        wint_t m = dir > 0 ? towupper_l((wint_t)w, loc) : dir < 0 ? towlower_l((wint_t)w, loc) : (wint_t)w;
        char mb[MB_LEN_MAX];
        size_t mk = wcrtomb(mb, (wchar_t)m, &outst);
        if (mk == (size_t)-1 || o + mk > l * 2 + MB_LEN_MAX) { /* unmappable or no room: keep the original */
            memcpy(r + o, s + i, k);
            o += k;
        } else {
            memcpy(r + o, mb, mk);
            o += mk;
        }
        i += k;
    }
    uselocale(old);
    r[o] = 0;
    return r;
}

/* The locale for case mapping: the `locale` attribute in UTF-8, else C.UTF-8. */
static locale_t case_locale(const char *name)
{
    char full[160];
    snprintf(full, sizeof full, "%s.UTF-8", name);
    locale_t l = *name ? newlocale(LC_CTYPE_MASK, full, (locale_t)0) : (locale_t)0;
    if (!l)
        l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    return l;
}

static rlx_status h_string_normalizer(onnx_node *n)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "strings");
    if (x->dtype != RLX_STRING)
        return onnx_fail(n, RLX_ERR_DTYPE, "input 0 must be strings, not %s", rlx_dtype_name(x->dtype));
    if (!(x->ndim == 1 || (x->ndim == 2 && x->dims[0] == 1)))
        return onnx_fail(n, RLX_ERR_SHAPE, "input 0 must have shape [C] or [1, C] (rank %d given)", x->ndim);
    char act[32];
    onnx_attr_s(n, "case_change_action", "NONE", act, sizeof act);
    int dir = !strcmp(act, "UPPER") ? 1 : !strcmp(act, "LOWER") ? -1 : 0;
    /* "" as NONE: the suite's models write the default that way */
    if (!dir && strcmp(act, "NONE") && *act)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "case_change_action \"%s\" (LOWER, UPPER or NONE)", act);
    int64_t sensitive = onnx_attr_i(n, "is_case_sensitive", 0);
    if (sensitive != 0 && sensitive != 1)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "is_case_sensitive must be 0 or 1, not %lld",
                         (long long)sensitive);
    char lname[128];
    onnx_attr_s(n, "locale", "", lname, sizeof lname);
    locale_t loc = case_locale(lname);
    if (!loc)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "no UTF-8 locale for case mapping (\"%s\" nor C.UTF-8)", lname);
    const Onnx__AttributeProto *sw = onnx_attr(n, "stopwords");
    size_t n_stop = sw ? sw->n_strings : 0;
    const char **in = onnx_string_elems(x);
    char **stop = rlx_calloc(n_stop + 1, sizeof *stop);
    char **out = rlx_calloc((size_t)x->numel + 1, sizeof *out);
    rlx_status st = in && stop && out ? RLX_OK : onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    /* case-insensitive matching compares lower-cased copies */
    for (size_t i = 0; i < n_stop && st == RLX_OK; i++) {
        char *w = rlx_malloc(sw->strings[i].len + 1);
        if (w) {
            if (sw->strings[i].len)
                memcpy(w, sw->strings[i].data, sw->strings[i].len);
            w[sw->strings[i].len] = 0;
            stop[i] = sensitive ? w : map_case(w, -1, loc);
            if (!sensitive)
                free(w);
        }
        if (!stop[i])
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < x->numel && st == RLX_OK; i++) {
        char *key = sensitive ? NULL : map_case(in[i], -1, loc);
        if (!sensitive && !key) {
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        bool drop = false;
        for (size_t j = 0; j < n_stop && !drop; j++)
            drop = !strcmp(sensitive ? in[i] : key, stop[j]);
        free(key);
        if (!drop && !(out[kept++] = map_case(in[i], dir, loc)))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (st == RLX_OK) {
        /* every string dropped: one empty string, as the spec's examples give */
        if (!kept && !(out[kept++] = rlx_strdup("")))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
        int64_t dims[2] = {1, kept};
        if (st == RLX_OK)
            st = onnx_out_const(n, 0, onnx_string_pack(x->ndim, x->ndim == 1 ? dims + 1 : dims, out, kept));
    }
    for (size_t i = 0; i < n_stop && stop; i++)
        free(stop[i]);
    for (int64_t i = 0; i < x->numel + 1 && out; i++)
        free(out[i]);
    free(stop);
    free(out);
    free(in);
    freelocale(loc);
    return st;
}

/* ------------------------------------------------------------ elementwise pairs */

/* Both inputs known tensors of strings, and their broadcast shape
 * (NumPy's rules) in *nd, dims; the element of each for output index o
 * by pair_index. */
static rlx_status string_pair(onnx_node *n, const onnx_tensor **a, const onnx_tensor **b, int *nd, int64_t *dims)
{
    for (int i = 0; i < 2; i++) {
        const onnx_tensor *k = n->in[i]->k;
        if (!k)
            return onnx_need_const(n, i, "strings");
        if (k->dtype != RLX_STRING)
            return onnx_fail(n, RLX_ERR_DTYPE, "input %d is %s where the other is strings", i,
                             rlx_dtype_name(k->dtype));
    }
    *a = n->in[0]->k;
    *b = n->in[1]->k;
    *nd = (*a)->ndim > (*b)->ndim ? (*a)->ndim : (*b)->ndim;
    for (int i = 0; i < *nd; i++) {
        int ia = i - (*nd - (*a)->ndim), ib = i - (*nd - (*b)->ndim);
        int64_t da = ia >= 0 ? (*a)->dims[ia] : 1, db = ib >= 0 ? (*b)->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return onnx_fail(n, RLX_ERR_SHAPE, "dims %lld and %lld do not broadcast", (long long)da, (long long)db);
        dims[i] = da == 1 ? db : da;
    }
    return RLX_OK;
}

/* The element of t (broadcast to nd, dims) that flat output index o reads. */
static int64_t pair_index(const onnx_tensor *t, int nd, const int64_t *dims, int64_t o)
{
    int64_t idx = 0, stride = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int64_t c = o % dims[i];
        o /= dims[i];
        int it = i - (nd - t->ndim);
        if (it >= 0) {
            if (t->dims[it] != 1)
                idx += c * stride;
            stride *= t->dims[it];
        }
    }
    return idx;
}

/* Equal of two string tensors (opset 19), or StringConcat (opset 20). */
static rlx_status string_pairwise(onnx_node *n, bool concat)
{
    const onnx_tensor *a = NULL, *b = NULL;
    int nd = 0;
    int64_t dims[RLX_MAX_DIMS], numel;
    rlx_status st = string_pair(n, &a, &b, &nd, dims);
    if (st != RLX_OK)
        return st;
    if (!onnx_dims_fit(nd, dims, &numel) || numel > ONNX_FOLD_MAX_NUMEL)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "a result of strings too large to compute at import");
    const char **ea = onnx_string_elems(a), **eb = onnx_string_elems(b);
    char **cat = concat ? rlx_calloc((size_t)numel + 1, sizeof *cat) : NULL;
    onnx_tensor *eq = concat ? NULL : onnx_tensor_new(RLX_BOOL, nd, dims);
    st =
        ea && eb && (concat ? cat != NULL : eq != NULL) ? RLX_OK : onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t o = 0; o < numel && st == RLX_OK; o++) {
        const char *x = ea[pair_index(a, nd, dims, o)], *y = eb[pair_index(b, nd, dims, o)];
        if (!concat) {
            ((uint8_t *)eq->data)[o] = strcmp(x, y) == 0;
            continue;
        }
        size_t lx = strlen(x), ly = strlen(y);
        if (!(cat[o] = rlx_malloc(lx + ly + 1)))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
        else {
            memcpy(cat[o], x, lx);
            memcpy(cat[o] + lx, y, ly + 1);
        }
    }
    if (st == RLX_OK)
        st = onnx_out_const(n, 0, concat ? onnx_string_pack(nd, dims, cat, numel) : eq);
    else
        onnx_tensor_free(eq);
    for (int64_t o = 0; cat && o < numel; o++)
        free(cat[o]);
    free(cat);
    free(ea);
    free(eb);
    return st;
}

rlx_status onnx_string_equal(onnx_node *n) { return string_pairwise(n, false); }
static rlx_status h_string_concat(onnx_node *n) { return string_pairwise(n, true); }

/* ------------------------------------------------------------ StringSplit */

/* The pieces of s (pointers into a copy, *n of them): split at each
 * occurrence of delim, or at runs of ASCII whitespace when delim is
 * empty (then without empty pieces), at most maxsplit times (< 0: no
 * limit), as Python's str.split does (which the spec's reference calls). */
static char **split_one(const char *s, const char *delim, int64_t maxsplit, int64_t *n)
{
    size_t l = strlen(s), dl = strlen(delim);
    char *copy = rlx_strdup(s);
    char **v = rlx_calloc(l + 2, sizeof *v); /* at most l + 1 pieces; v[l + 1] keeps the copy to free */
    if (!copy || !v) {
        free(copy);
        free(v);
        return NULL;
    }
    int64_t k = 0;
    char *p = copy;
    if (dl) {
        for (;;) {
            char *q = maxsplit < 0 || k < maxsplit ? strstr(p, delim) : NULL;
            v[k++] = p;
            if (!q)
                break;
            *q = 0;
            p = q + dl;
        }
    } else {
        for (;;) {
            while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
                p++;
            if (!*p)
                break;
            v[k++] = p;
            if (maxsplit >= 0 && k > maxsplit)
                break; /* the rest as it is, trailing whitespace too */
            while (*p && !(*p == ' ' || (*p >= '\t' && *p <= '\r')))
                p++;
            if (*p)
                *p++ = 0;
        }
    }
    v[l + 1] = copy;
    *n = k;
    return v;
}

static rlx_status h_string_split(onnx_node *n)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "strings");
    if (x->dtype != RLX_STRING)
        return onnx_fail(n, RLX_ERR_DTYPE, "input 0 must be strings, not %s", rlx_dtype_name(x->dtype));
    if (x->ndim >= RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "rank %d (the output adds a dim)", x->ndim);
    const Onnx__AttributeProto *da = onnx_attr(n, "delimiter");
    char delim[256] = "";
    if (da && da->has_s) {
        if (da->s.len >= sizeof delim || (da->s.len && memchr(da->s.data, 0, da->s.len)))
            return onnx_fail(n, RLX_ERR_UNSUPPORTED, "a delimiter of %zu bytes or with a NUL", da->s.len);
        onnx_attr_s(n, "delimiter", "", delim, sizeof delim);
    }
    const Onnx__AttributeProto *ma = onnx_attr(n, "maxsplit");
    int64_t maxsplit = ma ? onnx_attr_i(n, "maxsplit", -1) : -1;
    if (ma && maxsplit < 0)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "maxsplit must not be negative (%lld)", (long long)maxsplit);
    const char **e = onnx_string_elems(x);
    char ***pieces = rlx_calloc((size_t)x->numel + 1, sizeof *pieces);
    int64_t dims[RLX_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->ndim);
    onnx_tensor *z = onnx_tensor_new(RLX_I64, x->ndim, dims);
    rlx_status st = e && pieces && z ? RLX_OK : onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    int64_t most = 0;
    for (int64_t i = 0; i < x->numel && st == RLX_OK; i++) {
        int64_t k;
        if (!(pieces[i] = split_one(e[i], delim, maxsplit, &k)))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
        else {
            ((int64_t *)z->data)[i] = k;
            most = k > most ? k : most;
        }
    }
    /* Y: [..., most], each row padded with empty strings */
    char **flat = st == RLX_OK ? rlx_calloc((size_t)(x->numel * most) + 1, sizeof *flat) : NULL;
    if (st == RLX_OK && !flat)
        st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < x->numel && st == RLX_OK; i++)
        for (int64_t j = 0; j < most; j++)
            flat[i * most + j] = j < ((int64_t *)z->data)[i] ? pieces[i][j] : "";
    dims[x->ndim] = most;
    if (st == RLX_OK)
        st = onnx_out_const(n, 0, onnx_string_pack(x->ndim + 1, dims, flat, x->numel * most));
    if (st == RLX_OK) {
        st = onnx_out_const(n, 1, z);
        z = NULL;
    }
    onnx_tensor_free(z);
    for (int64_t i = 0; pieces && i < x->numel; i++)
        if (pieces[i]) {
            free(pieces[i][strlen(e[i]) + 1]);
            free(pieces[i]);
        }
    free(pieces);
    free(flat);
    free(e);
    return st;
}

/* ------------------------------------------------------------ RegexFullMatch */

/* Whether each string matches `pattern` whole.  ONNX names RE2's syntax;
 * PCRE2 reads RE2's common subset the same way (classes, \\w \\d \\s \\b,
 * (?:...), lazy quantifiers), as UTF-8. */
static rlx_status h_regex_full_match(onnx_node *n)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "strings");
    if (x->dtype != RLX_STRING)
        return onnx_fail(n, RLX_ERR_DTYPE, "input 0 must be strings, not %s", rlx_dtype_name(x->dtype));
    const Onnx__AttributeProto *pa = onnx_attr(n, "pattern");
    if (!pa || !pa->has_s)
        return onnx_fail(n, RLX_ERR_FORMAT, "attribute 'pattern' (a string) is required");
    int err;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile(pa->s.len ? pa->s.data : (PCRE2_SPTR) "", pa->s.len,
                                   PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "pattern \"%.*s\": %s at offset %zu",
                         (int)(pa->s.len < 200 ? pa->s.len : 200), (const char *)pa->s.data, (const char *)msg,
                         (size_t)at);
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    const char **e = md ? onnx_string_elems(x) : NULL;
    onnx_tensor *y = e ? onnx_tensor_new(RLX_BOOL, x->ndim, x->dims) : NULL;
    rlx_status st = y ? RLX_OK : onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < x->numel && st == RLX_OK; i++) {
        int rc = pcre2_match(re, (PCRE2_SPTR)e[i], strlen(e[i]), 0, 0, md, NULL);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "element %lld: %s", (long long)i, (const char *)msg);
        } else
            ((uint8_t *)y->data)[i] = rc >= 0;
    }
    if (st == RLX_OK) {
        st = onnx_out_const(n, 0, y);
        y = NULL;
    }
    onnx_tensor_free(y);
    free(e);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return st;
}

const onnx_op onnx_string_ops[] = {
    ONNX_OP_STR("StringNormalizer", h_string_normalizer, 1),
    ONNX_OP_STR("StringConcat", h_string_concat, 2),
    /* Y and Z: the pieces and their counts */
    ONNX_OP_STR("StringSplit", h_string_split, 1),
    ONNX_OP_STR("RegexFullMatch", h_regex_full_match, 1),
    ONNX_OP_END,
};
