/* model: a model directory opened for serving — checked weight views (dense or bitmask),
 * sparsity patterns, tokenizer, chat template and generation defaults. */
#include "model.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer.h"

#define MD_MAX_JSON (64u << 20) /* tokenizer_config / generation_config / sparsity.json cap */
#define MD_NAME_MAX 96          /* "model.layers.NNNN.self_attn.q_proj" fits easily */
#define MD_FLOAT_DT ((1u << SD_DT_BF16) | (1u << SD_DT_F16) | (1u << SD_DT_F32))
#define MD_N_LINEAR 7

struct sd_model {
    sd_ckpt *ck;
    sd_model_weights w;
    char (*lin_names)[MD_NAME_MAX]; /* [n_layers * 7] names the sd_linear views point at */
    sd_tokenizer *tok;
    char *name;
    char *chat_template;
    json_t *sparsity_tensors; /* sparsity.json "tensors" object, or NULL */
    char sparsity[32];
    int32_t eos[SD_MAX_EOS + 1];
    int n_eos;
    sd_gen_defaults gen;
};

/* Loads dir/name as JSON into *ret (jansson `flags`); absent file leaves *ret NULL and returns 0. */
static int md_json_file(const char *dir, const char *name, size_t flags, json_t **ret, sd_diag *d)
{
    char *p = sd__path_join(dir, name), *buf = NULL;
    size_t len;
    *ret = NULL;
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    int rc = 0;
    if (access(p, F_OK) == 0 && !(rc = sd__file_read(p, MD_MAX_JSON, &buf, &len, d))) {
        json_error_t err;
        *ret = json_loadb(buf, len, flags, &err);
        if (!*ret)
            rc = sd_diag_set(d, SD_EFORMAT, "%s: JSON error at line %d: %s", p, err.line, err.text);
        else if (!json_is_object(*ret)) {
            rc = sd_diag_set(d, SD_EFORMAT, "%s: not a JSON object", p);
            json_decref(*ret);
            *ret = NULL;
        }
    }
    free(buf);
    free(p);
    return rc;
}

/* ---- sparsity patterns ---------------------------------------------------------------- */

/* "2:4" -> 2/4, "unstructured" -> 0/0. Only 50% patterns with M | 32 fit the format. */
static int md_parse_pattern(const char *s, int *n, int *m)
{
    if (strcmp(s, "unstructured") == 0) {
        *n = *m = 0;
        return 0;
    }
    int a, b, used = 0;
    if (sscanf(s, "%d:%d%n", &a, &b, &used) != 2 || s[used] != '\0')
        return -1;
    if (b < 2 || b > 32 || 32 % b != 0 || 2 * a != b)
        return -1;
    *n = a;
    *m = b;
    return 0;
}

static int md_load_sparsity_json(sd_model *m, const char *dir, sd_diag *d)
{
    json_t *root;
    int rc = md_json_file(dir, "sparsity.json", JSON_REJECT_DUPLICATES, &root, d);
    if (rc || !root)
        return rc;
    json_t *fmt = json_object_get(root, "format"), *t = json_object_get(root, "tensors");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "nm-bitmask-v1") != 0)
        rc = sd_diag_set(d, SD_ENOTSUP, "%s/sparsity.json: \"format\" is not \"nm-bitmask-v1\"", dir);
    else if (t && !json_is_object(t))
        rc = sd_diag_set(d, SD_EFORMAT, "%s/sparsity.json: \"tensors\" is not an object", dir);
    else if (t)
        m->sparsity_tensors = json_incref(t);
    json_decref(root);
    return rc;
}

/* The pattern of one bitmask linear: safetensors metadata "sparsity.<name>", else
 * sparsity.json, else unstructured. The two sources must agree when both speak. */
static int md_pattern(sd_model *m, const char *name, int *n, int *mm, sd_diag *d)
{
    char key[MD_NAME_MAX + 16];
    snprintf(key, sizeof key, "sparsity.%s", name);
    const char *a = sd_ckpt_metadata(m->ck, key);
    json_t *jb = m->sparsity_tensors ? json_object_get(m->sparsity_tensors, name) : NULL;
    if (jb && !json_is_string(jb))
        return sd_diag_set(d, SD_EFORMAT, "sparsity.json: tensors['%s'] is not a string", name);
    const char *b = jb ? json_string_value(jb) : NULL;
    if (a && b && strcmp(a, b) != 0)
        return sd_diag_set(d, SD_EFORMAT,
                           "%s: pattern '%.32s' in safetensors metadata but '%.32s' in sparsity.json", name,
                           a, b);
    const char *s = a ? a : b ? b : "unstructured";
    if (md_parse_pattern(s, n, mm))
        return sd_diag_set(d, SD_ENOTSUP,
                           "%s: sparsity pattern '%.32s' is not supported (2:4, 4:8, 8:16, 16:32, "
                           "unstructured are)",
                           name, s);
    return 0;
}

