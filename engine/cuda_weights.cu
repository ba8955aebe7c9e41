/* cuda_weights: puts a model's weights on the GPU once — dense linears as bf16, 50% N:M
 * bitmask linears as values + masks (no dense copy), q/k/v and gate/up fused by row
 * concatenation — or generates random weights of a config's shapes directly on the GPU. */
#include "engine/cuda_impl.cuh"

#include <stdlib.h>
#include <string.h>

#include "engine/dtype.h"
#include "engine/model.h"
#include "engine/shard.h"

/* ---- device allocation that keeps the byte count ---- */

static int dev_alloc(void **p, size_t bytes, sd_cu_weights *w, const char *what, sd_diag *d)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        return sd_diag_set(d, SD_ECUDA, "cuda: allocating %zu bytes for %s: %s", bytes, what,
                           cudaGetErrorString(e));
    }
    w->bytes += bytes;
    return 0;
}

static int h2d(void *dst, const void *src, size_t bytes, sd_diag *d)
{
    SD_CU(d, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

/* ---- host-side conversions ---- */

/* n elements of a float dtype -> bf16. */
static int to_bf16(sd_dtype dt, const void *src, uint16_t *dst, size_t n)
{
    if (dt == SD_DT_BF16) {
        memcpy(dst, src, n * 2);
        return 0;
    }
    const size_t CH = 4096;
    float buf[4096];
    size_t es = sd_dtype_size(dt);
    for (size_t i = 0; i < n; i += CH) {
        size_t k = n - i < CH ? n - i : CH;
        if (sd_dtype_to_f32(dt, (const char *)src + i * es, buf, k))
            return SD_EINVAL;
        for (size_t j = 0; j < k; j++)
            dst[i + j] = sd_f32_to_bf16(buf[j]);
    }
    return 0;
}

/* A bitmask linear (any number of bits per word) -> dense bf16 [rows, cols]. */
static void expand_host(const sd_linear *l, uint16_t *dst)
{
    int64_t wpr = l->cols / 32;
    for (int64_t r = 0; r < l->rows; r++) {
        const uint16_t *v = l->values + r * (l->cols / 2);
        const uint32_t *mk = l->mask + r * wpr;
        uint16_t *o = dst + r * l->cols;
        int64_t k = 0;
        for (int64_t c = 0; c < l->cols; c++)
            o[c] = (mk[c / 32] >> (c % 32)) & 1u ? v[k++] : 0;
    }
}

/* True when every mask word holds exactly 16 bits: the fixed-step layout the kernels need. */
static int is_fixed_nm(const sd_linear *l)
{
    if (l->kind != SD_LINEAR_BITMASK || l->nm_m <= 0 || l->cols % 32)
        return 0;
    size_t n = (size_t)l->rows * (size_t)(l->cols / 32);
    for (size_t i = 0; i < n; i++)
        if (__builtin_popcount(l->mask[i]) != 16)
            return 0;
    return 1;
}

/* ---- linears ---- */

/* Uploads the row concatenation of parts[0..n) as one linear. All fixed-step bitmask: values
 * and masks concatenated; otherwise dense bf16 (unstructured or mixed groups are expanded
 * on the host: only the fixed-step layout has a sparse kernel). */
static int upload_group(sd_cu_linear *out, const sd_linear *const *parts, int n, sd_cu_weights *w, sd_diag *d)
{
    int64_t rows = 0, cols = parts[0]->cols;
    int all_nm = 1, any_bias = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i]->cols != cols)
            return sd_diag_set(d, SD_EFORMAT, "cuda: %s has %lld columns, %s has %lld", parts[i]->name,
                               (long long)parts[i]->cols, parts[0]->name, (long long)cols);
        rows += parts[i]->rows;
        all_nm &= is_fixed_nm(parts[i]);
        any_bias |= parts[i]->bias != NULL;
    }
    memset(out, 0, sizeof *out);
    out->rows = rows;
    out->cols = cols;
    out->owns = 1;
    if (all_nm) {
        out->bitmask = 1;
        out->nm_n = parts[0]->nm_n;
        out->nm_m = parts[0]->nm_m;
        SD_TRY(dev_alloc((void **)&out->values, (size_t)rows * cols, w, parts[0]->name, d));
        SD_TRY(dev_alloc((void **)&out->mask, (size_t)rows * cols / 8, w, parts[0]->name, d));
        size_t vo = 0, mo = 0;
        for (int i = 0; i < n; i++) {
            size_t vb = (size_t)parts[i]->rows * cols, mb = (size_t)parts[i]->rows * cols / 8;
            SD_TRY(h2d((char *)out->values + vo, parts[i]->values, vb, d));
            SD_TRY(h2d((char *)out->mask + mo, parts[i]->mask, mb, d));
            vo += vb;
            mo += mb;
        }
    } else {
        SD_TRY(dev_alloc((void **)&out->w, (size_t)rows * cols * 2, w, parts[0]->name, d));
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            const sd_linear *l = parts[i];
            size_t ne = (size_t)l->rows * cols;
            int rc = 0;
            if (l->kind == SD_LINEAR_DENSE && l->dtype == SD_DT_BF16) {
                rc = h2d(out->w + off, l->w, ne * 2, d);
            } else {
                uint16_t *tmp = (uint16_t *)malloc(ne * 2);
                if (!tmp)
                    return sd_diag_set(d, SD_ENOMEM, "cuda: staging %s", l->name);
                if (l->kind == SD_LINEAR_BITMASK)
                    expand_host(l, tmp);
                else if (to_bf16(l->dtype, l->w, tmp, ne))
                    rc = sd_diag_set(d, SD_ENOTSUP, "cuda: %s: dtype %s", l->name, sd_dtype_name(l->dtype));
                if (!rc)
                    rc = h2d(out->w + off, tmp, ne * 2, d);
                free(tmp);
            }
            if (rc)
                return rc;
            off += ne;
        }
    }
    if (any_bias) {
        float *hb = (float *)calloc((size_t)rows, sizeof(float));
        if (!hb)
            return sd_diag_set(d, SD_ENOMEM, "cuda: bias of %s", parts[0]->name);
        int64_t ro = 0;
        int rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            if (parts[i]->bias &&
                sd_dtype_to_f32(parts[i]->bias_dtype, parts[i]->bias, hb + ro, parts[i]->rows))
                rc = sd_diag_set(d, SD_ENOTSUP, "cuda: bias of %s: dtype %s", parts[i]->name,
                                 sd_dtype_name(parts[i]->bias_dtype));
            ro += parts[i]->rows;
        }
        if (!rc)
            rc = dev_alloc((void **)&out->bias, (size_t)rows * 4, w, parts[0]->name, d);
        if (!rc)
            rc = h2d(out->bias, hb, (size_t)rows * 4, d);
        free(hb);
        return rc;
    }
    return 0;
}

