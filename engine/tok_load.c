/* tok_load: parses tokenizer.json (model, added tokens, normaliser, pre-tokenizer,
 * post-processor, decoder) and tokenizer_config.json into an sd_tokenizer. */
#include "tok_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistr.h>

/* GPT-2's pre-tokenizer regex (ByteLevel with use_regex). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct load_ctx {
    sd_tokenizer *t;
    const char *path; /* for messages */
    sd_diag *d;
} load_ctx;

static const char *type_of(const json_t *o)
{
    const char *s = json_string_value(json_object_get(o, "type"));
    return s ? s : "(none)";
}

/* A boolean member; `def` when absent or null; -1 when of another type. */
static int get_bool(const json_t *o, const char *key, int def)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return def;
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static int bad(load_ctx *c, const char *what)
{
    return sd_diag_set(c->d, SD_EFORMAT, "%s: %s", c->path, what);
}

static int unsupported(load_ctx *c, const char *component, const char *type)
{
    return sd_diag_set(c->d, SD_ENOTSUP, "%s: %s type '%s' is not supported", c->path, component, type);
}

int sd__tok_arena_add(sd_tokenizer *t, const char *s, size_t n, uint32_t *off)
{
    if (t->arena_len + n + 1 > t->arena_cap) /* sized up front: maps keep pointers into it */
        return SD_EFULL;
    memcpy(t->arena + t->arena_len, s, n);
    t->arena[t->arena_len + n] = 0;
    *off = (uint32_t)t->arena_len;
    t->arena_len += n + 1;
    return 0;
}

/* Stores the token string for id and its decoded bytes: every character mapped back through
 * the byte-level alphabet, or the raw UTF-8 when some character is not in it (as HF's
 * ByteLevel decoder does). */
static int set_token(sd_tokenizer *t, int32_t id, const char *s, size_t n)
{
    uint32_t off, boff;
    int rc = sd__tok_arena_add(t, s, n, &off);
    if (rc)
        return rc;
    char *bytes = t->arena + t->arena_len; /* decoded in place, never longer than s */
    size_t nb = 0;
    const uint8_t *p = (const uint8_t *)s, *end = p + n;
    while (p < end) {
        ucs4_t cp;
        int k = u8_mbtouc(&cp, p, (size_t)(end - p));
        int b = cp < 324 ? t->cp_byte[cp] : -1;
        if (b < 0) {
            nb = 0;
            break;
        }
        bytes[nb++] = (char)b;
        p += k;
    }
    if (p < end) {
        memcpy(bytes, s, n);
        nb = n;
    }
    if ((rc = sd__tok_arena_add(t, bytes, nb, &boff)))
        return rc;
    t->str_off[id] = off;
    t->bytes_off[id] = boff;
    t->bytes_len[id] = (uint32_t)nb;
    return 0;
}

/* ---- model ---- */

/* The id HF's AddedVocabulary gives an added token, whatever the file says: the model's id
 * when the content is in the vocab, else the next one after the vocab and earlier added
 * tokens (in file order). -1 for a content already added (HF keeps the first). */
static int32_t added_token_id(const sd_tokenizer *t, const char *s, size_t n, int32_t *max_added,
                              int32_t vocab_len)
{
    if (sd__tok_strmap_get(&t->added_map, s, n) >= 0)
        return -1;
    int32_t id = sd__tok_strmap_get(&t->vocab, s, n);
    if (id < 0)
        id = *max_added >= vocab_len || (*max_added >= 0 && vocab_len == 0) ? *max_added + 1 : vocab_len;
    if (id > *max_added)
        *max_added = id;
    return id;
}

