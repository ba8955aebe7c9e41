/* shard: the tensor-parallel plan and the slicing of dense, bitmask (N:M and unstructured)
 * linears, biases and embeddings for one rank. */
#include "shard.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"

int sd_shard_plan_init(sd_shard_plan *ret, const sd_model_config *cfg, int ranks, int rank, sd_diag *d)
{
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: rank %d of %d is out of range", rank, ranks);
    if (cfg->n_heads % ranks)
        return sd_diag_set(d, SD_EINVAL,
                           "tensor parallel %d: num_attention_heads (%d) is not divisible by the number of "
                           "ranks",
                           ranks, cfg->n_heads);
    if (cfg->n_kv_heads >= ranks ? cfg->n_kv_heads % ranks : ranks % cfg->n_kv_heads)
        return sd_diag_set(d, SD_EINVAL,
                           "tensor parallel %d: num_key_value_heads (%d) must be a multiple of the number "
                           "of ranks, or divide it",
                           ranks, cfg->n_kv_heads);
    if (cfg->intermediate % ranks)
        return sd_diag_set(d, SD_EINVAL,
                           "tensor parallel %d: intermediate_size (%d) is not divisible by the number of "
                           "ranks",
                           ranks, cfg->intermediate);
    sd_shard_plan p = {0};
    p.ranks = ranks;
    p.rank = rank;
    p.head_dim = cfg->head_dim;
    p.heads_total = cfg->n_heads;
    p.kv_total = cfg->n_kv_heads;
    p.inter_total = cfg->intermediate;
    p.vocab_total = cfg->vocab;
    p.n_q_heads = cfg->n_heads / ranks;
    p.q_head0 = rank * p.n_q_heads;
    /* vLLM: with fewer KV heads than ranks each rank holds one, replicated over ranks/n_kv
     * consecutive ranks; either way rank r starts at KV head r * n_kv / ranks. */
    p.n_kv_heads = cfg->n_kv_heads >= ranks ? cfg->n_kv_heads / ranks : 1;
    p.kv_replicas = cfg->n_kv_heads >= ranks ? 1 : ranks / cfg->n_kv_heads;
    p.kv_head0 = (int32_t)((int64_t)rank * cfg->n_kv_heads / ranks);
    p.n_inter = cfg->intermediate / ranks;
    p.inter0 = rank * p.n_inter;
    p.vocab_pad = (cfg->vocab + ranks - 1) / ranks;
    p.vocab0 = rank * p.vocab_pad;
    int32_t left = cfg->vocab - p.vocab0;
    p.n_vocab = left < 0 ? 0 : left < p.vocab_pad ? left : p.vocab_pad;
    *ret = p;
    return 0;
}

void sd_shard_local_config(const sd_shard_plan *p, const sd_model_config *full, sd_model_config *out)
{
    *out = *full;
    out->n_heads = p->n_q_heads;
    out->n_kv_heads = p->n_kv_heads;
    out->intermediate = p->n_inter;
    out->vocab = p->vocab_pad;
}

void sd_shard_linear_free(sd_shard_linear *s)
{
    if (!s)
        return;
    free(s->w_own);
    free(s->v_own);
    free(s->m_own);
    free(s->b_own);
    memset(s, 0, sizeof *s);
}

static const char *lname(const sd_linear *l)
{
    return l->name ? l->name : "(unnamed linear)";
}

/* Copies rows [r0, r0+n) of a [rows, row_bytes] buffer and zero-fills `pad` more rows. */
static void *copy_rows(const void *src, size_t row_bytes, int64_t r0, int64_t n, int64_t pad)
{
    char *out = calloc((size_t)(n + pad) ? (size_t)(n + pad) : 1, row_bytes ? row_bytes : 1);
    if (out && n)
        memcpy(out, (const char *)src + (size_t)r0 * row_bytes, (size_t)n * row_bytes);
    return out;
}

/* A valid mask row for padding rows (values are zero, so the product is zero): the first n
 * of every group of m, or the first cols/2 columns when unstructured. */
