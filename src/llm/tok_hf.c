/* tok_hf.c - a tokenizer from a Hugging Face tokenizer.json (and the
 * tokenizer_config.json beside it when there is one).
 *
 * Supported: model BPE (vocab, merges as "a b" strings or [a, b] pairs,
 * byte_fallback, fuse_unk, ignore_merges, unk_token); added_tokens;
 * normalizer null, NFC, Prepend, Replace (string pattern), Sequence of those;
 * pre_tokenizer null, ByteLevel, Split (regex or string, Isolated), Metaspace,
 * Sequence of those; decoder ByteLevel, Metaspace, or a Sequence of Replace,
 * ByteFallback, Fuse, Strip; post_processor TemplateProcessing (BOS/EOS),
 * ByteLevel, null.  Anything else is an error naming the component.
 * Added tokens honour lstrip/rstrip; single_word and normalized are not
 * read (the tokens are matched as the plain strings they are). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/tok_internal.h"

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jbool(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static const char *type_of(const cJSON *o)
{
    const char *t = jstr(o, "type");
    return t ? t : "(no type)";
}

static rlx_status add_norm(tok_config *cfg, int kind, const char *a, const char *b)
{
    if (cfg->n_norm == TOK_MAX_NORM)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: more than %d normalizers", TOK_MAX_NORM);
    tok_norm *n = &cfg->norm[cfg->n_norm];
    n->kind = kind;
    n->a = a ? rlx_strdup(a) : NULL;
    n->b = b ? rlx_strdup(b) : NULL;
    if ((a && !n->a) || (b && !n->b)) {
        free(n->a);
        free(n->b);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    n->alen = a ? strlen(a) : 0;
    n->blen = b ? strlen(b) : 0;
    cfg->n_norm++;
    return RLX_OK;
}

static rlx_status read_normalizer(const cJSON *n, tok_config *cfg)
{
    if (!n || cJSON_IsNull(n))
        return RLX_OK;
    const char *ty = type_of(n);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *it;
        cJSON_ArrayForEach(it, list)
        {
            rlx_status st = read_normalizer(it, cfg);
            if (st != RLX_OK)
                return st;
        }
        return RLX_OK;
    }
    if (strcmp(ty, "NFC") == 0)
        return add_norm(cfg, TOK_NORM_NFC, NULL, NULL);
    if (strcmp(ty, "Prepend") == 0) {
        const char *p = jstr(n, "prepend");
        if (!p)
            return rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: Prepend normalizer without \"prepend\"");
        return add_norm(cfg, TOK_NORM_PREPEND, p, NULL);
    }
    if (strcmp(ty, "Replace") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *from = jstr(pat, "String"), *to = jstr(n, "content");
        if (!from || !to)
            return rlx_set_error(
                RLX_ERR_UNSUPPORTED,
                "tokenizer.json: Replace normalizer: only a String pattern and a content are supported");
        return add_norm(cfg, TOK_NORM_REPLACE, from, to);
    }
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: normalizer \"%s\" is not supported", ty);
}

typedef struct pre_info {
    int byte_level;
    char *regex; /* owned */
} pre_info;

static rlx_status set_regex(pre_info *p, const char *re, int literal)
{
    if (p->regex)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: more than one split pattern in the pre-tokenizer");
    if (literal) {
        /* \Q..\E quotes the string (a "\E" inside is split around) */
        size_t n = strlen(re);
        char *s = malloc(4 * n + 8);
        if (!s)
            return RLX_ERR_OUT_OF_MEMORY;
        size_t k = 0;
        memcpy(s + k, "\\Q", 2), k += 2;
        for (size_t i = 0; i < n; i++) {
            if (re[i] == '\\' && re[i + 1] == 'E') {
                memcpy(s + k, "\\E\\\\\\Q", 6), k += 6;
                continue;
            }
            s[k++] = re[i];
        }
        memcpy(s + k, "\\E", 3);
        p->regex = s;
        return RLX_OK;
    }
    p->regex = rlx_strdup(re);
    return p->regex ? RLX_OK : RLX_ERR_OUT_OF_MEMORY;
}