static int load_vocab(load_ctx *c, const json_t *vocab, const json_t *added)
{
    sd_tokenizer *t = c->t;
    const char *key;
    json_t *v;
    int64_t max_id = -1;
    size_t bytes = 0, n_added = json_array_size(added);
    json_object_foreach((json_t *)vocab, key, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX - 1)
            return sd_diag_set(c->d, SD_EFORMAT, "%s: model.vocab['%s'] is not a valid id", c->path, key);
        if (json_integer_value(v) > max_id)
            max_id = json_integer_value(v);
        bytes += strlen(key) + 1;
    }
    for (size_t i = 0; i < n_added; i++) {
        const json_t *a = json_array_get(added, i), *id = json_object_get(a, "id");
        const char *s = json_string_value(json_object_get(a, "content"));
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX - 1 ||
            !s)
            return sd_diag_set(c->d, SD_EFORMAT, "%s: added_tokens[%zu] needs an id and a content", c->path,
                               i);
        bytes += strlen(s) + 1;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
            if (*p >= 0x80) { /* room for its normalised form (NFKC grows text at most 18x) */
                bytes += 18 * strlen(s);
                break;
            }
    }
    if (max_id < 0)
        return bad(c, "empty vocabulary");
    if (max_id > (int64_t)json_object_size(vocab) * 4 + 1024)
        return bad(c, "token ids are far larger than the vocabulary");
    /* Added tokens get ids as HF assigns them (below): at most vocab size + their count. */
    if ((int64_t)json_object_size(vocab) > max_id)
        max_id = (int64_t)json_object_size(vocab);
    max_id += (int64_t)n_added;
    t->n_ids = (int32_t)max_id + 1;
    t->arena_cap = 2 * bytes + 16;
    t->arena = malloc(t->arena_cap);
    t->str_off = malloc((size_t)t->n_ids * sizeof *t->str_off);
    t->bytes_off = calloc((size_t)t->n_ids, sizeof *t->bytes_off);
    t->bytes_len = calloc((size_t)t->n_ids, sizeof *t->bytes_len);
    t->special = calloc((size_t)t->n_ids, 1);
    t->added = calloc(n_added + 1, sizeof *t->added);
    if (!t->arena || !t->str_off || !t->bytes_off || !t->bytes_len || !t->special || !t->added)
        return SD_ENOMEM;
    memset(t->str_off, 0xff, (size_t)t->n_ids * sizeof *t->str_off);
    int rc;
    int32_t max_added = -1, top = -1;
    if ((rc = sd__tok_strmap_init(&t->vocab, json_object_size(vocab))) ||
        (rc = sd__tok_strmap_init(&t->added_map, n_added)))
        return rc;
    json_object_foreach((json_t *)vocab, key, v)
    {
        int32_t id = (int32_t)json_integer_value(v);
        size_t n = strlen(key);
        if ((rc = set_token(t, id, key, n)) ||
            (rc = sd__tok_strmap_put(&t->vocab, sd__tok_arena_at(t, t->str_off[id]), n, id)))
            return rc;
    }
    for (size_t i = 0; i < n_added; i++) {
        const json_t *a = json_array_get(added, i);
        const char *s = json_string_value(json_object_get(a, "content"));
        size_t n = json_string_length(json_object_get(a, "content"));
        int32_t id = added_token_id(t, s, n, &max_added, (int32_t)json_object_size(vocab));
        if (id < 0)
            continue; /* the same content again: HF keeps the first */
        int sp = get_bool(a, "special", 0), ls = get_bool(a, "lstrip", 0), rs = get_bool(a, "rstrip", 0);
        int sw = get_bool(a, "single_word", 0), nz = get_bool(a, "normalized", !sp);
        if (sp < 0 || ls < 0 || rs < 0 || sw < 0 || nz < 0)
            return sd_diag_set(c->d, SD_EFORMAT, "%s: added_tokens[%zu]: flags must be booleans", c->path, i);
        if (n == 0)
            return sd_diag_set(c->d, SD_EFORMAT, "%s: added_tokens[%zu]: empty content", c->path, i);
        if ((rc = set_token(t, id, s, n)))
            return rc;
        sd__tok_added *ad = &t->added[t->n_added++];
        ad->content = sd__tok_arena_at(t, t->str_off[id]);
        ad->len = (uint32_t)n;
        ad->id = id;
        ad->special = (unsigned)sp;
        ad->lstrip = (unsigned)ls;
        ad->rstrip = (unsigned)rs;
        ad->single_word = (unsigned)sw;
        ad->normalized = (unsigned)nz;
        t->special[id] = (uint8_t)sp;
        if ((rc = sd__tok_strmap_put(&t->added_map, ad->content, n, id)))
            return rc;
    }
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->str_off[id] != UINT32_MAX)
            top = id;
    t->n_ids = top + 1; /* the arrays may be a little longer */
    return 0;
}