/* Per-group bit counts of x for groups of m bits (m a power of two <= 32), by SWAR folding:
 * after the fold of width w, each 2w-bit field holds the popcount of its bits. */
static uint32_t md_group_counts(uint32_t x, int m)
{
    static const uint32_t fold[] = {0x55555555u, 0x33333333u, 0x0f0f0f0fu, 0x00ff00ffu, 0x0000ffffu};
    for (int w = 1, k = 0; w < m; w *= 2, k++)
        x = (x & fold[k]) + ((x >> w) & fold[k]);
    return x;
}

/* n replicated in every m-bit field of a word: what md_group_counts gives for a valid word. */
static uint32_t md_group_target(int n, int m)
{
    uint32_t t = 0;
    for (int g = 0; g < 32; g += m)
        t |= (uint32_t)n << g;
    return t;
}

/* Every mask row must fit the cols/2 stored values; N:M rows keep exactly N per group of M,
 * which is what the fixed 16-steps-per-word kernels rely on. */
static int md_check_mask(const sd_linear *l, sd_diag *d)
{
    int64_t words = l->cols / 32;
    uint32_t target = l->nm_m ? md_group_target(l->nm_n, l->nm_m) : 0;
    for (int64_t r = 0; r < l->rows; r++) {
        const uint32_t *row = l->mask + r * words;
        int64_t total = 0;
        for (int64_t w = 0; w < words; w++) {
            total += __builtin_popcount(row[w]);
            if (l->nm_m && md_group_counts(row[w], l->nm_m) != target)
                return sd_diag_set(d, SD_EFORMAT, "%s.nm_mask: row %lld word %lld breaks the %d:%d pattern",
                                   l->name, (long long)r, (long long)w, l->nm_n, l->nm_m);
        }
        if (total > l->cols / 2)
            return sd_diag_set(
                d, SD_EFORMAT,
                "%s.nm_mask: row %lld keeps %lld of %lld columns, more than the %lld stored values", l->name,
                (long long)r, (long long)total, (long long)l->cols, (long long)(l->cols / 2));
    }
    return 0;
}

/* ---- weights -------------------------------------------------------------------------- */

static int md_get(sd_model *m, const char *name, unsigned dts, int ndim, int64_t a, int64_t b,
                  const sd_tensor_view **ret, sd_diag *d)
{
    int64_t shape[2] = {a, b};
    return sd_ckpt_get(m->ck, name, dts, ndim, shape, ret, d);
}

static int md_vec(sd_model *m, const char *name, int64_t n, sd_vec *ret, sd_diag *d)
{
    const sd_tensor_view *t;
    int rc = md_get(m, name, MD_FLOAT_DT, 1, n, 0, &t, d);
    if (rc)
        return rc;
    *ret = (sd_vec){t->data, n, t->dtype};
    return 0;
}

static int md_bitmask(sd_model *m, sd_linear *l, sd_diag *d)
{
    char vn[MD_NAME_MAX + 16], mn[MD_NAME_MAX + 16];
    const sd_tensor_view *tv, *tm;
    snprintf(vn, sizeof vn, "%s.nm_values", l->name);
    snprintf(mn, sizeof mn, "%s.nm_mask", l->name);
    if (l->cols % 32 != 0)
        return sd_diag_set(d, SD_EFORMAT, "%s: bitmask linear needs cols %% 32 == 0, has %lld cols", l->name,
                           (long long)l->cols);
    int rc;
    if ((rc = md_get(m, vn, 1u << SD_DT_BF16, 2, l->rows, l->cols / 2, &tv, d)) ||
        (rc = md_get(m, mn, 1u << SD_DT_U32, 2, l->rows, l->cols / 32, &tm, d)) ||
        (rc = md_pattern(m, l->name, &l->nm_n, &l->nm_m, d)))
        return rc;
    l->kind = SD_LINEAR_BITMASK;
    l->values = tv->data;
    l->mask = tm->data;
    return md_check_mask(l, d);
}

/* Fills a linear `name` of shape [rows, cols]: dense X.weight or bitmask X.nm_values/nm_mask,
 * plus X.bias when present (required when need_bias). */
