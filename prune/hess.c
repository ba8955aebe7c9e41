/* hess: fp32 staging of captured rows, chunked X^T X through sd_cpu_matmul, fp64 sums (or folds
 * on the GPU through prune_cuda's accumulator). */
#include "prune/hess.h"

#include <stdlib.h>
#include <string.h>

#include "engine/cpu_ops.h"
#include "prune/prune_cuda.h"

/* Rows per fold: large enough that the matmul amortises its weight streaming, small enough
 * that fp32 partial sums over a chunk stay accurate (the chunk sums are added in fp64). */
#define HESS_CHUNK 256

struct sd_hess {
    int64_t cols;
    int diag_only;
    int64_t n;      /* rows added */
    int64_t staged; /* rows waiting in xt */
    float *xt;      /* [cols, HESS_CHUNK] staged rows, transposed */
    float *tmp;     /* [cols, cols] one chunk's X^T X (full mode) */
    double *acc;    /* [cols, cols] upper triangle used (full) or [cols] (diag_only); NULL on the GPU */
    sd_prune_gpu_acc *gacc; /* GPU accumulator (sd_hess_init_gpu) or NULL */
};

int sd_hess_init(sd_hess **ret, int64_t cols, int diag_only, sd_diag *d)
{
    sd_hess *h = calloc(1, sizeof *h);
    if (!h)
        return sd_diag_set(d, SD_ENOMEM, "hessian: out of memory");
    h->cols = cols;
    h->diag_only = diag_only;
    size_t na = diag_only ? (size_t)cols : (size_t)(cols * cols);
    h->acc = calloc(na, sizeof *h->acc);
    if (!diag_only) {
        h->xt = malloc((size_t)cols * HESS_CHUNK * sizeof *h->xt);
        h->tmp = malloc((size_t)(cols * cols) * sizeof *h->tmp);
    }
    if (!h->acc || (!diag_only && (!h->xt || !h->tmp))) {
        sd_hess_free(h);
        return sd_diag_set(d, SD_ENOMEM, "hessian: out of memory for %lld columns", (long long)cols);
    }
    *ret = h;
    return 0;
}

int sd_hess_init_gpu(sd_hess **ret, int64_t cols, sd_prune_gpu *g, sd_diag *d)
{
    sd_hess *h = calloc(1, sizeof *h);
    if (!h)
        return sd_diag_set(d, SD_ENOMEM, "hessian: out of memory");
    h->cols = cols;
    h->xt = malloc((size_t)cols * HESS_CHUNK * sizeof *h->xt);
    int rc = h->xt ? sd_prune_gpu_acc_init(g, &h->gacc, cols, d)
                   : sd_diag_set(d, SD_ENOMEM, "hessian: out of memory for %lld columns", (long long)cols);
    if (rc != 0) {
        sd_hess_free(h);
        return rc;
    }
    *ret = h;
    return 0;
}

void sd_hess_free(sd_hess *h)
{
    if (!h)
        return;
    sd_prune_gpu_acc_free(h->gacc);
    free(h->xt);
    free(h->tmp);
    free(h->acc);
    free(h);
}

int64_t sd_hess_rows(const sd_hess *h)
{
    return h->n;
}

int64_t sd_hess_cols(const sd_hess *h)
{
    return h->cols;
}

/* Upper-triangle row blocks per fold: H is symmetric, so only blocks on or right of the
 * diagonal are multiplied (about half the work). */
#define HESS_TRI 128

/* acc += Xt Xt^T over the staged rows (upper triangle): row i of Xt is column i of the staged
 * X, so the matmul "tokens" are columns i0.. and its "weights" the rows from i0 on. */
static int fold(sd_hess *h, sd_cpu_pool *pool, sd_diag *d)
{
    if (h->staged == 0)
        return 0;
    int64_t c = h->cols, k = h->staged;
    if (h->gacc) {
        h->staged = 0;
        return sd_prune_gpu_acc_add(h->gacc, h->xt, HESS_CHUNK, k, d);
    }
    if (k < HESS_CHUNK) /* the unused tail of each row must not add stale values */
        for (int64_t i = 0; i < c; i++)
            memset(h->xt + i * HESS_CHUNK + k, 0, (size_t)(HESS_CHUNK - k) * sizeof(float));
    for (int64_t i0 = 0; i0 < c; i0 += HESS_TRI) {
        int T = (int)(c - i0 < HESS_TRI ? c - i0 : HESS_TRI);
        const float *blk = h->xt + i0 * HESS_CHUNK;
        sd_cpu_matmul(pool, blk, HESS_CHUNK, T, blk, c - i0, HESS_CHUNK, NULL, h->tmp + i0 * c + i0, c);
        for (int64_t i = i0; i < i0 + T; i++)
            for (int64_t j = i; j < c; j++)
                h->acc[i * c + j] += h->tmp[i * c + j];
    }
    h->staged = 0;
    return 0;
}

int sd_hess_add(sd_hess *h, sd_cpu_pool *pool, const float *x, int64_t ld, int64_t n, sd_diag *d)
{
    int64_t c = h->cols;
    for (int64_t t = 0; t < n; t++) {
        const float *row = x + t * ld;
        if (h->diag_only) {
            for (int64_t j = 0; j < c; j++)
                h->acc[j] += (double)row[j] * row[j];
            continue;
        }
        for (int64_t j = 0; j < c; j++)
            h->xt[j * HESS_CHUNK + h->staged] = row[j];
        if (++h->staged == HESS_CHUNK) {
            int rc = fold(h, pool, d);
            if (rc != 0)
                return rc;
        }
    }
    h->n += n;
    return 0;
}

int sd_hess_add_dev(sd_hess *h, const void *x_bf16, int64_t ld, int64_t n, sd_diag *d)
{
    if (!h->gacc)
        return sd_diag_set(d, SD_EINVAL, "hessian: rows in GPU memory need a GPU accumulator");
    int rc = sd_prune_gpu_acc_add_dev(h->gacc, x_bf16, ld, n, d);
    if (rc == 0)
        h->n += n;
    return rc;
}

int sd_hess_finish(sd_hess *h, sd_cpu_pool *pool, double **ret, sd_diag *d)
{
    if (!h->diag_only) {
        int rc = fold(h, pool, d);
        if (rc != 0)
            return rc;
    }
    size_t na = h->diag_only ? (size_t)h->cols : (size_t)(h->cols * h->cols);
    double *out = malloc(na * sizeof *out);
    if (!out)
        return sd_diag_set(d, SD_ENOMEM, "hessian: out of memory");
    double scale = h->n > 0 ? 2.0 / (double)h->n : 0;
    int64_t c = h->cols;
    if (h->gacc) {
        int rc = sd_prune_gpu_acc_get(h->gacc, scale, out, d);
        if (rc != 0) {
            free(out);
            return rc;
        }
    } else if (h->diag_only) {
        for (size_t i = 0; i < na; i++)
            out[i] = h->acc[i] * scale;
    } else {
        for (int64_t i = 0; i < c; i++)
            for (int64_t j = i; j < c; j++)
                out[i * c + j] = out[j * c + i] = h->acc[i * c + j] * scale;
    }
    *ret = out;
    return 0;
}