/* One merge: "a b" or ["a", "b"]. */
static int load_merge(load_ctx *c, const json_t *m, size_t rank, char **cat, size_t *cat_cap)
{
    sd_tokenizer *t = c->t;
    const char *a, *b;
    size_t na, nb;
    if (json_is_string(m)) {
        a = json_string_value(m);
        const char *sp = strchr(a, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return sd_diag_set(c->d, SD_EFORMAT, "%s: model.merges[%zu] is not 'a b'", c->path, rank);
        na = (size_t)(sp - a);
        b = sp + 1;
        nb = strlen(b);
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) {
        a = json_string_value(json_array_get(m, 0));
        na = json_string_length(json_array_get(m, 0));
        b = json_string_value(json_array_get(m, 1));
        nb = json_string_length(json_array_get(m, 1));
    } else {
        return sd_diag_set(c->d, SD_EFORMAT, "%s: model.merges[%zu] is neither 'a b' nor [a, b]", c->path,
                           rank);
    }
    if (na + nb + 1 > *cat_cap) {
        char *p = realloc(*cat, na + nb + 64);
        if (!p)
            return SD_ENOMEM;
        *cat = p;
        *cat_cap = na + nb + 64;
    }
    memcpy(*cat, a, na);
    memcpy(*cat + na, b, nb);
    int32_t ia = sd__tok_strmap_get(&t->vocab, a, na), ib = sd__tok_strmap_get(&t->vocab, b, nb);
    int32_t im = sd__tok_strmap_get(&t->vocab, *cat, na + nb);
    if (ia < 0 || ib < 0 || im < 0)
        return sd_diag_set(c->d, SD_EFORMAT, "%s: model.merges[%zu]: '%.*s' + '%.*s' not in the vocabulary",
                           c->path, rank, (int)na, a, (int)nb, b);
    return sd__tok_pairmap_put(&t->merges, ia, ib, (int32_t)rank, im);
}

static int load_model(load_ctx *c, const json_t *model, const json_t *added)
{
    sd_tokenizer *t = c->t;
    if (!json_is_object(model))
        return bad(c, "'model' missing or not an object");
    if (strcmp(type_of(model), "BPE") && json_object_get(model, "type"))
        return unsupported(c, "model", type_of(model));
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab))
        return bad(c, "model.vocab missing or not an object");
    if (!json_is_array(merges))
        return bad(c, "model.merges missing or not an array");
    if (added && !json_is_array(added))
        return bad(c, "added_tokens is not an array");
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) > 0)
        return unsupported(c, "model option", "dropout");
    if (get_bool(model, "byte_fallback", 0) != 0)
        return unsupported(c, "model option", "byte_fallback");
    const char *pre = json_string_value(json_object_get(model, "continuing_subword_prefix"));
    const char *suf = json_string_value(json_object_get(model, "end_of_word_suffix"));
    if ((pre && *pre) || (suf && *suf))
        return unsupported(c, "model option", "continuing_subword_prefix/end_of_word_suffix");
    int ig = get_bool(model, "ignore_merges", 0), fu = get_bool(model, "fuse_unk", 0);
    if (ig < 0 || fu < 0)
        return bad(c, "model.ignore_merges/fuse_unk must be booleans");
    t->ignore_merges = ig;
    t->fuse_unk = fu;
    for (uint32_t cp = 0; cp < 324; cp++)
        t->cp_byte[cp] = (int16_t)sd__tok_cp_to_byte(cp);
    int rc = load_vocab(c, vocab, added);
    if (rc)
        return rc;
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    t->unk_id = unk ? sd__tok_strmap_get(&t->vocab, unk, strlen(unk)) : -1;
    if ((rc = sd__tok_pairmap_init(&t->merges, json_array_size(merges))))
        return rc;
    char *cat = NULL;
    size_t cat_cap = 0;
    for (size_t i = 0; i < json_array_size(merges) && !rc; i++)
        rc = load_merge(c, json_array_get(merges, i), i, &cat, &cat_cap);
    free(cat);
    if (rc)
        return rc;
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        int n = u8_uctomb(u, sd__tok_byte_to_cp((unsigned char)b), 4);
        t->bl_utf8[b][0] = (unsigned char)n;
        memcpy(&t->bl_utf8[b][1], u, (size_t)n);
        t->byte_id[b] = sd__tok_strmap_get(&t->vocab, (const char *)u, (size_t)n);
    }
    return 0;
}