static int upload_vec(float **out, const sd_vec *v, sd_cu_weights *w, const char *what, sd_diag *d)
{
    *out = NULL;
    if (!v->data)
        return 0;
    float *h = (float *)malloc((size_t)v->n * 4);
    if (!h)
        return sd_diag_set(d, SD_ENOMEM, "cuda: staging %s", what);
    int rc = sd_dtype_to_f32(v->dtype, v->data, h, (size_t)v->n)
                 ? sd_diag_set(d, SD_ENOTSUP, "cuda: %s: dtype %s", what, sd_dtype_name(v->dtype))
                 : 0;
    if (!rc)
        rc = dev_alloc((void **)out, (size_t)v->n * 4, w, what, d);
    if (!rc)
        rc = h2d(*out, h, (size_t)v->n * 4, d);
    free(h);
    return rc;
}

static int upload_embed(sd_cu_weights *w, const sd_vec *e, sd_diag *d)
{
    size_t n = (size_t)e->n;
    SD_TRY(dev_alloc((void **)&w->embed, n * 2, w, "embedding", d));
    if (e->dtype == SD_DT_BF16)
        return h2d(w->embed, e->data, n * 2, d);
    uint16_t *tmp = (uint16_t *)malloc(n * 2);
    if (!tmp)
        return sd_diag_set(d, SD_ENOMEM, "cuda: staging the embedding");
    int rc = to_bf16(e->dtype, e->data, tmp, n)
                 ? sd_diag_set(d, SD_ENOTSUP, "cuda: embedding dtype %s", sd_dtype_name(e->dtype))
                 : h2d(w->embed, tmp, n * 2, d);
    free(tmp);
    return rc;
}

/* A layer's norms are replicated on every rank, whatever the sharding. */
static int upload_layer_norms(sd_cu_layer *cl, const sd_layer_weights *lw, sd_cu_weights *w, sd_diag *d)
{
    SD_TRY(upload_vec(&cl->attn_norm, &lw->attn_norm, w, "input_layernorm", d));
    SD_TRY(upload_vec(&cl->mlp_norm, &lw->mlp_norm, w, "post_attention_layernorm", d));
    SD_TRY(upload_vec(&cl->q_norm, &lw->q_norm, w, "q_norm", d));
    SD_TRY(upload_vec(&cl->k_norm, &lw->k_norm, w, "k_norm", d));
    return 0;
}