static void pad_mask_row(uint32_t *mrow, int64_t cols, int nm_n, int nm_m)
{
    for (int64_t c = 0; c < cols; c++) {
        int keep = nm_m > 0 ? (c % nm_m) < nm_n : c < cols / 2;
        if (keep)
            mrow[c / 32] |= 1u << (c % 32);
    }
}

static int copy_bias_rows(sd_shard_linear *o, const sd_linear *src, int64_t r0, int64_t n, int64_t pad,
                          sd_diag *d)
{
    if (!src->bias)
        return 0;
    size_t es = sd_dtype_size(src->bias_dtype);
    if (!es)
        return sd_diag_set(d, SD_EINVAL, "shard: %s has a bias of invalid dtype", lname(src));
    o->b_own = copy_rows(src->bias, es, r0, n, pad);
    if (!o->b_own)
        return sd_diag_set(d, SD_ENOMEM, "shard: bias of %s", lname(src));
    o->l.bias = o->b_own;
    return 0;
}

int sd_shard_linear_rows(sd_shard_linear *out, const sd_linear *src, int64_t r0, int64_t n, int64_t pad,
                         sd_diag *d)
{
    if (r0 < 0 || n < 0 || pad < 0 || r0 + n > src->rows)
        return sd_diag_set(d, SD_EINVAL, "shard: rows [%lld, %lld) of %s are outside its %lld rows",
                           (long long)r0, (long long)(r0 + n), lname(src), (long long)src->rows);
    sd_shard_linear o = {0};
    o.l = *src;
    o.l.rows = n + pad;
    o.l.bias = NULL;
    int rc = SD_ENOMEM;
    if (src->kind == SD_LINEAR_DENSE) {
        size_t es = sd_dtype_size(src->dtype);
        if (!es)
            return sd_diag_set(d, SD_EINVAL, "shard: %s has an invalid dtype", lname(src));
        if (!(o.w_own = copy_rows(src->w, es * (size_t)src->cols, r0, n, pad)))
            goto fail;
        o.l.w = o.w_own;
    } else {
        if (src->cols % 32)
            return sd_diag_set(d, SD_EINVAL, "shard: bitmask %s has %lld columns, not a multiple of 32",
                               lname(src), (long long)src->cols);
        o.values_stride = src->cols / 2;
        int64_t wpr = src->cols / 32;
        if (!(o.v_own = copy_rows(src->values, 2 * (size_t)o.values_stride, r0, n, pad)))
            goto fail;
        if (!(o.m_own = copy_rows(src->mask, 4 * (size_t)wpr, r0, n, pad)))
            goto fail;
        for (int64_t r = n; r < n + pad; r++)
            pad_mask_row(o.m_own + r * wpr, src->cols, src->nm_n, src->nm_m);
        o.l.values = o.v_own;
        o.l.mask = o.m_own;
    }
    if ((rc = copy_bias_rows(&o, src, r0, n, pad, d)))
        goto fail;
    *out = o;
    return 0;
fail:
    sd_shard_linear_free(&o);
    return rc == SD_ENOMEM ? sd_diag_set(d, SD_ENOMEM, "shard: rows of %s", lname(src)) : rc;
}

static int popcount_words(const uint32_t *w, int64_t n)
{
    int c = 0;
    for (int64_t i = 0; i < n; i++)
        c += __builtin_popcount(w[i]);
    return c;
}

/* Bitmask column slice: word-aligned, values located per row by a prefix popcount (which is
 * 16 per word for N:M, any count for unstructured). */
