/* cpu_backend: the CPU backend — weights converted once to fp32, a full Llama/Qwen/Mistral
 * forward pass over a batch of sequences, and a paged fp32 KV cache. */
#include "engine/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu_capture.h"
#include "engine/cpu_ops.h"
#include "engine/cpu_pool.h"
#include "engine/dtype.h"
#include "engine/model.h"
#include "kernels/nm_spmv_cpu.h"

/* Default KV pool: room for SD_CPU_KV_SEQS sequences at the model's full context, capped at
 * SD_CPU_KV_BUDGET bytes. The pool is calloc'd, so pages that no sequence reaches are never
 * touched (Linux maps them lazily). */
#define SD_CPU_KV_SEQS 64
#define SD_CPU_KV_BUDGET ((size_t)1 << 30)

/* Bitmask linears: batches of up to this many rows (decode steps) run the N:M SpMV on the
 * checkpoint's bf16 values and masks, which reads ~7x fewer bytes than the fp32 expansion;
 * larger batches (prefill) use the blocked matmul on the expansion. The two sum in different
 * orders, so a bitmask model's logits can differ in the last bits between the paths. */
#define SD_CPU_SPMV_MAX_ROWS 8

typedef struct cpu_linear {
    int64_t rows, cols;
    float *w;               /* [rows, cols] fp32 */
    float *bias;            /* [rows] or NULL */
    int owns_w;             /* 0 when w is the embedding (tied lm_head) */
    const uint16_t *values; /* bitmask linears: the checkpoint's bf16 [rows, cols/2], else NULL */
    const uint32_t *mask;   /* bitmask linears: [rows, cols/32] */
} cpu_linear;

typedef struct cpu_layer {
    float *attn_norm, *mlp_norm; /* [hidden] */
    float *q_norm, *k_norm;      /* [head_dim], Qwen3 only, else NULL */
    cpu_linear q, k, v, o;       /* q: [n_heads*head_dim, hidden] ... o: [hidden, n_heads*head_dim] */
    cpu_linear gate, up, down;   /* gate/up: [intermediate, hidden], down: [hidden, intermediate] */
} cpu_layer;

typedef struct cpu_backend {
    sd_backend base;
    sd_model_config cfg;
    const sd_model_weights *src; /* the model's views, for untied embedding rows */
    float *embed;                /* [vocab, hidden] fp32 when tied (shared with lm_head), else NULL */
    float *final_norm;           /* [hidden] */
    cpu_linear lm_head;          /* [vocab, hidden] */
    cpu_layer *layers;           /* [n_layers] */
    float *inv_freq;             /* [head_dim/2] */
    float *kv;                   /* [kv_blocks][n_layers][2][block_size][n_kv_heads][head_dim] */
    sd_cpu_pool *pool;
    int n_threads;
    int32_t max_ctx; /* positions a sequence may reach: the model's max_position_embeddings */
    /* scratch for one forward call, T = max_batch_tokens rows */
    float *x, *xn;    /* [T, hidden] residual stream, normed / projection output */
    float *q, *att;   /* [T, n_heads*head_dim] */
    float *k, *v;     /* [T, n_kv_heads*head_dim] */
    float *gate, *up; /* [T, intermediate] */
    float *scores;    /* [n_threads, max_ctx] attention weights */
    int32_t *tok_pos; /* [T] position of each row */
    int32_t *tok_seq; /* [T] sequence of each row */
    /* calibration capture (engine/cpu_capture.h); fn NULL => off */
    sd_capture_fn cap_fn;
    void *cap_ud;
    int32_t cap_stop; /* last layer to run when >= 0 */
} cpu_backend;

/* ---- weight conversion ---------------------------------------------------------------- */

static float *vec_f32(const void *data, sd_dtype dt, int64_t n, const char *what, sd_diag *d, int *rc)
{
    float *out = malloc((size_t)n * sizeof *out);
    if (!out) {
        *rc = sd_diag_set(d, SD_ENOMEM, "cpu backend: out of memory converting %s", what);
        return NULL;
    }
    if (sd_dtype_to_f32(dt, data, out, (size_t)n) != 0) {
        free(out);
        *rc = sd_diag_set(d, SD_ENOTSUP, "cpu backend: %s has dtype %s, not a float type", what,
                          sd_dtype_name(dt));
        return NULL;
    }
    return out;
}