/* Zeroes w and gives it a table of cfg->n_layers empty layers: how every upload starts. */
static int weights_begin(sd_cu_weights *w, const sd_model_config *cfg, sd_diag *d)
{
    memset(w, 0, sizeof *w);
    w->layers = (sd_cu_layer *)calloc((size_t)cfg->n_layers, sizeof(sd_cu_layer));
    if (!w->layers)
        return sd_diag_set(d, SD_ENOMEM, "cuda: layer table");
    w->n_layers = cfg->n_layers;
    return 0;
}

/* Whether the model's lm_head is its embedding (tie_word_embeddings): then it is not uploaded
 * a second time. */
static int lm_head_tied(const sd_model_weights *mw)
{
    const sd_linear *lm = &mw->lm_head;
    return lm->kind == SD_LINEAR_DENSE && lm->w == mw->embed.data && lm->dtype == mw->embed.dtype;
}

int sd__cu_weights_upload(sd_cu_weights *w, const sd_model *m, sd_diag *d)
{
    const sd_model_config *cfg = sd_model_cfg(m);
    const sd_model_weights *mw = sd_model_w(m);
    SD_TRY(weights_begin(w, cfg, d));
    SD_TRY(upload_embed(w, &mw->embed, d));
    SD_TRY(upload_vec(&w->final_norm, &mw->final_norm, w, "model.norm", d));
    const sd_linear *lm = &mw->lm_head;
    if (lm_head_tied(mw)) {
        /* tied: the embedding is already on the device as bf16 */
        memset(&w->lm_head, 0, sizeof w->lm_head);
        w->lm_head.rows = lm->rows;
        w->lm_head.cols = lm->cols;
        w->lm_head.w = w->embed;
    } else {
        SD_TRY(upload_group(&w->lm_head, &lm, 1, w, d));
    }
    for (int i = 0; i < cfg->n_layers; i++) {
        const sd_layer_weights *lw = &mw->layers[i];
        sd_cu_layer *cl = &w->layers[i];
        const sd_linear *qkv[3] = {&lw->q, &lw->k, &lw->v}, *gu[2] = {&lw->gate, &lw->up};
        const sd_linear *o = &lw->o, *down = &lw->down;
        SD_TRY(upload_layer_norms(cl, lw, w, d));
        SD_TRY(upload_group(&cl->qkv, qkv, 3, w, d));
        SD_TRY(upload_group(&cl->o, &o, 1, w, d));
        SD_TRY(upload_group(&cl->gate_up, gu, 2, w, d));
        SD_TRY(upload_group(&cl->down, &down, 1, w, d));
    }
    return 0;
}

/* ---- one tensor-parallel rank's shard (engine/shard.h) ---- */

/* Slices src for the plan's rank. A column slice of an unstructured bitmask (rows keep varying
 * counts) is expanded to dense bf16 here, as upload_group does with any unstructured linear. */
static int shard_part(sd_shard_linear *s, const sd_shard_plan *p, sd_shard_role role, const sd_linear *src,
                      sd_diag *d)
{
    SD_TRY(sd_shard_linear_init(s, p, role, src, d));
    if (s->l.kind != SD_LINEAR_BITMASK || s->values_stride == s->l.cols / 2)
        return 0;
    uint16_t *dense = (uint16_t *)malloc((size_t)(s->l.rows * s->l.cols) * 2 + 2);
    int rc = dense ? sd_shard_linear_expand(s, dense, d) : sd_diag_set(d, SD_ENOMEM, "cuda: %s", src->name);
    if (rc) {
        free(dense);
        sd_shard_linear_free(s);
        return rc;
    }
    free(s->v_own);
    free(s->m_own);
    s->v_own = NULL;
    s->m_own = NULL;
    s->w_own = dense;
    s->l.kind = SD_LINEAR_DENSE;
    s->l.dtype = SD_DT_BF16;
    s->l.w = dense;
    s->l.values = NULL;
    s->l.mask = NULL;
    return 0;
}

/* Slices n linears in their roles and uploads them fused (row concatenation). */
static int upload_shard_group(sd_cu_linear *out, const sd_linear *const *src, const sd_shard_role *roles,
                              int n, const sd_shard_plan *p, sd_cu_weights *w, sd_diag *d)
{
    sd_shard_linear s[3];
    const sd_linear *views[3];
    int rc = 0, k = 0;
    for (; k < n && !rc; k++) {
        rc = shard_part(&s[k], p, roles[k], src[k], d);
        views[k] = &s[k].l;
    }
    if (rc)
        k--; /* s[k-1] failed and is already released */
    else
        rc = upload_group(out, views, n, w, d);
    for (int i = 0; i < k; i++)
        sd_shard_linear_free(&s[i]);
    return rc;
}