/* ---- normaliser, pre-tokenizer ---- */

static int load_normalizer(load_ctx *c, const json_t *n)
{
    sd_tokenizer *t = c->t;
    if (!n || json_is_null(n))
        return 0;
    const char *ty = type_of(n);
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return bad(c, "normalizer Sequence without a 'normalizers' array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            int rc = load_normalizer(c, json_array_get(list, i));
            if (rc)
                return rc;
        }
        return 0;
    }
    static const char *const names[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int k = 0; k < 4; k++) {
        if (strcmp(ty, names[k]))
            continue;
        if (t->n_norm == SD__TOK_MAX_STEPS)
            return bad(c, "too many normalizers");
        t->norm[t->n_norm++] = k;
        return 0;
    }
    return unsupported(c, "normalizer", ty);
}

/* HF runs these patterns with Oniguruma, whose \s is Unicode White_Space; PCRE2's UCP \s
 * also takes U+180E. Spelling \s (and \S outside classes) out keeps the two in step. */
#define WS_SET "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}"

static char *onig_compatible(const char *pat, size_t len, size_t *ret_len)
{
    char *out = malloc(len * 24 + 1), *o = out;
    int in_class = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        char ch = pat[i];
        if (ch == '\\' && i + 1 < len) {
            char e = pat[++i];
            if (e == 's')
                o += sprintf(o, in_class ? WS_SET : "[" WS_SET "]");
            else if (e == 'S' && !in_class)
                o += sprintf(o, "[^" WS_SET "]");
            else
                o += sprintf(o, "\\%c", e);
            continue;
        }
        if (ch == '[' && !in_class) {
            in_class = 1;
            *o++ = ch;
            if (i + 1 < len && pat[i + 1] == '^')
                *o++ = pat[++i];
            if (i + 1 < len && pat[i + 1] == ']') /* a leading ']' is literal */
                *o++ = pat[++i];
            continue;
        }
        if (ch == '[' && in_class && i + 1 < len && pat[i + 1] == ':') { /* [:alpha:] */
            const char *end = strstr(pat + i + 2, ":]");
            size_t k = end && (size_t)(end - pat) < len ? (size_t)(end - pat) + 2 - i : 1;
            memcpy(o, pat + i, k);
            o += k;
            i += k - 1;
            continue;
        }
        if (ch == ']' && in_class)
            in_class = 0;
        *o++ = ch;
    }
    *o = 0;
    *ret_len = (size_t)(o - out);
    return out;
}

static int compile_regex(load_ctx *c, pcre2_code **ret, const char *pat, size_t len, int literal)
{
    int err;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    char *fixed = literal ? NULL : onig_compatible(pat, len, &len);
    if (!literal && !fixed)
        return SD_ENOMEM;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(fixed ? fixed : pat), len, opts, &err, &off, NULL);
    free(fixed);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return sd_diag_set(c->d, SD_ENOTSUP, "%s: pre_tokenizer Split regex at offset %zu: %s", c->path,
                           (size_t)off, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
    *ret = re;
    return 0;
}

static int split_behavior(const char *b)
{
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                        "Contiguous"};
    for (int k = 0; k < 5; k++)
        if (b && !strcmp(b, names[k]))
            return k;
    return -1;
}