/* Bitmask row r: its kept values in column order, bit j of word w <=> column 32w + j. */
static int expand_bitmask(const sd_linear *l, float *w)
{
    int64_t half = l->cols / 2, words = l->cols / 32;
    memset(w, 0, (size_t)(l->rows * l->cols) * sizeof *w);
    for (int64_t r = 0; r < l->rows; r++) {
        const uint16_t *vals = l->values + r * half;
        const uint32_t *mask = l->mask + r * words;
        int64_t k = 0;
        for (int64_t wd = 0; wd < words; wd++)
            for (uint32_t m = mask[wd]; m; m &= m - 1) {
                if (k >= half)
                    return SD_EFORMAT; /* more kept bits than stored values */
                w[r * l->cols + wd * 32 + __builtin_ctz(m)] = sd_bf16_to_f32(vals[k++]);
            }
    }
    return 0;
}

static int linear_init(cpu_linear *cl, const sd_linear *l, sd_diag *d)
{
    int rc = 0;
    cl->rows = l->rows;
    cl->cols = l->cols;
    if (l->kind == SD_LINEAR_BITMASK) {
        cl->w = malloc((size_t)(l->rows * l->cols) * sizeof *cl->w);
        if (!cl->w)
            return sd_diag_set(d, SD_ENOMEM, "cpu backend: out of memory expanding %s", l->name);
        cl->owns_w = 1;
        cl->values = l->values;
        cl->mask = l->mask;
        if (expand_bitmask(l, cl->w) != 0)
            return sd_diag_set(d, SD_EFORMAT, "cpu backend: %s: a mask row keeps more than cols/2 values",
                               l->name);
    } else if (!(cl->w = vec_f32(l->w, l->dtype, l->rows * l->cols, l->name, d, &rc))) {
        return rc;
    }
    cl->owns_w = 1;
    if (l->bias && !(cl->bias = vec_f32(l->bias, l->bias_dtype, l->rows, l->name, d, &rc)))
        return rc;
    return 0;
}

static void linear_free(cpu_linear *cl)
{
    if (cl->owns_w)
        free(cl->w);
    free(cl->bias);
}

static int layer_init(cpu_layer *cl, const sd_layer_weights *lw, int32_t l, sd_diag *d)
{
    int rc = 0;
    char what[64];
    snprintf(what, sizeof what, "layer %d attention norm", l);
    if (!(cl->attn_norm = vec_f32(lw->attn_norm.data, lw->attn_norm.dtype, lw->attn_norm.n, what, d, &rc)))
        return rc;
    snprintf(what, sizeof what, "layer %d mlp norm", l);
    if (!(cl->mlp_norm = vec_f32(lw->mlp_norm.data, lw->mlp_norm.dtype, lw->mlp_norm.n, what, d, &rc)))
        return rc;
    if (lw->q_norm.data) {
        snprintf(what, sizeof what, "layer %d q_norm", l);
        if (!(cl->q_norm = vec_f32(lw->q_norm.data, lw->q_norm.dtype, lw->q_norm.n, what, d, &rc)))
            return rc;
        snprintf(what, sizeof what, "layer %d k_norm", l);
        if (!(cl->k_norm = vec_f32(lw->k_norm.data, lw->k_norm.dtype, lw->k_norm.n, what, d, &rc)))
            return rc;
    }
    const sd_linear *src[7] = {&lw->q, &lw->k, &lw->v, &lw->o, &lw->gate, &lw->up, &lw->down};
    cpu_linear *dst[7] = {&cl->q, &cl->k, &cl->v, &cl->o, &cl->gate, &cl->up, &cl->down};
    for (int i = 0; i < 7; i++)
        if ((rc = linear_init(dst[i], src[i], d)) != 0)
            return rc;
    return 0;
}

static void layer_free(cpu_layer *cl)
{
    free(cl->attn_norm);
    free(cl->mlp_norm);
    free(cl->q_norm);
    free(cl->k_norm);
    cpu_linear *ls[7] = {&cl->q, &cl->k, &cl->v, &cl->o, &cl->gate, &cl->up, &cl->down};
    for (int i = 0; i < 7; i++)
        linear_free(ls[i]);
}