static rlx_status read_pre(const cJSON *n, tok_config *cfg, pre_info *p)
{
    if (!n || cJSON_IsNull(n))
        return RLX_OK;
    const char *ty = type_of(n);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "pretokenizers"), *it;
        cJSON_ArrayForEach(it, list)
        {
            rlx_status st = read_pre(it, cfg, p);
            if (st != RLX_OK)
                return st;
        }
        return RLX_OK;
    }
    if (strcmp(ty, "ByteLevel") == 0) {
        p->byte_level = 1;
        cfg->prefix_space = jbool(n, "add_prefix_space", 0);
        if (jbool(n, "use_regex", 1))
            return set_regex(p, TOK_REGEX_GPT2, 0);
        return RLX_OK;
    }
    if (strcmp(ty, "Split") == 0) {
        const char *beh = jstr(n, "behavior");
        if (beh && strcmp(beh, "Isolated") != 0)
            return rlx_set_error(RLX_ERR_UNSUPPORTED,
                                 "tokenizer.json: Split pre-tokenizer behavior \"%s\" is not "
                                 "supported (only Isolated)",
                                 beh);
        if (jbool(n, "invert", 0))
            return rlx_set_error(RLX_ERR_UNSUPPORTED,
                                 "tokenizer.json: Split pre-tokenizer with invert is not supported");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *re = jstr(pat, "Regex"), *lit = jstr(pat, "String");
        if (!re && !lit)
            return rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: Split pre-tokenizer without a pattern");
        return set_regex(p, re ? re : lit, !re);
    }
    if (strcmp(ty, "Metaspace") == 0) {
        const char *rep = jstr(n, "replacement");
        if (rep && strcmp(rep, "\xe2\x96\x81") != 0)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: Metaspace replacement \"%s\" (only U+2581)",
                                 rep);
        const char *scheme = jstr(n, "prepend_scheme");
        int prepend = scheme ? strcmp(scheme, "never") != 0 : jbool(n, "add_prefix_space", 1);
        rlx_status st = add_norm(cfg, TOK_NORM_REPLACE, " ", "\xe2\x96\x81");
        if (st == RLX_OK && prepend) {
            st = add_norm(cfg, TOK_NORM_PREPEND, "\xe2\x96\x81", NULL);
            if (st == RLX_OK) {
                cfg->norm[cfg->n_norm - 1].first_only = scheme && strcmp(scheme, "first") == 0;
                cfg->norm[cfg->n_norm - 1].if_absent = 1;
            }
        }
        cfg->metaspace_split = jbool(n, "split", 1);
        return st;
    }
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer \"%s\" is not supported", ty);
}

static rlx_status read_decoder(const cJSON *n, tok_config *cfg, int top)
{
    if (!n || cJSON_IsNull(n))
        return RLX_OK;
    const char *ty = type_of(n);
    if (strcmp(ty, "Sequence") == 0 && top) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "decoders"), *it;
        cJSON_ArrayForEach(it, list)
        {
            rlx_status st = read_decoder(it, cfg, 0);
            if (st != RLX_OK)
                return st;
        }
        return RLX_OK;
    }
    if (strcmp(ty, "ByteLevel") == 0 || strcmp(ty, "ByteFallback") == 0 || strcmp(ty, "Fuse") == 0)
        return RLX_OK;
    if (strcmp(ty, "Replace") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *from = jstr(pat, "String"), *to = jstr(n, "content");
        if (!from || !to || strcmp(from, "\xe2\x96\x81") != 0 || strcmp(to, " ") != 0)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: Replace decoder other than U+2581 -> space");
        return RLX_OK;
    }
    if (strcmp(ty, "Strip") == 0) {
        const char *c = jstr(n, "content");
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(n, "start"),
                    *stop = cJSON_GetObjectItemCaseSensitive(n, "stop");
        if (!c || strcmp(c, " ") != 0 || (cJSON_IsNumber(stop) && stop->valueint != 0) ||
            (cJSON_IsNumber(start) && start->valueint > 1))
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: Strip decoder other than one leading space");
        cfg->strip_leading_space = cJSON_IsNumber(start) && start->valueint == 1;
        return RLX_OK;
    }
    if (strcmp(ty, "Metaspace") == 0) {
        const char *scheme = jstr(n, "prepend_scheme");
        cfg->strip_leading_space = scheme ? strcmp(scheme, "never") != 0 : jbool(n, "add_prefix_space", 1);
        return RLX_OK;
    }
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: decoder \"%s\" is not supported", ty);
}

