/* ckpt_writer: test-only helpers that write safetensors files and whole model directories
 * (config.json, single or sharded weights, dense or bitmask) into temporary folders. */
#ifndef SD_TEST_CKPT_WRITER_H
#define SD_TEST_CKPT_WRITER_H

#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/dtype.h"

typedef struct tw_tensor {
    char name[192];
    const char *dtype; /* "BF16", "U32", ... */
    int ndim;
    int64_t shape[8];
    unsigned char *data; /* malloc'd, nbytes */
    size_t nbytes;
} tw_tensor;

/* ---- small utilities ------------------------------------------------------------------ */

static inline uint64_t tw_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? h : 1;
}

static inline uint64_t tw_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline int tw_mkdtemp(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/sd_test_XXXXXX");
    return mkdtemp(buf) ? 0 : -1;
}

/* Removes the files of a flat directory and the directory. */
static inline void tw_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline int tw_write(const char *dir, const char *name, const void *data, size_t len)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

static inline int tw_write_str(const char *dir, const char *name, const char *s)
{
    return tw_write(dir, name, s, strlen(s));
}

/* Whole file into a malloc'd buffer (NUL-terminated); NULL on failure. */
static inline unsigned char *tw_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        *len = (size_t)n;
    }
    return b;
}

/* ---- tensors -------------------------------------------------------------------------- */

/* A tensor of `dtype` and shape filled with bytes derived from its name (see tw_expect). */
static inline void tw_tensor_init(tw_tensor *t, const char *name, const char *dtype, int ndim,
                                  const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    size_t n = sd_dtype_size(sd_dtype_parse(dtype, strlen(dtype)));
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        n *= (size_t)shape[i];
    }
    t->nbytes = n;
    t->data = malloc(n ? n : 1);
    uint64_t s = tw_hash(name);
    for (size_t i = 0; i < n; i++) {
        t->data[i] = (unsigned char)tw_rng(&s);
        /* keep floats finite: clear the top exponent bit of each 2-byte half's high byte */
        if (i % 2 == 1)
            t->data[i] &= 0xbf;
    }
}

static inline void tw_tensor_free(tw_tensor *t)
{
    free(t->data);
    t->data = NULL;
}

/* Header JSON text for tensors laid out back to back, with optional metadata pairs
 * (meta: NULL-terminated key, value list). Caller frees. */