static int slice_bitmask_cols(sd_shard_linear *o, const sd_linear *src, int64_t c0, int64_t n, sd_diag *d)
{
    int64_t wpr = src->cols / 32, w0 = c0 / 32, nw = n / 32, half = src->cols / 2;
    int64_t stride = 0;
    for (int64_t r = 0; r < src->rows; r++) {
        const uint32_t *mrow = src->mask + r * wpr;
        int64_t before = popcount_words(mrow, w0), cnt = popcount_words(mrow + w0, nw);
        if (before + cnt > half || (src->nm_m > 0 && cnt != n / 2))
            return sd_diag_set(d, SD_EFORMAT,
                               "shard: row %lld of %s keeps %lld of columns [%lld, %lld), which its %s "
                               "pattern does not allow",
                               (long long)r, lname(src), (long long)cnt, (long long)c0, (long long)(c0 + n),
                               src->nm_m > 0 ? "N:M" : "50%");
        if (cnt > stride)
            stride = cnt;
    }
    o->values_stride = src->nm_m > 0 ? n / 2 : stride;
    o->v_own = calloc((size_t)(src->rows * o->values_stride) + 1, 2);
    o->m_own = malloc((size_t)(src->rows * nw) * 4 + 4);
    if (!o->v_own || !o->m_own)
        return sd_diag_set(d, SD_ENOMEM, "shard: columns of %s", lname(src));
    for (int64_t r = 0; r < src->rows; r++) {
        const uint32_t *mrow = src->mask + r * wpr;
        int64_t before = popcount_words(mrow, w0), cnt = popcount_words(mrow + w0, nw);
        memcpy(o->m_own + r * nw, mrow + w0, (size_t)nw * 4);
        memcpy(o->v_own + r * o->values_stride, src->values + r * half + before, (size_t)cnt * 2);
    }
    o->l.values = o->v_own;
    o->l.mask = o->m_own;
    return 0;
}

int sd_shard_linear_cols(sd_shard_linear *out, const sd_linear *src, int64_t c0, int64_t n, sd_diag *d)
{
    if (c0 < 0 || n < 0 || c0 + n > src->cols)
        return sd_diag_set(d, SD_EINVAL, "shard: columns [%lld, %lld) of %s are outside its %lld columns",
                           (long long)c0, (long long)(c0 + n), lname(src), (long long)src->cols);
    if (src->kind == SD_LINEAR_BITMASK && (c0 % 32 || n % 32 || src->cols % 32))
        return sd_diag_set(d, SD_ENOTSUP,
                           "shard: columns [%lld, %lld) of bitmask %s are not on 32-column mask-word "
                           "boundaries",
                           (long long)c0, (long long)(c0 + n), lname(src));
    sd_shard_linear o = {0};
    o.l = *src;
    o.l.cols = n;
    o.l.bias = NULL;
    int rc;
    if (src->kind == SD_LINEAR_DENSE) {
        size_t es = sd_dtype_size(src->dtype);
        if (!es)
            return sd_diag_set(d, SD_EINVAL, "shard: %s has an invalid dtype", lname(src));
        if (!(o.w_own = malloc((size_t)(src->rows * n) * es + 1))) {
            rc = sd_diag_set(d, SD_ENOMEM, "shard: columns of %s", lname(src));
            goto fail;
        }
        for (int64_t r = 0; r < src->rows; r++)
            memcpy((char *)o.w_own + (size_t)(r * n) * es,
                   (const char *)src->w + (size_t)(r * src->cols + c0) * es, (size_t)n * es);
        o.l.w = o.w_own;
    } else if ((rc = slice_bitmask_cols(&o, src, c0, n, d))) {
        goto fail;
    }
    if ((rc = copy_bias_rows(&o, src, 0, src->rows, 0, d)))
        goto fail;
    *out = o;
    return 0;
fail:
    sd_shard_linear_free(&o);
    return rc;
}

static int check_dim(const sd_linear *src, const char *what, int64_t got, int64_t want, sd_diag *d)
{
    if (got == want)
        return 0;
    return sd_diag_set(d, SD_EINVAL, "shard: %s has %lld %s, the config implies %lld", lname(src),
                       (long long)got, what, (long long)want);
}