/* A token named in tokenizer_config.json: "x" or {"content": "x"}. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(v))
        return v->valuestring;
    return cJSON_IsObject(v) ? jstr(v, "content") : NULL;
}

typedef struct vocab {
    const char **text;
    int32_t *type;
    int32_t n;
} vocab;

static int32_t find_token(const vocab *v, const char *s)
{
    if (!s)
        return -1;
    for (int32_t i = 0; i < v->n; i++)
        if (v->text[i] && strcmp(v->text[i], s) == 0)
            return i;
    return -1;
}

static rlx_status read_post(const cJSON *n, const vocab *v, rlx_tokenizer_spec *spec)
{
    if (!n || cJSON_IsNull(n))
        return RLX_OK;
    const char *ty = type_of(n);
    if (strcmp(ty, "ByteLevel") == 0)
        return RLX_OK;
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "processors"), *it;
        cJSON_ArrayForEach(it, list)
        {
            rlx_status st = read_post(it, v, spec);
            if (st != RLX_OK)
                return st;
        }
        return RLX_OK;
    }
    if (strcmp(ty, "TemplateProcessing") != 0)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: post_processor \"%s\" is not supported", ty);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(n, "single"), *it;
    int seen_seq = 0, nbefore = 0, nafter = 0;
    cJSON_ArrayForEach(it, single)
    {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        if (cJSON_GetObjectItemCaseSensitive(it, "Sequence")) {
            seen_seq = 1;
            continue;
        }
        if (!sp)
            continue;
        int32_t id = find_token(v, jstr(sp, "id"));
        if (id < 0)
            return rlx_set_error(RLX_ERR_FORMAT,
                                 "tokenizer.json: TemplateProcessing names token \"%s\", not in the "
                                 "vocabulary",
                                 jstr(sp, "id") ? jstr(sp, "id") : "?");
        if (!seen_seq) {
            spec->bos_id = id;
            spec->add_bos = 1;
            nbefore++;
        } else {
            spec->eos_id = id;
            spec->add_eos = 1;
            nafter++;
        }
    }
    if (nbefore > 1 || nafter > 1)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "tokenizer.json: TemplateProcessing adds more than one token on a side");
    return RLX_OK;
}

rlx_status rlx_tokenizer_from_hf_json_text(const char *json, size_t len, const char *config_json, rlx_tokenizer **out)
{
    if (!json || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_from_hf_json_text: NULL argument");
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(json, len), *conf = NULL;
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: not a JSON object (parse error near byte %zu)",
                             root ? (size_t)0 : (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - json : 0));
    }
    if (config_json) {
        conf = cJSON_Parse(config_json);
        if (!conf || !cJSON_IsObject(conf)) {
            cJSON_Delete(root);
            cJSON_Delete(conf);
            return rlx_set_error(RLX_ERR_FORMAT, "tokenizer_config.json: not a JSON object");
        }
    }
    rlx_status st = RLX_OK;
    tok_config cfg = {0};
    pre_info pre = {0};
    vocab v = {0};
    char **merge_buf = NULL;
    const char **merges = NULL;
    int64_t n_merges = 0;
    rlx_tokenizer_spec spec;
    rlx_tokenizer_spec_init(&spec);
    spec.add_space_prefix = 0;

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = jstr(model, "type");
    if (!cJSON_IsObject(model)) {
        st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: no \"model\" object");
        goto done;
    }
    if (mtype && strcmp(mtype, "BPE") != 0) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: model type \"%s\" is not supported (only BPE)", mtype);
        goto done;
    }
    const char *cont = jstr(model, "continuing_subword_prefix"), *suff = jstr(model, "end_of_word_suffix");
    if ((cont && *cont) || (suff && *suff)) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: BPE with continuing_subword_prefix or "
                                                "end_of_word_suffix is not supported");
        goto done;
    }
    const cJSON *vj = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *it;
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vj)) {
        st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
        goto done;
    }
    /* the id range */
    int64_t maxid = -1;
    cJSON_ArrayForEach(it, vj)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > (1 << 30)) {
            st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: vocab entry \"%s\" has no valid id", it->string);
            goto done;
        }
        if (it->valueint > maxid)
            maxid = it->valueint;
    }
    cJSON_ArrayForEach(it, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > (1 << 30) || !jstr(it, "content")) {
            st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: an added token without a valid id and content");
            goto done;
        }
        if (id->valueint > maxid)
            maxid = id->valueint;
    }
    if (maxid < 0) {
        st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: empty vocabulary");
        goto done;
    }
    v.n = (int32_t)(maxid + 1);
    v.text = rlx_calloc((size_t)v.n, sizeof *v.text);
    v.type = rlx_calloc((size_t)v.n, sizeof *v.type);
    if (!v.text || !v.type) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto done;
    }
    int byte_fallback = jbool(model, "byte_fallback", 0);
    cJSON_ArrayForEach(it, vj)
    {
        v.text[it->valueint] = it->string;
        const char *s = it->string;
        int is_byte = byte_fallback && strlen(s) == 6 && strncmp(s, "<0x", 3) == 0 && s[5] == '>';
        v.type[it->valueint] = is_byte ? RLX_TOKEN_BYTE : RLX_TOKEN_NORMAL;
    }
    cJSON_ArrayForEach(it, added)
    {
        int id = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
        v.text[id] = jstr(it, "content");
        v.type[id] = jbool(it, "special", 0) ? RLX_TOKEN_CONTROL : RLX_TOKEN_USER_DEFINED;
    }
    for (int32_t i = 0; i < v.n; i++)
        if (!v.text[i]) {
            v.text[i] = "";
            v.type[i] = RLX_TOKEN_UNUSED;
        }
    const char *unk = jstr(model, "unk_token");
    spec.unk_id = find_token(&v, unk);
    if (spec.unk_id >= 0 && v.type[spec.unk_id] == RLX_TOKEN_CONTROL)
        v.type[spec.unk_id] = RLX_TOKEN_UNKNOWN;

    /* merges */
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(model, "merges");
    n_merges = cJSON_GetArraySize(mj);
    merges = rlx_calloc((size_t)n_merges + 1, sizeof *merges);
    merge_buf = rlx_calloc((size_t)n_merges + 1, sizeof *merge_buf);
    if (!merges || !merge_buf) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto done;
    }
    int64_t k = 0;
    cJSON_ArrayForEach(it, mj)
    {
        if (cJSON_IsString(it)) {
            merges[k++] = it->valuestring;
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            const char *a = it->child->valuestring, *b = it->child->next->valuestring;
            size_t la = strlen(a), lb = strlen(b);
            char *s = malloc(la + lb + 2);
            if (!s) {
                st = RLX_ERR_OUT_OF_MEMORY;
                goto done;
            }
            memcpy(s, a, la);
            s[la] = ' ';
            memcpy(s + la + 1, b, lb + 1);
            merge_buf[k] = s;
            merges[k++] = s;
        } else {
            st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer.json: merge %lld is neither \"a b\" nor [\"a\", \"b\"]",
                               (long long)k);
            goto done;
        }
    }

    if ((st = read_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &cfg)) != RLX_OK ||
        (st = read_pre(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &cfg, &pre)) != RLX_OK ||
        (st = read_decoder(cJSON_GetObjectItemCaseSensitive(root, "decoder"), &cfg, 1)) != RLX_OK ||
        (st = read_post(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &v, &spec)) != RLX_OK)
        goto done;
    cfg.byte_level = pre.byte_level;
    cfg.regex = pre.regex;
    cfg.byte_fallback = byte_fallback;
    cfg.fuse_unk = jbool(model, "fuse_unk", 0);
    cfg.ignore_merges = jbool(model, "ignore_merges", 0);
    if (!cfg.byte_level && pre.regex) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer.json: a Split pre-tokenizer without ByteLevel is not "
                                                "supported");
        goto done;
    }

    /* lstrip/rstrip of added tokens are applied by tok_create's caller below */
    if (conf) {
        int32_t id;
        if ((id = find_token(&v, config_token(conf, "bos_token"))) >= 0)
            spec.bos_id = id;
        if ((id = find_token(&v, config_token(conf, "eos_token"))) >= 0)
            spec.eos_id = id;
        if ((id = find_token(&v, config_token(conf, "pad_token"))) >= 0)
            spec.pad_id = id;
        if ((id = find_token(&v, config_token(conf, "unk_token"))) >= 0 && spec.unk_id < 0)
            spec.unk_id = id;
        spec.add_bos = jbool(conf, "add_bos_token", spec.add_bos);
        spec.add_eos = jbool(conf, "add_eos_token", spec.add_eos);
    }
    spec.model = cfg.byte_level ? "gpt2" : "llama";
    spec.n_tokens = v.n;
    spec.tokens = v.text;
    spec.token_types = v.type;
    spec.n_merges = n_merges;
    spec.merges = cJSON_IsArray(mj) ? merges : NULL; /* present and empty: no merges */
    pre.regex = NULL;                                /* cfg.regex points at it; freed below */
    char *regex = (char *)cfg.regex;
    rlx_tokenizer *t = NULL;
    st = tok_create(&spec, &cfg, &t);
    if (st == RLX_OK) {
        const char *pre_name = tok_pre_name(regex);
        snprintf(t->pre, sizeof t->pre, "%s", pre_name ? pre_name : "");
        t->cfg.regex = NULL; /* compiled; the string is freed here */
        cJSON_ArrayForEach(it, added)
        {
            int id = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
            for (int s = 0; s < t->n_special; s++)
                if (t->special[s].id == id) {
                    t->special[s].lstrip = jbool(it, "lstrip", 0);
                    t->special[s].rstrip = jbool(it, "rstrip", 0);
                }
        }
        *out = t;
    }
    free(regex);