static int load_pretok(load_ctx *c, const json_t *p)
{
    sd_tokenizer *t = c->t;
    if (!p || json_is_null(p))
        return 0;
    const char *ty = type_of(p);
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return bad(c, "pre_tokenizer Sequence without a 'pretokenizers' array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            int rc = load_pretok(c, json_array_get(list, i));
            if (rc)
                return rc;
        }
        return 0;
    }
    if (t->n_pretok == SD__TOK_MAX_STEPS)
        return bad(c, "too many pre-tokenizers");
    sd__tok_pretok *s = &t->pretok[t->n_pretok];
    if (!strcmp(ty, "ByteLevel")) {
        int aps = get_bool(p, "add_prefix_space", 1), re = get_bool(p, "use_regex", 1);
        if (aps < 0 || re < 0)
            return bad(c, "pre_tokenizer ByteLevel: add_prefix_space/use_regex must be booleans");
        s->bytelevel = 1;
        s->add_prefix_space = aps;
        s->behavior = SD__SPLIT_ISOLATED;
        t->n_pretok++;
        return re ? compile_regex(c, &s->re, gpt2_pattern, sizeof gpt2_pattern - 1, 0) : 0;
    }
    if (!strcmp(ty, "Split")) {
        for (int i = 0; i < t->n_pretok; i++)
            if (t->pretok[i].bytelevel)
                return unsupported(c, "pre_tokenizer", "Split after ByteLevel");
        const json_t *pat = json_object_get(p, "pattern");
        const json_t *rx = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        int inv = get_bool(p, "invert", 0);
        s->behavior = split_behavior(json_string_value(json_object_get(p, "behavior")));
        if (s->behavior < 0) {
            const char *b = json_string_value(json_object_get(p, "behavior"));
            return unsupported(c, "pre_tokenizer Split behavior", b ? b : "(none)");
        }
        if (inv < 0 || (!json_is_string(rx) && !json_is_string(lit)))
            return bad(c, "pre_tokenizer Split needs a pattern {Regex|String} and a boolean invert");
        s->invert = inv;
        t->n_pretok++;
        const json_t *ps = json_is_string(rx) ? rx : lit;
        return compile_regex(c, &s->re, json_string_value(ps), json_string_length(ps), ps == lit);
    }
    return unsupported(c, "pre_tokenizer", ty);
}

/* ---- post-processor, decoder ---- */

static int prepend_ids(int32_t **arr, int *n, const int32_t *ids, int k, int at_end)
{
    int32_t *p = realloc(*arr, (size_t)(*n + k + 1) * sizeof *p);
    if (!p)
        return SD_ENOMEM;
    if (at_end) {
        memcpy(p + *n, ids, (size_t)k * sizeof *p);
    } else {
        memmove(p + k, p, (size_t)*n * sizeof *p);
        memcpy(p, ids, (size_t)k * sizeof *p);
    }
    *arr = p;
    *n += k;
    return 0;
}

/* The ids of one special-token name in a TemplateProcessing special_tokens map. */
static int template_ids(load_ctx *c, const json_t *specials, const char *name, int32_t *ids, int *n)
{
    const json_t *list = json_object_get(json_object_get(specials, name ? name : ""), "ids");
    if (!json_is_array(list) || json_array_size(list) > 16)
        return sd_diag_set(c->d, SD_EFORMAT, "%s: TemplateProcessing: special token '%s' has no ids", c->path,
                           name ? name : "(null)");
    *n = (int)json_array_size(list);
    for (int i = 0; i < *n; i++) {
        const json_t *v = json_array_get(list, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= c->t->n_ids)
            return bad(c, "TemplateProcessing: special token id out of range");
        ids[i] = (int32_t)json_integer_value(v);
    }
    return 0;
}

static int load_template(load_ctx *c, const json_t *p)
{
    sd_tokenizer *t = c->t;
    const json_t *single = json_object_get(p, "single"), *specials = json_object_get(p, "special_tokens");
    if (!json_is_array(single))
        return bad(c, "TemplateProcessing without a 'single' array");
    int32_t pre[64], suf[64];
    int npre = 0, nsuf = 0, seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *it = json_array_get(single, i), *sp = json_object_get(it, "SpecialToken");
        if (json_is_object(json_object_get(it, "Sequence"))) {
            const char *which = json_string_value(json_object_get(json_object_get(it, "Sequence"), "id"));
            if (!which || strcmp(which, "A") || seen_a)
                return bad(c, "TemplateProcessing: 'single' must hold sequence A once");
            seen_a = 1;
        } else if (json_is_object(sp)) {
            int32_t ids[16];
            int n = 0, rc = template_ids(c, specials, json_string_value(json_object_get(sp, "id")), ids, &n);
            if (rc)
                return rc;
            int *cnt = seen_a ? &nsuf : &npre;
            int32_t *dst = seen_a ? suf : pre;
            if (*cnt + n > 64)
                return bad(c, "TemplateProcessing: too many special tokens");
            memcpy(dst + *cnt, ids, (size_t)n * sizeof *ids);
            *cnt += n;
        } else {
            return bad(c, "TemplateProcessing: unknown item in 'single'");
        }
    }
    int rc = prepend_ids(&t->post_prefix, &t->n_post_prefix, pre, npre, 0);
    return rc ? rc : prepend_ids(&t->post_suffix, &t->n_post_suffix, suf, nsuf, 1);
}