int sd_shard_linear_init(sd_shard_linear *out, const sd_shard_plan *p, sd_shard_role role,
                         const sd_linear *src, sd_diag *d)
{
    int64_t hd = p->head_dim;
    int rc;
    switch (role) {
    case SD_SHARD_Q:
        if ((rc = check_dim(src, "rows", src->rows, (int64_t)p->heads_total * hd, d)))
            return rc;
        return sd_shard_linear_rows(out, src, p->q_head0 * hd, p->n_q_heads * hd, 0, d);
    case SD_SHARD_K:
    case SD_SHARD_V:
        if ((rc = check_dim(src, "rows", src->rows, (int64_t)p->kv_total * hd, d)))
            return rc;
        return sd_shard_linear_rows(out, src, p->kv_head0 * hd, p->n_kv_heads * hd, 0, d);
    case SD_SHARD_GATE:
    case SD_SHARD_UP:
        if ((rc = check_dim(src, "rows", src->rows, p->inter_total, d)))
            return rc;
        return sd_shard_linear_rows(out, src, p->inter0, p->n_inter, 0, d);
    case SD_SHARD_LM_HEAD:
        if ((rc = check_dim(src, "rows", src->rows, p->vocab_total, d)))
            return rc;
        return sd_shard_linear_rows(out, src, p->vocab0, p->n_vocab, p->vocab_pad - p->n_vocab, d);
    case SD_SHARD_O:
    case SD_SHARD_DOWN: {
        int64_t c0 = role == SD_SHARD_O ? p->q_head0 * hd : p->inter0;
        int64_t n = role == SD_SHARD_O ? p->n_q_heads * hd : p->n_inter;
        int64_t total = role == SD_SHARD_O ? (int64_t)p->heads_total * hd : p->inter_total;
        if ((rc = check_dim(src, "columns", src->cols, total, d)))
            return rc;
        if ((rc = sd_shard_linear_cols(out, src, c0, n, d)))
            return rc;
        /* The partial sums are all-reduced: a bias added on every rank would count `ranks` times. */
        if (p->rank != 0) {
            free(out->b_own);
            out->b_own = NULL;
            out->l.bias = NULL;
        }
        return 0;
    }
    }
    return sd_diag_set(d, SD_EINVAL, "shard: unknown role %d for %s", (int)role, lname(src));
}

int sd_shard_linear_expand(const sd_shard_linear *s, uint16_t *dense_out, sd_diag *d)
{
    const sd_linear *l = &s->l;
    size_t n = (size_t)(l->rows * l->cols);
    if (l->kind == SD_LINEAR_DENSE) {
        if (l->dtype == SD_DT_BF16) {
            memcpy(dense_out, l->w, n * 2);
            return 0;
        }
        float *tmp = malloc(n * sizeof *tmp + 1);
        if (!tmp)
            return sd_diag_set(d, SD_ENOMEM, "shard: expanding %s", lname(l));
        int rc = sd_dtype_to_f32(l->dtype, l->w, tmp, n);
        for (size_t i = 0; !rc && i < n; i++)
            dense_out[i] = sd_f32_to_bf16(tmp[i]);
        free(tmp);
        return rc ? sd_diag_set(d, rc, "shard: %s: unsupported dtype", lname(l)) : 0;
    }
    int64_t wpr = l->cols / 32;
    for (int64_t r = 0; r < l->rows; r++) {
        const uint32_t *mrow = l->mask + r * wpr;
        const uint16_t *v = l->values + r * s->values_stride;
        int64_t k = 0;
        for (int64_t c = 0; c < l->cols; c++) {
            int keep = (mrow[c / 32] >> (c % 32)) & 1u;
            if (keep && k >= s->values_stride)
                return sd_diag_set(d, SD_EFORMAT, "shard: row %lld of %s keeps more than %lld columns",
                                   (long long)r, lname(l), (long long)s->values_stride);
            dense_out[r * l->cols + c] = keep ? v[k++] : 0;
        }
    }
    return 0;
}

int sd_shard_embed(void **ret, const sd_shard_plan *p, const sd_vec *src, int32_t hidden, sd_diag *d)
{
    size_t es = sd_dtype_size(src->dtype);
    if (!es || hidden <= 0 || src->n != (int64_t)p->vocab_total * hidden)
        return sd_diag_set(d, SD_EINVAL, "shard: the embedding has %lld elements, the config implies %lld",
                           (long long)src->n, (long long)p->vocab_total * hidden);
    void *out = copy_rows(src->data, es * (size_t)hidden, p->vocab0, p->n_vocab, p->vocab_pad - p->n_vocab);
    if (!out)
        return sd_diag_set(d, SD_ENOMEM, "shard: embedding rows");
    *ret = out;
    return 0;
}