done:
    free(pre.regex);
    tok_config_free(&cfg);
    if (merge_buf)
        for (int64_t i = 0; i < n_merges; i++)
            free(merge_buf[i]);
    free(merge_buf);
    free(merges);
    free(v.text);
    free(v.type);
    cJSON_Delete(root);
    cJSON_Delete(conf);
    return st;
}

static char *read_all(const char *path, size_t *len, int quiet)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (!quiet)
            rlx_set_error(RLX_ERR_IO, "tokenizer: cannot open %s", path);
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory reading %s", path);
                return NULL;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (r < 65536)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        rlx_set_error(RLX_ERR_IO, "tokenizer: cannot read %s", path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

rlx_status rlx_tokenizer_from_hf_json(const char *path, rlx_tokenizer **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_from_hf_json: NULL argument");
    *out = NULL;
    size_t len, clen;
    char *json = read_all(path, &len, 0);
    if (!json)
        return RLX_ERR_IO;
    /* tokenizer_config.json in the same folder, when there is one */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path + 1) : 0;
    char *cpath = malloc(dl + 32);
    char *conf = NULL;
    if (cpath) {
        memcpy(cpath, path, dl);
        strcpy(cpath + dl, "tokenizer_config.json");
        conf = read_all(cpath, &clen, 1);
        free(cpath);
    }
    rlx_status st = rlx_tokenizer_from_hf_json_text(json, len, conf, out);
    if (st != RLX_OK && st != RLX_ERR_OUT_OF_MEMORY) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
        rlx_set_error(st, "%s (%s)", msg, path);
    }
    free(json);
    free(conf);
    return st;
}