/* RobertaProcessing / BertProcessing: cls A sep, with "cls": [str, id], "sep": [str, id]. */
static int load_cls_sep(load_ctx *c, const json_t *p)
{
    const json_t *cls = json_array_get(json_object_get(p, "cls"), 1);
    const json_t *sep = json_array_get(json_object_get(p, "sep"), 1);
    if (!json_is_integer(cls) || !json_is_integer(sep) || json_integer_value(cls) < 0 ||
        json_integer_value(sep) < 0 || json_integer_value(cls) >= c->t->n_ids ||
        json_integer_value(sep) >= c->t->n_ids)
        return bad(c, "post_processor: cls/sep must be [token, id]");
    int32_t a = (int32_t)json_integer_value(cls), b = (int32_t)json_integer_value(sep);
    int rc = prepend_ids(&c->t->post_prefix, &c->t->n_post_prefix, &a, 1, 0);
    return rc ? rc : prepend_ids(&c->t->post_suffix, &c->t->n_post_suffix, &b, 1, 1);
}

static int load_post(load_ctx *c, const json_t *p)
{
    if (!p || json_is_null(p))
        return 0;
    const char *ty = type_of(p);
    if (!strcmp(ty, "ByteLevel"))
        return 0; /* it only trims offsets; ids are unchanged */
    if (!strcmp(ty, "TemplateProcessing"))
        return load_template(c, p);
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing"))
        return load_cls_sep(c, p);
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(p, "processors");
        if (!json_is_array(list))
            return bad(c, "post_processor Sequence without a 'processors' array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            int rc = load_post(c, json_array_get(list, i));
            if (rc)
                return rc;
        }
        return 0;
    }
    return unsupported(c, "post_processor", ty);
}

static int load_decoder(load_ctx *c, const json_t *p)
{
    if (!p || json_is_null(p))
        return unsupported(c, "decoder", "(none)");
    const char *ty = type_of(p);
    if (!strcmp(ty, "ByteLevel"))
        return 0;
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(p, "decoders");
        if (!json_is_array(list) || !json_array_size(list))
            return bad(c, "decoder Sequence without a 'decoders' array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            int rc = load_decoder(c, json_array_get(list, i));
            if (rc)
                return rc;
        }
        return 0;
    }
    return unsupported(c, "decoder", ty);
}

/* ---- tokenizer_config.json ---- */

static int config_token(load_ctx *c, const json_t *v, int32_t *id, char **str)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return bad(c, "bos_token/eos_token must be a string or {\"content\": ...}");
    *str = strdup(json_string_value(v));
    if (!*str)
        return SD_ENOMEM;
    *id = sd_tok_token_id(c->t, *str);
    return 0;
}

/* json_load_file reads with getc; one read of the whole file parses about twice as fast. */
static json_t *load_json_file(const char *path, size_t flags, json_error_t *je)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        json_t *root = json_loadb(buf, (size_t)n, flags, je);
        free(buf);
        return root;
    }
    free(buf);
    if (f)
        fclose(f);
    return json_load_file(path, flags, je); /* not seekable: let jansson stream it */
}

/* An optional boolean: *ret is -1 when absent or null. */
static int config_flag(load_ctx *c, const json_t *root, const char *key, int *ret)
{
    const json_t *v = json_object_get(root, key);
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return sd_diag_set(c->d, SD_EFORMAT, "%s: %s must be a boolean", c->path, key);
    *ret = get_bool(root, key, -1);
    return 0;
}

static int load_config(sd_tokenizer *t, const char *path, sd_diag *d)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* optional */
    fclose(f);
    json_error_t je;
    json_t *root = load_json_file(path, JSON_DECODE_INT_AS_REAL, &je); /* model_max_length may be 1e30 */
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return sd_diag_set(d, SD_EFORMAT, "%s:%d:%d: %s", path, je.line, je.column,
                           root ? "not a JSON object" : je.text);
    }
    load_ctx c = {t, path, d};
    int rc = config_token(&c, json_object_get(root, "bos_token"), &t->bos_id, &t->bos_str);
    if (!rc)
        rc = config_token(&c, json_object_get(root, "eos_token"), &t->eos_id, &t->eos_str);
    if (!rc)
        rc = config_flag(&c, root, "add_bos_token", &t->add_bos_token);
    if (!rc)
        rc = config_flag(&c, root, "add_eos_token", &t->add_eos_token);
    json_decref(root);
    return rc;
}