static int md_linear(sd_model *m, const char *name, int64_t rows, int64_t cols, int need_bias, sd_linear *l,
                     sd_diag *d)
{
    char key[MD_NAME_MAX + 16];
    const sd_tensor_view *t;
    int rc;
    memset(l, 0, sizeof *l);
    l->name = name;
    l->rows = rows;
    l->cols = cols;
    snprintf(key, sizeof key, "%s.weight", name);
    if (sd_ckpt_find(m->ck, key)) {
        if ((rc = md_get(m, key, MD_FLOAT_DT, 2, rows, cols, &t, d)))
            return rc;
        l->kind = SD_LINEAR_DENSE;
        l->dtype = t->dtype;
        l->w = t->data;
    } else {
        snprintf(key, sizeof key, "%s.nm_values", name);
        if (!sd_ckpt_find(m->ck, key))
            return sd_diag_set(d, SD_ENOTFOUND,
                               "%s: neither '%s.weight' nor '%s.nm_values' is in the checkpoint",
                               sd_ckpt_dir(m->ck), name, name);
        if ((rc = md_bitmask(m, l, d)))
            return rc;
        l->dtype = SD_DT_BF16;
    }
    snprintf(key, sizeof key, "%s.bias", name);
    if (!sd_ckpt_find(m->ck, key)) {
        if (need_bias)
            return sd_diag_set(d, SD_ENOTFOUND, "%s: '%s' is required by the config (q/k/v bias) but absent",
                               sd_ckpt_dir(m->ck), key);
        return 0;
    }
    if ((rc = md_get(m, key, MD_FLOAT_DT, 1, rows, 0, &t, d)))
        return rc;
    l->bias = t->data;
    l->bias_dtype = t->dtype;
    return 0;
}

static int md_layer(sd_model *m, int i, sd_diag *d)
{
    const sd_model_config *c = sd_ckpt_config(m->ck);
    sd_layer_weights *L = &m->w.layers[i];
    char(*nm)[MD_NAME_MAX] = &m->lin_names[(size_t)i * MD_N_LINEAR];
    static const char *const sub[MD_N_LINEAR] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                 "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                 "mlp.down_proj"};
    for (int j = 0; j < MD_N_LINEAR; j++)
        snprintf(nm[j], MD_NAME_MAX, "model.layers.%d.%s", i, sub[j]);
    int64_t h = c->hidden, qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t f = c->intermediate, b = c->qkv_bias;
    char key[MD_NAME_MAX + 32];
    int rc;
    snprintf(key, sizeof key, "model.layers.%d.input_layernorm.weight", i);
    if ((rc = md_vec(m, key, h, &L->attn_norm, d)))
        return rc;
    snprintf(key, sizeof key, "model.layers.%d.post_attention_layernorm.weight", i);
    if ((rc = md_vec(m, key, h, &L->mlp_norm, d)))
        return rc;
    if (c->qk_norm) {
        snprintf(key, sizeof key, "model.layers.%d.self_attn.q_norm.weight", i);
        if ((rc = md_vec(m, key, c->head_dim, &L->q_norm, d)))
            return rc;
        snprintf(key, sizeof key, "model.layers.%d.self_attn.k_norm.weight", i);
        if ((rc = md_vec(m, key, c->head_dim, &L->k_norm, d)))
            return rc;
    }
    if ((rc = md_linear(m, nm[0], qd, h, (int)b, &L->q, d)) ||
        (rc = md_linear(m, nm[1], kvd, h, (int)b, &L->k, d)) ||
        (rc = md_linear(m, nm[2], kvd, h, (int)b, &L->v, d)) ||
        (rc = md_linear(m, nm[3], h, qd, 0, &L->o, d)) || (rc = md_linear(m, nm[4], f, h, 0, &L->gate, d)) ||
        (rc = md_linear(m, nm[5], f, h, 0, &L->up, d)) || (rc = md_linear(m, nm[6], h, f, 0, &L->down, d)))
        return rc;
    return 0;
}