/* This rank's vocabulary rows of the embedding, [vocab_pad, hidden] with zero rows past the
 * vocabulary: the lookup (engine/tp_embed.cu) reads the rows the rank owns and an all-reduce
 * sums the ranks' rows; a tied lm_head is the same slice. */
static int upload_embed_shard(sd_cu_weights *w, const sd_vec *e, const sd_shard_plan *p, int64_t hidden,
                              sd_diag *d)
{
    void *rows = NULL;
    SD_TRY(sd_shard_embed(&rows, p, e, (int32_t)hidden, d));
    size_t n = (size_t)p->vocab_pad * hidden;
    uint16_t *tmp = (uint16_t *)malloc(n * 2 + 2);
    int rc = !tmp ? sd_diag_set(d, SD_ENOMEM, "cuda: staging the embedding")
             : to_bf16(e->dtype, rows, tmp, n)
                 ? sd_diag_set(d, SD_ENOTSUP, "cuda: embedding dtype %s", sd_dtype_name(e->dtype))
                 : dev_alloc((void **)&w->embed, n * 2, w, "embedding", d);
    if (!rc)
        rc = h2d(w->embed, tmp, n * 2, d);
    free(tmp);
    free(rows);
    return rc;
}

int sd__cu_weights_upload_shard(sd_cu_weights *w, const sd_model *m, const sd_shard_plan *p, sd_diag *d)
{
    const sd_model_config *cfg = sd_model_cfg(m);
    const sd_model_weights *mw = sd_model_w(m);
    SD_TRY(weights_begin(w, cfg, d));
    SD_TRY(upload_embed_shard(w, &mw->embed, p, cfg->hidden, d));
    SD_TRY(upload_vec(&w->final_norm, &mw->final_norm, w, "model.norm", d));
    const sd_linear *lm = &mw->lm_head;
    static const sd_shard_role r_lm[1] = {SD_SHARD_LM_HEAD}, r_qkv[3] = {SD_SHARD_Q, SD_SHARD_K, SD_SHARD_V},
                               r_o[1] = {SD_SHARD_O}, r_gu[2] = {SD_SHARD_GATE, SD_SHARD_UP},
                               r_down[1] = {SD_SHARD_DOWN};
    if (lm_head_tied(mw)) {
        memset(&w->lm_head, 0, sizeof w->lm_head); /* tied: this rank's rows of the embedding */
        w->lm_head.rows = p->vocab_pad;
        w->lm_head.cols = lm->cols;
        w->lm_head.w = w->embed;
    } else {
        SD_TRY(upload_shard_group(&w->lm_head, &lm, r_lm, 1, p, w, d));
    }
    for (int i = 0; i < cfg->n_layers; i++) {
        const sd_layer_weights *lw = &mw->layers[i];
        sd_cu_layer *cl = &w->layers[i];
        const sd_linear *qkv[3] = {&lw->q, &lw->k, &lw->v}, *gu[2] = {&lw->gate, &lw->up};
        const sd_linear *o = &lw->o, *down = &lw->down;
        SD_TRY(upload_layer_norms(cl, lw, w, d));
        SD_TRY(upload_shard_group(&cl->qkv, qkv, r_qkv, 3, p, w, d));
        SD_TRY(upload_shard_group(&cl->o, &o, r_o, 1, p, w, d));
        SD_TRY(upload_shard_group(&cl->gate_up, gu, r_gu, 2, p, w, d));
        SD_TRY(upload_shard_group(&cl->down, &down, r_down, 1, p, w, d));
    }
    return 0;
}

/* ---- synthetic weights ---- */