/* What an added token is matched as: normalized tokens are matched in normalised text,
 * so HF normalises their content too. */
static int added_patterns(sd_tokenizer *t)
{
    for (int i = 0; i < t->n_added; i++) {
        sd__tok_added *a = &t->added[i];
        size_t n;
        if (!a->normalized)
            continue;
        int rc = sd__tok_normalize(t, a->content, a->len, &a->norm, &n);
        if (rc)
            return rc;
        a->norm_len = (uint32_t)n;
        if (a->norm && n == a->len && !memcmp(a->norm, a->content, n)) {
            free(a->norm);
            a->norm = NULL;
        }
        if (a->norm && n) {
            /* HF then knows the token by its normalised form: that is what it decodes to, and
             * its skip_special check (by the original content) no longer sees it. */
            if ((rc = set_token(t, a->id, a->norm, n)))
                return rc;
            t->special[a->id] = 0;
        }
        if (a->norm && !n) { /* normalised away: it can never match */
            free(a->norm);
            a->norm = NULL;
            a->normalized = 0;
        }
    }
    return 0;
}

static const char *pattern_of(const sd__tok_added *a, uint32_t *len)
{
    *len = a->norm ? a->norm_len : a->len;
    return a->norm ? a->norm : a->content;
}

/* Index of added tokens by first byte, longest first, for leftmost-longest matching. */
static int index_added(sd_tokenizer *t)
{
    int count[256] = {0}, rc = added_patterns(t);
    if (rc)
        return rc;
    uint32_t len, len2;
    for (int i = 0; i < t->n_added; i++)
        count[(unsigned char)pattern_of(&t->added[i], &len)[0]]++;
    for (int b = 0; b < 256; b++) {
        if (!count[b])
            continue;
        int32_t *l = malloc((size_t)(count[b] + 1) * sizeof *l);
        if (!l)
            return SD_ENOMEM;
        int n = 0;
        for (int i = 0; i < t->n_added; i++) {
            if ((unsigned char)pattern_of(&t->added[i], &len)[0] != b)
                continue;
            int j = n++; /* insertion sort by length, descending; stable for equal lengths */
            while (j > 0 && (pattern_of(&t->added[l[j - 1]], &len2), len2 < len)) {
                l[j] = l[j - 1];
                j--;
            }
            l[j] = i;
        }
        l[n] = -1;
        t->added_by_byte[b] = l;
    }
    return 0;
}

int sd__tok_load_json(sd_tokenizer *t, const char *json_path, const char *config_path, sd_diag *d)
{
    FILE *f = fopen(json_path, "r");
    if (!f)
        return sd_diag_set(d, SD_ENOTFOUND, "%s: cannot open", json_path);
    fclose(f);
    json_error_t je;
    json_t *root = load_json_file(json_path, 0, &je);
    if (!root)
        return sd_diag_set(d, SD_EFORMAT, "%s:%d:%d: %s", json_path, je.line, je.column, je.text);
    load_ctx c = {t, json_path, d};
    int rc = 0;
    if (!json_is_object(root))
        rc = bad(&c, "not a JSON object");
    if (!rc)
        rc = load_model(&c, json_object_get(root, "model"), json_object_get(root, "added_tokens"));
    if (!rc)
        rc = load_normalizer(&c, json_object_get(root, "normalizer"));
    if (!rc)
        rc = load_pretok(&c, json_object_get(root, "pre_tokenizer"));
    if (!rc && (!t->n_pretok || !t->pretok[t->n_pretok - 1].bytelevel))
        rc = unsupported(&c, "pre_tokenizer", "without a final ByteLevel (byte-level BPE needs one)");
    if (!rc)
        rc = load_post(&c, json_object_get(root, "post_processor"));
    if (!rc)
        rc = load_decoder(&c, json_object_get(root, "decoder"));
    if (!rc)
        rc = index_added(t);
    json_decref(root);
    if (!rc && config_path)
        rc = load_config(t, config_path, d);
    return rc;
}
