/* wanda: Wanda and magnitude scores, the mask through sd_nm_mask_from_scores, and zeroing —
 * rows in blocks over the job's CPU pool (rows are independent: the result does not depend on
 * the thread count). */
#include "prune/wanda.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/nm_format.h"

#define WANDA_BLOCK 16 /* rows scored at a time per thread */

typedef struct wanda_ctx {
    float *W; /* [rows, cols] */
    int64_t cols;
    const double *sq; /* [cols] sqrt(xsq), or NULL (magnitude) */
    int n, m;
    uint32_t *keep; /* [rows, cols/32] */
    float *scores;  /* [threads, WANDA_BLOCK, cols] */
} wanda_ctx;

static void wanda_block(const wanda_ctx *c, int64_t r0, int64_t nr, float *sc)
{
    int64_t cols = c->cols, words = cols / 32;
    float *W = c->W + r0 * cols;
    uint32_t *keep = c->keep + r0 * words;
    if (c->sq) {
        for (int64_t r = 0; r < nr; r++)
            for (int64_t j = 0; j < cols; j++)
                sc[r * cols + j] = (float)(fabs((double)W[r * cols + j]) * c->sq[j]);
    } else {
        for (int64_t i = 0; i < nr * cols; i++)
            sc[i] = fabsf(W[i]); /* = (float)fabs((double)W[i]) */
    }
    /* the shape and pattern were checked up front: this cannot fail */
    sd_nm_mask_from_scores(sc, nr, cols, c->n, c->m, keep, NULL);
    for (int64_t w = 0; w < nr * (cols / 32); w++)
        for (uint32_t x = ~keep[w]; x; x &= x - 1)
            W[32 * w + __builtin_ctz(x)] = 0;
}

static void wanda_rows(void *ctx, int64_t begin, int64_t end, int tid)
{
    const wanda_ctx *c = ctx;
    float *sc = c->scores + (int64_t)tid * WANDA_BLOCK * c->cols;
    for (int64_t r = begin; r < end; r += WANDA_BLOCK)
        wanda_block(c, r, end - r < WANDA_BLOCK ? end - r : WANDA_BLOCK, sc);
}

int sd_wanda_prune_pool(sd_cpu_pool *pool, float *W, int64_t rows, int64_t cols, const double *xsq, int n,
                        int m, uint32_t *keep, sd_diag *d)
{
    if (rows <= 0 || cols <= 0 || cols % 32)
        return sd_diag_set(d, SD_EINVAL, "wanda: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
    int rc = sd_nm_pattern_check(n, m, d);
    if (rc != 0)
        return rc;
    int threads = sd_cpu_pool_threads(pool);
    wanda_ctx c = {.W = W, .cols = cols, .n = n, .m = m, .keep = keep};
    double *sq = xsq ? malloc((size_t)cols * sizeof *sq) : NULL;
    c.scores = malloc((size_t)threads * WANDA_BLOCK * (size_t)cols * sizeof *c.scores);
    if (!c.scores || (xsq && !sq)) {
        free(sq);
        free(c.scores);
        return sd_diag_set(d, SD_ENOMEM, "wanda: out of memory for [%lld, %lld] scores", (long long)rows,
                           (long long)cols);
    }
    for (int64_t j = 0; xsq && j < cols; j++)
        sq[j] = sqrt(xsq[j] > 0 ? xsq[j] : 0);
    c.sq = sq;
    sd_cpu_pool_run(pool, rows, WANDA_BLOCK, wanda_rows, &c);
    free(sq);
    free(c.scores);
    return 0;
}

int sd_wanda_prune(float *W, int64_t rows, int64_t cols, const double *xsq, int n, int m, uint32_t *keep,
                   sd_diag *d)
{
    return sd_wanda_prune_pool(NULL, W, rows, cols, xsq, n, m, keep, d);
}