static inline char *tw_header(const tw_tensor *ts, size_t n, const char *const *meta)
{
    json_t *root = json_object();
    if (meta) {
        json_t *m = json_object();
        for (size_t i = 0; meta[i]; i += 2)
            json_object_set_new(m, meta[i], json_string(meta[i + 1]));
        json_object_set_new(root, "__metadata__", m);
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object(), *sh = json_array();
        for (int k = 0; k < ts[i].ndim; k++)
            json_array_append_new(sh, json_integer(ts[i].shape[k]));
        json_object_set_new(e, "dtype", json_string(ts[i].dtype));
        json_object_set_new(e, "shape", sh);
        json_object_set_new(e, "data_offsets",
                            json_pack("[I, I]", (json_int_t)off, (json_int_t)(off + ts[i].nbytes)));
        json_object_set_new(root, ts[i].name, e);
        off += ts[i].nbytes;
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    return s;
}

/* Writes a raw safetensors file: 8-byte length, header text padded with spaces to `align`, data. */
static inline int tw_write_raw(const char *path, const char *header, size_t align, const void *data,
                               size_t len)
{
    size_t hl = strlen(header), pad = align ? (align - (8 + hl) % align) % align : 0;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    uint64_t n = hl + pad;
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(n >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(header, 1, hl, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    if (len)
        fwrite(data, 1, len, f);
    return fclose(f);
}

/* Writes tensors (back to back) as a safetensors file at dir/name. */
static inline int tw_write_st(const char *dir, const char *name, const tw_tensor *ts, size_t n,
                              const char *const *meta)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *h = tw_header(ts, n, meta);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ts[i].nbytes;
    unsigned char *data = malloc(total + 1), *q = data;
    for (size_t i = 0; i < n; i++) {
        memcpy(q, ts[i].data, ts[i].nbytes);
        q += ts[i].nbytes;
    }
    int rc = tw_write_raw(p, h, 8, data, total);
    free(data);
    free(h);
    return rc;
}

/* ---- whole model directories ------------------------------------------------------------ */

typedef struct tw_spec {
    const char *arch; /* "LlamaForCausalLM" ... */
    int hidden, layers, heads, kv_heads, head_dim, inter, vocab;
    int tie, bias, qk_norm;
    const char *dtype;   /* of dense weights: "BF16" (default), "F16", "F32" */
    const char *pattern; /* NULL: dense linears; "2:4", "4:8", "unstructured": bitmask */
    int pattern_in_json; /* 1: sparsity.json, 0: safetensors __metadata__ */
    int n_shards;        /* 0: model.safetensors; k: k shards + index */
    const char *extra;   /* extra config.json members, e.g. "\"rope_theta\": 5e5" */
    int skip_lm_head;    /* omit lm_head.weight even when untied */
} tw_spec;

static inline tw_spec tw_spec_default(void)
{
    tw_spec s = {"LlamaForCausalLM", 64, 2, 4, 2, 16, 96, 100, 1, 0, 0, "BF16", NULL, 0, 0, NULL, 0};
    return s;
}

/* A mask row: groups of m bits with exactly n set (m == 0: cols/2 bits set anywhere). */
static inline void tw_mask_row(uint32_t *w, int64_t cols, int n, int m, uint64_t *s)
{
    int64_t words = cols / 32;
    memset(w, 0, (size_t)words * 4);
    if (m == 0) {
        for (int64_t k = 0; k < words * 16;) {
            int64_t c = (int64_t)(tw_rng(s) % (uint64_t)(words * 32));
            if (!(w[c / 32] >> (c % 32) & 1u)) {
                w[c / 32] |= 1u << (c % 32);
                k++;
            }
        }
        return;
    }
    for (int64_t g = 0; g + m <= words * 32; g += m) /* cols % 32 != 0: tail left out */
        for (int k = 0; k < n;) {
            int64_t c = g + (int64_t)(tw_rng(s) % (uint64_t)m);
            if (!(w[c / 32] >> (c % 32) & 1u)) {
                w[c / 32] |= 1u << (c % 32);
                k++;
            }
        }
}

/* Adds the tensors of one linear to ts (dense X.weight, or X.nm_values + X.nm_mask). */
static inline size_t tw_add_linear(tw_tensor *ts, size_t k, const tw_spec *sp, const char *name, int64_t rows,
                                   int64_t cols, int bias)
{
    char nm[176];
    if (!sp->pattern) {
        snprintf(nm, sizeof nm, "%s.weight", name);
        tw_tensor_init(&ts[k++], nm, sp->dtype, 2, (int64_t[]){rows, cols});
    } else {
        int n = 0, m = 0;
        if (strcmp(sp->pattern, "unstructured") != 0)
            sscanf(sp->pattern, "%d:%d", &n, &m);
        snprintf(nm, sizeof nm, "%s.nm_values", name);
        tw_tensor_init(&ts[k++], nm, "BF16", 2, (int64_t[]){rows, cols / 2});
        snprintf(nm, sizeof nm, "%s.nm_mask", name);
        tw_tensor_init(&ts[k], nm, "U32", 2, (int64_t[]){rows, cols / 32});
        uint64_t s = tw_hash(nm);
        for (int64_t r = 0; r < rows; r++)
            tw_mask_row((uint32_t *)ts[k].data + r * (cols / 32), cols, n, m, &s);
        k++;
    }
    if (bias) {
        snprintf(nm, sizeof nm, "%s.bias", name);
        tw_tensor_init(&ts[k++], nm, sp->dtype, 1, (int64_t[]){rows});
    }
    return k;
}

/* Builds every tensor of the spec'd model; returns the count (ts must hold 16*layers+8). */
static inline size_t tw_model_tensors(const tw_spec *sp, tw_tensor *ts)
{
    size_t k = 0;
    int64_t h = sp->hidden, qd = (int64_t)sp->heads * sp->head_dim,
            kvd = (int64_t)sp->kv_heads * sp->head_dim;
    char nm[160];
    tw_tensor_init(&ts[k++], "model.embed_tokens.weight", sp->dtype, 2, (int64_t[]){sp->vocab, h});
    for (int i = 0; i < sp->layers; i++) {
        static const char *norms[] = {"input_layernorm", "post_attention_layernorm"};
        for (int j = 0; j < 2; j++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", i, norms[j]);
            tw_tensor_init(&ts[k++], nm, sp->dtype, 1, (int64_t[]){h});
        }
        if (sp->qk_norm) {
            snprintf(nm, sizeof nm, "model.layers.%d.self_attn.q_norm.weight", i);
            tw_tensor_init(&ts[k++], nm, sp->dtype, 1, (int64_t[]){sp->head_dim});
            snprintf(nm, sizeof nm, "model.layers.%d.self_attn.k_norm.weight", i);
            tw_tensor_init(&ts[k++], nm, sp->dtype, 1, (int64_t[]){sp->head_dim});
        }
        struct {
            const char *sub;
            int64_t rows, cols;
            int bias;
        } lin[] = {{"self_attn.q_proj", qd, h, sp->bias},  {"self_attn.k_proj", kvd, h, sp->bias},
                   {"self_attn.v_proj", kvd, h, sp->bias}, {"self_attn.o_proj", h, qd, 0},
                   {"mlp.gate_proj", sp->inter, h, 0},     {"mlp.up_proj", sp->inter, h, 0},
                   {"mlp.down_proj", h, sp->inter, 0}};
        for (size_t j = 0; j < sizeof lin / sizeof lin[0]; j++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s", i, lin[j].sub);
            k = tw_add_linear(ts, k, sp, nm, lin[j].rows, lin[j].cols, lin[j].bias);
        }
    }
    tw_tensor_init(&ts[k++], "model.norm.weight", sp->dtype, 1, (int64_t[]){h});
    if (!sp->tie && !sp->skip_lm_head)
        tw_tensor_init(&ts[k++], "lm_head.weight", sp->dtype, 2, (int64_t[]){sp->vocab, h});
    return k;
}

static inline void tw_config(const tw_spec *sp, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "{\"architectures\": [\"%s\"], \"hidden_size\": %d, \"num_hidden_layers\": %d, "
             "\"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
             "\"intermediate_size\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 512, "
             "\"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": %s, \"attention_bias\": %s, "
             "\"bos_token_id\": 1, \"eos_token_id\": [2, 3]%s%s}",
             sp->arch, sp->hidden, sp->layers, sp->heads, sp->kv_heads, sp->head_dim, sp->inter, sp->vocab,
             sp->tie ? "true" : "false",
             sp->bias && strcmp(sp->arch, "Qwen2ForCausalLM") != 0 ? "true" : "false", sp->extra ? ", " : "",
             sp->extra ? sp->extra : "");
}

/* Writes config.json, weights (single or sharded) and sparsity info into dir. 0 on success. */
static inline int tw_write_model(const char *dir, const tw_spec *sp)
{
    char cfg[4096];
    tw_config(sp, cfg, sizeof cfg);
    if (tw_write_str(dir, "config.json", cfg))
        return -1;
    size_t cap = 16 * (size_t)sp->layers + 8, n;
    tw_tensor *ts = calloc(cap, sizeof *ts);
    n = tw_model_tensors(sp, ts);
    /* sparsity metadata: one "sparsity.<linear>" entry per nm_mask tensor */
    const char **meta = calloc(2 * n + 3, sizeof *meta);
    char(*keys)[160] = calloc(n, sizeof *keys);
    json_t *sj = json_object(), *sjt = json_object();
    size_t nm = 0;
    for (size_t i = 0; sp->pattern && i < n; i++) {
        char *dot = strstr(ts[i].name, ".nm_mask");
        if (!dot)
            continue;
        snprintf(keys[i], sizeof keys[i], "sparsity.%.*s", (int)(dot - ts[i].name), ts[i].name);
        meta[nm++] = keys[i];
        meta[nm++] = sp->pattern;
        json_object_set_new(sjt, keys[i] + 9, json_string(sp->pattern));
    }
    int rc = 0;
    const char *const *use_meta = sp->pattern && !sp->pattern_in_json ? meta : NULL;
    if (sp->pattern && sp->pattern_in_json) {
        json_object_set_new(sj, "format", json_string("nm-bitmask-v1"));
        json_object_set(sj, "tensors", sjt);
        json_object_set_new(sj, "solver", json_string("test"));
        char *s = json_dumps(sj, JSON_INDENT(1));
        rc |= tw_write_str(dir, "sparsity.json", s);
        free(s);
    }
    if (sp->n_shards == 0) {
        rc |= tw_write_st(dir, "model.safetensors", ts, n, use_meta);
    } else {
        json_t *idx = json_object(), *wm = json_object();
        size_t per = (n + (size_t)sp->n_shards - 1) / (size_t)sp->n_shards;
        for (int s = 0; s < sp->n_shards; s++) {
            char fn[64];
            snprintf(fn, sizeof fn, "model-%05d-of-%05d.safetensors", s + 1, sp->n_shards);
            size_t b = (size_t)s * per, e = b + per > n ? n : b + per;
            if (b < e)
                rc |= tw_write_st(dir, fn, ts + b, e - b, use_meta);
            for (size_t i = b; i < e; i++)
                json_object_set_new(wm, ts[i].name, json_string(fn));
        }
        json_object_set_new(idx, "metadata", json_pack("{s:i}", "total_size", 0));
        json_object_set_new(idx, "weight_map", wm);
        char *s = json_dumps(idx, JSON_INDENT(2));
        rc |= tw_write_str(dir, "model.safetensors.index.json", s);
        free(s);
        json_decref(idx);
    }
    json_decref(sjt);
    json_decref(sj);
    for (size_t i = 0; i < n; i++)
        tw_tensor_free(&ts[i]);
    free(ts);
    free(meta);
    free(keys);
    return rc;
}

/* Re-creates the bytes tw_tensor_init gave `name` (for dense tensors) and compares. */
static inline int tw_expect(const char *name, const void *data, size_t nbytes)
{
    uint64_t s = tw_hash(name);
    const unsigned char *p = data;
    for (size_t i = 0; i < nbytes; i++) {
        unsigned char b = (unsigned char)tw_rng(&s);
        if (i % 2 == 1)
            b &= 0xbf;
        if (p[i] != b)
            return 0;
    }
    return 1;
}

#endif