static int md_weights(sd_model *m, sd_diag *d)
{
    const sd_model_config *c = sd_ckpt_config(m->ck);
    const sd_tensor_view *t;
    int rc;
    m->w.layers = calloc((size_t)c->n_layers, sizeof *m->w.layers);
    m->lin_names = calloc((size_t)c->n_layers * MD_N_LINEAR, sizeof *m->lin_names);
    if (!m->w.layers || !m->lin_names)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    if ((rc = md_get(m, "model.embed_tokens.weight", MD_FLOAT_DT, 2, c->vocab, c->hidden, &t, d)))
        return rc;
    m->w.embed = (sd_vec){t->data, (int64_t)c->vocab * c->hidden, t->dtype};
    if ((rc = md_vec(m, "model.norm.weight", c->hidden, &m->w.final_norm, d)))
        return rc;
    for (int i = 0; i < c->n_layers; i++)
        if ((rc = md_layer(m, i, d)))
            return rc;
    if (!c->tie_embeddings) { /* tied: t is still the embedding */
        if (!sd_ckpt_find(m->ck, "lm_head.weight"))
            return sd_diag_set(d, SD_EFORMAT,
                               "%s: 'lm_head.weight' is absent and tie_word_embeddings is false",
                               sd_ckpt_dir(m->ck));
        if ((rc = md_get(m, "lm_head.weight", MD_FLOAT_DT, 2, c->vocab, c->hidden, &t, d)))
            return rc;
    }
    m->w.lm_head = (sd_linear){.kind = SD_LINEAR_DENSE,
                               .rows = c->vocab,
                               .cols = c->hidden,
                               .dtype = t->dtype,
                               .w = t->data,
                               .name = "lm_head"};
    return 0;
}

/* "dense", one pattern for all linears, or "mixed". */
static void md_summarise(sd_model *m)
{
    const sd_model_config *c = sd_ckpt_config(m->ck);
    int first = 1, mixed = 0, n = 0, mm = 0;
    sd_linear_kind kind = SD_LINEAR_DENSE;
    for (int i = 0; i < c->n_layers; i++) {
        const sd_layer_weights *L = &m->w.layers[i];
        const sd_linear *ls[MD_N_LINEAR] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
        for (int j = 0; j < MD_N_LINEAR; j++) {
            const sd_linear *l = ls[j];
            if (first) {
                kind = l->kind, n = l->nm_n, mm = l->nm_m, first = 0;
            } else if (l->kind != kind || l->nm_n != n || l->nm_m != mm) {
                mixed = 1;
            }
        }
    }
    if (mixed)
        snprintf(m->sparsity, sizeof m->sparsity, "mixed");
    else if (kind == SD_LINEAR_DENSE)
        snprintf(m->sparsity, sizeof m->sparsity, "dense");
    else if (mm == 0)
        snprintf(m->sparsity, sizeof m->sparsity, "unstructured");
    else
        snprintf(m->sparsity, sizeof m->sparsity, "%d:%d", n, mm);
}

/* ---- tokenizer, chat template, generation config -------------------------------------- */

static int md_chat_template(sd_model *m, const char *dir, sd_diag *d)
{
    char *p = sd__path_join(dir, "chat_template.jinja");
    size_t len;
    int rc = 0;
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    /* transformers 5 saves the template beside tokenizer_config.json and prefers it. */
    if (access(p, F_OK) == 0) {
        rc = sd__file_read(p, MD_MAX_JSON, &m->chat_template, &len, d);
        free(p);
        return rc;
    }
    free(p);
    json_t *root;
    /* as reals: Llama 3's model_max_length (1e30 as an integer) overflows jansson's json_int_t;
     * only strings are read here */
    if ((rc = md_json_file(dir, "tokenizer_config.json", JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL,
                           &root, d)) ||
        !root)
        return rc;
    json_t *ct = json_object_get(root, "chat_template");
    const char *s = NULL;
    if (json_is_string(ct)) {
        s = json_string_value(ct);
    } else if (json_is_array(ct)) { /* [{"name": ..., "template": ...}]: take "default" */
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e)
        {
            const char *nm = json_string_value(json_object_get(e, "name"));
            const char *tp = json_string_value(json_object_get(e, "template"));
            if (tp && (!s || (nm && strcmp(nm, "default") == 0)))
                s = tp;
        }
    } else if (ct && !json_is_null(ct)) {
        rc = sd_diag_set(d, SD_EFORMAT, "%s/tokenizer_config.json: \"chat_template\" is not a string", dir);
    }
    if (s && !(m->chat_template = strdup(s)))
        rc = sd_diag_set(d, SD_ENOMEM, "out of memory");
    json_decref(root);
    return rc;
}

static void md_add_eos(sd_model *m, int32_t id)
{
    for (int i = 0; i < m->n_eos; i++)
        if (m->eos[i] == id)
            return;
    if (id >= 0 && m->n_eos < SD_MAX_EOS + 1)
        m->eos[m->n_eos++] = id;
}

static double md_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : -1.0;
}