/* ---- the forward pass ------------------------------------------------------------------ */

typedef struct fwd {
    cpu_backend *b;
    const sd_batch_seq *seqs;
    int32_t layer;
    int T;
} fwd;

static inline float *kv_at(const cpu_backend *b, int32_t block, int32_t layer, int kind, int32_t off)
{
    const sd_model_config *c = &b->cfg;
    size_t row = (size_t)c->n_kv_heads * c->head_dim;
    return b->kv + ((((size_t)block * c->n_layers + layer) * 2 + kind) * b->base.block_size + off) * row;
}

/* rows [t0, t1): out = rmsnorm(x) with the layer's attention or mlp norm */
static void task_norm(void *ctx, int64_t t0, int64_t t1, int tid, const float *w, float *out)
{
    const fwd *f = ctx;
    int64_t h = f->b->cfg.hidden;
    for (int64_t t = t0; t < t1; t++)
        sd_cpu_rmsnorm(out + t * h, f->b->x + t * h, w, h, f->b->cfg.rms_eps);
}

static void task_attn_norm(void *ctx, int64_t t0, int64_t t1, int tid)
{
    const fwd *f = ctx;
    task_norm(ctx, t0, t1, tid, f->b->layers[f->layer].attn_norm, f->b->xn);
}

static void task_mlp_norm(void *ctx, int64_t t0, int64_t t1, int tid)
{
    const fwd *f = ctx;
    task_norm(ctx, t0, t1, tid, f->b->layers[f->layer].mlp_norm, f->b->xn);
}

/* rows [t0, t1): Qwen3 q/k norm, RoPE, then K and V into the row's KV slot */
static void task_rope_store(void *ctx, int64_t t0, int64_t t1, int tid)
{
    const fwd *f = ctx;
    cpu_backend *b = f->b;
    const sd_model_config *c = &b->cfg;
    const cpu_layer *L = &b->layers[f->layer];
    int hd = c->head_dim;
    size_t qrow = (size_t)c->n_heads * hd, kvrow = (size_t)c->n_kv_heads * hd;
    for (int64_t t = t0; t < t1; t++) {
        int32_t pos = b->tok_pos[t];
        float *q = b->q + t * qrow, *k = b->k + t * kvrow;
        for (int h = 0; h < c->n_heads; h++) {
            if (L->q_norm)
                sd_cpu_rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, c->rms_eps);
            sd_cpu_rope(q + h * hd, hd, b->inv_freq, pos);
        }
        for (int h = 0; h < c->n_kv_heads; h++) {
            if (L->k_norm)
                sd_cpu_rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, c->rms_eps);
            sd_cpu_rope(k + h * hd, hd, b->inv_freq, pos);
        }
        const int32_t *bt = f->seqs[b->tok_seq[t]].block_table;
        int32_t bs = b->base.block_size;
        memcpy(kv_at(b, bt[pos / bs], f->layer, 0, pos % bs), k, kvrow * sizeof(float));
        memcpy(kv_at(b, bt[pos / bs], f->layer, 1, pos % bs), b->v + t * kvrow, kvrow * sizeof(float));
    }
}

/* items [i0, i1) = (row, head) pairs: causal attention of the row's query over KV [lo, pos], where
 * lo = 0, or with the layer's sliding window W, lo = max(0, pos + 1 - W): transformers' mask keeps
 * key k for query p when k > p - W (masking_utils.sliding_window_overlay). KV rows left of the
 * window stay in the cache (and in the prefix cache) unread. */