static uint64_t mix(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

static int synth_linear(sd_cu_linear *l, int64_t rows, int64_t cols, int pn, int pm, uint64_t seed,
                        sd_cu_weights *w, cudaStream_t st, sd_diag *d)
{
    memset(l, 0, sizeof *l);
    l->rows = rows;
    l->cols = cols;
    l->owns = 1;
    /* unit-variance outputs for unit-variance inputs: var(U(-a, a)) = a^2/3 over the kept inputs */
    if (!pm) {
        SD_TRY(dev_alloc((void **)&l->w, (size_t)rows * cols * 2, w, "synthetic linear", d));
        return sd__cu_fill_uniform_bf16(l->w, (size_t)rows * cols, sqrtf(3.f / (float)cols), seed, st, d);
    }
    if (cols % 32)
        return sd_diag_set(d, SD_EINVAL, "synthetic %d:%d: %lld columns is not a multiple of 32", pn, pm,
                           (long long)cols);
    l->bitmask = 1;
    l->nm_n = pn;
    l->nm_m = pm;
    SD_TRY(dev_alloc((void **)&l->values, (size_t)rows * cols, w, "synthetic values", d));
    SD_TRY(dev_alloc((void **)&l->mask, (size_t)rows * cols / 8, w, "synthetic masks", d));
    SD_TRY(
        sd__cu_fill_uniform_bf16(l->values, (size_t)rows * cols / 2, sqrtf(6.f / (float)cols), seed, st, d));
    return sd__cu_fill_nm_mask(l->mask, (size_t)rows * cols / 32, pn, pm, seed ^ 0x5555, st, d);
}

static int synth_vec(float **p, int64_t n, float v, sd_cu_weights *w, cudaStream_t st, sd_diag *d)
{
    SD_TRY(dev_alloc((void **)p, (size_t)n * 4, w, "synthetic vector", d));
    return sd__cu_fill_f32(*p, (size_t)n, v, st, d);
}

int sd__cu_weights_synthetic(sd_cu_weights *w, const sd_model_config *cfg, int pn, int pm, uint64_t seed,
                             cudaStream_t st, sd_diag *d)
{
    int64_t H = cfg->hidden, hd = cfg->head_dim, I = cfg->intermediate, V = cfg->vocab;
    int64_t qkv_rows = (int64_t)(cfg->n_heads + 2 * cfg->n_kv_heads) * hd;
    SD_TRY(weights_begin(w, cfg, d));
    SD_TRY(dev_alloc((void **)&w->embed, (size_t)V * H * 2, w, "synthetic embedding", d));
    SD_TRY(sd__cu_fill_uniform_bf16(w->embed, (size_t)V * H, 1.f, mix(seed, 1, 0), st, d));
    SD_TRY(synth_vec(&w->final_norm, H, 1.f, w, st, d));
    if (cfg->tie_embeddings) {
        w->lm_head.rows = V;
        w->lm_head.cols = H;
        w->lm_head.w = w->embed;
    } else {
        SD_TRY(synth_linear(&w->lm_head, V, H, 0, 0, mix(seed, 2, 0), w, st, d));
    }
    for (int i = 0; i < cfg->n_layers; i++) {
        sd_cu_layer *l = &w->layers[i];
        SD_TRY(synth_vec(&l->attn_norm, H, 1.f, w, st, d));
        SD_TRY(synth_vec(&l->mlp_norm, H, 1.f, w, st, d));
        if (cfg->qk_norm) {
            SD_TRY(synth_vec(&l->q_norm, hd, 1.f, w, st, d));
            SD_TRY(synth_vec(&l->k_norm, hd, 1.f, w, st, d));
        }
        SD_TRY(synth_linear(&l->qkv, qkv_rows, H, pn, pm, mix(seed, 3, i), w, st, d));
        if (cfg->qkv_bias)
            SD_TRY(synth_vec(&l->qkv.bias, qkv_rows, 0.f, w, st, d));
        SD_TRY(synth_linear(&l->o, H, cfg->n_heads * hd, pn, pm, mix(seed, 4, i), w, st, d));
        SD_TRY(synth_linear(&l->gate_up, 2 * I, H, pn, pm, mix(seed, 5, i), w, st, d));
        SD_TRY(synth_linear(&l->down, H, I, pn, pm, mix(seed, 6, i), w, st, d));
    }
    SD_CU(d, cudaStreamSynchronize(st));
    return 0;
}

/* ---- release ---- */

static void linear_free(sd_cu_linear *l)
{
    if (l->owns) {
        cudaFree(l->w);
        cudaFree(l->values);
        cudaFree(l->mask);
    }
    cudaFree(l->bias);
    memset(l, 0, sizeof *l);
}

void sd__cu_weights_free(sd_cu_weights *w)
{
    if (!w)
        return;
    for (int i = 0; w->layers && i < w->n_layers; i++) {
        sd_cu_layer *l = &w->layers[i];
        cudaFree(l->attn_norm);
        cudaFree(l->mlp_norm);
        cudaFree(l->q_norm);
        cudaFree(l->k_norm);
        linear_free(&l->qkv);
        linear_free(&l->o);
        linear_free(&l->gate_up);
        linear_free(&l->down);
    }
    free(w->layers);
    linear_free(&w->lm_head);
    cudaFree(w->embed);
    cudaFree(w->final_norm);
    memset(w, 0, sizeof *w);
}