/* generation_config.json: eos ids (HF lets them override config.json's) and sampling defaults. */
static int md_gen_config(sd_model *m, const char *dir, sd_diag *d)
{
    const sd_model_config *c = sd_ckpt_config(m->ck);
    json_t *root;
    int rc = md_json_file(dir, "generation_config.json", JSON_REJECT_DUPLICATES, &root, d);
    m->gen = (sd_gen_defaults){-1, -1, -1, -1, -1, -1};
    if (rc)
        return rc;
    json_t *e = root ? json_object_get(root, "eos_token_id") : NULL;
    if (json_is_integer(e) && (json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX)) {
        json_decref(root);
        return sd_diag_set(d, SD_EFORMAT, "%s/generation_config.json: eos_token_id is not a token id", dir);
    } else if (json_is_integer(e)) {
        md_add_eos(m, (int32_t)json_integer_value(e));
    } else if (json_is_array(e)) {
        size_t i;
        json_t *v;
        json_array_foreach(e, i, v)
        {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
                json_decref(root);
                return sd_diag_set(d, SD_EFORMAT,
                                   "%s/generation_config.json: eos_token_id[%zu] is not a token id", dir, i);
            }
            md_add_eos(m, (int32_t)json_integer_value(v));
        }
    } else {
        for (int i = 0; i < c->n_eos; i++)
            md_add_eos(m, c->eos_ids[i]);
    }
    if (root) {
        m->gen.temperature = md_num(root, "temperature");
        m->gen.top_p = md_num(root, "top_p");
        m->gen.min_p = md_num(root, "min_p");
        m->gen.repetition_penalty = md_num(root, "repetition_penalty");
        json_t *k = json_object_get(root, "top_k");
        m->gen.top_k = json_is_integer(k) && json_integer_value(k) >= 0 && json_integer_value(k) <= INT32_MAX
                           ? (int32_t)json_integer_value(k)
                           : -1;
        json_t *ds = json_object_get(root, "do_sample");
        m->gen.do_sample = json_is_boolean(ds) ? json_is_true(ds) : -1;
    }
    json_decref(root);
    return 0;
}

static int md_tokenizer(sd_model *m, const char *dir, sd_diag *d)
{
    char *p = sd__path_join(dir, "tokenizer.json");
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    int present = access(p, F_OK) == 0, rc = 0;
    free(p);
    if (present && !(rc = sd_tok_load(&m->tok, dir, d)))
        md_add_eos(m, sd_tok_eos_id(m->tok));
    return rc;
}

/* Last path component, ignoring trailing slashes; "." and similar resolve through realpath. */
static char *md_name(const char *dir)
{
    char buf[PATH_MAX];
    const char *src = realpath(dir, buf) ? buf : dir;
    size_t n = strlen(src);
    while (n > 1 && src[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && src[b - 1] != '/')
        b--;
    return strndup(src + b, n - b);
}

int sd_model_open(sd_model **ret, const char *dir, sd_diag *d)
{
    sd_model *m = calloc(1, sizeof *m);
    if (!m)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    int rc;
    if ((rc = sd_ckpt_open(&m->ck, dir, d)) || (rc = md_load_sparsity_json(m, dir, d)) ||
        (rc = md_weights(m, d)) || (rc = md_gen_config(m, dir, d)) || (rc = md_tokenizer(m, dir, d)) ||
        (rc = md_chat_template(m, dir, d)))
        goto fail;
    if (!(m->name = md_name(dir))) {
        rc = sd_diag_set(d, SD_ENOMEM, "out of memory");
        goto fail;
    }
    md_summarise(m);
    *ret = m;
    return 0;
fail:
    sd_model_free(m);
    return rc;
}

void sd_model_free(sd_model *m)
{
    if (!m)
        return;
    sd_tok_free(m->tok);
    json_decref(m->sparsity_tensors);
    free(m->w.layers);
    free(m->lin_names);
    free(m->chat_template);
    free(m->name);
    sd_ckpt_free(m->ck);
    free(m);
}

const sd_model_config *sd_model_cfg(const sd_model *m)
{
    return sd_ckpt_config(m->ck);
}

const sd_model_weights *sd_model_w(const sd_model *m)
{
    return &m->w;
}

const sd_ckpt *sd_model_ckpt(const sd_model *m)
{
    return m->ck;
}

const sd_tokenizer *sd_model_tokenizer(const sd_model *m)
{
    return m->tok;
}

const char *sd_model_chat_template(const sd_model *m)
{
    return m->chat_template;
}

const char *sd_model_sparsity(const sd_model *m)
{
    return m->sparsity;
}

const char *sd_model_name(const sd_model *m)
{
    return m->name;
}

int sd_model_eos_ids(const sd_model *m, const int32_t **ret_ids)
{
    *ret_ids = m->eos;
    return m->n_eos;
}

const sd_gen_defaults *sd_model_gen_defaults(const sd_model *m)
{
    return &m->gen;
}