SD_CPU_MULTIVERSION
static void task_attention(void *ctx, int64_t i0, int64_t i1, int tid)
{
    const fwd *f = ctx;
    cpu_backend *b = f->b;
    const sd_model_config *c = &b->cfg;
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    int32_t bs = b->base.block_size, win = sd_model_config_window(c, f->layer);
    float scale = 1.0f / sqrtf((float)hd);
    float *sc = b->scores + (size_t)tid * b->max_ctx; /* [pos + 1], entries [lo, pos] used */
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / c->n_heads;
        int h = (int)(i % c->n_heads), kvh = h / group;
        int32_t pos = b->tok_pos[t], lo = win > 0 && pos + 1 > win ? pos + 1 - win : 0;
        const int32_t *bt = f->seqs[b->tok_seq[t]].block_table;
        const float *q = b->q + ((size_t)t * c->n_heads + h) * hd;
        float mx = -INFINITY;
        for (int32_t j = lo; j <= pos; j++) {
            sc[j] = sd_cpu_dot(q, kv_at(b, bt[j / bs], f->layer, 0, j % bs) + kvh * hd, hd) * scale;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        float sum = 0;
        for (int32_t j = lo; j <= pos; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float *out = b->att + ((size_t)t * c->n_heads + h) * hd;
        memset(out, 0, (size_t)hd * sizeof *out);
        for (int32_t j = lo; j <= pos; j++) {
            float p = sc[j] / sum;
            const float *v = kv_at(b, bt[j / bs], f->layer, 1, j % bs) + kvh * hd;
            for (int e = 0; e < hd; e++)
                out[e] += p * v[e];
        }
    }
}

typedef struct spmv_job {
    const cpu_linear *l;
    const float *x;
    int T;
    float *y;
} spmv_job;

/* rows [r0, r1) of a bitmask linear: rows are independent, so each chunk is its own SpMV */
static void task_spmv(void *ctx, int64_t r0, int64_t r1, int tid)
{
    const spmv_job *j = ctx;
    const cpu_linear *l = j->l;
    sd_nm_spmv_cpu(l->values + r0 * (l->cols / 2), l->mask + r0 * (l->cols / 32), r1 - r0, l->cols, j->x,
                   l->cols, j->T, j->y + r0, l->rows);
    if (l->bias)
        for (int t = 0; t < j->T; t++)
            for (int64_t r = r0; r < r1; r++)
                j->y[t * l->rows + r] += l->bias[r];
}

/* y[T, rows] = x[T, cols] W^T (+ bias) */
static void matmul(cpu_backend *b, const cpu_linear *l, const float *x, int T, float *y)
{
    if (l->values && T <= SD_CPU_SPMV_MAX_ROWS) {
        spmv_job j = {l, x, T, y};
        int64_t grain = l->rows / (4 * b->n_threads);
        sd_cpu_pool_run(b->pool, l->rows, grain > 16 ? grain : 16, task_spmv, &j);
        return;
    }
    sd_cpu_matmul(b->pool, x, l->cols, T, l->w, l->rows, l->cols, l->bias, y, l->rows);
}

static void add_rows(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* Hands the rows of one linear input to the capture hook, if any. */
static int capture(const cpu_backend *b, const fwd *f, sd_capture_site site, const float *x, int64_t cols)
{
    if (!b->cap_fn)
        return 0;
    return b->cap_fn(b->cap_ud, f->layer, site, x, cols, f->T, b->tok_pos, b->tok_seq);
}

static int run_layer(cpu_backend *b, fwd *f)
{
    const cpu_layer *L = &b->layers[f->layer];
    const sd_model_config *c = &b->cfg;
    int T = f->T, nt = b->n_threads, rc;
    int64_t grain = T / nt > 1 ? T / nt : 1;
    int64_t qd = (int64_t)c->n_heads * c->head_dim;
    sd_cpu_pool_run(b->pool, T, grain, task_attn_norm, f);
    if ((rc = capture(b, f, SD_CAP_QKV, b->xn, c->hidden)) < 0)
        return rc;
    matmul(b, &L->q, b->xn, T, b->q);
    matmul(b, &L->k, b->xn, T, b->k);
    matmul(b, &L->v, b->xn, T, b->v);
    sd_cpu_pool_run(b->pool, T, grain, task_rope_store, f);
    int64_t items = (int64_t)T * c->n_heads;
    sd_cpu_pool_run(b->pool, items, items / (4 * nt) > 1 ? items / (4 * nt) : 1, task_attention, f);
    if ((rc = capture(b, f, SD_CAP_O, b->att, qd)) < 0)
        return rc;
    matmul(b, &L->o, b->att, T, b->xn);
    add_rows(b->x, b->xn, (int64_t)T * c->hidden);
    sd_cpu_pool_run(b->pool, T, grain, task_mlp_norm, f);
    if ((rc = capture(b, f, SD_CAP_GATEUP, b->xn, c->hidden)) < 0)
        return rc;
    matmul(b, &L->gate, b->xn, T, b->gate);
    matmul(b, &L->up, b->xn, T, b->up);
    sd_cpu_swiglu(b->gate, b->up, (int64_t)T * c->intermediate);
    if ((rc = capture(b, f, SD_CAP_DOWN, b->gate, c->intermediate)) < 0)
        return rc;
    matmul(b, &L->down, b->gate, T, b->xn);
    add_rows(b->x, b->xn, (int64_t)T * c->hidden);
    return 0;
}

static int check_batch(const cpu_backend *b, const sd_batch_seq *seqs, int n_seqs, int *ret_T, sd_diag *d)
{
    int64_t T = 0;
    int32_t bs = b->base.block_size;
    if (n_seqs <= 0)
        return sd_diag_set(d, SD_EINVAL, "cpu forward: empty batch");
    /* shapes first, so that nothing is read past a short array */
    for (int s = 0; s < n_seqs; s++) {
        const sd_batch_seq *q = &seqs[s];
        if (q->n_tokens < 1 || q->pos < 0 || !q->tokens || !q->block_table)
            return sd_diag_set(d, SD_EINVAL, "cpu forward: sequence %d: bad pos %d / n_tokens %d", s, q->pos,
                               q->n_tokens);
        if ((int64_t)q->pos + q->n_tokens > b->max_ctx)
            return sd_diag_set(d, SD_ERANGE,
                               "cpu forward: sequence %d reaches position %lld, beyond the "
                               "model's %d",
                               s, (long long)q->pos + q->n_tokens, b->max_ctx);
        T += q->n_tokens;
    }
    if (T > b->base.max_batch_tokens)
        return sd_diag_set(d, SD_EINVAL, "cpu forward: %lld tokens exceed max_batch_tokens %d", (long long)T,
                           b->base.max_batch_tokens);
    for (int s = 0; s < n_seqs; s++) {
        const sd_batch_seq *q = &seqs[s];
        for (int32_t i = 0; i < q->n_tokens; i++)
            if (q->tokens[i] < 0 || q->tokens[i] >= b->cfg.vocab)
                return sd_diag_set(d, SD_EINVAL, "cpu forward: sequence %d: token %d out of range [0, %d)", s,
                                   q->tokens[i], b->cfg.vocab);
        int32_t nb = (q->pos + q->n_tokens + bs - 1) / bs;
        for (int32_t i = 0; i < nb; i++)
            if (q->block_table[i] < 0 || q->block_table[i] >= b->base.kv_blocks)
                return sd_diag_set(d, SD_EINVAL,
                                   "cpu forward: sequence %d: block %d of its table is %d, "
                                   "outside the pool of %d",
                                   s, i, q->block_table[i], b->base.kv_blocks);
    }
    *ret_T = (int)T;
    return 0;
}

static void embed_row(const cpu_backend *b, int32_t tok, float *out)
{
    int64_t h = b->cfg.hidden;
    if (b->embed) {
        memcpy(out, b->embed + tok * h, (size_t)h * sizeof *out);
        return;
    }
    const sd_vec *e = &b->src->embed;
    sd_dtype_to_f32(e->dtype, (const char *)e->data + (size_t)(tok * h) * sd_dtype_size(e->dtype), out,
                    (size_t)h);
}

static int cpu_forward(sd_backend *base, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d)
{
    cpu_backend *b = (cpu_backend *)base;
    const sd_model_config *c = &b->cfg;
    int T = 0, rc;
    if ((rc = check_batch(b, seqs, n_seqs, &T, d)) != 0)
        return rc;
    int t = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int32_t i = 0; i < seqs[s].n_tokens; i++, t++) {
            b->tok_pos[t] = seqs[s].pos + i;
            b->tok_seq[t] = s;
            embed_row(b, seqs[s].tokens[i], b->x + (int64_t)t * c->hidden);
        }
    fwd f = {b, seqs, 0, T};
    for (f.layer = 0; f.layer < c->n_layers; f.layer++) {
        if ((rc = run_layer(b, &f)) != 0)
            return rc; /* the capture hook's own code (e.g. SD_ECANCEL); its owner reports it */
        if (b->cap_fn && f.layer == b->cap_stop)
            return 0; /* a capture replay that needs no later layer (cpu_capture.h) */
    }

    /* rows that want logits, final-normed into xn, then one lm_head matmul */
    int n_out = 0;
    t = 0;
    for (int s = 0; s < n_seqs; s++) {
        int32_t first = seqs[s].all_logits ? 0 : seqs[s].n_tokens - 1;
        for (int32_t i = first; i < seqs[s].n_tokens; i++, n_out++)
            sd_cpu_rmsnorm(b->xn + (int64_t)n_out * c->hidden, b->x + (int64_t)(t + i) * c->hidden,
                           b->final_norm, c->hidden, c->rms_eps);
        t += seqs[s].n_tokens;
    }
    matmul(b, &b->lm_head, b->xn, n_out, logits);
    return 0;
}

/* ---- init / free ----------------------------------------------------------------------- */

static void cpu_free(sd_backend *base)
{
    cpu_backend *b = (cpu_backend *)base;
    if (!b)
        return;
    if (b->layers)
        for (int32_t l = 0; l < b->cfg.n_layers; l++)
            layer_free(&b->layers[l]);
    free(b->layers);
    linear_free(&b->lm_head);
    free(b->embed);
    free(b->final_norm);
    free(b->inv_freq);
    free(b->kv);
    sd_cpu_pool_free(b->pool);
    float *bufs[] = {b->x, b->xn, b->q, b->att, b->k, b->v, b->gate, b->up, b->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(b->tok_pos);
    free(b->tok_seq);
    free(b);
}

static const sd_backend_vtbl cpu_vtbl = {"cpu", cpu_forward, cpu_free, NULL, 0};

/* ---- calibration hooks (engine/cpu_capture.h) ------------------------------------------ */

void sd_backend_cpu_set_capture(sd_backend *base, sd_capture_fn fn, void *ud, int32_t stop_after_layer)
{
    cpu_backend *b = (cpu_backend *)base;
    b->cap_fn = fn;
    b->cap_ud = ud;
    b->cap_stop = stop_after_layer;
}

int sd_backend_cpu_set_linear(sd_backend *base, int32_t layer, int which, const float *w, sd_diag *d)
{
    cpu_backend *b = (cpu_backend *)base;
    if (base->vt != &cpu_vtbl || layer < 0 || layer >= b->cfg.n_layers || which < 0 || which >= SD_LIN_N)
        return sd_diag_set(d, SD_EINVAL, "cpu backend: no linear %d of layer %d", which, layer);
    cpu_layer *L = &b->layers[layer];
    cpu_linear *ls[SD_LIN_N] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
    cpu_linear *l = ls[which];
    memcpy(l->w, w, (size_t)(l->rows * l->cols) * sizeof *l->w);
    l->values = NULL; /* the fp32 copy is now the truth: no SpMV on the old bitmask */
    l->mask = NULL;
    return 0;
}

static int32_t default_kv_blocks(const sd_model_config *c, int32_t bs)
{
    size_t per_block = (size_t)c->n_layers * 2 * bs * c->n_kv_heads * c->head_dim * sizeof(float);
    int64_t want = (int64_t)SD_CPU_KV_SEQS * ((c->max_pos + bs - 1) / bs);
    int64_t cap = (int64_t)(SD_CPU_KV_BUDGET / per_block);
    int64_t n = want < cap ? want : cap;
    return (int32_t)(n > 0 ? n : 1);
}

static int alloc_scratch(cpu_backend *b, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    size_t T = (size_t)b->base.max_batch_tokens;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    /* xn also holds the final-normed rows for lm_head: at most T of them */
    b->x = malloc(T * c->hidden * sizeof(float));
    b->xn = malloc(T * c->hidden * sizeof(float));
    b->q = malloc(T * qd * sizeof(float));
    b->att = malloc(T * qd * sizeof(float));
    b->k = malloc(T * kvd * sizeof(float));
    b->v = malloc(T * kvd * sizeof(float));
    b->gate = malloc(T * c->intermediate * sizeof(float));
    b->up = malloc(T * c->intermediate * sizeof(float));
    b->scores = malloc((size_t)b->n_threads * b->max_ctx * sizeof(float));
    b->tok_pos = malloc(T * sizeof(int32_t));
    b->tok_seq = malloc(T * sizeof(int32_t));
    size_t kv_elems = (size_t)b->base.kv_blocks * c->n_layers * 2 * b->base.block_size * kvd;
    b->kv = calloc(kv_elems, sizeof(float));
    if (!b->x || !b->xn || !b->q || !b->att || !b->k || !b->v || !b->gate || !b->up || !b->scores ||
        !b->tok_pos || !b->tok_seq || !b->kv)
        return sd_diag_set(d, SD_ENOMEM,
                           "cpu backend: out of memory for %d KV blocks and scratch of %zu tokens",
                           b->base.kv_blocks, T);
    return 0;
}

static int convert_weights(cpu_backend *b, const sd_model_weights *w, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    int rc = 0;
    if (!(b->final_norm =
              vec_f32(w->final_norm.data, w->final_norm.dtype, w->final_norm.n, "final norm", d, &rc)))
        return rc;
    if (c->tie_embeddings || w->lm_head.w == w->embed.data) {
        /* tied: one fp32 copy serves as embedding table and lm_head */
        if (!(b->embed = vec_f32(w->embed.data, w->embed.dtype, w->embed.n, "embedding", d, &rc)))
            return rc;
        b->lm_head = (cpu_linear){.rows = c->vocab, .cols = c->hidden, .w = b->embed, .owns_w = 0};
    } else if ((rc = linear_init(&b->lm_head, &w->lm_head, d)) != 0) {
        return rc;
    }
    b->layers = calloc((size_t)c->n_layers, sizeof *b->layers);
    if (!b->layers)
        return sd_diag_set(d, SD_ENOMEM, "cpu backend: out of memory");
    for (int32_t l = 0; l < c->n_layers; l++)
        if ((rc = layer_init(&b->layers[l], &w->layers[l], l, d)) != 0)
            return rc;
    return 0;
}

int sd_backend_cpu_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *o, sd_diag *d)
{
    sd_backend_opts def;
    if (!o) {
        sd_backend_opts_default(&def);
        o = &def;
    }
    const sd_model_config *c = sd_model_cfg(m);
    if (c->head_dim % 2 || c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads)
        return sd_diag_set(d, SD_ENOTSUP, "cpu backend: head_dim %d / heads %d / kv heads %d not supported",
                           c->head_dim, c->n_heads, c->n_kv_heads);
    if (o->block_size <= 0 || o->kv_blocks < 0 || o->max_batch_tokens < 0)
        return sd_diag_set(d, SD_EINVAL, "cpu backend: block_size %d, kv_blocks %d, max_batch_tokens %d",
                           o->block_size, o->kv_blocks, o->max_batch_tokens);
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return sd_diag_set(d, SD_ENOMEM, "cpu backend: out of memory");
    b->base.vt = &cpu_vtbl;
    b->cfg = *c;
    b->src = sd_model_w(m);
    b->base.vocab = c->vocab;
    b->base.block_size = o->block_size;
    b->base.kv_blocks = o->kv_blocks ? o->kv_blocks : default_kv_blocks(c, o->block_size);
    b->base.max_batch_tokens = o->max_batch_tokens ? o->max_batch_tokens : 2048;
    b->max_ctx = c->max_pos;
    int rc = sd_cpu_pool_init(&b->pool, o->n_threads, d);
    if (rc != 0)
        goto fail;
    b->n_threads = sd_cpu_pool_threads(b->pool);
    b->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(float));
    if (!b->inv_freq) {
        rc = sd_diag_set(d, SD_ENOMEM, "cpu backend: out of memory");
        goto fail;
    }
    sd_cpu_rope_inv_freq(c, b->inv_freq);
    if ((rc = convert_weights(b, b->src, d)) != 0 || (rc = alloc_scratch(b, d)) != 0)
        goto fail;
    *ret = &b->base;
    return 0;
fail:
    cpu_free(&b->base);
    return rc;
}
